"""Arrow's allocator for a file-to-file process: jemalloc when pyarrow has it.

pyarrow's default pool is mimalloc, which keeps a heap per thread that
allocates and returns little of it to the system. ``oop replay`` allocates
Arrow buffers on up to three kinds of thread (reader, window partitions,
writer), so a threaded run holds each thread's freed batches.

Two levels of "default pool" exist, and both matter:

* pyarrow's (:func:`pyarrow.set_memory_pool`): what Python-level calls
  allocate from (``take``, ``concat``, ``from_arrays``, ...);
* Arrow C++'s ``default_memory_pool()``: what the Parquet reader and writer
  allocate their column chunks, pages and encoders from. It is chosen once,
  from the environment variable ``ARROW_DEFAULT_MEMORY_POOL``, when the
  library loads -- :func:`pyarrow.set_memory_pool` does not change it.

Measured (``oop replay`` sliding 10 s / 1 s, 2 threads, 50M rows of
``experiments/bench_replay.py``'s workload; /proc/self/smaps at the peak):
with only the Python-level pool switched, mimalloc still held a 1 GiB
reservation with 78 MiB resident (the Parquet threads' heaps), peak RSS
351 MiB; with both pools jemalloc, 312 MiB.

:func:`prefer_lean_pool` sets the environment variable before pyarrow is
imported (so both levels are jemalloc); :func:`use_lean_pool` switches the
Python-level pool when it is too late for that. Both leave the choice alone
when the user set ``ARROW_DEFAULT_MEMORY_POOL``. Results do not depend on
the allocator.

numpy's arrays (and numba's) come from the C library's ``malloc``. glibc hands
every block above its mmap threshold (128 KiB at first) to the kernel and
back, and trims the heap top above 128 KiB of free space, so a replay that
allocates a few ~0.5-4 MiB arrays per batch faults their pages in again and
again: 125k minor faults, 0.40 s of system time on the 10M-row sliding
benchmark at ``--threads 1``. :func:`tune_malloc` (called by
:func:`use_lean_pool`) raises both thresholds (blocks up to 4 MiB from the
heap, 32 MiB of free heap kept): 41k faults, 0.17 s, the same peak RSS
(243 MiB). Only on glibc; the variables ``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES``, when set, win. The plan executor
tunes ``malloc`` too, before a plan's first batch (the Python API's runs): the 50M-row
sliding benchmark from Parquet to a part folder through ``oop.from_parquet(...)
.window(...).to_parquet(...)`` took 10.6 s (2.4 s of it system time) without, 7.8-9.9 s
(0.8-1.1 s) with it, on the 2-core VM of 2026-11-27; ``oop replay`` 7.3 s. A program that
must keep glibc's defaults sets one of those variables. The pools are left to the
commands: a library should not change which allocator its caller's Arrow arrays use.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys

__all__ = ["prefer_lean_pool", "use_lean_pool", "tune_malloc"]

#: the environment variable with which Arrow's user picks the pool (then kept)
ENV = "ARROW_DEFAULT_MEMORY_POOL"


def prefer_lean_pool() -> bool:
    """Ask Arrow C++ for jemalloc as its default pool, if pyarrow is not imported yet.

    True when the request was made (the variable set for this process and its
    children). Only on Linux, where pyarrow's wheels include jemalloc (elsewhere a
    build without it would print a warning). Cost: none; call before any import of
    pyarrow, e.g. first thing in a command."""
    if os.environ.get(ENV) or "pyarrow" in sys.modules or not sys.platform.startswith("linux"):
        return False
    os.environ[ENV] = "jemalloc"
    return True


#: glibc's mallopt parameters (malloc.h) and the values tune_malloc sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 4 << 20
TRIM_THRESHOLD = 32 << 20


@functools.cache
def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds (see module doc); True when set. O(1); the
    first call decides, later ones give its answer."""
    if platform.libc_ver()[0] != "glibc" or os.environ.get("GLIBC_TUNABLES") or any(
            os.environ.get(v) for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):
        return False
    return bool(ok)


def use_lean_pool() -> str:
    """Make jemalloc pyarrow's default pool and tune ``malloc`` (see module doc); the
    pool's backend name after."""
    import pyarrow as pa

    tune_malloc()
    if os.environ.get(ENV):
        return pa.default_memory_pool().backend_name
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return pa.default_memory_pool().backend_name
    pa.set_memory_pool(pool)
    return pool.backend_name
