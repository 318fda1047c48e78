"""A buffer of rows kept sorted by a progressing attribute (shared by the IOP baselines).

In-order processing buffers tuples until their turn comes: Merge waits for
the slowest input, BSort keeps ``n`` tuples, a slack buffer keeps ``d`` time
units, the reorder ring keeps results whose predecessors are missing. All
of them hold *rows*; this module holds them columnar: one ``pa.Table`` plus
the int64 times of its rows, sorted by ``(time, arrival)``.

Every operation works on whole batches (concatenate, ``take``); the cost of a
batch is O(pool + batch) row copies plus a stable sort -- never per-tuple
Python. ``nbytes`` is tracked so ``state_size()`` stays O(1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["RowPool", "to_batches", "EMPTY_I64"]

EMPTY_I64 = np.zeros(0, dtype=np.int64)


def to_batches(table: pa.Table) -> list[pa.RecordBatch]:
    """The non-empty RecordBatches of ``table`` (one when it is a single chunk)."""
    if table.num_rows == 0:
        return []
    return [b for b in table.combine_chunks().to_batches() if b.num_rows]


class RowPool:
    """Rows and their times; ``times`` ascending, ties in arrival order.

    ``combined(batch, times)`` returns the pool followed by a new batch as one
    table (pool rows get indices ``0..len-1``, batch rows ``len..``) so a
    kernel can pick indices; ``replace(table, idx, times)`` keeps those rows.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.table = schema.empty_table()
        self.times = EMPTY_I64
        self.nbytes = 0

    def __len__(self) -> int:
        return int(self.times.shape[0])

    def combined(self, batch: pa.RecordBatch | None, times: np.ndarray | None) -> tuple[pa.Table, np.ndarray]:
        """Pool rows then ``batch`` rows, as one table and one times array. O(pool + batch)."""
        if batch is None or batch.num_rows == 0:
            return self.table, self.times
        t = pa.Table.from_batches([batch], schema=self.schema)
        if len(self) == 0:
            return t, times  # type: ignore[return-value]
        return pa.concat_tables([self.table, t]), np.concatenate([self.times, times])  # type: ignore[list-item]

    def replace(self, table: pa.Table, idx: np.ndarray, times: np.ndarray) -> None:
        """Keep ``table.take(idx)`` (``times`` are their times, already in sorted order)."""
        if len(idx) == 0:
            self.table = self.schema.empty_table()
            self.times = EMPTY_I64
            self.nbytes = 0
            return
        kept = table.take(pa.array(idx, pa.int64())).combine_chunks()
        self.table = kept
        self.times = np.ascontiguousarray(times, dtype=np.int64)
        self.nbytes = int(kept.nbytes)

    def snapshot(self) -> dict[str, Any]:
        return {"table": self.table, "times": self.times.copy()}

    def restore(self, state: dict[str, Any]) -> None:
        self.table = state["table"]
        self.times = np.array(state["times"], dtype=np.int64)  # a copy, never the snapshot's
        self.nbytes = int(self.table.nbytes)

    def _check(self) -> None:
        assert self.table.num_rows == len(self.times), (self.table.num_rows, len(self.times))
        if len(self.times) > 1:
            assert bool(np.all(self.times[1:] >= self.times[:-1])), "pool times not sorted"


def take_batches(table: pa.Table, idx: np.ndarray) -> list[pa.RecordBatch]:
    """``table.take(idx)`` as RecordBatches (nothing when ``idx`` is empty)."""
    if len(idx) == 0:
        return []
    return to_batches(table.take(pa.array(idx, pa.int64())))
