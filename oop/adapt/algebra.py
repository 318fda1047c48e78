"""Block aggregates: the columnar update/merge/finalize algebra AdaptWID runs on (004 §6.2.2, §6.3).

AdaptWID keeps, per window id, a *block*: the partial aggregates of every
eager (or transitional) group that has tuples in that window, as columns
aligned with a sorted array of group ids. Lazy tuples are aggregated into
the same kind of block when their window closes and merged with the eager
block (004 Fig. 6-18). This module turns an aggregate *definition* of
:mod:`oop.window.agg` (an :class:`~oop.window.aggregates.Agg`: same names,
null rules, tie rules, quantile interpolation) into that columnar algebra:

* ``reduce(rows, starts) -> State`` -- rows sorted by segment (``starts`` =
  first row of each segment); one partial per segment. Vectorized
  (``ufunc.reduceat``, one ``lexsort`` for first/last).
* ``merge_at(a, idx, b)`` -- ``a[idx] (+)= b`` in place (``idx`` unique).
* ``finalize(a) -> pyarrow.Array`` -- the window result per partial.

``rows`` is a :class:`Rows`: the values of the aggregate's column with a
validity mask (nulls are ignored, as in :mod:`oop.window.agg`) and the
tuples' event times (for first/last).

Partials (:data:`State`) are lists of numpy arrays, all of one length.
Bounded aggregates have fixed-width columns (the lanes of
:meth:`Agg.lanes`: ``nn``, ``sum``, ``min``, ...), so the size of a partial
is the sum of its columns' item sizes -- what the cost model's ``aggr`` is
measured from. ``var``/``std`` keep ``(n, mean, M2)`` of the shifted values: the algebra of
:mod:`oop.aggregates.moments` (two-pass reduce, Chan et al.'s merge). Holistic aggregates (median, quantile,
distinct, heavy hitters, UDAFs) keep a *bag* per partial (an object column of
value arrays); their merge and finalize run per group in Python (holistic
aggregates are never AdaptWID's fast path: the cost model keeps their groups
lazy, where a bag costs nothing extra).

>>> from oop.window import aggregates as agg
>>> s = block_agg(agg.sum("len"))
>>> r = Rows(np.array([1, 2, 3, 4]), np.ones(4, bool), np.zeros(4, np.int64))
>>> a = s.reduce(r, np.array([0, 3]))
>>> s.merge_at(a, np.array([1]), s.reduce(Rows(np.array([10]), np.ones(1, bool), np.zeros(1, np.int64)), np.array([0])))
>>> s.finalize(a).to_pylist()
[6, 14]
>>> m = block_agg(agg.median("len"))
>>> m.finalize(m.reduce(Rows(np.array([1, 5, 2, 9]), np.ones(4, bool), np.zeros(4, np.int64)), np.array([0, 2]))).to_pylist()
[3.0, 5.5]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from oop.aggregates.moments import mom_merge_arrays, mom_reduce, variance
from oop.errors import ConfigError
from oop.window.aggregates import Agg
from oop.window.values import ColumnValues, pick_shift

__all__ = ["State", "Rows", "BlockAgg", "block_agg", "state_take", "state_nbytes",
           "state_interleave"]

State = list  # list[np.ndarray], all of one length


@dataclass
class Rows:
    """An aggregate's input rows: values (nulls filled), validity, event times."""

    values: np.ndarray
    valid: np.ndarray
    times: np.ndarray

    def __len__(self) -> int:
        return len(self.valid)

    def take(self, idx: np.ndarray) -> "Rows":
        return Rows(self.values[idx], self.valid[idx], self.times[idx])


def _lengths(starts: np.ndarray, n: int) -> np.ndarray:
    return np.diff(np.append(starts, n)).astype(np.int64)


def _sentinel(dtype: np.dtype, high: bool) -> Any:
    """The identity of min (``high``) / max: NaN for min over floats, since NaN is the greatest
    value (docs/semantics.md) and ``np.fmin`` skips it."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.max if high else info.min
    return np.nan if high else -np.inf


#: min / max under the NaN rule: min skips NaN unless every value is NaN, max propagates it
_MIN, _MAX = np.fmin, np.maximum


def _quantile(b: np.ndarray, q: float) -> float:
    """numpy's linear quantile of a sorted bag with NaN sorted last; an exact order statistic is
    returned as is (``median(1, 2, NaN)`` is 2, not NaN)."""
    pos = q * (len(b) - 1)
    lo = int(np.floor(pos))
    frac = pos - lo
    a = float(b[lo])
    if frac == 0:
        return a
    return a + (float(b[min(lo + 1, len(b) - 1)]) - a) * frac


def _lt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a < b with NaN above every number."""
    return (a < b) | ((b != b) & (a == a))


