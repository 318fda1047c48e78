"""Replay any Spark DataFrame into an ``oop`` plan, in arrival order (DESIGN §7).

``replay(df, time="ts", arrival=None | COL, disorder=None | model,
punctuation=..., plan=...)`` streams the rows of ``df`` -- Parquet, CSV, JDBC,
Delta, anything Spark reads -- into an ``oop`` source on the driver:

* **Arrival order** is the order of ``arrival`` when given (Spark sorts by it,
  range-partitioned, spilling to disk), or of the key a disorder model
  computes in Spark (:mod:`oop.spark.disorder`), or else the DataFrame's own
  order (partition by partition, rows in partition order -- "file order";
  note Spark packs many small files into one partition by size).
* **Batches**: a ``mapInArrow`` task re-cuts each partition into Arrow
  batches of ``batch_size`` rows and ships each batch as one Arrow IPC cell;
  the driver reads them with ``toLocalIterator``, which collects one whole
  *partition* in the JVM before serving it. So the cells are re-cut into
  partitions of :data:`CELLS_PER_FETCH` batches first (:func:`_bounded`: each
  cell's global position from the per-partition counts, an exact shuffle of
  the cells only) in file order and for the ideal; an arrival sort already
  range-partitions into ~2 batches per partition. The input is never
  ``collect()``-ed: memory is bounded by the batch size, not the dataset.
  Measured (10M rows, 4 columns, file order, 2 GB driver, local[2]): JVM
  heap-in-use peak 1717 MiB with whole-partition fetches, 577 MiB with
  :func:`_bounded`; the Python driver stays at ~300 MiB RSS. (The JVM OOM
  seen in a 10M-row bench run came from Spark sorting two 128 MB file
  splits by arrival in the same 2 GB heap; embedded sessions now read
  16 MB splits, :data:`oop.spark.session.DEFAULT_CONF`.)
* **Punctuation** comes from the chosen generator (``oop.BoundedDelay("5s")``,
  a spec string, ...), or -- with ``punctuation="ideal"`` -- is computed
  exactly in Spark: after batch ``i`` the feed carries ``P(time, min{t | t in
  batches > i})``, the true low-watermark (004 Eq. 4.1). Spark computes each
  batch's minimum; the driver folds the suffix minima over that small table
  (one int per batch). With the ideal no tuple is ever late.

Example (needs a SparkSession ``spark``)::

    res = replay(spark.read.parquet("flows"), time="ts", arrival="arr",
                 punctuation="ideal", plan=lambda s: s.window(Tumbling(1000), [agg.count()]))
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from oop.api import DEFAULT_BATCH_SIZE, Stream
from oop.errors import ConfigError, EmptyInputError, UnknownColumnError
from oop.plan.executor import Node
from oop.plan.result import Result
from oop.plan.source import FeedItem, Source
from oop.punctuation.base import GeneratorConfig
from oop.spark import arrowio
from oop.spark.common import IDEAL, check_time, parse_punctuation_arg, partition_tags, suffix_min
from oop.spark.session import spark_errors
from oop.stream.elements import Punctuation
from oop.stream.late import LatePolicy

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["replay", "replay_stream", "IDEAL", "check_time", "parse_punctuation_arg",
           "arrival_ordered"]

_ARR = "__oop_arrival"
_PACKED = "__pid int, __seq long, __n long, __tmin long, __payload binary"


def arrival_ordered(
    df: "DataFrame",
    *,
    time: str,
    unit: str,
    is_ts: bool,
    arrival: str | None,
    disorder: Any,
    seed: int,
    batch_size: int,
) -> "DataFrame":
    """``df`` sorted into arrival order (or left in file order), partitions of a few batches."""
    from pyspark.sql import functions as F

    from oop.spark.disorder import arrival_key, time_as_long

    if arrival is not None and disorder is not None:
        raise ConfigError("replay: give either arrival=COL or disorder=MODEL, not both")
    if arrival is None and disorder is None:
        return df
    if arrival is not None:
        if arrival not in df.columns:
            raise UnknownColumnError(
                f"replay: no arrival column {arrival!r}; the columns are {df.columns}"
            )
        key = F.col(arrival)
    else:
        key = arrival_key(disorder, time_as_long(F.col(time), is_ts), unit, seed)
    rows = df.count()
    # partitions of ~2 batches: toLocalIterator holds one partition at a time on the driver
    parts = max(1, math.ceil(rows / (2 * batch_size)))
    out = df.withColumn(_ARR, key).repartitionByRange(parts, F.col(_ARR)).sortWithinPartitions(_ARR)
    return out


def _pack_fn(time: str, batch_size: int, drop: tuple[str, ...]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow task: cut the partition into batches, one IPC cell per batch."""

    def pack(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        seq = 0
        for b in arrowio.rechunk(it, batch_size):
            if drop:
                b = b.drop_columns(list(drop))
            col = b.column(time)
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.int64())
            mn = pc.min(col).as_py()
            yield pa.record_batch({
                "__pid": pa.array([pid], pa.int32()),
                "__seq": pa.array([seq], pa.int64()),
                "__n": pa.array([b.num_rows], pa.int64()),
                "__tmin": pa.array([mn], pa.int64()),
                "__payload": pa.array([arrowio.dumps(b)], pa.binary()),
            })
            seq += 1

    return pack


#: packed batches per partition fetched by ``toLocalIterator`` (the driver-side memory bound)
CELLS_PER_FETCH = 2


