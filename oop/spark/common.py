"""What the Spark replay (:mod:`oop.spark.replay`) and the sharded runner
(:mod:`oop.spark.sharded`, :mod:`oop.spark.files`, :mod:`oop.spark.cli`) share:
event-time checks on a Spark schema, the punctuation argument (a generator config or
:data:`IDEAL`), suffix minima of per-partition time minima (the ideal punctuation) and
the partition tags that route rows to a chosen Spark partition.

>>> suffix_min(np.array([5, 3, 9, 4])).tolist()[:3]
[3, 4, 4]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from oop.errors import ConfigError, TimeTypeError, UnknownColumnError
from oop.punctuation.base import GeneratorConfig

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["IDEAL", "check_time", "parse_punctuation_arg", "suffix_min", "partition_tags"]

#: ``punctuation="ideal"``: exact per-partition bounds computed from the data (no late tuples)
IDEAL = "ideal"


def check_time(df: "DataFrame", time: str, unit: str, what: str = "input") -> tuple[bool, str]:
    """Validate ``time`` on the Spark schema; return (is_timestamp, effective unit)."""
    from pyspark.sql import types as T

    names = df.columns
    if time not in names:
        raise UnknownColumnError(
            f"{what}: no column {time!r} to use as event time; its columns are {names}"
        )
    dt = df.schema[time].dataType
    if isinstance(dt, (T.TimestampType, T.TimestampNTZType)):
        return True, "us"
    if isinstance(dt, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return False, unit
    raise TimeTypeError(
        f"{what}: column {time!r} has Spark type {dt.simpleString()}, which cannot be event "
        "time; use an integer column (declare its unit) or a timestamp column, or cast it first"
    )


def parse_punctuation_arg(p: GeneratorConfig | str | None) -> GeneratorConfig | str:
    """A generator config, or :data:`IDEAL`; strings go through ``oop.punctuation`` specs."""
    if p is None:
        from oop.punctuation.ordered import Ordered

        return Ordered()
    if isinstance(p, GeneratorConfig):
        return p
    if isinstance(p, str):
        if p.strip().lower() == IDEAL:
            return IDEAL
        from oop.punctuation import parse_punctuation

        return parse_punctuation(p)
    raise ConfigError(f"punctuation must be a generator config, a spec string or 'ideal', got {p!r}")


def suffix_min(mins: np.ndarray) -> np.ndarray:
    """``out[i] = min(mins[i+1:])`` (``INT64_MAX`` past the end). O(n)."""
    out = np.empty(len(mins), dtype=np.int64)
    if len(mins):
        rev = np.minimum.accumulate(mins[::-1])[::-1]
        out[:-1] = rev[1:]
        out[-1] = np.iinfo(np.int64).max
    return out


_TAG_CACHE: dict[int, list[int]] = {}


def partition_tags(spark: "SparkSession", m: int) -> list[int]:
    """``tags[i]``: an int that Spark's hash partitioning (m partitions) sends to partition i."""
    if m in _TAG_CACHE:
        return _TAG_CACHE[m]
    from pyspark.sql import functions as F

    n = 64 * m
    while True:
        rows = spark.range(0, n).select(
            F.col("id").cast("int").alias("v"),
            F.pmod(F.hash(F.col("id").cast("int")), F.lit(m)).alias("p"),
        ).groupBy("p").agg(F.min("v").alias("v")).collect()
        found = {int(r["p"]): int(r["v"]) for r in rows}
        if len(found) == m:
            _TAG_CACHE[m] = [found[i] for i in range(m)]
            return _TAG_CACHE[m]
        n *= 4
