"""Sharded execution on Spark: Quill's data movement over Spark partitions (001, DESIGN §7).

A :class:`ShardedStream` is a set of *shards*, each a progressing stream in
arrival order, held as one Spark DataFrame in a *physical* layout: the user's
columns plus helper columns (``__k`` row kind, ``__src`` producer, ``__seq``
arrival position, ``__p`` punctuation value, ``__shard`` next shard; see
:mod:`oop.spark.physical`). Punctuation travels *in band* as rows, so Spark's
shuffles carry it.

This module is the API: the stream and its movements, :func:`shard` and the
result. The rest lives beside it -- :mod:`oop.spark.physical` (the row layout,
emitting and reading physical rows), :mod:`oop.spark.meld` (the Meld rule over a
shard's producers), :mod:`oop.spark.tasks` (the plans shipped to Spark tasks)
and :mod:`oop.spark.ideal` (``punctuation="ideal"``); the names they export that
this module used to define stay importable from here.

Data movement (004 ch. 8 / 001 Quill), each a Spark projection plus the
shuffle done by the next :meth:`~ShardedStream.query`:

* :meth:`~ShardedStream.rekey` -- materialise a key column (no movement);
* :meth:`~ShardedStream.redistribute` ``(m, key)`` -- data row to shard
  ``pmod(hash(key), m)``;
* :meth:`~ShardedStream.reshard` ``(m)`` -- round-robin by arrival position;
* :meth:`~ShardedStream.broadcast` ``(m)`` -- every data row to every shard;
* :meth:`~ShardedStream.multicast` ``(m, fn)`` -- ``fn`` (a Spark column of
  ``array<int>``) picks the shards of each data row, e.g. by window id.

**Every movement sends each punctuation row to all m outputs** (a
punctuation is a promise about *all* later rows of its producer, so every
receiver needs it); stats rows go to shard 0.

:meth:`~ShardedStream.query` ``(plan[, other])`` shuffles the rows to their
shard (``repartition`` on a tag that Spark's hash partitioner maps to
partition ``shard``), sorts each partition by ``(__shard, __seq, ...)`` --
an *arrival-position* interleaving of the producers, never an event-time
merge -- and runs, inside one ``mapInArrow`` task per partition, one ``oop``
plan per shard. The task re-combines the producers of each input with the
**Meld rule**: data is forwarded at once, and after each chunk the
punctuation ``min_j`` (latest punctuation of producer ``j``) is applied
if it grew (:class:`~oop.progress.frontier.MinFrontier`); a producer that
ended sends ``P(+inf)``. The plan's output batches and punctuations become the
physical rows of the next stage. :meth:`~ShardedStream.collect` re-combines
the shard outputs on the driver the same way (Meld, min of punctuations).

The first query after :func:`shard` (no movement in between) runs in the
same task as the source shard: the raw rows cross from the JVM into Python
once, and with a local aggregation only the partial results are shuffled.

Parquet inputs have a faster source: :func:`oop.spark.files.shard_files`
returns a ShardedStream whose source shards are file fragments read with
pyarrow inside Spark tasks, fused with the first query the same way (no
JVM -> Python transfer of the raw rows; the query's output rows enter Spark).

``punctuation="ideal"`` in :func:`shard`: each source shard punctuates, after
each batch, with the true low-watermark of its remaining rows, computed in
Spark (per-batch minima per partition, suffix minima on the driver;
:class:`IdealPerShard`).

Memory: Spark sorts and shuffles (spilling to disk); each task holds one
chunk of input (Spark's Arrow batch) plus its plan's state. Costs per chunk:
a few vectorized filters plus O(#punctuation rows) Python.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa

from oop.api import DEFAULT_BATCH_SIZE, Stream
from oop.errors import ConfigError, UnknownColumnError
from oop.plan.executor import Node
from oop.plan.source import Source
from oop.punctuation.base import GeneratorConfig
from oop.spark import arrowio
from oop.spark.common import check_time, parse_punctuation_arg, partition_tags
from oop.spark.ideal import IdealPerShard, ideal_per_shard
from oop.spark.meld import Carried, Side
from oop.spark.physical import (DATA, HELPERS, PUNCT, SEQ, SHARD, SIDE, SRC, STATS, K, P,
                                pack_phys, phys_spark_schema)
from oop.spark.session import spark_errors
from oop.spark.tasks import (InputSpec, ShardRead, SourceParams, fused_rows, fused_task, probe_plan,
                             shard_task, source_task)
from oop.stream.elements import INT64_MAX, Punctuation
from oop.stream.late import LatePolicy

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ShardedStream", "shard", "files_as_partitions", "ShardedResult", "IdealPerShard",
           "fused_rows", "K", "SRC", "SEQ", "P", "SHARD"]


@dataclass
class ShardedResult:
    """Output of :meth:`ShardedStream.collect`: melded rows and punctuations, plus counts."""

    table: pa.Table
    punctuations: list[tuple[int, Punctuation]]
    tuples_in: int
    late_total: int
    wall_s: float
    shards: int
    path: str = "mapInArrow"  # how the source shards were read: "mapInArrow" or "files"


@dataclass(frozen=True)
class ShardedStream:
    """Shards of a progressing stream laid out as one Spark DataFrame (see module docstring).

    ``producers`` is how many upstream shards write into it (the Meld fan-in
    of the next query), ``shards`` how many shards its rows go to next.
    """

    df: "DataFrame"
    schema: pa.Schema
    time: str | None
    unit: str
    producers: int
    shards: int
    name: str = "sharded"
    aligned: bool = False  # rows already sit in their shard's partition, in arrival order
    source: Any = None  # SourceParams while no query ran yet: the first query fuses with it

    # ---- movement -------------------------------------------------------
    def _move(self, m: int, data_target: "Column", many: bool = False) -> "ShardedStream":
        from pyspark.sql import functions as F

        if m < 1:
            raise ConfigError(f"{self.name}: the number of shards must be >= 1, got {m}")
        all_shards = F.array(*[F.lit(i) for i in range(m)])
        k = F.col(K)
        if many:
            target = F.when(k == PUNCT, all_shards).when(k == STATS, F.array(F.lit(0))) \
                .otherwise(data_target)
        else:
            target = F.when(k == PUNCT, all_shards).when(k == STATS, F.array(F.lit(0))) \
                .otherwise(F.array(data_target))
        df = self.df.withColumn(SHARD, F.explode(target.cast("array<int>")))
        return replace(self, df=df, shards=m, aligned=False, source=None)

    def redistribute(self, m: int, key: str | Sequence[str]) -> "ShardedStream":
        """Send each data row to shard ``pmod(hash(key), m)``; punctuation to all m shards."""
        from pyspark.sql import functions as F

        keys = [key] if isinstance(key, str) else list(key)
        self._require(keys, "redistribute")
        return self._move(m, F.pmod(F.hash(*[F.col(c) for c in keys]), F.lit(m)))

    def reshard(self, m: int) -> "ShardedStream":
        """Round-robin the data rows over ``m`` shards by arrival position."""
        from pyspark.sql import functions as F

        return self._move(m, F.pmod(F.col(SEQ) + F.col(SRC), F.lit(m)))

    def broadcast(self, m: int) -> "ShardedStream":
        """Every row (data and punctuation) to every one of ``m`` shards."""
        from pyspark.sql import functions as F

        return self._move(m, F.array(*[F.lit(i) for i in range(m)]), many=True)

    def multicast(self, m: int, shards_of: Callable[[Any], "Column"]) -> "ShardedStream":
        """Each data row to the shards ``shards_of(F)`` returns (an ``array<int>`` column).

        ``shards_of`` gets ``pyspark.sql.functions`` and builds the column,
        e.g. ``lambda F: F.array((F.col("ts") / 1000 % 4).cast("int"))``.
        Ids outside ``[0, m)`` are reduced mod m.
        """
        from pyspark.sql import functions as F

        col = F.transform(shards_of(F), lambda x: F.pmod(x, F.lit(m)))
        return self._move(m, F.array_distinct(col), many=True)

    def rekey(self, column: str, expr: Callable[[Any], "Column"]) -> "ShardedStream":
        """Materialise a key column ``column = expr(F)`` on data rows (no data movement)."""
        from pyspark.sql import functions as F

        df = self.df.withColumn(column, F.when(F.col(K) == DATA, expr(F)))
        cols = [c for c in df.columns if c not in HELPERS] + list(HELPERS)
        df = df.select(*cols)
        user_spark = df.select(*[c for c in df.columns if c not in HELPERS]).schema
        return replace(self, df=df, schema=arrowio.spark_to_arrow(user_spark), source=None)

    def _require(self, cols: Sequence[str], op: str) -> None:
        missing = [c for c in cols if c not in self.schema.names]
        if missing:
            raise UnknownColumnError(
                f"{op}: sharded stream {self.name!r} has no column(s) {missing}; "
                f"its columns are {self.schema.names}"
            )

    def _spec(self) -> InputSpec:
        if self.time is None:
            raise ConfigError(
                f"sharded stream {self.name!r} has no progressing attribute (the plan that made "
                "it projected its time column away); keep a time column to run another query"
            )
        return InputSpec(self.schema, self.time, self.unit, self.producers)

    # ---- query -----------------------------------------------------------
    def query(
        self,
        plan: Callable[..., Stream],
        other: "ShardedStream | None" = None,
        name: str = "query",
    ) -> "ShardedStream":
        """Run ``plan(stream)`` (or ``plan(left, right)`` with ``other``) in every shard.

        Both inputs must target the same number of shards (shard i of the
        left meets shard i of the right). Returns the sharded output.
        """
        from pyspark.sql import functions as F

        specs = [self._spec()] + ([other._spec()] if other is not None else [])
        m = self.shards
        if other is not None and other.shards != m:
            raise ConfigError(
                f"{name}: the two inputs go to {m} and {other.shards} shards; move both to the "
                "same number of shards (redistribute/broadcast) before a two-input query"
            )
        out_schema, out_time, out_unit = probe_plan(plan, specs)
        phys_out = phys_spark_schema(out_schema)
        spark = self.df.sparkSession
        if other is None and self.source is not None and self.aligned:
            sp = self.source
            if isinstance(sp, SourceParams):
                task_sp = replace(sp, df=None)  # the DataFrame stays on the driver
                out = sp.df.mapInArrow(fused_task(task_sp, plan, out_schema, out_time,
                                                   phys_out), phys_out)
            else:  # oop.spark.files.FileSource: the tasks read their Parquet fragments
                out = sp.fused(plan, out_schema, out_time, phys_out)
            return ShardedStream(out, out_schema, out_time, out_unit, producers=m, shards=m,
                                 name=name, aligned=True)
        if other is None and self.aligned:
            # each partition holds one shard fed by one producer (itself)
            specs = [replace(specs[0], producers=1)]
        task = shard_task(plan, specs, out_schema, out_time, phys_out)
        if other is None and self.aligned:
            # no movement since the rows were laid out: run in the same partitions, no shuffle
            return ShardedStream(self.df.mapInArrow(task, phys_out), out_schema, out_time,
                                 out_unit, producers=m, shards=m, name=name, aligned=True)
        if other is None:
            df = self.df.withColumn(SIDE, F.lit(0))
        else:
            df = self.df.withColumn(SIDE, F.lit(0)).unionByName(
                other.df.withColumn(SIDE, F.lit(1)), allowMissingColumns=True)
        tags = partition_tags(spark, m)
        tag = F.element_at(F.array(*[F.lit(t) for t in tags]), F.col(SHARD) + 1)
        df = df.repartition(m, tag).sortWithinPartitions(SHARD, SEQ, SIDE, SRC, K, P)
        out = df.mapInArrow(task, phys_out)
        return ShardedStream(out, out_schema, out_time, out_unit, producers=m, shards=m,
                             name=name, aligned=True)

    # ---- leaving Spark ------------------------------------------------------
    def _melded_feed(self, side: Side, bounded: bool = True) -> Iterator[tuple[pa.RecordBatch, int | None]]:
        """Shard outputs in arrival order per producer, melded into ``side``'s feed.

        ``bounded``: fetch partition by partition (``toLocalIterator``; memory
        of one partition); else one ``collect`` of the packed batches (one
        Spark job; for :meth:`collect`, which materialises the result anyway).
        """
        with spark_errors(f"sharded stream {self.name!r}"):
            if bounded:
                packed = self.df.mapInArrow(pack_phys, "__payload binary")
                chunks: Iterator[pa.RecordBatch] = (
                    arrowio.loads(row["__payload"]) for row in packed.toLocalIterator())
            else:  # Arrow collection keeps partition order and row order within partitions
                chunks = iter(self.df.toArrow().to_batches())
            for chunk in chunks:
                side.absorb(chunk)
                while side.queue:
                    yield side.queue.popleft()

    def to_stream(self, name: str | None = None) -> Stream:
        """The shard outputs re-combined on the driver (Meld: union, min of punctuations)."""
        spec = self._spec()
        side = Side(self.producers, self.schema)
        gen = Carried()
        src = Source(lambda: self._feed_items(side), time=spec.time, unit=spec.unit,
                     punctuation=gen, schema=self.schema, name=name or self.name)
        return Stream(Node(src))

    def _feed_items(self, side: Side) -> Iterator[Any]:
        for batch, v in self._melded_feed(side):
            if batch.num_rows:
                yield batch
            if v is not None:
                yield Punctuation(self.time or "", v)

    def collect(self) -> ShardedResult:
        """Bring the shards' rows to the driver, melded; punctuations = running min."""
        t0 = _time.perf_counter()
        side = Side(self.producers, self.schema)
        batches: list[pa.RecordBatch] = []
        puncts: list[tuple[int, Punctuation]] = []
        rows = 0
        for batch, v in self._melded_feed(side, bounded=False):
            if batch.num_rows:
                batches.append(batch)
                rows += batch.num_rows
            if v is not None and self.time is not None and v != INT64_MAX:
                puncts.append((rows, Punctuation(self.time, v)))
        table = pa.Table.from_batches(batches, schema=self.schema) if batches \
            else self.schema.empty_table()
        return ShardedResult(table, puncts, side.tuples_in, side.late,
                             _time.perf_counter() - t0, self.producers)


