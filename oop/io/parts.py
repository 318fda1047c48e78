"""A folder of rolling part files, committed exactly once by renaming.

:class:`PartsSink` writes ``part-00000.parquet``, ``part-00001.parquet``, ...
(or ``.csv`` / ``.ndjson`` / ``.arrow``) into a folder:

* a part is written under a pending name, ``.part-00000.parquet.pending``;
  names starting with ``.`` are ignored by readers (``pyarrow.parquet.read_table``,
  ``pyarrow.dataset``, ``oop.from_parquet``), so they never see a half-written part;
* a part rolls over at ``max_rows_per_part`` rows and at every :meth:`PartsSink.commit`
  (and :meth:`PartsSink.publish`);
* :meth:`PartsSink.commit` finishes the open part, fsyncs it, renames every
  pending part into place in number order, fsyncs the folder and returns
  ``{"parts": n, "rows": r}``: parts ``0 .. n-1`` are committed, holding ``r``
  rows written by this sink (plus those of the commit point it resumed from);
* :meth:`PartsSink.publish` is a commit that waits for nothing (the periodic
  ``commit_every`` of the Python API, outside checkpoints): it renames the
  finished parts already durable, in number order, and leaves the others
  pending for the next call;
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

Durability without waiting: a finished part is flushed and its write-back to
disk started (:func:`~oop.io.filewrite.start_writeback`); it is fsynced when
the next part is finished, or by :meth:`prepare` / :meth:`commit`, whichever
comes first -- always before it is recorded or renamed. The disk writes part
``k`` while part ``k + 1`` is encoded (one thread waited 0.33 s in fsync on
the 50M-row sliding benchmark, 44 parts).

:meth:`PartsSink.write_on_threads` (a pipelined run's writing stage,
:class:`oop.plan.background.BackgroundSink`) encodes the parts on ``n``
threads of their own, part ``k`` on lane ``k % n``: each part is still one
encoder writing its rows in order, so the files are the same, but part
``k + 1`` is encoded while part ``k`` is finished and fsynced. Each lane
holds at most ``lane_bytes`` of queued rows (the caller waits beyond that);
:meth:`prepare`, :meth:`commit` and :meth:`close` wait for every lane, so
no part is renamed or recorded before it is durable, and a lane's error is
raised by the next call.

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
from typing import IO, Any, Callable

import pyarrow as pa

from oop.errors import CheckpointError
from oop.io.writers import DEFAULT_ROW_GROUP_ROWS, SUFFIX, FormatWriter, make_writer
from oop.io.protocol import Offset
from oop.io.filewrite import (DEFAULT_MAX_ROWS_PER_PART, Opener, discard, fsync, io_errors,
                              native_open, start_writeback)
from oop.io.inflight import InFlight
from oop.metrics import ThreadClock

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


class _Part:
    """One part being written: its pending and final paths, file object, encoder and rows."""

    def __init__(self, sink: "PartsSink", n: int) -> None:
        assert sink.schema is not None
        self.sink = sink
        self.final = sink.folder / part_name(n, sink.format)
        self.pending = sink.folder / f".{self.final.name}.pending"
        self.rows = 0  # rows given to this part (counted when queued)
        self.f: IO[bytes] | None = None
        self.w: FormatWriter | None = None
        self.durable = False  # fsynced and closed (sync() ran): it may be renamed into place

    def start(self) -> None:
        """Open the pending file and its encoder (before any write of this part)."""
        s = self.sink
        with s._guard("opening", self.pending):
            self.f = s.opener(str(self.pending), "wb")
        with s._guard(what=self.pending):
            self.w = make_writer(s.format, self.f, s.schema,  # type: ignore[arg-type]
                                 row_group_rows=s.row_group_rows)

    def write(self, piece: pa.RecordBatch) -> None:
        with self.sink._guard(what=self.pending):
            self.w.write(piece)  # type: ignore[union-attr]

    def finish(self) -> None:
        """Encode what is buffered, flush, and start writing the file back to disk
        (:meth:`sync` waits for it)."""
        with self.sink._guard(what=self.pending):
            self.w.close()  # type: ignore[union-attr]
            self.f.flush()  # type: ignore[union-attr]
            start_writeback(self.f)

    def sync(self) -> None:
        """fsync and close the finished file (before it may be renamed into place)."""
        with self.sink._guard(what=self.pending):
            fsync(self.f)
            self.f.close()  # type: ignore[union-attr]
        self.f = None
        self.durable = True

    def discard(self) -> None:
        discard(self.w, self.f)
        self.f, self.w = None, None


class _Lanes:
    """``n`` threads that run the work given to each in order (part ``k`` on lane ``k % n``);
    a lane holds at most ``lane_bytes`` of queued batches (one batch of any size always)."""

    def __init__(self, n: int, lane_bytes: int, name: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.clocks = [ThreadClock() for _ in range(n)]  # each lane's CPU time
        self.lanes = [ThreadPoolExecutor(1, thread_name_prefix=f"oop-part-{name}",
                                         initializer=clock.start)
                      for clock in self.clocks]
        self.queued = [InFlight(lane_bytes) for _ in range(n)]
        self.futures: list[Any] = []

    @property
    def cpu_s(self) -> float:
        """CPU seconds the lanes spent so far."""
        return sum(clock.seconds for clock in self.clocks)

    def submit(self, k: int, fn: Callable[..., None], *args: Any, nbytes: int = 0) -> None:
        lane = k % len(self.lanes)
        self.queued[lane].acquire(nbytes)
        fut = self.lanes[lane].submit(fn, *args)
        if nbytes:
            fut.add_done_callback(lambda _f: self.queued[lane].release(nbytes))
        self.futures.append(fut)
        self._raise_done()

    def _raise_done(self) -> None:
        """Raise the first error of the work that has finished; forget finished work."""
        live = []
        for fut in self.futures:
            if fut.done():
                fut.result()
            else:
                live.append(fut)
        self.futures = live

    def wait(self) -> None:
        """Wait for all queued work; raise the first error."""
        futures, self.futures = self.futures, []
        for fut in futures:
            fut.result()

    def stop(self) -> None:
        """Wait for all queued work, ignoring errors (a failure is being raised), and end the
        threads."""
        futures, self.futures = self.futures, []
        for fut in futures:
            fut.exception()
        for clock in self.clocks:
            clock.stop()  # the lanes are idle, not ended: their clocks are still there
        for lane in self.lanes:
            lane.shutdown(wait=True)


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
        self.opener: Opener = opener or native_open
        self.max_rows_per_part = max_rows_per_part
        self.row_group_rows = row_group_rows
        self.schema: pa.Schema | None = None
        self.next_part = 0  # number of the next part to start
        self.committed = 0  # parts 0 .. committed-1 are in place
        self.rows_committed = 0
        self.pending: list[_Part] = []  # finished parts, not yet renamed into place
        self._part: _Part | None = None  # the open part
        self._unsynced: list[tuple[int, _Part]] = []  # finished, written back, not fsynced
        self._lanes: _Lanes | None = None  # threads encoding the parts (write_on_threads)
        self._lanes_cpu_s = 0.0  # CPU seconds of lanes already stopped
        self._finished_at_publish = 0  # parts finished (committed + pending) at the last publish
        self.closed = False

    def _guard(self, action: str = "writing to", what: Path | None = None
               ) -> contextlib.AbstractContextManager[None]:
        return io_errors(self.name, str(what or self.folder), action)

    def write_on_threads(self, n: int = 2, lane_bytes: int = 16 << 20) -> None:
        """Encode, fsync and close the parts on ``n`` threads, part ``k`` on lane ``k % n``
        (see module doc): for a sink written on a thread of its own, whose encoding is the
        slowest stage of a pipelined run."""
        if self._lanes is None and n >= 1:
            self._lanes = _Lanes(n, lane_bytes, self.name)

    @property
    def cpu_s(self) -> float:
        """CPU seconds the lanes (:meth:`write_on_threads`) spent so far; 0 without lanes."""
        return self._lanes_cpu_s + (self._lanes.cpu_s if self._lanes is not None else 0.0)

    def _run(self, fn: Callable[..., None], *args: Any, nbytes: int = 0,
             part: int | None = None) -> None:
        """Run ``fn(*args)`` now, or on the lane of ``part`` (default: the open part)."""
        if self._lanes is None:
            fn(*args)
        else:
            k = self.next_part - 1 if part is None else part
            self._lanes.submit(k, fn, *args, nbytes=nbytes)

    def _sync(self, keep: int = 0) -> None:
        """fsync the finished parts but the newest ``keep`` (each on its lane)."""
        while len(self._unsynced) > keep:
            n, part = self._unsynced.pop(0)
            self._run(part.sync, part=n)

    def _wait(self) -> None:
        if self._lanes is not None:
            self._lanes.wait()

    def _settle(self) -> None:
        """Finish the open part, fsync every finished one and wait for the lanes: after it,
        every pending part is durable and may be recorded (prepare) or renamed (commit)."""
        if self._part is not None:
            self._finish_part()
        self._sync()
        self._wait()

    # ---- the contract --------------------------------------------------
    def open(self, schema: pa.Schema) -> None:
        """Remember the schema and find where numbering continues (no file is created yet)."""
        self.schema = schema
        with self._guard("listing"):
            self.folder.mkdir(exist_ok=True)
            parts = committed_parts(self.folder)
        self.next_part = self.committed = parts[-1][0] + 1 if parts else 0
        self._finished_at_publish = self.committed

    def resume(self, commit_point: Offset) -> None:
        """Continue after ``commit_point`` (a restored checkpoint): :func:`recover`, number on."""
        recover(self.folder, commit_point)
        self.next_part = self.committed = int(commit_point["parts"]) if commit_point else 0
        self.rows_committed = int(commit_point["rows"]) if commit_point else 0
        self.pending = []
        self._finished_at_publish = self.committed

    def write(self, batch: pa.RecordBatch) -> None:
        assert self.schema is not None, "open() the sink first"
        start = 0
        while start < batch.num_rows:
            if self._part is None:
                self._start_part()
            part = self._part
            assert part is not None
            take = min(batch.num_rows - start, self.max_rows_per_part - part.rows)
            piece = batch if take == batch.num_rows else batch.slice(start, take)
            with self._guard(what=part.pending):
                _fault_enospc(take)
            self._run(part.write, piece, nbytes=piece.nbytes)
            part.rows += take
            start += take
            if part.rows >= self.max_rows_per_part:
                self._finish_part()

    def prepare(self) -> Offset:
        """Finish (and fsync) the open part; the commit point :meth:`commit` will reach.

        Renames nothing: a checkpoint records this point, then :meth:`commit`
        makes the parts visible; :func:`recover` rolls them forward after a crash
        in between.
        """
        self._settle()
        return {"parts": self._finished(),
                "rows": self.rows_committed + sum(part.rows for part in self.pending)}

    def commit(self) -> Offset:
        """Finish the open part and rename the pending parts into place; O(parts renamed)."""
        self._settle()
        self._rename(len(self.pending))
        return {"parts": self.committed, "rows": self.rows_committed}

    def publish(self) -> None:
        """A commit that waits for nothing (``commit_every`` of the Python API): rename into
        place, in number order, the finished parts already durable; the others stay pending
        for the next :meth:`publish`, :meth:`commit` or :meth:`close`. The open part is
        finished first only when no part has finished since the last publish: a part that
        rolled over at ``max_rows_per_part`` already brings new rows into view, and cutting
        the open one as well would double the part count when ``commit_every`` is about
        the part size (the API's defaults: 1M and 1M; on the 50M-row sliding run the
        extra parts cost ~0.5 s of ~5.5 s). Parts so become visible a part or two later
        than with :meth:`commit`, but neither the caller nor the lanes wait for an fsync or
        for the lanes to drain (a commit every 1M rows stalled that run 43 times).
        Not for checkpoints: they :meth:`prepare`, then :meth:`commit`."""
        if self._finished() == self._finished_at_publish and self._part is not None \
                and self._part.rows:  # nothing rolled over since the last publish
            self._finish_part()
        self._finished_at_publish = self._finished()
        done = 0
        while done < len(self.pending) and self.pending[done].durable:
            done += 1
        self._rename(done)

    def _finished(self) -> int:
        """Parts finished so far: committed, or pending their rename."""
        return self.committed + len(self.pending)

    def _rename(self, n: int) -> None:
        """Rename the first ``n`` pending parts into place, in number order, then fsync the
        folder."""
        if not n:
            return
        with self._guard("committing parts in"):
            for part in self.pending[:n]:
                os.replace(part.pending, part.final)
                self.committed += 1
                self.rows_committed += part.rows
            _fsync_dir(self.folder)
        del self.pending[:n]

    def seal(self) -> None:
        """Start the empty part (holding the schema) that a folder left without any part gets;
        :meth:`close` does it too. A job calls it before its final checkpoint, which then
        covers that part as well."""
        if self.committed == 0 and not self.pending and self._part is None \
                and self.schema is not None:
            self._start_part()

    def close(self) -> None:
        """Commit; a folder left without any part gets an empty one holding the schema."""
        if self.closed:
            return
        self.seal()
        try:
            self.commit()
        finally:
            self._stop_lanes()
        self.closed = True

    def abort(self) -> None:
        """Discard the open and pending parts (errors ignored: a failure is being raised)."""
        self.closed = True
        self._stop_lanes()
        victims = [part.pending for part in self.pending]
        for _, part in self._unsynced:
            part.discard()
        self._unsynced = []
        if self._part is not None:
            self._part.discard()
            victims.append(self._part.pending)
        for p in victims:
            with contextlib.suppress(OSError):
                os.remove(p)
        self.pending, self._part = [], None

    # ---- parts -----------------------------------------------------------
    def _start_part(self) -> None:
        self._part = _Part(self, self.next_part)
        self.next_part += 1
        self._run(self._part.start)

    def _finish_part(self) -> None:
        """Finish the open part; fsync the one finished before it, whose write-back had
        the time of this part's encoding to complete (the newest waits for the next)."""
        part = self._part
        assert part is not None
        self._run(part.finish)
        self.pending.append(part)
        self._unsynced.append((self.next_part - 1, part))
        self._part = None
        self._sync(keep=1)

    def _stop_lanes(self) -> None:
        if self._lanes is not None:
            self._lanes.stop()
            self._lanes_cpu_s += self._lanes.cpu_s
            self._lanes = None
