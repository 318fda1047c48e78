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
"""

from __future__ import annotations

import os
import sys

__all__ = ["prefer_lean_pool", "use_lean_pool"]

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


def use_lean_pool() -> str:
    """Make jemalloc pyarrow's default pool (see module doc); the pool's backend name after."""
    import pyarrow as pa

    if os.environ.get(ENV):
        return pa.default_memory_pool().backend_name
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return pa.default_memory_pool().backend_name
    pa.set_memory_pool(pool)
    return pool.backend_name
