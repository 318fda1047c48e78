"""The output order of AdaptWID: by window, then by group code (:func:`window_code_order`).

A punctuation's closed windows leave as one batch whose rows come window by window
(``end`` non-decreasing), each window's groups in the order of the eager store's
slots and the lazy buffer's blocks -- an order that depends on which groups were eager
or lazy. :func:`window_code_order` gives the permutation to (window, group code) order,
the order WID emits and the one a run on key partitions (:mod:`oop.adapt.threaded`)
reproduces. Each window holds a group at most once, so within a window the codes are
distinct: a scatter into a scratch array indexed by code and a sweep over the window's
code range order them in O(rows + range) -- no comparison sort unless a window's codes
are sparse (range > 8 x rows: a sort of that window, O(rows log rows)).
:func:`window_code_order_reference` is the obviously correct version (a stable sort).
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["window_code_order", "window_code_order_reference"]


@nb.njit(cache=True, nogil=True)
def window_code_order(end: np.ndarray, gids: np.ndarray,
                      scratch: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(order, moved)``: ``order`` puts the rows in (``end``, ``gids``) order; ``moved``
    False when they are in it already. ``end`` non-decreasing, ``gids`` distinct within
    equal ``end``, ``scratch`` int64 of length > max(gids), all -1 (left all -1).
    O(rows + code range per window)."""
    n = gids.shape[0]
    out = np.empty(n, np.int64)
    moved = False
    i = 0
    while i < n:
        j = i
        lo = gids[i]
        hi = gids[i]
        ordered = True
        while j < n and end[j] == end[i]:
            g = gids[j]
            if j > i and g < gids[j - 1]:
                ordered = False
            lo = min(lo, g)
            hi = max(hi, g)
            j += 1
        if ordered:
            for k in range(i, j):
                out[k] = k
        elif hi - lo + 1 > 8 * (j - i):  # sparse codes: sort this window
            moved = True
            sub = np.argsort(gids[i:j])
            for k in range(j - i):
                out[i + k] = i + sub[k]
        else:
            moved = True
            for k in range(i, j):
                scratch[gids[k]] = k
            o = i
            for g in range(lo, hi + 1):
                if scratch[g] >= 0:
                    out[o] = scratch[g]
                    scratch[g] = -1
                    o += 1
        i = j
    return out, moved


def window_code_order_reference(end: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Obviously correct :func:`window_code_order`: a stable sort by (end, gid)."""
    return np.lexsort((gids, end)).astype(np.int64)
