"""Dense eager store of AdaptWID: (open-window ring x eager-group slot) lanes (004 §6.3.4.2).

For bounded aggregates the partials ``H`` of eager and transitional groups
live in numpy arrays of shape ``(R, C)`` -- one per *lane* of every
aggregate (the columns of :mod:`oop.adapt.algebra`'s states: ``nn``,
``sum``, ``min``, ``n/mean/M2``, ``t/v`` ...) plus a presence lane ``rows``
(tuples folded into the cell; the ``count`` lane doubles as it when there is
one) and, when ``winVol`` is monitored and cannot be derived, ``tupcnt``
``(R, C, sources)`` int32. Row ``w & (R - 1)`` holds window id ``w`` (``R`` a
power of two, grown when the held windows span more); column ``slot`` holds
one group. This is the WID operator's ring (:mod:`oop.window.ring`) with the
group axis restricted to groups that hold partials.

Slots: a group gets a slot the first time it is folded eagerly (it turned
eager, or forced eager mode); the slot is freed -- pushed on a free list --
at the punctuation that emits its last partial (an eager group whose tuples
all expired, or a transitional group whose old partials are all out: Fig.
6-18). ``last_w[slot]`` (the greatest window with a partial) tells which.

On a batch: allocate slots for new groups (vectorized), then one numba kernel
per aggregate folds every (tuple, window in ``[lo, hi)``) into its cell: O(n x
windows per tuple), no per-window Python. On a punctuation: each closing
window's row is read into a :class:`~oop.adapt.store.Block` (present cells,
sorted by group) and reset, O(C) per window; then slots whose last window
closed are freed, O(C).

Bytes (:attr:`nbytes`) are what is held: every lane array at its allocated
``R x C`` capacity (empty cells included), the per-slot arrays (``gid_of``
int32, ``last_w`` int64) at capacity, and the group -> slot entry (int32) of
each allocated slot (the group-code-indexed map spans every group ever seen,
like the key dictionary: its live entries are counted, as in
:mod:`oop.adapt.core`). Capacity grows by 1.5x (slots) / 2x (ring rows) and
shrinks (compaction) when under a quarter is used.

>>> from oop.window import aggregates as agg
>>> from oop.adapt.algebra import block_agg
>>> st = DenseEagerStore([block_agg(agg.sum("v"))], {"v": np.dtype(np.int64)}, n_sources=1,
...                      tupcnt="derived")
>>> ch = {"gid": np.array([3, 1, 3], np.int32), "ts": np.zeros(3, np.int64),
...       "v": np.array([5, 7, 1])}
>>> st.fold(ch, np.array([0, 0, 0]), np.array([1, 1, 2]))
>>> b = st.pop(0)
>>> b.gids.tolist(), b.states[0][1].tolist(), b.tupcnt[:, 0].tolist()
([1, 3], [7, 6], [1, 2])
>>> st.release(1); st.n_slots, st.pop(1).states[0][1].tolist()
(1, [1])
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from oop.adapt.algebra import BlockAgg
from oop.adapt.kernels.dense import (dense_assign_slots, dense_assign_slots_sel,
                                     dense_count_new, dense_pop_slots, dense_release,
                                     dense_fold_count, dense_fold_firstlast, dense_fold_minmax,
                                     dense_fold_rows, dense_fold_sum, dense_fold_var,
                                     dense_last_w)
from oop.adapt.store import Block
from oop.errors import StateLimitError
from oop.limits import ADVICE, fmt_bytes
from oop.window.ring import check_state_size

__all__ = ["DenseEagerStore", "lane_dtypes", "fold_aggs"]

GID = np.int32
_I64MIN = np.iinfo(np.int64).min
_DUMMY2 = np.zeros((1, 1), np.int32)  # stand-ins for lanes a store does not hold
_DUMMY3 = np.zeros((1, 1, 1), np.int32)


def lane_dtypes(a: BlockAgg, col_dtype: np.dtype | None) -> list[np.dtype]:
    """dtypes of the state columns of ``a`` (as :meth:`BlockAgg.reduce` makes them)."""
    f = a.op
    i8 = np.dtype(np.int64)
    if f == "rows":
        return [i8]
    assert col_dtype is not None
    if f == "sum":
        dt = np.float64 if a.float_sum or np.issubdtype(col_dtype, np.floating) else np.int64
        return [i8, np.dtype(dt)]
    if f in ("min", "max"):
        return [i8, col_dtype]
    if f == "sumsq":
        return [i8, np.dtype(np.float64), np.dtype(np.float64)]
    if f in ("first", "last"):
        return [i8, i8, col_dtype]
    raise ValueError(f"dense store: holistic aggregate {a.name!r} has no fixed lanes")


def fold_aggs(aggs: Sequence[BlockAgg], lanes: list[list[np.ndarray]], slot: np.ndarray,
              lo: np.ndarray, hi: np.ndarray, ts: np.ndarray,
              cols: dict[str, tuple[np.ndarray, np.ndarray | None]], mask: np.int64,
              count_is_pres: bool, ones: np.ndarray) -> int:
    """One fold kernel per aggregate: rows ``i`` with ``slot[i] >= 0`` into cells ``(w &
    mask, slot[i])`` for ``lo[i] <= w < hi[i]``. ``cols``: column -> (values, validity or
    None); ``ones``: all-True validity of the rows' length. Returns the cells a count lane
    made non-empty when it is the presence lane (``count_is_pres``), else 0."""
    new = 0
    for a, ln in zip(aggs, lanes):
        f = a.op
        if f == "rows":
            new += dense_fold_count(ln[0], slot, lo, hi, mask, count_is_pres)
            continue
        x, m = cols[a.column]  # type: ignore[index]
        valid = ones if m is None else m
        if f == "sum":
            if x.dtype != ln[1].dtype:
                x = x.astype(ln[1].dtype)
            dense_fold_sum(ln[0], ln[1], slot, lo, hi, x, valid, mask)
        elif f == "min" or f == "max":
            dense_fold_minmax(ln[0], ln[1], slot, lo, hi, x, valid, mask, f == "min")
        elif f == "sumsq":
            k = a.shift_for(x, valid)
            if x.dtype != np.int64 or not isinstance(k, int):  # int64 - int: exact in int64
                x, k = x.astype(np.float64, copy=False), float(k)
            dense_fold_var(ln[0], ln[1], ln[2], slot, lo, hi, x, k, valid, mask)
        else:
            dense_fold_firstlast(ln[0], ln[1], ln[2], slot, lo, hi, x, valid, ts, mask,
                                 f == "first")
    return new


#: a span of held windows far wider than a tuple's windows (> 64 x, > 4096 ids) whose
#: dense ring would pass this many bytes raises StateLimitError instead of allocating
SPAN_LIMIT_BYTES = 64 << 20


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


class DenseEagerStore:
    """Eager partials in (ring x slot) lanes; see the module docstring.

    ``tupcnt``: ``"stored"`` (a lane per source), ``"derived"`` (tumbling, one
    source: tupcnt == the presence lane) or ``"none"`` (nothing monitors winVol).

    """

    def __init__(self, aggs: Sequence[BlockAgg], value_dtypes: dict[str, np.dtype],
                 n_sources: int, tupcnt: str, ring: int = 4) -> None:
        assert tupcnt in ("stored", "derived", "none")
        self.aggs = list(aggs)
        self.fixed = True
        self.S = n_sources
        self.tc_mode = tupcnt
        self.dtypes = [lane_dtypes(a, value_dtypes.get(a.column or "")) for a in self.aggs]
        # the presence lane: a count aggregate's lane, else a rows lane of its own
        self.pres_from = next((j for j, a in enumerate(self.aggs) if a.spec.counts_rows), None)
        self.R = _pow2(max(ring, 1))
        self.R0 = self.R  # the ring a tuple's windows need (span check in _span)
        self.owner = "adaptwid"  # operator name for errors
        self.C = 0
        self.lanes: list[list[np.ndarray]] = [[np.zeros((self.R, 0), dt) for dt in dts]
                                              for dts in self.dtypes]
        self.rows = np.zeros((self.R, 0), np.int32) if self.pres_from is None else None
        self.tc = np.zeros((self.R, 0, self.S), np.int32) if tupcnt == "stored" else None
        self.gid_of = np.zeros(0, GID)  # slot -> group code (-1: free)
        self.last_w = np.zeros(0, np.int64)  # slot -> greatest window with a partial
        self.slot_of = np.zeros(0, np.int32)  # group code -> slot (-1: none)
        self.free = np.zeros(0, np.int64)  # free slots: a stack, ``free[:n_free]``
        self.n_free = 0
        self.n_slots = 0
        self.n_partials = 0
        self.wlo: int | None = None  # windows possibly held: [wlo, whi]
        self.whi: int | None = None
        self.nbytes = 0
        # growth check (oop.limits): called with the store's bytes after a relayout, before
        # allocating; raises StateLimitError. None: unchecked
        self.guard: Any = None
        self._cell_bytes: int | None = None
        self._slot_buf = np.empty(0, np.int64)  # scratch (not state)
        self._ones_buf = np.ones(0, np.bool_)  # scratch (not state)
        self._zeros_buf = np.zeros(0, np.int8)
        self._recount_bytes()

    # ---- layout --------------------------------------------------------------------
    @property
    def pres(self) -> np.ndarray:
        return self.rows if self.pres_from is None else self.lanes[self.pres_from][0]

    @property
    def cell_bytes(self) -> int:
        """Bytes of one (window, slot) cell: every lane's item size (fixed by the layout)."""
        if self._cell_bytes is None:
            b = sum(np.dtype(dt).itemsize for dts in self.dtypes for dt in dts)
            if self.rows is not None:
                b += 4
            if self.tc is not None:
                b += 4 * self.S
            self._cell_bytes = b
        return self._cell_bytes

    def _arrays(self) -> list[np.ndarray]:
        out = [x for lanes in self.lanes for x in lanes]
        if self.rows is not None:
            out.append(self.rows)
        if self.tc is not None:
            out.append(self.tc)
        return out

    def _recount_bytes(self) -> None:
        self.nbytes = (sum(x.nbytes for x in self._arrays()) + self.gid_of.nbytes
                       + self.last_w.nbytes + 4 * self.n_slots)

    def _relayout(self, R: int, C: int, slot_map: np.ndarray | None = None) -> None:
        """Reallocate every lane as ``(R, C)``, keeping the held windows' cells.

        ``slot_map``: old slot -> new slot (compaction), or None (slots kept).
        """
        n_lanes = sum(len(x) for x in self.lanes) + (self.rows is not None) + (self.tc is not None)
        check_state_size(R, C, n_lanes, self.wlo if self.wlo is not None else 0,
                         (self.wlo if self.wlo is not None else 0) + R)
        if self.guard is not None and R * C > self.R * self.C:
            self.guard(R * C * self.cell_bytes + C * 16 + 4 * self.n_slots,
                       f"dense ring of {R} open windows x {C} group slots"
                       + (f" (windows {self.wlo}..{self.whi})" if self.wlo is not None else ""))
        if self.wlo is not None:
            ws = np.arange(self.wlo, self.whi + 1, dtype=np.int64)
            old_r, new_r = ws & (self.R - 1), ws & (R - 1)
        else:
            old_r = new_r = np.zeros(0, np.int64)
        if slot_map is None:
            src = np.arange(min(self.C, C))
            dst = src
        else:
            src = np.flatnonzero(slot_map >= 0)
            dst = slot_map[src]

        same_rows = R == self.R and slot_map is None  # growing the slot axis only
        m = min(self.C, C)

        def move(x: np.ndarray) -> np.ndarray:
            y = np.zeros((R, C) + x.shape[2:], x.dtype)
            if same_rows:
                y[:, :m] = x[:, :m]  # every row keeps its place: one slice copy
            elif len(old_r) and len(src):
                y[np.ix_(new_r, dst)] = x[np.ix_(old_r, src)]
            return y

        self.lanes = [[move(x) for x in lanes] for lanes in self.lanes]
        if self.rows is not None:
            self.rows = move(self.rows)
        if self.tc is not None:
            self.tc = move(self.tc)
        gid_of = np.full(C, -1, GID)
        last_w = np.full(C, _I64MIN, np.int64)
        gid_of[dst] = self.gid_of[src]
        last_w[dst] = self.last_w[src]
        self.gid_of, self.last_w = gid_of, last_w
        self.R, self.C = R, C
        self._recount_bytes()

    def _grow_map(self, top: int) -> None:
        """The group -> slot map covers group codes ``< top``."""
        if len(self.slot_of) < top:
            s = np.full(max(top, 2 * len(self.slot_of)), -1, np.int32)
            s[: len(self.slot_of)] = self.slot_of
            self.slot_of = s

    def _grow_slots(self, k: int) -> None:
        """Make at least ``k`` slots free: grow the slot axis (new slots under the free stack)."""
        if k <= self.n_free:
            return
        C = max(self.n_slots + k, int(1.5 * self.C), 16)
        old_c = self.C
        self._relayout(self.R, C)
        free = np.empty(C, np.int64)
        fresh = np.arange(C - 1, old_c - 1, -1, dtype=np.int64)
        free[: len(fresh)] = fresh
        free[len(fresh): len(fresh) + self.n_free] = self.free[: self.n_free]
        self.free, self.n_free = free, len(fresh) + self.n_free

    def _alloc(self, gids: np.ndarray) -> np.ndarray:
        """Slots of group codes ``gids`` (int64), allocating for those without one (kernels)."""
        self._grow_map(int(gids.max()) + 1)
        k = dense_count_new(self.slot_of, gids)
        self._grow_slots(k)
        slots = np.empty(len(gids), np.int64)
        self.n_free = dense_assign_slots(self.slot_of, self.gid_of, self.last_w, gids, self.free,
                                         self.n_free, slots, _I64MIN)
        self.n_slots += k
        self.nbytes += 4 * k
        return slots

    # ---- batch ------------------------------------------------------------------------
    def fold(self, ch: dict[str, np.ndarray], lo: np.ndarray, hi: np.ndarray) -> None:
        """Fold rows ``ch`` into the cells of their windows ``[lo, hi)`` (all non-empty)."""
        if len(lo) == 0:
            return
        self._span(int(lo.min()), int(hi.max()) - 1)
        slot = self._alloc(ch["gid"].astype(np.int64))
        cols = {c: (x, ch.get(c + "?")) for c, x in ch.items() if not c.endswith("?")}
        self._fold(slot, lo, hi, ch.get("src"), ch["ts"], cols)

    def fold_sel(self, gids: np.ndarray, ts: np.ndarray, src: np.ndarray | None,
                 lo: np.ndarray, hi: np.ndarray,
                 cols: dict[str, tuple[np.ndarray, np.ndarray | None]], cls: np.ndarray,
                 want: int, wlo: int, whi: int, top: int) -> None:
        """Fold the rows ``i`` of a whole batch with ``cls[i] == want`` (no gather).

        ``gids`` int64; ``cols``: column -> (values, validity or None: all valid);
        ``[wlo, whi]``: the windows those rows fall into (a superset is fine); ``top`` >
        every group code in ``gids``. O(rows x
        windows per row), one slot kernel plus one kernel per aggregate.
        """
        if self.wlo is None or wlo < self.wlo or whi > self.whi:  # type: ignore[operator]
            self._span(wlo, whi)
        if len(self.slot_of) < top:
            self._grow_map(top)
        n = len(gids)
        if len(self._slot_buf) < n:
            self._slot_buf = np.empty(max(n, 2 * len(self._slot_buf)), np.int64)
        slot = self._slot_buf[:n]
        src_ = self._zeros_i8(n) if src is None else src
        while True:
            r, new = dense_assign_slots_sel(
                self.slot_of, self.gid_of, self.last_w, gids, cls, want, self.free, self.n_free,
                slot, _I64MIN, _DUMMY2 if self.rows is None else self.rows,
                self.rows is not None, _DUMMY3 if self.tc is None else self.tc,
                self.tc is not None, lo, hi, src_, np.int64(self.R - 1))
            if r >= 0:
                break
            self._grow_slots(-r - 1)  # relayout: lanes reallocated, so read them again
        k = self.n_free - r
        self.n_free = r
        self.n_slots += k
        self.nbytes += 4 * k
        self.n_partials += new
        self._fold(slot, lo, hi, src, ts, cols, rows_done=True)

    def _span(self, nlo: int, nhi: int) -> None:
        """The held windows become ``[min(wlo, nlo), max(whi, nhi)]`` (ring grown to fit)."""
        wlo = nlo if self.wlo is None else min(self.wlo, nlo)
        whi = nhi if self.whi is None else max(self.whi, nhi)
        if whi - wlo + 1 > self.R:
            R = _pow2(whi - wlo + 1)
            nbytes = R * max(self.C, 1) * self.cell_bytes
            if whi - wlo + 1 > max(4096, 64 * self.R0) and nbytes > SPAN_LIMIT_BYTES:
                raise StateLimitError(
                    f"{self.owner}: held windows {wlo}..{whi} ({whi - wlo + 1} window ids, "
                    f"a row far ahead of or behind the others) would make AdaptWID's dense ring "
                    f"{fmt_bytes(nbytes)} for {max(self.C, 1)} group slots, nearly all of it "
                    f"empty windows; {ADVICE}, or use Stream.window (sparse layout)")
            self._relayout(R, self.C)
        self.wlo, self.whi = wlo, whi

    def _fold(self, slot: np.ndarray, lo: np.ndarray, hi: np.ndarray, src: np.ndarray | None,
              ts: np.ndarray, cols: dict[str, tuple[np.ndarray, np.ndarray | None]],
              rows_done: bool = False) -> None:
        """Fold rows with ``slot >= 0``: presence / tupcnt / last_w (unless ``rows_done``),
        then one kernel per aggregate."""
        mask = np.int64(self.R - 1)
        if not rows_done:
            if src is None:
                src = self._zeros_i8(len(lo))
            if self.rows is not None or self.tc is not None:
                self.n_partials += dense_fold_rows(
                    _DUMMY2 if self.rows is None else self.rows, self.rows is not None,
                    _DUMMY3 if self.tc is None else self.tc, self.tc is not None, self.last_w,
                    slot, lo, hi, src, mask)
            else:
                dense_last_w(self.last_w, slot, hi)
        self.n_partials += fold_aggs(self.aggs, self.lanes, slot, lo, hi, ts, cols, mask,
                                     self.rows is None, self._ones(len(lo)))

    def _ones(self, n: int) -> np.ndarray:
        if len(self._ones_buf) < n:
            self._ones_buf = np.ones(max(n, 2 * len(self._ones_buf)), np.bool_)
        return self._ones_buf[:n]

    def _zeros_i8(self, n: int) -> np.ndarray:
        if len(self._zeros_buf) < n:
            self._zeros_buf = np.zeros(max(n, 2 * len(self._zeros_buf)), np.int8)
        return self._zeros_buf[:n]

    # ---- punctuation ------------------------------------------------------------------
    def pop(self, wid: int, sort: bool = True) -> Block | None:
        """The partials of window ``wid`` as a block (sorted by group unless ``sort=False``:
        slot order); the row is reset. O(C + partials (log partials when sorted))."""
        if self.wlo is None or wid < self.wlo or wid > self.whi or self.C == 0:
            return None
        r = wid & (self.R - 1)
        slots, gids = dense_pop_slots(self.pres, r, self.C, self.gid_of)  # one pass over C
        if len(slots) == 0:
            return None
        if sort:
            order = np.argsort(gids, kind="stable")
            slots, gids = slots[order], gids[order]
        states = [[x[r, slots] for x in lanes] for lanes in self.lanes]
        if self.tc is not None:
            tupcnt = self.tc[r, slots]
        elif self.tc_mode == "derived":
            tupcnt = self.pres[r, slots].astype(np.int32).reshape(-1, 1)
        else:
            tupcnt = np.zeros((len(slots), 0), np.int32)
        for x in self._arrays():  # cells without a partial are zero already: the whole row
            x[r] = 0
        self.n_partials -= len(slots)
        return Block(gids, tupcnt, states)

    def release(self, first_open: int) -> None:
        """Every window below ``first_open`` is out: free the slots with no partial left."""
        if self.wlo is not None and first_open > self.wlo:
            if first_open > self.whi:
                self.wlo = self.whi = None
            else:
                self.wlo = first_open
        if self.n_slots == 0:
            return
        n_free = dense_release(self.gid_of, self.last_w, self.slot_of, self.free, self.n_free,
                               first_open)  # one pass over the slots
        dead = n_free - self.n_free
        if dead:
            self.n_free = n_free
            self.n_slots -= dead
            self.nbytes -= 4 * dead
        if self.C > 64 and self.n_slots < self.C // 4:
            self._compact()

    def _compact(self) -> None:
        """Move the held slots to the front and shrink the slot axis to 2x them."""
        held = np.flatnonzero(self.gid_of >= 0)
        smap = np.full(self.C, -1, np.int64)
        smap[held] = np.arange(len(held))
        C = max(2 * len(held), 16)
        gids = self.gid_of[held].astype(np.int64)
        self._relayout(self.R, C, smap)
        self.slot_of[gids] = np.arange(len(held), dtype=np.int32)
        self.free = np.zeros(C, np.int64)
        self.n_free = C - len(held)
        self.free[: self.n_free] = np.arange(C - 1, len(held) - 1, -1, dtype=np.int64)

    def remap_gids(self, remap: np.ndarray, n_groups: int) -> None:
        """Renumber the held slots' group codes through ``remap`` (key compaction) and
        rebuild the group -> slot map over the ``n_groups`` codes left. O(C + n_groups)."""
        held = np.flatnonzero(self.gid_of >= 0)
        self.gid_of[held] = remap[self.gid_of[held]].astype(GID)
        self.slot_of = np.full(n_groups, -1, np.int32)
        self.slot_of[self.gid_of[held]] = held.astype(np.int32)

    def add(self, wid: int, block: Block) -> np.ndarray:  # pragma: no cover - block API only
        raise NotImplementedError("DenseEagerStore folds rows (fold), it does not merge blocks")

    # ---- views (checks, reports: not the hot path) -------------------------------------
    def held_gids(self) -> np.ndarray:
        """Group codes holding partials (sorted)."""
        return np.sort(self.gid_of[self.gid_of >= 0])

    @property
    def blocks(self) -> dict[int, Block]:
        """Window id -> block of its partials (copies; for checks and reports)."""
        out: dict[int, Block] = {}
        if self.wlo is None or self.C == 0:
            return out
        for w in range(self.wlo, self.whi + 1):
            r = w & (self.R - 1)
            slots = np.flatnonzero(self.pres[r, : self.C] > 0)
            if not len(slots):
                continue
            gids = self.gid_of[slots]
            order = np.argsort(gids)
            slots = slots[order]
            if self.tc is not None:
                tupcnt = self.tc[r, slots].copy()
            elif self.tc_mode == "derived":
                tupcnt = self.pres[r, slots].astype(np.int32).reshape(-1, 1)
            else:
                tupcnt = np.zeros((len(slots), 0), np.int32)
            out[w] = Block(gids[order].astype(GID), tupcnt,
                           [[x[r, slots].copy() for x in lanes] for lanes in self.lanes])
        return out

    # ---- snapshot ------------------------------------------------------------------------
    def snapshot(self) -> Any:
        return {k: (v.copy() if isinstance(v, np.ndarray) else
                    [[x.copy() for x in l] for l in v] if k == "lanes" else v)
                for k, v in self.__dict__.items()
                if k not in ("aggs", "dtypes", "_ones_buf", "_zeros_buf", "_slot_buf", "guard")}

    def restore(self, state: Any) -> None:
        for k, v in state.items():
            if isinstance(v, np.ndarray):
                v = v.copy()
            elif k == "lanes":
                v = [[x.copy() for x in l] for l in v]
            setattr(self, k, v)

    def _check(self) -> None:
        held = np.flatnonzero(self.gid_of >= 0)
        assert len(held) == self.n_slots, "slot count disagrees"
        assert (self.slot_of[self.gid_of[held]] == held).all(), "slot maps disagree"
        assert int(np.count_nonzero(self.slot_of >= 0)) == self.n_slots
        free = self.free[: self.n_free]
        assert self.n_free == self.C - self.n_slots and len(np.unique(free)) == len(free)
        assert not (self.gid_of[free] >= 0).any(), "a free slot is held"
        pres = self.pres[:, : self.C]
        assert int(np.count_nonzero(pres)) == self.n_partials, "partial count disagrees"
        free = np.setdiff1d(np.arange(self.C), held)
        for x in self._arrays():
            assert not x[:, free].any(), "a free slot has state"
        if self.wlo is None:
            assert self.n_partials == 0
        else:
            assert self.whi - self.wlo + 1 <= self.R
            inside = np.zeros(self.R, bool)
            inside[np.arange(self.wlo, self.whi + 1) & (self.R - 1)] = True
            assert not pres[~inside].any(), "cells outside the held windows"
        nb = sum(x.nbytes for x in self._arrays()) + self.gid_of.nbytes + self.last_w.nbytes
        assert self.nbytes == nb + 4 * self.n_slots, "bytes disagree with the arrays held"
