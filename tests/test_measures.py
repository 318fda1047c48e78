"""Stream measures of 004 §6.3.1: wed, offsets, volume -- scenario and property tests.

Timeline for ``wed`` (RANGE 10, tumbling):

    time      0 ....... 10 ....... 20 ....... 30
    extent 1  [10, 20): first tuple arrives while lwm = 8
    punct 20 closes it while hwm = 23  ->  wed = 23 - 8 = 15
"""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oop.progress import LowWatermark, SourceOffsets, StreamVolume, WindowExtentDuration
from oop.stream.elements import INT64_MIN


def test_wed_scenario_and_initial_range():
    w = WindowExtentDuration(10)
    assert w.value == 10
    lw = LowWatermark("ts")
    lw.advance(8)
    assert w.start(1, lw)
    assert w.open_extents == 1
    assert w.complete(1, hwm=23) == 15
    assert w.open_extents == 0
    # completing an extent that never started keeps the last value
    assert w.complete(7, hwm=100) == 15
    w._check()


def test_wed_unknown_low_watermark_uses_fallback_or_skips():
    w = WindowExtentDuration(5)
    assert not w.start(0, INT64_MIN)
    assert w.start(1, INT64_MIN, fallback=5)
    assert w.complete(1, hwm=12) == 7


def test_wed_snapshot_roundtrip():
    w = WindowExtentDuration(5)
    w.start(3, 2)
    w2 = WindowExtentDuration(5)
    w2.restore(w.snapshot())
    assert w2.complete(3, 9) == w.complete(3, 9) == 7


@given(st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(-1000, 1000), max_size=5)),
                max_size=20))
def test_offsets_equal_reference(batches):
    off = SourceOffsets(3)
    hw = [None, None, None]
    for k, times in batches:
        a = np.asarray(times, dtype=np.int64)
        if k == 2:  # exercise the per-tuple source-id path too
            off.observe_many(np.full(len(a), 2, dtype=np.int64), a)
        else:
            off.observe(k, a)
        for t in times:
            hw[k] = t if hw[k] is None else max(hw[k], t)
    seen = [h for h in hw if h is not None]
    exp = [0 if h is None else max(seen) - h for h in hw]
    assert off.offsets().tolist() == exp
    off._check()


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-50, 50)), max_size=40))
def test_observe_many_equals_per_source(pairs):
    a, b = SourceOffsets(3), SourceOffsets(3)
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    ts = np.array([p[1] for p in pairs], dtype=np.int64)
    a.observe_many(src, ts)
    for k in range(3):
        b.observe(k, ts[src == k])
    assert a.snapshot() == b.snapshot()


def test_volume_counts_and_refuses_negative():
    v = StreamVolume(4)
    v.add(10)
    v.expire(2)
    assert v.value == 2.0
    assert v.of(np.array([4, 8])).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="only 8 are active"):
        v.expire(9)
    with pytest.raises(ValueError, match="RANGE"):
        StreamVolume(0)
