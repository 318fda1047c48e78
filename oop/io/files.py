"""``FileSource``: a file or a folder of Parquet, CSV, NDJSON or Arrow IPC files, in batches.

A folder's files of the chosen (or recognised) format are read in sorted name
order, recursively; names (and folders) starting with ``.`` or ``_`` are
ignored, so ``_SUCCESS`` markers and hidden files never count; with ``format=``
a folder's files with that format's extensions or an unrecognised one are read
(``.json`` counts as NDJSON). Every batch has
exactly ``max_rows`` rows except the last one of each file. All files must have
the first file's schema (see :func:`oop.io.formats.conformer`); ``columns=``
restricts reading and checking to those columns.

Offsets are ``{"file": relative name, "row": rows consumed in it}`` (plus
``"done"``, the completed files, in follow mode); :meth:`FileSource.seek`
re-opens that file and skips that many rows (Parquet skips row groups by
metadata).

Follow mode (``follow=True``) keeps watching the folder after the files
present at the start: a file is ready once it appears under its final name
(writers write ``.name.tmp`` / ``name.inprogress`` and rename into place). New
files are read in name order, each once, even when its name sorts before a
file already read. :meth:`FileSource.stop` (thread-safe) makes the next poll
return END.

Cost: one open file at a time; memory is one reader chunk plus one batch.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from oop.errors import ConfigError, SchemaMismatchError, SourceError
from oop.io.formats import Batches, Conform, conformer, format_of, open_file
from oop.io.protocol import END, IDLE, Offset, Poll

__all__ = ["FileSource", "take_rows"]

_PARTIAL = (".tmp", ".inprogress", ".crc")
_MIN_CHUNK = 4096


def take_rows(pending: list[pa.RecordBatch], n: int) -> pa.RecordBatch | None:
    """Remove and return up to ``n`` rows from the front of ``pending`` (None if empty)."""
    out: list[pa.RecordBatch] = []
    while pending and n > 0:
        b = pending[0]
        if b.num_rows <= n:
            out.append(pending.pop(0))
            n -= b.num_rows
        else:
            out.append(b.slice(0, n))
            pending[0] = b.slice(n)
            n = 0
    if not out:
        return None
    return out[0] if len(out) == 1 else pa.concat_batches(out)


def _visible(rel: Path) -> bool:
    return not any(part.startswith((".", "_")) for part in rel.parts) and \
        not rel.name.endswith(_PARTIAL)


class FileSource:
    """A file or folder read in batches (see module doc). ``live`` only when following."""

    resumable = True

    def __init__(self, path: str | Path, *, format: str | None = None,
                 columns: Sequence[str] | None = None, follow: bool = False,
                 poll_interval: float = 0.2, name: str | None = None) -> None:
        self.path = Path(path)
        self.format = format
        format_of(self.path, format)  # validates the name early
        self.columns = list(columns) if columns is not None else None
        self.follow = follow
        self.live = follow
        self.poll_interval = poll_interval
        self.name = name or str(path)
        self.schema: pa.Schema | None = None
        self._done: set[str] = set()
        self._file: str | None = None  # relative name of the file read last (or being read)
        self._row = 0  # rows of it consumed
        self._batches: Batches | None = None  # its reader while it is being read
        self._conform: Conform | None = None
        self._pending: list[pa.RecordBatch] = []
        self._stop = threading.Event()
        self._broken: SourceError | None = None  # a file that failed stays failed until seek
        self._files: dict[str, Path] | None = None  # the listing (non-follow: made once)

    # ---- listing -------------------------------------------------------
    def _listing(self) -> dict[str, Path]:
        """Ready files by relative name (posix); listed once unless following."""
        if self._files is None or self.follow:
            self._files = self._list()
        return self._files

    def _list(self) -> dict[str, Path]:
        if self.path.is_file():
            if format_of(self.path, self.format) is None:
                raise ConfigError(f"cannot tell the format of {str(self.path)!r} from its "
                                  "extension; pass format='parquet'|'csv'|'ndjson'|'arrow'")
            return {self.path.name: self.path}
        if not self.path.is_dir():
            if self.follow:
                return {}
            raise SourceError(f"no file or folder at {str(self.path)!r}; check the path")
        found: dict[str, Path] = {}
        for p in self.path.rglob("*"):
            rel = p.relative_to(self.path)
            if _visible(rel) and p.is_file() and self._format_for(p, rel) is not None:
                found[rel.as_posix()] = p
        return found

    def _format_for(self, p: Path, rel: Path) -> str | None:
        fmt = format_of(p, self.format)
        if self.format is not None and self.path.is_dir():
            known = format_of(p, None)
            return fmt if known in (None, self.format) else None
        return fmt

    def _formats_agree(self, files: dict[str, Path]) -> None:
        kinds = {format_of(p, self.format) for p in files.values()}
        if len(kinds) > 1:
            raise ConfigError(
                f"folder {str(self.path)!r} mixes formats {sorted(k for k in kinds if k)}; "
                "pass format=... to read one of them"
            )

    # ---- contract ------------------------------------------------------
    def open(self) -> pa.Schema | None:
        """The first file's schema (restricted to ``columns``); None when following an empty
        folder."""
        files = self._listing()
        self._formats_agree(files)
        if not files:
            if self.follow:
                return None
            raise SourceError(f"{str(self.path)!r} holds no readable files; "
                              "check the path and format=")
        first = min(files)
        self._reference(first, files[first])
        return self.schema

    def _reference(self, rel: str, path: Path) -> None:
        fmt = format_of(path, self.format)
        assert fmt is not None
        schema, batches = self._guard(rel, lambda: open_file(path, fmt, 0, _MIN_CHUNK))
        batches.close()  # type: ignore[attr-defined]
        dups = sorted({n for n in schema.names if schema.names.count(n) > 1})
        if dups:
            raise SchemaMismatchError(
                f"{self._where(rel)}: duplicate column name(s) {dups}; rename them (e.g. in "
                "the CSV header) so that every column can be told apart")
        if self.columns is not None:
            missing = [c for c in self.columns if c not in schema.names]
            if missing:
                raise SchemaMismatchError(
                    f"{self._where(rel)}: has no column(s) {missing}; its columns are "
                    f"{schema.names}"
                )
            schema = pa.schema([schema.field(c) for c in self.columns])
        self.schema = pa.schema([pa.field(f.name, f.type) for f in schema])

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        """Up to ``max_rows`` rows of the current file; IDLE (follow) or END when none is left."""
        if max_rows < 1:
            raise ConfigError(f"source {self.name!r}: max_rows={max_rows} must be at least 1")
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            if self._stop.is_set():
                return END
            if self._batches is not None:
                batch = self._next_rows_once(max_rows)
                if batch is not None:
                    return batch
                self._finish_file()
                continue
            nxt = self._next_file()
            if nxt is not None:
                self._start(nxt[0], nxt[1], 0, max_rows)
                continue
            if not self.follow:
                return END
            left = deadline - time.monotonic()
            if left <= 0:
                return IDLE
            self._stop.wait(min(self.poll_interval, left))

    def offset(self) -> Offset:
        off: dict[str, Any] = {"file": self._file, "row": self._row}
        if self.follow:
            off["done"] = sorted(self._done)
        return off

    def seek(self, offset: Offset) -> None:
        """Continue after ``offset`` (a dict from :meth:`offset`)."""
        if not isinstance(offset, dict) or "file" not in offset or "row" not in offset:
            raise ConfigError(f"source {self.name!r}: offset {offset!r} is not "
                              "{'file': ..., 'row': ...} from FileSource.offset()")
        self._close_file()
        self._broken = None
        rel, row = offset["file"], int(offset["row"])
        files = self._listing()
        if self.follow:
            self._done = set(offset.get("done", []))
        else:
            self._done = {f for f in files if rel is not None and f < rel}
        if rel is None or rel in self._done:
            self._file, self._row = rel, row
            return
        if rel not in files:
            raise SourceError(f"{self._where(rel)}: the offset's file is gone; "
                              "restore it or start without the checkpoint")
        if self.schema is None:
            self.open()
        self._start(rel, files[rel], row, _MIN_CHUNK)

    def stop(self) -> None:
        """Make the next poll return END (safe from other threads and signal handlers)."""
        self._stop.set()

    def close(self) -> None:
        self._close_file()

    # ---- files ---------------------------------------------------------
    def _where(self, rel: str) -> str:
        return f"source {self.name!r}, file {rel!r}"

    def _guard(self, rel: str, fn: Any) -> Any:
        try:
            return fn()
        except (pa.ArrowException, OSError, ValueError) as e:
            if isinstance(e, (SourceError, SchemaMismatchError, ConfigError)):
                raise
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SourceError(f"{self._where(rel)}: unreadable ({msg}); "
                              "fix or remove the file") from e

    def _next_file(self) -> tuple[str, Path] | None:
        files = self._listing()
        todo = sorted(f for f in files if f not in self._done)
        if not todo:
            return None
        if self.schema is None:
            self._formats_agree(files)
            self._reference(todo[0], files[todo[0]])
        return todo[0], files[todo[0]]

    def _start(self, rel: str, path: Path, skip: int, max_rows: int) -> None:
        fmt = format_of(path, self.format)
        assert fmt is not None and self.schema is not None
        chunk = max(max_rows, _MIN_CHUNK)
        schema, batches = self._guard(rel, lambda: open_file(path, fmt, skip, chunk,
                                                             self.schema))
        self._conform = conformer(self.schema, schema, self._where(rel))
        self._file, self._row, self._batches, self._pending = rel, skip, batches, []

    def _next_rows_once(self, max_rows: int) -> pa.RecordBatch | None:
        """:meth:`_next_rows`, but a failed file keeps failing (never read as ended early)."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._next_rows(max_rows)
        except SourceError as e:
            self._broken = e
            raise

    def _next_rows(self, max_rows: int) -> pa.RecordBatch | None:
        """Exactly ``max_rows`` rows of the current file, fewer at its end, None after it."""
        have = sum(b.num_rows for b in self._pending)
        while have < max_rows:
            assert self._batches is not None and self._file is not None
            b = self._guard(self._file, lambda: next(self._batches, None))  # type: ignore[arg-type]
            if b is None:
                break
            if b.num_rows:
                assert self._conform is not None
                self._pending.append(self._conform(b))
                have += b.num_rows
        out = take_rows(self._pending, max_rows)
        if out is not None:
            self._row += out.num_rows
        return out

    def _finish_file(self) -> None:
        """Mark the current file done; the offset keeps naming it (with all its rows)."""
        assert self._file is not None
        self._done.add(self._file)
        self._close_file()

    def _close_file(self) -> None:
        if self._batches is not None:
            self._batches.close()  # type: ignore[attr-defined]
        self._batches, self._pending = None, []
