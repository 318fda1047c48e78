"""The progress core: watermarks, per-group watermarks and frontiers as state machines.

Each structure is driven by random operations (Hypothesis ``RuleBasedStateMachine``)
beside a plain Python model; ``_check()`` runs after every step.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oop.errors import PunctuationOrderError
from oop.progress import GroupWatermarks, HighWatermark, JointFrontier, LowWatermark, MinFrontier
from oop.progress.groups import group_max_kernel, group_max_reference
from oop.stream.elements import INT64_MAX, INT64_MIN

VAL = st.integers(-50, 50)


class WatermarkMachine(RuleBasedStateMachine):
    """LowWatermark never goes backwards; HighWatermark is the running max."""

    def __init__(self) -> None:
        super().__init__()
        self.lw = LowWatermark("ts", stream="s")
        self.hw = HighWatermark("ts")
        self.model_lwm = INT64_MIN
        self.model_hwm = INT64_MIN

    @rule(v=VAL)
    def advance(self, v):
        if v < self.model_lwm:
            with pytest.raises(PunctuationOrderError, match="went backwards"):
                self.lw.advance(v)
            assert self.lw.try_advance(v) is False
        else:
            assert self.lw.advance(v) == (v > self.model_lwm)
            self.model_lwm = v

    @rule(ts=st.lists(VAL, max_size=5))
    def observe(self, ts):
        self.hw.observe(np.asarray(ts, dtype=np.int64))
        if ts:
            self.model_hwm = max(self.model_hwm, max(ts))

    @invariant()
    def agrees(self):
        assert self.lw.value == self.model_lwm
        assert self.hw.value == self.model_hwm


class MinFrontierMachine(RuleBasedStateMachine):
    """MinFrontier emits min over inputs exactly when it grows (Meld rule, Fig. 8-2)."""

    N = 3

    def __init__(self) -> None:
        super().__init__()
        self.f = MinFrontier(self.N)
        self.model = [INT64_MIN] * self.N
        self.emitted: list[int] = []

    def _expect(self, got):
        m = min(self.model)
        last = self.emitted[-1] if self.emitted else INT64_MIN
        if m > last:
            assert got == m
            self.emitted.append(m)
        else:
            assert got is None

    @rule(port=st.integers(0, N - 1), v=VAL)
    def update(self, port, v):
        got = self.f.update(port, v)
        self.model[port] = max(self.model[port], v)
        self._expect(got)

    @rule(port=st.integers(0, N - 1))
    def end(self, port):
        got = self.f.end(port)
        self.model[port] = INT64_MAX
        self._expect(got)

    @invariant()
    def check(self):
        self.f._check()
        assert self.emitted == sorted(set(self.emitted))


class GroupWatermarksMachine(RuleBasedStateMachine):
    """GroupWatermarks vs a dict model: lwm = max(linear, group bound); hwm = running max."""

    def __init__(self) -> None:
        super().__init__()
        self.g = GroupWatermarks("ts", stream="s")
        self.linear = INT64_MIN
        self.group: dict[int, int] = {}
        self.hwm: dict[int, int] = {}

    def _lwm(self, k):
        return max(self.linear, self.group.get(k, INT64_MIN))

    @rule(k=st.integers(0, 6), v=VAL)
    def advance_group(self, k, v):
        if v < self._lwm(k):
            with pytest.raises(PunctuationOrderError):
                self.g.advance_group(k, v)
        else:
            assert self.g.advance_group(k, v) == (v > self._lwm(k))
            self.group[k] = v

    @rule(v=VAL)
    def advance_all(self, v):
        if v < self.linear:
            with pytest.raises(PunctuationOrderError):
                self.g.advance_all(v)
        else:
            self.g.advance_all(v)
            self.linear = v

    @rule(pairs=st.lists(st.tuples(st.integers(0, 6), VAL), max_size=6))
    def observe(self, pairs):
        gs = np.asarray([p[0] for p in pairs], dtype=np.int64)
        ts = np.asarray([p[1] for p in pairs], dtype=np.int64)
        self.g.observe(gs, ts)
        for k, t in pairs:
            self.hwm[k] = max(self.hwm.get(k, INT64_MIN), t)

    @invariant()
    def agrees(self):
        self.g._check()
        for k in range(8):
            assert self.g.lwm(k) == self._lwm(k)
            assert self.g.hwm(k) == self.hwm.get(k, INT64_MIN)
        if self.g.n_groups:
            assert self.g.min_lwm() == min(self._lwm(k) for k in range(self.g.n_groups))


class JointFrontierMachine(RuleBasedStateMachine):
    """JointFrontier: emitted box = component-wise min, only when not contained in the last."""

    N = 2

    def __init__(self) -> None:
        super().__init__()
        self.f = JointFrontier(self.N, ("a", "b"))
        self.latest: list[tuple[int, int] | None] = [None] * self.N
        self.last: tuple[int, int] | None = None

    def _expect(self, got):
        if any(x is None for x in self.latest):
            assert got is None
            return
        c = (min(x[0] for x in self.latest), min(x[1] for x in self.latest))
        if c == (INT64_MAX, INT64_MAX) or (self.last is not None and c[0] <= self.last[0]
                                           and c[1] <= self.last[1]):
            assert got is None
        else:
            assert got == (("a", c[0]), ("b", c[1]))
            self.last = c

    @rule(port=st.integers(0, N - 1), a=VAL, b=VAL)
    def update(self, port, a, b):
        got = self.f.update(port, (("a", a), ("b", b)))
        self.latest[port] = (a, b)
        self._expect(got)

    @precondition(lambda self: True)
    @rule(port=st.integers(0, N - 1))
    def end(self, port):
        got = self.f.end(port)
        self.latest[port] = (INT64_MAX, INT64_MAX)
        self._expect(got)

    @invariant()
    def check(self):
        self.f._check()


TestWatermarks = WatermarkMachine.TestCase
TestMinFrontier = MinFrontierMachine.TestCase
TestGroupWatermarks = GroupWatermarksMachine.TestCase
TestJointFrontier = JointFrontierMachine.TestCase
for _t in (TestWatermarks, TestMinFrontier, TestGroupWatermarks, TestJointFrontier):
    _t.settings = settings(_t.settings, stateful_step_count=25)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(-1000, 1000)), max_size=200))
def test_group_max_kernel_equals_reference(pairs):
    hwm = np.full(10, INT64_MIN, dtype=np.int64)
    gs = np.asarray([p[0] for p in pairs], dtype=np.int64)
    ts = np.asarray([p[1] for p in pairs], dtype=np.int64)
    group_max_kernel(hwm, gs, ts)
    assert hwm.tolist() == group_max_reference([INT64_MIN] * 10, gs.tolist(), ts.tolist())


def test_group_watermarks_open_groups_and_bad_ids():
    g = GroupWatermarks("ts")
    g.observe(np.array([0, 1, 2]), np.array([5, 9, 1]))
    g.advance_all(4)
    g.advance_group(0, 6)
    assert g.open_groups().tolist() == [1]
    with pytest.raises(ValueError, match=">= 0"):
        g.observe(np.array([-1]), np.array([1]))


@given(st.lists(st.integers(-2**62, 2**62), min_size=1, max_size=100))
def test_time_bounds_equals_reference(ts):
    from oop.progress.watermark import time_bounds, time_bounds_reference

    assert time_bounds(np.asarray(ts, dtype=np.int64)) == time_bounds_reference(ts)
