"""A punctuation's group bookkeeping in AdaptWID (004 §6.3.4.2, "Processing Punctuation"
and the eager -> lazy switch), each kernel beside its reference.

After the closing windows' partials were popped from ``H`` and the buffer's expired
tuples purged (:mod:`~oop.adapt.kernels.buffer`):

* :func:`settle_close` -- in one call: ``winVol`` drops by the popped partials'
  ``tupcnt`` (004: "decrease winVol of the group by the tupleCnt of each such partial
  aggregate"), :func:`switch_down` and :func:`count_dead`. O(rows x sources).
* :func:`switch_down` -- eager groups under ``down * theta`` (Cond. 6.9, the lower of the
  two thresholds against thrashing) lose their flag: lazy, *transitional* while they hold
  partials (004 §6.3.3).
* :func:`count_dead` -- groups whose ``winVol`` reached 0 leave ``H`` (004: "if winVol of a
  group drops to 0, remove it from H"); they start lazy again.
* :func:`count_transitional` -- lazy groups still holding partials (004 Fig. 6-18), for
  the timeline.

Nothing is emitted or forwarded here: these update the per-group entries only.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.adapt.kernels.common import (_clear, _first_seen, _is_alive, _source_offsets,
                                      _source_offsets_reference, _theta_reference,
                                      _volume_skew)


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
