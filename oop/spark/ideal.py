"""``punctuation="ideal"`` for source shards: each shard's true low-watermark, computed in Spark.

After batch ``i`` of a source shard the punctuation is the minimum event time of that
shard's later batches (004 Eq. 4.1), so no tuple is late. :func:`ideal_per_shard` computes
the per-batch minima in Spark and folds their suffix minima on the driver;
:class:`IdealPerShard` carries them into the tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.spark.common import suffix_min
from oop.stream.elements import INT64_MAX
from oop.stream.timecol import TimeSpec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["IdealPerShard", "ideal_per_shard"]

_POS = "__oop_pos"
_POS_BITS = 33  # monotonically_increasing_id = partition id << 33 | row position in partition


class _IdealLogic(PunctuationGenerator):
    """After batch ``i`` of this shard: ``after[i]`` (the min time of its later batches)."""

    def __init__(self, after: np.ndarray) -> None:
        self.after = after
        self.i = 0

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        i, self.i = self.i, self.i + 1
        if i >= len(self.after) or self.after[i] == INT64_MAX:
            return None
        return int(self.after[i])


@dataclass(frozen=True)
class IdealPerShard(GeneratorConfig):
    """The true low-watermark of each source shard after each of its batches (004 Eq. 4.1).

    ``after[pid][i] = min{t | t in batches > i of partition pid}`` computed in
    Spark (:func:`ideal_per_shard`); :meth:`build` runs inside the shard's
    task and picks the row of that task's partition. Under it no tuple is late.
    """

    after: dict[int, tuple[int, ...]]

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        return _IdealLogic(np.array(self.after.get(pid, ()), dtype=np.int64))


def ideal_per_shard(df: "DataFrame", time: str, is_ts: bool,
                     batch_size: int) -> tuple["DataFrame", IdealPerShard]:
    """``df`` pinned (persisted, so every later read sees the same partition order) and the
    per-partition suffix minima of the per-batch minimum event time.

    Spark computes ``min(time)`` per (partition, batch of ``batch_size`` rows in
    partition order) -- one small row per batch comes to the driver, which
    folds the suffix minima. Cost: one pass over ``df`` plus the cache.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from oop.spark.disorder import time_as_long

    pinned = df.withColumn(_POS, F.monotonically_increasing_id()) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    pos = F.col(_POS)
    rows = pinned.groupBy(
        F.shiftright(pos, _POS_BITS).alias("pid"),
        F.floor(pos.bitwiseAND(F.lit((1 << _POS_BITS) - 1)) / F.lit(batch_size)).alias("b"),
    ).agg(F.min(time_as_long(F.col(time), is_ts)).alias("m")).collect()
    per: dict[int, dict[int, int]] = {}
    for r in rows:
        per.setdefault(int(r["pid"]), {})[int(r["b"])] = (
            int(r["m"]) if r["m"] is not None else INT64_MAX)
    after: dict[int, tuple[int, ...]] = {}
    for pid, mins in per.items():
        dense = np.full(max(mins) + 1, INT64_MAX, dtype=np.int64)
        for b, m in mins.items():
            dense[b] = m
        after[pid] = tuple(int(x) for x in suffix_min(dense))
    return pinned, IdealPerShard(after)
