"""Disorder models applied in Spark: an *arrival key* column computed per row.

``replay(df, disorder=model)`` sorts the DataFrame by the key this module
computes, so the engine sees the rows in the order a disordered feed would
deliver them. The models of :mod:`oop.datasets.disorder` are accepted as they
are (their durations are milliseconds), plus two that only make sense over
arbitrary DataFrames:

* ``InOrder()`` -- arrival = event time.
* ``Band(delay, late_fraction, late_delay)`` -- arrival = ``t + U{0..delay}``;
  a ``late_fraction`` of the rows gets ``t + delay + U{1..late_delay}``
  (beyond any ``delay`` bound: late tuples on purpose). 004 Fig. 6-8.
* ``BlockSorted(block)`` -- every block ``[k*block, (k+1)*block)`` of event
  time arrives at its end, in random order inside the block (NetFlow cache
  purges, 004 Fig. 6-9).
* :class:`MultiSourceSkew` ``(sources, skew)`` -- rows are spread over
  ``sources`` feeds by a hash of the row; feed ``s`` lags ``s * skew`` behind.
* :class:`Lulls` ``(period, length)`` -- the feed is silent for the first
  ``length`` of every ``period``; what happened in the lull arrives at its end
  in one burst (random order).

Ties are broken by a seeded random double, so the order is deterministic for
a given input partitioning and ``seed``. Cost: one projection, then Spark's
sort (spills to disk; never collected).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oop.errors import ConfigError
from oop.stream.timecol import parse_duration

__all__ = ["MultiSourceSkew", "Lulls", "arrival_key", "time_as_long"]


@dataclass(frozen=True)
class MultiSourceSkew:
    """``sources`` feeds, feed ``s`` delayed by ``s * skew`` (a duration spec or int in the unit)."""

    sources: int
    skew: str | int

    def __post_init__(self) -> None:
        if self.sources < 1:
            raise ConfigError(f"MultiSourceSkew: sources must be >= 1, got {self.sources}")


@dataclass(frozen=True)
class Lulls:
    """Silent for ``length`` at the start of every ``period`` (duration specs or ints in the unit)."""

    period: str | int
    length: str | int


def time_as_long(col: Any, is_timestamp: bool) -> Any:
    """The int64 event time of a Spark column (timestamps as epoch microseconds)."""
    from pyspark.sql import functions as F

    return F.unix_micros(col) if is_timestamp else col.cast("long")


def _ms(v: int, unit: str) -> int:
    return parse_duration(f"{int(v)}ms", unit)


def arrival_key(model: Any, t: Any, unit: str, seed: int = 0) -> Any:
    """A Spark column (double) whose ascending order is the model's arrival order.

    ``t`` is the int64 event-time column in ``unit``.
    """
    from pyspark.sql import functions as F

    name = type(model).__name__
    jitter = F.rand(seed)  # in [0, 1): breaks ties, randomises inside blocks
    if name == "InOrder":
        return t.cast("double") + jitter * 0.5
    if name == "Band":
        d = _ms(model.delay, unit)
        base = t + F.floor(F.rand(seed + 1) * (d + 1))
        if getattr(model, "late_fraction", 0) > 0:
            ld = _ms(model.late_delay, unit)
            late = t + d + 1 + F.floor(F.rand(seed + 2) * ld)
            base = F.when(F.rand(seed + 3) < model.late_fraction, late).otherwise(base)
        return base.cast("double") + jitter * 0.5
    if name == "BlockSorted":
        b = _ms(model.block, unit)
        return ((F.floor(t / b) + 1) * b).cast("double") + jitter * 0.5
    if isinstance(model, MultiSourceSkew):
        skew = parse_duration(model.skew, unit)
        src = F.pmod(F.xxhash64(t, F.rand(seed + 4)), F.lit(model.sources))
        return (t + src * skew).cast("double") + jitter * 0.5
    if isinstance(model, Lulls):
        period = parse_duration(model.period, unit)
        length = parse_duration(model.length, unit)
        if not 0 <= length < period:
            raise ConfigError(f"Lulls: need 0 <= length < period, got {model}")
        start = F.floor(t / period) * period
        in_lull = (t - start) < length
        return F.when(in_lull, (start + length).cast("double") + jitter * 0.5).otherwise(
            t.cast("double") + jitter * 0.5)
    raise ConfigError(
        f"unknown disorder model {model!r}; use oop.datasets.disorder InOrder/Band/BlockSorted "
        "or oop.spark.disorder MultiSourceSkew/Lulls"
    )
