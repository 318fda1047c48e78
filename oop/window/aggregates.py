"""Aggregate functions as algebra: init / update / merge / (revert) / finalize (004 §6.2.2).

Use them through ``oop.window.agg``::

    >>> from oop.window import agg
    >>> [a.name for a in (agg.count(), agg.sum("v"), agg.quantile("v", 0.9))]
    ['count', 'sum_v', 'q90_v']
    >>> a = agg.mean("v")
    >>> s = a.update(a.update(a.init(), 2.0), 4.0)
    >>> a.finalize(s), a.finalize(a.revert(s, 4.0))
    (3.0, 2.0)
    >>> agg.median("v").holistic, agg.sum("v").differential
    (True, 'full')

Each :class:`Agg` declares

* ``holistic`` -- no constant bound on the size of a sub-aggregate (median,
  quantile, count-distinct, heavy hitters, Python UDAFs); otherwise
  *bounded* (004 §6.2.2.1);
* ``differential`` -- ``"full"`` when a window's sub-aggregate can be
  derived from the previous window's by adding and subtracting panes with
  constant-size state (count, sum, mean, var, std), ``"pseudo"`` when it can
  but the state is unbounded (count-distinct, heavy hitters: counts per
  value), ``None`` otherwise (min, max, first, last, median) -- 004 §6.2.2.2.

The scalar methods (``init``, ``update``, ``merge``, ``revert``,
``finalize``) are the *tuple-at-a-time reference*: obviously correct and
slow, used by tests and by :mod:`oop.window.reference`. The compiled
operators never call them; they use the columnar *lanes* described by
:meth:`Agg.lanes` (bounded aggregates) or the multiset store (holistic).

Decimals: the compiled operators hold decimal values unscaled in int64, so
sum/min/max/first/last are exact and the sum's type is
``decimal(min(38, p + 10), s)`` (see :func:`output_type`); values beyond
18 digits raise :class:`~oop.errors.ValueRangeError`. min/max/first/last
take strings and binary too: the lanes hold each value's rank in the sorted
distinct values (:class:`~oop.window.keys.ValueRanks`).

Nulls: value aggregates ignore null values (SQL semantics); ``count()``
counts rows. An aggregate over no non-null values is null. ``var``/``std``
are the sample variance / deviation (``n - 1``), null for fewer than two
values. ``first``/``last`` are by event time; ties between equal times are
broken by the smaller (first) / larger (last) value, so results do not
depend on arrival order. Quantiles interpolate linearly between order
statistics (numpy's default). Floating-point NaN is treated as a value, not
as null (docs/semantics.md, "NaN, infinity and null"): it propagates through
sum/mean/var/std and sorts above every number (+inf included) for
min/max/median/quantiles and the first/last tie rule; ``+-inf`` are ordinary
values. A quantile at an exact order statistic is that value (no
interpolation with its neighbour, so ``median(1, 2, NaN)`` is 2).
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from oop.errors import ConfigError

__all__ = ["Agg", "Lane", "UdafFns", "count", "sum", "mean", "min", "max", "var", "std",
           "first", "last", "median", "quantile", "distinct", "heavy_hitters", "udaf",
           "as_aggs", "output_type"]

_builtin_sum, _builtin_min, _builtin_max = sum, min, max


def _isnan(x: Any) -> bool:
    return isinstance(x, float) and x != x


#: the one NaN the counting states (distinct, heavy hitters, quantiles) key NaN values by:
#: every NaN is the same value there (Spark's count(DISTINCT): NaN = NaN)
_NAN = float("nan")


def _order(x: Any) -> tuple:
    """Sort key of a value under the NaN rule: NaN above every number, +inf included."""
    return (True, 0.0) if _isnan(x) else (False, x)


def _pick(fn: str, a: Any, b: Any) -> Any:
    """min / max of two values under the NaN rule (NaN is the greatest value)."""
    if fn == "min":
        return a if _order(a) <= _order(b) else b
    return a if _order(a) >= _order(b) else b


def _tv_order(p: tuple) -> tuple:
    return (p[0], _order(p[1]))


def _exact(value: Any) -> int | Fraction:
    """A value as an exact number for the reference's variance (ints stay ints, floats become
    the Fraction they are exactly), so that the reference is exact and the kernels are the ones
    measured against it."""
    return int(value) if isinstance(value, (bool, int)) else Fraction(value)

#: the lane operations the compiled kernels implement
LaneOp = Literal["rows", "nn", "sum", "sumsq", "min", "max", "first", "last"]


@dataclass(frozen=True)
class Lane:
    """One accumulator column of a bounded aggregate: an op over one input column.

    ``rows`` counts rows; ``nn`` counts non-null values; ``sum``/``min``/
    ``max`` reduce the values; ``sumsq`` sums squares of ``value - shift``
    (a per-column constant that keeps the variance numerically stable);
    ``first``/``last`` keep (time, value) of the smallest/largest time.
    Lanes are shared between aggregates (``mean`` and ``sum`` share ``sum``).
    """

    op: str
    column: str | None = None


@dataclass(frozen=True)
class UdafFns:
    """The four functions of a user-defined aggregate (see :func:`udaf`)."""

    init: Callable[[], Any]
    update: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]
    finalize: Callable[[Any], Any]
    revert: Callable[[Any, Any], Any] | None = None


_NAMES = {
    "count": "count", "sum": "sum_{c}", "mean": "mean_{c}", "min": "min_{c}", "max": "max_{c}",
    "var": "var_{c}", "std": "std_{c}", "first": "first_{c}", "last": "last_{c}",
    "median": "median_{c}", "distinct": "distinct_{c}", "heavy_hitters": "heavy_hitters_{c}",
}
_HOLISTIC = {"median", "quantile", "distinct", "heavy_hitters", "udaf"}
_DIFF: dict[str, str | None] = {
    "count": "full", "sum": "full", "mean": "full", "var": "full", "std": "full",
    "min": None, "max": None, "first": None, "last": None, "median": None, "quantile": None,
    "distinct": "pseudo", "heavy_hitters": "pseudo",
}


@dataclass(frozen=True)
class Agg:
    """An aggregate over one column (or rows, for ``count``). Build with the factory functions."""

    fn: str
    column: str | None = None
    q: float | None = None
    k: int | None = None
    fns: UdafFns | None = field(default=None, compare=False)
    udaf_name: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        if self.fn not in _NAMES and self.fn not in ("quantile", "udaf"):
            raise ConfigError(f"unknown aggregate {self.fn!r}; use one of {sorted(_NAMES)}")
        if self.fn != "count" and not self.column:
            raise ConfigError(f"aggregate {self.fn}() needs a column name, e.g. agg.{self.fn}('v')")
        if self.fn == "quantile":
            if self.q is None or not (0.0 <= float(self.q) <= 1.0):
                raise ConfigError(f"quantile q must be in [0, 1], got {self.q!r}")
        if self.fn == "heavy_hitters" and (self.k is None or self.k <= 0):
            raise ConfigError(f"heavy_hitters needs k >= 1 (how many values to report), got {self.k!r}")

    # ---- identity --------------------------------------------------------
    @property
    def name(self) -> str:
        """The output column name: ``count``, ``sum_COL``, ``q90_COL``, ..."""
        if self.alias:
            return self.alias
        if self.fn == "quantile":
            assert self.q is not None
            return f"q{float(self.q) * 100:g}_{self.column}"
        if self.fn == "udaf":
            return f"{self.udaf_name}_{self.column}"
        return _NAMES[self.fn].format(c=self.column)

    def alias_as(self, name: str) -> "Agg":
        """The same aggregate with output column ``name``."""
        from dataclasses import replace

        return replace(self, alias=name)

    @property
    def holistic(self) -> bool:
        return self.fn in _HOLISTIC

    @property
    def differential(self) -> str | None:
        """``"full"``, ``"pseudo"`` or None (see the module docstring)."""
        if self.fn == "udaf":
            return "pseudo" if (self.fns and self.fns.revert) else None
        return _DIFF[self.fn]

    def lanes(self) -> list[Lane]:
        """The accumulator lanes of a bounded aggregate (empty for holistic ones)."""
        c = self.column
        return {
            "count": [Lane("rows")],
            "sum": [Lane("nn", c), Lane("sum", c)],
            "mean": [Lane("nn", c), Lane("sum", c)],
            "var": [Lane("nn", c), Lane("sum", c), Lane("sumsq", c)],
            "std": [Lane("nn", c), Lane("sum", c), Lane("sumsq", c)],
            "min": [Lane("nn", c), Lane("min", c)],
            "max": [Lane("nn", c), Lane("max", c)],
            "first": [Lane("nn", c), Lane("first", c)],
            "last": [Lane("nn", c), Lane("last", c)],
        }.get(self.fn, [])

    # ---- scalar algebra (the tuple-at-a-time reference) -----------------------
    def init(self) -> Any:
        f = self.fn
        if f == "count":
            return 0
        if f in ("sum", "mean", "min", "max"):
            return (0, None)
        if f in ("var", "std"):
            return (0, 0, 0)  # n, sum, sum of squares: exact (ints, Fractions of floats)
        if f in ("first", "last"):
            return None
        if f == "udaf":
            assert self.fns is not None
            return self.fns.init()
        return Counter()

    def update(self, state: Any, value: Any, time: int = 0) -> Any:
        """Fold one tuple's value (at event ``time``) into ``state``."""
        f = self.fn
        if f == "count":
            return state + 1
        if value is None:
            return state
        if f in ("sum", "mean"):
            n, s = state
            value = int(value) if isinstance(value, bool) else value  # a sum of booleans counts
            return (n + 1, value if s is None else s + value)
        if f in ("min", "max"):
            n, m = state
            return (n + 1, value if m is None else _pick(f, m, value))
        if f in ("var", "std"):
            n, s, ss = state
            if isinstance(value, float) and not math.isfinite(value):
                return (n + 1, math.nan, math.nan)  # NaN / inf: the variance is NaN
            x = _exact(value)
            return (n + 1, s + x, ss + x * x)
        if f in ("first", "last"):
            return self.merge(state, (time, value))
        if f == "udaf":
            assert self.fns is not None
            return self.fns.update(state, value)
        c = Counter(state)
        c[_NAN if _isnan(value) else value] += 1
        return c

    def merge(self, a: Any, b: Any) -> Any:
        """The state of the union of two disjoint inputs."""
        f = self.fn
        if f == "count":
            return a + b
        if f in ("sum", "mean"):
            if a[1] is None:
                return b
            if b[1] is None:
                return a
            return (a[0] + b[0], a[1] + b[1])
        if f in ("min", "max"):
            if a[1] is None:
                return b
            if b[1] is None:
                return a
            return (a[0] + b[0], _pick(f, a[1], b[1]))
        if f in ("var", "std"):
            return (a[0] + b[0], a[1] + b[1], a[2] + b[2])
        if f in ("first", "last"):
            if a is None:
                return b
            if b is None:
                return a
            if f == "first":
                return a if _tv_order(a) <= _tv_order(b) else b
            return a if _tv_order(a) >= _tv_order(b) else b
        if f == "udaf":
            assert self.fns is not None
            return self.fns.merge(a, b)
        return Counter(a) + Counter(b)

    def revert(self, state: Any, value: Any, time: int = 0) -> Any:
        """Undo :meth:`update` of ``value`` (differential aggregates only)."""
        f = self.fn
        if self.differential is None:
            raise ConfigError(f"aggregate {self.name} is not differential: it cannot revert")
        if f == "count":
            return state - 1
        if value is None:
            return state
        if f in ("sum", "mean"):
            n, s = state
            return (n - 1, None if n == 1 else s - value)
        if f in ("var", "std"):
            n, s, ss = state
            if isinstance(value, float) and not math.isfinite(value):
                return (n - 1, s, ss)  # cannot undo a NaN: the state stays NaN
            x = _exact(value)
            return (n - 1, s - x, ss - x * x)
        if f == "udaf":
            assert self.fns is not None and self.fns.revert is not None
            return self.fns.revert(state, value)
        c = Counter(state)
        value = _NAN if _isnan(value) else value
        c[value] -= 1
        if c[value] == 0:
            del c[value]
        return c

    def finalize(self, state: Any) -> Any:
        """The output value of a window from its state (None = null)."""
        f = self.fn
        if f == "count":
            return state
        if f == "sum":
            return state[1]
        if f == "mean":
            return None if state[0] == 0 else state[1] / state[0]
        if f in ("min", "max"):
            return state[1]
        if f in ("var", "std"):
            n, s, ss = state
            if n < 2:
                return None
            if _isnan(s):
                return math.nan
            v = _builtin_max(float((ss - Fraction(s) * s / n) / (n - 1)), 0.0)  # rounded once
            return v if f == "var" else math.sqrt(v)
        if f in ("first", "last"):
            return None if state is None else state[1]
        if f == "udaf":
            assert self.fns is not None
            return self.fns.finalize(state)
        items = sorted(((v, c) for v, c in Counter(state).items() if c > 0),
                       key=lambda vc: _order(vc[0]))
        if f in ("median", "quantile"):
            n = _builtin_sum(c for _, c in items)
            if n == 0:
                return None
            q = 0.5 if f == "median" else float(self.q)  # type: ignore[arg-type]
            pos = q * (n - 1)
            lo_i, frac = int(math.floor(pos)), pos - math.floor(pos)
            vals = [v for v, c in items for _ in range(c)]
            lo = float(vals[lo_i])
            if frac == 0:  # an order statistic: no interpolation with its (maybe NaN) neighbour
                return lo
            hi = float(vals[_builtin_min(lo_i + 1, n - 1)])
            return lo + (hi - lo) * frac
        if f == "distinct":
            return len(items)
        # heavy hitters: the k most frequent values, ties by value
        top = sorted(items, key=lambda vc: (-vc[1], _order(vc[0])))[: self.k]
        return [{"value": v, "count": c} for v, c in top]


