"""Sharded execution on Spark: Quill's data movement over Spark partitions (001, DESIGN §7).

A :class:`ShardedStream` is a set of *shards*, each a progressing stream in
arrival order, held as one Spark DataFrame in a *physical* layout: the user's
columns plus

====================  =====================================================
``__k``               0 data row, 1 punctuation row, 2 stats row
``__src``             the producer (upstream shard / input partition) of the row
``__seq``             the row's arrival position within its producer
``__p``               punctuation value (``__k = 1``) / late count (``__k = 2``)
``__shard``           the shard the row goes to next
====================  =====================================================

Punctuation travels *in band* as rows, so Spark's shuffles carry it.

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
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.api import DEFAULT_BATCH_SIZE, Stream
from oop.errors import ConfigError, UnknownColumnError
from oop.operators.base import Operator
from oop.plan.executor import Executor, Node
from oop.plan.source import Source
from oop.progress.frontier import MinFrontier
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.spark import arrowio
from oop.spark.common import check_time, parse_punctuation_arg, partition_tags, suffix_min
from oop.spark.session import spark_errors
from oop.stream.elements import INT64_MAX, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import TimeSpec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ShardedStream", "shard", "files_as_partitions", "ShardedResult", "IdealPerShard",
           "fused_rows", "K", "SRC", "SEQ", "P", "SHARD"]

K, SRC, SEQ, P, SHARD, SIDE = "__k", "__src", "__seq", "__p", "__shard", "__side"
HELPERS = (K, SRC, SEQ, P, SHARD)
DATA, PUNCT, STATS = 0, 1, 2
_HELPER_DDL = f"{K} int, {SRC} int, {SEQ} long, {P} long, {SHARD} int"


# ---- physical rows ------------------------------------------------------
def _phys_spark_schema(user: pa.Schema) -> Any:
    from pyspark.sql import types as T

    st = arrowio.arrow_to_spark(user)
    fields = [T.StructField(f.name, f.dataType, True) for f in st.fields]
    fields += [T.StructField(K, T.IntegerType(), False), T.StructField(SRC, T.IntegerType(), False),
               T.StructField(SEQ, T.LongType(), False), T.StructField(P, T.LongType(), True),
               T.StructField(SHARD, T.IntegerType(), False)]
    return T.StructType(fields)


class _Emitter:
    """Builds physical batches for one producer (``src``): data, punctuation, stats rows."""

    def __init__(self, phys: pa.Schema, user: pa.Schema, src: int) -> None:
        self.phys = phys
        self.user = user
        self.src = src
        self.seq = 0  # next data row position

    def _helpers(self, n: int, k: int, seq: pa.Array, p: pa.Array, shard: int) -> list[pa.Array]:
        return [pa.array(np.full(n, k, np.int32)), pa.array(np.full(n, self.src, np.int32)),
                seq, p, pa.array(np.full(n, shard, np.int32))]

    def data(self, batch: pa.RecordBatch, shard: int) -> pa.RecordBatch:
        n = batch.num_rows
        seq = pa.array(np.arange(self.seq, self.seq + n, dtype=np.int64))
        self.seq += n
        cols = [batch.column(f.name) for f in self.user]
        cols += self._helpers(n, DATA, seq, pa.nulls(n, pa.int64()), shard)
        return arrowio.conform(pa.RecordBatch.from_arrays(cols, names=self.phys.names), self.phys)

    def _meta(self, k: int, seq: int, v: int, shard: int) -> pa.RecordBatch:
        cols = [pa.nulls(1, f.type) for f in self.user]
        cols += self._helpers(1, k, pa.array([seq], pa.int64()), pa.array([v], pa.int64()), shard)
        return arrowio.conform(pa.RecordBatch.from_arrays(cols, names=self.phys.names), self.phys)

    def punct(self, v: int, shard: int) -> pa.RecordBatch:
        return self._meta(PUNCT, self.seq - 1, v, shard)

    def stats(self, tuples_in: int, late: int, shard: int) -> pa.RecordBatch:
        # stats rows: __seq carries tuples_in, __p the late count (summed at collection)
        return self._meta(STATS, tuples_in, late, shard)


class _CarriedLogic(PunctuationGenerator):
    """Punctuation handed over by the feed with each batch (the melded value)."""

    def __init__(self) -> None:
        self.pending: int | None = None

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        v, self.pending = self.pending, None
        return v


@dataclass(frozen=True)
class _Carried(GeneratorConfig):
    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return _CarriedLogic()


class _Outbox(Operator):
    """Sink keeping batches and linear punctuations on ``attr`` in emission order."""

    def __init__(self) -> None:
        super().__init__("outbox")
        self.items: list[Element] = []

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.items.append(batch)
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        assert self.output is not None
        if isinstance(punctuation, Punctuation) and punctuation.attr == self.output.time:
            self.items.append(punctuation)
        return []


# ---- the melded input of one shard ---------------------------------------
class _Side:
    """One input of a shard's plan: its producers melded into one feed (Meld rule).

    Each chunk of physical rows becomes ONE feed item: the chunk's data rows
    (arrival order) carrying, as pending punctuation, the min over producers
    if it grew. ``stats`` accumulates the (tuples_in, late) rows seen.
    """

    def __init__(self, producers: int, user: pa.Schema) -> None:
        self.frontier = MinFrontier(max(1, producers))
        self.producers = producers
        self.ports: dict[int, int] = {}
        self.user = user
        self.queue: deque[tuple[pa.RecordBatch, int | None]] = deque()
        self.tuples_in = 0
        self.late = 0
        self.gen: _CarriedLogic | None = None
        self._empty = (pa.RecordBatch.from_arrays([pa.array([], f.type) for f in user], schema=user))

    def _port(self, src: int) -> int:
        # producer ids are labels (a Spark task's partition id depends on the plan around
        # it, e.g. a union offsets them): ports are assigned in order of first appearance
        port = self.ports.get(src)
        if port is None:
            port = len(self.ports)
            if port >= len(self.frontier.values):
                raise ConfigError(
                    f"sharded input expected {self.producers} producer(s) but saw more "
                    f"(ids {sorted(self.ports)} and {src}); the Spark partitioning changed "
                    "between planning and running (disable adaptive query execution)"
                )
            self.ports[src] = port
        return port

    def absorb(self, rows: pa.RecordBatch) -> None:
        """Split one chunk of this side's physical rows into data + melded punctuation."""
        k = rows.column(K).to_numpy(zero_copy_only=False)
        data_mask = k == DATA
        if data_mask.all():
            data = rows
        else:
            data = rows.filter(pa.array(data_mask))
        grown: int | None = None
        meta = np.flatnonzero(~data_mask)
        if len(meta):
            srcs = rows.column(SRC).to_numpy(zero_copy_only=False)
            ps = pc.fill_null(rows.column(P), 0).to_numpy(zero_copy_only=False)
            seqs = rows.column(SEQ).to_numpy(zero_copy_only=False)
            for i in meta:
                if k[i] == PUNCT:
                    v = self.frontier.update(self._port(int(srcs[i])), int(ps[i]))
                    if v is not None:
                        grown = v
                else:
                    self.tuples_in += int(seqs[i])
                    self.late += int(ps[i])
        batch = arrowio.conform(data, self.user) if data.num_rows else self._empty
        if data.num_rows or grown is not None:
            self.queue.append((batch, grown))

    def feed(self, pump: Callable[["_Side"], bool]) -> Iterator[pa.RecordBatch]:
        """The Source feed: queued chunks; when empty ask ``pump`` for one more chunk."""
        while True:
            if not self.queue and not pump(self):
                return
            if not self.queue:  # the chunk read had nothing for this side: idle this round
                yield self._empty
                continue
            batch, v = self.queue.popleft()
            assert self.gen is not None
            self.gen.pending = v
            yield batch


