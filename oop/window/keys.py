"""Group keys -> dense int codes, persistent across batches (one dictionary per operator).

:class:`KeyEncoder` maps the rows of one or several key columns of any Arrow
type to dense codes ``0, 1, 2, ...`` in order of first appearance, and back
(:meth:`KeyEncoder.keys` returns the key columns for an array of codes).

How (per batch, never per tuple in Python):

1. each key column becomes an int64 *component*: integers, timestamps,
   dates, durations and booleans by value; floats by their bit pattern
   (``-0.0`` folded to ``0.0``); strings and binary (plain, large, views,
   dictionary-encoded) by a persistent compiled interner
   (:class:`~oop.window.interner.StringInterner`: no Python per row or
   value); any other type (decimals, lists, ...) through
   ``pyarrow.compute.dictionary_encode`` plus a persistent per-column
   Python dict over the *batch's unique values* only (cost O(unique values
   per batch));
2. one more component carries the null bits of the row's key columns;
3. a numba open-addressing hash table (linear probing, power-of-two
   capacity, load <= 1/4) maps the component tuple to its dense code. The
   kernel reads the components where they are (a tuple of arrays, the loop
   over them unrolled at compile time: no stacked copy of the batch) and
   grows the table when it fills, resuming where it stopped, so the table
   stays about 4-8x the keys (cache-resident for 10k keys) instead of being
   sized for a whole batch of new keys.
   Fast paths: one non-null integer key column whose values lie in
   ``[0, 2**22)`` uses a direct lookup array instead of hashing; one
   string key column without nulls takes the interner's ids (dense, in
   first-appearance order) as its codes. Either leaves for the hash table
   for good at the first batch that does not fit.

>>> import pyarrow as pa
>>> enc = KeyEncoder(["k"])
>>> enc.encode(pa.record_batch({"k": ["b", "a", "b"]})).tolist()
[0, 1, 0]
>>> enc.encode(pa.record_batch({"k": ["c", "a", None]})).tolist()
[2, 1, 3]
>>> enc.keys(np.array([3, 0]))[0].to_pylist()
[None, 'b']
"""

from __future__ import annotations

from typing import Any, Sequence

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.hashing import mix64
from oop.window.interner import StringInterner, is_internable

__all__ = ["KeyEncoder", "ValueRanks", "sortable", "compaction_remap"]


def compaction_remap(keep: np.ndarray, n: int, least: int) -> tuple[np.ndarray | None, int]:
    """The compaction rule of a key dictionary of ``n`` codes of which ``keep`` (ascending)
    are still held: compact when more than half are dead. Returns the remap (old code -> new
    code, -1 for a forgotten one; None: no compaction) and the code count at which to check
    next (``2 x`` the codes left, at least ``least``: the operator's ``KEYS_COMPACT_MIN``). O(n).

    >>> compaction_remap(np.array([1, 4]), 6, 8)[0].tolist()
    [-1, 0, -1, -1, 1, -1]
    >>> compaction_remap(np.array([0, 1, 2]), 4, 8)
    (None, 8)
    """
    if 2 * keep.shape[0] >= n:
        return None, max(least, 2 * n)
    remap = np.full(n, -1, np.int64)
    remap[keep] = np.arange(keep.shape[0])
    return remap, max(least, 2 * keep.shape[0])

_DIRECT_LIMIT = 1 << 22
_EMPTY = -1
_NO_NULLS = np.zeros(0, np.int64)


@nb.njit(cache=True, inline="always")
def _fold(h: np.uint64, v: int, j: int) -> np.uint64:
    return mix64(h ^ np.uint64(v) + np.uint64(j))


_H0 = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, inline="always")
def _hash_row(comps, nulls, i):
    """Hash of row ``i``: its key components (a tuple of int64 arrays), then its null bits
    (``nulls[i]``; 0 when ``nulls`` is empty: no key of the batch is null)."""
    h = _H0
    j = 0
    for a in nb.literal_unroll(comps):  # unrolled per component: no indexing of the tuple
        h = _fold(h, a[i], j)
        j += 1
    return _fold(h, nulls[i] if nulls.shape[0] else 0, j)


