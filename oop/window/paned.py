"""Paned-WID: pane-level tumbling sub-query + window-level query over panes (004 §6.2).

What it computes: the same rows as WID (:mod:`oop.window.aggregate`), with
partial aggregates kept per *pane* instead of per window. Pane size
``g = gcd(range, slide)`` (004 §6.2.1); pane ``p`` is
``[origin + p*g, origin + (p+1)*g)`` and sliding window ``w`` is made of
panes ``[((w+1)*slide - range)/g, (w+1)*slide/g)``. Landmark windows use
``g = slide`` and window ``w`` = panes ``[0, w]``.

* PLQ (on a tuple): one cell ``(code, pane)`` per tuple is updated -- the
  per-tuple cost no longer grows with ``range/slide``.
* WLQ (on a punctuation, per emitted window): full-differential lanes
  (rows, non-null counts, sums, shifted sums of squares: count, sum, mean,
  var, std) are kept in a running per-group state updated by adding the
  ``slide/g`` entering panes and subtracting the ``slide/g`` leaving ones
  (004 Eq. 6.2: ``2 G slide/g`` per window instead of ``G P``). Floating
  sums drift under add/subtract, so the running state is recomputed from
  the panes every ``P`` windows (amortized O(G) per window, error bounded).
  Selective lanes (min, max, first, last) are answered by prefix/suffix
  blocks of ``P`` panes aligned to pane ids (van Herk / Gil-Werman: a
  window is ``suf[plo] (+) pre[plo + P - 1]``), whose state persists across
  punctuations: each pane is folded into the prefixes once (when its first
  window is emitted: it is closed then) and into the suffixes once (when
  its block is), so O(1) per window and group plus two O(G) folds per pane
  over the whole stream, independent of ``P`` and of how many windows a
  punctuation closes (:func:`~oop.window.paned_kernels.paned_emit_sel`,
  fused with the sums, the output rows and the reset of the leaving
  panes); holistic
  aggregates (median, quantiles, distinct, heavy hitters, UDAFs) keep one
  (pane, code, value, count) table sorted by pane, so a window is the merge
  of its ``P`` sorted pane runs (:meth:`~oop.window.multiset.Multiset.select`:
  pairwise, ``ceil(log2 P)`` compiled O(values) rounds, no re-sort; one
  Python step per window, not per tuple). Median and quantiles skip the
  merge: all windows of a punctuation go through one compiled call
  (:meth:`PaneCombiner.quantiles`, :func:`~oop.window.paned_kernels.paned_quantiles`:
  per-pane cursors find each group's ``P`` value runs, a merge walk stops at
  the rank). Count-distinct and heavy hitters are differential in counting
  form (:meth:`PaneCombiner.distinct`, :meth:`PaneCombiner.heavy`;
  :func:`~oop.window.paned_kernels.paned_distinct`, ``paned_heavy``): a
  running ``(group, value) -> multiplicity`` table and each group's number
  of values with multiplicity > 0 move from window to window by the rows of
  the entering and leaving panes, all windows of a punctuation in one call,
  the state kept across punctuations; heavy hitters then sweep the table
  once per window into per-group top-k buffers. numba UDAFs fold every
  window of a punctuation in one call too (:func:`~oop.window.udaf.udaf_windows`,
  the panes' value runs merged on the fly); plain-Python UDAFs go window
  by window.
  Landmark windows fold each pane into the running state once.
  Sliding/tumbling windows without ``late="update"``: every bounded lane of
  all windows of a punctuation goes through compiled passes
  (:meth:`PaneCombiner.emit_block`: :func:`~oop.window.paned_kernels.paned_emit`,
  or ``paned_emit_sel`` when there are select lanes); landmark windows and
  update mode go window by window (:meth:`PaneCombiner.window_cells`).
* Fast path (sum-type lanes only, one pane in and one out per window):
  the step, the reset of the leaving pane and the output rows (codes,
  counts, sums; window bounds filled per window) are one pass over the
  codes (:func:`~oop.window.paned_kernels.paned_emit`), so purging costs no
  extra sweep.
* Layouts: the dense (pane ring x codes) lanes, or -- sparse keys, sum-type
  aggregates, chosen by the same rule as WID
  (:meth:`~oop.window.aggregate.WindowAggregate._choose_layout`) -- the hash
  table of live (pane, code) cells, whose emission walks each entering and
  leaving pane's cells (:func:`~oop.window.paned_kernels.paned_emit_hash`).
* Purge: panes before the first pane of the previous window (the
  differential update subtracts them at the next window); the holistic
  pane tables keep from the first pane of the next window, or of the
  previous one with count-distinct or heavy hitters (their running table
  removes them).

The operator is :class:`~oop.window.aggregate.WindowAggregate` with
``method="paned"``; :class:`PaneCombiner` is its pane state and emission.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numba import typeof
from numba.core import types as nb_types

from oop import compile_ahead
from oop.errors import ConfigError, ValueRangeError
from oop.window.aggregates import Agg
from oop.window.bucket import BucketLogic
from oop.window.evaluator import Emitted, UnitIds
from oop.window.kinds import Landmark, Sliding, WindowKind
from oop.window.multiset import Multiset
from oop.window import kernels as K
from oop.window import paned_kernels as PK
from oop.window.hashstore import HashCells
from oop.window.ring import Ring
from oop.window.values import LaneInfo, held_ranks, remap_ranks

__all__ = ["PaneCombiner"]

_SUM_OPS = {"rows", "nn", "sum", "sumsq"}
_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min
_NO_LUT = np.zeros(0, np.int64)
_FRESH = -(1 << 62)
#: the key value of every code (one int64 key column), a callable giving it, or None
KeyLut = np.ndarray | Callable[[], np.ndarray | None] | None  # pre_hi / suf_b of an empty select block state


def compile_emission_ahead(kind: WindowKind, lanes: Sequence[LaneInfo], aggs: Sequence[Agg],
                           lut: np.ndarray | None, layout: str = "dense") -> int:
    """Have the emission kernels of a Paned-WID operator over ``kind``, ``lanes`` and
    ``aggs`` compiled on another core (:mod:`oop.compile_ahead`) while the first batches
    run, for the argument types the emission will pass (``lut``: an empty key-value array
    of the type it gets, or None), in the order it calls them: the sum-type lanes'
    kernel (:meth:`PaneCombiner.emit_dense`, the row count alone when holistic aggregates
    ride along; :meth:`PaneCombiner.emit_hash` when ``layout`` is "hash": the cell store
    the first batch gets), then per holistic aggregate its quantile, count-distinct or
    heavy-hitter kernel. They run only from the first punctuation on, and the largest
    first compiles of a sliding query are among them (``paned_emit`` ~2.8 s,
    ``paned_emit_hash`` ~3 s and its sort ~1 s, ``paned_heavy`` with its table helpers ~3.8 s
    on a 2-core VM). Select lanes and UDAFs are not compiled ahead. Returns how many kernels the
    helper was asked for."""
    if isinstance(kind, Landmark) or not isinstance(kind, Sliding):
        return 0
    pc = PaneCombiner(kind, lanes, aggs)
    calls = pc._emission_calls(lut, layout)
    stores: dict[tuple[str, str | None], Multiset] = {}
    parts = [(0, np.zeros(1, np.int64), None)]  # one window of one cell
    for a in aggs:
        if not a.holistic:
            continue
        store = ("code" if a.spec.counts_values else "num", a.column)
        if store not in stores:
            ms = stores[store] = Multiset(np.int64 if store[0] == "code" else np.float64)
            ms.add(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, ms.dtype))
        ms = stores[store]
        q = a.spec.quantile_of(a)
        if q is not None:
            calls.append(pc._quantiles_call(ms, pc.flatten(parts, ms), q))
        elif a.spec.store_op in ("distinct", "top_k"):
            args = pc._d_args((a.spec.store_op, a.column), ms, parts, 1)[1]
            calls.append((PK.paned_distinct, args) if a.spec.store_op == "distinct" else
                         (PK.paned_heavy, pc._heavy_args(args, np.zeros(1, np.int64),
                                                         int(a.k))))  # type: ignore[arg-type]
    return sum(compile_ahead.request(kernel, args, _callee(kernel, args))
               for kernel, args in calls)


def _callee(kernel: Any, args: tuple) -> tuple[Any, tuple] | None:
    """The separately compiled callee of the sum-type emission ``kernel`` (called with
    ``args``) and the numba signature it calls it with, or None: the window step
    :func:`~oop.window.paned_kernels._add_sub_panes` of the dense ring's kernels
    (:meth:`PaneCombiner._sums_call`: its lane tuples, counts and the ring's geometry,
    pane bounds as int64, and a float lane count that is the constant 0 in
    :func:`~oop.window.paned_kernels.paned_emit_ints`), the sort
    :func:`~oop.window.paned_kernels._sort_head` of the hash cells' kernel."""
    typ, i64 = typeof, nb_types.int64
    if kernel is PK.paned_emit_hash:
        return PK._sort_head, (i64[::1], i64)
    if kernel not in (PK.paned_emit, PK.paned_emit_fused, PK.paned_emit_ints):
        return None
    n_f = nb_types.literal(0) if kernel is PK.paned_emit_ints else typ(args[3])
    return PK._add_sub_panes, (typ(args[4]), typ(args[0]), typ(args[1]), typ(args[5]),
                               typ(args[2]), n_f, i64, i64, i64, i64, typ(args[7]),
                               typ(args[6]), typ(args[10]))


