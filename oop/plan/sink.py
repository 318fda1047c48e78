"""The collecting sink: the end of every plan run from Python.

:class:`Collect` keeps the output batches and the punctuations in arrival
order (with the number of output rows that preceded each punctuation, so
tests can check that no row arrived after a punctuation that excluded it).
Its collected output is the run's result, not operator state: it reports no
state, and its snapshot holds no rows (a checkpoint must not hold output), so
a run resumed from a checkpoint collects only the rows produced after the cut.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from oop.operators.base import Operator
from oop.stream.elements import Element

__all__ = ["Collect"]


class Collect(Operator):
    """Collects batches and punctuations of its single input."""

    def __init__(self, name: str = "sink") -> None:
        super().__init__(name)
        self.batches: list[pa.RecordBatch] = []
        self.punctuations: list[tuple[int, Element]] = []
        self.rows = 0
        self.rows_before = 0  # after a resume: rows the checkpointed run had collected

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.batches.append(batch)
        self.rows += batch.num_rows
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        self.punctuations.append((self.rows, punctuation))
        return []

    def table(self) -> pa.Table:
        assert self.output is not None
        if not self.batches:
            return self.output.schema.empty_table()
        return pa.Table.from_batches(self.batches, schema=self.batches[0].schema)

    def snapshot(self) -> Any:
        """The end-of-input bookkeeping only: the rows collected so far are output."""
        return {**super().snapshot(), "rows_before": self.rows_before + self.rows}

    def restore(self, state: Any) -> None:
        """Start collecting afresh: the resumed run's Result holds the rows after the cut."""
        super().restore(state)
        self.batches = []
        self.punctuations = []
        self.rows = 0
        self.rows_before = int(state.get("rows_before", 0))
