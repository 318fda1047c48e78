"""Reorder: ordered output after any OOP operator, by a serial-number ring (003 §3).

What it computes: the same tuples, emitted in increasing order of a dense
serial-number column (``start, start+1, ...``, each serial exactly once) --
for users who need results in arrival order after an order-agnostic plan
(e.g. results of key-partitioned parallel shards, 003; or a ``row_number``
attached at the source).

The ring (003 Fig. 4, single-threaded here): ``ring[s mod C]`` holds the
buffered row of serial ``s``; ``next`` is the serial to emit next. On a batch
each row is placed in its slot (O(1)), then the run of filled slots from
``next`` is emitted in order and cleared. A serial more than ``C`` ahead of
``next`` grows the ring (doubling; 003 would block the worker instead, a
single-threaded engine cannot wait) and ``ring_grows`` counts it. A serial
below ``next`` (already emitted) or seen twice is a contract violation:
late policy (``drop`` counted / ``side_output``) or :class:`ValueError` for
a duplicate in the ring.

Punctuation on the stream's progressing attribute is *held back*: the
operator forwards ``P(a, min(v, min a of held rows))`` so no held row
violates a punctuation already forwarded. Every input row is emitted, held,
or counted late (``_check`` asserts it). Cost: O(batch + held) per batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from oop.errors import ConfigError
from oop.iop_baseline._pool import EMPTY_I64, take_batches
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import time_values

__all__ = ["Reorder", "reorder_reference"]


@njit(cache=True)
def _place_and_drain(ring, ring_serial, serials, base, nxt):  # type: ignore[no-untyped-def]
    """Place rows ``base+k`` at ``serials[k] mod C``; drain from ``nxt``.

    Returns (emitted row indices in serial order, new next, index of a
    duplicate serial or -1).
    """
    c = ring.shape[0]
    mask = c - 1
    for k in range(serials.shape[0]):
        slot = serials[k] & mask
        if ring[slot] != -1:
            return EMPTY, nxt, k
        ring[slot] = base + k
        ring_serial[slot] = serials[k]
    out = np.empty(serials.shape[0] + base, np.int64)
    n = 0
    while True:
        slot = nxt & mask
        if ring[slot] == -1 or ring_serial[slot] != nxt:
            break
        out[n] = ring[slot]
        n += 1
        ring[slot] = -1
        nxt += 1
    return out[:n], nxt, -1


EMPTY = np.zeros(0, np.int64)


def reorder_reference(serials: list[int], start: int = 0) -> list[list[int]]:
    """Tuple at a time: for each arriving serial, the serials released right after it."""
    held: set[int] = set()
    nxt = start
    out: list[list[int]] = []
    for s in serials:
        held.add(s)
        rel = []
        while nxt in held:
            held.remove(nxt)
            rel.append(nxt)
            nxt += 1
        out.append(rel)
    return out


class Reorder(Operator):
    """Emit rows in order of the dense serial column ``serial`` (see module doc)."""

    def __init__(self, serial: str, *, start: int = 0, capacity: int = 1024,
                 late: LatePolicy | str = "drop", name: str = "reorder") -> None:
        super().__init__(name)
        if capacity < 1:
            raise ConfigError(f"{name}: ring capacity must be >= 1, got {capacity}")
        self.serial = serial
        self.next = int(start)
        cap = 1 << max(0, int(capacity - 1).bit_length())
        self.ring = np.full(cap, -1, np.int64)
        self.ring_serial = np.zeros(cap, np.int64)
        self.late_policy = LatePolicy.parse(late)
        self.ring_grows = 0
        self.held: pa.Table | None = None
        self.held_serials = EMPTY_I64
        self.held_times = EMPTY_I64
        self.held_bytes = 0
        self.punct_in = INT64_MIN
        self.punct_out = INT64_MIN
        self.dropped = 0
        self.attr: str | None = None

    def infer_output(self, inputs: list[StreamInfo]) -> StreamInfo:  # type: ignore[override]
        info = inputs[0]
        require_columns(info, [self.serial], self.name)
        if not pa.types.is_integer(info.schema.field(self.serial).type):
            raise ConfigError(f"{self.name}: serial column {self.serial!r} must be an integer column, "
                              f"got {info.schema.field(self.serial).type}")
        self.attr = info.time
        self.held = info.schema.empty_table()
        return info.with_schema(info.schema, name=self.name)

    def _grow(self, need: int) -> None:
        cap = len(self.ring)
        while cap < need:
            cap *= 2
        self.ring = np.full(cap, -1, np.int64)
        self.ring_serial = np.zeros(cap, np.int64)
        slots = self.held_serials & (cap - 1)
        self.ring[slots] = np.arange(len(self.held_serials), dtype=np.int64)
        self.ring_serial[slots] = self.held_serials
        self.ring_grows += 1

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.held is not None
        if batch.num_rows == 0:
            return []
        serials = pc.cast(batch.column(self.serial), pa.int64()).to_numpy(zero_copy_only=False)
        late = serials < self.next
        if late.any():
            if self.late_policy is LatePolicy.RAISE:
                raise ValueError(f"{self.name}: serial {int(serials[late][0])} arrived after serial "
                                 f"{self.next - 1} was emitted; serials must be unique")
            self.route_late(batch.filter(pa.array(late)), self.late_policy)
            self.dropped += int(late.sum())
            batch, serials = batch.filter(pa.array(~late)), serials[~late]
            if not len(serials):
                return []
        need = int(serials.max()) - self.next + 1
        if need > len(self.ring):
            self._grow(need)
        n0 = len(self.held_serials)
        emitted, nxt, dup = _place_and_drain(self.ring, self.ring_serial,
                                             np.ascontiguousarray(serials), n0, self.next)
        if dup >= 0:
            raise ValueError(f"{self.name}: serial {int(serials[dup])} appears twice in column "
                             f"{self.serial!r}; the reorder ring needs unique serial numbers")
        self.next = int(nxt)
        tab = pa.concat_tables([self.held, pa.Table.from_batches([batch])]) if n0 else \
            pa.Table.from_batches([batch], schema=self.held.schema)
        all_s = np.concatenate([self.held_serials, serials])
        times = time_values(batch, self.attr) if self.attr else None
        all_t = np.concatenate([self.held_times, times]) if times is not None else None
        keep = np.ones(len(all_s), dtype=bool)
        keep[emitted] = False
        rest = np.nonzero(keep)[0]
        out: list[Element] = list(take_batches(tab, emitted))
        self.held = tab.take(pa.array(rest)).combine_chunks() if len(rest) else tab.schema.empty_table()
        self.held_serials = all_s[rest]
        self.held_times = all_t[rest] if all_t is not None else EMPTY_I64
        self.held_bytes = int(self.held.nbytes)
        # re-point the ring at the compacted rows
        slots = self.held_serials & (len(self.ring) - 1)
        self.ring[slots] = np.arange(len(rest), dtype=np.int64)
        return out + self._punct()

    def _punct(self) -> list[Element]:
        if self.attr is None or self.punct_in == INT64_MIN:
            return []
        v = self.punct_in
        if len(self.held_times):
            v = min(v, int(self.held_times.min()))
        if v > self.punct_out:
            self.punct_out = v
            return [Punctuation(self.attr, v)]
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if isinstance(punctuation, Punctuation) and punctuation.attr == self.attr:
            self.punct_in = max(self.punct_in, punctuation.value)
            return self._punct()
        return [] if len(self.held_serials) else [punctuation]

    def flush(self) -> list[Element]:
        """At end of stream the gaps will never fill: emit what is held, in serial order."""
        assert self.held is not None
        order = np.argsort(self.held_serials, kind="stable")
        out = list(take_batches(self.held, order))
        self.held = self.held.schema.empty_table()
        self.held_serials = self.held_times = EMPTY_I64
        self.held_bytes = 0
        self.ring[:] = -1
        return out

    def state_size(self) -> StateSize:
        return StateSize(len(self.held_serials), self.held_bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "held": self.held, "serials": self.held_serials.copy(),
                "times": self.held_times.copy(), "next": self.next, "ring": self.ring.copy(),
                "ring_serial": self.ring_serial.copy(), "punct": (self.punct_in, self.punct_out),
                "dropped": self.dropped}

    def restore(self, state: Any) -> None:
        super().restore(state)
        # copies: resuming twice from one checkpoint must not see the first run's changes
        self.held = state["held"]
        self.held_serials, self.held_times = state["serials"].copy(), state["times"].copy()
        self.next, self.ring, self.ring_serial = (state["next"], state["ring"].copy(),
                                                  state["ring_serial"].copy())
        self.punct_in, self.punct_out = state["punct"]
        self.dropped = state["dropped"]
        self.held_bytes = int(self.held.nbytes) if self.held is not None else 0

    def _check(self) -> None:
        assert self.held is not None and self.held.num_rows == len(self.held_serials)
        assert bool(np.all(self.held_serials > self.next - 1)), "held a serial already passed"
        c = len(self.ring)
        filled = np.nonzero(self.ring != -1)[0]
        assert len(filled) == len(self.held_serials), (len(filled), len(self.held_serials))
        for j, s in enumerate(self.held_serials.tolist()):
            assert self.ring[s & (c - 1)] == j and self.ring_serial[s & (c - 1)] == s
        assert self.next + c > (int(self.held_serials.max()) if len(self.held_serials) else INT64_MIN) \
            or not len(self.held_serials)
        m = self.metrics
        assert m.tuples_in == m.tuples_out + len(self.held_serials) + m.late_total, (
            m.tuples_in, m.tuples_out, len(self.held_serials), m.late_total)
