"""Equi-join keys as int64 hashes, computed column-at-a-time (no per-tuple Python).

The join's hash-partitioned state (``oop.join.state``) indexes tuples by one
int64 per row. :func:`key_hashes` computes it from the key columns:

* one integer (or timestamp/date/bool) column: the value itself -- an exact
  key, no verification needed (``exact=True``);
* anything else (strings, several columns, floats): a 64-bit mix of the
  column hashes (FNV-1a over the UTF-8 bytes of strings). Equal keys always
  hash equal; unequal keys collide with probability ~2^-64, and the join
  verifies candidate pairs exactly with Arrow ``equal`` (``exact=False``).

Rows with a null in any key column never match anything (SQL semantics); they
are reported in the ``valid`` mask. Cost: O(rows x key columns), one numba
pass per string column.

>>> import pyarrow as pa
>>> h, valid, exact = key_hashes(pa.record_batch({"k": ["a", "b", "a", None]}), ["k"])
>>> bool(h[0] == h[2]), bool(h[0] == h[1]), valid.tolist(), exact
(True, False, [True, True, True, False], False)
>>> key_hashes(pa.record_batch({"k": [5, 7]}), ["k"])[0].tolist()
[5, 7]
"""

from __future__ import annotations

from typing import Sequence

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["key_hashes", "key_family", "mix64"]


@nb.njit(cache=True, nogil=True)
def mix64(x: np.int64) -> np.int64:
    """splitmix64 finaliser: spreads an int64 key over all bits (bucket selection)."""
    z = np.uint64(x)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z)


@nb.njit(cache=True, nogil=True)
def _fnv_strings(offsets: np.ndarray, data: np.ndarray, out: np.ndarray) -> None:
    n = out.shape[0]
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = np.int64(h)


@nb.njit(cache=True, nogil=True)
def _combine(acc: np.ndarray, col: np.ndarray) -> None:
    for i in range(acc.shape[0]):
        acc[i] = mix64(acc[i] * np.int64(31) + col[i])


def key_family(t: pa.DataType) -> str:
    """Which key types compare with each other: ``int``, ``str``, ``float`` or ``bin``."""
    if pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t) \
            or pa.types.is_boolean(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bin"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_dictionary(t):
        return key_family(t.value_type)
    return "other"


def _column_hash(arr: pa.Array) -> np.ndarray:
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    fam = key_family(t)
    n = len(arr)
    if fam == "int":
        if pa.types.is_boolean(t):
            arr = arr.cast(pa.int8())
        elif not pa.types.is_integer(t):
            arr = arr.view(pa.int64()) if t.bit_width == 64 else arr.view(pa.int32())
        a = pc.fill_null(arr, 0) if arr.null_count else arr
        return a.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if fam == "float":
        a = pc.fill_null(arr.cast(pa.float64()), 0.0) if arr.null_count else arr.cast(pa.float64())
        v = a.to_numpy(zero_copy_only=False) + 0.0  # -0.0 -> 0.0 so equal floats hash equal
        return v.view(np.int64).copy()
    if fam in ("str", "bin"):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        bufs = arr.buffers()
        odt = np.int64 if large else np.int32
        offsets = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset:]
        data = (np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None
                else np.zeros(0, dtype=np.uint8))
        out = np.empty(n, dtype=np.int64)
        _fnv_strings(offsets.astype(np.int64, copy=False), data, out)
        return out
    raise TypeError(f"cannot use a column of type {t} as an equi-join key")


def key_hashes(
    batch: pa.RecordBatch, columns: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(hash int64[n], valid bool[n], exact)`` for the key ``columns`` of ``batch``.

    With no key columns every row gets hash 0 (a pure band/tumbling join).
    """
    n = batch.num_rows
    valid = np.ones(n, dtype=bool)
    if not columns:
        return np.zeros(n, dtype=np.int64), valid, True
    cols = [batch.column(c) for c in columns]
    for a in cols:
        if a.null_count:
            valid &= ~np.asarray(pc.is_null(a).to_numpy(zero_copy_only=False), dtype=bool)
    if len(cols) == 1 and key_family(cols[0].type) == "int":
        return _column_hash(cols[0]), valid, True
    acc = np.zeros(n, dtype=np.int64)
    for a in cols:
        _combine(acc, _column_hash(a))
    return acc, valid, False