def files_as_partitions(spark: "SparkSession", paths: Sequence[str]) -> "DataFrame":
    """One DataFrame over Parquet ``paths`` whose every partition is ONE file split, in order.

    Spark packs small files into one partition ordered by size, which loses
    the arrival order across files. Reading each file on its own and taking
    the union keeps every partition a contiguous piece of one file, read in
    row order -- for files written in arrival order, each partition is an
    arrival-ordered source shard and no sort is needed (``shard(df)``
    without ``arrival``).
    """
    if not paths:
        raise ConfigError("files_as_partitions: no files given")
    dfs = [spark.read.parquet(str(p)) for p in paths]
    out = dfs[0]
    for d in dfs[1:]:
        out = out.unionByName(d)
    return out


def shard(
    df: "DataFrame",
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | str | None = None,
    arrival: str | None = None,
    shards: int | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    name: str = "input",
) -> ShardedStream:
    """A ShardedStream over ``df``: each Spark partition is one source shard.

    With ``shards`` the rows are first spread round-robin over that many
    partitions. With ``arrival`` each partition is replayed in ``arrival``
    order (else in its own row order). Each source shard punctuates with
    ``punctuation`` (a generator config or spec) and applies the ``late``
    policy (late rows are counted in the result's ``late_total``).
    ``punctuation="ideal"``: after each batch of ``batch_size`` rows a shard
    punctuates with the true low-watermark of its remaining rows, computed
    exactly in Spark (:class:`IdealPerShard`; the input is persisted so the
    shard order it was computed for is the order replayed) -- no tuple is late.
    """
    is_ts, unit = check_time(df, time, unit, what=name)
    punct = parse_punctuation_arg(punctuation)
    if arrival is not None and arrival not in df.columns:
        raise UnknownColumnError(f"{name}: no arrival column {arrival!r}; columns are {df.columns}")
    clash = [c for c in df.columns if c in HELPERS or c == SIDE]
    if clash:
        raise ConfigError(f"{name}: column names {clash} are reserved by oop.spark; rename them")
    if shards is not None:
        if shards < 1:
            raise ConfigError(f"{name}: shards must be >= 1, got {shards}")
        df = df.repartition(shards)
    if arrival is not None:
        df = df.sortWithinPartitions(arrival)
    user = arrowio.spark_to_arrow(df.schema)
    if not isinstance(punct, GeneratorConfig):  # "ideal": computed exactly in Spark
        with spark_errors(f"{name}: ideal punctuation"):
            df, punct = ideal_per_shard(df, time, is_ts, batch_size)
    if is_ts:
        unit = "us"
    producers = df.rdd.getNumPartitions()
    phys_out = phys_spark_schema(user)
    read = ShardRead(user, time, unit, punct, late, batch_size)
    phys = df.mapInArrow(source_task(read, phys_out), phys_out)
    sp = SourceParams(df, read)
    return ShardedStream(phys, user, time, unit, producers=producers, shards=producers,
                         name=name, aligned=True, source=sp)
