"""``sum`` and ``mean``: state (non-null count, sum) -- bounded, full-differential.

sum: int64 over integers and booleans (a sum of booleans counts), float64 over floats,
``decimal(min(38, p + 10), s)`` over ``decimal(p, s)`` (Spark's rule; exact). mean: float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oop.aggregates.base import AggregateFunction

__all__ = ["Sum", "Mean", "SUM", "MEAN"]


@dataclass(frozen=True)
class Sum(AggregateFunction):
    """Sum of the non-null values."""

    def output_type(self, column_type: Any) -> Any:
        import pyarrow as pa

        t = column_type
        if pa.types.is_decimal256(t):
            return pa.decimal256(min(76, t.precision + 10), t.scale)
        if pa.types.is_decimal(t):
            return pa.decimal128(min(38, t.precision + 10), t.scale)
        return pa.float64() if pa.types.is_floating(t) else pa.int64()

    def init(self, a: Any) -> Any:
        return (0, None)

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        n, s = state
        value = int(value) if isinstance(value, bool) else value  # a sum of booleans counts
        return (n + 1, value if s is None else s + value)

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        if x[1] is None:
            return y
        if y[1] is None:
            return x
        return (x[0] + y[0], x[1] + y[1])

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        n, s = state
        return (n - 1, None if n == 1 else s - value)

    def finalize(self, a: Any, state: Any) -> Any:
        return state[1]


@dataclass(frozen=True)
class Mean(Sum):
    """Arithmetic mean of the non-null values (float64)."""

    def output_type(self, column_type: Any) -> Any:
        import pyarrow as pa

        return pa.float64()

    def finalize(self, a: Any, state: Any) -> Any:
        return None if state[0] == 0 else state[1] / state[0]

    def to_output(self, value: Any) -> Any:
        return None if value is None else float(value)


SUM = Sum("sum", differential="full", arithmetic=True, from_sum=True, exact_sum=True,
          lane_ops=("nn", "sum"), spark="sum({c})", combine_op="sum")
MEAN = Mean("mean", differential="full", arithmetic=True, from_sum=True,
            lane_ops=("nn", "sum"), spark="avg({c})")
