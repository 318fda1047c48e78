"""The result of running a plan: output table, punctuations, metrics, late streams."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from oop.metrics import OperatorMetrics
from oop.plan.executor import Checkpoint
from oop.stream.elements import Element

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Result"]


@dataclass
class Result:
    """What :meth:`oop.Stream.run` returns.

    * ``table`` -- the output rows in emission order;
    * ``punctuations`` -- ``(rows_before, punctuation)`` pairs in emission order;
    * ``metrics`` -- per-operator :class:`~oop.metrics.OperatorMetrics`, by name;
    * ``late`` -- late/invalid rows routed by ``side_output`` policies, by operator name;
    * ``wall_s`` -- wall time of the run;
    * ``checkpoint`` -- set when the run was stopped early (``stop_after_rounds``);
    * ``sources`` -- names of the source operators.
    """

    table: pa.Table
    punctuations: list[tuple[int, Element]]
    metrics: dict[str, OperatorMetrics]
    late: dict[str, pa.Table] = field(default_factory=dict)
    wall_s: float = 0.0
    checkpoint: Checkpoint | None = None
    sources: tuple[str, ...] = ()
    outcome: Any = None  # a checkpointed sink run's oop.plan.job.JobOutcome

    def to_pandas(self) -> "pd.DataFrame":
        return self.table.to_pandas()

    def to_parquet(self, path: str | Path) -> None:
        """Write the output rows to one Parquet file."""
        pq.write_table(self.table, str(path))

    @property
    def tuples_in(self) -> int:
        """Tuples that entered the plan at its sources."""
        return sum(self.metrics[name].tuples_in for name in self.sources)

    @property
    def late_total(self) -> int:
        """Late tuples counted (dropped or routed) anywhere in the plan."""
        return sum(m.late_total for m in self.metrics.values())

    def metrics_dict(self) -> dict[str, Any]:
        return {name: m.as_dict() for name, m in self.metrics.items()}

    def metrics_json(self, indent: int = 2) -> str:
        return json.dumps(self.metrics_dict(), indent=indent, default=str)
