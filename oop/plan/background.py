"""Reading and writing on their own threads: the pipeline stages of a threaded run.

``oop replay --threads N`` (N > 1) runs three kinds of work at once: the
window's key partitions (:mod:`oop.window.threaded`), and these two stages,
which would otherwise be serial work on the driving thread (measured on the
10M-row benchmark: Parquet output ~40 % and Parquet input ~20 % of one
thread's time, the window kernels ~10 %):

* :class:`ReadAhead` -- a :class:`~oop.io.protocol.SourceConnector` whose
  batches are read by a thread up to ``depth`` batches ahead (Arrow decodes
  without the GIL). Same batches in the same order. Finite feeds only. Its
  ``offset()`` is the inner connector's offset just after the last batch
  :meth:`~ReadAhead.poll` *returned* (the reading thread records it with each
  batch), not after the batches read ahead, so a checkpoint of a pipelined
  run resumes exactly where the plan was; ``seek`` works before the first
  poll (a resumed run seeks, then reads). :func:`read_ahead` does the same for a Python
  iterator of batches (``oop.from_parquet(..., read_ahead=True)``); closing the generator
  stops its thread.
  The Python API turns both stages on by default when the process may use more than
  one core (:func:`on_by_default`), as ``oop replay``'s ``--threads`` defaults to every
  core.
* :class:`BackgroundSink` -- a :class:`~oop.io.protocol.Sink` whose writes
  happen on a thread, in order, up to ``max_bytes`` of batches behind; ``commit``,
  ``close`` and ``abort`` wait for the queued writes first, so what is
  committed is exactly what was written before the call. A write error is
  raised by the next call. A part folder (:class:`oop.io.parts.PartsSink`) is
  written to directly instead and encodes its parts on ``lanes`` threads of
  its own (:meth:`~oop.io.parts.PartsSink.write_on_threads`): encoding is the
  slowest stage of a sliding window's run (Parquet output ~40 % of one
  thread's time), and one writing thread left the window waiting for it.

Cost: one queue hand-off per batch; memory: ``depth`` (default 2) input batches and
``max_bytes`` (default 4 MiB, or one larger batch) of results in flight, or for a part
folder 16 MiB per lane and each lane's open row group (the 3M-row test input of
``tests/test_replay_live.py``: peak RSS 264 MiB at ``--threads 2``, 248 MiB at 1).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from oop.io.inflight import InFlight
from oop.io.protocol import END, IDLE, Offset, Poll
from oop.limits import usable_cores
from oop.metrics import ThreadClock

__all__ = ["ReadAhead", "BackgroundSink", "read_ahead", "on_by_default"]


def on_by_default(flag: bool | None) -> bool:
    """A Python API run's ``read_ahead`` / ``background``: ``flag`` when given, else (None)
    on when this process may use more than one core (:func:`oop.limits.usable_cores`),
    the default of ``oop replay --threads``. O(1)."""
    return usable_cores() > 1 if flag is None else bool(flag)

_STOP = object()


class ReadAhead:
    """A finite connector read ``depth`` batches ahead on a thread (see module doc)."""

    live = False

    def __init__(self, inner: Any, depth: int = 2) -> None:
        self.inner = inner
        self.name = inner.name
        self.resumable = bool(getattr(inner, "resumable", False))
        self._offset: Offset = None  # the inner offset after the last batch poll() returned
        self.depth = depth
        self._q: queue.Queue[Any] = queue.Queue(depth)
        self._thread: threading.Thread | None = None
        self._rows = 0
        self._closed = threading.Event()
        self._clock = ThreadClock()  # CPU time of the reading thread

    def open(self) -> pa.Schema | None:
        return self.inner.open()

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the reading thread so far."""
        return self._clock.seconds

    def _run(self, max_rows: int) -> None:
        self._clock.start()
        try:
            while not self._closed.is_set():
                item = self.inner.poll(max_rows, 0.1)
                if item is IDLE:
                    continue
                self._put((item, self.inner.offset()))
                if item is END:
                    break
        except BaseException as e:  # raised again by poll() on the driving thread
            self._put((e, None))
        finally:
            self._clock.stop()

    def _put(self, item: Any) -> None:
        while not self._closed.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        """The next batch (or END) in feed order; blocks until the reader has it."""
        if self._thread is None:
            self._offset = self.inner.offset()
            self._thread = threading.Thread(target=self._run, args=(max_rows,),
                                            name=f"oop-read-{self.name}", daemon=True)
            self._thread.start()
        item, offset = self._q.get()
        if isinstance(item, BaseException):
            raise item
        self._offset = offset
        if isinstance(item, pa.RecordBatch):
            self._rows += item.num_rows
        return item

    def offset(self) -> Offset:
        """Where the plan is: the inner offset after the last batch :meth:`poll` returned."""
        return self.inner.offset() if self._thread is None else self._offset

    def seek(self, offset: Offset) -> None:
        """Continue after ``offset``; before the first :meth:`poll` only (a resumed run)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: a read-ahead input seeks before its first read "
                               "only")
        self.inner.seek(offset)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join()
        self.inner.close()

    def __getattr__(self, attr: str) -> Any:  # other connector attributes (e.g. stop)
        return getattr(self.inner, attr)


class _Items:
    """An iterator of feed items as a connector: :class:`ReadAhead`'s inner for
    :func:`read_ahead`."""

    live = False
    resumable = False

    def __init__(self, items: Iterable[Any], name: str) -> None:
        self._items = iter(items)
        self.name = name

    def open(self) -> None:
        return None

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        return next(self._items, END)

    def offset(self) -> Offset:
        return None

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


def read_ahead(items: Iterable[Any], name: str, depth: int = 2) -> Iterator[Any]:
    """``items`` (record batches, or any feed items) iterated on a thread of their own, up
    to ``depth`` ahead, yielded in the same order (:class:`ReadAhead`). An error of the
    iteration is raised here; closing the generator (a run that ends early, or its
    garbage) stops the thread and closes ``items``."""
    reader = ReadAhead(_Items(items, name), depth)
    try:
        while True:
            item = reader.poll(1)
            if item is END:
                return
            yield item
    finally:
        reader.close()


class BackgroundSink:
    """A sink written on a thread, in order, ``depth`` batches behind (see module doc)."""

    def __init__(self, inner: Any, max_bytes: int = 4 << 20, lanes: int = 2) -> None:
        self.inner = inner
        self.name = inner.name
        self._q: queue.Queue[Any] = queue.Queue()
        self._inflight = InFlight(max_bytes)  # bytes queued, not yet written
        self._error: BaseException | None = None
        self._clock = ThreadClock()  # CPU time of the writing thread
        #: called once the sink closed cleanly (e.g. to report ``cpu_s`` in a summary)
        self.on_close: Callable[[], None] | None = None
        write_on_threads = getattr(inner, "write_on_threads", None)
        #: a part folder encodes its parts on lanes of its own: written to directly
        self.direct = write_on_threads is not None
        self._thread: threading.Thread | None = None
        if write_on_threads is not None:
            write_on_threads(lanes)
            return
        self._thread = threading.Thread(target=self._run, name=f"oop-write-{self.name}",
                                        daemon=True)
        self._thread.start()

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the writing thread (or of a part folder's lanes) so far."""
        return float(self.inner.cpu_s) if self.direct else self._clock.seconds

    def _run(self) -> None:
        self._clock.start()
        while True:
            item = self._q.get()
            try:
                if item is _STOP:
                    self._clock.stop()
                    return
                if self._error is None:
                    self.inner.write(item)
            except BaseException as e:
                self._error = e
            finally:
                if item is not _STOP:
                    self._inflight.release(item.nbytes)
                self._q.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def _drain(self) -> None:
        self._q.join()
        self._raise()

    def open(self, schema: pa.Schema) -> None:
        self.inner.open(schema)

    def write(self, batch: pa.RecordBatch) -> None:
        """Queue ``batch``; waits while more than ``max_bytes`` are queued (one batch of any
        size is always accepted)."""
        if self.direct:
            self.inner.write(batch)
            return
        self._raise()
        self._inflight.acquire(batch.nbytes)
        self._q.put(batch)

    def _then(self, fn: Callable[[], Any]) -> Any:
        self._drain()
        return fn()

    def commit(self) -> Offset:
        return self._then(self.inner.commit)

    def publish(self) -> None:
        """A part folder's commit that waits for nothing
        (:meth:`oop.io.parts.PartsSink.publish`: it is written directly); other sinks
        commit."""
        publish = getattr(self.inner, "publish", None)
        if self.direct and publish is not None:
            publish()
        else:
            self.commit()

    def prepare(self) -> Offset:
        prepare = getattr(self.inner, "prepare", None)
        return self._then(prepare if prepare is not None else self.inner.commit)

    def close(self) -> None:
        try:
            self._then(self.inner.close)
        finally:
            self._stop()
        if self.on_close is not None:
            self.on_close()

    def abort(self) -> None:
        try:
            self._q.join()
            self._error = None
            self.inner.abort()
        finally:
            self._stop()

    def _stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()

    def __getattr__(self, attr: str) -> Any:  # e.g. a part folder's ``folder``
        return getattr(self.inner, attr)
