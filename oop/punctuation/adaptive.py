"""Adaptive bounded delay: estimate the delay bound from observed disorder (004 §8.1).

Like the heartbeat estimators cited in 004 §8.1 (Srivastava & Widom), the
generator does not need the delay bound up front: it measures the disorder of
the feed and picks the bound that makes a target fraction of tuples late.

The *delay* of a tuple is how far it arrives behind the largest time seen
before it: ``delay(t) = max(hwm_before(t) - t.time, 0)``. Late tuples (seen
through ``on_late``) are measured too, so the estimate learns from its own
misses. The bound is the ``(1 - target_late)`` quantile of the delays of the
last ``window`` tuples (``higher`` interpolation, never below ``min_delay``),
and after each batch the generator punctuates ``hwm - bound``.

Guarantee: none up front -- about ``target_late`` of the tuples are late when
the delay distribution is stationary (fewer when punctuation lags, since it
is emitted once per batch). The current estimate is exposed as
``delay_estimate`` (the logic's attribute and the source's
``metrics.gauges["delay_estimate"]``), in the time column's unit.

Cost per batch: O(batch) to measure delays (a running max), O(window) for the
quantile (``np.partition``); no per-tuple Python.

>>> import numpy as np
>>> g = Adaptive(0.0).build(TimeSpec("ts", "ms"))
>>> g.on_batch(None, np.array([10, 4, 12, 11]))   # delays 0, 6, 0, 1 -> bound 6
6
>>> g.delay_estimate
6
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["Adaptive", "AdaptiveLogic", "arrival_delays"]


def arrival_delays(times: np.ndarray, hwm: int) -> tuple[np.ndarray, int]:
    """Delay of each tuple behind the max seen before it; returns (delays, new hwm).

    Reference semantics: ``delay[i] = max(max(hwm, times[:i]) - times[i], 0)``,
    0 for the very first tuple of the stream. Vectorized with a running max.

    >>> arrival_delays(np.array([5, 3, 7, 1]), INT64_MIN)
    (array([0, 2, 0, 6]), 7)
    """
    times = np.asarray(times, dtype=np.int64)
    if not len(times):
        return np.zeros(0, dtype=np.int64), hwm
    cm = np.maximum.accumulate(times)
    before = np.empty_like(times)
    before[0] = hwm
    before[1:] = cm[:-1]
    if hwm != INT64_MIN:
        np.maximum(before, hwm, out=before)
    else:
        before[0] = times[0]
    delays = np.maximum(before - times, 0)
    return delays, max(hwm, int(cm[-1]))


class AdaptiveLogic(PunctuationGenerator):
    """Runtime of :class:`Adaptive`."""

    def __init__(self, target_late: float, window: int, min_delay: int) -> None:
        self.target_late = target_late
        self.window = window
        self.min_delay = min_delay
        self.hwm = INT64_MIN
        self.sample = np.zeros(window, dtype=np.int64)  # ring buffer of recent delays
        self.count = 0  # delays recorded (total)
        self.pos = 0  # next write position in the ring (the oldest delay held)
        self.delay_estimate = min_delay

    def _record(self, delays: np.ndarray) -> None:
        k = len(delays)
        self.count += k
        if k >= self.window:
            self.sample[:] = delays[k - self.window:]
            self.pos = 0
            return
        pos = self.pos
        first = min(k, self.window - pos)
        self.sample[pos:pos + first] = delays[:first]
        self.sample[: k - first] = delays[first:]
        self.pos = (pos + k) % self.window

    def _estimate(self) -> int:
        n = min(self.count, self.window)
        if n == 0:
            return self.min_delay
        s = self.sample[:n]
        rank = min(int(np.ceil((1.0 - self.target_late) * n)) - 1, n - 1)
        rank = max(rank, 0)
        q = int(np.partition(s, rank)[rank])
        return max(q, self.min_delay)

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        if not len(times):
            return None
        delays, self.hwm = arrival_delays(times, self.hwm)
        self._record(delays)
        self.delay_estimate = self._estimate()
        return self.hwm - self.delay_estimate

    def on_late(self, times: np.ndarray) -> None:
        if len(times) and self.hwm != INT64_MIN:
            self._record(np.maximum(self.hwm - np.asarray(times, dtype=np.int64), 0))

    def gauges(self) -> dict[str, float]:
        return {"delay_estimate": float(self.delay_estimate), "delay_samples": float(self.count)}

    def _check(self) -> None:
        assert self.delay_estimate >= self.min_delay


@dataclass(frozen=True)
class Adaptive(GeneratorConfig):
    """Estimate the delay bound as the ``1 - target_late`` quantile of observed delays.

    ``window``: how many recent delays the estimate uses; ``min_delay``: a
    floor for the bound (duration spec or int in the column's unit).
    """

    target_late: float = 0.01
    window: int = 100_000
    min_delay: str | int = 0

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.target_late) < 1.0):
            raise ConfigError(
                f"Adaptive: target_late is the fraction of tuples allowed to be late, in "
                f"[0, 1), got {self.target_late!r}"
            )
        if int(self.window) < 1:
            raise ConfigError(f"Adaptive: window must hold at least 1 delay, got {self.window!r}")

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        d = time.duration(self.min_delay)
        if d < 0:
            raise ConfigError(f"Adaptive: min_delay must be >= 0, got {self.min_delay!r}")
        return AdaptiveLogic(float(self.target_late), int(self.window), d)
