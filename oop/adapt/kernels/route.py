"""AdaptWID's fused per-batch pass (004 §6.3.4.2, "Processing Tuples" and the lazy -> eager
switch), beside its reference.

:func:`route_batch` does, in one pass over a batch: the Bucket (each tuple's window ids
``[lo, hi)``, 004 Eq. 5.2), ``lo`` clipped to the first open window (004: "update extents
from max{punctuatedWid + 1, i}"; a tuple whose windows are all complete is late), the
monitoring of 004 §6.3.4.1 (``winVol[g, source] += 1`` per tuple, per-source
high-watermarks), the lazy -> eager switch of every touched lazy group over ``up *
theta`` (Cond. 6.9, 004 §6.3.2-6.3.3) and the routing of each row eager (fold into
partials) / lazy (buffer in ``B``) / late by its group's flag after the switches.
O(n x sources). Nothing is emitted on a batch; the caller folds, buffers and counts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.adapt.kernels.common import (_first_seen, _is_alive, _source_offsets,
                                      _source_offsets_reference, _span_consts,
                                      _theta_reference, _volume_skew, _wid_span)

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
