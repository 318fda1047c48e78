"""AdaptWID's Bucket helpers: the (row, window id) pairs of window-id ranges (004 §6.1.2).

A tuple at time ``t`` belongs to the windows ``[lo, hi)`` of ``kind.wids(t)`` (Eq. 5.2,
clipped to the first open window); the Aggregate needs them as pairs -- one per (tuple,
window) -- to group lazy tuples into blocks, and as the sorted set of window ids a batch
touches, to start their extents. :func:`expand` is the compiled kernel,
:func:`expand_reference` its tuple-at-a-time reference.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.adapt.kernels.groupby import covered_windows_kernel

__all__ = ["expand", "expand_reference", "covered_windows"]


@njit(cache=True)
def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, wid) pairs for every row ``i`` and ``lo[i] <= wid < hi[i]`` (rows in order)."""
    n = lo.shape[0]
    total = 0
    for i in range(n):
        if hi[i] > lo[i]:
            total += hi[i] - lo[i]
    rows = np.empty(total, np.int64)
    ws = np.empty(total, np.int64)
    k = 0
    for i in range(n):
        for w in range(lo[i], hi[i]):
            rows[k] = i
            ws[k] = w
            k += 1
    return rows, ws


def covered_windows(lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """Sorted distinct window ids in ``[lo[i], hi[i])`` over all rows (None: span too wide)."""
    if len(lo) == 0:
        return np.zeros(0, np.int64)
    w0, w1 = int(lo.min()), int(hi.max())
    if w1 - w0 > 4 * len(lo) + 1024:
        return None
    return covered_windows_kernel(lo, hi, w0, w1)


def expand_reference(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`expand`."""
    rows, ws = [], []
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        for w in range(a, b):
            rows.append(i)
            ws.append(w)
    return np.asarray(rows, np.int64), np.asarray(ws, np.int64)
