"""Kernels over AdaptWID's lazy buffer ``B`` (004 §6.3.4.2), each beside its reference.

``B`` holds the tuples of lazy and transitional groups, partitioned into bins by group
code (``gid % n_bins``; 004 §6.3.4.2, "Discussion"), so a group switching to eager scans
only its bin (:class:`~oop.adapt.buffer.LazyBuffer`).

* :func:`bin_order` -- stable counting sort of buffered rows by bin: O(n + bins).
* :func:`take_scan` -- lazy -> eager (004 §6.3.3): the rows of the switching groups are
  taken out (to be folded into partials), the others stay binned: O(n log k).
* :func:`close_scan` -- a punctuation closing windows ``[old, fo)`` (004 §6.3.4.2,
  "Processing Punctuation" cases 2 and 3): each buffered tuple's (row, closing window)
  pairs, and expiry -- a tuple whose last window closes is purged and its group's
  ``winVol`` drops by one; the kept rows come back in bin order: O(rows + pairs + bins).
* :func:`close_fold` -- the bounded-aggregate form of :func:`close_scan`: fused with the
  transient slots of the closing groups (004 Fig. 6-18's temporary table ``T``, one slot
  per group) and the per-(closing window, group) tuple counts (a ``count`` aggregate's
  lane and every other aggregate's presence): one call per punctuation.

Punctuation rule (what the close kernels compute for the caller): a punctuation closing
``[old, fo)`` completes, for a tuple with windows ``[lo, hi)``, the windows
``[max(lo, old), min(hi, fo))`` (aggregated, emitted by the caller) and purges the tuple
iff ``hi <= fo`` (its last window is complete); nothing is forwarded here.

>>> import numpy as np
>>> order, cuts = bin_order(np.array([3, 4, 6, 1], np.int32), 2)
>>> order.tolist(), cuts.tolist()
([1, 2, 0, 3], [0, 2, 4])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.adapt.kernels.common import (_bin_of, _bin_sort_kept, _bins_reference, _clear,
                                      _closing_span, _expired_groups, _first_seen,
                                      _span_consts)
from oop.adapt.kernels.groupby import transient_slots_reference


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
