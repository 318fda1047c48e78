"""Keep numba from importing scipy.linalg in a process whose kernels use no linear algebra.

numba's first kernel dispatch of a process (also when it only loads the kernel
from its on-disk cache) imports ``numba.np.arraymath``, which probes for a BLAS
by importing ``scipy.linalg.cython_blas``: scipy.linalg and, through scipy's
array-API layer, ``numpy.f2py`` -- measured ~0.13 s of a ~1.3 s CPU ``oop
replay`` of 10M rows (``experiments/bench_replay.py``'s tumbling query), for
nothing: no oop kernel calls ``np.dot``, ``@`` or ``np.linalg``.
:func:`skip_blas_probe` imports that module once with scipy.linalg blocked, so the
probe answers "no BLAS" (numba's ``_HAVE_BLAS = False``) and is never asked again.

Effect on the process: a numba kernel compiled *afterwards* that uses
``np.dot`` / ``np.linalg`` fails to compile. Call it only in processes that run
oop's own kernels (``oop replay``); not in a library import.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

__all__ = ["skip_blas_probe"]


class _BlockLinalg(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "scipy.linalg" or name.startswith("scipy.linalg."):
            raise ImportError("scipy.linalg is not used by this process (oop.command.blas_probe)")
        return None


def skip_blas_probe() -> bool:
    """Answer numba's BLAS probe with "none" (see module doc); True if it was answered.

    False when ``scipy.linalg`` or ``numba.np.arraymath`` is already imported
    (nothing to save, or too late). Idempotent. (``import numba`` itself imports
    the cheap top of scipy, ~7 ms; only ``scipy.linalg`` is blocked.)
    """
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return False
    block = _BlockLinalg()
    sys.meta_path.insert(0, block)
    try:
        import numba.np.arraymath  # noqa: F401  (runs the probe: _HAVE_BLAS = False)
    finally:
        sys.meta_path.remove(block)
    return "scipy.linalg" not in sys.modules
