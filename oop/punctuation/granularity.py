"""Granularity control: emit punctuation only at multiples of ``g`` (004 §8.1, Tucker's Describe).

OOP needs punctuation finer than the smallest window slide, but not finer:
a punctuation between slide boundaries completes no window and only costs
work downstream. :class:`Granular` wraps another generator and rounds each
bound *down* to the grid ``origin + k * every`` (rounding down keeps the
promise true: ``floor(v) <= v``), emitting it only when it moved to a new
grid point -- no duplicates.

Guarantee: the wrapped generator's, weakened to the grid. Cost: O(1) per
batch on top of the wrapped generator.

>>> import numpy as np
>>> g = Granular(BoundedDelay(0), every=5).build(TimeSpec("ts", "ms"))
>>> [g.on_batch(None, np.array([t])) for t in (3, 5, 7, 9, 12)]
[0, 5, None, None, 10]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.bounded_delay import BoundedDelay  # noqa: F401  (doctest)
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["Granular", "GranularLogic", "floor_to_grid"]


def floor_to_grid(v: int, every: int, origin: int = 0) -> int:
    """The largest ``origin + k * every`` that is ``<= v``.

    >>> floor_to_grid(7, 5), floor_to_grid(-1, 5), floor_to_grid(7, 5, origin=3)
    (5, -5, 3)
    """
    return origin + ((v - origin) // every) * every


class GranularLogic(PunctuationGenerator):
    """Runtime of :class:`Granular`."""

    def __init__(self, inner: PunctuationGenerator, every: int, origin: int) -> None:
        self.inner = inner
        self.reads_rows = inner.reads_rows
        self.reads_times = inner.reads_times
        self.every = every
        self.origin = origin
        self.last = INT64_MIN

    def _round(self, v: int | None) -> int | None:
        if v is None or v == INT64_MIN:
            return None
        r = floor_to_grid(int(v), self.every, self.origin)
        if r <= self.last:
            return None
        self.last = r
        return r

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        return self._round(self.inner.on_batch(batch, times))

    def on_batch_stats(
        self, batch: pa.RecordBatch, times: np.ndarray, lo: int, hi: int
    ) -> int | None:
        return self._round(self.inner.on_batch_stats(batch, times, lo, hi))

    def on_late(self, times: np.ndarray) -> None:
        self.inner.on_late(times)

    def on_idle(self, clock: int) -> int | None:
        return self._round(self.inner.on_idle(clock))

    def late_bound(self) -> int | None:
        return self.inner.late_bound()

    def gauges(self) -> dict[str, float]:
        return self.inner.gauges()


@dataclass(frozen=True)
class Granular(GeneratorConfig):
    """Wrap ``inner``; emit only bounds on the grid ``origin + k * every``, never twice."""

    inner: GeneratorConfig
    every: str | int
    origin: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.inner, GeneratorConfig):
            raise ConfigError(
                f"Granular: inner must be a punctuation generator config, got {self.inner!r}"
            )

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        g = time.duration(self.every)
        if g <= 0:
            raise ConfigError(
                f"Granular: every must be a positive duration (the smallest window slide), "
                f"got {self.every!r}"
            )
        return GranularLogic(self.inner.build(time), g, int(self.origin))
