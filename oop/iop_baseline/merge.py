"""Merge: the order-preserving n-ary union of in-order processing (004 ch. 1, §8.2).

What it computes: the bag union of its n inputs, emitted in non-decreasing
order of the progressing attribute -- the IOP counterpart of Meld.

Assumption: each input is ordered on its own (IOP plans put a sort buffer in
front of each source). Input ``i``'s *frontier* ``f_i`` is the largest of its
last tuple time and its last punctuation: every later tuple of ``i`` has
``time >= f_i``. An ended input has ``f_i = +inf``.

On a tuple (input i): the batch is sorted once and queued as a *run* on
input i; ``f_i`` grows to the batch's max time; from every queued run the
prefix with ``time <= min_j f_j`` is taken (binary search, zero-copy
slices), and those rows are emitted in order (one stable sort of what is
released). A tuple below the largest time already emitted breaks the
order assumption: it is *late* (dropped and counted, or side output).

On a punctuation ``P(a, v)`` (input i): ``f_i = max(f_i, v)`` -- this is how
punctuation *bridges a lull*: without it a silent input holds ``min f_j`` back
and every other input's tuples pile up in the pool. Then release as above
and emit ``P(a, min_j f_j)`` when it grew.

State: the queued tuples -- the buffering the thesis charges to IOP (lulls,
time skew between inputs). Cost per batch: a sort of the batch, a binary
search per queued run, and a sort of the released rows -- O(released), not
O(buffered).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.iop_baseline._late import DropsLate
from oop.iop_baseline._pool import to_batches
from oop.metrics import StateSize
from oop.operators.base import StreamInfo, require_union_compatible
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import time_values

__all__ = ["Merge", "merge_reference"]


def merge_reference(inputs: Sequence[Sequence[int]]) -> list[int]:
    """The ordered union of ordered inputs, by a full sort: what Merge must emit (times)."""
    return sorted(t for xs in inputs for t in xs)


class Merge(DropsLate):
    """Order-preserving union of ``n_inputs`` ordered streams (see module doc)."""

    def __init__(self, n_inputs: int, *, late: LatePolicy | str = "drop", name: str = "merge") -> None:
        super().__init__(name)
        if n_inputs < 1:
            raise ConfigError(f"{name}: a union needs at least one input, got {n_inputs}")
        self.n_inputs = n_inputs
        self.late_policy = LatePolicy.parse(late)
        self.frontier = [INT64_MIN] * n_inputs
        self.emitted_max = INT64_MIN  # largest time emitted
        self.punct_out = INT64_MIN
        # per input: queued sorted runs (table, times); all rows > emitted order
        self.runs: list[list[tuple[pa.Table, np.ndarray]]] = [[] for _ in range(n_inputs)]
        self.held = 0
        self.held_bytes = 0
        self.schema: pa.Schema | None = None
        self.attr = ""
        self.dropped = 0

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        first = inputs[0]
        require_union_compatible(inputs, self.name, union="an order-preserving union")
        if first.time is None:
            raise ConfigError(f"{self.name}: stream {first.name!r} has no progressing attribute to merge on")
        self.attr = first.time
        self.schema = first.schema
        return first.with_schema(first.schema, name=self.name)

    @property
    def bound(self) -> int:
        """``min_j f_j``: every later output tuple has time >= it."""
        return min(self.frontier)

    def _release(self) -> list[Element]:
        f = self.bound
        if f == INT64_MIN or not self.held:
            return []
        parts: list[pa.Table] = []
        times: list[np.ndarray] = []
        for q in self.runs:
            keep: list[tuple[pa.Table, np.ndarray]] = []
            for tab, t in q:
                k = int(np.searchsorted(t, f, side="right"))
                if k:
                    parts.append(tab.slice(0, k))
                    times.append(t[:k])
                if k < len(t):
                    keep.append((tab.slice(k), t[k:]) if k else (tab, t))
            q[:] = keep
        if not parts:
            return []
        all_t = np.concatenate(times)
        out = pa.concat_tables(parts)
        if len(parts) > 1:
            order = np.argsort(all_t, kind="stable")
            out = out.take(pa.array(order))
            all_t = all_t[order]
        self.held -= len(all_t)
        self.held_bytes = self._bytes()
        self.emitted_max = max(self.emitted_max, int(all_t[-1]))
        return to_batches(out)

    def _bytes(self) -> int:
        return sum(int(tab.nbytes) for q in self.runs for tab, _ in q) if self.held else 0

    def _punct(self) -> list[Element]:
        f = self.bound
        if f > self.punct_out and f != INT64_MAX:
            self.punct_out = f
            return [Punctuation(self.attr, f)]
        return []

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.attr, self.inputs[port].name)
        bound = max(self.emitted_max, self.punct_out)
        batch, keep = self.drop_late(batch, times < bound, lambda i: (
            f"{self.name}: input {port} (stream {self.inputs[port].name!r}) sent "
            f"{self.attr}={int(times[i])} after the merge emitted {bound}; Merge needs ordered "
            "inputs -- put a sort buffer in front of it"))
        if keep is not None:
            times = times[keep]
            if not len(times):
                return []
        self.frontier[port] = max(self.frontier[port], int(times.max()))
        tab = pa.Table.from_batches([batch])
        if len(times) > 1 and not bool(np.all(times[1:] >= times[:-1])):
            order = np.argsort(times, kind="stable")
            tab, times = tab.take(pa.array(order)), times[order]
        self.runs[port].append((tab, np.ascontiguousarray(times)))
        self.held += len(times)
        self.held_bytes += int(tab.nbytes)
        return self._release()

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self.attr:
            raise TypeError(f"{self.name}: only linear punctuation on {self.attr!r} can be merged, "
                            f"got {punctuation!r}")
        self.frontier[port] = max(self.frontier[port], punctuation.value)
        return self._release() + self._punct()

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        self.frontier[port] = INT64_MAX
        out = self._release()
        if all(self._ended):
            return out + self.flush()
        return out + self._punct()

    def flush(self) -> list[Element]:
        self.record_accuracy()
        self.frontier = [INT64_MAX] * self.n_inputs
        return self._release()

    def state_size(self) -> StateSize:
        return StateSize(self.held, self.held_bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "runs": [list(q) for q in self.runs], "held": self.held,
                "frontier": list(self.frontier),
                "emitted_max": self.emitted_max, "punct_out": self.punct_out,
                "dropped": self.dropped}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.runs = [list(q) for q in state["runs"]]
        self.held = state["held"]
        self.held_bytes = self._bytes()
        self.frontier = list(state["frontier"])
        self.emitted_max, self.punct_out = state["emitted_max"], state["punct_out"]
        self.dropped = state["dropped"]

    def _check(self) -> None:
        n = 0
        for q in self.runs:
            for tab, t in q:
                assert tab.num_rows == len(t) and len(t) > 0
                assert bool(np.all(t[1:] >= t[:-1])), "a queued run is not sorted"
                # whatever is queued is above the bound (else it would have been released)
                assert int(t[0]) > self.bound or self.bound == INT64_MIN
                assert int(t[0]) >= self.emitted_max
                n += len(t)
        assert n == self.held, (n, self.held)
