"""Compiled kernels of AdaptWID (004 §6.3), each beside a tuple-at-a-time reference.

* :func:`group_pairs` -- the group-by of the Aggregate: order ``(window id,
  group)`` pairs by window id, then group, keeping arrival order inside a
  segment (what a stable sort on ``(wid, gid)`` gives), and return the
  segment starts. Counting sort on the window ids (few per batch) and, per
  window, first-occurrence slots in a dense scratch array over group codes,
  so only the *distinct* groups of a window are sorted:
  O(pairs + segments log segments) instead of O(pairs log pairs).
* :func:`route_batch` -- the per-batch pass of AdaptWID: window clip / late, ``winVol[g,
  source] += 1`` per tuple, per-source high-watermarks, lazy -> eager by Cond. 6.9, and
  each row routed eager / lazy: O(n x sources);
* :func:`close_scan` -- the punctuation's pass over the lazy buffer: (row, closing window)
  pairs, expiry (winVol decrement), kept rows in bin order: O(rows + pairs);
* :func:`close_fold` -- the dense lazy close: :func:`close_scan` fused with the
  transient slots of the closing groups and the per-(window, group) tuple counts (a
  ``count`` lane, and every other aggregate's presence): one call per punctuation;
* :func:`settle_close` -- a punctuation's group bookkeeping in one call: winVol minus the
  popped partials' tupcnt, eager -> lazy (:func:`switch_down`), dead groups
  (:func:`count_dead`);
* :func:`count_dead` -- groups whose winVol reached 0 (they leave ``H``);
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

from oop.aggregates.moments import mom_update

__all__ = ["group_pairs", "group_pairs_reference", "bin_order", "bin_order_reference",
           "covered_windows_kernel",
           "covered_windows_reference", "segment_tupcnt", "segment_tupcnt_reference",
           "route_batch", "route_batch_reference", "dense_assign_slots_sel",
           "dense_assign_slots_sel_reference", "close_scan", "close_scan_reference", "count_dead",
           "count_dead_reference", "take_scan", "take_scan_reference", "switch_down",
           "switch_down_reference", "transient_slots", "transient_slots_reference",
           "match_groups", "match_groups_reference", "close_fold", "close_fold_reference",
           "settle_close", "settle_close_reference", "dense_pop_slots",
           "dense_pop_slots_reference", "dense_release", "dense_release_reference",
           "count_transitional", "count_transitional_reference"]


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
    return _bins_reference(bins)


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


# ---- the dense eager store's fold kernels (oop.adapt.dense) ------------------------------
# Every kernel folds each row i into the cells (w & mask, slot[i]) for lo[i] <= w < hi[i];
# rows with slot[i] < 0 are skipped (the batch's lazy and late rows: no gather needed).


@njit(cache=True)
def dense_fold_rows(pres, has_rows, tc, has_tc, last_w, slot, lo, hi, src, mask):  # type: ignore[no-untyped-def]
    """Presence ``rows += 1`` (if held), ``tupcnt[., ., src] += 1`` in the row's last window
    (if held), ``last_w[slot] = max(.., hi - 1)``. Returns cells of ``rows`` that became non-empty."""
    new = 0
    for i in range(lo.shape[0]):
        s = slot[i]
        if s < 0:  # not folded (a lazy or late row)
            continue
        # the same per-row fold as in the other slot kernel, kept inline: a shared njit
        # helper made the eager path 30% slower (the flags' branches no longer hoisted)
        if hi[i] - 1 > last_w[s]:
            last_w[s] = hi[i] - 1
        if has_tc:
            tc[(hi[i] - 1) & mask, s, src[i]] += 1
        if has_rows:
            for w in range(lo[i], hi[i]):
                r = w & mask
                if pres[r, s] == 0:
                    new += 1
                pres[r, s] += 1
    return new


@njit(cache=True)
def dense_last_w(last_w, slot, hi):  # type: ignore[no-untyped-def]
    """``last_w[slot] = max(.., hi - 1)`` (what :func:`dense_fold_rows` does when the store
    holds neither a rows nor a tupcnt lane)."""
    for i in range(hi.shape[0]):
        s = slot[i]
        if s >= 0 and hi[i] - 1 > last_w[s]:
            last_w[s] = hi[i] - 1


@njit(cache=True, inline="always")
def _fold_slot(valid, slot, i):  # type: ignore[no-untyped-def]
    """Row ``i``'s slot if it folds into a value lane: a valid value and a slot (not a
    lazy or late row); else -1."""
    return slot[i] if valid[i] else -1


@njit(cache=True)
def dense_fold_count(cnt, slot, lo, hi, mask, is_pres):  # type: ignore[no-untyped-def]
    """``count += 1``; returns cells that became non-empty when this lane is the presence lane."""
    new = 0
    for i in range(lo.shape[0]):
        s = slot[i]
        if s < 0:  # not folded (a lazy or late row)
            continue
        for w in range(lo[i], hi[i]):
            r = w & mask
            if is_pres and cnt[r, s] == 0:
                new += 1
            cnt[r, s] += 1
    return new


@njit(cache=True)
def dense_fold_sum(nn, sm, slot, lo, hi, x, valid, mask):  # type: ignore[no-untyped-def]
    for i in range(lo.shape[0]):
        s = _fold_slot(valid, slot, i)
        if s < 0:
            continue
        for w in range(lo[i], hi[i]):
            r = w & mask
            nn[r, s] += 1
            sm[r, s] += x[i]


@njit(cache=True)
def dense_fold_minmax(nn, m, slot, lo, hi, x, valid, mask, is_min):  # type: ignore[no-untyped-def]
    for i in range(lo.shape[0]):
        s = _fold_slot(valid, slot, i)
        if s < 0:
            continue
        v = x[i]
        for w in range(lo[i], hi[i]):
            r = w & mask
            cur = m[r, s]  # NaN is the greatest value (docs/semantics.md)
            if nn[r, s] == 0 or (is_min and (v < cur or (cur != cur and v == v))) or (
                    (not is_min) and (v > cur or (v != v and cur == cur))):
                m[r, s] = v
            nn[r, s] += 1


@njit(cache=True)
def dense_fold_var(n, mean, m2, slot, lo, hi, x, shift, valid, mask):  # type: ignore[no-untyped-def]
    """Each valid value, minus ``shift``, into its cells' ``(n, mean, M2)``
    (:func:`oop.aggregates.moments.mom_update`; the shift: :mod:`oop.aggregates.moments`)."""
    for i in range(lo.shape[0]):
        s = _fold_slot(valid, slot, i)
        if s < 0:
            continue
        v = np.float64(x[i] - shift)
        for w in range(lo[i], hi[i]):
            r = w & mask
            n[r, s], mean[r, s], m2[r, s] = mom_update(n[r, s], mean[r, s], m2[r, s], v)


@njit(cache=True)
def dense_fold_firstlast(nn, t, val, slot, lo, hi, x, valid, ts, mask, is_first):  # type: ignore[no-untyped-def]
    """Earliest (latest) valid tuple by (time, value) -- the tie rule of BlockAgg.reduce."""
    for i in range(lo.shape[0]):
        s = _fold_slot(valid, slot, i)
        if s < 0:
            continue
        v = x[i]
        tt = ts[i]
        for w in range(lo[i], hi[i]):
            r = w & mask
            if nn[r, s] == 0:
                take = True
            elif is_first:
                cur = val[r, s]
                take = tt < t[r, s] or (tt == t[r, s] and (v < cur or (cur != cur and v == v)))
            else:
                cur = val[r, s]
                take = tt > t[r, s] or (tt == t[r, s] and (v > cur or (v != v and cur == cur)))
            if take:
                t[r, s] = tt
                val[r, s] = v
            nn[r, s] += 1


def dense_fold_reference(fn: str, lanes: list[np.ndarray], slot: np.ndarray, lo: np.ndarray,
                         hi: np.ndarray, x: np.ndarray, valid: np.ndarray, ts: np.ndarray,
                         mask: int) -> None:
    """Tuple-at-a-time reference of the dense fold kernels for aggregate ``fn`` (in place).

    ``var``/``std`` lanes are rebuilt from the cell's values (two-pass formula), so the
    reference is independent of the kernel's update rule.
    """
    from oop.aggregates import get

    op = get(fn).value_op  # the state layout
    seen: dict[tuple[int, int], list[float]] = {}
    for i in range(len(lo)):
        s = int(slot[i])
        if s < 0:
            continue
        for w in range(int(lo[i]), int(hi[i])):
            r = w & mask
            if op == "rows":
                lanes[0][r, s] += 1
                continue
            if not valid[i]:
                continue
            v = x[i]
            if op == "sum":
                lanes[1][r, s] += v
            elif op in ("min", "max"):
                if lanes[0][r, s] == 0 or (v < lanes[1][r, s] if op == "min" else v > lanes[1][r, s]):
                    lanes[1][r, s] = v
            elif op == "sumsq":
                seen.setdefault((r, s), []).append(float(v))
            else:
                key = (int(ts[i]), v)
                cur = (int(lanes[1][r, s]), lanes[2][r, s])
                if lanes[0][r, s] == 0 or (key < cur if op == "first" else key > cur):
                    lanes[1][r, s], lanes[2][r, s] = key
            lanes[0][r, s] += 1
    for (r, s), vals in seen.items():
        a = np.asarray(vals)
        lanes[0][r, s] = len(a)
        lanes[1][r, s] = a.mean()
        lanes[2][r, s] = ((a - a.mean()) ** 2).sum()


@njit(cache=True)
def dense_count_new(slot_of, gids):  # type: ignore[no-untyped-def]
    """Distinct group codes of ``gids`` without a slot (``slot_of[g] < 0``). ``slot_of`` is
    left unchanged (marks are undone)."""
    k = 0
    for i in range(gids.shape[0]):
        g = gids[i]
        if slot_of[g] == -1:
            slot_of[g] = -2
            k += 1
    for i in range(gids.shape[0]):
        if slot_of[gids[i]] == -2:
            slot_of[gids[i]] = -1
    return k


@njit(cache=True)
def dense_assign_slots(slot_of, gid_of, last_w, gids, free, n_free, out, w_min):  # type: ignore[no-untyped-def]
    """``out[i]`` = the slot of ``gids[i]``, popping free slots (a stack of ``n_free``) for
    groups without one, in first-occurrence order. Returns the new ``n_free`` (the caller
    made sure enough slots are free)."""
    for i in range(gids.shape[0]):
        g = gids[i]
        s = slot_of[g]
        if s < 0:
            n_free -= 1
            s = free[n_free]
            slot_of[g] = s
            gid_of[s] = g
            last_w[s] = w_min
        out[i] = s
    return n_free


def dense_assign_slots_reference(slot_of: np.ndarray, gid_of: np.ndarray, last_w: np.ndarray,
                                 gids: np.ndarray, free: list[int], w_min: int) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`dense_assign_slots` (``free``: a Python stack)."""
    out = []
    for g in gids.tolist():
        if slot_of[g] < 0:
            s = free.pop()
            slot_of[g], gid_of[s], last_w[s] = s, g, w_min
        out.append(int(slot_of[g]))
    return np.asarray(out, np.int64)