class _PartitionReader:
    """Rows of one sorted partition, handed out as chunks of one shard at a time."""

    def __init__(self, it: Iterator[pa.RecordBatch]) -> None:
        self.it = it
        self.buf: pa.RecordBatch | None = None
        self.shards: np.ndarray | None = None
        self.off = 0

    def _fill(self) -> bool:
        while self.buf is None or self.off >= self.buf.num_rows:
            nxt = next(self.it, None)
            if nxt is None:
                self.buf = None
                return False
            self.buf, self.off = nxt, 0
            self.shards = nxt.column(SHARD).to_numpy(zero_copy_only=False)
        return True

    def peek_shard(self) -> int | None:
        if not self._fill():
            return None
        assert self.shards is not None
        return int(self.shards[self.off])

    def chunk(self, shard: int) -> pa.RecordBatch | None:
        """The next run of rows of ``shard`` (within one Spark batch), or None when it ended."""
        if self.peek_shard() != shard:
            return None
        assert self.buf is not None and self.shards is not None
        rest = self.shards[self.off:]
        stop = np.flatnonzero(rest != shard)
        end = self.off + (int(stop[0]) if len(stop) else len(rest))
        out = self.buf.slice(self.off, end - self.off)
        self.off = end
        return out


# ---- the stream --------------------------------------------------------
@dataclass(frozen=True)
class InputSpec:
    """What a shard task needs to know about one input: schema, time, producers."""

    schema: pa.Schema
    time: str
    unit: str
    producers: int


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
    source: Any = None  # _SourceParams while no query ran yet: the first query fuses with it

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
        out_schema, out_time, out_unit = _probe(plan, specs)
        phys_out = _phys_spark_schema(out_schema)
        spark = self.df.sparkSession
        if other is None and self.source is not None and self.aligned:
            sp = self.source
            if isinstance(sp, _SourceParams):
                task_sp = replace(sp, df=None)  # the DataFrame stays on the driver
                out = sp.df.mapInArrow(_fused_task(task_sp, plan, out_schema, out_time,
                                                   phys_out), phys_out)
            else:  # oop.spark.files.FileSource: the tasks read their Parquet fragments
                out = sp.fused(plan, out_schema, out_time, phys_out)
            return ShardedStream(out, out_schema, out_time, out_unit, producers=m, shards=m,
                                 name=name, aligned=True)
        if other is None and self.aligned:
            # each partition holds one shard fed by one producer (itself)
            specs = [replace(specs[0], producers=1)]
        task = _shard_task(plan, specs, out_schema, out_time, phys_out)
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
    def _melded_feed(self, side: _Side, bounded: bool = True) -> Iterator[tuple[pa.RecordBatch, int | None]]:
        """Shard outputs in arrival order per producer, melded into ``side``'s feed.

        ``bounded``: fetch partition by partition (``toLocalIterator``; memory
        of one partition); else one ``collect`` of the packed batches (one
        Spark job; for :meth:`collect`, which materialises the result anyway).
        """
        with spark_errors(f"sharded stream {self.name!r}"):
            if bounded:
                packed = self.df.mapInArrow(_pack_phys, "__payload binary")
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
        side = _Side(self.producers, self.schema)
        gen = _Carried()
        src = Source(lambda: self._feed_items(side), time=spec.time, unit=spec.unit,
                     punctuation=gen, schema=self.schema, name=name or self.name)
        return Stream(Node(src))

    def _feed_items(self, side: _Side) -> Iterator[Any]:
        for batch, v in self._melded_feed(side):
            if batch.num_rows:
                yield batch
            if v is not None:
                yield Punctuation(self.time or "", v)

    def collect(self) -> ShardedResult:
        """Bring the shards' rows to the driver, melded; punctuations = running min."""
        t0 = _time.perf_counter()
        side = _Side(self.producers, self.schema)
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


