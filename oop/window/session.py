"""Session windows by event time (Flink's ``EventTimeSessionWindows`` / ``SESSION`` TVF).

What it computes: per key, the tuples are split into *sessions*. A tuple at
time ``t`` covers ``[t, t + gap)``; covers of the same key that strictly
intersect merge (Flink's rule: ``[s1, e1)`` and ``[s2, e2)`` merge iff
``s1 < e2 and s2 < e1``; touching covers, ``e1 == s2``, stay apart). So a
session is a maximal run of a key's tuples, sorted by time, in which every
step between neighbours is ``< gap``; a step ``>= gap`` starts a new session.
Output row per (key, session)::

    (keys, window_start = first tuple time, window_end = last tuple time + gap, aggregates)

Aggregates: count, sum, mean, min, max, var, std, first, last over integer
or floating columns, with the NaN/null rules of docs/semantics.md (their
sub-aggregates merge: var/std by :func:`oop.aggregates.moments.mom_merge`). Holistic ones
(median, quantile, distinct, heavy hitters, UDAFs) are refused.

Lateness (the rule of every window operator, docs/design.md §1): a tuple
with ``t < lwm`` (the last punctuation seen) is late and follows the
:class:`~oop.stream.late.LatePolicy`. With valid punctuation no tuple is
late; every non-late tuple's cover ends after ``lwm``, so it can never touch
a session already closed (closed sessions end ``<= lwm <= t``).

On a tuple (batch): rows are grouped by key code with one sort, merged with
the key's open sessions in one compiled sweep (:func:`_segments`: running
maximum of ``end`` per key) and the lanes folded per merged session
(numpy ``reduceat`` plus compiled select/moment kernels). Cost
O(S + (s + n) log(s + n)) per batch for ``S`` held sessions of which ``s``
have the batch's keys.

On a punctuation ``P(time, v)``: every session with ``window_end <= v`` is
emitted (one Arrow batch, sorted by key code then start) and purged; then
``P("window_end", e)`` is forwarded with ``e = min(end of every held
session, v - allowed_lateness + gap)``: no later row can end earlier.

``late="update"`` with ``allowed_lateness L``: tuples with ``t < lwm - L``
are dropped (counted); those in ``[lwm - L, lwm)`` are folded in. Sessions
are kept (marked emitted) until ``lwm - L >= window_end``. When a late
tuple changes emitted sessions (extends one, merges two, or joins one with
an open session) each of them is withdrawn by a row with
``is_retraction = true`` that repeats its emitted values (Flink's ``-U``/
``-D``); the merged session is emitted at once with ``is_revision = true``
when it is closed (``window_end <= lwm``), else at its punctuation. A late
tuple forming a closed session of its own is emitted at once
(``is_revision = true``). Applying the rows in order -- retraction deletes
``(keys, window_start, window_end)``, any other row upserts it -- gives the
sessions of every tuple with ``t >= lwm - L`` at its arrival.

State: per open session (key code, start, last time, emitted flag, lanes),
flat arrays in which each key's sessions are contiguous and sorted by start
(a batch gathers its keys' sessions, merges them and appends the result:
O(S) copying, sorting only the batch's keys); charged to the plan's state budget
(:mod:`oop.limits`) before it grows.

>>> import pyarrow as pa, oop
>>> from oop.window import agg
>>> t = pa.table({"ts": [1, 3, 20, 9, 40], "k": [1, 1, 1, 2, 1], "v": [1, 2, 3, 4, 5]})
>>> s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(12))
>>> rows = s.window(Session(5), [agg.count(), agg.sum("v")], by="k").collect().to_pylist()
>>> [(r["k"], r["window_start"], r["window_end"], r["count"]) for r in rows]
[(1, 1, 8, 2), (1, 20, 25, 1), (2, 9, 14, 1), (1, 40, 45, 1)]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.aggregates import REGISTRY
from oop.aggregates.moments import mom_merge_segments, shift_values, variance
from oop.errors import ConfigError, ValueRangeError
from oop.limits import current_budget
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns, resolve_window_time
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import check_time_column, time_arrow_type, time_values
from oop.window.aggregates import Agg, as_aggs, output_type
from oop.window.kinds import Size, WindowKind, _check_positive, _int
from oop.window.late import LateRule
from oop.window.output import as_time_array
from oop.window.state import SessionState
from oop.window.values import ColumnValues, check_exact_sum, max_abs, pick_shift

__all__ = ["Session", "SessionAggregate", "SessionReference", "session_reference", "session_oracle",
           "SUPPORTED"]

#: the aggregates session windows compute (their sub-aggregates merge in O(1))
SUPPORTED = tuple(n for n, s in REGISTRY.items() if not s.holistic)

#: the session lane holding each aggregate state layout (oop.aggregates value_op)
_NEEDS = {"sum": "sum", "min": "min", "max": "max", "sumsq": "mom", "first": "first",
          "last": "last"}

#: the key dictionary is compacted (dead keys dropped) once it holds this many keys
KEYS_COMPACT_MIN = 4096


@dataclass(frozen=True)
class Session(WindowKind):
    """Session window with inactivity ``gap``: a session ends ``gap`` after its last tuple.

    Not a WID kind: sessions have no fixed extents, so ``extent``/``wids``
    do not exist; :class:`SessionAggregate` computes them.

    >>> Session("30s").resolve("ms").g
    30000
    """

    gap: Size

    def __post_init__(self) -> None:
        _check_positive("Session", gap=self.gap)

    @cached_property
    def g(self) -> int:
        return _int(self.gap, "gap", "Session")


# ---- compiled kernels ------------------------------------------------------------------
@numba.njit(cache=True)
def _segments(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Rows sorted by (code, start): True where a row starts a new session (a new key, or
    ``start >= `` the running max end of the session so far: no strict intersection)."""
    n = code.shape[0]
    flags = np.zeros(n, np.bool_)
    if n == 0:
        return flags
    flags[0] = True
    run = end[0]
    for i in range(1, n):
        if code[i] != code[i - 1] or start[i] >= run:
            flags[i] = True
            run = end[i]
        elif end[i] > run:
            run = end[i]
    return flags