def _isnan(v: np.ndarray) -> np.ndarray:
    return np.isnan(v) if np.issubdtype(v.dtype, np.floating) else np.zeros(v.shape, bool)


class BlockAgg:
    """Columnar algebra of one :class:`~oop.window.aggregates.Agg` (see the module docstring)."""

    def __init__(self, agg: Agg) -> None:
        self.agg = agg
        self.name = agg.name
        self.column = agg.column
        self.fn = agg.fn  # the kind's name (diagnostics); behaviour comes from ``spec``
        self.spec = agg.spec
        #: the state layout: the aggregate's value lane op, or its multiset op if holistic
        self.op = self.spec.value_op or self.spec.store_op
        self.holistic = agg.holistic
        #: a sum lane that is float64 whatever the column (mean's)
        self.float_sum = not self.spec.exact_sum
        #: var/std: the column's shift (its first valid finite value, then fixed), see
        #: :mod:`oop.aggregates.moments`; part of the operator's snapshot
        self.shift: float | int | None = None

    def shift_for(self, values: np.ndarray, valid: np.ndarray) -> float | int:
        """var/std's shift, fixed at the first valid finite value seen (0 until there is one:
        nothing finite has been folded yet). O(len) until fixed, then O(1)."""
        if self.shift is None:
            self.shift = pick_shift(ColumnValues(values, valid))
        return 0 if self.shift is None else self.shift

    # ---- per kind ---------------------------------------------------------------
    def reduce(self, r: Rows, starts: np.ndarray) -> State:
        f, n = self.op, len(r)
        if f == "rows":
            return [_lengths(starts, n)]
        if len(starts) == 0:
            return self.empty(r.values.dtype)
        nn = np.add.reduceat(r.valid.astype(np.int64), starts)
        if f == "sum":
            dt = np.float64 if self.float_sum or np.issubdtype(r.values.dtype, np.floating) else np.int64
            x = np.where(r.valid, r.values, 0).astype(dt)
            return [nn, np.add.reduceat(x, starts)]
        if f in ("min", "max"):
            x = np.where(r.valid, r.values, _sentinel(r.values.dtype, f == "min"))
            red = _MIN if f == "min" else _MAX
            return [nn, red.reduceat(x, starts)]
        if f == "sumsq":
            return list(mom_reduce(r.values, r.valid, starts, self.shift_for(r.values, r.valid)))
        if f in ("first", "last"):
            seg = np.repeat(np.arange(len(starts)), _lengths(starts, n))
            if f == "first":  # ties by value, NaN the greatest (np.lexsort sorts it last)
                order = np.lexsort((r.values, r.times, ~r.valid, seg))
            else:
                order = np.lexsort((-r.values, ~_isnan(r.values), -r.times, ~r.valid, seg))
            pick = order[starts]
            return [nn, r.times[pick].astype(np.int64), r.values[pick]]
        # holistic: a bag of the valid values per partial (per group: holistic only)
        bags = np.empty(len(starts), dtype=object)
        for i, (v, ok) in enumerate(zip(np.split(r.values, starts[1:]), np.split(r.valid, starts[1:]))):
            bags[i] = self._norm(v[ok])
        return [bags]

    def _norm(self, v: np.ndarray) -> np.ndarray:
        return np.unique(v) if self.op == "distinct" else np.sort(v)

    def empty(self, dtype: np.dtype) -> State:
        """A state with no partials (for a column of ``dtype``)."""
        f = self.op
        z = np.zeros(0, np.int64)
        if f == "rows":
            return [z]
        if f == "sum":
            dt = np.float64 if self.float_sum or np.issubdtype(dtype, np.floating) else np.int64
            return [z, np.zeros(0, dt)]
        if f in ("min", "max"):
            return [z, np.zeros(0, dtype)]
        if f == "sumsq":
            return [z, np.zeros(0), np.zeros(0)]
        if f in ("first", "last"):
            return [z, z.copy(), np.zeros(0, dtype)]
        return [np.empty(0, object)]

    def merge_at(self, a: State, idx: np.ndarray, b: State) -> None:
        f = self.op
        if f == "rows":
            a[0][idx] += b[0]
            return
        if f == "sum":
            a[0][idx] += b[0]
            a[1][idx] += b[1]
            return
        if f in ("min", "max"):
            red = _MIN if f == "min" else _MAX
            a[1][idx] = np.where(a[0][idx] == 0, b[1], np.where(b[0] == 0, a[1][idx], red(a[1][idx], b[1])))
            a[0][idx] += b[0]
            return
        if f == "sumsq":
            a[0][idx], a[1][idx], a[2][idx] = mom_merge_arrays(a[0][idx], a[1][idx], a[2][idx], *b)
            return
        if f in ("first", "last"):
            ta, va, tb, vb = a[1][idx], a[2][idx], b[1], b[2]
            if f == "first":
                better = (tb < ta) | ((tb == ta) & _lt(vb, va))
            else:
                better = (tb > ta) | ((tb == ta) & _lt(va, vb))
            take_b = (b[0] > 0) & ((a[0][idx] == 0) | better)
            a[1][idx] = np.where(take_b, tb, ta)
            a[2][idx] = np.where(take_b, vb, va)
            a[0][idx] += b[0]
            return
        col = a[0]
        for j, i in enumerate(idx.tolist()):
            col[i] = self._norm(np.concatenate([col[i], b[0][j]]))

    def finalize(self, a: State) -> pa.Array:
        f = self.op
        if f == "rows":
            return pa.array(a[0], pa.int64())
        if f in ("min", "max", "first", "last") or (f == "sum" and not self.float_sum):
            return pa.array(a[-1], mask=a[0] == 0)
        if f == "sum":  # mean
            with np.errstate(invalid="ignore", divide="ignore"):
                return pa.array(a[1] / np.maximum(a[0], 1), mask=a[0] == 0)
        if f == "sumsq":
            v = variance(a[0], a[2])
            return pa.array(self.spec.from_variance(v), mask=a[0] < 2)  # type: ignore[attr-defined]
        bags = a[0]
        if f == "quantile":
            q = self.spec.quantile_of(self.agg)
            return pa.array([_quantile(b, q) if len(b) else None for b in bags], pa.float64())
        if f == "distinct":
            return pa.array([len(b) for b in bags], pa.int64())
        # heavy hitters, UDAFs: the aggregate's own scalar algebra over the bag
        out = []
        for b in bags:
            s = self.agg.init()
            for v in b.tolist():
                s = self.agg.update(s, v)
            out.append(self.agg.finalize(s))
        return pa.array(out)

    def fixed_bytes(self, value_itemsize: int) -> int:
        """Bytes of one partial by layout (a bag counts its pointer; its values come on top)."""
        return {"rows": 8, "sum": 16, "min": 8 + value_itemsize, "max": 8 + value_itemsize,
                "sumsq": 24, "first": 16 + value_itemsize,
                "last": 16 + value_itemsize}.get(self.op or "", 8)


