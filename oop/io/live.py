"""Live feeds read incrementally: a binary stream (standard input, a pipe) or a TCP socket.

:class:`StreamSource` reads CSV or NDJSON lines, or an Arrow IPC stream, from
a binary file object. A background thread reads whatever bytes are available
(``read1``) -- or, for Arrow, whole record batches -- into a bounded queue, so
:meth:`StreamSource.poll` returns the first rows as soon as they arrive and
:data:`IDLE` after ``timeout`` seconds without data; the queue's bound makes a
fast writer wait. Lines are parsed with pyarrow chunk by chunk
(:class:`oop.io.lines.LineChunks`); the first chunk fixes the schema unless
``schema=`` is given.

:class:`SocketSource` connects to ``host:port`` and reads the socket the same
way; END when the peer closes. Neither can be re-read: ``offset()`` is None
(``rows_read`` counts the rows returned). :func:`from_stdin` reads
``sys.stdin.buffer``.

Cost: one reader thread per feed; memory is the queue (at most
``_QUEUE`` pieces of ``_READ`` bytes) plus the rows parsed but not yet returned.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
import time
from typing import IO, Any, Callable, NoReturn

import pyarrow as pa
import pyarrow.ipc as ipc

from oop.errors import ConfigError, SourceError
from oop.io.files import take_rows
from oop.io.lines import LineChunks
from oop.io.protocol import END, IDLE, Offset, Poll

__all__ = ["StreamSource", "SocketSource", "from_stdin", "STREAM_FORMATS"]

STREAM_FORMATS = ("csv", "ndjson", "arrow")
_READ = 1 << 16  # bytes per read
_QUEUE = 64  # pieces queued at most


class _Eof:
    """Queued by the reader thread at the end of the feed."""


class _Wake:
    """Queued by :meth:`StreamSource.stop` to wake a poll waiting for data."""


def _pump(read: Callable[[], Any], q: "queue.Queue[Any]", halt: threading.Event) -> None:
    """Thread body: queue what ``read`` returns until it returns None/b"" or fails."""
    try:
        while not halt.is_set():
            item = read()
            if item is None or (isinstance(item, bytes) and not item):
                break
            _put(q, item, halt)
        _put(q, _Eof(), halt)
    except BaseException as e:  # handed to the polling thread
        _put(q, e, halt)


def _put(q: "queue.Queue[Any]", item: Any, halt: threading.Event) -> None:
    """Queue ``item``, waiting while the queue is full, unless the feed was stopped."""
    while not halt.is_set():
        try:
            q.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


class StreamSource:
    """CSV/NDJSON lines or an Arrow IPC stream from a binary file object (see module doc)."""

    live = True
    resumable = False

    def __init__(self, stream: IO[bytes] | None, format: str = "csv", *,
                 schema: pa.Schema | None = None, name: str = "stream") -> None:
        if format not in STREAM_FORMATS:
            raise ConfigError(f"source {name!r}: format {format!r} is not one of "
                              f"{', '.join(STREAM_FORMATS)}; pass one of them")
        self.stream = stream
        self.format = format
        self.name = name
        self.schema = schema
        self.rows_read = 0
        self._lines = LineChunks(format, schema) if format != "arrow" else None
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=_QUEUE)
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending: list[pa.RecordBatch] = []
        self._eof = False

    # ---- contract ------------------------------------------------------
    def open(self) -> pa.Schema | None:
        """Start reading; the schema if declared (else None: known from the first batch)."""
        self._start()
        return self.schema

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        """Rows as soon as some arrived (at most ``max_rows``); IDLE after ``timeout`` without."""
        if max_rows < 1:
            raise ConfigError(f"source {self.name!r}: max_rows={max_rows} must be at least 1")
        self._start()
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._halt.is_set():
            have = sum(b.num_rows for b in self._pending)
            if have >= max_rows or (have and self._eof):
                return self._give(max_rows)
            if self._eof:
                return END
            if not self._gather(max_rows - have, None if have else deadline):
                if self._halt.is_set():
                    break
                return self._give(max_rows) if have else IDLE
        return END

    def offset(self) -> Offset:
        return None

    def seek(self, offset: Offset) -> None:
        raise SourceError(f"source {self.name!r}: a {self.format} stream cannot be re-read; "
                          "resume it without a checkpointed position")

    def stop(self) -> None:
        """Make the next poll return END (safe from other threads and signal handlers);
        a poll waiting for data returns END at once."""
        self._halt.set()
        try:
            self._queue.put_nowait(_Wake())
        except queue.Full:  # the poller is not waiting then
            pass

    def close(self) -> None:
        self._halt.set()

    # ---- reading -------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=_pump, args=(self._reader(), self._queue,
                                                                self._halt),
                                            name=f"oop-source-{self.name}", daemon=True)
            self._thread.start()

    def _reader(self) -> Callable[[], Any]:
        """The thread's read function: byte pieces, or Arrow batches (None at the end)."""
        stream = self.stream
        assert stream is not None
        if self.format != "arrow":
            read1 = getattr(stream, "read1", None)
            return (lambda: read1(_READ)) if read1 is not None else (lambda: stream.read(_READ))
        box: list[Any] = []

        def next_batch() -> pa.RecordBatch | None:
            if not box:
                box.append(ipc.open_stream(stream))
            try:
                return box[0].read_next_batch()
            except StopIteration:
                return None

        return next_batch

    def _gather(self, rows: int, deadline: float | None) -> bool:
        """Move queued pieces into pending rows: block until one arrives (until ``deadline``;
        None: don't block), then take what is queued up to about ``rows`` rows. False if none."""
        pieces: list[Any] = []
        lines = 0
        while lines < rows:
            try:
                if pieces or deadline is None:
                    item = self._queue.get_nowait()
                else:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(item, _Wake):
                break
            if isinstance(item, BaseException):
                self._fail(item)
            if isinstance(item, _Eof):
                self._eof = True
                break
            pieces.append(item)
            lines += item.count(b"\n") if isinstance(item, bytes) else item.num_rows
        self._parse(pieces)
        return bool(pieces) or self._eof

    def _parse(self, pieces: list[Any]) -> None:
        if self._lines is None:
            self._pending.extend(b for b in pieces if b.num_rows)
            if pieces and self.schema is None:
                self.schema = pieces[0].schema
            return
        try:
            table = self._lines.feed(b"".join(pieces), final=self._eof)
        except (pa.ArrowException, ValueError) as e:
            self._fail(e)
        if table is not None and table.num_rows:
            self.schema = self._lines.schema
            self._pending.extend(table.combine_chunks().to_batches())

    def _give(self, max_rows: int) -> pa.RecordBatch:
        out = take_rows(self._pending, max_rows)
        assert out is not None
        self.rows_read += out.num_rows
        return out

    def _fail(self, e: BaseException) -> NoReturn:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SourceError(f"source {self.name!r}: cannot read {self.format} after row "
                          f"{self.rows_read} ({msg}); fix the feed") from e