def _nan_lt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a < b elementwise with NaN above every number (docs/semantics.md)."""
    return (a < b) | ((b != b) & (a == a))


class PaneCombiner:
    """Pane geometry and the window-level combine of one Paned-WID operator: its
    :class:`~oop.window.evaluator.Evaluator` (units are panes)."""

    method = "paned"
    track_nf = True  # subtracts panes: a NaN / inf sum must not be subtracted

    def __init__(self, kind: WindowKind, lanes: Sequence[LaneInfo], aggs: Sequence[Agg],
                 cache_pane_states: bool = True) -> None:
        self.kind = kind
        self.lanes = list(lanes)
        self.landmark = isinstance(kind, Landmark)
        if self.landmark:
            self.g, self.o = kind.s, kind.o  # type: ignore[attr-defined]
            self.P = 1
        elif isinstance(kind, Sliding):
            self.g, self.o = kind.pane, kind.o
            self.P = kind.r // self.g
        else:
            raise ConfigError(f"Paned-WID needs a sliding, tumbling or landmark window, not {kind!r}")
        #: windows stepped differentially (004 Eq. 6.2) between two recomputes from the panes:
        #: ``P``, or 0 (always recompute) for windows of one or two panes -- a step reads two
        #: panes, as many as recomputing such a window, and leaves the previous window's float
        #: rounding behind (a tumbling window of equal values then has a variance of ~1e-11,
        #: not 0: tests/test_variance_operators.py)
        self.steps = self.P if self.P > 2 else 0
        self.holistic = any(a.holistic for a in aggs)  # per-window code order needed
        self._hash_ok = not self.landmark and all(li.lane.op in _SUM_OPS for li in self.lanes)
        self._splits: dict[tuple[bool, ...], tuple | None] = {}  # see _lane_split (derived)
        # count-distinct / heavy-hitter columns: a running (code, value) multiplicity table
        # each (see distinct)
        self.distinct_cols = {a.column for a in aggs if a.spec.counts_values}
        self._d: dict[tuple[str, str | None], dict[str, Any]] = {}
        # Python UDAFs: folded pane states (see oop.window.udaf.pane_cache); off with
        # late="update" (revisions change closed panes)
        self.pane_states: dict[str, dict[int, dict[int, Any]]] = {}
        self.cache_pane_states = cache_pane_states
        self.running: dict[tuple[str, str | None], np.ndarray] = {}
        self.running_t: dict[tuple[str, str | None], np.ndarray] = {}
        self.run_w: int | None = None  # window the running state holds
        self.run_hi = 0  # landmark: panes < run_hi are folded in
        self.since = 0  # windows since the last full recompute
        # select lanes' prefix/suffix block state (paned_emit_sel), valid after window _s_w
        self._s: dict[str, Any] | None = None
        self._s_w: int | None = None
        self._s_n = 0
        self._s_pre_hi = self._s_suf_b = _FRESH

    # ---- evaluator hooks (oop.window.evaluator.Evaluator) ------------------------
    def one_unit_per_row(self) -> bool:
        """Each tuple updates one pane."""
        return True

    def tumbles_in_store(self) -> bool:
        """Pane ids come from :meth:`pane_ids`, not the store's tumbling WIDs."""
        return False

    def hash_lanes_ok(self) -> bool:
        """Hash cells hold panes of sum-type lanes on sliding/tumbling windows (their
        emission walks each pane's cells; select lanes and landmark windows read pane rows)."""
        return self._hash_ok

    def hash_revisions_ok(self) -> bool:
        """Revisions combine dense pane rows (:meth:`window_cells`)."""
        return False

    def early_ids(self, times: np.ndarray, update: bool) -> tuple | None:
        """:meth:`pane_ids` before the late check (it also finds ``min(times)``), except with
        ``update`` and on landmark windows. O(n), compiled."""
        return None if update or self.landmark else self.pane_ids(times)

    def unit_ids(self, bucket: BucketLogic, batch: Any, times: np.ndarray, early: Any,
                 need_hi: bool) -> UnitIds:
        """The pane of every row (``early`` when no row was dropped since); ``uhi`` only when
        ``need_hi``. The window ids are only needed to re-emit revised windows. O(n)."""
        ulo, low, high, _ = early or self.pane_ids(times)
        return UnitIds(ulo, ulo + 1 if need_hi else None, low, high)

    def unit_windows(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The windows ``[lo, hi)`` holding each pane of ``u`` (sliding windows). O(len(u))."""
        k: Sliding = self.kind  # type: ignore[assignment]
        return (u * self.g) // k.s, (u * self.g + k.r) // k.s

    def emit_cells(self, ring: Any, wids: Sequence[int], n: int,
                   key_lut: Callable[[], np.ndarray | None], update: bool) -> Emitted | None:
        """:meth:`emit_block` (key values through ``key_lut()`` where it can); None with
        ``update`` or on landmark windows (the caller then goes window by window)."""
        if update:
            return None
        res = self._emit_keyed(ring, wids, n, key_lut)
        if res is None:
            return None
        codes, lanes, ext, keyed = res
        return Emitted(None, codes, lanes, ext, key_values=keyed)

    # ---- geometry ----------------------------------------------------------
    def pane_ids(self, times: np.ndarray) -> tuple[np.ndarray, int, int, int]:
        """(pane of every time, min, max, smallest time) in one compiled pass. ``times``
        non-empty."""
        p, lo, hi, tmin = PK.pane_ids(times, self.o, self.g)
        # the largest time lies in pane hi: refuse windows that would wrap around int64
        try:
            self.kind.check_range(int(tmin), self.o + (int(hi) + 1) * self.g - 1)  # type: ignore[attr-defined]
        except ValueRangeError:  # near the edge: check (and name) the real largest time
            self.kind.check_range(int(tmin), int(times.max()))  # type: ignore[attr-defined]
        return p, int(lo), int(hi), int(tmin)

    def window_panes(self, w: int) -> tuple[int, int]:
        if self.landmark:
            return 0, w + 1
        k: Sliding = self.kind  # type: ignore[assignment]
        return ((w + 1) * k.s - k.r) // self.g, (w + 1) * k.s // self.g

    def first_window(self, pane: int) -> int:
        """The first window containing ``pane``."""
        if self.landmark:
            return max(pane, 0)
        # window w holds panes [((w+1)s - r)/g, (w+1)s/g): the first w with (w+1)s > pane*g
        return (pane * self.g) // self.kind.s  # type: ignore[attr-defined]

    def last_window(self, pane: int) -> int:
        """The last window containing ``pane``."""
        if self.landmark:
            return pane
        # the last w with (w+1)s - r <= pane*g
        return (pane * self.g + self.kind.r) // self.kind.s - 1  # type: ignore[attr-defined]

    def first_unit_needed(self, w: int) -> int:
        """The first pane window ``w`` (the next to emit) needs."""
        if self.landmark:
            return min(self.run_hi, w)
        # keep the panes leaving at the next window too: the differential update subtracts them
        return self.window_panes(w - 1)[0]

    def holistic_unit_needed(self, w: int) -> int:
        """The first pane the holistic stores must keep (landmark: all of them).

        With count-distinct, also the panes leaving at window ``w``: the running
        multiplicity table of :meth:`distinct` removes their rows then.
        """
        if self.landmark:
            return 0
        return self.window_panes(w - 1 if self.distinct_cols else w)[0]

    # ---- combining --------------------------------------------------------------
    def _fresh(self, ring: Ring, li: LaneInfo, plo: int, phi: int, n: int,
               acc: np.ndarray | None = None, acct: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        op = li.lane.op
        if acc is None:
            acc = np.full(n, li.identity(), li.dtype)
            if op in ("first", "last"):
                acct = np.full(n, _I64MAX if op == "first" else _I64MIN, np.int64)
        for p in range(max(plo, ring.base), min(phi, ring.top)):
            v = ring.view(li.key, p)[:n]
            if op in _SUM_OPS:
                acc += v
            elif op == "min":  # NaN is the greatest value (and min's float identity)
                np.fmin(acc, v, out=acc)
            elif op == "max":
                np.maximum(acc, v, out=acc)
            else:
                assert acct is not None
                t = ring.view(li.key, p, time=True)[:n]
                if op == "first":
                    better = (t < acct) | ((t == acct) & _nan_lt(v, acc))
                else:
                    better = (t > acct) | ((t == acct) & _nan_lt(acc, v))
                acc[better] = v[better]
                acct[better] = t[better]
        return acc, acct

    def _grow(self, n: int) -> None:
        for li in self.lanes:
            k = li.key
            if k in self.running and self.running[k].shape[0] < n:
                a = np.full(n, li.identity(), li.dtype)
                a[: self.running[k].shape[0]] = self.running[k]
                self.running[k] = a
                if k in self.running_t:
                    t = np.full(n, _I64MAX if li.lane.op == "first" else _I64MIN, np.int64)
                    t[: self.running_t[k].shape[0]] = self.running_t[k]
                    self.running_t[k] = t

    def emit_block(self, ring: Ring, wids: Sequence[int], n: int,
                   key_lut: np.ndarray | None = None
                   ) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray]] | None:
        """(codes, lanes, extents) of :meth:`_emit_keyed` (see there)."""
        res = self._emit_keyed(ring, wids, n, key_lut)
        return None if res is None else res[:3]

    def _emit_keyed(self, ring: Any, wids: Sequence[int], n: int, key_lut: KeyLut
                    ) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray], bool] | None:
        """Every window of ``wids`` (consecutive ids) in compiled passes, no per-window Python.

        Sum-type lanes (count, sum, mean, var, std, and the row / non-null
        counts) go through :func:`~oop.window.paned_kernels.paned_emit`
        (differential, 004 Eq. 6.2; one fused pass that also finds the live
        ``(window, code)`` cells, writes their window bounds and, when there
        are no select lanes, resets the leaving panes); with min/max/first/last
        lanes everything goes through :func:`~oop.window.paned_kernels.paned_emit_sel`
        instead (the sums as above, each select lane from prefix/suffix blocks
        kept across punctuations -- see :meth:`_sel_state` -- and the reset of
        the leaving panes in every lane). Holistic aggregates have no lanes: the caller combines their
        pane tables per window. Returns None for landmark windows (the running
        fold of :meth:`window_cells` handles them). Shares the sum-type running
        state with :meth:`window_cells`. Returns (codes, lanes, (window_start,
        window_end)) of the cells, ordered by (window, code). ``key_lut`` (int64
        key value per code; only without holistic aggregates): the first
        array holds the key values instead of codes; a callable giving it (or None) is only
        called by the dense layout (hash cells would pay O(keys) per punctuation for it). The
        last item says whether the first array holds key values.
        """
        if self.landmark or not wids:
            return None
        split = self._lane_split(ring)
        if split is None:
            return None  # pragma: no cover - every bounded lane op is one of the two kinds
        sel, sums, ik, fk = split
        self._grow(n)
        missing = False
        for li in sums:
            if li.key not in self.running or self.running[li.key].shape[0] < n:
                self.running[li.key] = np.zeros(max(n, 1), li.dtype)
                missing = True
        if ("rows", None) not in self.running or self.running[("rows", None)].shape[0] < n:
            self.running[("rows", None)] = np.zeros(max(n, 1), np.int64)
            missing = True
        w0, nw = int(wids[0]), int(wids[-1]) + 1 - int(wids[0])  # consecutive ids
        inc0 = (not missing) and self.run_w is not None and self.run_w == w0 - 1
        prev = self.window_panes(self.run_w) if self.run_w is not None else (0, 0)
        return ring.emit_pane_sums(self, sel=sel, ik=ik, fk=fk, n=n, w0=w0, nw=nw, prev=prev,
                                   inc0=inc0, key_lut=key_lut)

    def _lane_split(self, ring: Any) -> tuple[list[LaneInfo], list[LaneInfo], list, list] | None:
        """(select lanes, sum-type lanes, int keys, float keys) of the emission: the lanes
        the store holds itself (an inactive nn lane reads the rows lane, see
        :meth:`~oop.window.ring.Ring.alias`), the rows lane first among the int keys; None
        for a lane of neither kind. Cached per which nn lanes are aliased. O(lanes)."""
        ck = tuple(ring.alias(li.key) == li.key for li in self.lanes if li.lane.op == "nn")
        if ck in self._splits:
            return self._splits[ck]
        real = [li for li in self.lanes if ring.alias(li.key) == li.key]
        split = None
        if all(li.lane.op in _SUM_OPS or li.lane.op in K.SELECT_OPS for li in real):
            sel = [li for li in real if li.lane.op in K.SELECT_OPS]
            sums = [li for li in real if li.lane.op in _SUM_OPS]
            ik = [("rows", None)] + [li.key for li in sums
                                     if li.dtype == np.int64 and li.key != ("rows", None)]
            fk = [li.key for li in sums if li.dtype == np.float64]
            split = (sel, sums, ik, fk)
        self._splits[ck] = split
        return split

    def _lanes_out(self, ik: list, fk: list, iv: Any, fv: Any) -> dict:
        """The emitted lanes by key (inactive nn lanes read the rows lane)."""
        lanes: dict = {x: iv[q] for q, x in enumerate(ik)}
        lanes.update({x: fv[q] for q, x in enumerate(fk)})
        for li in self.lanes:
            if li.key not in lanes:
                lanes[li.key] = lanes[("rows", None)]
        return lanes

    def emit_hash(self, ring: HashCells, *, sel: list[LaneInfo], ik: list, fk: list, n: int,
                  w0: int, nw: int, prev: tuple[int, int], inc0: bool,
                  key_lut: KeyLut) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray], bool]:
        """:meth:`emit_block` over hash cells (sparse keys, sum-type lanes only): walks the
        live cells of each entering and leaving pane
        (:func:`~oop.window.paned_kernels.paned_emit_hash`). ``key_lut``: the codes are
        mapped to key values after the kernel."""
        assert not sel, "the hash layout is only chosen for sum-type lanes"
        # panes below window w0 - 1's are not read (and after a sparse span, ring.base
        # may lie far below them: offs would span the gap)
        pa0 = max(ring.base, self.window_panes(w0 - 1)[0])
        pa1 = max(pa0, self.window_panes(w0 + nw - 1)[1])
        order, offs = ring.pane_cells(pa0, pa1)
        kernel, args = self._hash_call(ring, ik, fk, n, w0, nw, prev, inc0, order, offs, pa0)
        compile_ahead.wait(kernel)  # compiled on another core (compile_emission_ahead)
        codes, start, end, iv, fv, self.since = kernel(*args)
        self.run_w = w0 + nw - 1
        lut = None if callable(key_lut) else key_lut  # O(keys) to build: only when given
        if lut is not None:
            codes = lut[codes]
        return codes, self._lanes_out(ik, fk, iv, fv), (start, end), lut is not None

    def _hash_call(self, ring: HashCells, ik: list, fk: list, n: int, w0: int, nw: int,
                   prev: tuple[int, int], inc0: bool, order: np.ndarray, offs: np.ndarray,
                   pa0: int) -> tuple[Any, tuple]:
        """:func:`~oop.window.paned_kernels.paned_emit_hash` and its arguments: what
        :meth:`emit_hash` calls over the cells ``order`` of panes ``pa0 ..`` (``offs``), and
        what :func:`compile_emission_ahead` has compiled."""
        k: Sliding = self.kind  # type: ignore[assignment]
        df = (np.zeros(1, np.float64),)
        return PK.paned_emit_hash, (
            order, offs, pa0, ring.cell_c,
            tuple(ring.arr[x] for x in ik), len(ik), tuple(ring.arr[x] for x in fk) or df,
            len(fk), tuple(self.running[x] for x in ik),
            tuple(self.running[x] for x in fk) or df, n, w0, nw, k.s, k.r, self.g, k.o,
            prev[0], prev[1], inc0, self.since, self.steps, self.holistic, ring.nf_hi)

    def emit_dense(self, ring: Ring, *, sel: list[LaneInfo], ik: list, fk: list, n: int,
                   w0: int, nw: int, prev: tuple[int, int], inc0: bool,
                   key_lut: KeyLut
                   ) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray], bool]:
        """:meth:`emit_block` over the dense pane ring: :func:`~oop.window.paned_kernels.paned_emit`
        (sum-type lanes), or :meth:`_emit_sel` with select lanes, or :meth:`_emit_rows` when the
        row count is the only lane and holistic aggregates need the cells (a kernel that
        compiles in a fraction of ``paned_emit``'s time)."""
        lut = key_lut() if callable(key_lut) else key_lut
        if sel:
            assert n <= ring.C, (n, ring.C)
            return self._emit_sel(ring, sel, ik, fk, n, w0, nw, prev, inc0, lut)
        # no select lanes: every lane's identity is 0, so the kernel can reset the
        # leaving panes as it subtracts them (the purge then has nothing left to sweep)
        zero = not ring.tarr
        if self._rows_only(ik, fk):
            return self._emit_rows(ring, n, w0, nw, prev, inc0, zero, lut)
        kernel, args = self._sums_call(ring, ik, fk, n, w0, nw, prev, inc0, zero, lut)
        compile_ahead.wait(kernel)  # compiled on another core (compile_emission_ahead)
        codes, start, end, iv, fv, self.since, dead = kernel(*args)
        self.run_w = w0 + nw - 1
        if zero:
            ring.forget_emitted(dead, self.window_panes(self.run_w)[0])
        return codes, self._lanes_out(ik, fk, iv, fv), (start, end), lut is not None

    def _emission_calls(self, lut: np.ndarray | None, layout: str = "dense"
                        ) -> list[tuple[Any, tuple]]:
        """The sum-type lanes' emission kernel :meth:`emit_dense` (``layout`` "hash":
        :meth:`emit_hash`) will call and its arguments' types (a store of one code): []
        with select lanes (not compiled ahead). Sets up this (throwaway) combiner's running
        state."""
        ring = HashCells(self.lanes) if layout == "hash" else Ring(self.lanes, rows=2, codes=1)
        split = self._lane_split(ring)
        if split is None or split[0]:
            return []
        _, sums, ik, fk = split
        for li in sums:
            self.running[li.key] = np.zeros(1, li.dtype)
        self.running[("rows", None)] = np.zeros(1, np.int64)
        if isinstance(ring, HashCells):
            none = np.zeros(0, np.int64)
            return [self._hash_call(ring, ik, fk, 1, 0, 0, (0, 0), False, none, none, 0)]
        zero = not ring.tarr
        if self._rows_only(ik, fk):
            return [self._rows_call(ring, 1, 0, 0, (0, 0), False, zero)]
        return [self._sums_call(ring, ik, fk, 1, 0, 0, (0, 0), False, zero, lut)]

    def _rows_only(self, ik: list, fk: list) -> bool:
        """Whether the emission's only lane is the row count beside holistic aggregates:
        then a small kernel of its own (:meth:`_emit_rows`) serves it."""
        return bool(self.holistic) and len(ik) == 1 and not fk

    def _sums_call(self, ring: Ring, ik: list, fk: list, n: int, w0: int, nw: int,
                   prev: tuple[int, int], inc0: bool, zero: bool, lut: np.ndarray | None
                   ) -> tuple[Any, tuple]:
        """The emission kernel of sum-type lanes on the dense ring and its arguments: what
        :meth:`emit_dense` calls, and what :func:`compile_emission_ahead` has compiled."""
        k: Sliding = self.kind  # type: ignore[assignment]
        df = (np.zeros(1, np.float64),)
        return PK.emit_kernel(len(ik), len(fk), not self.holistic), (
            tuple(ring.arr[x] for x in ik), len(ik), tuple(ring.arr[x] for x in fk) or df, len(fk),
            tuple(self.running[x] for x in ik), tuple(self.running[x] for x in fk) or df,
            ring.C, ring.mask, ring.base, ring.top, n, w0, nw, k.s, k.r, self.g, k.o,
            prev[0], prev[1], inc0, self.since, self.steps, zero,
            lut if lut is not None else _NO_LUT, ring.nf_hi)

    def _emit_rows(self, ring: Ring, n: int, w0: int, nw: int, prev: tuple[int, int],
                   inc0: bool, zero: bool, lut: np.ndarray | None
                   ) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray], bool]:
        """:meth:`emit_dense` when the row count is the only lane (holistic aggregates):
        :func:`~oop.window.paned_kernels.paned_emit_rows`."""
        rk = ("rows", None)
        kernel, args = self._rows_call(ring, n, w0, nw, prev, inc0, zero)
        compile_ahead.wait(kernel)
        codes, start, end, cnt, dead = kernel(*args)
        self.run_w = w0 + nw - 1
        if zero:
            ring.forget_emitted(dead, self.window_panes(self.run_w)[0])
        if lut is not None:
            codes = lut[codes]
        return codes, self._lanes_out([rk], [], [cnt], []), (start, end), lut is not None

    def _rows_call(self, ring: Ring, n: int, w0: int, nw: int, prev: tuple[int, int],
                   inc0: bool, zero: bool) -> tuple[Any, tuple]:
        """:func:`~oop.window.paned_kernels.paned_emit_rows` and its arguments: what
        :meth:`_emit_rows` calls, and what :func:`compile_emission_ahead` has compiled."""
        k: Sliding = self.kind  # type: ignore[assignment]
        rk = ("rows", None)
        return PK.paned_emit_rows, (
            ring.arr[rk], self.running[rk], ring.C, ring.mask, ring.base, ring.top, n, w0, nw,
            k.s, k.r, self.g, k.o, prev[0], prev[1], inc0, zero)

    def _sel_state(self, sel: list[LaneInfo], n: int, C2: int, w0: int) -> tuple[int, int]:
        """The persistent block state of the select lanes, (re)allocated or extended to ``n`` codes.

        Returns (pre_hi, suf_b) to pass to :func:`~oop.window.paned_kernels.paned_emit_sel`:
        the saved ones when the state continues from window ``w0 - 1``, else "start afresh".
        New codes (``>= self._s_n``) had no tuple in the closed panes the state holds: their
        columns are set to the identities.
        """
        keys = [li.key for li in sel]
        P = self.P
        fresh = (self._s is None or self._s["keys"] != keys or self._s["C2"] < n
                 or self._s_w != w0 - 1)
        if self._s is None or self._s["keys"] != keys or self._s["C2"] < n:
            si = [li for li in sel if li.dtype == np.int64]
            sf = [li for li in sel if li.dtype == np.float64]
            has_t = any(li.lane.op in ("first", "last") for li in sel)
            nt = P * C2 if has_t else 0
            ni, nf = P * C2 if si else 0, P * C2 if sf else 0  # (1, 0) dummies: no memory
            self._s = {"keys": keys, "C2": C2,
                       "prei": np.empty((max(len(si), 1), ni), np.int64),
                       "sufi": np.empty((max(len(si), 1), ni), np.int64),
                       "pref": np.empty((max(len(sf), 1), nf), np.float64),
                       "suff": np.empty((max(len(sf), 1), nf), np.float64),
                       "pret": np.empty((len(sel), nt), np.int64),
                       "suft": np.empty((len(sel), nt), np.int64)}
            self._s_n = 0
        if fresh:
            self._s_n = n  # every column is recomputed from the ring
            return _FRESH, _FRESH
        if n > self._s_n:  # codes seen since: identities in the closed panes
            st, a, b = self._s, self._s_n, n
            C2 = st["C2"]
            si = [li for li in sel if li.dtype == np.int64]
            sf = [li for li in sel if li.dtype == np.float64]
            for q, li in enumerate(si):
                for nm in ("prei", "sufi"):
                    st[nm][q].reshape(P, C2)[:, a:b] = li.identity()
            for q, li in enumerate(sf):
                for nm in ("pref", "suff"):
                    st[nm][q].reshape(P, C2)[:, a:b] = li.identity()
            if st["pret"].shape[1]:
                for q, li in enumerate(si + sf):
                    t = _I64MAX if li.lane.op == "first" else _I64MIN
                    for nm in ("pret", "suft"):
                        st[nm][q].reshape(P, C2)[:, a:b] = t
            self._s_n = n
        return self._s_pre_hi, self._s_suf_b

    def _emit_sel(self, ring: Ring, sel: list[LaneInfo], ik: list, fk: list, n: int, w0: int,
                  nw: int, prev: tuple[int, int], inc0: bool, key_lut: np.ndarray | None
                  ) -> tuple[np.ndarray, dict, tuple[np.ndarray, np.ndarray], bool]:
        """:meth:`emit_block` with select lanes: one :func:`~oop.window.paned_kernels.paned_emit_sel`
        call (sums, select blocks, output rows and the reset of the leaving panes)."""
        k: Sliding = self.kind  # type: ignore[assignment]
        si = [li for li in sel if li.dtype == np.int64]
        sf = [li for li in sel if li.dtype == np.float64]
        sel = si + sf
        pre_hi, suf_b = self._sel_state(sel, n, ring.C, w0)
        st = self._s
        assert st is not None
        df, di = (np.zeros(1, np.float64),), (np.zeros(1, np.int64),)
        ops = np.array([K.SELECT_OPS[li.lane.op] for li in sel], np.int64)
        tid = np.array([_I64MAX if li.lane.op == "first" else _I64MIN for li in sel], np.int64)
        stl = tuple(ring.tarr[li.key] if li.lane.op in ("first", "last") else _NO_LUT for li in sel)
        (codes, start, end, iv, fv, svi, svf, sto, self.since, dead, self._s_pre_hi,
         self._s_suf_b) = PK.paned_emit_sel(
            tuple(ring.arr[x] for x in ik), len(ik), tuple(ring.arr[x] for x in fk) or df, len(fk),
            tuple(self.running[x] for x in ik), tuple(self.running[x] for x in fk) or df,
            tuple(ring.arr[li.key] for li in si) or di, len(si),
            tuple(ring.arr[li.key] for li in sf) or df, len(sf), stl, ops,
            np.array([li.identity() for li in si] or [0], np.int64),
            np.array([li.identity() for li in sf] or [0.0], np.float64), tid,
            st["prei"], st["sufi"], st["pref"], st["suff"], st["pret"], st["suft"], st["C2"],
            pre_hi, suf_b, ring.C, ring.mask, ring.base, ring.top, n, w0, nw, k.s, k.r, self.g,
            k.o, prev[0], prev[1], inc0, self.since, self.P, self.steps,
            key_lut if key_lut is not None else _NO_LUT, ring.nf_hi)
        self.run_w = self._s_w = w0 + nw - 1
        ring.forget_emitted(dead, self.window_panes(self.run_w)[0])
        lanes: dict = {x: iv[q] for q, x in enumerate(ik)}
        lanes.update({x: fv[q] for q, x in enumerate(fk)})
        for q, li in enumerate(si):
            lanes[li.key] = svi[q]
        for q, li in enumerate(sf):
            lanes[li.key] = svf[q]
        for q, li in enumerate(sel):
            if li.lane.op in ("first", "last"):
                lanes[("t:" + li.lane.op, li.key[1])] = sto[q]
        for li in self.lanes:
            if li.key not in lanes:
                lanes[li.key] = lanes[("rows", None)]
        return codes, lanes, (start, end), key_lut is not None

    def window_cells(self, ring: Ring, w: int, n: int,
                     differential_ok: bool = True) -> tuple[np.ndarray, dict] | None:
        """(live codes, lane values) of window ``w`` combined from its panes."""
        real = [li for li in self.lanes if ring.alias(li.key) == li.key]
        if len(real) != len(self.lanes):  # inactive nn lanes read the rows lane
            res = self._window_cells(ring, w, n, differential_ok, real)
            if res is not None:
                for li in self.lanes:
                    if li.key != ring.alias(li.key):
                        res[1][li.key] = res[1][("rows", None)]
            return res
        return self._window_cells(ring, w, n, differential_ok, self.lanes)

    def _window_cells(self, ring: Ring, w: int, n: int, differential_ok: bool,
                      lanes_: list[LaneInfo]) -> tuple[np.ndarray, dict] | None:
        plo, phi = self.window_panes(w)
        out: dict[tuple[str, str | None], np.ndarray] = {}
        outt: dict[tuple[str, str | None], np.ndarray] = {}
        if self.landmark:
            self._grow(n)
            if not self.running:
                for li in lanes_:
                    self.running[li.key], t = self._fresh(ring, li, 0, 0, n)
                    if t is not None:
                        self.running_t[li.key] = t
            for li in lanes_:  # an nn lane activated later: it equalled rows until then
                if li.key not in self.running:
                    self.running[li.key] = self.running[("rows", None)].copy()
            lo = max(self.run_hi, plo)
            for li in lanes_:
                self._fresh(ring, li, lo, phi, n, self.running[li.key][:n],
                            self.running_t.get(li.key, np.zeros(0, np.int64))[:n] if li.key in self.running_t else None)
            self.run_hi = max(self.run_hi, phi)
            out = {k: v[:n] for k, v in self.running.items()}
            outt = {k: v[:n] for k, v in self.running_t.items()}
        else:
            diff = [li for li in lanes_ if li.lane.op in _SUM_OPS] if differential_ok else []
            if diff:
                self._grow(n)
                # a pane with a NaN / inf sum cannot be subtracted (docs/semantics.md)
                incremental = (self.run_w == w - 1 and self.since < self.steps
                               and self.window_panes(w - 1)[0] > ring.nf_hi
                               and all(li.key in self.running for li in diff))
                if incremental:
                    plo0, phi0 = self.window_panes(w - 1)
                    for li in diff:
                        acc = self.running[li.key][:n]
                        for p in range(max(phi0, ring.base), min(phi, ring.top)):
                            acc += ring.view(li.key, p)[:n]
                        for p in range(max(plo0, ring.base), min(plo, ring.top)):
                            acc -= ring.view(li.key, p)[:n]
                    self.since += 1
                else:
                    for li in diff:
                        self.running[li.key] = self._fresh(ring, li, plo, phi, n)[0]
                    self.since = 0
                self.run_w = w
                for li in diff:
                    out[li.key] = self.running[li.key][:n]
            for li in lanes_:
                if li.key not in out:
                    acc, acct = self._fresh(ring, li, plo, phi, n)
                    out[li.key] = acc
                    if acct is not None:
                        outt[li.key] = acct
        codes = np.flatnonzero(out[("rows", None)][:n])
        if codes.size == 0:
            return None
        lanes = {k: v[codes] for k, v in out.items()}
        for k, v in outt.items():
            lanes[("t:" + k[0], k[1])] = v[codes]
        return codes, lanes

    def flatten(self, parts: Sequence[tuple], ms: Any, ascending: bool = False,
                lo: int | None = None) -> tuple | None:
        """The windows of ``parts`` ``[(wid, codes, _), ...]`` as the holistic kernels take them:
        (cells, cb: window k's cells are ``cells[cb[k]:cb[k+1]]``, plo, phi: its panes, pa0,
        offs: pane ``p``'s rows of the compacted Multiset ``ms`` are ``offs[p - pa0]:offs[p -
        pa0 + 1]``). The pane span starts at ``lo`` when it is lower than the first window's.
        With ``ascending``: None when some window's codes do not ascend."""
        ms.compact()
        cells = np.concatenate([np.asarray(c, np.int64) for _, c, _ in parts])
        cb = np.zeros(len(parts) + 1, np.int64)
        cb[1:] = np.cumsum([len(c) for _, c, _ in parts])
        if ascending:
            up = np.ones(cells.shape[0], bool)
            up[1:] = cells[1:] > cells[:-1]
            up[cb[:-1][cb[:-1] < cells.shape[0]]] = True
            if not up.all():
                return None
        wp = [self.window_panes(int(w)) for w, _, _ in parts]
        plo = np.array([a for a, _ in wp], np.int64)
        phi = np.array([b for _, b in wp], np.int64)
        pa0 = int(plo.min()) if lo is None else min(int(plo.min()), lo)
        offs = np.searchsorted(ms.unit, np.arange(pa0, int(phi.max()) + 1, dtype=np.int64))
        return cells, cb, plo, phi, pa0, offs.astype(np.int64)

    def quantiles(self, ms: Any, parts: Sequence[tuple], q: float
                  ) -> tuple[np.ndarray, np.ndarray] | None:
        """q-quantile (median: 0.5) of every cell of ``parts`` ``[(wid, codes, _), ...]`` in one
        compiled call (:func:`~oop.window.paned_kernels.paned_quantiles`) over the
        :class:`~oop.window.multiset.Multiset` ``ms`` of pane tables. Returns (values, present), or
        None when some window's codes do not ascend (the caller then goes window by window)."""
        lay = self.flatten(parts, ms, ascending=True)
        if lay is None:  # the cursors need ascending codes per window
            return None
        kernel, args = self._quantiles_call(ms, lay, q)
        compile_ahead.wait(kernel)
        vals, present = kernel(*args)
        return vals, present.astype(bool)

    @staticmethod
    def _quantiles_call(ms: Any, lay: tuple, q: float) -> tuple[Any, tuple]:
        """:func:`~oop.window.paned_kernels.paned_quantiles` and its arguments over the
        windows ``lay`` of :meth:`flatten`: what :meth:`quantiles` calls, and what
        :func:`compile_emission_ahead` has compiled."""
        cells, cb, plo, phi, pa0, offs = lay
        return PK.paned_quantiles, (ms.code, ms.value.astype(np.float64, copy=False), ms.count,
                                    pa0, offs, plo, phi, cb, cells, float(q))

    def distinct(self, ms: Any, parts: Sequence[tuple], col: str | None, n_codes: int) -> np.ndarray:
        """Exact count-distinct of every cell of ``parts`` ``[(wid, codes, _), ...]`` (ascending
        windows) in one compiled call (:func:`~oop.window.paned_kernels.paned_distinct`).

        The state -- a ``(code, value) -> multiplicity`` table and the distinct
        count per code of the last window computed -- persists across
        punctuations, so each pane's rows are added once (when it enters a
        window) and removed once (when it leaves): O(rows) per pane instead
        of merging the ``P`` pane tables of every window. It continues only
        while the :class:`~oop.window.multiset.Multiset` still holds the panes
        that leave (``ms.floor``) and windows move forward; otherwise it is
        rebuilt from the first window's panes.
        """
        st, args = self._d_args(("distinct", col), ms, parts, n_codes)
        compile_ahead.wait(PK.paned_distinct)
        out, *state = PK.paned_distinct(*args)
        self._d_keep(st, state)
        return out

    def heavy(self, ms: Any, parts: Sequence[tuple], col: str | None, n_codes: int,
              rank: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Heavy hitters of every cell of ``parts`` in one compiled call
        (:func:`~oop.window.paned_kernels.paned_heavy`), on the same kind of
        running state as :meth:`distinct` (kept apart). ``rank``: the sort
        position of every value code (ties between equal counts go by value).
        Returns (offsets per cell, value codes, counts), most frequent first."""
        st, args = self._d_args(("heavy", col), ms, parts, n_codes)
        compile_ahead.wait(PK.paned_heavy)
        off, hv, hn, *state = PK.paned_heavy(*self._heavy_args(args, rank, k))
        self._d_keep(st, state)
        return off, hv, hn

    @staticmethod
    def _heavy_args(args: tuple, rank: np.ndarray, k: int) -> tuple:
        """:func:`~oop.window.paned_kernels.paned_heavy`'s arguments: :meth:`_d_args`'s with
        the value ranks and ``k`` before the last two."""
        return (*args[:-2], rank, int(k), *args[-2:])

    def _d_args(self, key: tuple[str, str | None], ms: Any, parts: Sequence[tuple], n_codes: int
                ) -> tuple[dict[str, Any], tuple]:
        """The running state of ``key`` (made or grown to ``n_codes``) and the kernel arguments:
        the pane tables, the windows' panes, whether the state continues, the cells."""
        first = self.window_panes(int(parts[0][0]))
        st = self._d.get(key)
        cont = (st is not None and ms.floor <= st["lo"] and st["lo"] <= first[0]
                and st["hi"] <= first[1])
        if st is None:
            st = self._d[key] = {"tc": np.full(16, -1, np.int64), "tv": np.zeros(16, np.int64),
                                 "tm": np.zeros(16, np.int64), "used": 0, "lo": 0, "hi": 0,
                                 "dcount": np.zeros(64, np.int64)}
        if st["dcount"].shape[0] < n_codes:  # new codes: no value yet
            grown = np.zeros(max(n_codes, 2 * st["dcount"].shape[0]), np.int64)
            grown[: st["dcount"].shape[0]] = st["dcount"]
            st["dcount"] = grown
        cells, cb, plo, phi, pa0, offs = self.flatten(parts, ms, lo=st["lo"] if cont else None)
        st["lo"], st["hi"], prev = int(plo[-1]), int(phi[-1]), (st["lo"], st["hi"])
        return st, (ms.code, ms.value.astype(np.int64, copy=False), ms.count, pa0, offs, plo,
                    phi, prev[0], prev[1], cont, st["tc"], st["tv"], st["tm"], st["used"],
                    st["dcount"], cb, cells)

    @staticmethod
    def _d_keep(st: dict[str, Any], state: list) -> None:
        """Store the (maybe regrown) table a kernel returned."""
        st["tc"], st["tv"], st["tm"], st["used"] = state

    def forget_codes(self) -> None:
        """Group codes were renumbered (key compaction, not on landmark windows): drop every
        per-code state kept across punctuations, so the next emission rebuilds it from the
        panes still held -- the running sums (recomputed from the window's panes), the select
        prefix/suffix blocks (as after :meth:`remap_values`), the count-distinct and
        heavy-hitter multiplicity tables (from the first window's pane tables, which the
        Multiset keeps: :meth:`holistic_unit_needed`) and the Python UDAF pane states. O(1);
        the rebuild costs one window's panes."""
        self.running, self.running_t = {}, {}
        self.run_w = None
        self._s, self._s_w = None, None  # reallocated at the ring's new code width
        self._d = {}
        self.pane_states = {}

    def forget_values(self) -> None:
        """Value codes of the count-distinct / heavy-hitter columns were renumbered (value
        compaction): drop their multiplicity tables, rebuilt from the pane tables. O(1)."""
        self._d = {}

    def nbytes(self) -> int:
        """Bytes of the running window, select blocks, multiplicity tables and (estimated)
        UDAF pane states. O(parts); asked after every punctuation (the state budget)."""
        n = sum(a.nbytes for a in self.running.values())
        if self.running_t:
            n += sum(a.nbytes for a in self.running_t.values())
        if self._s is not None:
            n += sum(v.nbytes for v in self._s.values() if isinstance(v, np.ndarray))
        if self._d:
            n += sum(v.nbytes for d in self._d.values() for v in d.values()
                     if isinstance(v, np.ndarray))
        if self.pane_states:  # Python UDAF pane states: ~64 bytes per (pane, code) state
            n += 64 * sum(len(p) for c in self.pane_states.values() for p in c.values())
        return n

    def remap_values(self, key: tuple[str, str | None], remap: np.ndarray) -> None:
        """Re-rank lane ``key``'s values held here (see :meth:`Ring.remap_values`): the running
        window and, by a rebuild from the ring's panes, the select blocks."""
        if key in self.running:
            remap_ranks(self.running[key], self.running_t.get(key), key[0], remap)
        self._s_w = None

    def held_values(self, key: tuple[str, str | None]) -> np.ndarray:
        """The ranks lane ``key``'s running window holds (the select blocks are rebuilt)."""
        if key not in self.running:
            return np.zeros(0, np.int64)
        return held_ranks(self.running[key], self.running_t.get(key), key[0])

    def snapshot(self) -> dict[str, Any]:
        return {"running": {k: v.copy() for k, v in self.running.items()},
                "running_t": {k: v.copy() for k, v in self.running_t.items()},
                "run_w": self.run_w, "run_hi": self.run_hi, "since": self.since}

    def restore(self, s: dict[str, Any]) -> None:
        self.running = {k: v.copy() for k, v in s["running"].items()}
        self.running_t = {k: v.copy() for k, v in s["running_t"].items()}
        self.run_w, self.run_hi, self.since = s["run_w"], s["run_hi"], s["since"]
        self._s_w = None  # the select block state is rebuilt from the ring's panes
        self._d = {}  # so is the count-distinct state (from the restored Multiset)
        self.pane_states = {}  # and the UDAF pane states