@numba.njit(cache=True)
def _less(a, b) -> bool:  # type: ignore[no-untyped-def]
    """a < b with NaN above every number (a NaN is never less; anything else is below NaN)."""
    if a != a:
        return False
    if b != b:
        return True
    return a < b


@numba.njit(cache=True)
def _seg_pick(vals, nn, bounds, want_max):  # type: ignore[no-untyped-def]
    """min (or max) of the valid values of each segment ``[bounds[j], bounds[j+1])``."""
    m = bounds.shape[0] - 1
    out = np.zeros(m, vals.dtype)
    for j in range(m):
        have = False
        for i in range(bounds[j], bounds[j + 1]):
            if nn[i] == 0:
                continue
            if not have:
                out[j] = vals[i]
                have = True
            elif want_max:
                if _less(out[j], vals[i]):
                    out[j] = vals[i]
            elif _less(vals[i], out[j]):
                out[j] = vals[i]
    return out


@numba.njit(cache=True)
def _seg_tv(ts, vals, nn, bounds, want_last):  # type: ignore[no-untyped-def]
    """first (smallest time, ties smaller value) or last (largest time, ties larger value)."""
    m = bounds.shape[0] - 1
    ot = np.zeros(m, np.int64)
    ov = np.zeros(m, vals.dtype)
    for j in range(m):
        have = False
        for i in range(bounds[j], bounds[j + 1]):
            if nn[i] == 0:
                continue
            if not have:
                ot[j], ov[j] = ts[i], vals[i]
                have = True
            elif want_last:
                if ts[i] > ot[j] or (ts[i] == ot[j] and _less(ov[j], vals[i])):
                    ot[j], ov[j] = ts[i], vals[i]
            elif ts[i] < ot[j] or (ts[i] == ot[j] and _less(vals[i], ov[j])):
                ot[j], ov[j] = ts[i], vals[i]
    return ot, ov