class SocketSource(StreamSource):
    """A TCP client reading CSV/NDJSON lines or an Arrow IPC stream from ``host:port``."""

    def __init__(self, host: str, port: int, format: str = "csv", *,
                 schema: pa.Schema | None = None, connect_timeout: float = 5.0,
                 name: str | None = None) -> None:
        super().__init__(None, format, schema=schema, name=name or f"{host}:{port}")
        self.host, self.port = host, int(port)
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None

    def open(self) -> pa.Schema | None:
        """Connect (SourceError if refused or unreachable) and start reading."""
        if self._sock is None:
            try:
                self._sock = socket.create_connection((self.host, self.port),
                                                      timeout=self.connect_timeout)
            except OSError as e:
                raise SourceError(f"source {self.name!r}: cannot connect to "
                                  f"{self.host}:{self.port} ({e.strerror or e}); start the "
                                  "server or fix the host and port") from e
            self._sock.settimeout(None)
            self.stream = self._sock.makefile("rb")
        return super().open()

    def _start(self) -> None:
        if self._sock is None:
            self.open()
        super()._start()

    def close(self) -> None:
        super().close()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # unblocks the reader thread
            except OSError:
                pass
            self._sock.close()


def from_stdin(format: str = "csv", *, schema: pa.Schema | None = None) -> StreamSource:
    """A :class:`StreamSource` over standard input (``sys.stdin.buffer``)."""
    return StreamSource(sys.stdin.buffer, format, schema=schema, name="stdin")