# ---- factories ---------------------------------------------------------------
def count() -> Agg:
    """Number of rows in the window (``count``). Bounded, full-differential."""
    return Agg("count")


def sum(col: str) -> Agg:  # noqa: A001 - the natural name
    """Sum of non-null ``col`` values (``sum_COL``; int64 for integer columns)."""
    return Agg("sum", col)


def mean(col: str) -> Agg:
    """Arithmetic mean (``mean_COL``, float64)."""
    return Agg("mean", col)


def min(col: str) -> Agg:  # noqa: A001
    """Minimum (``min_COL``). Bounded, not differential (Paned-WID combines panes)."""
    return Agg("min", col)


def max(col: str) -> Agg:  # noqa: A001
    """Maximum (``max_COL``). Bounded, not differential."""
    return Agg("max", col)


def var(col: str) -> Agg:
    """Sample variance (``var_COL``, n-1 denominator)."""
    return Agg("var", col)


def std(col: str) -> Agg:
    """Sample standard deviation (``std_COL``)."""
    return Agg("std", col)


def first(col: str) -> Agg:
    """Value at the smallest event time (``first_COL``); ties: smallest value."""
    return Agg("first", col)


def last(col: str) -> Agg:
    """Value at the largest event time (``last_COL``); ties: largest value."""
    return Agg("last", col)


