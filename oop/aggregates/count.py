"""``count()``: the number of rows (bounded, full-differential; int64)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oop.aggregates.base import AggregateFunction

__all__ = ["Count", "COUNT"]


@dataclass(frozen=True)
class Count(AggregateFunction):
    """Rows in the window, nulls included (the only aggregate without a column)."""

    def column_name(self, a: Any) -> str:
        return "count"

    def output_type(self, column_type: Any) -> Any:
        import pyarrow as pa

        return pa.int64()

    def spark_sql(self, column: str | None, a: Any = None) -> str:
        return "count(1)"

    def init(self, a: Any) -> Any:
        return 0

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        return state + 1

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        return x + y

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        return state - 1

    def finalize(self, a: Any, state: Any) -> Any:
        return state


COUNT = Count("count", differential="full", counts_rows=True, lane_ops=("rows",), spark="count(1)",
              combine_op="sum")
