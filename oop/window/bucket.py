"""Bucket: tag each tuple with the range of window ids it belongs to (004 §6.1.3.1, Fig. 6-2).

What it computes: for every tuple, ``[wid_lo, wid_hi)`` from the window
kind's ``wids()`` (004 Eq. 5.3 with ``origin``; see :mod:`oop.window.kinds`),
appended as two int64 columns. For row-based kinds the Bucket numbers the
rows in arrival order first (``row`` = 0, 1, 2, ...; for partitioned rows,
the rank within the tuple's partition).

On a tuple: O(1) arithmetic, no state for time kinds (CF windows); a row
counter (one per partition for PA) for row kinds (FCF, backward context).
On a punctuation ``P(time, v)``: forwards it, and adds ``P("wid", w)`` with
``w = first_open(v)`` -- every window ``< w`` is complete (Fig. 6-2's
``processPunctuation``). Row kinds punctuate ``wid`` themselves after each
batch (every row before the counter has arrived). Purges: nothing.
Cost: one vectorized pass per batch.

:class:`BucketLogic` is the same logic without the operator shell; the fused
window operators (:mod:`oop.window.aggregate`) embed it so the tags never
have to be materialized as Arrow columns on the hot path.

>>> import pyarrow as pa
>>> from oop.window.kinds import Sliding
>>> b = BucketLogic(Sliding(10, 5))
>>> lo, hi = b.tag(pa.record_batch({"ts": [0, 7]}), np.array([0, 7]))
>>> lo.tolist(), hi.tolist(), b.first_open(10)
([0, 1], [2, 3], 2)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from oop.window.kernels import rank_in_partition
from oop.window.kinds import WindowKind

__all__ = ["BucketLogic"]


class BucketLogic:
    """wids() of a resolved window kind, plus the row counters of row-based kinds."""

    def __init__(self, kind: WindowKind) -> None:
        self.kind = kind
        self.rows_seen = 0
        self.counters = np.zeros(16, np.int64)  # per-partition counters (PA)

    def positions(self, codes: np.ndarray | None, n: int) -> np.ndarray:
        """Arrival positions of the next ``n`` rows (per partition for PA)."""
        if self.kind.partitioned:
            assert codes is not None
            need = int(codes.max()) + 1 if n else 0
            if need > self.counters.shape[0]:
                grown = np.zeros(max(need, 2 * self.counters.shape[0]), np.int64)
                grown[: self.counters.shape[0]] = self.counters
                self.counters = grown
            pos = rank_in_partition(codes, self.counters)
        else:
            pos = np.arange(self.rows_seen, self.rows_seen + n, dtype=np.int64)
        self.rows_seen += n
        return pos

    def tag(self, batch: pa.RecordBatch, times: np.ndarray,
            codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(wid_lo, wid_hi)`` of every row. Cost: O(n) vectorized."""
        if self.kind.row_based:
            return self.kind.wids(self.positions(codes, batch.num_rows))
        return self.kind.wids(times)

    def first_open(self, bound: int) -> int:
        return self.kind.first_open(bound)

    def snapshot(self) -> dict[str, Any]:
        return {"rows": self.rows_seen, "counters": self.counters.copy()}

    def restore(self, s: dict[str, Any]) -> None:
        self.rows_seen = s["rows"]
        self.counters = s["counters"].copy()