def _pack_phys(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in it:
        if b.num_rows:
            yield pa.record_batch({"__payload": pa.array([arrowio.dumps(b)], pa.binary())})


# ---- plans inside tasks ---------------------------------------------------
def _build(plan: Callable[..., Stream], specs: Sequence[InputSpec],
           feeds: Sequence[Callable[[], Any]]) -> tuple[Executor, _Outbox, list[Source]]:
    sources = [Source(f, time=s.time, unit=s.unit, punctuation=_Carried(), schema=s.schema,
                      name=f"shard_in{i}") for i, (s, f) in enumerate(zip(specs, feeds))]
    streams = [Stream(Node(src)) for src in sources]
    out = plan(*streams)
    if not isinstance(out, Stream):
        raise ConfigError(f"a sharded plan must return an oop Stream, got {type(out).__name__}")
    box = _Outbox()
    ex = Executor([Node(box, [out.node])])
    return ex, box, sources


def _probe(plan: Callable[..., Stream], specs: Sequence[InputSpec]) -> tuple[pa.Schema, str | None, str]:
    """Open the plan on empty inputs to learn its output schema and time attribute."""
    ex, box, _ = _build(plan, specs, [lambda: iter(()) for _ in specs])
    ex.open()
    info = box.inputs[0]
    unit = info.times.get(info.time, specs[0].unit) if info.time else specs[0].unit
    return info.schema, info.time, unit


def _shard_task(plan: Callable[..., Stream], specs: Sequence[InputSpec], out_schema: pa.Schema,
                out_time: str | None, phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    n_sides = len(specs)

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        phys = arrowio.spark_to_arrow(phys_out)
        reader = _PartitionReader(it)
        while True:
            shard = reader.peek_shard()
            if shard is None:
                return
            sides = [_Side(s.producers, s.schema) for s in specs]

            def pump(_who: _Side, shard: int = shard, sides: list[_Side] = sides) -> bool:
                rows = reader.chunk(shard)
                if rows is None:
                    return False
                if n_sides == 1:
                    sides[0].absorb(rows)
                else:
                    side_col = rows.column(SIDE).to_numpy(zero_copy_only=False)
                    for j, sd in enumerate(sides):
                        mask = side_col == j
                        if mask.any():
                            sd.absorb(rows.filter(pa.array(mask)))
                return True

            ex, box, sources = _build(plan, specs, [
                (lambda sd=sd: sd.feed(pump)) for sd in sides])
            ex.open()
            for sd, src in zip(sides, sources):
                assert isinstance(src.generator, _CarriedLogic)
                sd.gen = src.generator
            em = _Emitter(phys, out_schema, shard)
            yield from _drain(ex, box, em, out_time, shard)
            late = sum(s.late for s in sides) + sum(
                n.op.metrics.late_total for n in ex.nodes)
            yield em.stats(sum(s.tuples_in for s in sides), late, shard)

    return task


def _drain(ex: Executor, box: _Outbox, em: _Emitter, out_time: str | None,
           pid: int) -> Iterator[pa.RecordBatch]:
    """Run ``ex`` to its end, turning what reaches ``box`` into physical rows of producer
    ``pid``: non-empty batches as data rows; with an output time, its punctuations and a
    final ``P(+inf)`` as punctuation rows (without one, punctuations are not forwarded)."""
    for _ in ex.steps():
        items, box.items = box.items, []
        for el in items:
            if isinstance(el, pa.RecordBatch):
                if el.num_rows:
                    yield em.data(el, pid)
            elif out_time is not None:
                yield em.punct(el.value, pid)
    if out_time is not None:
        yield em.punct(INT64_MAX, pid)


def _source_task(schema: pa.Schema, time: str, unit: str, punctuation: GeneratorConfig,
                 late: LatePolicy | str, batch_size: int, phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        phys = arrowio.spark_to_arrow(phys_out)
        src = Source(lambda: iter(()), time=time, unit=unit, punctuation=punctuation, late=late,
                     schema=schema, name=f"input{pid}")
        src.open()
        em = _Emitter(phys, schema, pid)
        for b in arrowio.rechunk(it, batch_size):
            for el in src.on_batch(arrowio.conform(b, schema)):
                if isinstance(el, pa.RecordBatch):
                    if el.num_rows:
                        yield em.data(el, pid)
                elif isinstance(el, Punctuation):
                    yield em.punct(el.value, pid)
        yield em.punct(INT64_MAX, pid)
        yield em.stats(src.metrics.tuples_in, src.metrics.late_total, pid)

    return task


@dataclass(frozen=True)
class _SourceParams:
    """How a source shard reads its partition (kept so a first query can fuse with it)."""

    df: Any
    schema: pa.Schema
    time: str
    unit: str
    punctuation: GeneratorConfig
    late: Any
    batch_size: int


def fused_rows(feed: Iterator[pa.RecordBatch], pid: int, schema: pa.Schema, time: str, unit: str,
               punctuation: GeneratorConfig, late: Any, plan: Callable[..., Stream] | None,
               out_schema: pa.Schema, out_time: str | None,
               phys: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Source shard ``pid`` over ``feed`` and ``plan`` (None: the bare source), as physical rows.

    Runs inside a Spark task; yields the plan's batches and punctuations as
    data / punctuation rows of producer ``pid``, then ``P(+inf)`` and one
    stats row (tuples in, late).
    """
    src = Source(lambda: feed, time=time, unit=unit, punctuation=punctuation, late=late,
                 schema=schema, name=f"input{pid}")
    out = plan(Stream(Node(src))) if plan is not None else Stream(Node(src))
    box = _Outbox()
    ex = Executor([Node(box, [out.node])])
    em = _Emitter(phys, out_schema, pid)
    yield from _drain(ex, box, em, out_time, pid)
    yield em.stats(src.metrics.tuples_in, sum(n.op.metrics.late_total for n in ex.nodes), pid)


def _fused_task(sp: _SourceParams, plan: Callable[..., Stream], out_schema: pa.Schema,
                out_time: str | None, phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Source shard and its first query in ONE task: the raw rows cross into Python once."""

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        phys = arrowio.spark_to_arrow(phys_out)
        feed = (arrowio.conform(b, sp.schema) for b in arrowio.rechunk(it, sp.batch_size))
        yield from fused_rows(feed, pid, sp.schema, sp.time, sp.unit, sp.punctuation, sp.late,
                              plan, out_schema, out_time, phys)

    return task


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
    Spark (:func:`_ideal_per_shard`); :meth:`build` runs inside the shard's
    task and picks the row of that task's partition. Under it no tuple is late.
    """

    after: dict[int, tuple[int, ...]]

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        return _IdealLogic(np.array(self.after.get(pid, ()), dtype=np.int64))


def _ideal_per_shard(df: "DataFrame", time: str, is_ts: bool,
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
            df, punct = _ideal_per_shard(df, time, is_ts, batch_size)
    if is_ts:
        unit = "us"
    producers = df.rdd.getNumPartitions()
    phys_out = _phys_spark_schema(user)
    phys = df.mapInArrow(_source_task(user, time, unit, punct, late, batch_size, phys_out),
                         phys_out)
    sp = _SourceParams(df, user, time, unit, punct, late, batch_size)
    return ShardedStream(phys, user, time, unit, producers=producers, shards=producers,
                         name=name, aligned=True, source=sp)
