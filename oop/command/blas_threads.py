"""numpy imported with one OpenBLAS thread, for a command whose kernels never call BLAS.

numpy's wheels bundle OpenBLAS, which starts its thread pool when numpy is imported: a
thread per core but one, each spinning a while for work that never comes in ``oop``
(no kernel calls ``np.dot``, ``@`` or ``np.linalg``; :mod:`oop.command.numba_probes` turns
numba's BLAS away too). On the 2-core machine that is one extra thread in a ``--threads 1``
replay and ~0.04 s of CPU (``python -c "import numpy"``: 0.12 -> 0.08 s CPU, min of 9); on
a 64-core machine, 63 threads.

:func:`import_numpy_one_blas_thread` imports numpy with ``OPENBLAS_NUM_THREADS=1`` and
removes the variable again (OpenBLAS reads it once, when it loads): child processes (Spark's
Python workers, a subprocess) see the environment the user gave. Nothing changes when numpy
is imported already or the user chose a thread count (``OPENBLAS_NUM_THREADS``,
``GOTO_NUM_THREADS``, ``OMP_NUM_THREADS``). A BLAS call made later in the process still
works, on one thread. Results do not depend on it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["import_numpy_one_blas_thread", "THREAD_VARS"]

#: the variables OpenBLAS reads its thread count from, in its order; a user's is kept
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def import_numpy_one_blas_thread() -> bool:
    """Import numpy with OpenBLAS on one thread; True if numpy was imported now that way.

    Call first thing in a command, before anything imports numpy (numba does). O(numpy's
    import)."""
    if "numpy" in sys.modules or any(v in os.environ for v in THREAD_VARS):
        return False
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
    return True
