"""Sort buffers: the in-order way of handling disorder (004 §3.3; Aurora's BSort).

What it computes: the same bag of tuples, re-emitted in non-decreasing order
of the progressing attribute, minus the tuples that arrive too late for the
order already emitted (those are *dropped and counted*, or routed to the late
side output -- the price of IOP when the slack is too small).

Three release rules (``mode``), all *heartbeat-driven* as well: an input
punctuation ``P(a, v)`` releases every buffered tuple with ``a < v``.

* ``"punctuation"`` (heartbeat only) -- buffer everything; release on
  punctuation. Nothing is late while the punctuation is valid.
* ``"tuples"`` (BSort, tuple slack ``n``) -- keep the ``n`` most recently
  arrived tuples in a min-heap; when a tuple arrives and the heap holds more
  than ``n``, the smallest is emitted. A tuple smaller than the last emitted
  one is late (004 §3.3: disorder beyond ``n`` tuples is not tolerated).
* ``"time"`` (time slack ``d``) -- with ``hwm`` the largest time seen so far,
  release every tuple with ``a < hwm - d``; a tuple arriving with
  ``a < hwm - d`` (hwm of the tuples before it) is late. This is
  the *consistent* slack of 004 §6.1.5 when it feeds a window aggregate: a
  late tuple is dropped from every extent it belongs to.

On a tuple: buffered (or late). On a punctuation: release ``a < v`` sorted,
then forward the punctuation. After a batch in ``time`` mode the operator
emits ``P(a, hwm - d)`` when it grew (its output is ordered, so that bound
holds). Output punctuation never exceeds what the released rows allow.

State: the buffered rows (items = rows, bytes = their Arrow size).
Cost per batch: O(pool + batch) copies and a stable sort of the batch;
``tuples`` mode runs a numba heap kernel, O(batch * log n).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from numba import njit

from oop.errors import ConfigError
from oop.iop_baseline._late import DropsLate
from oop.operators.base import StreamInfo
from oop.metrics import StateSize
from oop.iop_baseline._pool import RowPool, take_batches
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import parse_duration, time_values

__all__ = ["SortBuffer", "SortSpec", "bsort_reference", "time_slack_reference"]

Mode = Literal["punctuation", "tuples", "time"]


@dataclass(frozen=True)
class SortSpec:
    """How a sort buffer releases tuples: ``mode`` and its slack amount.

    ``slack`` is a tuple count for ``tuples`` and a duration ("2s" or an int in
    the stream's unit) for ``time``; ignored for ``punctuation``.

    >>> SortSpec("tuples", 100).mode
    'tuples'
    >>> SortSpec("time", -1)
    Traceback (most recent call last):
    ...
    oop.errors.ConfigError: sort buffer: slack must be >= 0, got -1 (a negative slack would release tuples before they are seen)
    """

    mode: Mode = "punctuation"
    slack: int | str = 0

    def __post_init__(self) -> None:
        if self.mode not in ("punctuation", "tuples", "time"):
            raise ConfigError(
                f"sort buffer: unknown mode {self.mode!r}; use 'punctuation' (heartbeat), "
                "'tuples' (BSort slack n) or 'time' (slack d)"
            )
        if self.mode == "tuples" and not isinstance(self.slack, (int, np.integer)):
            raise ConfigError(f"sort buffer: tuple slack must be an integer count, got {self.slack!r}")
        if isinstance(self.slack, (int, np.integer)) and self.slack < 0:
            raise ConfigError(
                f"sort buffer: slack must be >= 0, got {self.slack} (a negative slack would "
                "release tuples before they are seen)"
            )


# ---- kernels -----------------------------------------------------------
@njit(cache=True)
def _less(ta: np.int64, ia: np.int64, tb: np.int64, ib: np.int64) -> bool:
    return ta < tb or (ta == tb and ia < ib)


@njit(cache=True)
def _bsort_kernel(heap_t, heap_i, h, new_t, base, n, low):  # type: ignore[no-untyped-def]
    """BSort over one batch. ``heap_*[:h]`` is a valid min-heap on (time, index).

    Returns (emitted indices in order, late indices, new heap size, new low).
    """
    m = new_t.shape[0]
    emit = np.empty(m + 1, np.int64)
    ne = 0
    late = np.empty(m + 1, np.int64)
    nl = 0
    for k in range(m):
        t = new_t[k]
        idx = base + k
        if t < low:
            late[nl] = idx
            nl += 1
            continue
        j = h
        heap_t[j] = t
        heap_i[j] = idx
        h += 1
        while j > 0:
            p = (j - 1) // 2
            if _less(heap_t[j], heap_i[j], heap_t[p], heap_i[p]):
                heap_t[j], heap_t[p] = heap_t[p], heap_t[j]
                heap_i[j], heap_i[p] = heap_i[p], heap_i[j]
                j = p
            else:
                break
        if h > n:
            emit[ne] = heap_i[0]
            ne += 1
            if heap_t[0] > low:
                low = heap_t[0]
            h -= 1
            heap_t[0] = heap_t[h]
            heap_i[0] = heap_i[h]
            j = 0
            while True:
                c = 2 * j + 1
                if c >= h:
                    break
                if c + 1 < h and _less(heap_t[c + 1], heap_i[c + 1], heap_t[c], heap_i[c]):
                    c += 1
                if _less(heap_t[c], heap_i[c], heap_t[j], heap_i[j]):
                    heap_t[j], heap_t[c] = heap_t[c], heap_t[j]
                    heap_i[j], heap_i[c] = heap_i[c], heap_i[j]
                    j = c
                else:
                    break
    return emit[:ne], late[:nl], h, low


def _arrival_bounds(times: np.ndarray, hwm: int, d: int) -> np.ndarray:
    """``max(hwm, max of earlier tuples of the batch) - d`` for each tuple (int64, saturating)."""
    prev = np.empty_like(times)
    if len(times):
        prev[0] = hwm
        if len(times) > 1:
            prev[1:] = np.maximum.accumulate(times[:-1])
            np.maximum(prev[1:], hwm, out=prev[1:])
    with np.errstate(over="ignore"):
        b = prev - d
    b[prev == INT64_MIN] = INT64_MIN
    return b


# ---- slow references (tuple at a time) ---------------------------------
def bsort_reference(times: list[int], n: int) -> tuple[list[int], list[int]]:
    """BSort, one tuple at a time: (emitted positions in order, late positions).

    Keeps the ``n`` most recent tuples; emits the smallest (earliest arrival
    on ties) when more than ``n`` are held; a tuple below the last emitted one
    is late. At the end the remaining tuples are emitted sorted.
    """
    held: list[tuple[int, int]] = []
    out: list[int] = []
    late: list[int] = []
    low = INT64_MIN
    for i, t in enumerate(times):
        if t < low:
            late.append(i)
            continue
        held.append((t, i))
        if len(held) > n:
            m = min(held)
            held.remove(m)
            out.append(m[1])
            low = max(low, m[0])
    out.extend(i for _, i in sorted(held))
    return out, late


def time_slack_reference(times: list[int], d: int) -> tuple[list[int], list[int]]:
    """Time slack, one tuple at a time: (emitted positions in order, late positions)."""
    held: list[tuple[int, int]] = []
    out: list[int] = []
    late: list[int] = []
    hwm: int | None = None
    for i, t in enumerate(times):
        if hwm is not None and t < hwm - d:
            late.append(i)
            continue
        hwm = t if hwm is None else max(hwm, t)
        held.append((t, i))
        ready = sorted(x for x in held if x[0] < hwm - d)
        for x in ready:
            held.remove(x)
        out.extend(i for _, i in ready)
    out.extend(i for _, i in sorted(held))
    return out, late


# ---- the operator ------------------------------------------------------
class SortBuffer(DropsLate):
    """Re-emit the input in order of its progressing attribute (see module doc).

    ``spec`` is a :class:`SortSpec` (or pass ``mode=``/``slack=``). ``late`` is
    the policy for tuples that arrive after the order has moved past them:
    ``drop`` (counted) or ``side_output``; ``raise`` raises. ``heartbeat=False``
    ignores input punctuation (a pure slack plan).
    """

    def __init__(
        self,
        spec: SortSpec | None = None,
        *,
        mode: Mode | None = None,
        slack: int | str | None = None,
        late: LatePolicy | str = "drop",
        heartbeat: bool = True,
        name: str | None = None,
    ) -> None:
        self.heartbeat = heartbeat
        if spec is None:
            spec = SortSpec(mode or "punctuation", 0 if slack is None else slack)
        super().__init__(name or f"sort[{spec.mode}]")
        self.spec = spec
        self.late_policy = LatePolicy.parse(late)
        if self.late_policy is LatePolicy.UPDATE:
            raise ConfigError(f"{self.name}: an in-order sort buffer cannot revise output; "
                              "use drop, side_output or raise")
        self.attr = ""
        self.d = 0
        self.pool: RowPool | None = None
        self.low = INT64_MIN      # tuples below it are late
        self.hwm = INT64_MIN      # largest time seen (time mode)
        self.punct_out = INT64_MIN  # last punctuation emitted
        self.dropped = 0

    def infer_output(self, inputs: list[StreamInfo]) -> StreamInfo:  # type: ignore[override]
        info = inputs[0]
        if info.time is None:
            raise ConfigError(f"{self.name}: stream {info.name!r} has no progressing attribute to sort on")
        self.attr = info.time
        if self.spec.mode == "time":
            self.d = parse_duration(self.spec.slack, info.unit())
        elif self.spec.mode == "tuples":
            self.d = int(self.spec.slack)
        self.pool = RowPool(info.schema)
        return info.with_schema(info.schema, name=self.name)

    # ---- helpers -------------------------------------------------------
    def _late(self, batch: pa.RecordBatch, mask: np.ndarray
              ) -> tuple[pa.RecordBatch, np.ndarray | None]:
        return self.drop_late(batch, mask, lambda i: (
            f"{self.name}: tuple with {self.attr}={int(time_values(batch, self.attr)[i])} arrived after the sort buffer "
            f"had released later tuples (disorder beyond slack {self.spec.slack!r}); "
            "increase the slack or use late='drop'/'side_output'"))

    def _release_below(self, v: int) -> list[Element]:
        """Emit the sorted prefix of the pool with time < v."""
        assert self.pool is not None
        k = int(np.searchsorted(self.pool.times, v, side="left"))
        if k == 0:
            return []
        tab, times = self.pool.table, self.pool.times
        out = take_batches(tab, np.arange(k, dtype=np.int64))
        self.pool.replace(tab, np.arange(k, len(times), dtype=np.int64), times[k:])
        return list(out)

    def _punct(self, v: int) -> list[Element]:
        if v > self.punct_out:
            self.punct_out = v
            return [Punctuation(self.attr, v)]
        return []

    # ---- handlers --------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.pool is not None
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.attr, self.inputs[0].name)
        mode = self.spec.mode
        if mode == "tuples":
            return self._on_batch_tuples(batch, times)
        if mode == "time":
            bounds = _arrival_bounds(times, self.hwm, self.d)
            late = (times < bounds) | (times < self.low)
        else:
            late = times < self.low
        batch, keep = self._late(batch, late)
        if keep is not None:
            times = times[keep]
        if mode == "time" and len(times):
            self.hwm = max(self.hwm, int(times.max()))
        order = np.argsort(times, kind="stable")
        tab, all_t = self.pool.combined(batch, times)
        n0 = len(self.pool)
        # pool is sorted; merge it with the sorted batch (stable: pool rows first on ties)
        idx = np.concatenate([np.arange(n0, dtype=np.int64), n0 + order])
        merged = np.argsort(all_t[idx], kind="stable")
        idx = idx[merged]
        if mode != "time":
            self.pool.replace(tab, idx, all_t[idx])
            return []
        bound = self.hwm - self.d if self.hwm != INT64_MIN else INT64_MIN
        self.low = max(self.low, bound)
        st = all_t[idx]
        k = int(np.searchsorted(st, self.low, side="left"))
        out: list[Element] = list(take_batches(tab, idx[:k]))
        self.pool.replace(tab, idx[k:], st[k:])
        out.extend(self._punct(self.low))
        return out

    def _on_batch_tuples(self, batch: pa.RecordBatch, times: np.ndarray) -> list[Element]:
        assert self.pool is not None
        tab, all_t = self.pool.combined(batch, times)
        n0 = len(self.pool)
        cap = n0 + len(times) + 1
        heap_t = np.empty(cap, np.int64)
        heap_i = np.empty(cap, np.int64)
        heap_t[:n0] = self.pool.times  # a sorted array is a valid min-heap
        heap_i[:n0] = np.arange(n0, dtype=np.int64)
        emit, late, h, low = _bsort_kernel(heap_t, heap_i, n0, np.ascontiguousarray(times),
                                           n0, self.d, self.low)
        self.low = int(low)
        if len(late):
            mask = np.zeros(len(times), dtype=bool)
            mask[late - n0] = True
            self._late(batch, mask)
        rest_t, rest_i = heap_t[:h], heap_i[:h]
        o = np.lexsort((rest_i, rest_t))
        out: list[Element] = list(take_batches(tab, emit))
        self.pool.replace(tab, rest_i[o], rest_t[o])
        return out

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self.attr:
            return [punctuation]
        if not self.heartbeat:
            return []  # pure slack: input punctuation is ignored (004 §6.1.5 slack vs punctuation)
        v = punctuation.value
        self.low = max(self.low, v)
        out = self._release_below(v)
        return out + self._punct(v)

    def flush(self) -> list[Element]:
        self.record_accuracy()
        assert self.pool is not None
        out: list[Element] = list(take_batches(self.pool.table, np.arange(len(self.pool))))
        self.pool.replace(self.pool.table, np.zeros(0, np.int64), np.zeros(0, np.int64))
        return out

    # ---- state ---------------------------------------------------------------
    def state_size(self) -> StateSize:
        if self.pool is None:
            return StateSize()
        return StateSize(len(self.pool), self.pool.nbytes)

    def snapshot(self) -> Any:
        assert self.pool is not None
        return {**super().snapshot(), "pool": self.pool.snapshot(), "low": self.low,
                "hwm": self.hwm, "punct_out": self.punct_out, "dropped": self.dropped}

    def restore(self, state: Any) -> None:
        super().restore(state)
        assert self.pool is not None
        self.pool.restore(state["pool"])
        self.low, self.hwm = state["low"], state["hwm"]
        self.punct_out, self.dropped = state["punct_out"], state["dropped"]

    def _check(self) -> None:
        assert self.pool is not None
        self.pool._check()
        if len(self.pool):  # everything below ``low`` was released or is late
            assert int(self.pool.times[0]) >= self.low, (int(self.pool.times[0]), self.low)
        if self.spec.mode == "tuples":
            assert len(self.pool) <= self.d, (len(self.pool), self.d)
