"""Group-bys over AdaptWID's group codes (004 §6.3.4.2), each beside its reference.

* :func:`group_pairs` -- the group-by of the Aggregate: order ``(window id, group)``
  pairs by window id, then group, keeping arrival order inside a segment (what a stable
  sort on ``(wid, gid)`` gives), and return the segment starts. Counting sort on the
  window ids (few per batch) and, per window, first-occurrence slots in a dense scratch
  array over group codes, so only the *distinct* groups of a window are sorted:
  O(pairs + segments log segments) instead of O(pairs log pairs).
* :func:`segment_tupcnt` -- ``tupcnt`` per partial and source (004 §6.3.4.2, "Processing
  Tuples" 3.2): rows of each segment whose last window is this one, by source: O(n).
* :func:`covered_windows_kernel` -- the distinct window ids a batch's tuples fall into
  (to start their extents' ``wed``, 004 §6.3.4.1): O(sum(hi - lo) + span).
* :func:`transient_slots` -- dense slots for the groups of the buffered tuples a
  punctuation closes (004 Fig. 6-18's temporary table ``T``).
* :func:`match_groups` -- the groups of one block found in another (a transitional
  group's partial merged with its buffered tuples' aggregate, 004 Fig. 6-18).

They hold no state and see no punctuation: the caller passes the window ids (the
Bucket's output) and the group codes; scratch arrays are left as they came.

>>> import numpy as np
>>> order, starts = group_pairs(np.array([5, 4, 5, 4, 5]), np.array([2, 7, 1, 7, 2]),
...                             np.full(8, -1, np.int64))
>>> order.tolist(), starts.tolist()
([1, 3, 2, 0, 4], [0, 2, 3])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.adapt.kernels.common import _clear, _first_seen


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
def transient_slots(gid, sel, scratch, sort):  # type: ignore[no-untyped-def]
    """Dense slots for the rows with ``sel[i] != 0`` (the buffered tuples with a closing
    window): returns ``(slot per row (-1: not selected), the distinct groups)`` so
    ``groups[slot[i]] == gid[i]``; groups sorted when ``sort``, else in first-occurrence
    order. ``scratch`` (int64 over group codes, all -1) is left all -1. O(n (+ k log k))
    for k distinct groups."""
    n = gid.shape[0]
    ug = np.empty(n, np.int64)
    nu = 0
    for i in range(n):
        if sel[i] != 0:
            nu = _first_seen(scratch, gid[i], ug, nu)
    ug = ug[:nu]
    order = np.argsort(ug) if sort else np.arange(nu)
    rank = np.empty(nu, np.int64)
    for j in range(nu):
        rank[order[j]] = j
    slot = np.empty(n, np.int64)
    for i in range(n):
        slot[i] = rank[scratch[gid[i]]] if sel[i] != 0 else -1
    _clear(scratch, ug, nu)
    return slot, ug[order]


def transient_slots_reference(gid: np.ndarray, sel: np.ndarray,
                              sort: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`transient_slots`."""
    groups = list(dict.fromkeys(int(g) for g, s in zip(gid.tolist(), sel.tolist()) if s))
    if sort:
        groups.sort()
    at = {g: j for j, g in enumerate(groups)}
    slot = [at[int(g)] if s else -1 for g, s in zip(gid.tolist(), sel.tolist())]
    return np.asarray(slot, np.int64), np.asarray(groups, np.int64)


@njit(cache=True)
def match_groups(a, b, scratch):  # type: ignore[no-untyped-def]
    """For each group code ``b[j]``: its position in ``a`` or -1 (``a``, ``b``: distinct
    codes, any order). ``scratch`` (int64 over group codes, all -1) is left all -1. Returns
    ``(positions, how many found)``. O(|a| + |b|)."""
    for i in range(a.shape[0]):
        scratch[a[i]] = i
    pos = np.empty(b.shape[0], np.int64)
    found = 0
    for j in range(b.shape[0]):
        pos[j] = scratch[b[j]]
        if pos[j] >= 0:
            found += 1
    for i in range(a.shape[0]):
        scratch[a[i]] = -1
    return pos, found


def match_groups_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`match_groups`' positions."""
    at = {int(g): i for i, g in enumerate(a.tolist())}
    return np.asarray([at.get(int(g), -1) for g in b.tolist()], np.int64)