@njit(cache=True, inline="always")
def _fdiv(d, s, inv):  # type: ignore[no-untyped-def]
    """``floor(d / s)`` for int64 ``d`` and ``s > 0`` (``inv = 1.0 / s``): a float multiply
    and one exact correction step instead of an integer division (for ``|d| < 2**52`` the
    float quotient is off by less than one; larger ``|d|`` take the integer division)."""
    if d >= 4503599627370496 or d <= -4503599627370496:
        return d // s
    q = np.int64(np.floor(d * inv))
    r = d - q * s
    if r < 0:
        q -= 1
    elif r >= s:
        q += 1
    return q


# ---- bookkeeping shared by the kernels below (inlined; each kernel's reference stays
# ---- self-contained, built from the Python helpers further down) -------------------------
@njit(cache=True, inline="always")
def _wid_span(t, origin, range_, slide, per, inv):  # type: ignore[no-untyped-def]
    """The Bucket of one tuple at time ``t``: window ids ``[lo, hi)`` with ``lo = floor((t -
    origin) / slide)``, ``hi = floor((t - origin + range) / slide)`` (004 Eq. 5.2). ``per``
    = ``range // slide`` when RANGE is a multiple of SLIDE (then ``hi = lo + per``, one
    division), else -1; ``inv = 1.0 / slide`` (:func:`_fdiv`)."""
    d = t - origin
    a = _fdiv(d, slide, inv)
    b = a + per if per > 0 else _fdiv(d + range_, slide, inv)
    return a, b


