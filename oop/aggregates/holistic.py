"""Holistic aggregates: ``median``, ``quantile``, ``distinct``, ``heavy_hitters``.

State: a count per value (NaN values all counted under one NaN). Quantiles are exact and
interpolate linearly between order statistics (numpy's default); a quantile at an exact order
statistic is that value (so ``median(1, 2, NaN)`` is 2); NaN sorts above every number.
distinct counts distinct non-null values (NaN = NaN, as Spark's count(DISTINCT)); heavy
hitters are the ``k`` most frequent values with their counts, ties by value (004 §6.2.4).
distinct and heavy hitters are pseudo-differential (counts per value add and subtract).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from oop.aggregates.base import NAN, AggregateFunction, isnan, order
from oop.errors import ConfigError

__all__ = ["Quantile", "Distinct", "HeavyHitters", "MEDIAN", "QUANTILE", "DISTINCT",
           "HEAVY_HITTERS"]


@dataclass(frozen=True)
class _Counts(AggregateFunction):
    def init(self, a: Any) -> Any:
        return Counter()

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        c = Counter(state)
        c[NAN if isnan(value) else value] += 1
        return c

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        return Counter(x) + Counter(y)

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if self.differential_of(a) is None:
            return super().revert(a, state, value, time)
        if value is None:
            return state
        c = Counter(state)
        value = NAN if isnan(value) else value
        c[value] -= 1
        if c[value] == 0:
            del c[value]
        return c

    @staticmethod
    def items(state: Any) -> list[tuple[Any, int]]:
        """(value, count) pairs with a positive count, values in NaN-rule order."""
        return sorted(((v, c) for v, c in Counter(state).items() if c > 0),
                      key=lambda vc: order(vc[0]))


@dataclass(frozen=True)
class Quantile(_Counts):
    """median (``q`` fixed at 0.5) or quantile(q); float64."""

    fixed_q: float | None = None

    def column_name(self, a: Any) -> str:
        if self.fixed_q is not None:
            return super().column_name(a)
        return f"q{float(a.q) * 100:g}_{a.column}"

    def check(self, a: Any) -> None:
        super().check(a)
        if self.fixed_q is None and (a.q is None or not (0.0 <= float(a.q) <= 1.0)):
            raise ConfigError(f"quantile q must be in [0, 1], got {a.q!r}")

    def quantile_of(self, a: Any) -> float | None:
        return self.fixed_q if self.fixed_q is not None else float(a.q)

    def finalize(self, a: Any, state: Any) -> Any:
        items = self.items(state)
        n = sum(c for _, c in items)
        if n == 0:
            return None
        pos = float(self.quantile_of(a)) * (n - 1)  # type: ignore[arg-type]
        lo_i, frac = int(math.floor(pos)), pos - math.floor(pos)
        vals = [v for v, c in items for _ in range(c)]
        lo = float(vals[lo_i])
        if frac == 0:  # an order statistic: no interpolation with its (maybe NaN) neighbour
            return lo
        hi = float(vals[min(lo_i + 1, n - 1)])
        return lo + (hi - lo) * frac


@dataclass(frozen=True)
class Distinct(_Counts):
    """Number of distinct non-null values (int64)."""

    def output_type(self, column_type: Any) -> Any:
        import pyarrow as pa

        return pa.int64()

    def finalize(self, a: Any, state: Any) -> Any:
        return len(self.items(state))


@dataclass(frozen=True)
class HeavyHitters(_Counts):
    """The ``k`` most frequent values: ``list<struct<value, count>>``."""

    def check(self, a: Any) -> None:
        super().check(a)
        if a.k is None or a.k <= 0:
            raise ConfigError(f"heavy_hitters needs k >= 1 (how many values to report), "
                              f"got {a.k!r}")

    def output_type(self, column_type: Any) -> Any:
        import pyarrow as pa

        return pa.list_(pa.struct([("value", column_type), ("count", pa.int64())]))

    def finalize(self, a: Any, state: Any) -> Any:
        top = sorted(self.items(state), key=lambda vc: (-vc[1], order(vc[0])))[: a.k]
        return [{"value": v, "count": c} for v, c in top]


MEDIAN = Quantile("median", holistic=True, arithmetic=True, spark="median({c})",
                  fixed_q=0.5, store_op="quantile")
QUANTILE = Quantile("quantile", holistic=True, arithmetic=True, spark="percentile({c}, {q})",
                    store_op="quantile")
DISTINCT = Distinct("distinct", holistic=True, differential="pseudo", counts_values=True,
                    spark="count(DISTINCT {c})", store_op="distinct")
HEAVY_HITTERS = HeavyHitters("heavy_hitters", holistic=True, differential="pseudo",
                             counts_values=True, store_op="top_k")
