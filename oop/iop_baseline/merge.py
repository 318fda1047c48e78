"""Merge: the order-preserving n-ary union of in-order processing (004 ch. 1, §8.2).

What it computes: the bag union of its n inputs, emitted in non-decreasing
order of the progressing attribute -- the IOP counterpart of Meld.

Assumption: each input is ordered on its own (IOP plans put a sort buffer in
front of each source). Input ``i``'s *frontier* ``f_i`` is the largest of its
last tuple time and its last punctuation: every later tuple of ``i`` has
``time >= f_i``. An ended input has ``f_i = +inf``.

On a tuple (input i): buffered in one pool sorted by time; ``f_i`` grows to
the batch's max time; every pooled tuple with ``time <= min_j f_j`` is
emitted, in order. A tuple below the largest time already emitted breaks the
order assumption: it is *late* (dropped and counted, or side output).

On a punctuation ``P(a, v)`` (input i): ``f_i = max(f_i, v)`` -- this is how
punctuation *bridges a lull*: without it a silent input holds ``min f_j`` back
and every other input's tuples pile up in the pool. Then release as above
and emit ``P(a, min_j f_j)`` when it grew.

State: the pooled tuples -- the buffering the thesis charges to IOP (lulls,
time skew between inputs). Cost per batch: O(pool + batch) copies and a
stable sort (linear on two sorted runs).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError, SchemaMismatchError
from oop.iop_baseline._pool import RowPool, take_batches
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import time_values

__all__ = ["Merge", "merge_reference"]


def merge_reference(inputs: Sequence[Sequence[int]]) -> list[int]:
    """The ordered union of ordered inputs, by a full sort: what Merge must emit (times)."""
    return sorted(t for xs in inputs for t in xs)


class Merge(Operator):
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
        self.pool: RowPool | None = None
        self.attr = ""
        self.dropped = 0

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        first = inputs[0]
        for i, info in enumerate(inputs[1:], start=1):
            if not info.schema.equals(first.schema, check_metadata=False):
                raise SchemaMismatchError(
                    f"{self.name}: input {i} (stream {info.name!r}) has schema {info.schema} but "
                    f"input 0 (stream {first.name!r}) has {first.schema}; project/cast the inputs "
                    "to one schema before the union"
                )
            if info.time != first.time:
                raise SchemaMismatchError(
                    f"{self.name}: input {i} progresses on {info.time!r} but input 0 on "
                    f"{first.time!r}; an order-preserving union needs one progressing attribute"
                )
        if first.time is None:
            raise ConfigError(f"{self.name}: stream {first.name!r} has no progressing attribute to merge on")
        self.attr = first.time
        self.pool = RowPool(first.schema)
        return first.with_schema(first.schema, name=self.name)

    @property
    def bound(self) -> int:
        """``min_j f_j``: every later output tuple has time >= it."""
        return min(self.frontier)

    def _release(self) -> list[Element]:
        assert self.pool is not None
        f = self.bound
        if f == INT64_MIN or not len(self.pool):
            return []
        k = int(np.searchsorted(self.pool.times, f, side="right"))
        if k == 0:
            return []
        tab, times = self.pool.table, self.pool.times
        out = take_batches(tab, np.arange(k, dtype=np.int64))
        self.emitted_max = max(self.emitted_max, int(times[k - 1]))
        self.pool.replace(tab, np.arange(k, len(times), dtype=np.int64), times[k:])
        return list(out)

    def _punct(self) -> list[Element]:
        f = self.bound
        if f > self.punct_out and f != INT64_MAX:
            self.punct_out = f
            return [Punctuation(self.attr, f)]
        return []

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.pool is not None
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.attr, self.inputs[port].name)
        late = times < max(self.emitted_max, self.punct_out)
        if late.any():
            n = int(late.sum())
            if self.late_policy is LatePolicy.RAISE:
                from oop.errors import LateTupleError

                raise LateTupleError(
                    f"{self.name}: input {port} (stream {self.inputs[port].name!r}) sent "
                    f"{self.attr}={int(times[late][0])} after the merge emitted "
                    f"{max(self.emitted_max, self.punct_out)}; Merge needs ordered inputs -- put "
                    "a sort buffer in front of it"
                )
            if self.late_policy is LatePolicy.SIDE_OUTPUT:
                self.side_outputs.setdefault("late", []).append(batch.filter(pa.array(late)))
            self.metrics.count_late(self.late_policy.value, n)
            self.dropped += n
            batch, times = batch.filter(pa.array(~late)), times[~late]
            if not len(times):
                return []
        self.frontier[port] = max(self.frontier[port], int(times.max()))
        tab, all_t = self.pool.combined(batch, times)
        n0 = len(self.pool)
        idx = np.concatenate([np.arange(n0, dtype=np.int64),
                              n0 + np.argsort(times, kind="stable")])
        idx = idx[np.argsort(all_t[idx], kind="stable")]
        self.pool.replace(tab, idx, all_t[idx])
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
        assert self.pool is not None
        out = list(take_batches(self.pool.table, np.arange(len(self.pool), dtype=np.int64)))
        self.pool.replace(self.pool.table, np.zeros(0, np.int64), np.zeros(0, np.int64))
        return out

    def state_size(self) -> StateSize:
        if self.pool is None:
            return StateSize()
        return StateSize(len(self.pool), self.pool.nbytes)

    def snapshot(self) -> Any:
        assert self.pool is not None
        return {**super().snapshot(), "pool": self.pool.snapshot(), "frontier": list(self.frontier),
                "emitted_max": self.emitted_max, "punct_out": self.punct_out,
                "dropped": self.dropped}

    def restore(self, state: Any) -> None:
        super().restore(state)
        assert self.pool is not None
        self.pool.restore(state["pool"])
        self.frontier = list(state["frontier"])
        self.emitted_max, self.punct_out = state["emitted_max"], state["punct_out"]
        self.dropped = state["dropped"]

    def _check(self) -> None:
        assert self.pool is not None
        self.pool._check()
        if len(self.pool):
            # whatever is pooled is above the bound (else it would have been released)
            assert int(self.pool.times[0]) > self.bound or self.bound == INT64_MIN
            assert int(self.pool.times[0]) >= self.emitted_max
