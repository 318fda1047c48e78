"""Aggregate: WID window aggregation keyed by (group, wid) (004 §6.1.3.2, Fig. 6-4).

What it computes: for every window ``w`` of the kind and every group ``g``
with at least one tuple in ``extent(w)``, one row
``(keys of g, window_start, window_end, aggregates over extent(w) ∩ g)``.

This operator fuses Bucket (:mod:`oop.window.bucket`, the ``wids()`` tags)
and Aggregate, so tags never become Arrow columns. ``method`` chooses how
partial aggregates are kept:

* ``"wid"`` -- units are window ids: tuple ``t`` updates the cells
  ``(code(t), w)`` for ``w in [wid_lo, wid_hi)``; emitting window ``w`` reads
  its ring row. Cost per tuple O(range/slide x lanes).
* ``"paned"`` -- Paned-WID (004 §6.2, :mod:`oop.window.paned`): units are
  panes of ``gcd(range, slide)``; each tuple updates one pane; a window is
  combined from its panes when it is emitted, differentially (Eq. 6.2) for
  full-differential aggregates.
* ``"auto"`` -- the cost model of Eqs. 6.1-6.4 decides on the first batch
  (tumbling windows: WID; landmark: panes).

State: partial aggregates per ``(unit, group code)`` (codes from
:class:`~oop.window.keys.KeyEncoder`), in one of two layouts chosen per
operator (``layout="auto"``; reported in ``plan_info["layout"]``): the dense
ring of :class:`~oop.window.store.Ring` (units x codes) where keys are dense,
or the hash table of live cells of :class:`~oop.window.hashstore.HashCells`
where a window (Paned-WID: a pane) holds < 5 % of >= 1024 keys. Auto picks
hash only where each tuple updates one unit (panes, tumbling windows) and,
for Paned-WID, for sum-type aggregates on sliding windows. The choice is made
on the first batch and re-checked after every punctuation (keys keep
arriving): dense -> hash below 5 %, hash -> dense above 20 %
(``plan_info["layout_switches"]``); plus a multiset store per holistic
aggregate column. Lane values are numbers; decimals are held unscaled
(exact sums), and min/max/first/last over strings or binary hold ranks in the
column's sorted distinct values (:class:`~oop.window.keys.ValueRanks`),
remapped in place wherever the state holds them when new values arrive.
``state_size().items`` = live ``(unit, group)`` cells + buffered holistic
values + distinct keys; ``bytes`` = allocated arrays.

Hostile feeds (:mod:`oop.limits`): before the dense ring grows over a span
of units that is mostly empty (a row stamped far ahead of the rest), the
state moves to hash cells (:meth:`WindowAggregate._sparse_span`) and
emission walks only the windows holding cells; keys whose windows all
closed are forgotten (:meth:`WindowAggregate._compact_keys`); every growth
is checked against the plan's state budget and ``max_state_bytes`` first
(``StateLimitError`` before allocating).

On a tuple (batch): tuples with ``t < lwm`` (the last punctuation seen here)
are late: ``late=None`` counts them as ``late_dropped``; ``"drop"``,
``"side_output"``, ``"raise"`` follow :class:`~oop.stream.late.LatePolicy`;
``"update"`` folds tuples with ``t >= lwm - allowed_lateness`` into the
retained windows and re-emits the revised rows at once (``is_revision``
true), dropping (and counting) older ones. Row-based kinds emit a window as
soon as the row counter passes its end.

``time=`` chooses the progressing attribute the windows are built on (any of
the stream's ``StreamInfo.times``, e.g. ``ts_right`` or a derived max/min of
an OA-Join output, :mod:`oop.operators.derive_time`); default: the stream's
primary time. Tuples are bucketed by that column and only ``P(time, v)`` on
it closes windows.

On a punctuation ``P(time, v)``: emits every window with ``end <= v`` (all
of them in one Arrow batch, built by one vectorized pass over the ring
block / the panes), purges their state (in update mode: the state of
windows with ``end <= v - allowed_lateness``), and forwards
``P("window_end", e)`` with ``e`` the smallest end a later row can have.
Other punctuation is dropped (its attributes are not in the output).

Parts kept in their own modules: the late rule (:class:`~oop.window.late.LateRule`),
the output rows (:class:`~oop.window.output.WindowOutput`), the layout rules
(:class:`~oop.window.layout.LayoutChoice`), the units
(:mod:`oop.window.evaluator`, :mod:`oop.window.paned`), the cell stores
(:mod:`oop.window.ring`, :mod:`oop.window.hashstore`) and the snapshot
(:class:`~oop.window.state.WindowState`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Unpack

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.limits import current_budget
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns, resolve_window_time
from oop.progress.watermark import time_bounds  # (min, max), as the sources take them
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.timecol import check_time_column, time_arrow_type, time_values
from oop.window.aggregates import Agg, output_type
from oop.window.bucket import BucketLogic
from oop.window.cells import CellStore, store_for_snapshot
from oop.window.evaluator import Evaluator, WidEvaluator
from oop.window.hashstore import HashCells
from oop.window.keys import KeyEncoder, ValueRanks
from oop.window.kinds import Landmark, Sliding, WindowKind
from oop.window.late import LateRule
from oop.window.multiset import Multiset
from oop.window.layout import LayoutChoice
from oop.window.output import WindowOutput, lut_array
from oop.window.params import WindowOptions, WindowParams
from oop.window.ring import Ring
from oop.window.state import WindowState
from oop.window.values import (ColumnValues, check_agg_types, column_values, exact_sum_columns,
                               is_numeric_type, lane_infos, max_abs)

__all__ = ["WindowAggregate", "choose_method"]

#: the aggregates (and lane ops) that keep one value of the window: min, max, first, last
SELECT = ("min", "max", "first", "last")

_METHODS = ("auto", "wid", "paned")


#: the key dictionary is checked for dead keys once it holds this many keys, then each time
#: it doubled since the last check (see WindowAggregate._compact_keys)
KEYS_COMPACT_MIN = 4096


def choose_method(kind: WindowKind, aggs: Sequence[Agg], tuples_per_time: float,
                  groups_per_pane: float) -> tuple[str, dict[str, float]]:
    """WID or Paned-WID by the cost model of 004 Eqs. 6.1-6.4 (unit costs a = a' = b = c = 1).

    Per window, bounded aggregates: WID updates ``range/slide`` cells per
    tuple of a slide (``T_slide x range/slide``); panes cost ``T_slide``
    (PLQ) + ``G x panes/slide`` (pane outputs) + the window-level query, per
    aggregate: ``2 G panes/slide`` when it is full-differential (Eq. 6.2);
    ``G x min(P, 2 panes/slide + 1)`` for min/max/first/last (the
    prefix/suffix blocks of :func:`~oop.window.paned_kernels.paned_emit_sel`
    fold each pane twice and answer a window with one combine; Eq. 6.1's
    ``G x P`` is the direct combine, taken when smaller). The most expensive
    aggregate's term is used.

    Holistic aggregates keep values, not partials, so their terms count
    values (``T_win = T_slide x range/slide`` per window): WID inserts each
    of them into a sorted table, ``T_win x log2 T_win``; panes insert each
    tuple once, ``T_slide x log2 T_slide``, and a window merges its ``P``
    sorted pane runs pairwise, ``T_win x ceil(log2 P)``
    (:meth:`~oop.window.store.Multiset.select`). Measured on the benchmark
    (``experiments/bench_window.py``, median sliding 10 s / 1 s): model 3.2x,
    measured ~2.9x for panes. Returns ``(method, the costs)``. Cost: O(len(aggs)).

    >>> from oop.window import agg
    >>> choose_method(Sliding(250, 5), [agg.max("v")], 1.0, 1)[0]
    'paned'
    >>> choose_method(Sliding(10_000, 1_000), [agg.median("v")], 10.0, 1000)[0]
    'paned'
    """
    if isinstance(kind, Landmark):
        return "paned", {}
    if not isinstance(kind, Sliding) or kind.r == kind.s:
        return "wid", {}
    g = kind.pane
    P = kind.r // g
    per_slide = kind.s // g
    T_slide = tuples_per_time * kind.s
    G = max(1.0, min(groups_per_pane, tuples_per_time * g))
    wid = T_slide * (kind.r / kind.s)

    def wlq_of(a: Agg) -> float:
        if a.differential == "full":
            return 2.0 * per_slide
        if a.spec.selective:
            return float(min(P, 2 * per_slide + 1))
        return float(P)

    wlq = G * max((wlq_of(a) for a in aggs if not a.holistic), default=0.0)
    paned = T_slide + G * per_slide + wlq
    if any(a.holistic for a in aggs):
        T_win = T_slide * (kind.r / kind.s)
        wid += T_win * math.log2(max(T_win, 2.0))
        paned += T_slide * math.log2(max(T_slide, 2.0)) + T_win * math.ceil(math.log2(max(P, 2)))
    return ("paned" if paned < wid else "wid"), {"cost_wid": wid, "cost_paned": paned,
                                                 "T_slide": T_slide, "G": G}


class WindowAggregate(LayoutChoice, WindowOutput, Operator):
    """Bucket + Aggregate over a progressing stream (see the module docstring)."""

    def __init__(self, kind: WindowKind, aggs: Agg | Sequence[Agg],
                 **options: Unpack[WindowOptions]) -> None:
        """``options``: the fields of :class:`~oop.window.params.WindowParams` (by, method,
        late, allowed_lateness, emit_wid, name, layout, time, max_state_bytes)."""
        p = self.params = WindowParams.of(kind, aggs, **options)
        name, method = p.name, p.method
        super().__init__(name)
        self.max_state_bytes = p.max_state_bytes
        self.time_config = p.time
        self.layout_config = p.layout
        if method not in _METHODS:
            raise ConfigError(f"{name}: method={method!r}; use one of {_METHODS}")
        self.kind_config = kind
        self.aggs = p.aggs
        self.by = list(p.by)
        self.method_config = method
        self.late = p.late
        self.lateness_config = p.allowed_lateness
        self.emit_wid = p.emit_wid
        if isinstance(kind, Landmark) and method == "wid":
            raise ConfigError(
                f"{name}: a landmark window has no upper wid bound (each tuple is in every later "
                "window), so plain WID cannot keep it; use method='paned' or 'auto'"
            )
        if kind.fca or kind.partitioned:
            raise ConfigError(
                f"{name}: {type(kind).__name__} needs its own operator; use Stream.window, "
                "which plans it (oop.window.plan.window_operator)"
            )
        LateRule.refuse_kind(name, self.late, kind)
        self.method: str | None = None if method == "auto" else method
        self.plan_info: dict[str, Any] = {"method_config": method}
        self.removed_late = 0

    # ---- opening --------------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        cols = [a.column for a in self.aggs if a.column]
        require_columns(info, [*self.by, *cols], self.name)
        attr = resolve_window_time(self.name, self.time_config, info)
        check_time_column(info.schema, attr, info.name)
        check_agg_types(self.aggs, info.schema, self.name)
        self.unit = info.unit(attr)
        self.kind = self.kind_config if self.kind_config.row_based else self.kind_config.resolve(self.unit)
        self.rule = LateRule.resolve(self.name, self.late, self.lateness_config, self.unit)
        self.time = attr
        self.schema_in = info.schema
        self.bucket = BucketLogic(self.kind)
        self.enc = KeyEncoder(self.by)
        self.lanes = lane_infos(self.aggs, info.schema)
        self.ring: CellStore | None = None
        self.holistic: dict[tuple[str, str], Multiset] = {}
        self.value_enc: dict[str, KeyEncoder] = {}
        for a in self.aggs:
            if a.holistic:
                store = "code" if a.spec.counts_values else "num"
                key = (store, a.column)
                if key not in self.holistic:
                    self.holistic[key] = Multiset(np.int64 if store == "code" else np.float64)
                if store == "code" and a.column not in self.value_enc:
                    self.value_enc[a.column] = KeyEncoder([a.column])  # type: ignore[list-item]
        # per column with an int64 sum lane (integers, unscaled decimals): the largest
        # |value| seen, which bounds every window sum (exactness check at emission)
        self.sum_max: dict[str, int] = exact_sum_columns(self.lanes)
        # min/max/first/last over strings (and other ordered non-numeric values): lanes hold ranks
        self.value_ranks = {
            c: ValueRanks(c, info.schema.field(c).type)
            for c in {li.lane.column for li in self.lanes
                      if li.lane.op in SELECT and li.lane.column}
            if not is_numeric_type(info.schema.field(c).type)}
        # the numeric columns the lanes read (ranked ones go through value_ranks): every batch
        self._lane_cols = tuple(c for c in dict.fromkeys(li.lane.column for li in self.lanes)
                                if c is not None and c not in self.value_ranks)
        self.lwm = INT64_MIN
        self.budget = current_budget()  # shared by the plan's operators (oop.limits)
        self._span_hash = False  # hash cells chosen for a sparse span (see _sparse_span)
        self._keys_compact_at = KEYS_COMPACT_MIN  # see _compact_keys
        self._values_compact_at: dict[str, int] = {}  # see _compact_values
        self.emitted: int | None = None  # first window id not yet emitted
        self.out_punct: int | None = None
        self.units: Evaluator = WidEvaluator(self.kind)  # until the method is decided
        self._clean: tuple[int, int] | None = None
        self._rank_cache: dict[str | None, np.ndarray] = {}  # see _value_rank
        if self.method is not None:
            self._set_method(self.method, {})
        tt = pa.int64() if self.kind.row_based else time_arrow_type(info.schema, attr)
        self.time_type = tt
        fields = [info.schema.field(c) for c in self.by]
        fields += [pa.field("window_start", tt), pa.field("window_end", tt)]
        fields += [pa.field(a.name, self._out_type(a)) for a in self.aggs]
        if self.emit_wid:
            fields.append(pa.field("wid", pa.int64()))
        fields += self.rule.output_fields()
        self.out_schema = pa.schema(fields)
        return StreamInfo(info.name, self.out_schema, {"window_end": self.unit}, "window_end")

    def _out_type(self, a: Agg) -> pa.DataType:
        return output_type(a, self.schema_in.field(a.column).type if a.column else None)

    def _set_method(self, method: str, info: dict[str, Any],
                    first: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Choose the evaluator of ``method`` (:mod:`oop.window.evaluator`); ``first``: the
        (times, codes) of the first batch when it is chosen there."""
        self.method = method
        self.plan_info.update(info, method=method, layout="dense ring x codes")
        if method == "paned":
            from oop.window.paned import PaneCombiner

            pc = PaneCombiner(self.kind, self.lanes, self.aggs,
                              cache_pane_states=self.rule.may_cache_pane_states)
            self.plan_info["pane"] = pc.g
            self.units = pc
            self._compile_ahead(first)
        else:
            self.units = WidEvaluator(self.kind)

    def _first_layout(self, first: tuple[np.ndarray, np.ndarray] | None) -> str:
        """The cell store Paned-WID's first batch ``first`` (times, codes) will get, by the
        layout rule (:meth:`_choose_layout`) over its pane ids computed with numpy (the
        compiled ones do not exist yet on a first run); before any batch, the configured
        one. Only for what to compile ahead: the batch itself then chooses. O(rows)."""
        if first is None:
            return "hash" if self.layout_config == "hash" and self._can_hash() else "dense"
        times, codes = first
        g, o = self.units.g, self.kind.o  # type: ignore[attr-defined]
        lo, hi = int(times.min()), int(times.max())
        if hi - lo + g >= 1 << 62:  # a span no numpy int64 holds: the span rule's case
            return "dense"
        return self._choose_layout(codes, (times - lo + (lo - o) % g) // g)

    def _compile_ahead(self, first: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Paned-WID's emission kernels compiled on another core while the first batches run
        (:func:`~oop.window.paned.compile_emission_ahead`), asked when the operator becomes
        Paned-WID: at plan time for ``method="paned"``, on the first batch when the cost model
        picks it (so a query that turns out WID asks nothing), for the cell store the first
        batch ``first`` will get (:meth:`_first_layout`). Not when revising windows; nothing
        for kernels already cached."""
        if self.kind.row_based or self.rule.revises:  # revisions: window by window (emit_cells)
            return
        from oop.window.paned import compile_emission_ahead

        lut = lut_array(pa.array([], pa.int64())) if self._lut_wanted() else None
        compile_emission_ahead(self.kind, self.lanes, self.aggs, lut, self._first_layout(first))

    # ---- state bounds ------------------------------------------------------------------
    #: variance shifts (column -> value, see :func:`~oop.window.store.lane_input`) a new
    #: ring starts with: a key partition of a threaded window (:mod:`oop.window.threaded`)
    #: takes the whole stream's, so its means and variances round as one thread's do
    preset_shift: dict[str, Any] = {}

    def _set_ring(self, ring: CellStore) -> None:
        ring.guard = self._ring_guard
        for c, v in self.preset_shift.items():
            ring.shift.setdefault(c, v)
        self.ring = ring

    def _ring_guard(self, nbytes: int, what: str = "") -> None:
        """Before the lanes grow to ``nbytes``: the operator's state then, against its own
        ``max_state_bytes`` and the plan's budget (:mod:`oop.limits`); raises StateLimitError."""
        rest = self.state_size().bytes - (self.ring.nbytes() if self.ring is not None else 0)
        self.budget.grow(self, self.name, rest + nbytes, what, self.max_state_bytes)

    def _compact_keys(self) -> None:
        """Forget the keys no state holds any more (all their windows closed, allowed
        lateness included: the purge keeps those windows' cells).

        Checked once the dictionary holds ``KEYS_COMPACT_MIN`` keys and then
        each time it doubled since the last check; compacts when more than
        half of its keys are dead: the dictionary is rebuilt from the live
        keys (:meth:`KeyEncoder.compact`) and every code the state holds is
        renumbered (ring columns / hash cells, holistic tables; Paned-WID
        drops every per-code state it keeps across punctuations -- running
        sums, select prefix/suffix blocks, count-distinct and heavy-hitter
        multiplicity tables, UDAF pane states -- and rebuilds it from the
        panes the ring and the holistic tables still hold,
        :meth:`~oop.window.paned.PaneCombiner.forget_codes`). A key that comes
        back gets a new code. Cost O(state + live keys), amortized over the
        keys added since the last check. This bounds the dictionary of
        never-repeating keys (session ids) by the keys of the open windows
        instead of every key ever seen. Every aggregate and late policy of WID
        and Paned-WID; not landmark windows, whose every key stays in all
        later windows (the running state, not the ring, holds it).
        """
        n = self.enc.n_codes
        keep = self._live_keys()
        if keep is None:
            self._keys_compact_at = 1 << 62
            return
        if 2 * keep.shape[0] >= n:
            self._keys_compact_at = max(KEYS_COMPACT_MIN, 2 * n)
            return
        self._forget_keys(keep)

    def _live_keys(self) -> np.ndarray | None:
        """The codes some state still holds (ascending), or None when this operator does not
        forget keys (see :meth:`_compact_keys`). Cost O(state)."""
        ring = self.ring
        ok = ring is not None and not ring.fixed and bool(self.by) and not self.units.landmark
        if not ok:
            return None
        assert ring is not None
        live = ring.live_codes(self.enc.n_codes)
        for ms in self.holistic.values():
            ms.compact()
            live[ms.code] = True
        return np.flatnonzero(live)

    def _forget_keys(self, keep: np.ndarray) -> None:
        """Keep only the codes ``keep`` (ascending; renumbered ``0..len(keep)-1``)."""
        ring = self.ring
        assert ring is not None
        n = self.enc.n_codes
        remap = np.full(n, -1, np.int64)
        remap[keep] = np.arange(keep.shape[0])
        self.enc.compact(keep)
        ring.compact_codes(keep)
        for ms in self.holistic.values():
            ms.remap_codes(remap)
        self.units.forget_codes()
        self._lut_n = None  # the key-value cache of Paned-WID's emission
        self._keys_compact_at = max(KEYS_COMPACT_MIN, 2 * keep.shape[0])
        self.plan_info["key_compactions"] = self.plan_info.get("key_compactions", 0) + 1

    def held_key_values(self) -> np.ndarray | None:
        """The values of the one int64 key column that some state still holds, or None when
        this operator does not forget keys. Used by a threaded window
        (:class:`~oop.window.threaded.ThreadedWindow`) to compact its global dictionary;
        call only between elements. Cost O(state)."""
        if not self.enc.n_codes:  # no row yet (no ring either)
            return np.empty(0, np.int64)
        keep = self._live_keys()
        if keep is None or not keep.shape[0]:
            return keep if keep is None else np.empty(0, np.int64)
        return np.asarray(self.enc.keys(keep)[0].to_numpy(zero_copy_only=False), np.int64)

    def rekey(self, old_to_new: np.ndarray) -> None:
        """Replace every value ``v`` of the one int64 key column by ``old_to_new[v]`` (-1:
        no state holds that key any more, :meth:`held_key_values`): the dead keys are
        forgotten first, then the dictionary's values are replaced, the codes unchanged
        (the threaded window's global dictionary was compacted). Cost O(state)."""
        if not self.enc.n_codes:
            return
        keep = self._live_keys()
        assert keep is not None, "rekey: this operator does not forget keys"
        if keep.shape[0] < self.enc.n_codes:
            self._forget_keys(keep)
        self.enc.remap_values(old_to_new)
        self._lut_n = None  # the key-value cache of Paned-WID's emission

    def _compact_values(self, col: str) -> None:
        """Forget the values of count-distinct / heavy-hitters column ``col`` that no holistic
        table holds any more (their windows all closed), as :meth:`_compact_keys` does for keys.

        The value dictionary (:class:`KeyEncoder`) is rebuilt from the values
        held, the tables' value codes renumbered (the order is kept, so they
        stay sorted) and Paned-WID's multiplicity tables rebuilt from the
        panes. Checked when the dictionary doubled since the last check;
        compacts when more than half of it is dead. O(table + values kept).
        Bounds the dictionary of a column with a new value in every row (ids).
        """
        enc, ms = self.value_enc[col], self.holistic[("code", col)]
        n = enc.n_codes
        ms.compact()
        live = np.zeros(n, bool)
        live[ms.value] = True
        keep = np.flatnonzero(live)
        if 2 * keep.shape[0] >= n:
            self._values_compact_at[col] = max(KEYS_COMPACT_MIN, 2 * n)
            return
        remap = np.full(n, -1, np.int64)
        remap[keep] = np.arange(keep.shape[0])
        enc.compact(keep)
        ms.remap_values(remap)
        self._rank_cache.pop(col, None)
        self.units.forget_values()
        self._values_compact_at[col] = max(KEYS_COMPACT_MIN, 2 * keep.shape[0])
        self.plan_info["value_compactions"] = self.plan_info.get("value_compactions", 0) + 1

    def _decide(self, times: np.ndarray, codes: np.ndarray) -> None:
        span = float(times.max()) - float(times.min()) + 1.0 if times.size else 1.0  # no wrap
        rate = times.size / span
        g = self.kind.pane if isinstance(self.kind, Sliding) else 1
        groups = float(np.unique(codes).size) * min(1.0, g / span)
        method, costs = choose_method(self.kind, self.aggs, rate, groups)
        self._set_method(method, costs, (times, codes))

    # ---- batches ------------------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.time, self.inputs[0].name)
        out: list[Element] = []
        revise = None
        # Paned-WID: (pane ids, min, max, smallest time) before the late check (not when
        # revising); a smallest time >= lwm means no row is late
        panes = self.units.early_ids(times, self.rule.revises)
        if not self.kind.row_based and (panes is None or panes[3] < self.lwm):
            batch, times, revise = self.rule.split(self, batch, times, self.lwm, self.time)
            panes = None  # late rows left: ids of the rest below
        if isinstance(self.kind, Landmark):
            before = times < self.kind.o
            if before.any():
                self.metrics.count_late("before_origin", int(before.sum()))
                batch, times = batch.filter(pa.array(~before)), times[~before]
                if revise is not None:
                    revise = revise[~before]
        if batch.num_rows == 0:
            return out
        codes = self.enc.encode(batch)
        if self.method is None:
            self._decide(times, codes)
        tumble = self._tumble_in_store(revise)
        if tumble is not None:  # the store computes the WIDs (004 §6.1): only their range here
            lo = hi = ulo = uhi = None
            low, high = self._tumble_bounds(times, *tumble)
        else:
            ids = self.units.unit_ids(self.bucket, batch, times, panes,
                                      need_hi=self.ring is None or bool(self.holistic))
            lo, hi, ulo, uhi, low, high = ids.lo, ids.hi, ids.ulo, ids.uhi, ids.low, ids.high
        single = self.units.one_unit_per_row()
        per_row = 1 if single else self._units_per_row()
        if self.ring is None:
            layout = self._choose_layout(codes, ulo)
            if layout == "dense" and self._sparse_span(low, high + per_row, codes.shape[0] * per_row):
                layout = "hash"
            if layout == "hash":
                self._set_ring(HashCells(self.lanes, base=low))
            else:
                rows = int((uhi - ulo).max()) * 2 + 2 if uhi is not None else 4
                C = max(self.enc.n_codes, 64)
                R = 1 << max(int(rows - 1).bit_length(), 1)
                self._ring_guard(R * C * 8 * (len(self.lanes) + sum(
                    li.lane.op in ("first", "last") for li in self.lanes)),
                    f"dense ring of {R} window/pane rows x {C} key columns")
                self._set_ring(Ring(self.lanes, base=low, rows=rows, codes=C))
        else:
            if self._sparse_span(low, high + per_row, codes.shape[0] * per_row):
                self._set_ring(HashCells.from_ring(self.ring, self.enc.n_codes))
            if low < self.ring.base:
                self.ring.lower_base(low)
        cols = self._lane_columns(batch)
        # Paned-WID subtracts panes: it needs to know where NaN / inf entered (Ring.nf_hi)
        self.ring.track_nf = self.units.track_nf
        self.ring.update(codes, ulo, uhi, cols, times, self.enc.n_codes, single=single,
                         top=high + 1 if single else None, tumble=tumble)
        if self.holistic:
            assert ulo is not None and uhi is not None
            self._add_holistic(batch, codes, ulo, uhi, cols)
        if revise is not None and revise.any():
            if lo is None:
                lo, hi = self.bucket.tag(batch, times)
            assert hi is not None
            out.extend(self._revisions(codes[revise], lo[revise], hi[revise], times[revise]))
        if self.kind.row_based:
            out.extend(self._advance(self.bucket.first_open(self.bucket.rows_seen), emit_punct=True))
        return out

    def _tumble_in_store(self, revise: np.ndarray | None) -> tuple[int, int] | None:
        """``(origin, size)`` when this batch's tumbling WIDs can be left to the cell store
        (:func:`~oop.window.ring.tumble_units` in its update: no window-id range pass and no
        ``hi`` array here; a ring exists, no holistic or revised rows need the id arrays),
        else None."""
        k = self.kind
        if (not self.units.tumbles_in_store() or self.ring is None or self.holistic
                or revise is not None):
            return None
        return k.o, k.s  # type: ignore[attr-defined]

    def _tumble_bounds(self, times: np.ndarray, origin: int, size: int) -> tuple[int, int]:
        """The least and greatest tumbling WID of ``times`` from their min and max (floor
        division is monotone), refusing windows that would wrap around int64 as ``wids`` does."""
        tmin, tmax = time_bounds(times)
        self.kind.check_range(tmin, tmax)  # type: ignore[attr-defined]
        return (tmin - origin) // size, (tmax - origin) // size

    def _lane_columns(self, batch: pa.RecordBatch) -> dict[str, ColumnValues]:
        """The lanes' columns as numpy (decimals unscaled; holistic value columns are read by
        :meth:`_add_holistic`, any type), noting each decimal column's largest ``|value|``."""
        cols = {c: column_values(batch, c) for c in self._lane_cols}
        for c, vr in self.value_ranks.items():
            if vr.enc.n_codes >= vr.compact_at:  # drop the values no cell holds any more
                remap = vr.compact(self._held_values(c))
                if remap is not None:
                    self._remap_values(c, remap)
            ranks, valid, remap = vr.encode(batch)
            if remap is not None:
                self._remap_values(c, remap)
            cols[c] = ColumnValues(ranks, valid)
        for c in self.sum_max:
            self.sum_max[c] = max(self.sum_max[c], max_abs(cols[c].values))
        return cols

    def _rank_holders(self, col: str) -> list[tuple[Any, tuple[str, str | None]]]:
        """(state part, lane key) of every place that holds ranks of column ``col``."""
        keys = [li.key for li in self.lanes if li.lane.column == col and li.lane.op in SELECT]
        return [(part, k) for part in (self.ring, self.units) if part is not None for k in keys]

    def _remap_values(self, col: str, remap: np.ndarray) -> None:
        """New values re-ranked column ``col``: apply ``remap`` to every rank the state holds."""
        for part, key in self._rank_holders(col):
            part.remap_values(key, remap)

    def _held_values(self, col: str) -> np.ndarray:
        """Every rank of column ``col`` the state holds (with repeats)."""
        return np.concatenate([np.zeros(0, np.int64)] + [part.held_values(key)
                                                         for part, key in self._rank_holders(col)])

    def _add_holistic(self, batch: pa.RecordBatch, codes: np.ndarray, ulo: np.ndarray,
                      uhi: np.ndarray, cols: dict[str, ColumnValues]) -> None:
        if not self.holistic:
            return
        span = uhi - ulo
        rep = bool((span != 1).any())
        for (store, col), ms in self.holistic.items():
            if store == "code":  # distinct values of any type (strings too) as value codes
                at = self._values_compact_at.get(col, KEYS_COMPACT_MIN)
                if self.value_enc[col].n_codes >= at:
                    self._compact_values(col)
                vals = self.value_enc[col].encode(batch)
                arr = batch.column(col)
                valid = (np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), np.uint8)
                         if arr.null_count else np.zeros(0, np.uint8))
            else:
                cv = (cols[col] if col in cols and cols[col].values.dtype == np.float64
                      else column_values(batch, col, True))
                vals, valid = cv.values, cv.valid
            c, lo_, sp = codes, ulo, span
            if valid.shape[0]:
                m = valid.astype(bool)
                c, lo_, sp, vals = c[m], lo_[m], sp[m], vals[m]
            if rep:
                idx = np.repeat(np.arange(c.shape[0]), sp)
                offs = np.arange(idx.shape[0]) - np.repeat(np.cumsum(sp) - sp, sp)
                ms.add(lo_[idx] + offs, c[idx], vals[idx])
            else:
                ms.add(lo_, c, vals)

    # ---- punctuation -----------------------------------------------------------------
    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        if not isinstance(p, Punctuation) or p.attr != self.time or self.kind.row_based:
            return []
        if p.value <= self.lwm:
            return []
        self.lwm = p.value
        return self._advance(self.bucket.first_open(p.value), emit_punct=True)

    def _advance(self, first_open: int, emit_punct: bool) -> list[Element]:
        """Emit every window < first_open; purge; forward punctuation on window_end."""
        out: list[Element] = []
        if self.ring is None:
            if self.emitted is None or first_open > self.emitted:
                self.emitted = first_open
        else:
            start = self.emitted if self.emitted is not None else self._first_window()
            stop = first_open
            if start is not None and stop > start:
                stop_data = self._last_window() + 1
                wids = range(start, max(start, min(stop, stop_data)))
                # hash cells skip spans of empty windows; the dense ring walks them all
                for run in self.ring.live_runs(wids.start, wids.stop, self.units.unit_windows):
                    batch = self._emit_windows(list(run), revision=False)
                    if batch is not None:
                        out.append(batch)
            self.emitted = max(first_open, self.emitted if self.emitted is not None else first_open)
            self._purge()
            if self.enc.n_codes >= self._keys_compact_at:
                self._compact_keys()
            if not self._span_back():
                self._relayout()
            self.budget.report(self, self.state_size().bytes)
        if emit_punct:
            frontier = self.emitted
            kept_from = self.rule.revisable_from(self.lwm)  # None without late='update'
            if kept_from is not None:  # emitted windows after it may still be revised
                frontier = self.bucket.first_open(kept_from)
            if frontier is not None:
                v = int(self.kind.extents(np.array([frontier]))[1][0])
                if self.out_punct is None or v > self.out_punct:
                    self.out_punct = v
                    out.append(Punctuation("window_end", v))
        return out

    def _first_window(self) -> int | None:
        assert self.ring is not None
        return self.units.first_window(self.ring.base)

    def _last_window(self) -> int:
        assert self.ring is not None
        return self.units.last_window(self.ring.top - 1)

    def _purge(self) -> None:
        assert self.ring is not None and self.emitted is not None
        keep = self.emitted
        kept_from = self.rule.revisable_from(self.lwm)
        if kept_from is not None:
            keep = min(keep, self.bucket.first_open(kept_from))
        unit = self.units.first_unit_needed(keep)
        c = self._clean  # units whose live cells _emit_windows already reset
        clean = c is not None and self.ring.base >= c[0] and min(unit, self.ring.top) <= c[1]
        self.ring.purge_below(unit, clean=clean)
        self._clean = None
        hunit = self.units.holistic_unit_needed(keep)
        for ms in self.holistic.values():
            ms.purge_below(hunit)

    def flush(self) -> list[Element]:
        """End of stream: emit every remaining window."""
        if self.ring is None:
            return []
        last = self._last_window()
        out = self._advance(last + 1, emit_punct=False) if (self.emitted is None or last + 1 > self.emitted) else []
        return out

    # ---- emission ---------------------------------------------------------------------
    def _cells(self, w: int) -> tuple[np.ndarray, dict] | None:
        """(live codes, lane values at those codes) of window ``w``."""
        assert self.ring is not None
        return self.units.window_cells(self.ring, w, self.enc.n_codes,
                                       differential_ok=not self.rule.revises)

    def _emit_windows(self, wids: list[int], revision: bool,
                      only: dict[int, np.ndarray] | None = None) -> pa.RecordBatch | None:
        if only is None and self.ring is not None:
            # every window in one pass (WID: over the store's block of window cells; Paned-WID:
            # compiled differential sums + select blocks); None: window by window below
            update = self.rule.revises
            e = self.units.emit_cells(self.ring, wids, self.enc.n_codes, self._key_lut, update)
            if e is not None:
                if not update:
                    self._clean = e.clean  # emitted = purged: these cells are reset already
                if e.codes.size == 0:
                    return None
                return self._build_arrays(e.wid, e.codes, e.lanes, revision, extents=e.extents,
                                          key_values=e.key_values)
        parts = []
        for w in wids:
            cells = self._cells(w)
            if cells is None:
                continue
            codes, lanes = cells
            if only is not None:
                keep = np.isin(codes, only[w])
                codes = codes[keep]
                lanes = {k: v[keep] for k, v in lanes.items()}
                if codes.size == 0:
                    continue
            parts.append((w, codes, lanes))
        if not parts:
            return None
        return self._build(parts, revision)

    def _revisions(self, codes: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   times: np.ndarray) -> list[Element]:
        """Re-emit the (group, window) cells a late batch touched among emitted windows."""
        assert self.emitted is not None
        span = np.maximum(np.minimum(hi, self.emitted) - lo, 0)
        if not span.any():
            return []
        idx = np.repeat(np.arange(codes.shape[0]), span)
        offs = np.arange(idx.shape[0]) - np.repeat(np.cumsum(span) - span, span)
        pairs_w = lo[idx] + offs
        pairs_c = codes[idx]
        only: dict[int, np.ndarray] = {}
        for w in np.unique(pairs_w):
            only[int(w)] = np.unique(pairs_c[pairs_w == w])
        b = self._emit_windows(sorted(only), revision=True, only=only)
        return [b] if b is not None else []

    # ---- state --------------------------------------------------------------------
    def state_size(self) -> StateSize:
        items = self.enc.n_codes
        nbytes = self.enc.nbytes()
        if self.value_ranks:
            nbytes += sum(vr.nbytes() for vr in self.value_ranks.values())
        if self.value_enc:
            nbytes += sum(e.nbytes() for e in self.value_enc.values())
        if self.ring is not None:
            items += self.ring.live
            nbytes += self.ring.nbytes()
        for ms in self.holistic.values():
            items += len(ms)
            nbytes += ms.nbytes()
        nbytes += self.units.nbytes()
        return StateSize(items, nbytes)

    def snapshot(self) -> WindowState:
        """The whole state, copied (:class:`~oop.window.state.WindowState`). O(state)."""
        return WindowState(
            base=super().snapshot(), lwm=self.lwm, emitted=self.emitted,
            out_punct=self.out_punct, method=self.method, plan=dict(self.plan_info),
            bucket=self.bucket.snapshot(), enc=self.enc.snapshot(),
            ring=None if self.ring is None else self.ring.snapshot(),
            ms={k: v.snapshot() for k, v in self.holistic.items()},
            venc={k: v.snapshot() for k, v in self.value_enc.items()},
            vranks={k: v.snapshot() for k, v in self.value_ranks.items()},
            units=self.units.snapshot(), sum_max=dict(self.sum_max),
            span_hash=self._span_hash, keys_compact_at=self._keys_compact_at)

    def restore(self, state: WindowState) -> None:
        """Load a :meth:`snapshot` into this freshly opened operator. O(state)."""
        super().restore(state.base)
        self._lut_n = None  # the key-value cache follows the restored dictionary
        self._rank_cache = {}  # and so do the value ranks
        self.lwm, self.emitted, self.out_punct = state.lwm, state.emitted, state.out_punct
        self.sum_max = dict(state.sum_max)
        self._span_hash = state.span_hash
        self._keys_compact_at = state.keys_compact_at
        if state.method is not None:
            self._set_method(state.method, {})
        self.plan_info = dict(state.plan)
        self.bucket.restore(state.bucket)
        self.enc.restore(state.enc)
        if state.ring is not None:
            self._set_ring(store_for_snapshot(self.lanes, state.ring))
            self.ring.restore(state.ring)
        for k, v in state.ms.items():
            self.holistic[k].restore(v)
        for k, v in state.venc.items():
            self.value_enc[k].restore(v)
        for k, v in state.vranks.items():
            self.value_ranks[k].restore(v)
        self.units.restore(state.units)

    def _check(self) -> None:
        self.enc._check()
        if self.ring is not None:
            self.ring._check()
            if self.emitted is not None and not self.rule.revises:
                first_needed = self.units.first_unit_needed(self.emitted)
                assert (self.ring.base >= first_needed or self.ring.live == 0
                        or self.method != "wid"), (self.ring.base, first_needed)
        for ms in self.holistic.values():
            ms._check()