# ---- the state -------------------------------------------------------------------------
class _Sessions:
    """Flat arrays of sessions, each key's contiguous and sorted by start: ``code``,
    ``start``, ``last``, ``emitted`` and the lanes (``rows``; per value column ``nn``, ``sum``, ``min``, ``max``,
    ``ft``/``fv``, ``lt``/``lv``, ``fin``/``mean``/``m2``/``nf``). Rows of one batch are
    sessions of one tuple each, so batch and state merge with one code path."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.a = arrays

    def __len__(self) -> int:
        return int(self.a["code"].shape[0])

    def take(self, idx: np.ndarray) -> "_Sessions":
        return _Sessions({k: v[idx] for k, v in self.a.items()})

    def nbytes(self) -> int:
        return sum(int(v.nbytes) for v in self.a.values())

    @staticmethod
    def concat(parts: Sequence["_Sessions"]) -> "_Sessions":
        keys = parts[0].a.keys()
        return _Sessions({k: np.concatenate([p.a[k] for p in parts]) for k in keys})

    def merge(self, gap: int) -> tuple["_Sessions", np.ndarray, np.ndarray]:
        """Sort by (code, start), merge strictly intersecting covers. Returns the merged
        sessions, the sort order and the segment bounds into the sorted rows."""
        a = self.a
        order = np.lexsort((a["start"], a["code"]))
        s = {k: v[order] for k, v in a.items()}
        flags = _segments(s["code"], s["start"], s["last"] + gap)
        b = np.flatnonzero(flags)
        bounds = np.append(b, len(order)).astype(np.int64)
        last = np.maximum.reduceat(s["last"], b) if b.size else s["last"]
        out: dict[str, np.ndarray] = {"code": s["code"][b], "start": s["start"][b], "last": last,
                                      "emitted": np.zeros(b.shape[0], np.bool_),
                                      "rows": _addat(s["rows"], b)}
        for k in a:
            col, _, lane = k.partition(":")
            if not lane:
                continue
            if lane in ("nn", "sum", "nf", "fin"):
                out[k] = _addat(s[k], b)
            elif lane in ("min", "max"):
                out[k] = _seg_pick(s[k], s[col + ":nn"], bounds, lane == "max")
            elif lane in ("ft", "lt"):
                v = col + (":fv" if lane == "ft" else ":lv")
                out[k], out[v] = _seg_tv(s[k], s[v], s[col + ":nn"], bounds, lane == "lt")
            elif lane == "mean":
                out[col + ":fin2"], out[k], out[col + ":m2"] = mom_merge_segments(
                    s[col + ":fin"], s[k], s[col + ":m2"], bounds)
        for k in [k for k in out if k.endswith(":fin2")]:
            del out[k]  # the moment kernel's count equals the added ``fin`` lane
        return _Sessions(out), order, bounds


def _addat(v: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Segment sums; inf + -inf is NaN there without a RuntimeWarning (the documented rule)."""
    if not b.size:
        return v[:0].copy()
    with np.errstate(invalid="ignore"):
        return np.add.reduceat(v, b)


