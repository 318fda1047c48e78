"""Buffering window aggregate: the in-order way to evaluate a window query (004 §3.1, §6.1.5).

What it computes: for every non-empty window extent ``[start, end)`` of the
window kind (``extent()``/``wids()`` of :mod:`oop.window.kinds`) and every
group, the aggregates over the tuples with ``start <= t.a < end`` -- the
same rows as the WID operator, ``(by..., window_start, window_end, aggs...)``.

How (the *buffering* technique): tuples are kept in a buffer sorted by the
windowing attribute; the end of an extent is detected from *order*: once the
input has progressed to ``bound >= end`` the extent is materialised from the
buffer (two binary searches) and aggregated, then tuples before the next
open extent's start are purged. Per extent the cost is O(extent size) --
every tuple is touched once per extent it belongs to (``range/slide`` times).

* ``differential=True`` (count/sum/mean/var/std only; 004 Eq. 6.4): the
  aggregate of extent ``k`` is derived from extent ``k-1`` by adding the
  tuples that entered and subtracting those that expired -- O(slide) per
  extent instead of O(range).

``bound`` (how far the input is complete) and what is *late*, by ``slack``:

* ``None`` -- ordered input (behind a Merge/SortBuffer): ``bound`` is the
  largest time seen; a tuple below it breaks the order and is late.
  Punctuation ``P(a, v)`` also raises ``bound`` to ``v`` (heartbeat).
* :class:`Slack` ``(d, "consistent")`` -- ``bound = hwm - d``; a tuple below
  the bound at its arrival is dropped from *every* extent (004 §6.1.5:
  consistent slack; the same as a time-slack SortBuffer in front).
* :class:`Slack` ``(d, "generous")`` -- same ``bound``, but a late tuple is
  only dropped from the extents already closed; it still counts in every
  extent that is open (each buffered row keeps the first window it may
  count in). Dropped only when all its extents are closed;
  ``metrics.counters["partially_late"]`` counts the tuples kept for some
  extents but missed by closed ones. (Not combinable with ``differential``.)

On a punctuation ``P(a, v)`` (unless ``heartbeat=False``, the pure-slack
plans): ``bound = max(bound, v)`` and the complete extents are closed.
After closing, the operator emits ``P(window_end, e)`` with ``e`` the end of
the first window still open: the output progresses on ``window_end`` like
the WID output.

State: the buffered tuples (items) -- the memory cost the thesis charges to
buffering. Row-based windows (:class:`~oop.window.kinds.RowSliding`) use the
arrival position as the windowing value (always ordered).

Supported aggregates: count, sum, mean, min, max, var, std (numba kernels
over the buffered columns). Holistic aggregates are not implemented in this
baseline (ConfigError names them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from oop.errors import ConfigError
from oop.aggregates import REGISTRY, get
from oop.aggregates.moments import variance_from_sums
from oop.iop_baseline._late import DropsLate
from oop.metrics import StateSize
from oop.window.aggregates import Lane
from oop.window.values import (ColumnValues, LaneInfo, check_agg_types, check_exact_sum,
                               column_values, exact_sum_columns, is_numeric_type, lane_array,
                               lane_infos, lane_input, max_abs, shifted_sum)
from oop.operators.base import StreamInfo, require_columns
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import parse_duration, time_values

__all__ = ["BufferingWindow", "Slack", "SUPPORTED", "extent_reference", "nonempty_windows",
           "supports"]

#: bounded aggregates without event-time order (first/last need it; this baseline sorts none)
SUPPORTED = tuple(n for n, s in REGISTRY.items() if not s.holistic and not s.needs_time)


def supports(a: Any) -> bool:
    """Whether the buffering baseline computes aggregate ``a`` (an :class:`Agg`)."""
    return not a.holistic and not a.spec.needs_time


_DIFFERENTIAL = tuple(n for n in SUPPORTED if REGISTRY[n].differential == "full")
_OPS = {"sum": 0, "fsum": 0, "min": 1, "max": 2, "sumsq": 3}  # fsum: a sum in float64


@dataclass(frozen=True)
class Slack:
    """Slack ``amount`` (duration or int in the stream's unit) with 004 §6.1.5 ``semantics``.

    >>> Slack("2s", "generous").semantics
    'generous'
    """

    amount: int | str
    semantics: Literal["consistent", "generous"] = "consistent"

    def __post_init__(self) -> None:
        if self.semantics not in ("consistent", "generous"):
            raise ConfigError(f"slack semantics {self.semantics!r}: use 'consistent' (a late tuple "
                              "leaves every extent) or 'generous' (only the closed ones)")
        if isinstance(self.amount, (int, np.integer)) and self.amount < 0:
            raise ConfigError(f"slack amount must be >= 0, got {self.amount}")


# ---- kernels -------------------------------------------------------------
@njit(cache=True)
def _extent_lane(elo, ehi, ewid, minw, codes, vals, valid, n_groups, op):  # type: ignore[no-untyped-def]
    """Materialise each extent ``rows[elo[k]:ehi[k]]`` and reduce per group.

    Row ``i`` counts in extent ``k`` only when ``minw[i] <= ewid[k]`` (generous
    slack: a tuple joins the extents still open at its arrival).

    Output order: extent by extent, groups in order of first appearance.
    Returns (ext index, code, rows, non-null count, accumulator).
    """
    total = 0
    for k in range(elo.shape[0]):
        total += min(ehi[k] - elo[k], n_groups)  # at most one output per (extent, group)
    oe = np.empty(total, np.int64)
    oc = np.empty(total, np.int64)
    orows = np.zeros(total, np.int64)
    onn = np.zeros(total, np.int64)
    oacc = np.zeros(total, vals.dtype)
    slot = np.full(n_groups, -1, np.int64)
    has_valid = valid.shape[0] > 0
    n = 0
    for k in range(elo.shape[0]):
        first = n
        for i in range(elo[k], ehi[k]):
            if minw[i] > ewid[k]:
                continue
            g = codes[i]
            j = slot[g]
            if j < 0:
                j = n
                slot[g] = j
                oe[j] = k
                oc[j] = g
                n += 1
            orows[j] += 1
            if has_valid and valid[i] == 0:
                continue
            v = vals[i]
            if onn[j] == 0:
                oacc[j] = v * v if op == 3 else v
            elif op == 0:
                oacc[j] += v
            elif op == 1:  # NaN is the greatest value (docs/semantics.md)
                a = oacc[j]
                if v < a or (a != a and v == v):
                    oacc[j] = v
            elif op == 2:
                if v > oacc[j] or v != v:
                    oacc[j] = v
            else:
                oacc[j] += v * v
            onn[j] += 1
        for j in range(first, n):
            slot[oc[j]] = -1
    return oe[:n], oc[:n], orows[:n], onn[:n], oacc[:n]


@njit(cache=True)
def _diff_lane(elo, ehi, codes, vals, valid, n_groups, square, state_rows, state_nn, state_acc,
               pos, state_nf):  # type: ignore[no-untyped-def]
    """Differential sums (Eq. 6.4): extent k = extent k-1 + entered - expired.

    NaN and infinite values are not added to ``state_acc`` (subtracting them
    would leave NaN behind in every later extent) but counted per group in
    ``state_nf[3g .. 3g+2]`` (NaN, +inf, -inf); an extent's sum is the finite
    sum combined with them by IEEE rules (docs/semantics.md).

    ``pos = [lo, hi]`` is the buffer range the running sums cover; it and the
    per-group ``state_*`` carry over between calls. ``elo``/``ehi`` must be
    non-decreasing. Output order: extent by extent, groups ascending by code
    among the groups with rows in the extent.
    """
    cap = 0
    for k in range(elo.shape[0]):
        cap += min(ehi[k] - elo[k], n_groups)
    oe = np.empty(cap, np.int64)
    oc = np.empty(cap, np.int64)
    orows = np.empty(cap, np.int64)
    onn = np.empty(cap, np.int64)
    oacc = np.empty(cap, vals.dtype)
    mark = np.zeros(n_groups, np.uint8)
    n = 0
    lo = pos[0]
    hi = pos[1]
    for k in range(elo.shape[0]):
        if elo[k] >= hi:  # disjoint from the running range: restart it
            for i in range(lo, hi):
                g = codes[i]
                state_rows[g] = 0
                state_nn[g] = 0
                state_acc[g] = 0
                state_nf[3 * g] = 0
                state_nf[3 * g + 1] = 0
                state_nf[3 * g + 2] = 0
            lo = elo[k]
            hi = elo[k]
        # expired rows first: a group whose rows all expire restarts from exactly 0 (the
        # signs as int64, not literals: numba would compile a specialization for each)
        _diff_apply(codes, vals, valid, square, state_rows, state_nn, state_acc, lo, elo[k],
                    np.int64(-1), state_nf)
        _diff_apply(codes, vals, valid, square, state_rows, state_nn, state_acc, hi, ehi[k],
                    np.int64(1), state_nf)
        lo = elo[k]
        hi = ehi[k]
        # emit the groups present in the extent (one scan of the extent's codes for the set)
        first = n
        for i in range(lo, hi):
            g = codes[i]
            if mark[g] == 0:
                mark[g] = 1
                oe[n] = k
                oc[n] = g
                orows[n] = state_rows[g]
                onn[n] = state_nn[g]
                if state_nf[3 * g] or state_nf[3 * g + 1] or state_nf[3 * g + 2]:
                    oacc[n] = _with_nonfinite(state_acc[g], state_nf, g)  # floats only
                else:
                    oacc[n] = state_acc[g]  # int64 sums stay exact
                n += 1
        for j in range(first, n):
            mark[oc[j]] = 0
    pos[0] = lo
    pos[1] = hi
    return oe[:n], oc[:n], orows[:n], onn[:n], oacc[:n]


@njit(cache=True)
def _with_nonfinite(acc, state_nf, g):  # type: ignore[no-untyped-def]
    """The running sum ``acc`` of group ``g``'s finite values with its NaN/+inf/-inf counts."""
    if state_nf[3 * g] > 0 or (state_nf[3 * g + 1] > 0 and state_nf[3 * g + 2] > 0):
        return acc * np.nan
    if state_nf[3 * g + 1] > 0:
        return acc + np.inf
    if state_nf[3 * g + 2] > 0:
        return acc - np.inf
    return acc


@njit(cache=True)
def _diff_apply(codes, vals, valid, square, state_rows, state_nn, state_acc, a, b,
                sign, state_nf):  # type: ignore[no-untyped-def]
    """Add (``sign=1``: rows enter the extent) or subtract (``sign=-1``: rows expire)
    buffer rows ``[a, b)`` to / from the per-group running sums (NaN / inf counted apart).
    A group whose last row expires has a sum of exactly 0 again: subtracting its float
    values one by one would leave their rounding behind (~1e-11 in the next variance of
    equal values, tests/test_variance_operators.py)."""
    has_valid = valid.shape[0] > 0
    for i in range(a, b):
        g = codes[i]
        state_rows[g] += sign
        if not has_valid or valid[i] != 0:
            state_nn[g] += sign
            x = vals[i] * vals[i] if square else vals[i]
            if x - x == 0:  # finite (False for NaN and +-inf; always True for integers)
                state_acc[g] += x if sign > 0 else -x
            else:
                state_nf[3 * g + (0 if x != x else (1 if x > 0 else 2))] += sign
        if state_rows[g] == 0:
            state_acc[g] = 0


def nonempty_windows(kind: Any, sorted_times: np.ndarray) -> np.ndarray:
    """Ids of the windows holding at least one of ``sorted_times`` (ascending), in O(windows).

    For Sliding/Tumbling/RowSliding ``wids()`` is monotone in ``t``, so the
    union of the ranges ``[lo(t), hi(t))`` is a few merged intervals -- no
    ``range/slide`` expansion per tuple (``kind.windows`` is the reference).
    """
    if not len(sorted_times):
        return np.zeros(0, np.int64)
    lo, hi = kind.wids(np.unique(sorted_times))
    hi_before = np.maximum.accumulate(hi)
    new = np.ones(len(lo), bool)
    new[1:] = lo[1:] > hi_before[:-1]
    starts = lo[new]
    ends = np.append(hi_before[np.flatnonzero(new)[1:] - 1], hi_before[-1])
    lengths = np.maximum(ends - starts, 0)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + offs


def extent_reference(times: Sequence[int], keys: Sequence[Any], vals: Sequence[Any],
                     extents: Sequence[tuple[int, int]], fn: str) -> dict[tuple[int, Any], Any]:
    """Tuple-at-a-time: ``{(extent index, key): aggregate}`` over non-empty (extent, key)."""
    spec = get(fn)
    out: dict[tuple[int, Any], Any] = {}
    for k, (s, e) in enumerate(extents):
        groups: dict[Any, list[Any]] = {}
        for t, g, v in zip(times, keys, vals):
            if s <= t < e:
                groups.setdefault(g, []).append(v)
        for g, vs in groups.items():
            st = spec.init(None)  # the registry's scalar reference (count/sum/mean/min/max)
            for v in vs:
                st = spec.update(None, st, v)
            out[(k, g)] = spec.to_output(spec.finalize(None, st))
    return out


# ---- the operator ----------------------------------------------------------
class BufferingWindow(DropsLate):
    """Window aggregate by buffering ordered input (see module doc).

    ``kind`` is a window kind of :mod:`oop.window.kinds` (Tumbling, Sliding,
    RowSliding); ``aggs`` aggregates of :mod:`oop.window.agg`;
    ``by`` the group columns.
    """

    def __init__(self, kind: Any, aggs: Any, by: Sequence[str] = (), *,
                 differential: bool = False, slack: Slack | None = None,
                 heartbeat: bool = True, late: LatePolicy | str = "drop",
                 name: str = "buffering_window") -> None:
        super().__init__(name)
        self.heartbeat = heartbeat
        from oop.window.aggregates import as_aggs

        self.kind_spec = kind
        self.aggs = as_aggs(aggs)
        self.by = tuple(by)
        self.differential = differential
        self.slack = slack
        self.late_policy = LatePolicy.parse(late)
        bad = [a.name for a in self.aggs if not supports(a)]
        if bad:
            raise ConfigError(f"{name}: the buffering baseline implements {', '.join(SUPPORTED)}; "
                              f"not {bad} -- use the WID window for holistic aggregates")
        if differential:
            nd = [a.name for a in self.aggs if a.differential != "full"]
            if nd:
                raise ConfigError(f"{name}: differential=True needs subtractable aggregates "
                                  f"({', '.join(_DIFFERENTIAL)}); {nd} cannot subtract expired tuples")
        self.kind: Any = None
        self.row_based = bool(getattr(kind, "row_based", False))
        from oop.window.kinds import RowSliding, Sliding

        if not isinstance(kind, (Sliding, RowSliding)) or getattr(kind, "partitioned", False):
            raise ConfigError(f"{name}: the buffering baseline covers Tumbling, Sliding and "
                              f"RowSliding windows, not {type(kind).__name__}")
        if differential and slack is not None and slack.semantics == "generous":
            raise ConfigError(f"{name}: generous slack adds a late tuple to only some of its "
                              "extents, which the differential variant cannot subtract; use "
                              "differential=False")
        if self.row_based and slack is not None:
            raise ConfigError(f"{name}: row-based windows are ordered by arrival; slack does not apply")
        self.attr = ""
        self.d = 0
        self.bound = INT64_MIN
        self.hwm = INT64_MIN
        self.next_wid: int | None = None
        self.rows_seen = 0
        self.punct_out = INT64_MIN
        self.dropped = 0
        self.encoder: Any = None
        self.value_cols: list[str] = []
        self.buf_t = np.zeros(0, np.int64)
        self.buf_codes = np.zeros(0, np.int64)
        self.buf_minw = np.zeros(0, np.int64)  # first window each row may count in (generous)
        self.buf_vals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.diff_state: dict[tuple[str | None, str], tuple[np.ndarray, ...]] = {}
        self.decimals: set[str] = set()  # decimal columns (held unscaled)
        self.sum_max: dict[str, int] = {}  # column summed in int64 -> largest |value| seen
        self.shift: dict[str, Any] = {}  # column -> variance shift (see _lane_values)

    # ---- opening -----------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        self.value_cols = sorted({a.column for a in self.aggs if a.column})
        require_columns(info, [*self.by, *self.value_cols], self.name)
        if info.time is None and not self.row_based:
            raise ConfigError(f"{self.name}: stream {info.name!r} has no progressing attribute")
        self.attr = info.time or ""
        unit = info.unit() if info.time else "ms"
        self.kind = self.kind_spec if self.row_based else self.kind_spec.resolve(unit)
        if self.slack is not None:
            self.d = parse_duration(self.slack.amount, unit)
        if self.by:
            from oop.window.keys import KeyEncoder

            self.encoder = KeyEncoder(list(self.by))
        tt = pa.int64() if self.row_based else info.schema.field(self.attr).type
        if not self.row_based and not pa.types.is_timestamp(tt):
            tt = pa.int64()
        check_agg_types(self.aggs, info.schema, self.name)
        for a in self.aggs:
            if a.column and not is_numeric_type(info.schema.field(a.column).type):
                raise ConfigError(
                    f"{self.name}: {a.name} on column {a.column!r} of type "
                    f"{info.schema.field(a.column).type}: the buffering baseline aggregates "
                    "numeric, boolean, temporal and decimal columns; use the WID window "
                    "(oop.window) for strings")
        # columns summed exactly in int64, by the window operators' rule (decimals, and
        # integers under sum); mean of integers and var/std of any column sum value - shift
        # in float64 (their "fsum" lane, oop.aggregates.moments)
        self.decimals = {c for c in self.value_cols if pa.types.is_decimal(info.schema.field(c).type)}
        self.sum_max = exact_sum_columns(lane_infos(self.aggs, info.schema))
        fields = [info.schema.field(c) for c in self.by]
        fields += [pa.field("window_start", tt), pa.field("window_end", tt)]
        for a in self.aggs:
            fields.append(pa.field(a.name, self._out_type(a, info.schema)))
        schema = pa.schema(fields)
        times = {} if self.row_based else {"window_end": unit, "window_start": unit}
        return StreamInfo(self.name, schema, times, None if self.row_based else "window_end")

    @staticmethod
    def _out_type(a: Any, schema: pa.Schema) -> pa.DataType:
        from oop.window.aggregates import output_type

        return output_type(a, schema.field(a.column).type if a.column else None)

    # ---- input -------------------------------------------------------------
    def _values(self, batch: pa.RecordBatch, col: str, float_: bool) -> tuple[np.ndarray, np.ndarray]:
        """Column ``col`` as the window operators read it (int64, float64, or unscaled decimal)."""
        cv = column_values(batch, col, as_float=float_)
        if col in self.sum_max:
            self.sum_max[col] = max(self.sum_max[col], max_abs(cv.values))
        return cv.values, cv.valid

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        n = batch.num_rows
        if n == 0:
            return []
        if self.row_based:
            times = np.arange(self.rows_seen, self.rows_seen + n, dtype=np.int64)
            self.rows_seen += n
            self._ingest(batch, times)
            self.bound = max(self.bound, self.rows_seen)
            return self._close()
        times = time_values(batch, self.attr, self.inputs[0].name)
        if self.slack is not None and self.slack.semantics == "generous":
            return self._on_batch_generous(batch, times)
        if self.slack is None:  # ordered input: a tuple below an earlier one breaks the order
            prev = np.empty_like(times)
            prev[0] = self.bound
            if len(times) > 1:
                np.maximum(np.maximum.accumulate(times[:-1]), self.bound, out=prev[1:])
            late = times < prev
        else:  # consistent slack: below hwm - d at arrival -> dropped from every extent
            from oop.iop_baseline.sort_buffer import _arrival_bounds

            late = times < np.maximum(_arrival_bounds(times, self.hwm, self.d), self.bound)
        batch, keep = self._route_late(batch, late)
        if keep is not None:
            times = times[keep]
        if len(times):
            self._ingest(batch, times)
            if self.slack is None:
                self.bound = max(self.bound, int(times.max()))
            else:
                self.hwm = max(self.hwm, int(times.max()))
                self.bound = max(self.bound, self.hwm - self.d)
        return self._close()

    def _first_open_vec(self, b: np.ndarray) -> np.ndarray:
        """``first_open`` of each bound (time-based Sliding/Tumbling), vectorized."""
        k = self.kind
        return np.floor_divide(np.maximum(b, INT64_MIN // 2) - k.o, k.s)

    def _on_batch_generous(self, batch: pa.RecordBatch, times: np.ndarray) -> list[Element]:
        """Generous slack, exactly as tuple at a time, in one pass over the batch.

        Tuple ``i`` arrives when the bound is ``b_i`` (``hwm - d`` of the tuples
        before it): every window ``w < first_open(b_i)`` is closed for it. It is
        kept with ``minw = first_open(b_i)`` (it counts in windows ``>= minw``)
        unless all its windows are closed (late).
        """
        from oop.iop_baseline.sort_buffer import _arrival_bounds

        b = np.maximum(_arrival_bounds(times, self.hwm, self.d), self.bound)
        fo = self._first_open_vec(b)
        if self.next_wid is not None:
            fo = np.maximum(fo, self.next_wid)
        lo, hi = self.kind.wids(times)
        late = hi - 1 < fo
        self.metrics.count("partially_late", int(((lo < fo) & ~late).sum()))
        batch, keep = self._route_late(batch, late)
        if keep is not None:
            times, fo = times[keep], fo[keep]
        if len(times):
            self._ingest(batch, times, minw=fo)
            self.hwm = max(self.hwm, int(times.max()))
            self.bound = max(self.bound, self.hwm - self.d)
        return self._close()

    def _ingest(self, batch: pa.RecordBatch, times: np.ndarray,
                minw: np.ndarray | None = None) -> None:
        codes = self.encoder.encode(batch).astype(np.int64) if self.encoder is not None \
            else np.zeros(len(times), np.int64)
        newvals = {}
        for c in self.value_cols:
            is_int = self.buf_vals[c][0].dtype == np.int64 if c in self.buf_vals else None
            newvals[c] = self._values(batch, c, float_=False if is_int is None else not is_int)
        self._append(times, codes, newvals,
                     np.full(len(times), INT64_MIN, np.int64) if minw is None else minw)

    def _route_late(self, batch: pa.RecordBatch, late: np.ndarray
                    ) -> tuple[pa.RecordBatch, np.ndarray | None]:
        return self.drop_late(batch, late, lambda i: (
            f"{self.name}: {int(late.sum())} tuple(s) arrived after their window(s) closed "
            "(out of order beyond the slack); widen the slack or use late='drop'"))

    def _append(self, times: np.ndarray, codes: np.ndarray,
                vals: dict[str, tuple[np.ndarray, np.ndarray]], minw: np.ndarray) -> None:
        n0 = len(self.buf_t)
        all_t = np.concatenate([self.buf_t, times])
        sorted_already = (n0 == 0 or times[0] >= self.buf_t[-1]) and bool(np.all(times[1:] >= times[:-1]))
        order = None if sorted_already else np.argsort(all_t, kind="stable")
        self.buf_t = all_t if order is None else all_t[order]
        c = np.concatenate([self.buf_codes, codes])
        self.buf_codes = c if order is None else c[order]
        mw = np.concatenate([self.buf_minw, minw])
        self.buf_minw = mw if order is None else mw[order]
        for col, (v, valid) in vals.items():
            if col in self.buf_vals:
                ov, ovalid = self.buf_vals[col]
                if len(ovalid) or len(valid):
                    ovalid = ovalid if len(ovalid) else np.ones(n0, np.uint8)
                    valid = valid if len(valid) else np.ones(len(v), np.uint8)
                    valid = np.concatenate([ovalid, valid])
                v = np.concatenate([ov, v.astype(ov.dtype)])
            if order is not None:
                v = v[order]
                valid = valid[order] if len(valid) else valid
            self.buf_vals[col] = (v, valid)
        if order is not None and self.diff_state:
            # buffer positions moved: restart the running sums
            for st in self.diff_state.values():
                st[0][:] = 0
                st[1][:] = 0
                st[2][:] = 0
                st[3][:] = 0

    # ---- closing extents ------------------------------------------------------
    def _close(self) -> list[Element]:
        if not len(self.buf_t) or self.bound == INT64_MIN:
            return self._punct()
        upto = self.kind.first_open(self.bound)  # windows < upto are complete
        start = self.next_wid
        t_first = int(self.buf_t[0])
        lo0, _ = self.kind.wids(np.array([t_first], np.int64))
        first_w = int(lo0[0]) if start is None else max(start, int(lo0[0]))
        out: list[Element] = []
        if upto > first_w:
            # candidate windows: those holding a buffered tuple, in [first_w, upto)
            _, end_last = self.kind.extents(np.array([upto - 1], np.int64))
            k = int(np.searchsorted(self.buf_t, int(end_last[0]), side="left"))
            if k:
                wins = nonempty_windows(self.kind, self.buf_t[:k])
                wins = wins[(wins >= first_w) & (wins < upto)]
                if len(wins):
                    out.extend(self._aggregate(wins))
            self.next_wid = upto
        else:  # nothing to emit, but every window below ``upto`` is complete
            self.next_wid = upto if start is None else max(start, upto)
        self._purge()
        return out + self._punct()

    def _aggregate(self, wins: np.ndarray) -> list[Element]:
        starts, ends = self.kind.extents(wins)
        elo = np.searchsorted(self.buf_t, starts, side="left").astype(np.int64)
        ehi = np.searchsorted(self.buf_t, ends, side="left").astype(np.int64)
        ng = max(1, self.encoder.n_codes if self.encoder is not None else 1)
        cols: dict[str, Any] = {}
        base = None
        lanes: dict[tuple[str | None, str], tuple[np.ndarray, ...]] = {}

        def lane(col: str | None, op: str) -> tuple[np.ndarray, ...]:
            key = (col, op)
            if key not in lanes:
                v, valid = self._lane_values(col, op)
                if self.differential:
                    lanes[key] = self._diff(col, op, elo, ehi, v, valid, ng)
                else:
                    lanes[key] = _extent_lane(elo, ehi, wins, self.buf_minw, self.buf_codes, v,
                                              valid, ng, _OPS[op])
            return lanes[key]

        base = lane(None, "sum")
        oe, oc, orows = base[0], base[1], base[2]
        for a in self.aggs:
            sp = a.spec
            if sp.counts_rows:
                cols[a.name] = pa.array(orows, pa.int64())
                continue
            op = "sum" if sp.arithmetic else str(sp.value_op)
            if (op == "sum" and a.column not in self.sum_max
                    and (self.buf_vals[a.column][0].dtype == np.int64 or sp.value_op == "sumsq")):
                op = "fsum"  # mean of an integer column, var/std of any: value - shift
            _, _, _, nn, acc = lane(a.column, op)
            null = nn == 0
            ft = self.output.schema.field(a.name).type  # type: ignore[union-attr]
            scale = 1.0  # decimal values are held unscaled
            if a.column in self.decimals:
                scale = 10.0 ** self.inputs[0].schema.field(a.column).type.scale
            if op == "sum" and a.column in self.sum_max:
                check_exact_sum(self.name, a.column, orows, self.sum_max[a.column], ft)
            if sp.exact_sum or sp.selective:
                arr = lane_array(acc, null, ft)  # any lane type back to the column's type
            elif sp.value_op == "sum":  # mean
                if op == "fsum":  # the fsum lane sums value - shift
                    mean = acc / np.maximum(nn, 1) + self.shift.get(a.column, 0)
                else:
                    mean = acc.astype(np.float64) / np.maximum(nn, 1) / scale
                arr = pa.array(mean, mask=null)
            else:
                _, _, _, _, ss = lane(a.column, "sumsq")  # sum of (value - shift)**2
                s = shifted_sum(acc, nn, self.shift.get(a.column, 0), op == "fsum")
                var = variance_from_sums(nn, s, ss) / (scale * scale)
                arr = pa.array(sp.from_variance(var), mask=nn < 2)  # type: ignore[attr-defined]
            cols[a.name] = arr
        assert self.output is not None
        schema = self.output.schema
        arrays: list[pa.Array] = []
        if self.by:
            keys = self.encoder.key_table().take(pa.array(oc))
            arrays += [keys.column(c).combine_chunks() for c in self.by]
        ws, we = starts[oe], ends[oe]
        tt = schema.field("window_start").type
        arrays += [pa.array(ws).cast(tt) if pa.types.is_timestamp(tt) else pa.array(ws),
                   pa.array(we).cast(tt) if pa.types.is_timestamp(tt) else pa.array(we)]
        for a in self.aggs:
            arr = cols[a.name]
            ft = schema.field(a.name).type
            arrays.append(arr if arr.type == ft else arr.cast(ft))
        return [pa.RecordBatch.from_arrays(arrays, schema=schema)] if len(oe) else []

    def _lane_values(self, col: str | None, op: str) -> tuple[np.ndarray, np.ndarray]:
        """The buffered values lane ``op`` reduces: ``sumsq`` and ``fsum`` take ``value -
        shift`` as float64 (the difference in int64 for integer columns, as the window
        operators do, so large values keep their low digits)."""
        if col is None:
            return np.zeros(len(self.buf_t), np.int64), np.zeros(0, np.uint8)
        v, valid = self.buf_vals[col]
        if op not in ("sumsq", "fsum"):
            return v, valid
        li = LaneInfo(Lane("sumsq", col), np.float64)  # the shifted input of both lanes
        vals, shift = lane_input(li, ColumnValues(v, valid), self.shift)
        return (vals - shift if shift else vals), valid

    def _diff(self, col: str | None, op: str, elo: np.ndarray, ehi: np.ndarray, v: np.ndarray,
              valid: np.ndarray, ng: int) -> tuple[np.ndarray, ...]:
        key = (col, op)
        st = self.diff_state.get(key)
        if st is None or len(st[0]) < ng:
            grown = (np.zeros(ng, np.int64), np.zeros(ng, np.int64), np.zeros(ng, v.dtype),
                     np.zeros(2, np.int64), np.zeros(3 * ng, np.int64))
            if st is not None:
                for old, new in zip(st[:3], grown[:3]):
                    new[: len(old)] = old
                grown[3][:] = st[3]
                if len(st) > 4:
                    grown[4][: len(st[4])] = st[4]
            st = grown
            self.diff_state[key] = st
        return _diff_lane(elo, ehi, self.buf_codes, v, valid, ng, op == "sumsq", st[0], st[1],
                          st[2], st[3], st[4])

    def _purge(self) -> None:
        """Drop buffered tuples before the first open extent's start."""
        if self.next_wid is None or not len(self.buf_t):
            return
        s, _ = self.kind.extents(np.array([self.next_wid], np.int64))
        k = int(np.searchsorted(self.buf_t, int(s[0]), side="left"))
        if k == 0:
            return
        for (col, op), st in self.diff_state.items():  # expire purged rows, shift the range
            lo, hi = int(st[3][0]), int(st[3][1])
            if lo < min(k, hi):
                v, valid = self._lane_values(col, op)
                _diff_apply(self.buf_codes, v, valid, op == "sumsq", st[0], st[1], st[2], lo,
                            min(k, hi), -1, st[4])
            st[3][0] = max(lo - k, 0)
            st[3][1] = max(hi - k, 0)
        self.buf_t = self.buf_t[k:]
        self.buf_codes = self.buf_codes[k:]
        self.buf_minw = self.buf_minw[k:]
        self.buf_vals = {c: (v[k:], valid[k:] if len(valid) else valid)
                         for c, (v, valid) in self.buf_vals.items()}

    def _punct(self) -> list[Element]:
        if self.row_based or self.next_wid is None:
            return []
        _, e = self.kind.extents(np.array([self.next_wid], np.int64))
        v = int(e[0])
        if v > self.punct_out:
            self.punct_out = v
            return [Punctuation("window_end", v)]
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if self.heartbeat and isinstance(punctuation, Punctuation) and punctuation.attr == self.attr:
            self.bound = max(self.bound, punctuation.value)
            return self._close()
        return []

    def flush(self) -> list[Element]:
        self.record_accuracy()
        self.bound = INT64_MAX - 1
        if not len(self.buf_t):
            return []
        # every remaining non-empty extent (all of them lie inside the buffer)
        wins = nonempty_windows(self.kind, self.buf_t)
        if self.next_wid is not None:
            wins = wins[wins >= self.next_wid]
        out = self._aggregate(wins) if len(wins) else []
        self.buf_t = self.buf_t[:0]
        self.buf_codes = self.buf_codes[:0]
        self.buf_minw = self.buf_minw[:0]
        self.buf_vals = {c: (v[:0], valid[:0]) for c, (v, valid) in self.buf_vals.items()}
        return list(out)

    # ---- state -------------------------------------------------------------------
    def state_size(self) -> StateSize:
        n = len(self.buf_t)
        per = 16 + 8 * len(self.buf_vals)
        return StateSize(n, n * per)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "t": self.buf_t.copy(), "codes": self.buf_codes.copy(), "minw": self.buf_minw.copy(),
                "vals": {c: (v.copy(), m.copy()) for c, (v, m) in self.buf_vals.items()},
                "bound": self.bound, "hwm": self.hwm, "next": self.next_wid,
                "rows": self.rows_seen, "p": self.punct_out,
                "enc": None if self.encoder is None else self.encoder.snapshot(),
                "dropped": self.dropped, "sum_max": dict(self.sum_max),
                "shift": dict(self.shift)}

    def restore(self, state: Any) -> None:
        super().restore(state)
        # copies: resuming twice from one checkpoint must not see the first run's changes
        self.buf_t, self.buf_codes = state["t"].copy(), state["codes"].copy()
        self.buf_vals = {c: (v.copy(), m.copy()) for c, (v, m) in state["vals"].items()}
        self.buf_minw = state["minw"].copy()
        self.bound, self.hwm, self.next_wid = state["bound"], state["hwm"], state["next"]
        self.rows_seen, self.punct_out = state["rows"], state["p"]
        if state["enc"] is not None:
            from oop.window.keys import KeyEncoder

            self.encoder = KeyEncoder(list(self.by))
            self.encoder.restore(state["enc"])
        self.dropped = state["dropped"]
        self.sum_max, self.shift = dict(state["sum_max"]), dict(state["shift"])
        self.diff_state = {}

    def _check(self) -> None:
        n = len(self.buf_t)
        assert len(self.buf_codes) == n and len(self.buf_minw) == n
        assert all(len(v) == n and (not len(m) or len(m) == n) for v, m in self.buf_vals.values())
        if n > 1:
            assert bool(np.all(self.buf_t[1:] >= self.buf_t[:-1])), "buffer not sorted"
