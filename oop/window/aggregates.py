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

An :class:`Agg` is an aggregate *kind* of :mod:`oop.aggregates` (``Agg.spec``: its
properties, output type, scalar reference and Spark SQL form, described once there) plus
its column and parameters. Each declares

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

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from oop.aggregates import REGISTRY, AggregateFunction, Lane, get
from oop.errors import ConfigError

__all__ = ["Agg", "Lane", "UdafFns", "count", "sum", "mean", "min", "max", "var", "std",
           "first", "last", "median", "quantile", "distinct", "heavy_hitters", "udaf",
           "as_aggs", "output_type"]


@dataclass(frozen=True)
class UdafFns:
    """The four functions of a user-defined aggregate (see :func:`udaf`)."""

    init: Callable[[], Any]
    update: Callable[[Any, Any], Any]
    merge: Callable[[Any, Any], Any]
    finalize: Callable[[Any], Any]
    revert: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True)
class Agg:
    """An aggregate over one column (or rows, for ``count``). Build with the factory functions.

    ``fn`` names its kind in :mod:`oop.aggregates`; every property and the scalar reference
    come from there (``spec``).
    """

    fn: str
    column: str | None = None
    q: float | None = None
    k: int | None = None
    fns: UdafFns | None = field(default=None, compare=False)
    udaf_name: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        get(self.fn).check(self)

    @property
    def spec(self) -> AggregateFunction:
        """The aggregate kind (:class:`oop.aggregates.AggregateFunction`). ``fn`` was checked
        at construction: a plain dict read (emission asks several times per aggregate)."""
        return REGISTRY[self.fn]

    # ---- identity --------------------------------------------------------
    @property
    def name(self) -> str:
        """The output column name: ``count``, ``sum_COL``, ``q90_COL``, ..."""
        return self.alias or self.spec.column_name(self)

    def alias_as(self, name: str) -> "Agg":
        """The same aggregate with output column ``name``."""
        return replace(self, alias=name)

    @property
    def holistic(self) -> bool:
        return self.spec.holistic

    @property
    def differential(self) -> str | None:
        """``"full"``, ``"pseudo"`` or None (see the module docstring)."""
        return self.spec.differential_of(self)

    def lanes(self) -> list[Lane]:
        """The accumulator lanes of a bounded aggregate (empty for holistic ones)."""
        return self.spec.lanes(self.column)

    # ---- scalar algebra (the tuple-at-a-time reference) -----------------------
    def init(self) -> Any:
        return self.spec.init(self)

    def update(self, state: Any, value: Any, time: int = 0) -> Any:
        """Fold one tuple's value (at event ``time``) into ``state``."""
        return self.spec.update(self, state, value, time)

    def merge(self, a: Any, b: Any) -> Any:
        """The state of the union of two disjoint inputs."""
        return self.spec.merge(self, a, b)

    def revert(self, state: Any, value: Any, time: int = 0) -> Any:
        """Undo :meth:`update` of ``value`` (differential aggregates only)."""
        if self.differential is None:
            raise ConfigError(f"aggregate {self.name} is not differential: it cannot revert")
        return self.spec.revert(self, state, value, time)

    def finalize(self, state: Any) -> Any:
        """The output value of a window from its state (None = null)."""
        return self.spec.finalize(self, state)


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
    return a.spec.output_type(column_type)


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
