"""Hash mixing shared by the compiled hash tables (key dictionary, duplicate elimination).

:func:`mix64` is the 64-bit finalizer of MurmurHash3 (``fmix64``): it
spreads every input bit over the output, so linear probing over a
power-of-two table (``h & (size - 1)``) sees well-distributed slots even for
sequential keys. Inlined into the numba kernels that call it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["mix64"]


@nb.njit(cache=True, inline="always")
def mix64(h: np.uint64) -> np.uint64:
    """MurmurHash3's fmix64 on an unsigned 64-bit integer."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h
