"""User-defined aggregates: four (or five) functions over a column's values as float64.

Treated as holistic (state per pane = the pane's values); pseudo-differential when a
``revert`` is given. Output float64. The compiled fold lives in :mod:`oop.window.udaf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oop.aggregates.base import AggregateFunction

__all__ = ["Udaf", "UDAF"]


@dataclass(frozen=True)
class Udaf(AggregateFunction):
    """Dispatches the scalar reference to the aggregate's own functions (``a.fns``)."""

    def column_name(self, a: Any) -> str:
        return f"{a.udaf_name}_{a.column}"

    def differential_of(self, a: Any) -> str | None:
        return "pseudo" if (a.fns and a.fns.revert) else None

    def init(self, a: Any) -> Any:
        return a.fns.init()

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        return state if value is None else a.fns.update(state, value)

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        return a.fns.merge(x, y)

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if a.fns.revert is None:
            return super().revert(a, state, value, time)
        return state if value is None else a.fns.revert(state, value)

    def finalize(self, a: Any, state: Any) -> Any:
        return a.fns.finalize(state)


UDAF = Udaf("udaf", holistic=True, arithmetic=True, store_op="udaf")
