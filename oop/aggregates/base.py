"""The protocol every aggregate function implements (004 §6.2.2).

An :class:`AggregateFunction` is the one description of an aggregate *kind* (``sum``,
``max``, ``median``, ...). A concrete aggregate over a column is an
:class:`oop.window.aggregates.Agg`, which names its kind and carries its parameters
(``q`` of a quantile, ``k`` of heavy hitters, the functions of a UDAF); the scalar methods
below take that ``Agg`` as ``a`` for its parameters.

Properties:

* ``holistic`` -- no constant bound on a sub-aggregate's size (004 §6.2.2.1);
* ``differential`` -- ``"full"`` (constant-size add/subtract), ``"pseudo"`` (add/subtract,
  unbounded state) or None (004 §6.2.2.2);
* ``selective`` -- the result is one of the input values (min, max, first, last): any
  column type that can be ranked works, and Paned-WID combines panes by selection;
* ``needs_time`` -- the result depends on event times (first, last);
* ``counts_rows`` -- counts rows, not values (``count()``, which takes no column);
* ``counts_values`` -- the holistic state is a count per distinct value (distinct, heavy
  hitters: values are interned to codes), not a sorted multiset of numbers;
* ``arithmetic`` -- needs a numeric column (sum, mean, var, std, quantiles, UDAFs);
* ``from_sum`` -- the result is computed from the non-null count and the sum lane alone
  (sum, mean): over an integer column that sum must stay exact in int64;
* ``exact_sum`` -- the result *is* that sum (sum): integer columns keep their int64 sum and
  its bound is tracked to raise on overflow;
* ``lane_ops`` -- the accumulator lanes of a bounded aggregate (:class:`Lane` ops:
  ``rows``, ``nn``, ``sum``, ``sumsq``, ``min``, ``max``, ``first``, ``last``); the last
  one, :attr:`~AggregateFunction.value_op`, names the state layout the kernels dispatch on;
* ``combine_op`` -- the aggregate that merges this one's *results* over disjoint inputs
  (count and sum: ``sum``; min, max: themselves; None when results do not combine, as a
  mean's): local-then-global plans use it;
* ``store_op`` -- what a holistic aggregate computes from its multiset: ``quantile``,
  ``distinct``, ``top_k`` or ``udaf`` (None for bounded ones).

Operators dispatch on these properties and on lane / store ops -- never on the name.

The NaN / null rule, stated once (docs/semantics.md, "NaN, infinity and null"): value
aggregates skip null values (``count()`` counts rows); an aggregate over no non-null value
is null. NaN is a value: it propagates through sum / mean / var / std and sorts above every
number (+inf included) for min / max / median / quantiles and the first / last tie rule;
``+-inf`` are ordinary values. var / std are the sample variance / deviation (``n - 1``),
null below two values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from oop.errors import ConfigError

__all__ = ["AggregateFunction", "Lane", "LaneOp", "isnan", "order", "NAN"]

#: the lane operations the compiled kernels implement
LaneOp = Literal["rows", "nn", "sum", "sumsq", "min", "max", "first", "last"]

#: the one NaN counting states (distinct, heavy hitters, quantiles) key NaN values by
NAN = float("nan")


def isnan(x: Any) -> bool:
    """Whether ``x`` is a floating-point NaN."""
    return isinstance(x, float) and x != x


def order(x: Any) -> tuple:
    """Sort key of a value under the NaN rule: NaN above every number, +inf included."""
    return (True, 0.0) if isnan(x) else (False, x)


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
class AggregateFunction:
    """An aggregate kind: its properties, output type, scalar reference and Spark SQL form.

    Subclasses (one module per family) override the scalar methods; the compiled
    operators never call those -- they read ``lane_ops`` (bounded) or hold a multiset
    (holistic) -- but tests and :mod:`oop.window.reference` do.
    """

    name: str
    holistic: bool = False
    differential: str | None = None
    selective: bool = False
    needs_time: bool = False
    counts_rows: bool = False
    counts_values: bool = False
    arithmetic: bool = False
    from_sum: bool = False
    exact_sum: bool = False
    lane_ops: tuple[str, ...] = ()
    store_op: str | None = None
    combine_op: str | None = None
    #: the Spark SQL aggregate with ``{c}`` for the column (None: no Spark ground truth)
    spark: str | None = None

    @property
    def value_op(self) -> str | None:
        """The lane holding the result (``rows``, ``sum``, ``sumsq``, ``min``, ``max``,
        ``first``, ``last``): the layout of a bounded aggregate's state; None if holistic."""
        return self.lane_ops[-1] if self.lane_ops else None

    # ---- description -----------------------------------------------------------
    def column_name(self, a: Any) -> str:
        """The default output column name of aggregate ``a``: ``count``, ``sum_COL``, ..."""
        return f"{self.name}_{a.column}"

    def check(self, a: Any) -> None:
        """Raise :class:`ConfigError` if ``a``'s parameters are invalid for this kind."""
        if not self.counts_rows and not a.column:
            raise ConfigError(f"aggregate {self.name}() needs a column name, e.g. "
                              f"agg.{self.name}('v')")

    def differential_of(self, a: Any) -> str | None:
        """``differential`` of aggregate ``a`` (a UDAF's depends on its functions)."""
        return self.differential

    def quantile_of(self, a: Any) -> float | None:
        """The quantile ``a`` computes (median 0.5), None for other kinds."""
        return None

    def lanes(self, column: str | None) -> list[Lane]:
        """The accumulator lanes over ``column`` (empty for holistic kinds)."""
        return [Lane(op, None if op == "rows" else column) for op in self.lane_ops]

    def output_type(self, column_type: Any) -> Any:
        """The Arrow type of the output over a column of ``column_type`` -- the ONE rule."""
        import pyarrow as pa

        return pa.float64()

    def spark_sql(self, column: str | None, a: Any = None) -> str:
        """The Spark SQL aggregate expression over ``column`` (``a`` gives parameters)."""
        if self.spark is None:
            raise ConfigError(f"no Spark ground truth for aggregate {self.name!r}; use "
                              "count/sum/mean/min/max/var/std/median/quantile/distinct")
        return self.spark.format(c=f"`{column}`", q=None if a is None else a.q)

    # ---- scalar reference (tuple at a time; obviously correct, slow) ----------------
    def init(self, a: Any) -> Any:
        raise NotImplementedError

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        raise NotImplementedError

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        raise NotImplementedError

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        raise ConfigError(f"aggregate {a.name} is not differential: it cannot revert")

    def finalize(self, a: Any, state: Any) -> Any:
        raise NotImplementedError

    def to_output(self, value: Any) -> Any:
        """A finalized value as the operators emit it (mean: float even over decimals)."""
        return value

