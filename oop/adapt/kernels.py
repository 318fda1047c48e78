"""Compiled kernels of AdaptWID (004 §6.3), each beside a tuple-at-a-time reference.

* :func:`group_pairs` -- the group-by of the Aggregate: order ``(window id,
  group)`` pairs by window id, then group, keeping arrival order inside a
  segment (what a stable sort on ``(wid, gid)`` gives), and return the
  segment starts. Counting sort on the window ids (few per batch) and, per
  window, first-occurrence slots in a dense scratch array over group codes,
  so only the *distinct* groups of a window are sorted:
  O(pairs + segments log segments) instead of O(pairs log pairs).
* :func:`touch_groups` -- a batch's ``winVol[g, source] += 1`` per tuple, the
  distinct groups it touched and which of them were not live before: O(n).
* :func:`covered_windows_kernel` -- the distinct window ids a batch's tuples
  fall into (to start their extents' ``wed``): O(sum(hi - lo) + span).
* :func:`segment_tupcnt` -- ``tupcnt`` per partial and source: rows of each
  segment whose last window is this one, by source: O(n).
* :func:`bin_order` -- stable counting sort of buffered rows by bin
  (``gid % n_bins``) for :class:`~oop.adapt.buffer.LazyBuffer`: O(n + bins).

>>> import numpy as np
>>> order, starts = group_pairs(np.array([5, 4, 5, 4, 5]), np.array([2, 7, 1, 7, 2]),
...                             np.full(8, -1, np.int64))
>>> order.tolist(), starts.tolist()
([1, 3, 2, 0, 4], [0, 2, 3])
>>> order, cuts = bin_order(np.array([3, 4, 6, 1], np.int32), 2)
>>> order.tolist(), cuts.tolist()
([1, 2, 0, 3], [0, 2, 4])
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["group_pairs", "group_pairs_reference", "bin_order", "bin_order_reference",
           "touch_groups", "touch_groups_reference", "covered_windows_kernel",
           "covered_windows_reference", "segment_tupcnt", "segment_tupcnt_reference"]


@njit(cache=True)
def group_pairs(ws: np.ndarray, gs: np.ndarray, scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order of pairs ``(ws[i], gs[i])`` sorted by (wid, gid), stable; segment starts.

    ``scratch``: int64 array of length > max(gs), all -1; it is left all -1.
    """
    n = ws.shape[0]
    order = np.empty(n, np.int64)
    if n == 0:
        return order, np.zeros(0, np.int64)
    w0 = ws[0]
    w1 = ws[0]
    for i in range(n):
        if ws[i] < w0:
            w0 = ws[i]
        if ws[i] > w1:
            w1 = ws[i]
    nw = w1 - w0 + 1
    # counting sort by wid (stable)
    wcount = np.zeros(nw + 1, np.int64)
    for i in range(n):
        wcount[ws[i] - w0 + 1] += 1
    for k in range(nw):
        wcount[k + 1] += wcount[k]
    byw = np.empty(n, np.int64)
    pos = wcount[:nw].copy()
    for i in range(n):
        k = ws[i] - w0
        byw[pos[k]] = i
        pos[k] += 1
    seg_starts = np.empty(n, np.int64)
    n_seg = 0
    for k in range(nw):
        a = wcount[k]
        b = wcount[k + 1]
        if a == b:
            continue
        # distinct groups of this window, in first-occurrence order, with their row counts
        uniq = np.empty(b - a, np.int64)
        cnt = np.empty(b - a, np.int64)
        nu = 0
        for j in range(a, b):
            g = gs[byw[j]]
            s = scratch[g]
            if s < 0:
                scratch[g] = nu
                uniq[nu] = g
                cnt[nu] = 1
                nu += 1
            else:
                cnt[s] += 1
        srt = np.argsort(uniq[:nu])
        # slot -> start position of its segment in the output
        start_of = np.empty(nu, np.int64)
        p = a
        for r in range(nu):
            u = srt[r]
            start_of[u] = p
            seg_starts[n_seg] = p
            n_seg += 1
            p += cnt[u]
        for j in range(a, b):
            i = byw[j]
            s = scratch[gs[i]]
            order[start_of[s]] = i
            start_of[s] += 1
        for r in range(nu):
            scratch[uniq[r]] = -1
    return order, seg_starts[:n_seg].copy()


