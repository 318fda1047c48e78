"""Dense (ring x codes) state of bounded window aggregates: :class:`Ring`.

One flat array per *lane* (see :class:`~oop.window.aggregates.Lane`), viewed as ``(R, C)``:
``R`` ring rows for the open *units* (window ids for WID, pane ids for Paned-WID), row
``unit & (R-1)``; ``C`` columns for the dense group codes. Open units are
``[base, base + R)``; ``R`` (a power of two) and ``C`` grow by doubling when a batch needs
more. Emitting a unit reads its row and resets it to the lanes' identities. This is the
*dense (ring x codes)* layout: O(1) per update, no hashing, memory ``R x C x lanes x 8``
bytes (checked against physical memory by :func:`check_state_size` before allocating).

Live-cell accounting (``live``) is exact and O(1) to read: the count kernel returns how many
cells became non-empty, and resetting a row subtracts its non-empty cells.

Invariants (asserted by ``Ring._check``):

- ``top - base <= R``: every open unit has its own ring row;
- ``live`` equals the number of non-zero cells of the ``rows`` lane, and no count is negative;
- ring rows of no unit in ``[base, top)`` hold only identities;
- code columns ``>= n_used`` hold no live cell (unless ``n_used >= C``);
- an ``nn`` lane of a column not in ``nn_active`` holds nothing (it reads the ``rows`` lane).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

import numpy as np

from oop.limits import weak_guard
from oop.progress.watermark import time_bounds  # (min, max), as the sources take them
from oop.window import kernels as K
from oop.window.values import (NO_NONFINITE, SQ_SAFE, ColumnValues, LaneInfo, held_ranks,
                               lane_input, note_nonfinite, remap_ranks)

if TYPE_CHECKING:
    from oop.window.cells import CellStore, PaneEmitter, SparseFrom

__all__ = ["Ring", "check_state_size", "TO_HASH", "TO_DENSE"]

#: live density (live cells / (open units x keys seen)) below which ``layout="auto"`` moves
#: the dense ring to hash cells, and above which hash cells move back; the gap between the
#: two keeps a stream near one threshold from switching back and forth
TO_HASH, TO_DENSE = 0.05, 0.20

_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min


#: the share of physical memory the dense window state may take before StateLimitError
STATE_LIMIT_FRACTION = 0.5


def physical_memory() -> int:
    """Bytes of physical memory (``os.sysconf``; 16 GiB where it is not available)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16 << 30


def check_state_size(R: int, C: int, n_lanes: int, lo: int, hi: int) -> None:
    """Raise :class:`~oop.errors.StateLimitError` before allocating dense lanes of ``R`` ring
    rows x ``C`` group columns x ``n_lanes`` beyond :data:`STATE_LIMIT_FRACTION` of memory
    (units ``[lo, hi)`` are the window / pane / row-window ids the ring must hold)."""
    nbytes = 8 * int(R) * int(C) * max(int(n_lanes), 1)
    limit = STATE_LIMIT_FRACTION * physical_memory()
    if nbytes > limit:
        from oop.errors import StateLimitError

        raise StateLimitError(
            f"window state: a dense ring of {R} window/pane ids x {C} group columns x "
            f"{n_lanes} lanes would need {nbytes / 2**30:.3g} GiB (limit {limit / 2**30:.1f} "
            f"GiB) to hold the open ids {lo}..{hi}. Usual causes: an event time far from the "
            "others (int64 min/max or 0 used as a placeholder among real timestamps -- filter "
            "or fix those rows), a time column in the wrong unit, a row-based RANGE of "
            "billions of rows, or no punctuation to close old windows. Fix the data, declare "
            "the right unit, or use a shorter range / coarser slide")


#: stand-ins for the fused update kernel's empty lane tuples (numba needs one array of the type)
_DUMMY_I, _DUMMY_F = np.zeros(1, np.int64), np.zeros(1, np.float64)
#: lane ops the fused update kernel folds when their column has no null in the batch
_NULL_OPS = ("nn", "sum")


