"""A folder of rolling part files, committed exactly once by renaming.

:class:`PartsSink` writes ``part-00000.parquet``, ``part-00001.parquet``, ...
(or ``.csv`` / ``.ndjson`` / ``.arrow``) into a folder:

* a part is written under a pending name, ``.part-00000.parquet.pending``;
  names starting with ``.`` are ignored by readers (``pyarrow.parquet.read_table``,
  ``pyarrow.dataset``, ``oop.from_parquet``), so they never see a half-written part;
* a part rolls over at ``max_rows_per_part`` rows and at every :meth:`PartsSink.commit`;
* :meth:`PartsSink.commit` finishes the open part, fsyncs it, renames every
  pending part into place in number order, fsyncs the folder and returns
  ``{"parts": n, "rows": r}``: parts ``0 .. n-1`` are committed, holding ``r``
  rows written by this sink (plus those of the commit point it resumed from);
* :meth:`PartsSink.prepare` is the first phase of a commit for checkpoints:
  it finishes and fsyncs the open part and returns the commit point the
  pending parts *will* have, renaming nothing; the checkpoint records it, and
  :meth:`commit` renames once the checkpoint file is durable. So no part
  becomes visible before a checkpoint covers it, and visible output is never
  taken back;
* :func:`recover` (after a crash, with the commit point a checkpoint recorded)
  renames into place the pending parts numbered below ``n`` (prepared for that
  checkpoint: the crash came between the checkpoint and the renames), deletes
  every other pending part and every part numbered ``n`` or beyond, so a
  restarted run continues numbering right after the committed ones.

A sink opened on a folder that already holds parts continues after the
highest committed number (appends). Memory: one part's Parquet row-group
buffer at most.

Fault injection for tests: ``OOP_FAULT=sink-enospc-after:N`` makes every
write after the first ``N`` rows a process has written to part folders fail
with ``ENOSPC`` (a full disk), as a too-small device would.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path
from typing import IO

import pyarrow as pa

from oop.errors import CheckpointError
from oop.io.writers import DEFAULT_ROW_GROUP_ROWS, SUFFIX, FormatWriter, make_writer
from oop.io.protocol import Offset
from oop.io.filewrite import DEFAULT_MAX_ROWS_PER_PART, Opener, discard, fsync, io_errors

__all__ = ["PartsSink", "recover", "part_name", "committed_parts"]

_PART = re.compile(r"^part-(\d+)\.[A-Za-z0-9]+$")
_PENDING = re.compile(r"^\.part-(\d+)\.[A-Za-z0-9]+\.pending$")


def part_name(n: int, fmt: str) -> str:
    """``part-00007.parquet`` for part 7 of format ``fmt``."""
    return f"part-{n:05d}{SUFFIX[fmt]}"


def committed_parts(folder: str | Path) -> list[tuple[int, Path]]:
    """The committed parts in ``folder`` as (number, path), in number order. O(files)."""
    out = []
    for e in os.scandir(folder):
        m = _PART.match(e.name)
        if m:
            out.append((int(m.group(1)), Path(e.path)))
    return sorted(out)


def recover(folder: str | Path, commit_point: Offset) -> list[Path]:
    """Bring ``folder`` to ``commit_point`` after a crash; returns the deleted files.

    Pending parts numbered below ``commit_point["parts"]`` were prepared and
    fsynced for that checkpoint: they are renamed into place (rolled forward).
    Every other pending part and every committed part numbered at or beyond it
    is deleted. ``None`` (nothing committed yet) deletes them all.
    """
    keep = 0 if commit_point is None else commit_point.get("parts") if isinstance(
        commit_point, dict) else None
    if not isinstance(keep, int) or keep < 0:
        raise CheckpointError(f"recover {folder}: {commit_point!r} is not a part-folder commit "
                              "point (a dict with 'parts' and 'rows')")
    deleted = []
    with io_errors("recover", str(folder), "cleaning"):
        for e in os.scandir(folder):
            m = _PENDING.match(e.name) or _PART.match(e.name)
            if m and e.name.startswith(".") and int(m.group(1)) < keep:
                os.replace(e.path, Path(folder) / e.name[1:-len(".pending")])
            elif m and (e.name.startswith(".") or int(m.group(1)) >= keep):
                os.remove(e.path)
                deleted.append(Path(e.path))
        _fsync_dir(folder)
    return sorted(deleted)


_FAULT_ENOSPC = "sink-enospc-after:"
_written = [0]  # rows written to part folders by this process (for the fault point)


def _fault_enospc(rows: int) -> None:
    """Raise ENOSPC once this process has written more than N rows (``OOP_FAULT``)."""
    spec = os.environ.get("OOP_FAULT", "")
    if not spec.startswith(_FAULT_ENOSPC):
        return
    _written[0] += rows
    if _written[0] > int(spec[len(_FAULT_ENOSPC):]):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _fsync_dir(folder: str | Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # platforms that cannot open folders (Windows): renames are durable enough
    try:
        fsync(_FdFile(fd))
    finally:
        os.close(fd)


class _FdFile:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


class PartsSink:
    """Rolling part files in a folder, committed by rename (see module doc)."""

    def __init__(self, folder: str | Path, fmt: str = "parquet", *, name: str = "out",
                 opener: Opener | None = None,
                 max_rows_per_part: int = DEFAULT_MAX_ROWS_PER_PART,
                 row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> None:
        if max_rows_per_part < 1:
            from oop.errors import ConfigError

            raise ConfigError(f"sink {name!r}: max_rows_per_part must be >= 1, "
                              f"got {max_rows_per_part}")
        self.folder = Path(folder)
        self.format = fmt
        self.name = name
        self.opener: Opener = opener or open  # type: ignore[assignment]
        self.max_rows_per_part = max_rows_per_part
        self.row_group_rows = row_group_rows
        self.schema: pa.Schema | None = None
        self.next_part = 0  # number of the next part to start
        self.committed = 0  # parts 0 .. committed-1 are in place
        self.rows_committed = 0
        self.pending: list[tuple[Path, Path, int]] = []  # finished parts: pending, final, rows
        self._f: IO[bytes] | None = None
        self._w: FormatWriter | None = None
        self._cur: tuple[Path, Path] | None = None
        self._cur_rows = 0
        self.closed = False

    def _guard(self, action: str = "writing to", what: Path | None = None
               ) -> contextlib.AbstractContextManager[None]:
        return io_errors(self.name, str(what or self.folder), action)

    # ---- the contract --------------------------------------------------
    def open(self, schema: pa.Schema) -> None:
        """Remember the schema and find where numbering continues (no file is created yet)."""
        self.schema = schema
        with self._guard("listing"):
            self.folder.mkdir(exist_ok=True)
            parts = committed_parts(self.folder)
        self.next_part = self.committed = parts[-1][0] + 1 if parts else 0

    def resume(self, commit_point: Offset) -> None:
        """Continue after ``commit_point`` (a restored checkpoint): :func:`recover`, number on."""
        recover(self.folder, commit_point)
        self.next_part = self.committed = int(commit_point["parts"]) if commit_point else 0
        self.rows_committed = int(commit_point["rows"]) if commit_point else 0
        self.pending = []

    def write(self, batch: pa.RecordBatch) -> None:
        assert self.schema is not None, "open() the sink first"
        start = 0
        while start < batch.num_rows:
            if self._w is None:
                self._start_part()
            take = min(batch.num_rows - start, self.max_rows_per_part - self._cur_rows)
            piece = batch if take == batch.num_rows else batch.slice(start, take)
            with self._guard(what=self._cur[0] if self._cur else None):
                _fault_enospc(take)
                self._w.write(piece)  # type: ignore[union-attr]
            self._cur_rows += take
            start += take
            if self._cur_rows >= self.max_rows_per_part:
                self._finish_part()

    def prepare(self) -> Offset:
        """Finish (and fsync) the open part; the commit point :meth:`commit` will reach.

        Renames nothing: a checkpoint records this point, then :meth:`commit`
        makes the parts visible; :func:`recover` rolls them forward after a crash
        in between.
        """
        if self._w is not None:
            self._finish_part()
        return {"parts": self.committed + len(self.pending),
                "rows": self.rows_committed + sum(rows for _, _, rows in self.pending)}

    def commit(self) -> Offset:
        """Finish the open part and rename the pending parts into place; O(parts renamed)."""
        if self._w is not None:
            self._finish_part()
        if self.pending:
            with self._guard("committing parts in"):
                for pending, final, rows in self.pending:
                    os.replace(pending, final)
                    self.committed += 1
                    self.rows_committed += rows
                _fsync_dir(self.folder)
            self.pending = []
        return {"parts": self.committed, "rows": self.rows_committed}

    def close(self) -> None:
        """Commit; a folder left without any part gets an empty one holding the schema."""
        if self.closed:
            return
        if self.committed == 0 and not self.pending and self._w is None \
                and self.schema is not None:
            self._start_part()
        self.commit()
        self.closed = True

    def abort(self) -> None:
        """Discard the open and pending parts (errors ignored: a failure is being raised)."""
        self.closed = True
        discard(self._w, self._f)
        victims = [p for p, _, _ in self.pending] + ([self._cur[0]] if self._cur else [])
        for p in victims:
            with contextlib.suppress(OSError):
                os.remove(p)
        self.pending, self._f, self._w, self._cur = [], None, None, None

    # ---- parts -----------------------------------------------------------
    def _start_part(self) -> None:
        assert self.schema is not None
        final = self.folder / part_name(self.next_part, self.format)
        pending = self.folder / f".{final.name}.pending"
        self.next_part += 1
        with self._guard("opening", pending):
            self._f = self.opener(str(pending), "wb")
        self._cur, self._cur_rows = (pending, final), 0
        with self._guard(what=pending):
            self._w = make_writer(self.format, self._f, self.schema,
                                  row_group_rows=self.row_group_rows)

    def _finish_part(self) -> None:
        assert self._w is not None and self._f is not None and self._cur is not None
        pending, final = self._cur
        with self._guard(what=pending):
            self._w.close()
            self._f.flush()
            fsync(self._f)
            self._f.close()
        self.pending.append((pending, final, self._cur_rows))
        self._f, self._w, self._cur, self._cur_rows = None, None, None, 0
