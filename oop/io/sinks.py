"""Sinks: where result batches go as they leave a plan (the :class:`oop.io.protocol.Sink` contract).

:func:`open_sink` picks one from a target string:

* a file by its extension -- ``.parquet`` (row groups appended as rows come,
  small batches buffered up to ~64k rows), ``.csv`` (nested columns as JSON
  text), ``.ndjson`` / ``.jsonl`` (one JSON object per row), ``.arrow`` (Arrow
  IPC file); ``fmt`` overrides the extension;
* a folder (a target ending in ``/`` or an existing folder) -- rolling part
  files ``part-00000.parquet``, ``part-00001.parquet``, ... committed by
  renaming (see :mod:`oop.io.parts`);
* ``-`` -- standard output: CSV, or ``fmt`` ``ndjson`` / ``arrow`` (an IPC
  stream); flushed after every batch, so a reader downstream sees each
  window as soon as it is written.

Checks come before any work: a file target's folder must exist, a folder
target's parent must exist (the folder itself is created). Memory: a sink
holds at most the Parquet row-group buffer; every other format writes each
batch at once. Any OSError while writing, flushing or closing (ENOSPC full
disk, EPIPE closed pipe, EIO) becomes a one-line :class:`oop.errors.SinkError`
naming the target and the cause; it is never swallowed.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import pyarrow as pa

from oop.errors import CheckpointError, ConfigError, SinkError
from oop.io.filewrite import (DEFAULT_MAX_ROWS_PER_PART, Opener, discard, fsync, io_errors,
                              native_open)
from oop.io.writers import (
    DEFAULT_ROW_GROUP_ROWS,
    EXTENSIONS,
    FORMATS,
    STREAM_FORMATS,
    FormatWriter,
    make_writer,
)
from oop.io.protocol import Offset, Sink

__all__ = ["open_sink", "FileSink", "StdoutSink", "CallbackSink", "Opener", "io_errors",
           "DEFAULT_MAX_ROWS_PER_PART"]


class FileSink:
    """One output file written as batches come (see module doc); commit flushes and fsyncs.

    The file is created at the first write (or at close, for a run without
    rows), not at :meth:`open`, so restoring a checkpoint can refuse before
    an earlier run's file is truncated. ``opener`` (default :func:`~oop.io.filewrite.native_open`)
    opens it; tests inject one whose writes fail. The file is written in
    place: an aborted run leaves what was written (a Parquet or Arrow file
    without its footer is unreadable).
    """

    def __init__(self, path: str | Path, fmt: str, *, name: str = "out",
                 opener: Opener | None = None,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        self.path = str(path)
        self.format = fmt
        self.name = name
        self.opener: Opener = opener or native_open
        self.row_group_rows = row_group_rows
        self.rows = 0
        self.schema: pa.Schema | None = None
        self._f: IO[bytes] | None = None
        self._w: FormatWriter | None = None
        self.closed = False

    def _guard(self, action: str = "writing to") -> contextlib.AbstractContextManager[None]:
        return io_errors(self.name, self.path, action)

    def open(self, schema: pa.Schema) -> None:
        self.schema = schema

    def _ensure(self) -> FormatWriter:
        if self._w is None:
            assert self.schema is not None, "open() the sink first"
            with self._guard("opening"):
                self._f = self.opener(self.path, "wb")
            with self._guard():
                self._w = make_writer(self.format, self._f, self.schema,
                                      row_group_rows=self.row_group_rows)
        return self._w

    def write(self, batch: pa.RecordBatch) -> None:
        w = self._ensure()
        with self._guard():
            w.write(batch)
        self.rows += batch.num_rows

    def commit(self) -> Offset:
        """Flush buffered rows to the file and fsync it; returns ``{"rows": n}``."""
        if self._w is not None and not self.closed:
            with self._guard():
                self._w.flush()
                assert self._f is not None
                self._f.flush()
                fsync(self._f)
        return {"rows": self.rows}

    def resume(self, commit_point: Offset) -> None:
        """Continue a checkpointed run: possible only when the checkpoint had written no row.

        One file cannot be cut back to a commit point (a Parquet or Arrow file
        has a footer), so a run that had written rows cannot resume into it:
        CheckpointError, before the file is touched.
        """
        if commit_point and commit_point.get("rows"):
            raise CheckpointError(
                f"sink {self.name!r}: cannot resume a checkpoint into one file ({self.path}) "
                f"that already holds {commit_point['rows']} rows; write to a folder of parts "
                "(a path ending in /), which resumes exactly once")

    def close(self) -> None:
        if self.closed:
            return
        w = self._ensure()
        with self._guard():
            w.close()
            assert self._f is not None
            self._f.flush()
            fsync(self._f)
        self.closed = True
        with self._guard("closing"):
            self._f.close()

    def abort(self) -> None:
        """Close without finishing the encoding; errors are ignored (a failure is being raised)."""
        self.closed = True
        discard(self._w, self._f)


class StdoutSink:
    """Batches to standard output as CSV, NDJSON or an Arrow IPC stream, flushed per batch.

    After the reader closes the pipe (EPIPE) the write raises SinkError and
    standard output is pointed at /dev/null, so the interpreter's final flush
    does not print a second error (what the Python docs on SIGPIPE advise).
    """

    def __init__(self, fmt: str = "csv", *, name: str = "out",
                 stream: IO[bytes] | None = None) -> None:
        if fmt not in STREAM_FORMATS:
            raise ConfigError(f"sink {name!r}: standard output cannot carry {fmt!r}; choose "
                              f"one of {', '.join(STREAM_FORMATS)} (or write to a file)")
        self.format = fmt
        self.name = name
        self.path = "standard output"
        self._stream = stream
        self._f: IO[bytes] | None = None
        self._w: FormatWriter | None = None
        self.rows = 0
        self.closed = False

    @contextlib.contextmanager
    def _guard(self, action: str = "writing to") -> Iterator[None]:
        try:
            with io_errors(self.name, self.path, action):
                yield
        except SinkError as e:
            if isinstance(e.__cause__, OSError) and self._stream is None:
                self._silence_stdout()
            raise

    @staticmethod
    def _silence_stdout() -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)

    def _stdout(self) -> IO[bytes]:
        buf = getattr(sys.stdout, "buffer", None)
        if buf is not None:
            return buf  # type: ignore[no-any-return]
        if self.format == "arrow":  # a notebook's text-only stdout
            raise ConfigError(f"sink {self.name!r}: standard output takes text only here; "
                              "write the Arrow stream to a file, or choose csv or ndjson")
        return _TextOut(sys.stdout)  # type: ignore[return-value]

    def open(self, schema: pa.Schema) -> None:
        with self._guard():
            if self._stream is None:
                sys.stdout.flush()  # text printed before must come first
            self._f = self._stream if self._stream is not None else self._stdout()
            self._w = make_writer(self.format, self._f, schema, stream=True)
            self._f.flush()

    def write(self, batch: pa.RecordBatch) -> None:
        assert self._w is not None and self._f is not None, "open() the sink first"
        with self._guard():
            self._w.write(batch)
            self._f.flush()
        self.rows += batch.num_rows

    def commit(self) -> Offset:
        if self._f is not None and not self.closed:
            with self._guard():
                self._f.flush()
        return {"rows": self.rows}

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._w is not None and self._f is not None:
            with self._guard():
                self._w.close()
                self._f.flush()

    def abort(self) -> None:
        self.closed = True


class _TextOut:
    """Bytes onto a text stream without a ``.buffer`` (notebooks): UTF-8 decoded."""

    def __init__(self, text: Any) -> None:
        self.text = text
        self.closed = False

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.text.write(bytes(b).decode("utf-8"))
        return len(b)

    def flush(self) -> None:
        self.text.flush()


class CallbackSink:
    """Adapts ``fn(batch)`` to the Sink contract: each batch is handed over as it leaves."""

    def __init__(self, fn: Callable[[pa.RecordBatch], None], name: str = "callback") -> None:
        self.fn = fn
        self.name = name
        self.rows = 0

    def open(self, schema: pa.Schema) -> None:
        pass

    def write(self, batch: pa.RecordBatch) -> None:
        self.fn(batch)
        self.rows += batch.num_rows

    def commit(self) -> Offset:
        return {"rows": self.rows}

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _format_of(target: str, fmt: str | None, name: str) -> str:
    if fmt is not None:
        f = fmt.lower().lstrip(".")
        f = EXTENSIONS.get("." + f, f)  # "jsonl" -> "ndjson"
        if f not in FORMATS:
            raise ConfigError(f"sink {name!r}: unknown format {fmt!r}; choose one of "
                              f"{', '.join(FORMATS)}")
        return f
    ext = Path(target).suffix.lower()
    if ext not in EXTENSIONS:
        raise ConfigError(
            f"sink {name!r}: cannot tell the format of {target!r} from its extension "
            f"{ext or '(none)'!r}; use one of {', '.join(EXTENSIONS)}, end the path with / for "
            f"a folder of part files, or give the format ({', '.join(FORMATS)})")
    return EXTENSIONS[ext]


def _missing_folder(folder: Path, target: str, name: str) -> SinkError:
    return SinkError(f"no folder {folder} for --{name} {target}; create it first")


def open_sink(target: str | Path, fmt: str | None = None, name: str = "out", *,
              opener: Opener | None = None,
              max_rows_per_part: int = DEFAULT_MAX_ROWS_PER_PART,
              row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> Sink:
    """The sink for ``target`` (a file, a folder or ``-``); see the module doc.

    ``name`` names the sink in errors (``--out`` by default). Raises
    :class:`ConfigError` for an unknown format and :class:`SinkError` when the
    folder to write into does not exist -- before any data flows. O(1) I/O
    (one stat, one mkdir for a folder target).
    """
    t = str(target)
    if t == "-":
        return StdoutSink((fmt or "csv").lower(), name=name)
    p = Path(t)
    if t.endswith(("/", os.sep)) or p.is_dir():
        from oop.io.parts import PartsSink

        f = _format_of(t, fmt or "parquet", name)
        if not p.parent.is_dir():
            raise _missing_folder(p.parent, t, name)
        with io_errors(name, t, "creating the folder"):
            p.mkdir(exist_ok=True)
        return PartsSink(p, f, name=name, opener=opener, max_rows_per_part=max_rows_per_part,
                         row_group_rows=row_group_rows)
    f = _format_of(t, fmt, name)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise _missing_folder(parent, t, name)
    return FileSink(p, f, name=name, opener=opener, row_group_rows=row_group_rows)
