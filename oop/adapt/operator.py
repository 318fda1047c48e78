"""AdaptWID: window aggregation that is eager or lazy per group, chosen at run time (004 §6.3).

What it computes: exactly what WID computes (``Stream.window``) --
``SELECT by..., window_start, window_end, aggs... GROUP BY by, wid`` over
event-time windows (Tumbling / Sliding, 004 Eq. 5.1-5.3) -- one row per
group and window with at least one tuple. The union of several inputs
(``sources``) is aggregated as one stream.

How: the Bucket tags each tuple with its window-id range ``[lo, hi)``
(``kind.wids``); the Aggregate (:class:`~oop.adapt.logic.AdaptLogic`) keeps
each group either *eager* (one partial aggregate per open window, WID) or
*lazy* (its tuples in a shared binned buffer, the buffering
implementation), switching by the memory-cost model of 004 §6.3.2
(Cond. 6.9) with two thresholds; eager -> lazy leaves *transitional* groups
whose old partials are merged with their buffered tuples at output
(Fig. 6-18).

On a batch: fold it in (nothing is emitted). Tuples whose windows are all
complete are late: counted (policy ``drop``) and dropped.

``time=`` windows on another progressing attribute than the primary one
(e.g. ``ts_right`` after a join, or a ``Stream.derive_time`` column); the
Bucket, ``wed``, the source offsets and the closing punctuation all use it.

On a punctuation ``P(time, v)`` (for several inputs: when the min over the
inputs grows, Meld rule): emit every window ``w`` with ``end(w) <= v``
(one batch, ordered by window, then by group code -- the keys' order of first
appearance, as WID emits: the order does not depend on which groups were
eager or lazy, so a run on key partitions reproduces it, :mod:`oop.adapt.threaded`;
:func:`~oop.adapt.order.window_code_order`), purge its partials and the buffered tuples whose
last window it was, re-evaluate eager groups, then emit ``P(window_end, v)``.
Punctuation on other attributes (and group-wise / joint punctuation) says
nothing about ``window_end`` and is dropped.

State reported: bytes of partials + buffered tuples + group entries (the
group-key dictionary, shared by every window implementation, is not
counted). The plan's state budget (:mod:`oop.limits`, ``--max-state``) is
charged the state *plus* the dictionary and the per-group arrays, which
span every group code held. Groups whose windows have all closed are
forgotten (key compaction, :meth:`AdaptWID._compact_keys`, the rule of
``WindowAggregate._compact_keys``): after a punctuation's close, once the
dictionary holds ``KEYS_COMPACT_MIN`` keys and then each time it doubled,
when more than half of its keys are held by no state the dictionary is
rebuilt from the live keys and every held code renumbered; a key that
comes back gets a new code. So a run over never-repeating keys (session
ids) holds about the keys of the open windows, not every key seen.
``adapt_metrics()`` adds the split by kind, peaks, switches and the
eager/lazy/transitional group counts per punctuation.

Cost: see :mod:`oop.adapt.logic`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.adapt.cost import Thresholds
from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.adapt.order import window_code_order
from oop.adapt.store import Block
from oop.errors import ConfigError, SchemaMismatchError
from oop.limits import current_budget
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns, resolve_window_time
from oop.progress.frontier import MinFrontier
from oop.stream.elements import Element, Punctuation
from oop.stream.timecol import check_time_column, time_values
from oop.window.aggregates import Agg, as_aggs
from oop.window.keys import KeyEncoder, compaction_remap
from oop.window.kinds import WindowKind
from oop.window.kernels import minmax
from oop.window.values import check_exact_sum, max_abs

__all__ = ["AdaptWID", "KEYS_COMPACT_MIN"]


#: key compaction (:meth:`AdaptWID._compact_keys`) is first checked when the key
#: dictionary holds this many keys, then each time it doubled since the last check
KEYS_COMPACT_MIN = 4096


def _values(batch: pa.RecordBatch, col: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(values with nulls as 0, validity -- None when the column has no null)."""
    arr = batch.column(col)
    if pa.types.is_boolean(arr.type):
        arr = pc.cast(arr, pa.int8())
    if arr.null_count:
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        zero = pa.scalar(0, arr.type)
        v = np.asarray(pc.fill_null(arr, zero).to_numpy(zero_copy_only=False))
        return v, valid
    return np.asarray(arr.to_numpy(zero_copy_only=False)), None