@nb.njit(cache=True, inline="always")
def _hash_code(codekeys, c):
    """:func:`_hash_row` of the key stored as ``codekeys[c]`` (components, null bits last)."""
    h = _H0
    for j in range(codekeys.shape[1]):
        h = _fold(h, codekeys[c, j], j)
    return h


@nb.njit(cache=True, nogil=True)
def _encode_hash(comps, nulls, slots, codekeys, n_codes, out, new_rows, n_new, start):
    """Look up / insert rows ``start ..`` (key components ``comps``: a tuple of int64 arrays,
    null bits ``nulls`` or empty); returns (n_codes, n_new, stop).

    ``stop < n`` when row ``stop`` is a new key and the tables are full (``codekeys`` has no
    free row, or the slots' load would pass 1/4): the caller grows them and resumes there.
    Growing on demand keeps the slots about 4-8x the keys: a batch of 64K rows over 10k keys
    probes a 512 KB table (cache-resident), not one sized for 64K new keys. The components
    are read where they are (no stacked copy of the batch).
    """
    k = len(comps)
    n = out.shape[0]
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(start, n):
        h = _hash_row(comps, nulls, i) & mask
        nb_ = nulls[i] if nulls.shape[0] else 0
        while True:
            c = slots[h]
            if c == -1:
                if n_codes >= codekeys.shape[0] or 4 * (n_codes + 1) > slots.shape[0]:
                    return n_codes, n_new, i
                j = 0
                for a in nb.literal_unroll(comps):
                    codekeys[n_codes, j] = a[i]
                    j += 1
                codekeys[n_codes, k] = nb_
                slots[h] = n_codes
                out[i] = n_codes
                new_rows[n_new] = i
                n_new += 1
                n_codes += 1
                break
            same = codekeys[c, k] == nb_
            j = 0
            for a in nb.literal_unroll(comps):
                same &= codekeys[c, j] == a[i]
                j += 1
            if same:
                out[i] = c
                break
            h = (h + np.uint64(1)) & mask
    return n_codes, n_new, n


@nb.njit(cache=True, nogil=True)
def _rehash(codekeys, n_codes, slots):
    mask = np.uint64(slots.shape[0] - 1)
    for c in range(n_codes):
        h = _hash_code(codekeys, c) & mask
        while slots[h] != -1:
            h = (h + np.uint64(1)) & mask
        slots[h] = c


@nb.njit(cache=True, nogil=True)
def _encode_direct(vals, lut, n_codes, out, ints):
    """LUT lookup/insert; stops at the first value outside the LUT.

    Returns (n_codes, i_stop) with ``i_stop == len(vals)`` when done; new
    codes record their key value in ``ints`` (capacity >= n_codes + len).
    """
    size = lut.shape[0]
    for i in range(vals.shape[0]):
        v = vals[i]
        if v < 0 or v >= size:
            return n_codes, i
        c = lut[v]
        if c == -1:
            c = n_codes
            lut[v] = c
            ints[c] = v
            n_codes += 1
        out[i] = c
    return n_codes, vals.shape[0]