def _column(batch: pa.RecordBatch, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, valid mask) of a numeric column; int64 or float64."""
    arr = batch.column(name)
    valid = (np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), bool)
             if arr.null_count else np.ones(len(arr), bool))
    dt = np.float64 if pa.types.is_floating(arr.type) else np.int64
    vals = np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False), dt) \
        if arr.null_count else np.asarray(arr.to_numpy(zero_copy_only=False), dt)
    return vals, valid


class SessionAggregate(Operator):
    """Event-time session windows per key (see the module docstring)."""

    def __init__(
        self,
        kind: Session,
        aggs: Agg | Sequence[Agg],
        *,
        by: str | Sequence[str] = (),
        late: LatePolicy | str | None = None,
        allowed_lateness: int | str = 0,
        name: str = "window",
        time: str | None = None,
        max_state_bytes: int | None = None,
        method: str = "auto",
        emit_wid: bool = False,
    ) -> None:
        super().__init__(name)
        if not isinstance(kind, Session):
            raise ConfigError(f"{name}: {kind!r} is not a Session window; use Session(gap)")
        if method not in ("auto", "session"):
            raise ConfigError(f"{name}: session windows have one method; drop method={method!r}")
        if emit_wid:
            raise ConfigError(f"{name}: session windows have no window ids; drop emit_wid")
        self.kind_config = kind
        self.aggs = as_aggs(aggs)
        for a in self.aggs:
            if a.holistic:
                raise ConfigError(f"{name}: aggregate {a.name} is not supported on session "
                                  f"windows; use one of {', '.join(SUPPORTED)}")
        self.by = [by] if isinstance(by, str) else list(by)
        self.late = None if late is None else LatePolicy.parse(late)
        self.lateness_config = allowed_lateness
        self.time_config = time
        self.max_state_bytes = max_state_bytes
        self.plan_info: dict[str, Any] = {"method": "session",
                                          "layout": "session arrays (a key's contiguous, by start)"}

    # ---- opening ---------------------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        from oop.window.keys import KeyEncoder

        info = inputs[0]
        cols = sorted({a.column for a in self.aggs if a.column})
        require_columns(info, [*self.by, *cols], self.name)
        attr = resolve_window_time(self.name, self.time_config, info)
        check_time_column(info.schema, attr, info.name)
        for c in cols:
            t = info.schema.field(c).type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)) or pa.types.is_uint64(t):
                raise ConfigError(f"{self.name}: column {c!r} has type {t}; session windows "
                                  "aggregate integer or floating columns (cast it first)")
        self.unit = info.unit(attr)
        self.kind = self.kind_config.resolve(self.unit)
        self.gap = self.kind.g
        self.rule = LateRule.resolve(self.name, self.late, self.lateness_config, self.unit)
        self.time, self.schema_in = attr, info.schema
        self.cols = cols
        self.col_float = {c: pa.types.is_floating(info.schema.field(c).type) for c in cols}
        self.lanes = {c: sorted({x for a in self.aggs if a.column == c for x in [_NEEDS[str(a.spec.value_op)]]})
                      for c in cols}
        self.enc = KeyEncoder(self.by)
        # per integer column with a sum lane: the largest |value| seen (bounds every sum)
        self.sum_max = {c: 0 for c in cols if not self.col_float[c] and "sum" in self.lanes[c]}
        #: column -> var/std shift: its first valid finite value, then fixed
        self.shift: dict[str, float | int | None] = {}
        self.state = self._empty()
        self.lwm = INT64_MIN
        self.out_punct: int | None = None
        self.budget = current_budget()
        self._keys_compact_at = KEYS_COMPACT_MIN
        tt = time_arrow_type(info.schema, attr)
        self.time_type = tt
        fields = [info.schema.field(c) for c in self.by]
        fields += [pa.field("window_start", tt), pa.field("window_end", tt)]
        fields += [pa.field(a.name, output_type(a, info.schema.field(a.column).type
                                                if a.column else None)) for a in self.aggs]
        fields += self.rule.output_fields(retractions=True)
        self.out_schema = pa.schema(fields)
        return StreamInfo(info.name, self.out_schema, {"window_end": self.unit}, "window_end")

    def _lane_names(self) -> dict[str, Any]:
        """Lane name -> dtype of the state arrays."""
        d: dict[str, Any] = {"code": np.int64, "start": np.int64, "last": np.int64,
                             "emitted": np.bool_, "rows": np.int64}
        for c in self.cols:
            vt = np.float64 if self.col_float[c] else np.int64
            d[c + ":nn"] = np.int64
            for lane in self.lanes[c]:
                if lane in ("sum", "min", "max"):
                    d[f"{c}:{lane}"] = vt
                elif lane in ("first", "last"):
                    p = lane[0]
                    d[f"{c}:{p}t"], d[f"{c}:{p}v"] = np.int64, vt
                else:  # moments of the finite values + count of NaN/inf
                    d[c + ":fin"], d[c + ":mean"] = np.int64, np.float64
                    d[c + ":m2"], d[c + ":nf"] = np.float64, np.int64
        return d

    def _empty(self) -> _Sessions:
        return _Sessions({k: np.zeros(0, dt) for k, dt in self._lane_names().items()})

    def _singletons(self, batch: pa.RecordBatch, codes: np.ndarray, times: np.ndarray) -> _Sessions:
        """One session per tuple (its lanes hold just that tuple)."""
        n = times.shape[0]
        a: dict[str, np.ndarray] = {"code": codes.astype(np.int64, copy=False), "start": times,
                                    "last": times, "emitted": np.zeros(n, np.bool_),
                                    "rows": np.ones(n, np.int64)}
        for c in self.cols:
            v, valid = _column(batch, c)
            a[c + ":nn"] = valid.astype(np.int64)
            for lane in self.lanes[c]:
                if lane == "sum":
                    a[c + ":sum"] = np.where(valid, v, 0).astype(v.dtype)
                    if c in self.sum_max:
                        self.sum_max[c] = max(self.sum_max[c], max_abs(a[c + ":sum"]))
                elif lane in ("min", "max"):
                    a[f"{c}:{lane}"] = v
                elif lane in ("first", "last"):
                    a[f"{c}:{lane[0]}t"], a[f"{c}:{lane[0]}v"] = times, v
                else:
                    fin = valid & np.isfinite(v) if v.dtype == np.float64 else valid
                    a[c + ":fin"] = fin.astype(np.int64)
                    if self.shift.get(c) is None:  # var/std: x - shift (oop.aggregates.moments)
                        self.shift[c] = pick_shift(ColumnValues(v, fin))
                    a[c + ":mean"] = np.where(fin, shift_values(v, self.shift[c]), 0.0)
                    a[c + ":m2"] = np.zeros(n, np.float64)
                    a[c + ":nf"] = (valid & ~fin).astype(np.int64)
        return _Sessions(a)

    # ---- batches ---------------------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.time, self.inputs[0].name)
        batch, times, _ = self.rule.split(self, batch, times, self.lwm, self.time)
        if batch.num_rows == 0:
            return []
        if int(times.max()) > INT64_MAX - self.gap:
            raise ValueRangeError(
                f"{self.name}: time {int(times.max())} plus the session gap {self.gap} is beyond "
                f"int64 max (window_end would wrap); such a time is usually a placeholder or in "
                "the wrong unit: filter or fix those rows")
        codes = self.enc.encode(batch)
        new = self._singletons(batch, codes, times)
        # only the sessions of the batch's keys take part: O(S) gather, no sort of the state
        hit = np.zeros(self.enc.n_codes, bool)
        hit[codes] = True
        mine = hit[self.state.a["code"]]
        if mine.all():
            part, rest = self.state, self._empty()
        else:
            part = self.state.take(np.flatnonzero(mine))
            rest = self.state.take(np.flatnonzero(~mine))
        both = _Sessions.concat([part, new])
        merged, order, bounds = both.merge(self.gap)
        self._guard(merged.nbytes() + rest.nbytes())
        out: list[Element] = []
        if self.rule.revises:
            out = self._revise(both, merged, order, bounds, len(part))
        self.state = _Sessions.concat([rest, merged]) if len(rest) else merged
        if self.enc.n_codes >= self._keys_compact_at:
            self._compact_keys()
        return out

    def _guard(self, nbytes: int) -> None:
        """Charge the state about to be held to the plan's budget (StateLimitError first)."""
        self.budget.grow(self, self.name, nbytes + self.enc.nbytes(),
                         f"{nbytes // max(1, self._row_bytes())} open sessions",
                         self.max_state_bytes)

    def _row_bytes(self) -> int:
        return sum(np.dtype(dt).itemsize for dt in self._lane_names().values())

    def _revise(self, both: _Sessions, merged: _Sessions, order: np.ndarray,
                bounds: np.ndarray, n_old: int) -> list[Element]:
        """late='update': retract the emitted sessions a batch changed, emit closed results."""
        emitted = both.a["emitted"][order]
        is_new = order >= n_old
        seg = np.repeat(np.arange(len(merged)), np.diff(bounds))
        touched = np.zeros(len(merged), bool)
        touched[seg[is_new]] = True
        had_emitted = np.zeros(len(merged), bool)
        had_emitted[seg[emitted]] = True
        retract_rows = order[emitted & touched[seg]]  # emitted sessions that changed
        out: list[Element] = []
        if retract_rows.size:
            out.append(self._build(both.take(np.sort(retract_rows)), True, True))
        closed = touched & (merged.a["last"] + self.gap <= self.lwm)
        if closed.any():
            out.append(self._build(merged.take(np.flatnonzero(closed)), True, False))
            merged.a["emitted"] |= closed
        keep = ~touched & had_emitted  # untouched emitted sessions stay emitted
        merged.a["emitted"] |= keep
        return out

    # ---- punctuation -----------------------------------------------------------------
    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        if not isinstance(p, Punctuation) or p.attr != self.time or p.value <= self.lwm:
            return []
        self.lwm = int(p.value)
        out = self._close(self.lwm)
        lo = self.rule.horizon(self.lwm)
        st = self.state
        if len(st):
            gone = st.a["last"] + self.gap <= lo
            if gone.any():
                self.state = st.take(np.flatnonzero(~gone))
        self.budget.report(self, self.state_size().bytes)
        e = lo + self.gap if lo <= INT64_MAX - self.gap else INT64_MAX
        if len(self.state):
            e = min(e, int((self.state.a["last"] + self.gap).min()))
        if self.out_punct is None or e > self.out_punct:
            self.out_punct = e
            out.append(Punctuation("window_end", e))
        return out

    def _close(self, bound: int) -> list[Element]:
        """Emit the sessions not yet emitted whose ``window_end <= bound``; without
        late='update' they are also purged here."""
        st = self.state
        if not len(st):
            return []
        due = (st.a["last"] + self.gap <= bound) & ~st.a["emitted"]
        if not due.any():
            return []
        idx = np.flatnonzero(due)
        c = st.a["code"][idx]
        if c.shape[0] > 1 and (c[1:] < c[:-1]).any():  # by key (a key's rows are by start)
            idx = idx[np.argsort(c, kind="stable")]
        batch = self._build(st.take(idx), False, False)
        if self.rule.revises:  # kept (marked emitted) until lwm - L passes their end
            st.a["emitted"] |= due
        else:
            self.state = st.take(np.flatnonzero(~due))
        return [batch]

    def flush(self) -> list[Element]:
        """End of stream: emit every session not yet emitted."""
        return self._close(INT64_MAX)

    # ---- emission --------------------------------------------------------------------
    def _build(self, s: _Sessions, revision: bool, retraction: bool) -> pa.RecordBatch:
        """Output rows of sessions ``s`` (sorted by code, start). O(rows), vectorized."""
        a = s.a
        arrays: list[pa.Array] = list(self.enc.keys(a["code"]))
        arrays += [as_time_array(a["start"], self.time_type), as_time_array(a["last"] + self.gap,
                                                                  self.time_type)]
        for g in self.aggs:
            arrays.append(self._finalize(g, a))
        arrays += self.rule.flag_columns(len(s), revision, retraction)
        return pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)

    def _finalize(self, g: Agg, a: dict[str, np.ndarray]) -> pa.Array:
        typ = self.out_schema.field(g.name).type
        sp = g.spec
        if sp.counts_rows:
            return pa.array(a["rows"], pa.int64())
        c = g.column
        nn = a[f"{c}:nn"]
        null = nn == 0
        op = sp.value_op
        if sp.from_sum and c in self.sum_max:  # int64 sums: exact or an error
            check_exact_sum(self.name, str(c), a["rows"], self.sum_max[c], typ)
        if sp.exact_sum:
            v: np.ndarray = a[f"{c}:sum"]
        elif op == "sum":  # mean
            with np.errstate(invalid="ignore", divide="ignore"):
                v = a[f"{c}:sum"] / np.maximum(nn, 1)
        elif op in ("min", "max"):
            v = a[f"{c}:{op}"]
        elif op in ("first", "last"):
            v = a[f"{c}:{op[0]}v"]
        else:  # var, std
            v = np.where(a[f"{c}:nf"] > 0, np.nan, variance(nn, a[f"{c}:m2"]))
            v = sp.from_variance(v)  # type: ignore[attr-defined]
            null = nn < 2
        return pa.array(v, mask=null if null.any() else None).cast(typ)

    # ---- keys ------------------------------------------------------------------------
    def _compact_keys(self) -> None:
        """Forget the keys no held session has (never-repeating keys: session ids)."""
        n = self.enc.n_codes
        if not self.by:
            self._keys_compact_at = 1 << 62
            return
        live = np.zeros(n, bool)
        live[self.state.a["code"]] = True
        keep = np.flatnonzero(live)
        if 2 * keep.shape[0] < n:
            remap = np.full(n, -1, np.int64)
            remap[keep] = np.arange(keep.shape[0])
            self.enc.compact(keep)
            self.state.a["code"] = remap[self.state.a["code"]]
            self.plan_info["key_compactions"] = self.plan_info.get("key_compactions", 0) + 1
        self._keys_compact_at = max(KEYS_COMPACT_MIN, 2 * keep.shape[0])

    # ---- state -----------------------------------------------------------------------
    def state_size(self) -> StateSize:
        return StateSize(len(self.state) + self.enc.n_codes,
                         self.state.nbytes() + self.enc.nbytes())

    def snapshot(self) -> SessionState:
        """The whole state, copied (:class:`~oop.window.state.SessionState`). O(state)."""
        return SessionState(
            base=super().snapshot(), lwm=self.lwm, out_punct=self.out_punct,
            enc=self.enc.snapshot(), sessions={k: v.copy() for k, v in self.state.a.items()},
            plan=dict(self.plan_info), keys_compact_at=self._keys_compact_at,
            sum_max=dict(self.sum_max), shift=dict(self.shift))

    def restore(self, state: SessionState) -> None:
        """Load a :meth:`snapshot` into this freshly opened operator. O(state)."""
        super().restore(state.base)
        self.lwm, self.out_punct = state.lwm, state.out_punct
        self.enc.restore(state.enc)
        self.state = _Sessions({k: np.array(v) for k, v in state.sessions.items()})
        self.plan_info = dict(state.plan)
        self._keys_compact_at = state.keys_compact_at
        self.sum_max = dict(state.sum_max)
        self.shift = dict(state.shift)

    def _check(self) -> None:
        """Invariants: a key's sessions are contiguous and sorted by start; they do not
        intersect; without late='update' every held session is open (``end > lwm``)."""
        a = self.state.a
        code, start, end = a["code"], a["start"], a["last"] + self.gap
        assert (start <= a["last"]).all()
        same = code[1:] == code[:-1]
        assert int((~same).sum()) + 1 == np.unique(code).shape[0] or not len(code), \
            "a key's sessions are not contiguous"
        assert (start[1:][same] >= end[:-1][same]).all(), "sessions of one key intersect"
        if not self.rule.revises and self.lwm > INT64_MIN:
            assert (end > self.lwm).all()
        self.enc._check()


