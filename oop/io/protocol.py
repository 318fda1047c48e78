"""Contracts of source connectors and sinks (DESIGN §5.1).

A **connector** reads one feed -- a file, a folder, standard input, a socket, a
Redis stream -- in batches, never whole:

* :meth:`SourceConnector.open` returns the feed's Arrow schema (or None when it
  cannot be known before the first batch arrives, e.g. an empty live feed);
* :meth:`SourceConnector.poll` returns the next batch, :data:`IDLE` when a live
  feed has nothing right now (after waiting at most ``timeout`` seconds), or
  :data:`END` when the feed has ended (a file read to its end; a live feed that
  was asked to stop);
* :meth:`SourceConnector.offset` is a JSON-serialisable position just after the
  last batch returned (file and row; a broker's entry id; None for feeds that
  cannot be re-read, such as standard input and sockets);
* :meth:`SourceConnector.seek` continues from such an offset (crash recovery);
* :meth:`SourceConnector.close` releases files, sockets and connections.

A **sink** writes the batches that leave a plan as they leave it:

* :meth:`Sink.open` is given the output schema before the first batch;
* :meth:`Sink.write` takes one batch (and must not keep it);
* :meth:`Sink.commit` makes everything written so far durable and visible
  (for part-file sinks: pending parts are renamed into place) and returns a
  JSON-serialisable commit point that a checkpoint records;
* :meth:`Sink.close` commits and closes; :meth:`Sink.abort` closes without
  committing (pending work is discarded).
* optional: ``publish()`` -- a commit that waits for nothing, for periodic
  visibility outside checkpoints (a part folder renames the parts already
  durable: :meth:`oop.io.parts.PartsSink.publish`); a sink without it commits.

A failing write raises :class:`oop.errors.SinkError` naming the destination and
the cause (full disk, closed pipe); it is never swallowed.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

__all__ = ["SourceConnector", "Sink", "IDLE", "END", "Offset", "Poll"]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


IDLE = _Marker("IDLE")  # a live feed has nothing right now
END = _Marker("END")  # the feed has ended

Offset = Any  # JSON-serialisable: dict / list / str / int / None
Poll = pa.RecordBatch | _Marker


@runtime_checkable
class SourceConnector(Protocol):
    """A feed read in batches with offsets (see module doc)."""

    name: str
    live: bool  # may return IDLE (waits for data) rather than END at its current end
    resumable: bool  # offset()/seek() can re-read the feed after a crash

    def open(self) -> pa.Schema | None: ...

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll: ...

    def offset(self) -> Offset: ...

    def seek(self, offset: Offset) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """Where result batches go as they leave the plan (see module doc)."""

    name: str

    def open(self, schema: pa.Schema) -> None: ...

    def write(self, batch: pa.RecordBatch) -> None: ...

    def commit(self) -> Offset: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...
