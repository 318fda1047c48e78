"""Kernels of AdaptWID's dense eager store ``H`` (bounded aggregates, :mod:`oop.adapt.dense`),
each beside its reference (004 §6.3.4.2, "Processing Tuples" case 3 and "Processing
Punctuation" case 1).

The store keeps one cell per (open window, eager group): lanes indexed ``[w & mask,
slot]`` over a ring of window ids and a slot per group holding partials.

* fold kernels -- every one folds each row ``i`` into the cells ``(w & mask, slot[i])``
  for ``lo[i] <= w < hi[i]`` (the row's open windows, from the Bucket); rows with
  ``slot[i] < 0`` are skipped (the batch's lazy and late rows: no gather needed):
  :func:`dense_fold_rows` (presence, ``tupcnt`` in the row's last window -- 004's
  ``tupleCnt`` -- and the slot's last window), :func:`dense_last_w`,
  :func:`dense_fold_count`, :func:`dense_fold_sum`, :func:`dense_fold_minmax`,
  :func:`dense_fold_var` (``(n, mean, M2)``, :func:`oop.aggregates.moments.mom_update`),
  :func:`dense_fold_firstlast`; one reference for all: :func:`dense_fold_reference`.
  O(rows x windows per row).
* slots -- :func:`dense_count_new`, :func:`dense_assign_slots` and
  :func:`dense_assign_slots_sel` (the batch's eager rows picked by their row class, slots
  assigned and presence folded in one call): O(rows).
* a punctuation -- :func:`dense_pop_slots`: the slots with a partial in a closing window's
  ring row (emitted by the caller), O(slots); :func:`dense_release`: slots whose last
  partial's window closed go back to the free stack (purged), O(slots).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.aggregates.moments import mom_update


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
