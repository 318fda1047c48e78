"""Bounded delay in tuples (BSort-style slack, 004 §8.1).

Assumption: no tuple is delayed by more than ``n`` tuples, i.e. at most
``n`` tuples that arrive after a tuple ``t`` may precede it in event-time
order. Then every tuple that arrives later has ``time >=`` the largest time
among the arrived tuples *excluding the last n* -- the bound Aurora's BSort
relies on. After each batch the generator punctuates that maximum.

State: the times of the last ``n`` tuples (a numpy array) and the max of all
the tuples before them. Cost per batch: O(n + batch) vectorized (one concat,
one max); no per-tuple Python.

>>> import numpy as np
>>> g = BoundedTuples(2).build(TimeSpec("ts", "ms"))
>>> g.on_batch(None, np.array([5, 3, 9])) # excluding the last 2 tuples: max(5)
5
>>> g.on_batch(None, np.array([4, 12]))   # excluding [4, 12]: max(5, 3, 9)
9
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["BoundedTuples", "BoundedTuplesLogic"]


class BoundedTuplesLogic(PunctuationGenerator):
    """Runtime of :class:`BoundedTuples`."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tail = np.zeros(0, dtype=np.int64)  # times of the last <= n tuples
        self.prefix_max = INT64_MIN  # max time of every tuple before the tail

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        if not len(times):
            return None
        if self.n == 0:
            self.prefix_max = max(self.prefix_max, int(times.max()))
            return self.prefix_max
        if len(times) >= self.n:
            older = times[: len(times) - self.n]
            parts = [self.tail, older]
            self.tail = np.array(times[len(times) - self.n:], dtype=np.int64)
        else:
            joined = np.concatenate([self.tail, times.astype(np.int64, copy=False)])
            cut = max(len(joined) - self.n, 0)
            parts = [joined[:cut]]
            self.tail = joined[cut:].copy()
        for p in parts:
            if len(p):
                self.prefix_max = max(self.prefix_max, int(p.max()))
        return None if self.prefix_max == INT64_MIN else self.prefix_max

    def _check(self) -> None:
        assert len(self.tail) <= self.n


@dataclass(frozen=True)
class BoundedTuples(GeneratorConfig):
    """Punctuate the max time excluding the last ``n`` tuples (BSort slack ``n``)."""

    n: int

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 0:
            raise ConfigError(
                f"BoundedTuples: n must be a tuple count >= 0 (how many tuples a tuple may be "
                f"overtaken by), got {self.n!r}"
            )

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return BoundedTuplesLogic(int(self.n))
