"""Stateful Hypothesis test of the join's hash state (``oop.join.state.SideState``).

A ``RuleBasedStateMachine`` inserts, marks, purges, snapshots and probes a
SideState and a plain Python model (a list of live entries) side by side;
``_check()`` runs after every step and every probe is compared with the
model's nested loop (kernel == reference).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from oop.join.state import SideState


class StateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.st = SideState(4)
        self.model: dict[int, dict] = {}  # payload id -> {ts, kh, matched, dead}
        self.next_id = 0

    def _entries_by_id(self) -> dict[int, int]:
        """payload id -> entry index, read from the payload column."""
        ids = {}
        for c, start in zip(self.st.chunks, self.st.starts):
            for j, v in enumerate(c.column("id").to_pylist()):
                ids[v] = start + j
        return ids

    @rule(ts=st.lists(st.integers(0, 50), min_size=1, max_size=12), keys=st.data())
    def insert(self, ts, keys):
        n = len(ts)
        kh = keys.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        t = np.array(ts, np.int64)
        k = np.array(kh, np.int64)
        self.st.insert(pa.record_batch({"id": ids}), t, k)
        for i, a, b in zip(ids, ts, kh):
            self.model[i] = {"ts": a, "kh": b, "matched": False, "dead": False}

    @rule(data=st.data(), dead=st.booleans())
    def mark(self, data, dead):
        live = [i for i, m in self.model.items() if not m["dead"]]
        if not live:
            return
        pick = data.draw(st.lists(st.sampled_from(live), max_size=4))
        where = self._entries_by_id()
        new = self.st.mark(np.array([where[i] for i in pick], np.int64), dead=dead)
        expect_new = {i for i in pick if not self.model[i]["matched"]}
        assert len(new) == len(expect_new)
        for i in pick:
            if not self.model[i]["matched"] and dead:
                self.model[i]["dead"] = True
            self.model[i]["matched"] = True

    @rule(thr=st.integers(0, 55), want=st.booleans())
    def purge(self, thr, want):
        before = {i for i, m in self.model.items()}
        rows = self.st.purge(thr, want)
        min_ts = min((m["ts"] for m in self.model.values()), default=None)
        if min_ts is None or min_ts >= thr:
            assert rows is None
            return
        gone = {i for i, m in self.model.items() if m["ts"] < thr or m["dead"]}
        um = {i for i in gone if not self.model[i]["matched"] and not self.model[i]["dead"]}
        got = set(rows.column("id").to_pylist()) if rows is not None else set()
        if want:
            assert got == um
        for i in gone:
            del self.model[i]
        assert set(self.model) == before - gone

    @rule(data=st.data())
    def probe(self, data):
        m = data.draw(st.integers(1, 8))
        lo = np.array(data.draw(st.lists(st.integers(-2, 50), min_size=m, max_size=m)), np.int64)
        hi = lo + np.array(data.draw(st.lists(st.integers(0, 8), min_size=m, max_size=m)),
                           np.int64)
        kh = np.array(data.draw(st.lists(st.integers(0, 3), min_size=m, max_size=m)), np.int64)
        valid = np.ones(m, bool)
        # bucket key of a probe: kh, or for a tumbling state (key, window of lo); a probe of
        # a tumbling join only looks inside its own window, so clip the interval to it
        if int(self.st.tsize):
            w = np.floor_divide(lo, int(self.st.tsize)) * int(self.st.tsize)
            hi = np.minimum(hi, w + int(self.st.tsize) - 1)
            bk = kh * np.int64(1_000_003) + np.floor_divide(lo, int(self.st.tsize))
        else:
            bk = kh
        pi, ei = self.st.probe(lo, hi, kh, bk, valid)
        got = []
        if len(ei):
            order, rows = self.st.take(ei)  # rows come grouped by chunk, in ei[order]
            got = sorted(zip(pi[order].tolist(), rows.column("id").to_pylist()))
        expect = sorted((p, i) for p in range(m) for i, e in self.model.items()
                        if not e["dead"] and e["kh"] == kh[p] and lo[p] <= e["ts"] <= hi[p])
        assert got == expect

    @rule()
    def snapshot_roundtrip(self):
        self.st = SideState.from_snapshot(self.st.snapshot())

    @invariant()
    def consistent(self):
        self.st._check()
        assert self.st.alive == sum(1 for m in self.model.values() if not m["dead"])


StateMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestSideState = StateMachine.TestCase


class TumblingStateMachine(StateMachine):
    """The same with buckets keyed by (key, window id), windows of 7."""

    def __init__(self) -> None:
        super().__init__()
        self.st = SideState(4, tumbling_size=7)

    @rule()
    def snapshot_roundtrip(self):
        self.st = SideState.from_snapshot(self.st.snapshot())
        assert int(self.st.tsize) == 7


TumblingStateMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=25,
                                                  deadline=None)
TestTumblingSideState = TumblingStateMachine.TestCase