# ---- references (tests) ----------------------------------------------------------------
class SessionReference:
    """The operator's semantics one tuple at a time: the slow, obviously correct reference.

    Per key a list of sessions ``[start, last, agg states, emitted]``; a tuple
    absorbs every session whose cover strictly intersects its own (repeated
    until none does), folding states with the aggregates' scalar ``merge``.
    Same late rule, emission, purge and (``update=True``) retraction rows as
    :class:`SessionAggregate`, one tuple at a time. Cost O(sessions) per tuple.
    """

    def __init__(self, gap: int, aggs: Sequence[Agg], by: Sequence[str] = (),
                 update: bool = False, allowed_lateness: int = 0) -> None:
        self.gap, self.aggs, self.by = int(gap), list(aggs), list(by)
        self.update, self.lateness = update, int(allowed_lateness)
        self.sessions: dict[tuple, list[list[Any]]] = {}
        self.lwm: int | None = None
        self.late = 0

    def _row(self, key: tuple, s: list[Any], revision: bool, retraction: bool) -> dict[str, Any]:
        r: dict[str, Any] = dict(zip(self.by, key))
        r.update(window_start=s[0], window_end=s[1] + self.gap)
        for a, x in zip(self.aggs, s[2]):
            v = a.finalize(x)
            r[a.name] = a.spec.to_output(v)
        if self.update:
            r.update(is_revision=revision, is_retraction=retraction)
        return r

    def on_tuple(self, row: dict[str, Any], t: int) -> list[dict[str, Any]]:
        """Fold one tuple; returns the rows it emits at once (late='update' only)."""
        if self.lwm is not None and t < self.lwm - (self.lateness if self.update else 0):
            self.late += 1
            return []
        key = tuple(row[c] for c in self.by)
        new = [t, t, [a.update(a.init(), row.get(a.column) if a.column else None, t)
                      for a in self.aggs], False]
        mine = self.sessions.setdefault(key, [])
        out = []
        merged = True
        while merged:
            merged = False
            for s in list(mine):
                if s[0] < new[1] + self.gap and new[0] < s[1] + self.gap:
                    mine.remove(s)
                    if s[3]:
                        out.append(self._row(key, s, True, True))
                    new = [min(s[0], new[0]), max(s[1], new[1]),
                           [a.merge(x, y) for a, x, y in zip(self.aggs, s[2], new[2])], False]
                    merged = True
        if self.update and self.lwm is not None and new[1] + self.gap <= self.lwm:
            out.append(self._row(key, new, True, False))
            new[3] = True
        mine.append(new)
        return out

    def on_punctuation(self, v: int) -> list[dict[str, Any]]:
        """Emit the sessions that end at or before ``v``; purge those beyond the lateness."""
        if self.lwm is not None and v <= self.lwm:
            return []
        self.lwm = v
        out = self._close(v)
        keep_after = v - (self.lateness if self.update else 0)
        for key, mine in self.sessions.items():
            mine[:] = [s for s in mine if s[1] + self.gap > keep_after]
        return out

    def _close(self, v: int) -> list[dict[str, Any]]:
        out = []
        for key, mine in self.sessions.items():
            for s in sorted(mine, key=lambda s: s[0]):
                if not s[3] and s[1] + self.gap <= v:
                    out.append(self._row(key, s, False, False))
                    s[3] = True
        return out

    def flush(self) -> list[dict[str, Any]]:
        return self._close(INT64_MAX)


