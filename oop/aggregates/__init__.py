"""Aggregate functions, described once: the properties, types and scalar reference of each.

Every operator that aggregates (the window operator under WID / Paned-WID, AdaptWID, the
in-order buffering baseline, the pair window of the join, Spark verification) asks this
package *what* an aggregate is -- :func:`get` returns its :class:`AggregateFunction` -- and
keeps only *how* it computes it (its numba kernels). See docs/architecture.md, "Aggregates".

>>> from oop.aggregates import get
>>> s = get("max")
>>> s.holistic, s.differential, s.selective, s.lane_ops
(False, None, True, ('nn', 'max'))
"""

from __future__ import annotations

from oop.aggregates.base import AggregateFunction, Lane
from oop.aggregates.registry import REGISTRY, get

__all__ = ["AggregateFunction", "Lane", "REGISTRY", "get"]
