"""Arrow's allocator for a file-to-file process: jemalloc when pyarrow has it.

pyarrow's default pool is mimalloc, which keeps a heap per thread that
allocates and returns little of it to the system. ``oop replay`` allocates
Arrow buffers on up to three kinds of thread (reader, window partitions,
writer), so a threaded run holds each thread's freed batches. Measured on
the 10M-row tumbling benchmark (``experiments/bench_replay.py``'s workload):
peak RSS with ``--threads 2`` 330 MiB under mimalloc, 267 MiB under jemalloc;
with ``--threads 1`` 271 vs 241 MiB; CPU time the same within noise.

:func:`use_lean_pool` switches the process default to jemalloc before the
first Arrow allocation. It leaves the choice alone when the user set
``ARROW_DEFAULT_MEMORY_POOL`` or this pyarrow build has no jemalloc.
Results do not depend on the allocator.
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["use_lean_pool"]

#: the environment variable with which Arrow's user picks the pool (then kept)
ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_lean_pool() -> str:
    """Make jemalloc Arrow's default pool (see module doc); the pool's backend name after."""
    if os.environ.get(ENV):
        return pa.default_memory_pool().backend_name
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return pa.default_memory_pool().backend_name
    pa.set_memory_pool(pool)
    return pool.backend_name