def session_reference(items: Sequence[Any], gap: int, aggs: Sequence[Agg],
                      by: Sequence[str] = (), time: str = "ts", update: bool = False,
                      allowed_lateness: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Run :class:`SessionReference` over a feed of RecordBatches and Punctuations (on
    ``time``), row by row. Returns ``(every emitted row in order, late count)``."""
    ref = SessionReference(gap, aggs, by, update, allowed_lateness)
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Punctuation):
            if item.attr == time:
                out.extend(ref.on_punctuation(int(item.value)))
            continue
        for row in item.to_pylist():
            out.extend(ref.on_tuple(row, int(row[time])))
    return out + ref.flush(), ref.late


def session_oracle(table: pa.Table, gap: int, aggs: Agg | Sequence[Agg],
                   by: str | Sequence[str] = (), time: str = "ts") -> pa.Table:
    """Sessions computed from scratch over a whole table: per key, sort by time and split
    where two neighbours are ``>= gap`` apart; fold each run with the scalar aggregates.
    Rows sorted by (keys, window_start). O(rows log rows) Python -- for tests."""
    from oop.window.reference import _table, output_schema

    aggs = as_aggs(aggs)
    by = [by] if isinstance(by, str) else list(by)
    rows = table.to_pylist()
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in by), []).append(r)
    out: list[dict[str, Any]] = []
    for key in sorted(groups, key=lambda k: tuple((x is None, x) for x in k)):
        g = sorted(groups[key], key=lambda r: r[time])
        runs: list[list[dict[str, Any]]] = []
        for r in g:
            if runs and r[time] - runs[-1][-1][time] < gap:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            o: dict[str, Any] = dict(zip(by, key))
            o.update(window_start=run[0][time], window_end=run[-1][time] + gap)
            for a in aggs:
                st = a.init()
                for r in run:
                    st = a.update(st, r[a.column] if a.column else None, r[time])
                v = a.finalize(st)
                o[a.name] = a.spec.to_output(v)
            out.append(o)
    return _table(out, output_schema(table.schema, Session(gap), aggs, by, time))
