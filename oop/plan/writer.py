"""Plan-terminal operators that hold nothing: write each batch out, or hand it to the caller.

* :class:`SinkWriter` opens a :class:`oop.io.protocol.Sink` with its input's
  schema, writes every batch the moment it arrives and closes (commits) the
  sink when its input ends (under a checkpointing job, after the job's final
  checkpoint instead: :attr:`SinkWriter.close_at_end`). It reports no state;
  its snapshot prepares the sink's commit (a part folder finishes and fsyncs
  its parts; other sinks commit at once) and records the commit point; the job
  commits after the checkpoint is written, so no output is visible before a
  checkpoint covers it (:meth:`SinkWriter.restore` hands the point to sinks
  that can resume).
* :class:`Drain` keeps the batches of one executor round until the caller
  :meth:`Drain.take`\\ s them (``Stream.iter_batches``).
* :class:`LateWriter` is the per-run late target set on operators as
  ``Operator.late_sink``: late rows go to a sink as they are routed instead of
  piling up in ``side_outputs["late"]``.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from oop.errors import SchemaMismatchError
from oop.io.protocol import Offset, Sink
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import Element

__all__ = ["SinkWriter", "Drain", "LateWriter"]


class SinkWriter(Operator):
    """Writes its single input to ``sink`` batch by batch; O(1) memory of its own.

    ``commit_rows``: also commit the sink at the first punctuation after that
    many rows were written since the last commit (part folders then show
    their parts while the run goes on, :meth:`publish`); None commits only at
    checkpoints (:meth:`snapshot`) and at the end.
    """

    n_inputs = 1

    def __init__(self, sink: Sink, name: str = "sink", commit_rows: int | None = None) -> None:
        super().__init__(name)
        self.sink = sink
        self.commit_rows = commit_rows
        self.rows = 0
        self.uncommitted = 0
        self.commits = 0
        self.closed = False
        #: the end of the input commits and closes the sink (:meth:`flush`); a checkpointing
        #: job sets it False and closes the sink after its final checkpoint, so that no part
        #: becomes visible before a checkpoint covers it
        self.close_at_end = True
        self.ended = False  # its input ended (flush)

    def open(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = super().open(inputs)
        self.sink.open(info.schema)
        return info

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.sink.write(batch)
        self.rows += batch.num_rows
        self.uncommitted += batch.num_rows
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if self.commit_rows is not None and self.uncommitted >= self.commit_rows:
            self.publish()
        return []

    def publish(self) -> None:
        """The periodic commit of ``commit_rows``: the sink's ``publish`` (a commit that
        waits for nothing, :mod:`oop.io.protocol`) where it has one, else :meth:`commit`."""
        publish = getattr(self.sink, "publish", None)
        if publish is None:
            self.commit()
            return
        publish()
        self.uncommitted = 0
        self.commits += 1

    def commit(self) -> Offset:
        """Commit the sink now; returns its commit point."""
        point = self.sink.commit()
        self.uncommitted = 0
        self.commits += 1
        return point

    def flush(self) -> list[Element]:
        self.ended = True
        if self.close_at_end:
            self.close()
        return []

    def seal(self) -> None:
        """Before a final checkpoint: a part folder starts the empty part :meth:`close` would
        give it (other sinks: nothing), so the checkpoint covers it."""
        seal = getattr(self.sink, "seal", None)
        if seal is not None and not self.closed:
            seal()

    def close(self) -> None:
        """Commit and close the sink (once; after a failing close, :meth:`abort` still aborts)."""
        if not self.closed:
            self.sink.close()
            self.closed = True

    def abort(self) -> None:
        """Close the sink without committing (the run failed)."""
        if not self.closed:
            self.closed = True
            self.sink.abort()

    def prepare(self) -> Offset:
        """First phase of a commit (a sink without ``prepare`` commits now); the point."""
        prepare = getattr(self.sink, "prepare", None)
        return prepare() if prepare is not None else self.commit()

    def snapshot(self) -> Any:
        """Prepares the sink's commit: the checkpoint records what is durably written
        (call :meth:`commit` once the checkpoint is durable)."""
        return {**super().snapshot(), "rows": self.rows, "commit": self.prepare()}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.rows = state["rows"]
        resume = getattr(self.sink, "resume", None)
        if resume is not None:
            resume(state["commit"])


class Drain(Operator):
    """Keeps output batches only until :meth:`take`; punctuations are counted, not kept."""

    n_inputs = 1

    def __init__(self, name: str = "sink") -> None:
        super().__init__(name)
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.punctuations = 0

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.batches.append(batch)
        self.rows += batch.num_rows
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        self.punctuations += 1
        return []

    def take(self) -> list[pa.RecordBatch]:
        """The batches that arrived since the last take (and forget them); O(1)."""
        out, self.batches = self.batches, []
        return out

    def snapshot(self) -> Any:
        return {**super().snapshot(), "batches": list(self.batches), "rows": self.rows}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.batches = list(state["batches"])
        self.rows = state["rows"]


class LateWriter:
    """``Operator.late_sink`` callable writing late rows to ``sink``, opened at the first batch.

    Every late batch of a run must share one schema (late rows of a plan's
    sources do); ``close(schema)`` opens the sink with ``schema`` when no late
    row came, so a file target still gets an empty, typed file.
    """

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.schema: pa.Schema | None = None
        self.rows = 0
        self.closed = False

    def __call__(self, batch: pa.RecordBatch) -> None:
        if self.schema is None:
            self.schema = batch.schema
            self.sink.open(batch.schema)
        elif not batch.schema.equals(self.schema, check_metadata=False):
            raise SchemaMismatchError(
                f"late sink {self.sink.name!r}: late rows with schema {batch.schema} after late "
                f"rows with schema {self.schema}; one late target takes one schema (route the "
                "late rows of different streams to separate runs or drop them)")
        self.sink.write(batch)
        self.rows += batch.num_rows

    def seal(self, schema: pa.Schema | None = None) -> None:
        """Before a final checkpoint: open the sink with ``schema`` when no late row came and
        let a part folder start its empty part, as :meth:`close` would (the checkpoint then
        covers it)."""
        if self.closed:
            return
        if self.schema is None:
            if schema is None:
                return
            self.schema = schema
            self.sink.open(schema)
        seal = getattr(self.sink, "seal", None)
        if seal is not None:
            seal()

    def close(self, schema: pa.Schema | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        if self.schema is None:
            if schema is None:
                self.sink.abort()
                return
            self.sink.open(schema)
        self.sink.close()

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            if self.schema is not None:
                self.sink.abort()