@njit(cache=True, inline="always")
def _span_consts(range_, slide):  # type: ignore[no-untyped-def]
    """:func:`_wid_span`'s ``per`` (windows per tuple when RANGE is k x SLIDE, else -1) and
    ``inv`` (``1.0 / slide``)."""
    return (range_ // slide if range_ % slide == 0 else -1), 1.0 / slide


@njit(cache=True, inline="always")
def _closing_span(t, origin, range_, slide, per, inv, old, fo):  # type: ignore[no-untyped-def]
    """A buffered tuple's windows ``[lo, hi)`` (:func:`_wid_span`) and those a punctuation
    closing ``[old, fo)`` completes: ``[max(lo, old), min(hi, fo))`` (empty if ``>=``)."""
    a, b = _wid_span(t, origin, range_, slide, per, inv)
    return a, b, (a if a > old else old), (b if b < fo else fo)


@njit(cache=True, inline="always")
def _source_offsets(hwm, skew_on):  # type: ignore[no-untyped-def]
    """Cond. 6.9's per-source offsets (``SourceOffsets.offsets()``): ``max(hwm) - hwm[K]``
    for every source seen (``hwm[K]`` > int64 min), 0 for the others; all 0 unless
    ``skew_on``. O(sources)."""
    S = hwm.shape[0]
    off = np.zeros(S, np.float64)
    top = np.int64(-9223372036854775807 - 1)
    for j in range(S):
        if hwm[j] > top:
            top = hwm[j]
    if skew_on:
        for j in range(S):
            if hwm[j] != np.int64(-9223372036854775807 - 1):
                off[j] = top - hwm[j]
    return off


@njit(cache=True, inline="always")
def _volume_skew(wv, g, vmask, range_f, off):  # type: ignore[no-untyped-def]
    """Group ``g``'s winVol summed over the sources and Cond. 6.9's skew term ``sum_K
    winVol[g, K] / range_f * off[K]`` (``theta = base + skew``). O(sources)."""
    vol = 0
    skew = 0.0
    for k in range(wv.shape[1]):
        c = wv[g, k] & vmask
        vol += c
        skew += c / range_f * off[k]
    return vol, skew


@njit(cache=True, inline="always")
def _is_alive(wv, g, vmask):  # type: ignore[no-untyped-def]
    """Whether group ``g`` has a tuple in some source's winVol (else it is not in ``H``)."""
    for k in range(wv.shape[1]):
        if wv[g, k] & vmask != 0:
            return True
    return False


@njit(cache=True, inline="always")
def _first_seen(scratch, g, out, n):  # type: ignore[no-untyped-def]
    """Distinct groups in first-occurrence order: the first time group ``g`` is seen
    (``scratch[g] < 0``) it gets position ``n`` (``scratch[g] = n``, ``out[n] = g``).
    Returns the new count of distinct groups."""
    if scratch[g] < 0:
        scratch[g] = n
        out[n] = g
        return n + 1
    return n


@njit(cache=True, inline="always")
def _clear(scratch, groups, n):  # type: ignore[no-untyped-def]
    """Leave ``scratch`` all -1 again after :func:`_first_seen` noted ``groups[:n]``."""
    for j in range(n):
        scratch[groups[j]] = -1


@njit(cache=True, inline="always")
def _expired_groups(gid, keep, scratch):  # type: ignore[no-untyped-def]
    """The distinct groups of the rows with ``keep[i]`` False, in first-occurrence order;
    ``scratch`` (int64 over group codes, all -1) is left all -1. O(n)."""
    gone = np.empty(gid.shape[0], np.int64)
    n = 0
    for i in range(gid.shape[0]):
        if not keep[i]:
            n = _first_seen(scratch, gid[i], gone, n)
    _clear(scratch, gone, n)
    return gone[:n].copy()


@njit(cache=True, inline="always")
def _bin_of(g, n_bins, pow2):  # type: ignore[no-untyped-def]
    """Bin ``g % n_bins`` of group code ``g`` (a mask when ``pow2``: ``n_bins`` a power of
    two, where ``g & (n_bins - 1) == g % n_bins`` for every int, negative ones too)."""
    return g & (n_bins - 1) if pow2 else g % n_bins


@njit(cache=True, inline="always")
def _bin_sort_kept(gid, keep, n_bins):  # type: ignore[no-untyped-def]
    """Stable counting sort of the rows with ``keep[i]`` by bin ``gid % n_bins``: returns
    ``(order, cuts)`` (``cuts``: ``n_bins + 1`` bin starts in ``order``). O(n + bins)."""
    pow2 = n_bins & (n_bins - 1) == 0
    cuts = np.zeros(n_bins + 1, np.int64)
    for i in range(gid.shape[0]):
        if keep[i]:
            cuts[_bin_of(gid[i], n_bins, pow2) + 1] += 1
    for b in range(n_bins):
        cuts[b + 1] += cuts[b]
    order = np.empty(cuts[n_bins], np.int64)
    pos = cuts[:n_bins].copy()
    for i in range(gid.shape[0]):
        if keep[i]:
            b = _bin_of(gid[i], n_bins, pow2)
            order[pos[b]] = i
            pos[b] += 1
    return order, cuts


def _bins_reference(bins: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows listed per bin -> ``(rows in bin order, bin cuts)`` (the references' sort)."""
    cuts = np.cumsum([0] + [len(b) for b in bins]).astype(np.int64)
    return np.asarray([i for b in bins for i in b], np.int64), cuts


def _source_offsets_reference(hwm: np.ndarray, skew_on: bool) -> list[int]:
    """Reference of :func:`_source_offsets`: newest seen high-watermark minus each seen one."""
    i64min = int(np.iinfo(np.int64).min)
    seen = [int(h) for h in hwm if int(h) != i64min]
    return [(max(seen) - int(h)) if (skew_on and int(h) != i64min) else 0 for h in hwm]


def _theta_reference(counts: list[int], off: list[int], base: float, range_f: float) -> float:
    """Cond. 6.9's ``theta = base + sum_K counts[K] / range_f * off[K]``."""
    return base + sum(c / range_f * float(o) for c, o in zip(counts, off))


# ---- AdaptWID's fused per-batch pass (oop.adapt.logic) ------------------------------------
#: row classes written by :func:`route_batch`
ROW_LATE, ROW_LAZY, ROW_EAGER = 0, 1, 2


@njit(cache=True)
def route_batch(gids, src, ts, geom, lo, hi, first_open, wv, scratch, vmask, mbit, monitor,
                forced_eager, base, range_f, skew_on, up, cls, hwm, out, lazy_idx):  # type: ignore[no-untyped-def]
    """One pass of AdaptWID's Bucket + monitoring + routing over a batch (004 §6.3.4).

    For every row ``i``: its window ids ``[lo[i], hi[i])`` (written; ``geom`` = (range,
    slide, origin): ``lo = floor((ts - origin) / slide)``, ``hi = floor((ts - origin +
    range) / slide)``, as ``Sliding.wids``), ``lo`` clipped to ``first_open``; a row with
    no open window left is late (``cls[i] = 0``). For the others: ``winVol[g, src] += 1`` and the
    per-source high-watermark ``hwm[src]`` (in place); then every *lazy* group the batch
    touched switches to eager when ``winVol > up * theta`` with Cond. 6.9's
    ``theta = base + sum_K winVol[g, K] / range_f * off[K]`` (``off[K]``: source K's
    offset to the earliest-arriving source, from ``hwm``; no skew term unless
    ``skew_on``) -- its flag ``mbit`` is set in ``wv[g, 0]``; finally ``cls[i]`` = 2 (eager: fold into partials) or 1 (lazy:
    buffer) by the group's flag after the switches. ``monitor`` False (forced modes):
    no winVol, every row eager iff ``forced_eager``.

    Writes ``out`` (int64[9]): late rows, lazy rows, eager rows, groups born (winVol was
    all zero), of them flagged eager, smallest ``lo`` and greatest ``hi - 1`` of the
    eager rows, then of all rows in time (empty: int64 max, min); ``lazy_idx[:lazy rows]``
    = the lazy rows' indices, in order. Returns the switched groups (first-occurrence order). ``scratch``
    (int64 over group codes, all -1) is left all -1. O(n x sources).
    """
    n = gids.shape[0]
    ug = np.empty(n if monitor else 0, np.int64)
    loc = np.empty(n if monitor else 0, np.int32)  # row -> its group's index in ug
    nu = 0
    n_late = 0
    n_born = 0
    n_born_e = 0
    wmin = np.int64(9223372036854775807)
    wmax = np.int64(-9223372036854775807 - 1)
    rng = geom[0]
    sl = geom[1]
    org = geom[2]
    per, inv = _span_consts(rng, sl)
    for i in range(n):
        lo[i], hi[i] = _wid_span(ts[i], org, rng, sl, per, inv)
        if lo[i] < first_open:
            lo[i] = first_open
        if lo[i] >= hi[i]:
            cls[i] = 0
            n_late += 1
            continue
        cls[i] = 1
        if lo[i] < wmin:
            wmin = lo[i]
        if hi[i] - 1 > wmax:
            wmax = hi[i] - 1
        k = src[i]
        if ts[i] > hwm[k]:
            hwm[k] = ts[i]
        if monitor:
            g = gids[i]
            u = scratch[g]
            if u < 0:
                u = nu
                nu = _first_seen(scratch, g, ug, nu)
                if not _is_alive(wv, g, vmask):
                    n_born += 1
                    if wv[g, 0] & mbit != 0:
                        n_born_e += 1
            loc[i] = u
            wv[g, k] += 1
    off = _source_offsets(hwm, skew_on)
    sw = np.empty(nu, np.int64)
    eflag = np.empty(nu, np.bool_)  # the touched groups' flags after the switches
    n_sw = 0
    for u in range(nu):
        g = ug[u]
        scratch[g] = -1
        if wv[g, 0] & mbit != 0:
            eflag[u] = True
            continue
        eflag[u] = False
        vol, skew = _volume_skew(wv, g, vmask, range_f, off)
        if vol > up * (base + skew):
            wv[g, 0] |= mbit
            eflag[u] = True
            sw[n_sw] = g
            n_sw += 1
    n_eager = 0
    n_lz = 0
    emin = np.int64(9223372036854775807)
    emax = np.int64(-9223372036854775807 - 1)
    for i in range(n):
        if cls[i] == 0:
            continue
        if monitor:
            e = eflag[loc[i]]  # a small local array: no second random access into wv
        else:
            e = forced_eager
        if not e:
            lazy_idx[n_lz] = i
            n_lz += 1
        else:
            cls[i] = 2
            n_eager += 1
            if lo[i] < emin:
                emin = lo[i]
            if hi[i] - 1 > emax:
                emax = hi[i] - 1
    out[0] = n_late
    out[1] = n - n_late - n_eager
    out[2] = n_eager
    out[3] = n_born
    out[4] = n_born_e
    out[5] = emin
    out[6] = emax
    out[7] = wmin
    out[8] = wmax
    return sw[:n_sw].copy()


def route_batch_reference(gids: np.ndarray, src: np.ndarray, ts: np.ndarray,
                          geom: tuple[int, int, int], first_open: int, wv: np.ndarray,
                          vmask: int, mbit: int,
                          monitor: bool, forced_eager: bool, base: float, range_f: float,
                          skew_on: bool, up: float, hwm: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, list[int],
                                     tuple[np.ndarray, np.ndarray]]:
    """Tuple-at-a-time reference of :func:`route_batch` (``wv``, ``hwm`` in place).

    Returns ``(cls, switched groups, out list, (lo, hi))``.
    """
    n = len(gids)
    rng, sl, org = geom
    lo = [(int(t) - org) // sl for t in ts]
    hi = [(int(t) - org + rng) // sl for t in ts]
    cls = np.zeros(n, np.int8)
    touched: list[int] = []
    born = born_e = 0
    los: list[int] = []
    his: list[int] = []
    for i in range(n):
        lo[i] = max(int(lo[i]), int(first_open))
        if lo[i] >= hi[i]:
            continue
        cls[i] = 1
        los.append(int(lo[i]))
        his.append(int(hi[i]) - 1)
        k = int(src[i])
        hwm[k] = max(int(hwm[k]), int(ts[i]))
        if monitor:
            g = int(gids[i])
            if g not in touched:
                touched.append(g)
                if all(int(x) & vmask == 0 for x in wv[g]):
                    born += 1
                    born_e += int(int(wv[g, 0]) & mbit != 0)
            wv[g, k] += 1
    off = _source_offsets_reference(hwm, skew_on)
    sw = []
    for g in touched:
        if int(wv[g, 0]) & mbit:
            continue
        counts = [int(x) & vmask for x in wv[g]]
        if sum(counts) > up * _theta_reference(counts, off, base, range_f):
            wv[g, 0] |= mbit
            sw.append(g)
    for i in range(n):
        if cls[i]:
            e = bool(int(wv[int(gids[i]), 0]) & mbit) if monitor else forced_eager
            cls[i] = 2 if e else 1
    n_late = int(np.count_nonzero(cls == 0))
    n_eager = int(np.count_nonzero(cls == 2))
    big, small = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)
    elo = [int(lo[i]) for i in range(n) if cls[i] == 2]
    ehi = [int(hi[i]) - 1 for i in range(n) if cls[i] == 2]
    out = [n_late, n - n_late - n_eager, n_eager, born, born_e,
           min(elo, default=big), max(ehi, default=small),
           min(los, default=big), max(his, default=small)]
    return cls, np.asarray(sw, np.int64), out, (np.asarray(lo, np.int64), np.asarray(hi, np.int64))


@njit(cache=True)
def dense_assign_slots_sel(slot_of, gid_of, last_w, gids, cls, want, free, n_free, out, w_min,
                           pres, has_rows, tc, has_tc, lo, hi, src, mask):  # type: ignore[no-untyped-def]
    """Slots and presence for the rows with ``cls[i] == want`` in one call (the batch's
    eager rows: no gather). First counts the distinct groups without a slot; if more
    than ``n_free``, returns ``(-(that count) - 1, 0)`` and changes nothing (the caller
    grows the slot axis and calls again). Else ``out[i]`` = the row's slot (-1 for the
    other rows), popping free slots in first-occurrence order, and does what
    :func:`dense_fold_rows` does for those rows; returns ``(new n_free, cells of rows
    that became non-empty)``."""
    k = 0
    for i in range(gids.shape[0]):
        if cls[i] == want and slot_of[gids[i]] == -1:
            slot_of[gids[i]] = -2
            k += 1
    if k:
        for i in range(gids.shape[0]):
            if slot_of[gids[i]] == -2:
                slot_of[gids[i]] = -1
    if k > n_free:
        return -k - 1, 0
    new = 0
    for i in range(gids.shape[0]):
        if cls[i] != want:
            out[i] = -1
            continue
        g = gids[i]
        s = slot_of[g]
        if s < 0:
            n_free -= 1
            s = free[n_free]
            slot_of[g] = s
            gid_of[s] = g
            last_w[s] = w_min
        out[i] = s
        # the same per-row fold as in the other slot kernel, kept inline: a shared njit
        # helper made the eager path 30% slower (the flags' branches no longer hoisted)
        if hi[i] - 1 > last_w[s]:
            last_w[s] = hi[i] - 1
        if has_tc:
            tc[(hi[i] - 1) & mask, s, src[i]] += 1
        if has_rows:
            for w in range(lo[i], hi[i]):
                r = w & mask
                if pres[r, s] == 0:
                    new += 1
                pres[r, s] += 1
    return n_free, new


def dense_assign_slots_sel_reference(slot_of: np.ndarray, gid_of: np.ndarray, last_w: np.ndarray,
                                     gids: np.ndarray, cls: np.ndarray, want: int,
                                     free: list[int], w_min: int) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`dense_assign_slots_sel`'s slots (enough free
    slots); its presence fold is :func:`dense_fold_rows` over the returned slots."""
    out = []
    for g, c in zip(gids.tolist(), cls.tolist()):
        if c != want:
            out.append(-1)
            continue
        if slot_of[g] < 0:
            s = free.pop()
            slot_of[g], gid_of[s], last_w[s] = s, g, w_min
        out.append(int(slot_of[g]))
    return np.asarray(out, np.int64)


@njit(cache=True)
def close_scan(gid, src, ts, range_, slide, origin, old, fo, wv, monitor, scratch, n_bins,
               pairs):  # type: ignore[no-untyped-def]
    """One pass over the lazy buffer at a punctuation closing windows ``[old, fo)`` (004 §6.3.4).

    For each buffered row with window range ``[lo, hi)`` (the Bucket: ``lo = floor((ts -
    origin) / slide)``, ``hi = floor((ts - origin + range) / slide)``): the (row, window)
    pairs for its closing windows ``max(lo, old) <= w < min(hi, fo)`` (``old`` int64 min:
    none closed before), whether ``w`` is the row's last window, and whether the row
    expires (``hi <= fo``: purged). With ``monitor``: ``winVol[g, src] -= 1`` per expired
    row. ``scratch`` (int64 over group codes, all -1) is left all -1. The kept rows are
    returned in bin order (``gid % n_bins``, stable: a counting sort) with the bin cuts,
    so the buffer is rebuilt binned by one gather per column. Each row's closing windows
    are also returned as a range ``[clo, chi)`` with ``sel`` = 2 where it is not empty
    (for a dense fold); the pairs are built only when ``pairs``.

    Returns ``(rows, ws, is_last, kept order, cuts, expired distinct groups, clo, chi,
    sel)``. O(rows + pairs + bins).
    """
    n = gid.shape[0]
    lo = np.empty(n, np.int64)
    hi = np.empty(n, np.int64)
    clo = np.empty(n, np.int64)
    chi = np.empty(n, np.int64)
    sel = np.zeros(n, np.int8)
    total = 0
    per, inv = _span_consts(range_, slide)
    for i in range(n):
        lo[i], hi[i], a, e = _closing_span(ts[i], origin, range_, slide, per, inv, old, fo)
        clo[i] = a
        chi[i] = e
        if e > a:
            total += e - a
            sel[i] = 2
    if not pairs:
        total = 0
    rows = np.empty(total, np.int64)
    ws = np.empty(total, np.int64)
    is_last = np.empty(total, np.bool_)
    keep = np.empty(n, np.bool_)
    gone = np.empty(n, np.int64)
    n_gone = 0
    k = 0
    for i in range(n):
        if pairs:
            for w in range(clo[i], chi[i]):
                rows[k] = i
                ws[k] = w
                is_last[k] = w == hi[i] - 1
                k += 1
        keep[i] = hi[i] > fo
        if not keep[i] and monitor:
            g = gid[i]
            wv[g, src[i]] -= 1
            n_gone = _first_seen(scratch, g, gone, n_gone)
    _clear(scratch, gone, n_gone)
    order, cuts = _bin_sort_kept(gid, keep, n_bins)
    return rows, ws, is_last, order, cuts, gone[:n_gone].copy(), clo, chi, sel


def close_scan_reference(gid: np.ndarray, src: np.ndarray, ts: np.ndarray, range_: int,
                         slide: int, origin: int, old: int, fo: int, wv: np.ndarray,
                         monitor: bool, n_bins: int, pairs: bool = True) -> tuple[np.ndarray, ...]:
    """Tuple-at-a-time reference of :func:`close_scan` (``wv`` in place)."""
    rows, ws, last, gone, clo, chi = [], [], [], [], [], []
    bins: list[list[int]] = [[] for _ in range(n_bins)]
    for i in range(len(gid)):
        d = int(ts[i]) - origin
        lo, hi = d // slide, (d + range_) // slide
        clo.append(max(lo, old))
        chi.append(min(hi, fo))
        for w in range(max(lo, old), min(hi, fo)) if pairs else ():
            rows.append(i)
            ws.append(w)
            last.append(w == hi - 1)
        if hi > fo:
            bins[int(gid[i]) % n_bins].append(i)
        elif monitor:
            wv[int(gid[i]), int(src[i])] -= 1
            if int(gid[i]) not in gone:
                gone.append(int(gid[i]))
    order, cuts = _bins_reference(bins)
    return (np.asarray(rows, np.int64), np.asarray(ws, np.int64), np.asarray(last, bool),
            order, cuts, np.asarray(gone, np.int64), np.asarray(clo, np.int64), np.asarray(chi, np.int64),
            np.asarray([2 if b > a else 0 for a, b in zip(clo, chi)], np.int8))


@njit(cache=True)
def count_dead(wv, cand, gone, scratch, vmask, mbit, reset):  # type: ignore[no-untyped-def]
    """Groups of ``cand`` or ``gone`` (distinct) whose winVol is all zero now: they leave
    ``H``. Returns ``(dead, of them flagged eager)``; with ``reset`` their flag is cleared
    (the group starts lazy again). ``scratch`` as in :func:`route_batch`. O(groups x sources).
    """
    seen = np.empty(cand.shape[0] + gone.shape[0], np.int64)
    ns = 0
    n_dead = 0
    n_dead_e = 0
    for j in range(cand.shape[0] + gone.shape[0]):
        g = cand[j] if j < cand.shape[0] else gone[j - cand.shape[0]]
        if scratch[g] >= 0:
            continue
        ns = _first_seen(scratch, g, seen, ns)
        if not _is_alive(wv, g, vmask):
            n_dead += 1
            if wv[g, 0] & mbit != 0:
                n_dead_e += 1
                if reset:
                    wv[g, 0] &= ~mbit
    _clear(scratch, seen, ns)
    return n_dead, n_dead_e


def count_dead_reference(wv: np.ndarray, cand: np.ndarray, gone: np.ndarray, vmask: int,
                         mbit: int, reset: bool) -> tuple[int, int]:
    """Tuple-at-a-time reference of :func:`count_dead` (``wv`` in place)."""
    n_dead = n_dead_e = 0
    for g in dict.fromkeys(list(cand.tolist()) + list(gone.tolist())):
        if all(int(x) & vmask == 0 for x in wv[g]):
            n_dead += 1
            if int(wv[g, 0]) & mbit:
                n_dead_e += 1
                if reset:
                    wv[g, 0] &= ~mbit
    return n_dead, n_dead_e


@njit(cache=True)
def take_scan(gid, groups, n_bins):  # type: ignore[no-untyped-def]
    """Rows of ``gid`` whose group is in ``groups`` (sorted, distinct) -- taken, in order --
    and the other rows in bin order (``gid % n_bins``, stable) with the bin cuts. O(n log k)."""
    n = gid.shape[0]
    k = groups.shape[0]
    hit = np.zeros(n, np.bool_)
    n_hit = 0
    for i in range(n):
        j = np.searchsorted(groups, gid[i])
        if j < k and groups[j] == gid[i]:
            hit[i] = True
            n_hit += 1
    taken = np.empty(n_hit, np.int64)
    t = 0
    for i in range(n):
        if hit[i]:
            taken[t] = i
            t += 1
    order, cuts = _bin_sort_kept(gid, ~hit, n_bins)
    return taken, order, cuts


def take_scan_reference(gid: np.ndarray, groups: np.ndarray,
                        n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`take_scan`."""
    want = set(groups.tolist())
    taken = [i for i, g in enumerate(gid.tolist()) if g in want]
    bins: list[list[int]] = [[] for _ in range(n_bins)]
    for i, g in enumerate(gid.tolist()):
        if g not in want:
            bins[g % n_bins].append(i)
    order, cuts = _bins_reference(bins)
    return np.asarray(taken, np.int64), order, cuts


@njit(cache=True)
def switch_down(wv, cand, pre, use_pre, base, range_f, skew_on, hwm, down, vmask, mbit):  # type: ignore[no-untyped-def]
    """Eager -> lazy at a punctuation (004 §6.3.4.2): every *eager* group ``g`` of ``cand``
    whose volume (``pre[j]``, winVol before the expiry, when ``use_pre``; else winVol now)
    is ``< down * theta`` loses its flag ``mbit``. ``theta`` is Cond. 6.9 as in
    :func:`route_batch` (winVol now in the skew term, offsets from ``hwm``). Returns the
    switched groups. O(groups x sources)."""
    off = _source_offsets(hwm, skew_on)
    sw = np.empty(cand.shape[0], np.int64)
    n_sw = 0
    for j in range(cand.shape[0]):
        g = cand[j]
        if wv[g, 0] & mbit == 0:
            continue
        vol, skew = _volume_skew(wv, g, vmask, range_f, off)
        v = pre[j] if use_pre else vol
        if v < down * (base + skew):
            wv[g, 0] &= ~mbit
            sw[n_sw] = g
            n_sw += 1
    return sw[:n_sw].copy()


def switch_down_reference(wv: np.ndarray, cand: np.ndarray, pre: np.ndarray, use_pre: bool,
                          base: float, range_f: float, skew_on: bool, hwm: np.ndarray,
                          down: float, vmask: int, mbit: int) -> np.ndarray:
    """Tuple-at-a-time reference of :func:`switch_down` (``wv`` in place)."""
    off = _source_offsets_reference(hwm, skew_on)
    out = []
    for j, g in enumerate(cand.tolist()):
        if not int(wv[g, 0]) & mbit:
            continue
        counts = [int(x) & vmask for x in wv[g]]
        v = int(pre[j]) if use_pre else sum(counts)
        if v < down * _theta_reference(counts, off, base, range_f):
            wv[g, 0] &= ~mbit
            out.append(g)
    return np.asarray(out, np.int64)


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


@njit(cache=True)
def close_fold(gid, src, ts, range_, slide, origin, old, fo, wv, monitor, scratch, n_bins,
               mask, pc):  # type: ignore[no-untyped-def]
    """The dense lazy close in one pass pair: :func:`close_scan` (without pairs) fused with
    :func:`transient_slots` (first-occurrence order) and the presence / ``count`` fold.

    For each buffered row: its window range (the Bucket), its closing windows ``[clo,
    chi)`` (``max(lo, old) <= w < min(hi, fo)``), expiry (``hi <= fo``: purged, with
    ``monitor`` ``winVol[g, src] -= 1``), and for a row with a closing window a transient
    slot of its group (groups numbered in first-occurrence order). Then ``pres[w & mask,
    slot] += 1`` for each closing window of each row -- the tuples of (window, group), which
    is the state of a ``count`` aggregate and the presence of every other one. ``scratch``
    (int64 over group codes, all -1) is left all -1.

    ``pc`` (``n_bins + 1``): the rows ``[pc[b], pc[b + 1])`` are binned rows of bin ``b``
    (the buffer's binned part, already in bin order); rows from ``pc[n_bins]`` on are
    staged (any bin). The kept rows come out in bin order (stable): a binned row keeps
    its place relative to its bin, so only the staged rows are counted into bins.

    Returns ``(kept order in bin order, cuts, expired distinct groups, slot per row (-1:
    no closing window), groups, clo, chi, pres (mask + 1, groups) int64, and the kept
    rows' gid, ts, src -- gathered in the same pass)``.
    O(rows + (row, closing window) pairs + bins).
    """
    n = gid.shape[0]
    clo = np.empty(n, np.int64)
    chi = np.empty(n, np.int64)
    slot = np.empty(n, np.int64)
    ug = np.empty(n, np.int64)
    keep = np.empty(n, np.bool_)
    nu = 0
    per, inv = _span_consts(range_, slide)
    for i in range(n):
        _, b, a, e = _closing_span(ts[i], origin, range_, slide, per, inv, old, fo)
        clo[i] = a
        chi[i] = e
        g = gid[i]
        if e > a:  # a closing window: a transient slot (scratch holds it while scanning)
            nu = _first_seen(scratch, g, ug, nu)
            slot[i] = scratch[g]
        else:
            slot[i] = -1
        keep[i] = b > fo
        if not keep[i] and monitor:
            wv[g, src[i]] -= 1
    _clear(scratch, ug, nu)
    # the expired rows' distinct groups (scratch reused after the slots)
    gone = _expired_groups(gid, keep, scratch) if monitor else np.empty(0, np.int64)
    pres = np.zeros((mask + 1, nu), np.int64)
    for i in range(n):
        s = slot[i]
        if s >= 0:
            for w in range(clo[i], chi[i]):
                pres[w & mask, s] += 1
    # kept rows in bin order: binned rows stay in place within their bin (a filter), the
    # staged ones follow their bin's binned rows (a counting sort of the staged rows only)
    pow2 = n_bins & (n_bins - 1) == 0  # bin = gid & (n_bins - 1): no division
    nb = pc[n_bins]
    cnt = np.zeros(2 * n_bins, np.int64)  # kept binned rows / kept staged rows, per bin
    for b in range(n_bins):
        c = 0
        for i in range(pc[b], pc[b + 1]):
            if keep[i]:
                c += 1
        cnt[b] = c
    for i in range(nb, n):
        if keep[i]:
            cnt[n_bins + _bin_of(gid[i], n_bins, pow2)] += 1
    cuts = np.zeros(n_bins + 1, np.int64)
    for b in range(n_bins):
        cuts[b + 1] = cuts[b] + cnt[b] + cnt[n_bins + b]
    nk = cuts[n_bins]
    order = np.empty(nk, np.int64)
    kg = np.empty(nk, gid.dtype)  # the kept rows' gid / ts / src, gathered here
    kt = np.empty(nk, np.int64)
    ks = np.empty(nk, src.dtype)
    pos = np.empty(n_bins, np.int64)
    for b in range(n_bins):
        p = cuts[b]
        for i in range(pc[b], pc[b + 1]):
            if keep[i]:
                order[p] = i
                kg[p] = gid[i]
                kt[p] = ts[i]
                ks[p] = src[i]
                p += 1
        pos[b] = p
    for i in range(nb, n):
        if keep[i]:
            b = _bin_of(gid[i], n_bins, pow2)
            p = pos[b]
            order[p] = i
            kg[p] = gid[i]
            kt[p] = ts[i]
            ks[p] = src[i]
            pos[b] = p + 1
    return order, cuts, gone, slot, ug[:nu].copy(), clo, chi, pres, kg, kt, ks


def close_fold_reference(gid: np.ndarray, src: np.ndarray, ts: np.ndarray, range_: int,
                         slide: int, origin: int, old: int, fo: int, wv: np.ndarray,
                         monitor: bool, n_bins: int, mask: int,
                         pc: np.ndarray) -> tuple[np.ndarray, ...]:
    """Tuple-at-a-time reference of :func:`close_fold` (``wv`` in place): the unfused
    references (:func:`close_scan_reference`: a stable sort of every kept row by bin,
    :func:`transient_slots_reference`) and a plain loop over (row, closing window) pairs
    for the counts. ``pc`` only states a precondition (the binned part is in bin order)."""
    for b in range(n_bins):
        assert all(int(gid[i]) % n_bins == b for i in range(int(pc[b]), int(pc[b + 1])))
    _, _, _, order, cuts, gone, clo, chi, sel = close_scan_reference(
        gid, src, ts, range_, slide, origin, old, fo, wv, monitor, n_bins, pairs=False)
    slot, groups = transient_slots_reference(gid, sel, sort=False)
    pres = np.zeros((mask + 1, len(groups)), np.int64)
    for i in range(len(gid)):
        for w in range(int(clo[i]), int(chi[i])):
            pres[w & mask, slot[i]] += 1
    return (order, cuts, gone, slot, groups, clo, chi, pres, gid[order], ts[order],
            src[order])


@njit(cache=True)
def settle_close(wv, pg, ptc, gone, scratch, use_pre, base, range_f, skew_on, hwm, down,
                 vmask, mbit, reset):  # type: ignore[no-untyped-def]
    """The group bookkeeping of a punctuation after its closing partials were popped (004
    §6.3.4.2), in one call: :func:`switch_down` and :func:`count_dead` fused with the
    ``winVol`` decrement by the popped partials' ``tupcnt``.

    ``pg`` / ``ptc``: the popped partials' groups and ``tupcnt`` (rows x sources), the
    blocks of every closing window concatenated (a group may recur, once per window);
    ``gone``: groups whose buffered tuples expired. Steps: the distinct groups ``cand`` of
    ``pg`` (first-occurrence order) and, per group, its volume before the decrement
    (``pre``: eager groups hold no buffered tuples, so the buffer's expiry has not touched
    it); ``winVol[pg[i]] -= ptc[i]``; eager groups of ``cand`` under ``down * theta`` turn
    lazy (:func:`switch_down` with ``pre``); groups of ``cand`` or ``gone`` with winVol 0
    leave ``H`` (:func:`count_dead`). ``scratch`` (int64 over group codes, all -1) is left
    all -1.

    Returns ``(switched to lazy, dead, of them flagged eager, sum of ptc)``. O(rows x
    sources).
    """
    S = wv.shape[1]
    m = pg.shape[0]
    cand = np.empty(m, np.int64)
    nc = 0
    for i in range(m):
        nc = _first_seen(scratch, pg[i], cand, nc)
    pre = np.empty(nc, np.int64)
    for j in range(nc):
        g = cand[j]
        v = 0
        for k in range(S):
            v += wv[g, k] & vmask
        pre[j] = v
    total = 0
    for i in range(m):
        g = pg[i]
        for k in range(S):
            c = ptc[i, k]
            wv[g, k] -= c  # low bits only: never below 0
            total += c
    _clear(scratch, cand, nc)
    sw = switch_down(wv, cand[:nc], pre, use_pre, base, range_f, skew_on, hwm, down, vmask,
                     mbit)
    n_dead, n_dead_e = count_dead(wv, cand[:nc], gone, scratch, vmask, mbit, reset)
    return sw.shape[0], n_dead, n_dead_e, total


def settle_close_reference(wv: np.ndarray, pg: np.ndarray, ptc: np.ndarray, gone: np.ndarray,
                           use_pre: bool, base: float, range_f: float, skew_on: bool,
                           hwm: np.ndarray, down: float, vmask: int, mbit: int,
                           reset: bool) -> tuple[int, int, int, int]:
    """Tuple-at-a-time reference of :func:`settle_close` (``wv`` in place), from the
    unfused references."""
    cand = np.asarray(list(dict.fromkeys(int(g) for g in pg.tolist())), np.int64)
    pre = np.asarray([sum(int(x) & vmask for x in wv[g]) for g in cand.tolist()], np.int64)
    total = 0
    for g, row in zip(pg.tolist(), ptc.tolist()):
        for k, c in enumerate(row):
            wv[int(g), k] -= int(c)
            total += int(c)
    sw = switch_down_reference(wv, cand, pre, use_pre, base, range_f, skew_on, hwm, down,
                               vmask, mbit)
    n_dead, n_dead_e = count_dead_reference(wv, cand, gone, vmask, mbit, reset)
    return len(sw), n_dead, n_dead_e, total


@njit(cache=True)
def dense_pop_slots(pres, r, C, gid_of):  # type: ignore[no-untyped-def]
    """The slots with a partial in ring row ``r`` (``pres[r, s] > 0``, ``s < C``) in slot
    order, and their groups (int32). O(C)."""
    n = 0
    for s in range(C):
        if pres[r, s] > 0:
            n += 1
    slots = np.empty(n, np.int64)
    gids = np.empty(n, np.int32)
    k = 0
    for s in range(C):
        if pres[r, s] > 0:
            slots[k] = s
            gids[k] = gid_of[s]
            k += 1
    return slots, gids


def dense_pop_slots_reference(pres: np.ndarray, r: int, C: int,
                              gid_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tuple-at-a-time reference of :func:`dense_pop_slots`."""
    slots = [s for s in range(C) if pres[r, s] > 0]
    return np.asarray(slots, np.int64), np.asarray([gid_of[s] for s in slots], np.int32)


@njit(cache=True)
def dense_release(gid_of, last_w, slot_of, free, n_free, first_open):  # type: ignore[no-untyped-def]
    """Free every held slot whose last partial's window is below ``first_open``: its group
    loses its slot, the slot is pushed on the free stack ``free[:n_free]`` (slots in
    descending order, so the lowest is popped first). Returns the new ``n_free``. O(C)."""
    for s in range(gid_of.shape[0] - 1, -1, -1):
        g = gid_of[s]
        if g >= 0 and last_w[s] < first_open:
            slot_of[g] = -1
            gid_of[s] = -1
            free[n_free] = s
            n_free += 1
    return n_free


def dense_release_reference(gid_of: np.ndarray, last_w: np.ndarray, slot_of: np.ndarray,
                            free: np.ndarray, n_free: int, first_open: int) -> int:
    """Tuple-at-a-time reference of :func:`dense_release` (arrays in place)."""
    dead = [s for s in range(len(gid_of)) if gid_of[s] >= 0 and last_w[s] < first_open]
    for s in reversed(dead):
        slot_of[gid_of[s]] = -1
        gid_of[s] = -1
        free[n_free] = s
        n_free += 1
    return n_free


@njit(cache=True)
def count_transitional(gid_of, wv, mbit):  # type: ignore[no-untyped-def]
    """Slot holders (groups with partials) whose flag ``mbit`` is clear: transitional
    groups (lazy with old partials, 004 Fig. 6-18). O(C)."""
    n = 0
    for s in range(gid_of.shape[0]):
        g = gid_of[s]
        if g >= 0 and wv[g, 0] & mbit == 0:
            n += 1
    return n


def count_transitional_reference(gid_of: np.ndarray, wv: np.ndarray, mbit: int) -> int:
    """Tuple-at-a-time reference of :func:`count_transitional`."""
    return sum(1 for g in gid_of.tolist() if g >= 0 and not int(wv[g, 0]) & mbit)