def _cells_per_partition(df: "DataFrame", batch_size: int) -> dict[int, int]:
    """How many packed batches each partition of ``df`` makes (rows counted in Spark)."""
    from pyspark.sql import functions as F

    rows = df.groupBy(F.spark_partition_id().alias("p")).count().collect()
    return {int(r["p"]): -(-int(r["count"]) // batch_size) for r in rows if r["count"]}


def _bounded(packed: "DataFrame", cells: dict[int, int]) -> "DataFrame":
    """``packed`` re-cut into partitions of :data:`CELLS_PER_FETCH` batches, order kept.

    ``toLocalIterator`` collects one whole partition in the JVM before
    serving it: an input partition (e.g. a 128 MB Parquet split, millions of
    rows) would sit in the driver heap at once -- the 2 GB-heap OOM of a
    10M-row replay in file order. Each batch cell gets its global position
    ``g = offset[pid] + seq`` and goes to partition ``g // CELLS_PER_FETCH``
    (an exact mapping, no sampling; only the packed cells are shuffled, not
    rows), sorted by ``g`` there, so the driver fetches a bounded number of
    batches at a time.
    """
    from pyspark.sql import functions as F


    total = sum(cells.values())
    if total <= CELLS_PER_FETCH:
        return packed
    offsets: list[Any] = []
    off = 0
    for pid in sorted(cells):
        offsets += [F.lit(pid), F.lit(off)]
        off += cells[pid]
    g = F.element_at(F.create_map(*offsets), F.col("__pid")) + F.col("__seq")
    parts = -(-total // CELLS_PER_FETCH)
    tags = partition_tags(packed.sparkSession, parts)
    tag = F.element_at(F.array(*[F.lit(t) for t in tags]),
                       (g / F.lit(CELLS_PER_FETCH)).cast("int") + 1)
    return packed.withColumn("__g", g).repartition(parts, tag) \
        .sortWithinPartitions("__g").drop("__g")


def replay_stream(
    df: "DataFrame",
    *,
    time: str,
    unit: str = "ms",
    arrival: str | None = None,
    disorder: Any = None,
    punctuation: GeneratorConfig | str | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = 0,
    name: str = "spark",
) -> Stream:
    """An ``oop`` source Stream fed from ``df`` in arrival order (see the module docstring).

    The Spark jobs start when the plan runs; each run re-reads ``df``.
    """
    if batch_size < 1:
        raise ConfigError(f"replay: batch_size must be >= 1, got {batch_size}")
    is_ts, unit = check_time(df, time, unit)
    punct = parse_punctuation_arg(punctuation)
    with spark_errors("replay"):
        ordered = arrival_ordered(df, time=time, unit=unit, is_ts=is_ts, arrival=arrival,
                                  disorder=disorder, seed=seed, batch_size=batch_size)
    drop = (_ARR,) if _ARR in ordered.columns else ()
    packed = ordered.mapInArrow(_pack_fn(time, batch_size, drop), _PACKED)

    file_order = arrival is None and disorder is None

    def feed() -> Iterator[FeedItem]:
        with spark_errors("replay"):
            if punct == IDEAL:
                from pyspark import StorageLevel

                # on disk: pins the batch order the minima are computed for, no heap
                cached = packed.persist(StorageLevel.DISK_ONLY)
                try:
                    idx = cached.select("__pid", "__seq", "__tmin").orderBy("__pid", "__seq")
                    got = idx.collect()
                    mins = np.array([r[2] if r[2] is not None else np.iinfo(np.int64).max
                                     for r in got], dtype=np.int64)
                    after = suffix_min(mins)
                    last = len(mins) - 1
                    cells: dict[int, int] = {}
                    for r in got:
                        cells[int(r[0])] = cells.get(int(r[0]), 0) + 1
                    for i, row in enumerate(_bounded(cached, cells).toLocalIterator()):
                        yield arrowio.loads(row["__payload"])
                        if i < last:
                            yield Punctuation(time, int(after[i]))
                finally:
                    cached.unpersist()
            else:
                out = packed
                if file_order:
                    out = _bounded(packed, _cells_per_partition(ordered, batch_size))
                for row in out.toLocalIterator():
                    yield arrowio.loads(row["__payload"])

    gen: GeneratorConfig
    if punct == IDEAL:
        from oop.punctuation.external import External

        gen = External()
    else:
        assert isinstance(punct, GeneratorConfig)
        gen = punct
    src = Source(feed, time=time, unit=unit, punctuation=gen, late=late, name=name)
    return Stream(Node(src))


def replay(
    df: "DataFrame",
    *,
    time: str,
    unit: str = "ms",
    arrival: str | None = None,
    disorder: Any = None,
    punctuation: GeneratorConfig | str | None = None,
    plan: Callable[[Stream], Stream] | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = 0,
    name: str = "spark",
) -> Result:
    """Replay ``df`` into ``plan(source)`` (default: the source itself) and run it.

    Returns the plan's :class:`~oop.plan.result.Result`. An input without
    rows raises :class:`~oop.errors.EmptyInputError`.
    """
    src = replay_stream(df, time=time, unit=unit, arrival=arrival, disorder=disorder,
                        punctuation=punctuation, late=late, batch_size=batch_size, seed=seed,
                        name=name)
    out = plan(src) if plan is not None else src
    try:
        return out.run()
    except EmptyInputError as e:
        raise EmptyInputError(f"replay: the DataFrame has no rows; nothing to replay ({e})") from e
