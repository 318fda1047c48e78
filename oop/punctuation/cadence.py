"""Cadence: *when* a source punctuates, as a function of the rows it has read.

Without a cadence a source asks its generator for a bound after every
physical batch, so the same feed chunked differently (another
``--batch-size``, a CSV reader's own blocks, a Spark partition) gives another
punctuation sequence and another late set. :class:`Cadence` fixes the
question to the data: the source asks after every ``rows`` input rows
(counting late and null-time rows), exactly at rows ``rows, 2*rows, ...`` of
the arrival order, whatever the chunking. Between two cadence points the
source's bound does not change, so whether a row is late is a function of the
rows before it and the spec only. At the end of a finite feed the partial
last segment is given to the generator as well. A live feed that pauses
(its connector has nothing to deliver) also closes the segment it holds,
so its windows close without waiting for rows that have not arrived: on a
live feed, punctuation depends on the pauses too -- the price of latency.

The generator sees each segment as one batch (late rows first through
``on_late``, then the on-time rows through ``on_batch``), so any generator
gets the same calls for any chunking.

Cost: zero-copy slices at cadence points; when a segment arrives in several
batches, one concatenation of its on-time rows for the generator.

>>> Cadence(BoundedDelay("5s"), 10_000)
Cadence(inner=BoundedDelay(delay='5s'), rows=10000)
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.bounded_delay import BoundedDelay  # noqa: F401  (doctest)
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["Cadence", "IdleWall", "IdleWallLogic", "DEFAULT_CADENCE_ROWS", "cadence_of",
           "with_cadence", "with_cadence_spec"]

DEFAULT_CADENCE_ROWS = 65_536  # the CLI's cadence when the spec names none


@dataclass(frozen=True)
class Cadence(GeneratorConfig):
    """Punctuate after every ``rows`` input rows (read by :class:`~oop.plan.source.Source`)."""

    inner: GeneratorConfig
    rows: int

    def __post_init__(self) -> None:
        if isinstance(self.rows, bool) or not isinstance(self.rows, (int, np.integer)) \
                or self.rows < 1:
            raise ConfigError(f"Cadence: rows must be a row count >= 1 (punctuate after every "
                              f"that many input rows), got {self.rows!r}")
        if isinstance(self.inner, Cadence):
            raise ConfigError("Cadence: give one cadence per punctuation spec")

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return self.inner.build(time)


def cadence_of(config: GeneratorConfig) -> tuple[GeneratorConfig, int | None]:
    """``(generator config, cadence rows or None)`` for a possibly cadence-wrapped config."""
    if isinstance(config, Cadence):
        return config.inner, int(config.rows)
    return config, None


def with_cadence(config: GeneratorConfig) -> GeneratorConfig:
    """``config`` with the default cadence (:data:`DEFAULT_CADENCE_ROWS`) unless it names one.

    What ``oop replay``'s ``--punctuation`` and an ``oop sql`` table's ``WATERMARK`` /
    ``'punctuation'`` option punctuate on, so neither depends on ``--batch-size``.

    >>> with_cadence(BoundedDelay("5s"))
    Cadence(inner=BoundedDelay(delay='5s'), rows=65536)
    """
    return config if isinstance(config, Cadence) else Cadence(config, DEFAULT_CADENCE_ROWS)


def with_cadence_spec(spec: str) -> str:
    """The spec text of :func:`with_cadence` (for consumers of spec strings, e.g. Spark).

    >>> with_cadence_spec("bounded:5s")
    'bounded:5s+cadence:65536rows'
    """
    return spec if "cadence:" in spec.lower() else f"{spec}+cadence:{DEFAULT_CADENCE_ROWS}rows"


class IdleWallLogic(PunctuationGenerator):
    """Runtime of :class:`IdleWall`: delegate; after ``seconds`` of silence follow the clock."""

    def __init__(self, inner: PunctuationGenerator, seconds: float) -> None:
        self.inner = inner
        self.reads_rows = inner.reads_rows
        self.reads_times = inner.reads_times
        self.seconds = seconds
        self.last_data = _time.monotonic()
        self.last = INT64_MIN
        self.idle_advances = 0

    def _track(self, v: int | None) -> int | None:
        if v is not None and v > self.last:
            self.last = v
        return v

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        if len(times):
            self.last_data = _time.monotonic()
        return self._track(self.inner.on_batch(batch, times))

    def on_batch_stats(self, batch: pa.RecordBatch, times: np.ndarray, lo: int,
                       hi: int) -> int | None:
        self.last_data = _time.monotonic()
        return self._track(self.inner.on_batch_stats(batch, times, lo, hi))

    def on_late(self, times: np.ndarray) -> None:
        self.inner.on_late(times)

    def late_bound(self) -> int | None:
        return self.inner.late_bound()

    def on_idle(self, clock: int) -> int | None:
        v = self.inner.on_idle(clock)
        if clock != INT64_MIN and _time.monotonic() - self.last_data >= self.seconds:
            if v is None or clock > v:
                v = clock
        if v is None or v <= self.last:
            return None
        self.last = v
        self.idle_advances += 1
        return v

    def gauges(self) -> dict[str, float]:
        return {**self.inner.gauges(), "idle_wall_advances": float(self.idle_advances)}

    def snapshot(self) -> dict[str, object]:
        return {"inner": self.inner.snapshot(), "last": self.last,
                "idle_advances": self.idle_advances}

    def restore(self, state: dict[str, object]) -> None:
        self.inner.restore(state["inner"])
        self.last = int(state["last"])  # type: ignore[arg-type]
        self.idle_advances = int(state["idle_advances"])  # type: ignore[arg-type]
        self.last_data = _time.monotonic()


@dataclass(frozen=True)
class IdleWall(GeneratorConfig):
    """Wall-clock idleness (Flink's ``withIdleness``): a source silent for ``seconds`` of wall
    time stops holding back a union's punctuation -- it is punctuated at the data-time clock
    (the largest event time any source has seen), so a Meld's ``min`` follows the busy inputs.
    Tuples it sends later below that bound are late and follow the late policy."""

    inner: GeneratorConfig
    seconds: float

    def __post_init__(self) -> None:
        if not float(self.seconds) > 0:
            raise ConfigError(f"IdleWall: seconds must be > 0, got {self.seconds!r}")

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return IdleWallLogic(self.inner.build(time), float(self.seconds))