def group_pairs_reference(ws: np.ndarray, gs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`group_pairs` (a stable sort on (wid, gid))."""
    idx = sorted(range(len(ws)), key=lambda i: (int(ws[i]), int(gs[i]), i))
    starts = [j for j in range(len(idx))
              if j == 0 or (ws[idx[j]], gs[idx[j]]) != (ws[idx[j - 1]], gs[idx[j - 1]])]
    return np.asarray(idx, np.int64), np.asarray(starts, np.int64)


@njit(cache=True)
def bin_order(gids: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of rows by bin ``gid % n_bins`` and the bin cuts (length ``n_bins + 1``)."""
    n = gids.shape[0]
    cuts = np.zeros(n_bins + 1, np.int64)
    for i in range(n):
        cuts[gids[i] % n_bins + 1] += 1
    for k in range(n_bins):
        cuts[k + 1] += cuts[k]
    pos = cuts[:n_bins].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        k = gids[i] % n_bins
        order[pos[k]] = i
        pos[k] += 1
    return order, cuts


def bin_order_reference(gids: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`bin_order`."""
    bins: list[list[int]] = [[] for _ in range(n_bins)]
    for i, g in enumerate(gids.tolist()):
        bins[g % n_bins].append(i)
    cuts = [0]
    for b in bins:
        cuts.append(cuts[-1] + len(b))
    return np.asarray([i for b in bins for i in b], np.int64), np.asarray(cuts, np.int64)


@njit(cache=True)
def touch_groups(wv: np.ndarray, gids: np.ndarray, src: np.ndarray,
                 scratch: np.ndarray, mask: np.int32) -> tuple[np.ndarray, np.ndarray]:
    """``wv[gids[i], src[i]] += 1`` for every row; (distinct groups in first-occurrence
    order, born: the group's winVol, read through ``mask``, was all zero before).
    ``scratch`` as in :func:`group_pairs`.
    """
    n = gids.shape[0]
    S = wv.shape[1]
    ug = np.empty(n, np.int64)
    born = np.empty(n, np.bool_)
    nu = 0
    for i in range(n):
        g = gids[i]
        if scratch[g] < 0:
            scratch[g] = nu
            ug[nu] = g
            alive = False
            for k in range(S):
                if wv[g, k] & mask != 0:
                    alive = True
            born[nu] = not alive
            nu += 1
        wv[g, src[i]] += 1
    for j in range(nu):
        scratch[ug[j]] = -1
    return ug[:nu].copy(), born[:nu].copy()


def touch_groups_reference(wv: np.ndarray, gids: np.ndarray, src: np.ndarray,
                           mask: int) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`touch_groups`."""
    seen: dict[int, bool] = {}
    for g, k in zip(gids.tolist(), src.tolist()):
        if g not in seen:
            seen[g] = not any(int(x) & mask for x in wv[g])
        wv[g, k] += 1
    return np.asarray(list(seen), np.int64), np.asarray(list(seen.values()), bool)


@njit(cache=True)
def covered_windows_kernel(lo: np.ndarray, hi: np.ndarray, w0: int, w1: int) -> np.ndarray:
    """Sorted distinct ``w`` with ``lo[i] <= w < hi[i]`` for some ``i``; all in ``[w0, w1)``."""
    mark = np.zeros(max(w1 - w0, 0), np.bool_)
    for i in range(lo.shape[0]):
        for w in range(lo[i], hi[i]):
            mark[w - w0] = True
    out = np.empty(mark.shape[0], np.int64)
    k = 0
    for j in range(mark.shape[0]):
        if mark[j]:
            out[k] = w0 + j
            k += 1
    return out[:k].copy()


def covered_windows_reference(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`covered_windows_kernel`."""
    return np.asarray(sorted({w for a, b in zip(lo.tolist(), hi.tolist()) for w in range(a, b)}),
                      np.int64)


@njit(cache=True)
def segment_tupcnt(starts: np.ndarray, src: np.ndarray, is_last: np.ndarray,
                   n_sources: int) -> np.ndarray:
    """(segments, sources) int32: rows ``i`` of segment ``j`` with ``is_last[i]``, by ``src[i]``."""
    n = src.shape[0]
    m = starts.shape[0]
    out = np.zeros((m, n_sources), np.int32)
    for j in range(m):
        e = starts[j + 1] if j + 1 < m else n
        for i in range(starts[j], e):
            if is_last[i]:
                out[j, src[i]] += 1
    return out


def segment_tupcnt_reference(starts: np.ndarray, src: np.ndarray, is_last: np.ndarray,
                             n_sources: int) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`segment_tupcnt`."""
    out = np.zeros((len(starts), n_sources), np.int32)
    bounds = list(starts.tolist()) + [len(src)]
    for j in range(len(starts)):
        for i in range(bounds[j], bounds[j + 1]):
            if is_last[i]:
                out[j, int(src[i])] += 1
    return out
