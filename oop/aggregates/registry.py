"""The registry: aggregate kind name -> :class:`~oop.aggregates.base.AggregateFunction`.

To add an aggregate: write its class in the family module that fits (or a new one), add its
instance here, give it lanes the kernels know (``lane_ops``) or make it holistic, and add its
factory to :mod:`oop.window.aggregates` (docs/architecture.md, "Aggregates").
"""

from __future__ import annotations

from oop.aggregates.base import AggregateFunction
from oop.aggregates.count import COUNT
from oop.aggregates.holistic import DISTINCT, HEAVY_HITTERS, MEDIAN, QUANTILE
from oop.aggregates.moments import STD, VAR
from oop.aggregates.select import FIRST, LAST, MAX, MIN
from oop.aggregates.sums import MEAN, SUM
from oop.aggregates.udaf import UDAF
from oop.errors import ConfigError

__all__ = ["REGISTRY", "get", "names"]

REGISTRY: dict[str, AggregateFunction] = {
    s.name: s for s in (COUNT, SUM, MEAN, MIN, MAX, VAR, STD, FIRST, LAST, MEDIAN, QUANTILE,
                        DISTINCT, HEAVY_HITTERS, UDAF)}


def get(name: str) -> AggregateFunction:
    """The aggregate kind ``name``; :class:`ConfigError` naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown aggregate {name!r}; use one of {names()}") from None


def names(*, where: str | None = None) -> list[str]:
    """Sorted names of the registered kinds (``where``: only those with that true property)."""
    return sorted(n for n, s in REGISTRY.items() if where is None or getattr(s, where))
