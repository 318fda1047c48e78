"""Running a plan whose output leaves as it is produced (``Stream.sink``, ``Stream.iter_batches``).

The plan ends in a :class:`~oop.plan.writer.SinkWriter` (every batch written
at once) or a :class:`~oop.plan.writer.Drain` (batches handed to the caller
after each executor round); late rows can go to a per-run late target
(``Operator.late_sink``) instead of ``side_outputs["late"]``. Nothing here
holds more than one round's output.
"""

from __future__ import annotations

import time as _time
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import pyarrow as pa

from oop.io.protocol import Sink
from oop.plan.executor import Executor
from oop.plan.result import Result
from oop.plan.writer import Drain, LateWriter, SinkWriter

__all__ = ["Target", "as_sink", "late_writer", "run_writing", "run_checkpointed", "iterate",
           "late_tables", "check_restartable"]

Target = Union[Sink, Callable[[pa.RecordBatch], None], str, Path]


def as_sink(target: Target, fmt: str | None = None, name: str = "out") -> Sink:
    """``target`` as a Sink: a Sink as is, a str/Path through ``open_sink``, a callable wrapped."""
    from oop.io.sinks import CallbackSink, open_sink

    if isinstance(target, (str, Path)):
        return open_sink(target, fmt, name)
    if isinstance(target, Sink):
        return target
    if callable(target):
        return CallbackSink(target, name=name)
    raise TypeError("a sink target is a path, '-', a Sink or a callable taking a RecordBatch; "
                    f"got {type(target).__name__}")


def late_writer(late: Target | None) -> LateWriter | None:
    """The late target of a run (None: late rows stay in ``side_outputs``)."""
    return None if late is None else LateWriter(as_sink(late, None, "late-out"))


def late_tables(ex: Executor) -> dict[str, pa.Table]:
    """The side-output late rows each operator kept in memory, by operator name; an
    operator whose inputs' late rows differ in schema (a join of two unlike streams) keeps
    one table per input, named ``operator.input``. O(late batches)."""
    out: dict[str, pa.Table] = {}
    for n in ex.nodes:
        batches = n.op.side_outputs.get("late")
        if not batches:
            continue
        by_schema: dict[pa.Schema, list[pa.RecordBatch]] = {}
        for b in batches:
            by_schema.setdefault(b.schema, []).append(b)
        if len(by_schema) == 1:
            out[n.op.name] = pa.Table.from_batches(batches)
            continue
        for schema, group in by_schema.items():
            out[f"{n.op.name}.{_input_of(n.op, schema)}"] = pa.Table.from_batches(group)
    return out


def _input_of(op: Any, schema: pa.Schema) -> str:
    """The name of ``op``'s first input whose schema is ``schema`` (its columns as a last
    resort: late rows were projected or cast on the way). O(inputs)."""
    for info in getattr(op, "inputs", ()):
        if info.schema.equals(schema):
            return str(info.name)
    return ",".join(schema.names)


def _set_late(ex: Executor, late: LateWriter | None) -> None:
    if late is not None:
        for n in ex.nodes:
            n.op.late_sink = late


def _first_schema(ex: Executor) -> pa.Schema | None:
    """The first source's schema: what an empty late file is written with."""
    out = ex.sources[0].op.output if ex.sources else None
    return out.schema if out is not None else None


def run_writing(ex: Executor, writer: SinkWriter, late: LateWriter | None = None,
                on_round: Callable[[int], None] | None = None) -> Result:
    """Run ``ex`` (ending in ``writer``) to the end; commit and close the sinks, or abort them.

    The Result has an empty table and no punctuations (nothing was collected).
    """
    _set_late(ex, late)
    t0 = _time.perf_counter()
    try:
        ex.run(on_round=on_round)
        writer.close()
        if late is not None:
            late.close(_first_schema(ex))
    except BaseException:
        writer.abort()
        if late is not None:
            late.abort()
        raise
    assert writer.output is not None
    return Result(
        table=writer.output.schema.empty_table(),
        punctuations=[],
        metrics={n.op.name: n.op.metrics for n in ex.nodes},
        late=late_tables(ex),
        wall_s=_time.perf_counter() - t0,
        sources=tuple(s.op.name for s in ex.sources),
    )


def check_restartable(ex: Executor, writer: SinkWriter, late: LateWriter | None) -> None:
    """Refuse, in one line, a checkpointed run that could not restart exactly once.

    Every source must be re-readable from an offset (files, folders, tables,
    Redis -- not standard input, sockets or one-shot iterators) and every target
    a folder of parts (or a Sink with ``resume`` that is not a single file).
    """
    from oop.errors import ConfigError
    from oop.io.sinks import FileSink
    from oop.plan.background import BackgroundSink

    for s in ex.sources:
        conn = s.op.connector
        if not s.op.resumable or (conn is not None and not getattr(conn, "resumable", False)):
            raise ConfigError(f"source {s.op.name!r} cannot be re-read after a crash (standard "
                              "input, a socket or a one-shot iterator); checkpoint_dir needs "
                              "files, folders, tables or a Redis stream")
    for what, sink in (("target", writer.sink), ("late target", late.sink if late else None)):
        if sink is None:
            continue
        if isinstance(sink, BackgroundSink):
            sink = sink.inner  # written on threads: what restarts is the sink it writes to
        if isinstance(sink, FileSink) or not hasattr(sink, "resume"):
            raise ConfigError(
                f"with checkpoint_dir, the {what} must be a folder of parts (a path ending in "
                "/): parts are committed with each checkpoint, so a restart neither repeats "
                f"nor loses rows; {getattr(sink, 'name', sink)!r} cannot be cut back")


def run_checkpointed(ex: Executor, writer: SinkWriter, late: LateWriter | None,
                     options: Any) -> Result:
    """Run ``ex`` under a :class:`~oop.plan.job.Job` with durable checkpoints (``options``).

    Resumes from the newest checkpoint in ``options.checkpoint_dir`` (a finished
    run's final checkpoint makes a rerun a no-op). SIGINT / SIGTERM checkpoint and
    raise :class:`oop.errors.Interrupted`. The Result carries the job outcome.
    """
    from oop.errors import Interrupted
    from oop.plan.job import Job

    check_restartable(ex, writer, late)
    job = Job(ex, writer, late, options)
    t0 = _time.perf_counter()
    job.open()
    outcome = job.run()
    if outcome.stopped_by in ("SIGINT", "SIGTERM"):
        raise Interrupted(f"stopped by {outcome.stopped_by} after a checkpoint in "
                          f"{options.checkpoint_dir}", outcome.code, outcome.stopped_by)
    schema = writer.output.schema if writer.output is not None else pa.schema([])
    return Result(
        table=schema.empty_table(),
        punctuations=[],
        metrics={n.op.name: n.op.metrics for n in ex.nodes},
        late=late_tables(ex),
        wall_s=_time.perf_counter() - t0,
        sources=tuple(s.op.name for s in ex.sources),
        outcome=outcome,
    )


def iterate(ex: Executor, drain: Drain, late: LateWriter | None = None
            ) -> Iterator[pa.RecordBatch]:
    """Drive ``ex`` round by round, yielding the batches ``drain`` got in each round.

    Closing the generator early stops the run and commits the late target;
    an error aborts it.
    """
    _set_late(ex, late)
    try:
        for _ in ex.steps():
            yield from drain.take()
        yield from drain.take()
    except GeneratorExit:  # the caller stopped early: keep the late rows written so far
        if late is not None:
            late.close(_first_schema(ex))
        raise
    except BaseException:
        if late is not None:
            late.abort()
        raise
    if late is not None:
        late.close(_first_schema(ex))
