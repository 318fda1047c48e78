"""Tumbling WIDs left to the cell store (``Ring.update(tumble=...)``, 004 §6.1): its units
equal the kind's own window ids, and its fold equals the fold of those ids."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from oop.aggregates.base import Lane
from oop.window.kinds import Sliding
from oop.window.ring import Ring, tumble_units
from oop.window.values import ColumnValues, LaneInfo

_TIMES = st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=200)


@settings(max_examples=150, deadline=None)
@given(ts=_TIMES, origin=st.integers(-50, 50), size=st.integers(1, 700))
def test_tumble_units_are_the_kinds_wids(ts: list[int], origin: int, size: int) -> None:
    times = np.array(ts, np.int64)
    units = tumble_units(times, origin, size)
    np.testing.assert_array_equal(units, Sliding(size, size, origin).wids(times)[0])
    assert units.tolist() == [(t - origin) // size for t in ts]  # Python's floor division


@settings(max_examples=100, deadline=None)
@given(ts=_TIMES, origin=st.integers(-50, 50), size=st.integers(1, 700),
       C=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_ring_fold_of_tumbling_times_equals_fold_of_their_wids(ts: list[int], origin: int,
                                                               size: int, C: int,
                                                               seed: int) -> None:
    rng = np.random.default_rng(seed)
    times = np.array(ts, np.int64)
    codes = rng.integers(0, C, times.size).astype(np.int64)
    cols = {"v": ColumnValues(rng.random(times.size), np.zeros(0, np.uint8))}
    wids = Sliding(size, size, origin).wids(times)[0]
    lanes = [LaneInfo(Lane("rows"), np.int64), LaneInfo(Lane("sum", "v"), np.float64)]
    low, top = int(wids.min()), int(wids.max()) + 1
    by_store, by_ids = Ring(lanes, base=low), Ring(lanes, base=low)
    by_store.update(codes, None, None, cols, times, C, single=True, top=top,
                    tumble=(origin, size))
    by_ids.update(codes, wids, None, cols, times, C, single=True, top=top)
    assert by_store.live == by_ids.live == len(set(zip(wids.tolist(), codes.tolist())))
    for key in by_ids.arr:
        np.testing.assert_array_equal(by_store.arr[key], by_ids.arr[key])
    assert int(by_store.arr[("rows", None)].sum()) == times.size  # every row folded once