def _single_chunk(col: pa.ChunkedArray) -> pa.Array:
    """The one chunk of ``col`` (combined when it has several)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _readonly(c: np.ndarray) -> np.ndarray:
    """``c`` as a read-only C-contiguous int64 view (Arrow's zero-copy arrays are read-only,
    computed ones are not; the compiled encoder takes a tuple of one array type)."""
    v = np.ascontiguousarray(c, np.int64).view()
    v.flags.writeable = False
    return v


def _is_int_like(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
            or pa.types.is_duration(t) or pa.types.is_time(t))


class KeyEncoder:
    """Persistent dictionary of group keys (see the module docstring). Not thread-safe."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = list(columns)
        self.n_codes = 0
        k = len(self.columns) + 1
        self._codekeys = np.empty((1024, k), np.int64)
        self._slots = np.full(2048, _EMPTY, np.int64)
        self._dicts: list[dict[Any, int]] = [dict() for _ in self.columns]
        self._interners: dict[int, StringInterner] = {}  # string-like key columns
        self._key_chunks: list[pa.RecordBatch] = []
        self._key_table: pa.Table | None = None
        self._lut: np.ndarray | None = None  # direct path, or None when disabled
        self._direct = len(self.columns) == 1
        self._sdirect = False  # direct path of one string key column (interner ids = codes)
        self._types: list[pa.DataType] | None = None
        self._ints: np.ndarray | None = np.empty(1024, np.int64) if self._direct else None

    # ---- encoding --------------------------------------------------------
    def _component(self, j: int, arr: pa.Array) -> np.ndarray:
        t = arr.type
        if pa.types.is_boolean(t):
            return np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), np.int64)
        if _is_int_like(t):
            a = arr.fill_null(0) if arr.null_count else arr
            if not pa.types.is_integer(t):
                a = a.view(pa.int64()) if t.bit_width == 64 else pc.cast(a.view(pa.int32()), pa.int64())
            return np.asarray(a.to_numpy(zero_copy_only=False), np.int64)
        if pa.types.is_floating(t):
            f = np.asarray(pc.cast(arr.fill_null(0.0), pa.float64()).to_numpy(zero_copy_only=False),
                           np.float64) + 0.0  # folds -0.0 into 0.0
            return f.view(np.int64)
        if is_internable(t):  # strings, binary: one compiled pass, no Python per value
            interner = self._interners.get(j)
            if interner is None:
                interner = self._interners[j] = StringInterner()
            return interner.intern(arr)
        enc = pc.dictionary_encode(sortable(arr))  # decimal32/64 have no Arrow hash kernel
        uniq = enc.dictionary.to_pylist()
        d = self._dicts[j]
        ids = np.empty(len(uniq), np.int64)
        for i, u in enumerate(uniq):  # per unique value of the batch, not per row
            v = d.get(u)
            if v is None:
                v = d[u] = len(d)
            ids[i] = v
        idx = np.asarray(enc.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        return ids[idx] if len(ids) else np.zeros(len(arr), np.int64)

    def encode(self, batch: pa.RecordBatch) -> np.ndarray:
        """Dense int64 codes of ``batch``'s key rows. Cost: O(rows) compiled + O(new keys)."""
        n = batch.num_rows
        if not self.columns:
            if n and self.n_codes == 0:
                self._add_keys(batch, np.zeros(1, np.int64))
                self.n_codes = 1
            return np.zeros(n, np.int64)
        arrs = [batch.column(c) for c in self.columns]
        if self._types is None:
            self._types = [a.type for a in arrs]
        out = np.empty(n, np.int64)
        new_rows = np.empty(n, np.int64)
        if self._direct:
            a = arrs[0]
            if self._strings_direct(a):
                return self._encode_strings(batch, a)
            if pa.types.is_integer(a.type) and not a.null_count and (self._lut is not None or not self.n_codes):
                v = np.asarray(a.to_numpy(zero_copy_only=False), np.int64)
                if self._lut is None:
                    self._lut = np.full(1024, _EMPTY, np.int64)
                assert self._ints is not None
                start = 0
                while n:
                    if self._ints.shape[0] < self.n_codes + n:
                        grown = np.empty(max(self.n_codes + n, 2 * self._ints.shape[0]), np.int64)
                        grown[: self.n_codes] = self._ints[: self.n_codes]
                        self._ints = grown
                    self.n_codes, stop = _encode_direct(v[start:], self._lut, self.n_codes,
                                                        out[start:], self._ints)
                    start += stop
                    if start >= n:
                        return out
                    bad = int(v[start])
                    if bad < 0 or bad >= _DIRECT_LIMIT:
                        break  # leave the direct path for this and every later batch
                    grown_lut = np.full(max(bad + 1, 2 * self._lut.shape[0]), _EMPTY, np.int64)
                    grown_lut[: self._lut.shape[0]] = self._lut
                    self._lut = grown_lut
                if not n:
                    return out
                # partially encoded: re-encode the whole batch through the hash table below
            if n:
                self._leave_direct()
        comps = [self._component(j, a) for j, a in enumerate(arrs)]
        nullbits = _NO_NULLS
        for j, a in enumerate(arrs):
            if a.null_count:
                isnull = np.asarray(pc.is_null(a).to_numpy(zero_copy_only=False), bool)
                if not nullbits.shape[0]:
                    nullbits = np.zeros(n, np.int64)
                nullbits |= isnull.astype(np.int64) << j
                comps[j] = np.where(isnull, 0, comps[j])
        comp = tuple(_readonly(c) for c in comps)  # one array type: a homogeneous tuple
        n_new = stop = 0
        while True:
            self.n_codes, n_new, stop = _encode_hash(comp, nullbits, self._slots, self._codekeys,
                                                     self.n_codes, out, new_rows, n_new, stop)
            if stop == n:
                break
            self._reserve(self.n_codes + 1)  # full: double what is full, then resume
        self._add_keys(batch, new_rows[:n_new])
        return out

    def _strings_direct(self, a: pa.Array) -> bool:
        """Whether this batch of the one string key column takes the interner's ids as codes."""
        if not self.n_codes:  # decided by the first batch: a plain string-like column
            self._sdirect = is_internable(a.type) and not pa.types.is_dictionary(a.type)
        # a null key needs the hash table's null bits; a dictionary array would intern values
        # no row uses (codes without a key row): either leaves for good
        return self._sdirect and not a.null_count and not pa.types.is_dictionary(a.type)

    def _encode_strings(self, batch: pa.RecordBatch, a: pa.Array) -> np.ndarray:
        """One string key column without nulls: the interner's ids (dense, first-appearance
        order, like the codes) are the codes -- no hash table (004 keeps a dictionary per
        group-by column too). New codes record the row of their first appearance for
        :meth:`keys`, in code order."""
        interner = self._interners.get(0)
        if interner is None:
            interner = self._interners[0] = StringInterner()
        before = self.n_codes
        ids = interner.intern(a)
        if interner.n_ids > before:
            rows = np.flatnonzero(ids >= before)
            _, first = np.unique(ids[rows], return_index=True)  # sorted by id = by code
            self._add_keys(batch, rows[first])
            self.n_codes = interner.n_ids
        return ids

    def _leave_direct(self) -> None:
        """Move codes found by the direct path into the hash table (once)."""
        self._direct = False
        if self._sdirect:  # the interner's ids were the codes: code c is the tuple (c, no null)
            self._sdirect, self._ints = False, None
            self._reserve(max(self.n_codes, 1))
            self._codekeys[: self.n_codes, 0] = np.arange(self.n_codes)
            self._codekeys[: self.n_codes, 1] = 0
            self._slots[:] = _EMPTY
            _rehash(self._codekeys, self.n_codes, self._slots)
            return
        if self._lut is not None and self._ints is not None and self._types is not None:
            self._key_chunks = [self._int_key_batch()]
            self._key_table = None
        self._ints = None
        if self._lut is None:
            return
        lut, self._lut = self._lut, None
        vals = np.nonzero(lut != _EMPTY)[0]
        codes = lut[vals]
        order = np.argsort(codes)
        self._reserve(self.n_codes)
        self._codekeys[: self.n_codes, 0] = vals[order]
        self._codekeys[: self.n_codes, 1] = 0
        self._slots[:] = _EMPTY
        _rehash(self._codekeys, self.n_codes, self._slots)

    def _reserve(self, n_total: int) -> None:
        if n_total > self._codekeys.shape[0]:
            cap = max(n_total, 2 * self._codekeys.shape[0])
            ck = np.empty((cap, self._codekeys.shape[1]), np.int64)
            m = min(self.n_codes, self._codekeys.shape[0])  # the direct path leaves it unfilled
            ck[:m] = self._codekeys[:m]
            self._codekeys = ck
        if 4 * n_total > self._slots.shape[0]:
            cap = 1 << int(np.ceil(np.log2(max(8 * n_total, 16))))
            self._slots = np.full(cap, _EMPTY, np.int64)
            _rehash(self._codekeys, self.n_codes, self._slots)

    def _add_keys(self, batch: pa.RecordBatch, rows: np.ndarray) -> None:
        if len(rows):
            cols = batch.select(self.columns) if self.columns else pa.record_batch({"_": [0]})
            self._key_chunks.append(cols.take(pa.array(rows)) if self.columns else cols)
            self._key_table = None

    # ---- decoding -----------------------------------------------------------
    def _int_key_batch(self) -> pa.RecordBatch:
        assert self._ints is not None and self._types is not None
        arr = pa.array(self._ints[: self.n_codes], type=self._types[0])
        return pa.record_batch([arr], names=self.columns)

    def key_table(self) -> pa.Table:
        """One row per code, in code order."""
        if self._lut is not None and self._ints is not None:
            if self._key_table is None or self._key_table.num_rows != self.n_codes:
                self._key_table = pa.Table.from_batches([self._int_key_batch()])
            return self._key_table
        if self._key_table is None:
            if not self._key_chunks:
                raise ValueError("KeyEncoder: no keys seen yet")
            self._key_table = pa.Table.from_batches(self._key_chunks).combine_chunks()
            self._key_chunks = self._key_table.to_batches() or self._key_chunks
        return self._key_table

    def keys(self, codes: np.ndarray) -> list[pa.Array]:
        """The key columns for ``codes`` (one Arrow array per key column)."""
        if not self.columns:
            return []
        if self._ints is not None and self._lut is not None and self._types is not None:
            # typed conversion, not Array.cast: the values came from that integer type, and
            # a cast would load pyarrow.compute (oop.io.compute_deferral)
            return [pa.array(self._ints[np.asarray(codes, np.int64)], type=self._types[0])]
        table = self.key_table()  # one chunk per column (combined once per new keys)
        idx = pa.array(np.asarray(codes, np.int64))
        # Array.take on the single chunk: a ChunkedArray's take, then combine_chunks, copied
        # every result key a second time (a third of a string-keyed emission)
        return [_single_chunk(table.column(i)).take(idx) for i in range(table.num_columns)]

    # ---- forgetting ------------------------------------------------------------
    def compact(self, keep: np.ndarray) -> None:
        """Forget every key but the codes ``keep`` (ascending), which become ``0..len(keep)-1``
        (same relative order: first appearance among the kept keys).

        The dictionary is rebuilt from the kept keys' rows (a fresh hash table,
        interner and key table), so memory follows the keys kept, not every
        key ever seen. Cost: O(kept keys) compiled + one Arrow take.
        """
        keep = np.asarray(keep, np.int64)
        fresh = KeyEncoder(self.columns)
        if self.columns and keep.shape[0]:
            kt = self.key_table().take(pa.array(keep))
            for b in kt.to_batches():
                fresh.encode(b)
            assert fresh.n_codes == keep.shape[0], (fresh.n_codes, keep.shape[0])
            if fresh._lut is not None and fresh._lut.shape[0] > max(1 << 16, 64 * keep.shape[0]):
                fresh._leave_direct()  # a lookup array over a wide key range: hash the few keys
        elif keep.shape[0]:  # no key columns: the one empty key
            fresh.n_codes = 1
            fresh._key_chunks = self._key_chunks[:1]
        self.__dict__.update(fresh.__dict__)

    def remap_values(self, old_to_new: np.ndarray) -> None:
        """Replace the value ``v`` of the one integer key column by ``old_to_new[v]``,
        every code unchanged (the new values must be distinct and >= 0). The dictionary is
        rebuilt from the new values in code order, so its hash table / lookup array map the
        new values to the same codes. Cost O(keys) compiled."""
        if len(self.columns) != 1 or not self.n_codes:
            if self.n_codes:
                raise ValueError("KeyEncoder.remap_values: one integer key column only")
            return
        kt = self.key_table()
        old = np.asarray(_single_chunk(kt.column(0)).to_numpy(zero_copy_only=False), np.int64)
        new = np.asarray(old_to_new, np.int64)[old]
        if (new < 0).any():
            raise ValueError("KeyEncoder.remap_values: a held value has no new value")
        fresh = KeyEncoder(self.columns)
        fresh.encode(pa.record_batch([pa.array(new).cast(kt.schema.field(0).type)],
                                     names=self.columns))
        assert fresh.n_codes == self.n_codes, (fresh.n_codes, self.n_codes)
        self.__dict__.update(fresh.__dict__)

    # ---- state ---------------------------------------------------------------
    def nbytes(self) -> int:
        """Approximate bytes held (O(1))."""
        b = self._codekeys.nbytes + self._slots.nbytes
        b += sum(si.nbytes() for si in self._interners.values())
        if self._lut is not None:
            b += self._lut.nbytes
        return b + 16 * self.n_codes

    def snapshot(self) -> dict[str, Any]:
        return {
            "n": self.n_codes, "codekeys": self._codekeys[: self.n_codes].copy(),
            "dicts": [dict(d) for d in self._dicts], "lut": None if self._lut is None else self._lut.copy(),
            "interners": {j: si.snapshot() for j, si in self._interners.items()},
            "direct": self._direct, "sdirect": self._sdirect, "keys": list(self._key_chunks),
            "types": self._types,
            "ints": None if self._ints is None else self._ints[: self.n_codes].copy(),
        }

    def restore(self, s: dict[str, Any]) -> None:
        self.n_codes = s["n"]
        ck = s["codekeys"]  # the direct path (int keys through the LUT) does not fill it
        self._codekeys = np.empty((max(1024, self.n_codes), len(self.columns) + 1), np.int64)
        self._codekeys[: ck.shape[0]] = ck
        self._slots = np.full(2048, _EMPTY, np.int64)
        if s["lut"] is None:
            self._reserve(max(self.n_codes, 1))
            self._slots[:] = _EMPTY
            _rehash(self._codekeys, self.n_codes, self._slots)
        self._dicts = [dict(d) for d in s["dicts"]]
        self._interners = {}
        for j, st in s["interners"].items():
            self._interners[j] = StringInterner()
            self._interners[j].restore(st)
        self._lut = None if s["lut"] is None else s["lut"].copy()
        self._direct, self._sdirect = s["direct"], s["sdirect"]
        self._key_chunks = list(s["keys"])
        self._key_table = None
        self._types = s["types"]
        self._ints = None if s["ints"] is None else np.concatenate([s["ints"], np.empty(1024, np.int64)])

    def _check(self) -> None:
        if self._lut is not None and self._ints is not None:
            assert (self._lut[self._ints[: self.n_codes]] == np.arange(self.n_codes)).all()
            return
        n_keys = 0 if not self._key_chunks else builtins_sum(b.num_rows for b in self._key_chunks)
        assert n_keys == self.n_codes, (n_keys, self.n_codes)
        if self._sdirect and self.n_codes:  # codes are the interner's ids
            si = self._interners[0]
            assert si.n_ids == self.n_codes
            last = self.key_table().column(0)[self.n_codes - 1].as_py()
            assert si.value(self.n_codes - 1) == (last.encode() if isinstance(last, str) else last)
        if self._lut is not None:
            assert int((self._lut != _EMPTY).sum()) == self.n_codes


builtins_sum = sum


def sortable(arr: pa.Array) -> pa.Array:
    """``arr`` in a type Arrow can sort and hash: dictionaries decoded, decimal32/64 widened."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr, t = arr.cast(t.value_type), t.value_type
    if pa.types.is_decimal(t) and t.bit_width < 128:
        arr = arr.cast(pa.decimal128(t.precision, t.scale))
    return arr


class ValueRanks:
    """Values of one column (strings, binary, ...) -> their rank in the sorted distinct values.

    The window lanes of min/max/first/last hold *ranks* for such a column,
    so the compiled kernels compare int64s and the order is the column's own
    (UTF-8 byte order for strings, which is code-point order). A batch that
    brings new values re-ranks: :meth:`encode` then also returns
    ``remap[old rank] = new rank``, which the caller applies to every rank it
    holds. Cost per batch: one :class:`KeyEncoder` pass; with new values, one
    Arrow sort of the distinct values seen so far (so a column with a new
    value in every batch pays O(distinct values) per batch).

    >>> import pyarrow as pa
    >>> vr = ValueRanks("s")
    >>> r, valid, remap = vr.encode(pa.record_batch({"s": ["b", "d", None]}))
    >>> r.tolist(), valid.tolist(), remap
    ([0, 1, 2], [1, 1, 0], None)
    >>> r, _, remap = vr.encode(pa.record_batch({"s": ["c", "a"]}))
    >>> r.tolist(), remap.tolist()
    ([2, 0], [1, 3, 4])
    >>> vr.values(np.array([3, 0]), np.array([False, True])).to_pylist()
    ['d', None]
    """

    def __init__(self, column: str, typ: pa.DataType | None = None) -> None:
        self.column = column
        self.type = typ
        self.enc = KeyEncoder([column])
        self.rank_of_code = np.zeros(0, np.int64)
        self._sorted: pa.Array | None = None  # values in rank order
        self.compact_at = self.COMPACT_MIN  # see compact

    def encode(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(rank per row, uint8 validity (empty = all valid), remap of older ranks or None)."""
        arr = batch.column(self.column)
        if self.type is None:
            self.type = arr.type
        codes = self.enc.encode(batch)
        remap = self._rerank() if self.enc.n_codes != self.rank_of_code.shape[0] else None
        valid = np.zeros(0, np.uint8)
        if arr.null_count:
            valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), np.uint8)
        return self.rank_of_code[codes], valid, remap

    def _rerank(self) -> np.ndarray | None:
        old = self.rank_of_code
        vals = sortable(self.enc.key_table().column(0).combine_chunks())
        order = np.asarray(pc.sort_indices(vals).to_numpy(), np.int64)  # nulls last
        self.rank_of_code = np.empty(order.shape[0], np.int64)
        self.rank_of_code[order] = np.arange(order.shape[0])
        self._sorted = vals.take(pa.array(order))
        if old.shape[0] == 0:
            return None
        code_of_old = np.empty(old.shape[0], np.int64)
        code_of_old[old] = np.arange(old.shape[0])
        return self.rank_of_code[code_of_old]

    COMPACT_MIN = 4096

    def compact(self, held: np.ndarray) -> np.ndarray | None:
        """Forget the values no state cell holds; ``held``: every rank still held.

        Called when the dictionary reached ``compact_at`` values; compacts when
        at most half of them are held. Returns ``remap`` (old rank -> new rank,
        -1 for a forgotten value) to apply to the state, or None. Then sets
        ``compact_at`` to twice the size kept, so the O(distinct values) check
        is amortized over the values added since. This bounds the dictionary
        of an unbounded vocabulary (a new id in every row) by the open windows'
        values instead of every value ever seen.
        """
        keep = np.unique(held)
        n = self.enc.n_codes
        if 2 * keep.shape[0] > n or self._sorted is None:
            self.compact_at = max(self.COMPACT_MIN, 2 * n)
            return None
        kept = self._sorted.take(pa.array(keep))
        self.enc = KeyEncoder([self.column])
        if keep.shape[0]:
            typ = self.type if self.type is not None else kept.type
            self.enc.encode(pa.record_batch([kept if kept.type == typ else kept.cast(typ)],
                                            names=[self.column]))
        self.rank_of_code = np.arange(keep.shape[0], dtype=np.int64)
        self._sorted = kept
        remap = np.full(n, -1, np.int64)
        remap[keep] = np.arange(keep.shape[0])
        self.compact_at = max(self.COMPACT_MIN, 2 * keep.shape[0])
        return remap

    def values(self, ranks: np.ndarray, null: np.ndarray) -> pa.Array:
        """The column's values at ``ranks`` (null where ``null``; empty ``null`` = none)."""
        assert self.type is not None
        n = ranks.shape[0]
        isnull = null.astype(bool) if null.shape[0] else np.zeros(n, bool)
        if self._sorted is None or isnull.all():
            return pa.nulls(n, self.type)
        out = self._sorted.take(pa.array(np.where(isnull, 0, ranks)))
        if isnull.any():
            out = pc.if_else(pa.array(isnull), pa.scalar(None, out.type), out)
        return out if out.type == self.type else out.cast(self.type)

    def nbytes(self) -> int:
        return self.enc.nbytes() + self.rank_of_code.nbytes

    def snapshot(self) -> dict[str, Any]:
        return {"enc": self.enc.snapshot(), "type": self.type, "compact_at": self.compact_at}

    def restore(self, s: dict[str, Any]) -> None:
        """The ranks are a function of the values seen, so they are recomputed, not stored."""
        self.enc.restore(s["enc"])
        self.type, self.compact_at = s["type"], s["compact_at"]
        self.rank_of_code = np.zeros(0, np.int64)
        self._sorted = None
        if self.enc.n_codes:
            self._rerank()
