"""Plans shipped to Spark tasks: the functions ``mapInArrow`` runs for a sharded stream.

A query's ``plan`` (a Python callable building an ``oop`` plan) is pickled into the task
functions built here and rebuilt inside every task, once per shard:

* :func:`shard_task` -- the shards of one sorted partition, each input melded
  (:class:`~oop.spark.meld.Side`), the plan run to its end (:func:`drain`);
* :func:`source_task` -- a source shard: one partition's rows through a
  :class:`~oop.plan.source.Source` (punctuation generator, late policy);
* :func:`fused_task` / :func:`fused_rows` -- a source shard and its first query in one task
  (the raw rows cross from the JVM into Python once);
* :func:`probe_plan` -- the plan opened on empty inputs on the driver, for its output schema.

Each task yields physical rows (:mod:`oop.spark.physical`): the plan's batches, its
punctuations, ``P(+inf)`` at the end and one stats row (tuples in, late).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from oop.api import Stream
from oop.errors import ConfigError
from oop.operators.base import Operator
from oop.plan.executor import Executor, Node
from oop.plan.source import Source
from oop.punctuation.base import GeneratorConfig
from oop.spark import arrowio
from oop.spark.meld import Carried, CarriedLogic, Side
from oop.spark.physical import SIDE, Emitter, PartitionReader
from oop.stream.elements import INT64_MAX, Element, Punctuation
from oop.stream.late import LatePolicy

__all__ = ["InputSpec", "ShardRead", "SourceParams", "build_plan", "probe_plan", "shard_task", "source_task",
           "fused_task", "fused_rows", "drain", "Outbox"]


@dataclass(frozen=True)
class InputSpec:
    """What a shard task needs to know about one input: schema, time, producers."""

    schema: pa.Schema
    time: str
    unit: str
    producers: int


class Outbox(Operator):
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


def build_plan(plan: Callable[..., Stream], specs: Sequence[InputSpec],
           feeds: Sequence[Callable[[], Any]]) -> tuple[Executor, Outbox, list[Source]]:
    sources = [Source(f, time=s.time, unit=s.unit, punctuation=Carried(), schema=s.schema,
                      name=f"shard_in{i}") for i, (s, f) in enumerate(zip(specs, feeds))]
    streams = [Stream(Node(src)) for src in sources]
    out = plan(*streams)
    if not isinstance(out, Stream):
        raise ConfigError(f"a sharded plan must return an oop Stream, got {type(out).__name__}")
    box = Outbox()
    ex = Executor([Node(box, [out.node])])
    return ex, box, sources


def probe_plan(plan: Callable[..., Stream], specs: Sequence[InputSpec]) -> tuple[pa.Schema, str | None, str]:
    """Open the plan on empty inputs to learn its output schema and time attribute."""
    ex, box, _ = build_plan(plan, specs, [lambda: iter(()) for _ in specs])
    ex.open()
    info = box.inputs[0]
    unit = info.times.get(info.time, specs[0].unit) if info.time else specs[0].unit
    return info.schema, info.time, unit


def shard_task(plan: Callable[..., Stream], specs: Sequence[InputSpec], out_schema: pa.Schema,
                out_time: str | None, phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    n_sides = len(specs)

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        phys = arrowio.spark_to_arrow(phys_out)
        reader = PartitionReader(it)
        while True:
            shard = reader.peek_shard()
            if shard is None:
                return
            sides = [Side(s.producers, s.schema) for s in specs]

            def pump(_who: Side, shard: int = shard, sides: list[Side] = sides) -> bool:
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

            ex, box, sources = build_plan(plan, specs, [
                (lambda sd=sd: sd.feed(pump)) for sd in sides])
            ex.open()
            for sd, src in zip(sides, sources):
                assert isinstance(src.generator, CarriedLogic)
                sd.gen = src.generator
            em = Emitter(phys, out_schema, shard)
            yield from drain(ex, box, em, out_time, shard)
            late = sum(s.late for s in sides) + sum(
                n.op.metrics.late_total for n in ex.nodes)
            yield em.stats(sum(s.tuples_in for s in sides), late, shard)

    return task


def drain(ex: Executor, box: Outbox, em: Emitter, out_time: str | None,
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


@dataclass(frozen=True)
class ShardRead:
    """How a source shard reads its rows: their schema, event time (column and unit),
    punctuation generator, late policy and batch size."""

    schema: pa.Schema
    time: str
    unit: str
    punctuation: GeneratorConfig
    late: LatePolicy | str
    batch_size: int

    def source(self, feed: Callable[[], Iterator[Any]], pid: int) -> Source:
        """The source operator of shard ``pid`` over ``feed``."""
        return Source(feed, time=self.time, unit=self.unit, punctuation=self.punctuation,
                      late=self.late, schema=self.schema, name=f"input{pid}")


def source_task(read: ShardRead,
                phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        phys = arrowio.spark_to_arrow(phys_out)
        src = read.source(lambda: iter(()), pid)
        src.open()
        em = Emitter(phys, read.schema, pid)
        for b in arrowio.rechunk(it, read.batch_size):
            for el in src.on_batch(arrowio.conform(b, read.schema)):
                if isinstance(el, pa.RecordBatch):
                    if el.num_rows:
                        yield em.data(el, pid)
                elif isinstance(el, Punctuation):
                    yield em.punct(el.value, pid)
        yield em.punct(INT64_MAX, pid)
        yield em.stats(src.metrics.tuples_in, src.metrics.late_total, pid)

    return task


@dataclass(frozen=True)
class SourceParams:
    """A DataFrame source shard no query has run on yet (a first query fuses with it)."""

    df: Any
    read: ShardRead


def fused_rows(feed: Iterator[pa.RecordBatch], pid: int, read: ShardRead,
               plan: Callable[..., Stream] | None, out_schema: pa.Schema, out_time: str | None,
               phys: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Source shard ``pid`` over ``feed`` and ``plan`` (None: the bare source), as physical rows.

    Runs inside a Spark task; yields the plan's batches and punctuations as
    data / punctuation rows of producer ``pid``, then ``P(+inf)`` and one
    stats row (tuples in, late).
    """
    src = read.source(lambda: feed, pid)
    out = plan(Stream(Node(src))) if plan is not None else Stream(Node(src))
    box = Outbox()
    ex = Executor([Node(box, [out.node])])
    em = Emitter(phys, out_schema, pid)
    yield from drain(ex, box, em, out_time, pid)
    yield em.stats(src.metrics.tuples_in, sum(n.op.metrics.late_total for n in ex.nodes), pid)


def fused_task(sp: SourceParams, plan: Callable[..., Stream], out_schema: pa.Schema,
                out_time: str | None, phys_out: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Source shard and its first query in ONE task: the raw rows cross into Python once."""

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        phys = arrowio.spark_to_arrow(phys_out)
        read = sp.read
        feed = (arrowio.conform(b, read.schema) for b in arrowio.rechunk(it, read.batch_size))
        yield from fused_rows(feed, pid, read, plan, out_schema, out_time, phys)

    return task