def median(col: str) -> Agg:
    """Exact median (``median_COL``, float64). Holistic."""
    return Agg("median", col)


def quantile(col: str, q: float) -> Agg:
    """Exact ``q``-quantile with linear interpolation (``q90_COL`` for q=0.9). Holistic."""
    return Agg("quantile", col, q=float(q))


def distinct(col: str) -> Agg:
    """Exact number of distinct non-null values (``distinct_COL``). Holistic, pseudo-differential."""
    return Agg("distinct", col)


def heavy_hitters(col: str, k: int) -> Agg:
    """The ``k`` most frequent values with their counts (004 §6.2.4; ``heavy_hitters_COL``).

    Exact: sub-aggregates are (value, count) tables per pane, combined per
    window (pseudo-differential). Output: ``list<struct<value, count>>``,
    most frequent first, ties by value.
    """
    return Agg("heavy_hitters", col, k=int(k))


def udaf(
    name: str,
    init: Callable[[], Any],
    update: Callable[[Any, Any], Any],
    merge: Callable[[Any, Any], Any],
    finalize: Callable[[Any], Any],
    *,
    column: str,
    revert: Callable[[Any, Any], Any] | None = None,
) -> Agg:
    """A user-defined aggregate over ``column`` (output ``NAME_COL``).

    ``init() -> state``, ``update(state, value) -> state``,
    ``merge(a, b) -> state``, ``finalize(state) -> value``; ``revert`` is
    optional. When ``init``, ``update`` and ``finalize`` are numba ``@njit``
    functions the whole fold runs compiled (see :mod:`oop.window.udaf`);
    plain Python functions run per value (one Python call per value per pane). Values are the
    column's non-null values as float64. UDAFs are treated as holistic
    (state per pane = the pane's values).

    >>> a = udaf("sumsq", lambda: 0.0, lambda s, v: s + v * v, lambda a, b: a + b,
    ...          lambda s: s, column="v")
    >>> a.name, a.finalize(a.merge(a.update(a.init(), 1.0), a.update(a.init(), 2.0)))
    ('sumsq_v', 5.0)
    """
    if not name or not name.isidentifier():
        raise ConfigError(f"udaf name {name!r} must be an identifier (it names the output column)")
    return Agg("udaf", column, fns=UdafFns(init, update, merge, finalize, revert), udaf_name=name)


