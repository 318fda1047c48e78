"""KeyedJoin: OA-Join on N key partitions, one thread each, with SplitJoin's ordered output.

What it computes: exactly what ``SplitJoin(config, workers=1)`` emits -- the
OA-Join of S0 and S1 (004 §7.1-7.2: band or tumbling predicate, equality
keys, residual, inner/outer/semi/anti) with 002's ordered gathering -- row
for row, in the same order, with the same punctuation.

How (Quill's ReKey / ReDistribute, 001; Trill's GroupApply): every data row
goes to partition ``hash(equi-join key) mod N`` (the join's own key hash,
:func:`oop.join.keys.key_hashes`, spread by a Fibonacci multiply; a row with
a null key, which matches nothing, to partition 0), so two tuples that can
match meet in one partition; each partition is a one-worker OA-Join fed by
its own thread (numba kernels release the GIL). Its inputs differ from
SplitJoin's in what is split: the whole per-tuple work -- probing, storing,
purging, assembling joined rows -- not only the probes.

* **Late tuples are decided here, once**, against the input's last
  punctuation (the join's late policy, counters and side output), before
  rows are partitioned; a partition never sees a late row.
* **Every punctuation goes to every partition**, so each holds the same
  bounds ``b0, b1`` as one join would, purges its share of the state, and
  emits the same output punctuation (individual and joint).
* **Ordered gathering per element.** After each input element this thread
  waits for the partitions and emits, as SplitJoin does: the rows the
  element caused in all partitions as one batch sorted by the output columns
  (:func:`~oop.join.split_join.ordered_rows`), then its punctuation(s); an
  element whose output has rows after a punctuation (the end of the second
  input: the bound moves, then the last state is flushed) is gathered segment
  by segment. The multiset of an element's rows is the one-join multiset --
  every matching pair meets in one partition, an unmatched row is unmatched
  in its partition -- so the sorted order is SplitJoin's, for every N.

Punctuation rule: OA-Join's (a punctuation on ``ts_i`` purges the other
input's tuples out of reach, emits the outer/anti rows that never matched,
forwards ``min(b_i, keep_from(i, b_{1-i}))`` and the joint bound), emitted
after the rows of its element. A join without equality keys cannot be split
by key: :func:`keyed` says why (``oop sql`` then uses SplitJoin). Rows equal
on every sortable column (e.g. differing only in a list column) keep
partition order.

Checkpoints (:meth:`snapshot`, between two elements, as
:class:`~oop.plan.job.Job` takes them): this thread gathers after every
element, so between elements no partition is working and none holds results
back; the snapshot is this operator's bounds ``b0, b1`` (its late check), which
inputs ended, the partition count and each partition's OA-Join snapshot. A
restore into another partition count rebuilds the checkpoint's count -- a
tuple's state lives in its key's partition, ``hash mod N`` -- and records the
count asked in :attr:`threads_asked` (the rows are the same for any count).

Cost: this thread does O(rows) for the late check, the key hash and the
scatter, and O(r log r) for sorting an element's r result rows; the
partitions do the rest. Memory: the one join's state, split by key.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.join.keys import key_hashes
from oop.join.oa_join import OAJoin
from oop.join.spec import JoinConfig
from oop.join.split_join import ordered_rows
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import split_late
from oop.stream.timecol import time_values
from oop.window.threaded import partition_rows

__all__ = ["KeyedJoin", "keyed", "partition_of_keys"]


def keyed(config: JoinConfig) -> str | None:
    """Why this join cannot run on key partitions (None: it can)."""
    if not config.on:
        return "it has no equality keys to partition on"
    return None


def partition_of_keys(batch: pa.RecordBatch, keys: Sequence[str], n: int) -> np.ndarray:
    """Partition ``hash(key) mod n`` of every row (a null key: 0). O(rows)."""
    kh, valid, _ = key_hashes(batch, list(keys))
    h = (kh.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    out = (h % np.uint64(n)).astype(np.int64)
    out[~valid] = 0
    return out


def _segments(out: list[Element]) -> tuple[list[list[pa.RecordBatch]], list[Element]]:
    """``out`` split at its punctuations: (row segments, the punctuations between them)."""
    segs: list[list[pa.RecordBatch]] = [[]]
    puncts: list[Element] = []
    for el in out:
        if isinstance(el, pa.RecordBatch):
            if el.num_rows:
                segs[-1].append(el)
        else:
            puncts.append(el)
            segs.append([])
    return segs, puncts


class KeyedJoin(Operator):
    """OA-Join over ``partitions`` key partitions on threads (see the module docstring)."""

    n_inputs = 2

    def __init__(self, config: JoinConfig, partitions: int = 2) -> None:
        super().__init__(config.name)
        why = keyed(config)
        if why is not None:
            raise ConfigError(f"join {config.name!r} cannot run on key partitions: {why}; "
                              "use SplitJoin (workers=) or one thread")
        if partitions < 2:
            raise ConfigError(f"join {config.name!r}: partitions={partitions}; KeyedJoin "
                              "needs >= 2 (one partition is the one-worker join)")
        self.config = config
        self.n = partitions

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        self._infos = list(inputs)
        self.threads_asked: int | None = None  # set when a restore took another count
        out = self._open_partitions(self.n)
        t = self.parts[0]
        self.time_attrs, self.keys = t.time_attrs, t.keys
        self.pred = t.pred  # the predicate with its durations resolved (for EXPLAIN)
        self.b = [INT64_MIN, INT64_MIN]
        return out

    def _open_partitions(self, n: int) -> StreamInfo:
        """``n`` fresh one-worker OA-Joins, each with its thread (the old ones stopped)."""
        self.close()
        self.n = n
        self.parts = [OAJoin(self.config, 1) for _ in range(n)]
        out = self.parts[0].open(self._infos)  # validates the configuration, resolves durations
        for p in self.parts[1:]:
            p.open(self._infos)
        self.pools = [ThreadPoolExecutor(1, f"oop-{self.name}-{i}") for i in range(n)]
        return out

    # ---- elements -----------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.check_schema(batch, port)
        times = time_values(batch, self.time_attrs[port], self.inputs[port].name)
        batch, late, _ = split_late(batch, times, self.b[port], self.config.late,
                                    self.inputs[port].name, self.time_attrs[port])
        if late is not None:
            self.route_late(late, self.config.late)
        if batch.num_rows == 0:
            return []
        pid = partition_of_keys(batch, self.keys[port], self.n)
        order, bounds = partition_rows(pid, self.n)
        futs = []
        for i, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            if hi > lo:
                rows = batch if hi - lo == batch.num_rows else batch.take(
                    pa.array(order[lo:hi]))
                futs.append(self._submit(i, lambda op, r=rows: op.on_batch(r, port)))
        return self._gather(futs)

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if isinstance(punctuation, Punctuation) and punctuation.attr == self.time_attrs[port]:
            self.b[port] = max(self.b[port], int(punctuation.value))
        return self._gather([self._submit(i, lambda op: op.on_punctuation(punctuation, port))
                             for i in range(self.n)])

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        out = self._gather([self._submit(i, lambda op: op.on_end(port)) for i in range(self.n)])
        if all(self._ended):
            self.close()
        return out

    def _submit(self, i: int, fn: Callable[[OAJoin], list[Element]]
                ) -> "Future[list[Element]]":
        return self.pools[i].submit(fn, self.parts[i])

    def _gather(self, futs: list["Future[list[Element]]"]) -> list[Element]:
        """The partitions' outputs of one element, in SplitJoin's order (module doc): each
        segment's rows from every partition as one sorted batch, then the punctuation that
        ends the segment (the same in every partition: each applied the same bounds)."""
        parts = [_segments(f.result()) for f in futs]
        puncts = parts[0][1] if parts else []
        if any(p != puncts for _, p in parts):
            raise RuntimeError(f"{self.name}: the partitions emitted different punctuation "
                               f"({[p for _, p in parts]}); this is a bug")
        out: list[Element] = []
        for j in range(len(puncts) + 1):
            rows = [b for segs, _ in parts for b in segs[j]]
            if rows:
                out.append(ordered_rows(rows))
            if j < len(puncts):
                out.append(puncts[j])
        return out

    def close(self) -> None:
        """Stop the partitions' threads (at the end of both inputs, or to abandon a run)."""
        for pool in getattr(self, "pools", ()):
            pool.shutdown(wait=True)

    # ---- state --------------------------------------------------------------
    def state_size(self) -> StateSize:
        """Sum over the partitions (between elements: no partition is working). O(N)."""
        out = StateSize(0, 0)
        for p in getattr(self, "parts", ()):
            out = out + p.state_size()
        return out

    def snapshot(self) -> dict[str, Any]:
        """The whole state (module docstring, Checkpoints): which inputs ended, the bounds,
        the partition count and each partition's snapshot, taken on this thread (between
        elements no partition is working). O(state)."""
        return {**super().snapshot(), "b": list(self.b), "partitions": self.n,
                "parts": [p.snapshot() for p in self.parts]}

    def restore(self, state: dict[str, Any]) -> None:
        """Load a :meth:`snapshot` into this freshly opened operator, on the checkpoint's
        partition count (a key's state lives in the partition ``hash mod N`` chose; the rows
        and their order are the same for any count). O(state)."""
        n = int(state["partitions"])
        if n != self.n:
            self.threads_asked = self.n
            self._open_partitions(n)
        super().restore(state)
        self.b = [int(v) for v in state["b"]]
        for p, s in zip(self.parts, state["parts"]):
            p.restore(s)
        if all(self._ended):  # the checkpoint was taken after the end: nothing will come
            self.close()
