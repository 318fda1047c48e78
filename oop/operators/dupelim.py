"""DupElim: drop tuples equal (on a key) to one seen before (004 §8.2).

What it computes: the first tuple of every distinct key ``K(t)`` (``K`` = the
listed columns, default all columns), in arrival order. When ``K`` is all
columns this is SQL ``DISTINCT``; otherwise the representative row of a key is
the first to *arrive* (other columns may differ between duplicates). Nulls in
key columns compare equal to each other (as in ``DISTINCT``).

State: the set of keys seen whose progressing attribute is still open, each
with its time (the time column is part of the key).

On a batch: new rows are emitted at once (in arrival order) and their keys
added to the state; duplicates are counted in
``metrics.counters["duplicates"]``. Two kernels do this:

* integer/timestamp keys (the common case): a numba open-addressing hash set
  of key rows (``_dupelim_kernel``), O(batch) per batch;
* any other key types (strings ...), or ``kernel="arrow"``: one Arrow hash
  group-by over ``seen keys + batch keys``, O(state + batch) per batch.

On a punctuation ``P(ts, v)``: a key with ``ts < v`` can never arrive again
(every later tuple has ``ts >= v``), so it is purged; the punctuation is
forwarded unchanged (the output is a subset of the input).

The key rule: the key **must include the progressing attribute**, otherwise
no key could ever be purged and the state would grow without bound. A key
without it is refused at plan time unless ``unbounded=True`` says the caller
accepts state that is never purged.

Accounting: ``tuples_in == tuples_out + duplicates``; state items = seen keys.

Cost: O(batch) (integer keys) or O(state + batch) (other keys) per batch,
O(state) per punctuation (a compaction or one filter). The tuple-at-a-time
reference is :func:`dupelim_reference`.

>>> import pyarrow as pa, oop
>>> t = pa.table({"ts": [1, 1, 2, 1], "k": [7, 7, 7, 8]})
>>> oop.from_arrow(t, time="ts", unit="s", batch_size=2).dupelim().collect().to_pylist()
[{'ts': 1, 'k': 7}, {'ts': 2, 'k': 7}, {'ts': 1, 'k': 8}]
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.metrics import StateSize
from oop.operators._dupelim_kernel import insert_new, new_slots, purge_below, rebuild
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import INT64_MIN, Element, Punctuation

__all__ = ["DupElim", "dupelim_reference"]

_ROW = "__oop_row"


class DupElim(Operator):
    """Drop duplicates on ``columns`` (default: all); state purged by punctuation."""

    def __init__(
        self,
        columns: Sequence[str] | None = None,
        name: str = "dupelim",
        unbounded: bool = False,
        kernel: str = "auto",
    ) -> None:
        super().__init__(name)
        if kernel not in ("auto", "arrow"):
            raise ConfigError(
                f"{self.name}: kernel must be 'auto' (numba for integer keys) or 'arrow', "
                f"got {kernel!r}"
            )
        self.kernel = kernel
        if isinstance(columns, str):
            columns = [columns]
        if columns is not None and not list(columns):
            raise ConfigError(f"{self.name}: give at least one key column, or None for all")
        self.key_columns = list(columns) if columns is not None else None
        self.unbounded = unbounded
        self.keys: list[str] = []
        self.time: str | None = None
        self.seen: pa.Table | None = None
        self._items = 0
        self._bytes = 0
        self.purged_to = INT64_MIN
        # integer-key kernel state (used when every key column is integer/timestamp)
        self.int_path = False
        self.store = np.zeros((0, 0), dtype=np.int64)
        self.m = 0
        self.slots = new_slots(0)

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        keys = self.key_columns if self.key_columns is not None else list(info.schema.names)
        require_columns(info, keys, self.name)
        if _ROW in keys:
            raise ConfigError(f"{self.name}: column name {_ROW!r} is reserved")
        self.time = info.time
        if not self.unbounded and (info.time is None or info.time not in keys):
            raise ConfigError(
                f"{self.name}: the key {keys} of stream {info.name!r} does not include its "
                f"progressing attribute {info.time!r}, so no punctuation could ever purge a key "
                "and the state would grow forever; add the time column to the key, or pass "
                "unbounded=True to accept unbounded state"
            )
        self.keys = keys
        self.seen = pa.schema([info.schema.field(k) for k in keys]).empty_table()
        types = [info.schema.field(k).type for k in keys]
        self.int_path = self.kernel == "auto" and len(keys) <= 62 and all(
            pa.types.is_integer(t) or pa.types.is_timestamp(t) for t in types)
        if self.int_path:
            self.store = np.zeros((0, len(keys) + 1), dtype=np.int64)
        return info.with_schema(info.schema, name=self.name)

    # ---- the integer-key kernel path ----------------------------------------------
    def key_matrix(self, batch: pa.RecordBatch) -> np.ndarray:
        """Key columns as an int64 matrix ``(n, k + 1)``; the last column holds null bits."""
        n = batch.num_rows
        mat = np.zeros((n, len(self.keys) + 1), dtype=np.int64)
        for c, k in enumerate(self.keys):
            arr = batch.column(k)
            if pa.types.is_timestamp(arr.type):
                arr = arr.view(pa.int64())
            elif not pa.types.is_int64(arr.type):
                arr = arr.cast(pa.int64(), safe=False)
            if arr.null_count:
                mat[:, -1] |= np.asarray(pc.is_null(arr).to_numpy(zero_copy_only=False),
                                         dtype=np.int64) << c
                arr = arr.fill_null(0)
            mat[:, c] = arr.to_numpy(zero_copy_only=False)
        return mat

    def _ensure_capacity(self, extra: int) -> None:
        need = self.m + extra
        if self.store.shape[0] < need:
            grown = np.zeros((max(need, 2 * self.store.shape[0], 64), self.store.shape[1]),
                             dtype=np.int64)
            grown[: self.m] = self.store[: self.m]
            self.store = grown
        if self.slots.shape[0] < 2 * need:
            self.slots = new_slots(max(need, self.slots.shape[0]))
            rebuild(self.store, self.m, self.slots)

    def _int_new_rows(self, batch: pa.RecordBatch) -> np.ndarray:
        mat = self.key_matrix(batch)
        self._ensure_capacity(len(mat))
        mask, self.m = insert_new(mat, self.store, self.m, self.slots)
        self._items = self.m
        self._bytes = self.m * self.store.shape[1] * 8
        return np.nonzero(mask)[0]

    # ---- data ------------------------------------------------------------------
    def new_rows(self, batch: pa.RecordBatch) -> np.ndarray:
        """Indices (ascending) of the rows of ``batch`` whose key is new. O(state + batch)."""
        assert self.seen is not None
        n = batch.num_rows
        cols = {k: batch.column(k) for k in self.keys}
        cols[_ROW] = pa.array(np.arange(n, dtype=np.int64))
        fresh = pa.table(cols)
        old = self.seen.append_column(_ROW, pa.array(np.full(self.seen.num_rows, -1, np.int64)))
        both = pa.concat_tables([old, fresh.cast(old.schema)]) if old.num_rows else fresh
        firsts = both.group_by(self.keys, use_threads=False).aggregate([(_ROW, "min")])
        idx = firsts.column(f"{_ROW}_min").to_numpy()
        idx = idx[idx >= 0]
        idx.sort()
        return idx

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.seen is not None
        if batch.num_rows == 0:
            return []
        idx = self._int_new_rows(batch) if self.int_path else self.new_rows(batch)
        self.metrics.count("duplicates", batch.num_rows - len(idx))
        if not len(idx):
            return []
        out = batch if len(idx) == batch.num_rows else batch.take(pa.array(idx))
        if self.int_path:
            return [out]
        new_keys = pa.Table.from_batches([out.select(self.keys)]).cast(self.seen.schema)
        self.seen = pa.concat_tables([self.seen, new_keys])
        self._items += new_keys.num_rows
        self._bytes += new_keys.nbytes
        return [out]

    # ---- punctuation -------------------------------------------------------------
    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        assert self.seen is not None
        if (isinstance(punctuation, Punctuation) and punctuation.attr == self.time
                and self.time in self.keys and punctuation.value > self.purged_to):
            self.purged_to = punctuation.value
            if self.int_path:
                if self.m:
                    self.m = purge_below(self.store, self.m, self.slots,
                                         self.keys.index(self.time), int(punctuation.value))
                    self._items = self.m
                    self._bytes = self.m * self.store.shape[1] * 8
            elif self._items:
                col = self.seen.column(self.time)
                if pa.types.is_timestamp(col.type):
                    col = col.cast(pa.int64())
                keep = pc.greater_equal(col, pa.scalar(punctuation.value, pa.int64()))
                self.seen = self.seen.filter(keep).combine_chunks()
                self._items = self.seen.num_rows
                self._bytes = self.seen.nbytes
        return [punctuation]

    def flush(self) -> list[Element]:
        assert self.seen is not None
        self.seen = self.seen.schema.empty_table()
        self.m = 0
        self.slots[:] = -1
        self._items = self._bytes = 0
        return []

    # ---- state -------------------------------------------------------------------
    def state_size(self) -> StateSize:
        return StateSize(self._items, self._bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "seen": self.seen, "purged_to": self.purged_to,
                "store": self.store[: self.m].copy()}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.seen = state["seen"]
        self.purged_to = state["purged_to"]
        assert self.seen is not None
        if self.int_path:
            self.store = state["store"].copy()
            if not len(self.store):
                self.store = np.zeros((0, len(self.keys) + 1), dtype=np.int64)
            self.m = len(state["store"])
            self.slots = new_slots(self.m)
            rebuild(self.store, self.m, self.slots)
            self._items = self.m
            self._bytes = self.m * self.store.shape[1] * 8
        else:
            self._items = self.seen.num_rows
            self._bytes = self.seen.nbytes

    def _check(self) -> None:
        assert self.seen is not None
        if self.int_path:
            held = self.store[: self.m]
            assert self._items == self.m
            assert int((self.slots >= 0).sum()) == self.m, "slot table out of sync with the store"
            assert len(np.unique(held, axis=0)) == self.m, "the state holds a key twice"
            if self.m and self.time in self.keys and self.purged_to != INT64_MIN:
                assert held[:, self.keys.index(self.time)].min() >= self.purged_to
            return
        assert self._items == self.seen.num_rows
        if self._items and self.time in self.keys and self.purged_to != INT64_MIN:
            col = self.seen.column(self.time)
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.int64())
            assert pc.min(col).as_py() >= self.purged_to, "a purged key is still held"
        if self._items:
            distinct = self.seen.group_by(self.keys, use_threads=False).aggregate([]).num_rows
            assert distinct == self._items, "the state holds a key twice"


def dupelim_reference(
    items: Iterable[Any], keys: Sequence[str], time: str
) -> tuple[list[dict[str, Any]], list[int], int]:
    """Tuple-at-a-time DupElim over a feed of batches and punctuations.

    Returns ``(rows emitted, punctuation values forwarded, keys held at the end)``.
    """
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    puncts: list[int] = []
    pos = keys.index(time) if time in keys else None
    for item in items:
        if isinstance(item, Punctuation):
            puncts.append(item.value)
            if pos is not None:
                seen = {k for k in seen if k[pos] >= item.value}
            continue
        for r in item.to_pylist():
            k = tuple(r[c] for c in keys)
            if k not in seen:
                seen.add(k)
                out.append(r)
    return out, puncts, len(seen)