class AdaptWID(Operator):
    """Per-group adaptive eager/lazy window aggregation. See the module docstring.

    ``n_inputs`` > 1 aggregates the union of the inputs (the sources of
    Cond. 6.9); each input is one source. ``time``: the progressing attribute
    to window on (default: the primary one), e.g. ``"ts_right"`` after a join
    or a column made by ``Stream.derive_time``; only punctuation on it closes
    windows (and its arrival order is what ``wed`` and the offsets measure).
    """

    def __init__(
        self,
        kind: WindowKind,
        aggs: Agg | Sequence[Agg],
        *,
        by: Sequence[str] | str = (),
        n_inputs: int = 1,
        thresholds: Thresholds | str | None = None,
        n_bins: int = 8,
        name: str = "adaptwid",
        time: str | None = None,
        max_state_bytes: int | None = None,
    ) -> None:
        super().__init__(name)
        if max_state_bytes is not None and max_state_bytes <= 0:
            raise ConfigError(f"{name}: max_state_bytes must be > 0, got {max_state_bytes}")
        self.max_state_bytes = max_state_bytes
        self.time_config = time
        self.kind_spec = kind
        self.aggs = as_aggs(aggs)
        self.sum_max: dict[str, int] = {}  # filled at open (infer_output)
        self.by = (by,) if isinstance(by, str) else tuple(by)
        self.n_inputs = int(n_inputs)
        if self.n_inputs < 1:
            raise ConfigError(f"{name}: needs at least one input, got {n_inputs}")
        self.thresholds = Thresholds.parse(thresholds)
        self.n_bins = n_bins
        self.frontier = MinFrontier(self.n_inputs)
        self.keys = KeyEncoder(list(self.by))
        self.logic: AdaptLogic | None = None
        self.cfg: AdaptConfig | None = None
        self._time = ""
        self._unit = "ms"
        self._src_bufs: dict[int, np.ndarray] = {}  # per-port source column (not state)
        self._keys_compact_at = KEYS_COMPACT_MIN  # see _compact_keys
        self.key_compactions = 0
        self._order_scratch = np.full(0, -1, np.int64)  # window_code_order's, all -1
        #: how the query runs (``oop.adapt.threaded`` adds why it is not on threads)
        self.plan_info: dict[str, Any] = {"method": "adapt"}

    # ---- opening -------------------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        first = inputs[0]
        attr = resolve_window_time(self.name, self.time_config, first)
        for i, info in enumerate(inputs[1:], start=1):
            same = (info.time == first.time if self.time_config is None
                    else attr in info.times and info.unit(attr) == first.unit(attr))
            if not info.schema.equals(first.schema, check_metadata=False) or not same:
                raise SchemaMismatchError(
                    f"{self.name}: source {i} (stream {info.name!r}) has schema {info.schema} "
                    f"on time {info.time!r} but source 0 (stream {first.name!r}) has "
                    f"{first.schema} on {attr!r}; the sources of one window aggregate must "
                    "share schema and progressing attribute"
                )
        check_time_column(first.schema, attr, first.name)
        self._time, self._unit = attr, first.unit(attr)
        cols = list(self.by) + [a.column for a in self.aggs if a.column]
        require_columns(first, cols, self.name)
        kind = self.kind_spec.resolve(self._unit)
        self.window_kind = kind
        self.cfg = AdaptConfig(kind, self.aggs, n_sources=self.n_inputs,  # type: ignore[arg-type]
                               thresholds=self.thresholds, n_bins=self.n_bins)
        #: the output windows' geometry as plain ints (kind.o / .s / .r validate on each read)
        self._wgeom = (kind.o, kind.s, kind.r)
        dtypes = {}
        for c in self.cfg.value_columns:
            t = first.schema.field(c).type
            if pa.types.is_boolean(t):
                t = pa.int8()
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise ConfigError(
                    f"{self.name}: column {c!r} of stream {first.name!r} has type {t}; AdaptWID "
                    "aggregates numeric columns -- cast it, or use Stream.window"
                )
            dtypes[c] = np.dtype(t.to_pandas_dtype())
        self.logic = AdaptLogic(self.cfg, dtypes)
        self.budget = current_budget()  # shared by the plan's operators (oop.limits)
        if getattr(self.logic, "dense", False):
            eager = self.logic.eager

            def guard(nbytes: int, what: str = "") -> None:
                rest = self._charged_bytes() - eager.nbytes
                self.budget.grow(self, self.name, rest + nbytes, what, self.max_state_bytes)
            eager.guard = guard
            eager.owner = self.name
        # integer columns under sum: the largest |value| seen bounds every window sum (int64)
        self.sum_max: dict[str, int] = {
            a.column: 0 for a in self.aggs
            if a.spec.exact_sum and a.column and np.issubdtype(dtypes[a.column], np.integer)}
        fields = [first.schema.field(c) for c in self.by]
        ts_type = first.schema.field(self._time).type
        fields += [pa.field("window_start", ts_type), pa.field("window_end", ts_type)]
        for a in self.aggs:
            fields.append(pa.field(a.name, self._agg_type(a, first.schema)))
        schema = pa.schema(fields)
        return StreamInfo(self.name, schema, times={"window_end": self._unit,
                                                    "window_start": self._unit},
                          time="window_end")

    @staticmethod
    def _agg_type(a: Agg, schema: pa.Schema) -> pa.DataType:
        """The window operator's output type (:mod:`oop.aggregates`): the one rule."""
        return a.spec.output_type(schema.field(a.column).type if a.column else pa.int64())

    # ---- elements ----------------------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.logic is not None
        self.check_schema(batch, port)
        if batch.num_rows == 0:
            return []
        gids = self.keys.encode(batch)
        if self.keys.n_codes > self.logic.n_groups:  # new groups: the index grew
            self.budget.grow(self, self.name, self._charged_bytes(),
                             f"key dictionary and per-group entries of {self.keys.n_codes} "
                             "groups held", self.max_state_bytes)
        ts = time_values(batch, self._time, self.inputs[port].name)
        check = getattr(self.window_kind, "check_range", None)
        if check is not None:  # windows that would wrap around int64: ValueRangeError
            lo_t, hi_t = minmax(ts)
            check(int(lo_t), int(hi_t))
        vals = {c: _values(batch, c) for c in self.logic.value_cols}
        for c in self.sum_max:
            self.sum_max[c] = max(self.sum_max[c], max_abs(vals[c][0].astype(np.int64, copy=False)))
        self.fix_shifts(vals)
        src = self._src(batch.num_rows, port) if self.n_inputs > 1 else None
        late = self.logic.on_batch(gids, ts, src, vals, top=self.keys.n_codes)
        self.metrics.count_late("drop", late)
        return []

    def fix_shifts(self, vals: dict[str, tuple[np.ndarray, np.ndarray | None]]) -> None:
        """Fix var/std's shift (:mod:`oop.aggregates.moments`) at its column's first valid
        finite value in arrival order -- the window operator's rule -- before any fold or
        lazy buffer reads it, so the shift depends neither on which groups are eager or lazy
        nor on key partitions (:class:`~oop.adapt.threaded.ThreadedAdapt` presets the one a
        single thread picks). ``vals``: the batch's columns, as ``_values`` gives them."""
        assert self.logic is not None
        for a in self.logic.aggs:
            if a.op == "sumsq" and a.shift is None and a.column in vals:
                v, m = vals[a.column]
                a.shift_for(v, np.ones(v.shape[0], bool) if m is None else m)

    @property
    def preset_shift(self) -> dict[str, float | int]:
        """The var/std shifts fixed so far, by column."""
        assert self.logic is not None
        return {a.column: a.shift for a in self.logic.aggs
                if a.op == "sumsq" and a.column and a.shift is not None}

    @preset_shift.setter
    def preset_shift(self, shifts: dict[str, float | int]) -> None:
        """Take the shifts one thread fixed (a partition of ThreadedAdapt, before a batch)."""
        assert self.logic is not None
        for a in self.logic.aggs:
            if a.op == "sumsq" and a.shift is None and a.column in shifts:
                a.shift = shifts[a.column]

    @property
    def stream_terms(self) -> dict[str, Any]:
        """Cond. 6.9's stream-wide terms this operator decides with (``wed``, the validity
        columns of its buffer)."""
        assert self.logic is not None
        return {"wed": int(self.logic.wed.value),
                "validity": [c[:-1] for c in self.logic.buffer.dtypes if c.endswith("?")]}

    @stream_terms.setter
    def stream_terms(self, terms: dict[str, Any]) -> None:
        """Decide with the terms one thread measured over the whole stream (a partition of
        ThreadedAdapt, before each batch and punctuation: :meth:`AdaptLogic.given_terms
        <oop.adapt.core.LogicCore.given_terms>`)."""
        assert self.logic is not None
        self.logic.given_terms(terms)

    def _src(self, n: int, port: int) -> np.ndarray:
        """``port`` for ``n`` rows: a slice of a reused per-port array (read only)."""
        buf = self._src_bufs.get(port)
        if buf is None or len(buf) < n:
            buf = np.full(max(n, 2 * (0 if buf is None else len(buf))), port, np.int8)
            self._src_bufs[port] = buf
        return buf[:n]

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self._time:
            return []  # bounds on other attributes say nothing about window_end: dropped
        v = self.frontier.update(port, punctuation.value)
        if v is None:
            return []
        return self._close(v)

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        v = self.frontier.end(port)
        if all(self._ended):
            return self.flush()
        return [] if v is None else self._close(v)

    def _closing(self, v: int) -> list[tuple[int, Block]]:
        """The ``(wid, block)`` pairs a punctuation ``v`` on ``window_end`` completes (a
        subclass closes something else first: :class:`~oop.adapt.panes.PanedAdaptWID`)."""
        assert self.logic is not None
        return self.logic.on_punctuation(v)

    def _close(self, v: int) -> list[Element]:
        """The windows ``v`` completes as one batch, then the punctuation forwarded."""
        assert self.logic is not None and self.output is not None
        out: list[Element] = []
        batch = self._emit(self._closing(v))
        if self.keys.n_codes >= self._keys_compact_at:  # after the emitted codes became keys
            self._compact_keys()
        self.budget.report(self, self._charged_bytes())  # purged: frees budget for others
        if batch is not None:
            out.append(batch)
        out.append(Punctuation("window_end", v))
        return out

    def flush(self) -> list[Element]:
        assert self.logic is not None
        batch = self._emit(self.logic.flush())
        return [batch] if batch is not None else []

    def _emit(self, closed: list[tuple[int, Block]]) -> pa.RecordBatch | None:
        """One output batch for the closed ``(wid, block)`` pairs. Bounded aggregates'
        states are concatenated first and finalized once. O(rows)."""
        assert self.logic is not None and self.output is not None
        if not closed:
            return None
        blocks = [b for _, b in closed]
        one = len(blocks) == 1
        gids = blocks[0].gids if one else np.concatenate([b.gids for b in blocks])
        # window bounds from the logic's cached geometry (kind.extents re-validates them);
        # the rows of one closing window share their bounds: filled, not repeated
        origin, slide, range_ = self._wgeom
        ends = [origin + (w + 1) * slide for w, _ in closed]
        if len(set(ends)) == 1:
            end = np.full(len(gids), ends[0], np.int64)
        else:
            end = np.repeat(np.asarray(ends, np.int64), [len(b) for b in blocks])
        start = end - range_
        schema = self.output.schema
        cols: list[pa.Array] = list(self.keys.keys(gids))
        ts_type = schema.field("window_start").type
        for x in (start, end):
            arr = pa.array(x)
            cols.append(arr if arr.type == ts_type else arr.cast(ts_type))
        for j, a in enumerate(self.logic.aggs):
            t = schema.field(a.name).type
            if one or not a.holistic:
                st = blocks[0].states[j] if one else [
                    np.concatenate([b.states[j][k] for b in blocks])
                    for k in range(len(blocks[0].states[j]))]
                col = self.aggs[j].column
                if a.spec.exact_sum and col in self.sum_max:  # st = [non-null count, sum]
                    check_exact_sum(self.name, col, st[0], self.sum_max[col], t)
                arr = a.finalize(st)
                cols.append(arr if arr.type == t else arr.cast(t))
                continue
            parts = [a.finalize(b.states[j]) for b in blocks]
            parts = [p if p.type == t else p.cast(t) for p in parts]
            cols.append(pa.concat_arrays(parts))
        out = pa.RecordBatch.from_arrays(cols, schema=schema)
        if len(gids) < 2:
            return out
        if len(self._order_scratch) < self.keys.n_codes:
            self._order_scratch = np.full(max(self.keys.n_codes, 2 * len(self._order_scratch)),
                                          -1, np.int64)
        order, moved = window_code_order(end, np.asarray(gids, np.int64), self._order_scratch)
        return out.take(pa.array(order)) if moved else out

    # ---- key compaction ----------------------------------------------------------------
    def _live_codes(self, n: int) -> np.ndarray:
        """A bool per group code ``< n``: some state holds one of its tuples -- a partial, a
        buffered tuple, a count in ``winVol`` (a subclass adds its own). An entry of H
        with ``winVol`` 0 whose eager flag alone is left is not held (004 §6.3 removes
        such groups from H): so the rule does not depend on which groups are eager, and a
        run on key partitions compacts when one thread does (:mod:`oop.adapt.threaded`). O(n + state)."""
        lg = self.logic
        assert lg is not None
        live = lg.live_codes(n)
        g = min(n, lg.n_groups)
        if lg.monitor and g:
            live[:g] = lg.wv[:g].any(axis=1)  # winVol without the flag bit
            live[lg.eager.held_gids()] = True
            live[lg.buffer.held_gids()] = True
        return live

    def _remap_codes(self, keep: np.ndarray, remap: np.ndarray) -> None:
        """Renumber every group code held (a subclass renumbers its own state too)."""
        assert self.logic is not None
        self.logic.remap_groups(keep, remap)

    def _compact_keys(self) -> None:
        """Forget the keys no state holds any more (all their windows closed: no partial,
        no buffered tuple, no ``winVol`` entry, no kept pane).

        The rule of ``WindowAggregate._compact_keys``: checked once the dictionary holds
        ``KEYS_COMPACT_MIN`` keys and then each time it doubled since the last check;
        compacts when more than half of its keys are dead: the dictionary is rebuilt
        from the live keys (:meth:`KeyEncoder.compact`, first-appearance order kept) and
        every held code renumbered through one remap array (the eager store's slots or
        blocks, the lazy buffer's rows, ``winVol``). A key that comes back gets a new
        code. Cost O(state + keys), amortized over the keys added since the last check.
        """
        n = self.keys.n_codes
        if not self.by:  # one group: nothing to forget
            self._keys_compact_at = 1 << 62
            return
        keep = np.flatnonzero(self._live_codes(n))
        remap, self._keys_compact_at = compaction_remap(keep, n, KEYS_COMPACT_MIN)
        if remap is None:
            return
        self.keys.compact(keep)
        self._remap_codes(keep, remap)
        self.key_compactions += 1

    def held_key_values(self) -> np.ndarray | None:
        """The values of the one integer key column that some state still holds (None: the
        key is not one integer column). Used by a run on key partitions
        (:class:`~oop.adapt.threaded.ThreadedAdapt`) to compact its global dictionary; call
        only between elements. Cost O(state + keys)."""
        if len(self.by) != 1:
            return None
        keep = np.flatnonzero(self._live_codes(self.keys.n_codes))
        if not keep.shape[0]:
            return np.empty(0, np.int64)
        vals = self.keys.keys(keep)[0]
        if not pa.types.is_integer(vals.type):
            return None
        return np.asarray(vals.to_numpy(zero_copy_only=False), np.int64)

    def rekey(self, old_to_new: np.ndarray) -> None:
        """Replace every value ``v`` of the one integer key column by ``old_to_new[v]`` (-1:
        no state holds that key any more, :meth:`held_key_values`): the dead keys are
        forgotten first (a key compaction), then the dictionary's values are replaced, the
        codes unchanged. Cost O(state + keys)."""
        n = self.keys.n_codes
        if not n:
            return
        keep = np.flatnonzero(self._live_codes(n))
        if keep.shape[0] < n:
            remap = np.full(n, -1, np.int64)
            remap[keep] = np.arange(keep.shape[0])
            self.keys.compact(keep)
            self._remap_codes(keep, remap)
            self.key_compactions += 1
        self.keys.remap_values(old_to_new)

    # ---- state -----------------------------------------------------------------------------
    def state_size(self) -> StateSize:
        if self.logic is None:
            return StateSize()
        return StateSize(self.logic.state_items(), self.logic.total_bytes())

    def _charged_bytes(self) -> int:
        """What the plan's state budget (:mod:`oop.limits`) is charged: the state plus the
        per-group index over the group codes held -- the key dictionary and the logic's
        per-group arrays (:meth:`AdaptLogic.index_bytes`), which ``state_size`` leaves
        out to compare with 004's ``H`` (they shrink at a key compaction). O(1)."""
        assert self.logic is not None
        return self.state_size().bytes + self.keys.nbytes() + self.logic.index_bytes()

    def adapt_metrics(self) -> dict[str, Any]:
        """Switches, peak bytes by kind, and the eager/lazy/transitional timeline."""
        assert self.logic is not None
        lg = self.logic
        return {
            "mode": lg.mode_name,
            "switches_to_eager": lg.switches_to_eager,
            "switches_to_lazy": lg.switches_to_lazy,
            "state_bytes": lg.state_bytes(),
            "peak_bytes": lg.peak.as_dict(),
            "aggr_bytes": lg.aggr,
            "tup_bytes": lg.tup,
            "wed": lg.wed.value,
            "stream_volume": lg.volume.value,
            "offsets": lg.offsets.offsets().tolist(),
            "timeline": lg.timeline.as_dict(),
            "key_compactions": self.key_compactions,
        }

    def snapshot(self) -> Any:
        assert self.logic is not None
        return {**super().snapshot(), "logic": self.logic.snapshot(), "keys": self.keys.snapshot(),
                "frontier": (list(self.frontier.values), self.frontier.emitted),
                "sum_max": dict(self.sum_max),
                "keys_compact": (self._keys_compact_at, self.key_compactions)}

    def restore(self, state: Any) -> None:
        assert self.logic is not None
        super().restore(state)
        self.logic.restore(state["logic"])
        self.keys.restore(state["keys"])
        self.sum_max = dict(state["sum_max"])
        self._keys_compact_at, self.key_compactions = state.get(
            "keys_compact", (KEYS_COMPACT_MIN, 0))
        self.frontier.values, self.frontier.emitted = list(state["frontier"][0]), state["frontier"][1]

    def _check(self) -> None:
        if self.logic is not None:
            self.logic._check()
        self.frontier._check()
