"""IOP baselines checkpoint at a round boundary and resume to the uninterrupted result.

Also a Hypothesis state machine driving SortBuffer and Merge with random
batches and punctuations, calling ``_check()`` after every step.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import oop
from oop.iop_baseline import Merge, Reorder, SortBuffer
from oop.iop_baseline.gigascope import FlushPolicy, GigascopeHighLevel, GigascopeLowLevel
from oop.operators.base import StreamInfo
from oop.query import WindowQuery
from oop.testing import same_bag
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling
from oop.testing import resumed_output


def _table(n: int = 400, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64)
    order = np.argsort(ts + rng.integers(0, 20, n), kind="stable")
    return pa.table({"ts": pa.array(ts[order]), "key": pa.array(rng.integers(0, 4, n)[order]),
                     "val": pa.array(rng.integers(0, 50, n)[order]),
                     "seq": pa.array(order.astype(np.int64))})


PLANS = {
    "iop-sort": lambda t: WindowQuery([oop.from_arrow(t, time="ts", batch_size=16,
                                                      punctuation=oop.BoundedDelay(20))],
                                      Sliding(40, 10), [agg.count(), agg.sum("val")], by="key"
                                      ).plan("iop-sort"),
    "iop-slack-generous": lambda t: WindowQuery(
        [oop.from_arrow(t, time="ts", batch_size=16)], Tumbling(25), [agg.count()], by="key"
    ).plan("iop-slack:10,generous"),
    "bsort+merge": lambda t: oop.from_arrow(t, time="ts", batch_size=16, name="a").via(
        SortBuffer(mode="tuples", slack=30)).via(
        Merge(2), oop.from_arrow(t, time="ts", batch_size=16, name="b").via(
            SortBuffer(mode="time", slack=20))),
    "reorder": lambda t: oop.from_arrow(t, time="ts", batch_size=16,
                                        punctuation=oop.BoundedDelay(20)).via(Reorder("seq", capacity=4)),
    "gigascope": lambda t: oop.from_arrow(t.sort_by("ts"), time="ts", batch_size=16).via(
        GigascopeLowLevel("key", 50, table_size=3, policy=FlushPolicy("oop-slow", every=2))).via(
        GigascopeHighLevel("key")),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_checkpoint_and_resume_equals_uninterrupted(name):
    t = _table()
    full = PLANS[name](t).run()
    for stop in (1, 5, 13):
        part = PLANS[name](t).run(stop_after_rounds=stop)
        assert part.checkpoint is not None
        resumed = resumed_output(part, PLANS[name](t).run(resume_from=part.checkpoint))
        assert same_bag(resumed.table, full.table), (name, stop)


class SortMergeMachine(RuleBasedStateMachine):
    """Random batches / punctuation into a 2-input Merge and a BSort; invariants after each step."""

    def __init__(self) -> None:
        super().__init__()
        sch = pa.schema([("ts", pa.int64())])
        info = StreamInfo("s", sch, {"ts": "ms"}, "ts")
        self.merge = Merge(2)
        self.merge.open([info, info])
        self.sort = SortBuffer(mode="tuples", slack=3)
        self.sort.open([info])
        self.last = [0, 0]  # per-input ordered clock
        self.merge_out: list[int] = []
        self.merge_in = 0
        self.sort_out: list[int] = []
        self.sort_in = 0

    def _collect(self, out, sink):
        for el in out:
            if isinstance(el, pa.RecordBatch):
                sink.extend(el.column("ts").to_pylist())

    @rule(port=st.integers(0, 1), gaps=st.lists(st.integers(0, 3), max_size=6))
    def batch(self, port, gaps):
        ts = self.last[port] + np.cumsum(np.asarray(gaps or [0], np.int64))[: len(gaps)]
        if len(ts):
            self.last[port] = int(ts[-1])
        b = pa.record_batch({"ts": pa.array(ts, pa.int64())})
        self.merge_in += b.num_rows
        self._collect(self.merge.on_batch(b, port), self.merge_out)
        shuffled = pa.record_batch({"ts": pa.array(np.random.default_rng(len(ts)).permutation(ts),
                                                   pa.int64())})
        self.sort_in += b.num_rows
        self._collect(self.sort.on_batch(shuffled), self.sort_out)

    @rule(port=st.integers(0, 1), ahead=st.integers(0, 3))
    def punctuate(self, port, ahead):
        self.last[port] += ahead
        self._collect(self.merge.on_punctuation(oop.Punctuation("ts", self.last[port]), port),
                      self.merge_out)

    @invariant()
    def checks(self):
        self.merge._check()
        self.sort._check()
        assert self.merge_out == sorted(self.merge_out)  # Merge never emits out of order
        assert len(self.merge_out) + self.merge.state_size().items == self.merge_in
        assert self.sort_out == sorted(self.sort_out)
        assert len(self.sort_out) + self.sort.state_size().items + self.sort.dropped == self.sort_in


TestSortMergeMachine = SortMergeMachine.TestCase
TestSortMergeMachine.settings = settings(max_examples=30, stateful_step_count=20, deadline=None)
