"""``min``, ``max``, ``first``, ``last``: the result is one input value (bounded, selective).

Output type: the column's (numbers, decimals, strings, binary -- anything that ranks). min /
max order values with NaN above every number. first / last are by event time; ties between
equal times go to the smaller (first) / larger (last) value, so results never depend on
arrival order. Not differential: Paned-WID combines panes by selection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oop.aggregates.base import AggregateFunction, order

__all__ = ["Extreme", "ByTime", "MIN", "MAX", "FIRST", "LAST", "pick"]


def pick(fn: str, x: Any, y: Any) -> Any:
    """The min (``fn="min"``) or max of two values under the NaN rule."""
    if fn == "min":
        return x if order(x) <= order(y) else y
    return x if order(x) >= order(y) else y


@dataclass(frozen=True)
class _Select(AggregateFunction):
    def output_type(self, column_type: Any) -> Any:
        return column_type


@dataclass(frozen=True)
class Extreme(_Select):
    """min / max; state (non-null count, extreme)."""

    def pick(self, x: Any, y: Any) -> Any:
        """The one of two values this aggregate keeps."""
        return pick(self.name, x, y)

    def init(self, a: Any) -> Any:
        return (0, None)

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        n, m = state
        return (n + 1, value if m is None else self.pick(m, value))

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        if x[1] is None:
            return y
        if y[1] is None:
            return x
        return (x[0] + y[0], self.pick(x[1], y[1]))

    def finalize(self, a: Any, state: Any) -> Any:
        return state[1]


def _tv_order(p: tuple) -> tuple:
    return (p[0], order(p[1]))


@dataclass(frozen=True)
class ByTime(_Select):
    """first / last; state (time, value) or None."""

    def init(self, a: Any) -> Any:
        return None

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        return self.merge(a, state, (time, value))

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        if x is None:
            return y
        if y is None:
            return x
        if self.name == "first":
            return x if _tv_order(x) <= _tv_order(y) else y
        return x if _tv_order(x) >= _tv_order(y) else y

    def finalize(self, a: Any, state: Any) -> Any:
        return None if state is None else state[1]


MIN = Extreme("min", selective=True, lane_ops=("nn", "min"), spark="min({c})",
              combine_op="min")
MAX = Extreme("max", selective=True, lane_ops=("nn", "max"), spark="max({c})",
              combine_op="max")
FIRST = ByTime("first", selective=True, needs_time=True, lane_ops=("nn", "first"))
LAST = ByTime("last", selective=True, needs_time=True, lane_ops=("nn", "last"))