class FoldPlan(NamedTuple):
    """How :meth:`Ring.update` folds a batch's lanes (:meth:`Ring._fold_plan`)."""

    fn: list[LaneInfo]  #: active ``nn`` lanes the fused pass counts
    ff: list[LaneInfo]  #: float ``sum`` lanes the fused pass adds
    rest: list[LaneInfo]  #: the lanes folded one kernel each (not ``rows``, not inactive ``nn``)
    raw: frozenset[str]  #: columns whose own values an ``ff`` lane adds (not shifted)


def _readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view: the fused kernels take a homogeneous tuple of value arrays,
    and a column read zero-copy from Arrow is read-only while a computed lane input (a shifted
    or cast column) is not. O(1)."""
    if not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


def tumble_units(times: np.ndarray, origin: int, size: int) -> np.ndarray:
    """The tumbling WIDs ``floor((times - origin) / size)`` (004 §6.1), as
    :meth:`oop.window.kinds.Sliding.wids` gives them for ``range == slide``."""
    d = times - origin if origin else times
    return np.floor_divide(d, size)


class Ring:
    """Dense (ring x codes) lanes of bounded partial aggregates. See the module docstring.

    Implements :class:`~oop.window.cells.CellStore`."""

    #: the layout's tag in snapshots (and ``layout=`` of the window operator)
    layout = "dense"

    def __init__(self, lanes: Sequence[LaneInfo], base: int = 0, rows: int = 8,
                 codes: int = 64) -> None:
        self.lanes = list(lanes)
        self.R = 1 << max(int(np.ceil(np.log2(max(rows, 2)))), 1)
        self.C = max(codes, 1)
        check_state_size(self.R, self.C, len(self.lanes), int(base), int(base) + int(rows))
        self.base = int(base)  # smallest unit that may be live
        self.top = int(base)  # one past the largest unit ever updated
        self.live = 0  # number of non-empty (unit, code) cells
        self.n_used = 0  # codes < n_used may have been written (update's n_codes)
        self.fixed = False  # fixed R: rows are addressed per code (PA), base/top unused
        # a column's non-null count equals the row count until it shows a null: its nn lane
        # is only maintained (and read) from then on -- one random-access lane less per row
        self.nn_active: set[str] = set()
        # update's lane partition per (columns with nulls, nn_active) (_fold_plan): derived
        self._plans: dict[tuple[tuple[str, ...], frozenset[str]], FoldPlan] = {}
        # the columns note_nonfinite looks at (float sum / sumsq lanes' columns)
        self._nf_cols = frozenset(li.lane.column for li in self.lanes
                                  if li.lane.op in ("sum", "sumsq") and li.lane.column)
        # the columns whose nulls change that partition: those of nn and sum lanes
        self._null_cols = tuple(dict.fromkeys(li.lane.column for li in self.lanes
                                              if li.lane.op in _NULL_OPS and li.lane.column))
        self.shift: dict[str, Any] = {}  # column -> variance shift (see lane_input)
        # the largest unit that may hold a NaN / infinite float sum (see note_nonfinite),
        # tracked when the owner subtracts units (Paned-WID sets track_nf)
        self.nf_hi = NO_NONFINITE
        self.track_nf = False
        self.guard = None
        self.arr: dict[tuple[str, str | None], np.ndarray] = {}
        self.tarr: dict[tuple[str, str | None], np.ndarray] = {}  # time lanes of first/last
        for li in self.lanes:
            self.arr[li.key] = np.full(self.R * self.C, li.identity(), li.dtype)
            if li.lane.op in ("first", "last"):
                ident = _I64MAX if li.lane.op == "first" else _I64MIN
                self.tarr[li.key] = np.full(self.R * self.C, ident, np.int64)

    # ---- geometry --------------------------------------------------------
    @property
    def mask(self) -> int:
        return self.R - 1

    def nbytes(self) -> int:
        return self.R * self.C * 8 * (len(self.arr) + len(self.tarr))

    def view(self, key: tuple[str, str | None], unit: int, time: bool = False) -> np.ndarray:
        """The ``C`` cells of ``unit`` in lane ``key`` (a view)."""
        a = (self.tarr if time else self.arr)[self.alias(key)]
        r = unit & self.mask
        return a[r * self.C:(r + 1) * self.C]

    def alias(self, key: tuple[str, str | None]) -> tuple[str, str | None]:
        """The lane that holds ``key``'s values (inactive nn lanes read the rows lane). O(1)."""
        if key[0] == "nn" and key[1] not in self.nn_active:
            return ("rows", None)
        return key

    def remap_values(self, key: tuple[str, str | None], remap: np.ndarray) -> None:
        """Re-rank the value column of lane ``key`` (min/max/first/last over ranked values)."""
        remap_ranks(self.arr[key], self.tarr.get(key), key[0], remap)

    def held_values(self, key: tuple[str, str | None]) -> np.ndarray:
        """The ranks lane ``key``'s live cells hold (see :meth:`remap_values`)."""
        return held_ranks(self.arr[key], self.tarr.get(key), key[0])

    def unit_cells(self, unit: int, n: int) -> tuple[np.ndarray, dict] | None:
        """(live codes ascending, lane values at them) of ``unit`` (inside ``[base, top)``), or
        None when it has no live cell. O(n) over the unit's ring row."""
        rows = self.view(("rows", None), unit)[:n]
        codes = np.flatnonzero(rows)
        if codes.size == 0:
            return None
        lanes = {k: self.view(k, unit)[codes] for k in self.arr}
        for k in self.tarr:
            lanes[("t:" + k[0], k[1])] = self.view(k, unit, time=True)[codes]
        return codes, lanes

    def live_runs(self, start: int, stop: int,
                  windows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                  ) -> list[range]:
        """The windows of ``[start, stop)`` an emission must walk: all of them (the dense ring
        has a row per open unit, so the walk costs what the rows cost). O(1)."""
        return [range(start, stop)]

    def dense_growth(self, low: int, top: int) -> tuple[int, int] | None:
        """``(span, R)``: the units ``[min(base, low), max(top, self.top))`` and the ring rows
        (a power of two) holding them, when that is more rows than the ring has; else None.
        Lets the owner move a mostly empty span to hash cells before allocating. O(1)."""
        span = max(top, self.top) - min(self.base, low)
        R = 1 << max(int(span - 1).bit_length(), 1)
        return None if R <= self.R else (span, R)

    def relayout(self, density: float, n_codes: int, sparse: type[SparseFrom]) -> CellStore | None:
        """This state as ``sparse`` hash cells when the live density (live cells / (open
        units x keys)) fell below :data:`TO_HASH`, else None (stay dense). O(rows x n_codes)
        when it moves."""
        return sparse.from_ring(self, n_codes) if density < TO_HASH else None

    def to_dense(self, n_codes: int) -> "Ring":
        """This state in the dense layout: itself. O(1)."""
        return self

    def forget_emitted(self, dead: int, below: int) -> None:
        """A fused emission kernel reset ``dead`` live cells and every unit below ``below``
        (Paned-WID's leaving panes): account for them and move ``base`` there. O(1)."""
        self.live -= dead
        self.base = max(self.base, below)
        self.top = max(self.top, self.base)

    def emit_pane_sums(self, pc: PaneEmitter, **kw: Any) -> Any:
        """Paned-WID's emission of every window of a punctuation over this layout: the dense
        ring's compiled passes (:meth:`~oop.window.paned.PaneCombiner.emit_dense`)."""
        return pc.emit_dense(self, **kw)

    def block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """All live cells of ``units`` (ascending, inside the ring) in one vectorized pass.

        Returns (units of the cells, codes, lane values); cells are ordered by (unit, code).
        """
        u = np.asarray([x for x in units if self.base <= x < self.top], np.int64)
        rr = u & self.mask
        wi, codes = K.scan_rows(self.arr[("rows", None)], self.C, rr, n)
        cr = rr[wi]
        lanes = {k: self.arr[self.alias(k)].reshape(self.R, self.C)[cr, codes] for k in self.arr}
        for k in self.tarr:
            lanes[("t:" + k[0], k[1])] = self.tarr[k].reshape(self.R, self.C)[cr, codes]
        return u[wi], codes, lanes

    def take_block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """:meth:`block` and reset of the returned cells, fused in one compiled pass."""
        u = np.asarray([x for x in units if self.base <= x < self.top], np.int64)
        rr = u & self.mask
        ik, fk, iid, fid = [], [], [], []
        for li in self.lanes:
            if li.key == ("rows", None) or self.alias(li.key) != li.key:
                continue
            (ik if li.dtype == np.int64 else fk).append(li.key)
            (iid if li.dtype == np.int64 else fid).append(li.identity())
        tk = list(self.tarr)
        ilanes = tuple(self.arr[k] for k in ik) + tuple(self.tarr[k] for k in tk)
        iid += [_I64MAX if k[0] == "first" else _I64MIN for k in tk]
        di, df = np.zeros(1, np.int64), np.zeros(1, np.float64)
        wi, codes, rv, iv, fv = K.take_rows(
            self.arr[("rows", None)], self.C, rr, n, ilanes or (di,), len(ilanes),
            np.asarray(iid or [0], np.int64), tuple(self.arr[k] for k in fk) or (df,), len(fk),
            np.asarray(fid or [0.0], np.float64))
        self.live -= codes.shape[0]
        lanes: dict = {("rows", None): rv}
        for q, k in enumerate(ik):
            lanes[k] = iv[q]
        for q, k in enumerate(tk):
            lanes[("t:" + k[0], k[1])] = iv[len(ik) + q]
        for q, k in enumerate(fk):
            lanes[k] = fv[q]
        for k in self.arr:
            if k not in lanes:  # aliased (inactive nn) lanes
                lanes[k] = lanes[self.alias(k)]
        return u[wi], codes, lanes

    @property
    def guard(self) -> Callable[[int, str], None] | None:
        """Growth check (:mod:`oop.limits`): called with the lanes' bytes after a growth, before
        allocating; raises StateLimitError. None: unchecked. The owner's bound method is held
        weakly (:func:`~oop.limits.weak_guard`: no owner -> ring -> owner cycle)."""
        return self._guard

    @guard.setter
    def guard(self, fn: Callable[[int, str], None] | None) -> None:
        self._guard = weak_guard(fn)

    def reserve(self, top: int, n_codes: int) -> None:
        """Make room for units ``[base, top)`` and ``n_codes`` codes (grows by doubling)."""
        need_r = top - self.base
        newR = self.R
        while newR < need_r:
            newR *= 2
        newC = self.C
        while newC < n_codes:
            newC *= 2
        if newR == self.R and newC == self.C:
            return
        check_state_size(newR, newC, len(self.lanes) + len(self.tarr), self.base, top)
        if self.guard is not None:
            self.guard(newR * newC * 8 * (len(self.arr) + len(self.tarr)),
                       f"dense ring of {newR} window/pane rows x {newC} key columns x "
                       f"{len(self.arr) + len(self.tarr)} lanes")
        live_units = range(self.base, max(self.top, self.base))
        for li in self.lanes:
            self.arr[li.key] = self._regrid(self.arr[li.key], li.identity(), li.dtype, newR, newC,
                                            live_units)
            if li.key in self.tarr:
                ident = _I64MAX if li.lane.op == "first" else _I64MIN
                self.tarr[li.key] = self._regrid(self.tarr[li.key], ident, np.int64, newR, newC,
                                                 live_units)
        self.R, self.C = newR, newC

    def lower_base(self, low: int) -> None:
        """Open units down to ``low`` (tuples before the first punctuation may go back in time)."""
        if low >= self.base:
            return
        self.reserve(self.base + (self.top - low), self.C)  # grow R first, with the old base
        self.base = low

    def _regrid(self, a, ident, dtype, newR, newC, units) -> np.ndarray:
        old = a.reshape(self.R, self.C)
        new = np.full((newR, newC), ident, dtype)
        for u in units:
            new[u & (newR - 1), : self.C] = old[u & (self.R - 1)]
        return new.reshape(-1)

    # ---- updating -----------------------------------------------------------
    def _fold_plan(self, cols: dict[str, ColumnValues]) -> FoldPlan:
        """How :meth:`update` folds this batch's lanes (:class:`FoldPlan`): active ``nn``
        counts and float ``sum`` lanes of columns without nulls in the batch go to the fused
        pass, the rest lane by lane (not ``rows``, not inactive ``nn`` lanes). A column's
        first null activates its ``nn`` lane first (it read the ``rows`` lane until then).
        Cached per (columns with nulls, active nn columns): the same for most batches."""
        nulls = tuple(c for c in self._null_cols if cols[c].valid.shape[0])
        for c in nulls:
            if c not in self.nn_active and ("nn", c) in self.arr:
                self.arr[("nn", c)][:] = self.arr[("rows", None)]
                self.nn_active.add(c)
        ck = (nulls, frozenset(self.nn_active))
        plan = self._plans.get(ck)
        if plan is None:
            fn = [li for li in self.lanes if li.lane.op == "nn" and li.lane.column not in nulls
                  and li.lane.column in self.nn_active]
            skip = {li.key for li in self.lanes if li.lane.op == "nn"
                    and li.lane.column not in self.nn_active}
            ff = [li for li in self.lanes if li.lane.op == "sum"
                  and li.dtype == np.float64 and li.lane.column not in nulls]
            done = {li.key for li in fn} | {li.key for li in ff} | skip
            rest = [li for li in self.lanes if li.key[0] != "rows" and li.key not in done]
            raw = frozenset(li.lane.column for li in ff if not li.shifted)  # type: ignore[misc]
            plan = self._plans[ck] = FoldPlan(fn, ff, rest, raw)
        return plan

    def update(self, codes: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
               cols: dict[str, ColumnValues], times: np.ndarray, n_codes: int,
               single: bool = False, top: int | None = None,
               tumble: tuple[int, int] | None = None) -> None:
        """Fold a batch into the lanes: row ``i`` updates units ``[lo[i], hi[i])`` of ``codes[i]``.

        ``single``: the caller guarantees ``hi == lo + 1`` (one unit per row: a
        cheaper kernel; ``hi`` may then be None); ``top``: ``max(hi)`` when the
        caller knows it. ``tumble=(origin, size)`` with ``lo`` None (and ``single``,
        ``top``): the units are the tumbling WIDs ``floor((times - origin) / size)``,
        computed here (:func:`tumble_units`).
        Requires ``base <= lo`` (late rows were removed). With ``track_nf``, raises
        ``nf_hi`` past the rows whose float sums are not finite (:func:`note_nonfinite`;
        the one-unit kernel checks its columns as it folds them).
        Cost: O(sum(hi-lo) x lanes).
        """
        if codes.shape[0] == 0:
            return
        if lo is None:  # tumbling WIDs by numpy's vectorized floor division, then the one-unit
            # fold: a division inside the fold's scatter loop delays every cell's address
            # (that fused kernel took 206 us per 64K-row batch of 10k keys, these two 139 us)
            assert tumble is not None and single and top is not None
            lo = tumble_units(times, *tumble)
        self.n_used = max(self.n_used, n_codes)
        if self.fixed:
            self.reserve(self.top, n_codes)
        else:
            if top is None:
                top = time_bounds(lo)[1] + 1 if single else time_bounds(hi)[1]
            self.reserve(top, n_codes)
            self.top = max(self.top, top)
        C, mask = self.C, self.mask
        # fused fast path: rows, plus nn counts and float sums of columns without nulls
        fn, ff, rest, raw = self._fold_plan(cols)
        nacc = tuple(self.arr[li.key] for li in fn) or (_DUMMY_I,)
        facc = tuple(self.arr[li.key] for li in ff) or (_DUMMY_F,)
        fvals = tuple(_readonly(lane_input(li, cols[li.lane.column], self.shift)[0])  # type: ignore[index]
                      for li in ff) or (_DUMMY_F,)
        checked: frozenset[str] = frozenset()  # float columns found all below SQ_SAFE
        if single:
            new, below = K.upd_rows_sums1(self.arr[("rows", None)], nacc, len(fn), facc, fvals,
                                          len(ff), codes, lo, C, mask, SQ_SAFE)
            self.live += new
            if below:  # every fused value array: the raw columns among them are checked
                checked = raw
        else:
            self.live += K.upd_rows_sums(self.arr[("rows", None)], nacc, len(fn), facc, fvals,
                                         len(ff), codes, lo, hi, C, mask)
        if self.track_nf and not checked >= self._nf_cols:
            self.nf_hi = note_nonfinite(self.nf_hi, self.lanes, cols, lo, hi, checked)
        if hi is None:
            assert single
            hi = lo + 1 if rest else lo
        for li in rest:
            op, col = li.lane.op, li.lane.column  # a shifted sum lane folds as a sum
            cv = cols[col]  # type: ignore[index]
            acc = self.arr[li.key]
            if op == "nn":
                K.upd_nn(acc, codes, lo, hi, C, mask, cv.valid)
            elif op == "sum":
                K.upd_sum(acc, codes, lo, hi, C, mask, lane_input(li, cv, self.shift)[0], cv.valid)
            elif op == "sumsq":
                vals, shift = lane_input(li, cv, self.shift)
                K.upd_sumsq(acc, codes, lo, hi, C, mask, vals, shift, cv.valid)
            elif op == "min":
                K.upd_min(acc, codes, lo, hi, C, mask, cv.values.astype(li.dtype, copy=False),
                          cv.valid)
            elif op == "max":
                K.upd_max(acc, codes, lo, hi, C, mask, cv.values.astype(li.dtype, copy=False),
                          cv.valid)
            elif op == "first":
                K.upd_first(self.tarr[li.key], acc, codes, lo, hi, C, mask, times,
                            cv.values.astype(li.dtype, copy=False), cv.valid)
            elif op == "last":
                K.upd_last(self.tarr[li.key], acc, codes, lo, hi, C, mask, times,
                           cv.values.astype(li.dtype, copy=False), cv.valid)

    # ---- reading / purging ----------------------------------------------------
    def row(self, unit: int) -> dict[tuple[str, str | None], np.ndarray]:
        """Copies of every lane's cells for ``unit`` (time lanes under key ('t:'+op, col))."""
        out = {k: self.view(k, unit).copy() for k in self.arr}  # view() resolves aliases
        for k in self.tarr:
            out[("t:" + k[0], k[1])] = self.view(k, unit, time=True).copy()
        return out

    def reset(self, unit: int) -> None:
        """Reset ``unit``'s row to the identities and drop its live cells."""
        if not (self.base <= unit < self.base + self.R) or unit >= self.top:
            return
        rows = self.view(("rows", None), unit)
        self.live -= int(np.count_nonzero(rows))
        for li in self.lanes:
            self.view(li.key, unit)[:] = li.identity()
            if li.key in self.tarr:
                self.view(li.key, unit, time=True)[:] = _I64MAX if li.lane.op == "first" else _I64MIN

    def reset_range(self, lo: int, hi: int) -> None:
        """Reset the rows of units ``[lo, hi)`` (those that are live: ``[base, top)``).

        Same as :meth:`reset` per unit, but as at most two 2-D slice fills
        per lane (the ring wraps once at most), over the code columns that
        were ever written. Cost: O((hi - lo) x codes used), no per-unit Python.
        """
        lo = max(lo, self.base)
        hi = min(hi, self.top, self.base + self.R)
        if hi <= lo:
            return
        R, C, n = self.R, self.C, min(self.n_used, self.C)
        if n == 0:
            return
        r0 = lo & self.mask
        cnt = hi - lo
        segs = [(r0, r0 + cnt)] if r0 + cnt <= R else [(r0, R), (0, r0 + cnt - R)]
        rows = self.arr[("rows", None)].reshape(R, C)
        self.live -= sum(int(np.count_nonzero(rows[a:b, :n])) for a, b in segs)
        for li in self.lanes:  # only the code columns ever written: [0, n_used)
            arr, ident = self.arr[li.key].reshape(R, C), li.identity()
            tarr = self.tarr[li.key].reshape(R, C) if li.key in self.tarr else None
            tid = _I64MAX if li.lane.op == "first" else _I64MIN
            for a, b in segs:
                arr[a:b, :n] = ident
                if tarr is not None:
                    tarr[a:b, :n] = tid

    def purge_below(self, unit: int, clean: bool = False) -> None:
        """Reset every unit ``< unit`` and move ``base`` there.

        ``clean``: the caller already reset every live cell below ``unit``
        (:meth:`reset_cells` after emitting them), so only ``base`` moves.
        """
        if not clean:
            self.reset_range(self.base, unit)
        self.base = max(self.base, unit)
        self.top = max(self.top, self.base)

    def make_fixed(self, rows: int) -> None:
        """Switch to per-code addressing with ``rows`` (rounded up to a power of two) ring rows."""
        R = 1 << max(int(np.ceil(np.log2(max(rows, 2)))), 1)
        assert self.live == 0
        self.fixed, self.base, self.top = True, 0, R
        self.reserve(R, self.C)

    def slots(self, units: np.ndarray, codes: np.ndarray) -> np.ndarray:
        return (units & self.mask) * self.C + codes

    def gather(self, units: np.ndarray, codes: np.ndarray) -> dict:
        """Lane values at cells ``(units[i], codes[i])`` (time lanes under ('t:'+op, col))."""
        j = self.slots(units, codes)
        out = {k: self.arr[self.alias(k)][j] for k in self.arr}
        for k, a in self.tarr.items():
            out[("t:" + k[0], k[1])] = a[j]
        return out

    def reset_cells(self, units: np.ndarray, codes: np.ndarray) -> None:
        """Reset cells ``(units[i], codes[i])`` (distinct) to the identities."""
        j = self.slots(units, codes)
        self.live -= int(np.count_nonzero(self.arr[("rows", None)][j]))
        for li in self.lanes:
            self.arr[li.key][j] = li.identity()
            if li.key in self.tarr:
                self.tarr[li.key][j] = _I64MAX if li.lane.op == "first" else _I64MIN

    def compact_codes(self, keep: np.ndarray) -> None:
        """Keep only code columns ``keep`` (ascending; every other column holds no live cell),
        renumbered ``0..len(keep)-1``; the code axis shrinks to ``max(64, 2 x len(keep))``.
        Cost: O(R x len(keep)) per lane."""
        assert not self.fixed
        k = keep.shape[0]
        C = max(64, 2 * k)
        for li in self.lanes:
            old = self.arr[li.key].reshape(self.R, self.C)
            new = np.full((self.R, C), li.identity(), li.dtype)
            new[:, :k] = old[:, keep]
            self.arr[li.key] = new.reshape(-1)
            if li.key in self.tarr:
                t = self.tarr[li.key].reshape(self.R, self.C)
                nt = np.full((self.R, C), _I64MAX if li.lane.op == "first" else _I64MIN, np.int64)
                nt[:, :k] = t[:, keep]
                self.tarr[li.key] = nt.reshape(-1)
        self.C, self.n_used = C, k

    def live_codes(self, n: int) -> np.ndarray:
        """Whether each code ``< n`` has a live cell. O(R x n)."""
        rows = self.arr[("rows", None)].reshape(self.R, self.C)[:, :min(n, self.C)]
        out = np.zeros(n, bool)
        out[: rows.shape[1]] = rows.any(axis=0)
        return out

    def snapshot(self) -> dict[str, Any]:
        return {"layout": self.layout, "nf_hi": self.nf_hi, "nn_active": set(self.nn_active), "fixed": self.fixed, "R": self.R, "C": self.C, "base": self.base, "top": self.top, "live": self.live,
                "shift": dict(self.shift), "arr": {k: v.copy() for k, v in self.arr.items()},
                "tarr": {k: v.copy() for k, v in self.tarr.items()}}

    def restore(self, s: dict[str, Any]) -> None:
        self.R, self.C, self.base, self.top, self.live = s["R"], s["C"], s["base"], s["top"], s["live"]
        self.fixed = s["fixed"]
        self.nn_active = set(s["nn_active"])
        self.shift = dict(s["shift"])
        self.nf_hi = s.get("nf_hi", NO_NONFINITE)
        self.arr = {k: v.copy() for k, v in s["arr"].items()}
        self.tarr = {k: v.copy() for k, v in s["tarr"].items()}
        self.n_used = self.C  # conservative: any column may hold data

    def _check(self) -> None:
        rows = self.arr[("rows", None)].reshape(self.R, self.C)
        assert self.n_used >= self.C or int(np.count_nonzero(rows[:, self.n_used:])) == 0
        assert self.top - self.base <= self.R, (self.base, self.top, self.R)
        assert int(np.count_nonzero(rows)) == self.live, (int(np.count_nonzero(rows)), self.live)
        assert (rows >= 0).all()
        for k, a in self.arr.items():
            if k[0] == "nn" and k[1] not in self.nn_active:
                assert not a.any(), f"inactive lane {k} holds data"
        live_rows = {u & self.mask for u in range(self.base, self.top)}
        for r in range(self.R):
            if r not in live_rows:
                assert not rows[r].any(), f"ring row {r} outside [base, top) holds data"
