"""Numba kernels of DupElim for integer keys: an open-addressing hash set of key rows.

Keys are rows of an int64 matrix ``(n, k)`` (integer/timestamp key columns,
plus one column of null bits). The set stores the distinct rows seen so far in
``store[:m]`` and a power-of-two slot table ``slots`` (``-1`` = empty, else an
index into ``store``), probed linearly. Expected O(1) per probe at load <= 1/2.

* :func:`insert_new` -- for each batch row, in order: keep it iff its key is
  not in the set (nor earlier in the batch), and insert it. O(batch).
* :func:`purge_below` -- drop every stored key whose time column is ``< v``
  and rebuild the slot table. O(state).

The tuple-at-a-time reference is :func:`oop.operators.dupelim.dupelim_reference`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.hashing import mix64

__all__ = ["hash_rows", "insert_new", "purge_below", "new_slots"]


@njit(cache=True)
def _row_hash(keys: np.ndarray, i: int) -> np.uint64:
    h = np.uint64(0x9E3779B97F4A7C15)
    for c in range(keys.shape[1]):
        h = mix64(h ^ np.uint64(keys[i, c]) + np.uint64(c))
    return h


@njit(cache=True)
def hash_rows(keys: np.ndarray) -> np.ndarray:
    """The 64-bit hash of every row (as uint64). O(n * k)."""
    out = np.empty(keys.shape[0], dtype=np.uint64)
    for i in range(keys.shape[0]):
        out[i] = _row_hash(keys, i)
    return out


@njit(cache=True)
def _equal(a: np.ndarray, i: int, b: np.ndarray, j: int) -> bool:
    for c in range(a.shape[1]):
        if a[i, c] != b[j, c]:
            return False
    return True


@njit(cache=True)
def insert_new(
    keys: np.ndarray, store: np.ndarray, m: int, slots: np.ndarray
) -> tuple[np.ndarray, int]:
    """Mark the rows of ``keys`` whose key is new and add them to the set.

    ``store`` must have room for ``m + len(keys)`` rows and ``slots`` at
    least ``2 * (m + len(keys))`` entries (a power of two). Returns
    ``(is_new mask, new m)``.
    """
    mask = np.zeros(keys.shape[0], dtype=np.bool_)
    cap = slots.shape[0] - 1
    for i in range(keys.shape[0]):
        s = np.int64(_row_hash(keys, i) & np.uint64(cap))
        while True:
            j = slots[s]
            if j < 0:
                for c in range(keys.shape[1]):
                    store[m, c] = keys[i, c]
                slots[s] = m
                m += 1
                mask[i] = True
                break
            if _equal(store, j, keys, i):
                break
            s = (s + 1) & cap
    return mask, m


@njit(cache=True)
def _rebuild(store: np.ndarray, m: int, slots: np.ndarray) -> None:
    slots[:] = -1
    cap = slots.shape[0] - 1
    for j in range(m):
        s = np.int64(_row_hash(store, j) & np.uint64(cap))
        while slots[s] >= 0:
            s = (s + 1) & cap
        slots[s] = j


@njit(cache=True)
def purge_below(store: np.ndarray, m: int, slots: np.ndarray, tcol: int, v: int) -> int:
    """Keep only stored keys with ``store[:, tcol] >= v`` (compacted); rebuild slots. O(m)."""
    w = 0
    for j in range(m):
        if store[j, tcol] >= v:
            if w != j:
                for c in range(store.shape[1]):
                    store[w, c] = store[j, c]
            w += 1
    _rebuild(store, np.int64(w), slots)  # not typed as the literal 0 first: compiled once
    return w


def new_slots(n_keys: int) -> np.ndarray:
    """A slot table for up to ``n_keys`` keys at load <= 1/2."""
    size = 16
    while size < 2 * max(n_keys, 1):
        size *= 2
    return np.full(size, -1, dtype=np.int64)


def rebuild(store: np.ndarray, m: int, slots: np.ndarray) -> None:
    """Re-insert ``store[:m]`` into ``slots`` (after growing it)."""
    _rebuild(store, m, slots)
