"""The consistent cut of a plan that :meth:`oop.plan.executor.Executor.checkpoint` takes.

It lives here, below the executor, so that :mod:`oop.checkpoint` can rebuild a cut
from disk without importing the plan package (the executor imports it from here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Checkpoint"]


@dataclass
class Checkpoint:
    """A consistent cut of a plan: per-operator snapshots keyed by node name.

    ``metrics`` holds each operator's :meth:`~oop.metrics.OperatorMetrics.snapshot`
    (by node name), so a resumed run reports totals over the whole input.
    """

    rounds: int
    states: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
