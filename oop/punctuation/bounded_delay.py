"""Bounded delay in time: no tuple arrives more than ``delay`` behind the newest one.

Guarantee: with ``hwm`` the largest event time seen so far, every later tuple
has ``time >= hwm - delay`` (the heartbeat / Flink bounded-out-of-orderness
rule, 004 §8.1). After each batch the generator punctuates ``hwm - delay``
when it grew. Tuples delayed more than ``delay`` are late.

>>> g = BoundedDelay("5s").build(TimeSpec("ts", "ms"))
>>> import numpy as np
>>> g.on_batch(None, np.array([10_000, 7_000]))
5000
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["BoundedDelay", "BoundedDelayLogic"]


class BoundedDelayLogic(PunctuationGenerator):
    reads_times = False  # on_batch_stats reads the max only

    def __init__(self, delay: int) -> None:
        self.delay = delay
        self.hwm = INT64_MIN

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        if not len(times):
            return None
        self.hwm = max(self.hwm, int(times.max()))
        return self.hwm - self.delay

    def on_batch_stats(
        self, batch: pa.RecordBatch, times: np.ndarray, lo: int, hi: int
    ) -> int | None:
        if hi > self.hwm:
            self.hwm = hi
        return self.hwm - self.delay


@dataclass(frozen=True)
class BoundedDelay(GeneratorConfig):
    """Punctuate ``max seen - delay``; ``delay`` is a duration spec ("5s") or an int in the unit."""

    delay: str | int

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        d = time.duration(self.delay)
        if d < 0:
            raise ConfigError(f"BoundedDelay: delay must be >= 0, got {self.delay!r}")
        return BoundedDelayLogic(d)
