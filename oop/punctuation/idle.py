"""Idle/lull handling: a silent source advances on the data-time clock (004 §8.1).

Gigascope's rule (004 §8.1): during a lull the observed *data time* of a
silent input drifts away from the system time; when the gap exceeds a
threshold ``s`` the input is punctuated at ``(system time - s)``. In a replay
the "system time" is the engine's *data-time clock*: the largest event time
seen on any source (the executor passes it to ``on_idle(clock)`` for every
source that produced nothing in a round). So :class:`Idle` wraps another
generator and, while its source is silent, punctuates ``clock - slack``
whenever that is ahead of the source's own punctuation.

Guarantee (an assumption about the feed): a source that was quiet while the
other sources reached ``clock`` resumes with tuples no older than
``clock - slack``. Tuples that break it are late and follow the source's late
policy. With it, one quiet input of a Meld never stalls the union: the Meld's
output punctuation (the min over inputs) keeps advancing at most ``slack``
behind the busiest input.

Cost: O(1) per idle call; batches go to the wrapped generator unchanged.

>>> import numpy as np
>>> g = Idle(BoundedDelay(2), slack=5).build(TimeSpec("ts", "ms"))
>>> g.on_batch(None, np.array([10]))
8
>>> g.on_idle(12) is None        # 12 - 5 = 7 is behind the source's own 8
True
>>> g.on_idle(30)
25
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

__all__ = ["Idle", "IdleLogic"]


class IdleLogic(PunctuationGenerator):
    """Runtime of :class:`Idle`: delegate batches, advance on the clock when silent."""

    def __init__(self, inner: PunctuationGenerator, slack: int) -> None:
        self.inner = inner
        self.reads_rows = inner.reads_rows
        self.reads_times = inner.reads_times
        self.slack = slack
        self.last = INT64_MIN  # the largest bound this generator returned
        self.idle_advances = 0

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        v = self.inner.on_batch(batch, times)
        if v is not None and v > self.last:
            self.last = v
        return v

    def on_batch_stats(
        self, batch: pa.RecordBatch, times: np.ndarray, lo: int, hi: int
    ) -> int | None:
        v = self.inner.on_batch_stats(batch, times, lo, hi)
        if v is not None and v > self.last:
            self.last = v
        return v

    def on_late(self, times: np.ndarray) -> None:
        self.inner.on_late(times)

    def on_idle(self, clock: int) -> int | None:
        v = self.inner.on_idle(clock)
        if clock != INT64_MIN:
            drift = clock - self.slack
            if v is None or drift > v:
                v = drift
        if v is None or v <= self.last:
            return None
        self.last = v
        self.idle_advances += 1
        return v

    def late_bound(self) -> int | None:
        return self.inner.late_bound()

    def gauges(self) -> dict[str, float]:
        return {**self.inner.gauges(), "idle_advances": float(self.idle_advances)}


@dataclass(frozen=True)
class Idle(GeneratorConfig):
    """Wrap ``inner``; while the source is silent punctuate ``clock - slack`` (lull rule)."""

    inner: GeneratorConfig
    slack: str | int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.inner, GeneratorConfig):
            raise ConfigError(
                f"Idle: inner must be a punctuation generator config (e.g. oop.BoundedDelay('5s')),"
                f" got {self.inner!r}"
            )

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        s = time.duration(self.slack)
        if s < 0:
            raise ConfigError(
                f"Idle: slack must be >= 0 (how far a quiet source may lag the clock), "
                f"got {self.slack!r}"
            )
        return IdleLogic(self.inner.build(time), s)
