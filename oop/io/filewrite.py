"""Writing result files safely: OS errors as one-line sink errors, fsync, and discarding a
half-written file. Shared by the file sinks (:mod:`oop.io.sinks`) and the rolling part
files (:mod:`oop.io.parts`), below both.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
from typing import IO, Any, Callable, Iterator

import pyarrow as pa

from oop.errors import SinkError
from oop.io.writers import FormatWriter

__all__ = ["discard", "Opener", "native_open", "DEFAULT_MAX_ROWS_PER_PART", "io_errors", "fsync",
           "start_writeback"]


def discard(writer: FormatWriter | None, f: IO[bytes] | None) -> None:
    """Drop a half-written encoder and close its file; errors are ignored (a failure is
    already being raised)."""
    if writer is not None:
        writer.abort()
    if f is not None:
        with contextlib.suppress(OSError, ValueError):
            f.close()


Opener = Callable[[str, str], Any]  # open(path, "wb") -> binary file object


def native_open(path: str, mode: str) -> pa.NativeFile:
    """The default :data:`Opener`: Arrow's own file (``pyarrow.OSFile``).

    An encoder writes to it without taking the GIL. Through a Python file object, every
    page Arrow writes is a call back into Python: with a result encoded beside the
    window (``--threads 2``), the writing threads took the GIL ~20k times each on the
    50M-row sliding benchmark and the driving thread waited 0.53 s for it (0.26 s
    once the writes went to Arrow's file). Its write errors are OSErrors with the
    errno, as :func:`open`'s are.
    """
    return pa.OSFile(path, mode)


DEFAULT_MAX_ROWS_PER_PART = 1_000_000


def _cause(e: OSError) -> str:
    if isinstance(e, BrokenPipeError) or e.errno == _errno.EPIPE:
        return "the reader closed the pipe (EPIPE)"
    if e.errno is not None and e.errno in _errno.errorcode:
        text = e.strerror or os.strerror(e.errno)
        hint = "; free some space or write elsewhere" if e.errno == _errno.ENOSPC else ""
        return f"{text} ({_errno.errorcode[e.errno]}){hint}"
    return str(e) or type(e).__name__


@contextlib.contextmanager
def io_errors(sink: str, target: str, action: str = "writing to") -> Iterator[None]:
    """Turn an OSError in the block into a one-line SinkError naming ``target`` and the cause."""
    try:
        yield
    except SinkError:
        raise
    except OSError as e:
        msg = f"sink {sink!r}: {action} {target} failed: {_cause(e)}"
        raise SinkError(" ".join(msg.split())) from e


def fsync(f: Any) -> None:
    """fsync ``f`` when it is a real file; devices and pipes that cannot sync are skipped."""
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError):
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (_errno.EINVAL, _errno.ENOTSUP, _errno.EROFS):
            raise


_SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writing back the dirty pages, do not wait


def _sync_file_range() -> Callable[..., int] | None:
    """libc's ``sync_file_range`` (Linux), or None where there is none."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return fn  # type: ignore[no-any-return]


_WRITEBACK: list[Callable[..., int] | None] = []  # looked up once, at the first use


def start_writeback(f: Any) -> None:
    """Ask the kernel to start writing ``f``'s dirty pages to disk now, without waiting.

    A later :func:`fsync` of the same file then finds them written (or nearly): a part
    folder starts the write-back when it finishes a part and fsyncs it when the next
    part is finished (or at the commit), so the disk works while the next part is
    encoded. Advisory: where the call or the file number is missing, nothing happens
    (the fsync still makes the file durable, and reports any write error).
    """
    if not _WRITEBACK:
        _WRITEBACK.append(_sync_file_range())
    fn = _WRITEBACK[0]
    if fn is None:
        return
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError):
        return
    fn(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)