def block_agg(agg: Agg) -> BlockAgg:
    """The columnar algebra of ``agg``; raises :class:`ConfigError` for unknown aggregates."""
    if not isinstance(agg, Agg):
        raise ConfigError(f"adaptive_window: {agg!r} is not an aggregate; build one with oop.window.agg.*")
    return BlockAgg(agg)


# ---- generic operations on states ------------------------------------------
def state_take(a: State, idx: np.ndarray) -> State:
    """Rows ``idx`` of a state (a copy)."""
    return [x[idx] for x in a]


def state_nbytes(a: State) -> int:
    """Bytes of a state as laid out: column buffers, plus the values of bag columns."""
    total = 0
    for x in a:
        total += x.nbytes
        if x.dtype == object:
            total += int(sum(b.nbytes for b in x))
    return total


def state_interleave(a: State, pos_a: np.ndarray, b: State, pos_b: np.ndarray, n: int) -> State:
    """A state of length ``n`` with ``a``'s rows at ``pos_a`` and ``b``'s at ``pos_b``. O(n)."""
    out: State = []
    for x, y in zip(a, b):
        dt = object if x.dtype == object else np.result_type(x.dtype, y.dtype)
        z = np.empty(n, dtype=dt)
        z[pos_a] = x
        z[pos_b] = y
        out.append(z)
    return out