def output_type(a: Agg, column_type: Any) -> Any:
    """The Arrow type of ``a``'s output column over a column of ``column_type`` (None for count).

    count/distinct: int64; sum: int64 over integers, float64 over floats,
    ``decimal(min(38, p + 10), s)`` over ``decimal(p, s)`` (Spark's rule; exact);
    min/max/first/last: the column's type; heavy hitters: list of
    ``{value, count}``; the rest (mean, var, std, quantiles, UDAFs): float64.
    """
    import pyarrow as pa

    f, t = a.fn, column_type
    if f in ("count", "distinct"):
        return pa.int64()
    if f == "sum":
        if pa.types.is_decimal256(t):
            return pa.decimal256(_builtin_min(76, t.precision + 10), t.scale)
        if pa.types.is_decimal(t):
            return pa.decimal128(_builtin_min(38, t.precision + 10), t.scale)
        return pa.float64() if pa.types.is_floating(t) else pa.int64()
    if f in ("min", "max", "first", "last"):
        return t
    if f == "heavy_hitters":
        return pa.list_(pa.struct([("value", t), ("count", pa.int64())]))
    return pa.float64()


def as_aggs(aggs: "Agg | Sequence[Agg]") -> tuple[Agg, ...]:
    """Normalize one aggregate or a sequence to a tuple; reject duplicates output names."""
    if isinstance(aggs, Agg):
        aggs = (aggs,)
    out = tuple(aggs)
    if not out:
        raise ConfigError("window: give at least one aggregate, e.g. agg.count()")
    for a in out:
        if not isinstance(a, Agg):
            raise ConfigError(f"window: {a!r} is not an aggregate; build one with oop.window.agg.*")
    names = [a.name for a in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"window: duplicate output column(s) {sorted(dup)}; use .alias_as(name)")
    return out
