"""Experiment harness: the from-scratch oracle, exact punctuation, tracing and shape helpers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

import oop
from oop.experiments.common import growth, rank_trend
from oop.experiments.harness import exact_lwm_feed, run_traced, sliding_oracle
from oop.stream.elements import Punctuation


@given(st.lists(st.integers(-50, 200), min_size=1, max_size=60), st.integers(1, 30),
       st.integers(1, 4), st.integers(-7, 7))
def test_sliding_oracle_matches_brute_force(ts, slide, k, origin):
    range_ = slide * k
    vals = list(range(len(ts)))
    t = pa.table({"ts": pa.array(ts, pa.int64()), "len": pa.array(vals, pa.int64())})
    o = sliding_oracle(t, range_=range_, slide=slide, value="len", origin=origin)
    brute = {}
    for x, v in zip(ts, vals):
        w_lo = (x - origin) // slide
        w_hi = (x - origin + range_) // slide
        for w in range(w_lo, w_hi):
            end = origin + (w + 1) * slide
            assert end - range_ <= x < end
            c, s = brute.get(end, (0, 0))
            brute[end] = (c + 1, s + v)
    assert o["window_end"].tolist() == sorted(brute)
    assert o["count"].tolist() == [brute[e][0] for e in sorted(brute)]
    assert o["sum"].tolist() == [float(brute[e][1]) for e in sorted(brute)]


@settings(max_examples=30)
@given(st.lists(st.lists(st.integers(0, 100), min_size=0, max_size=8), min_size=1, max_size=10))
def test_exact_lwm_feed_is_valid_and_tight(parts):
    batches = [pa.record_batch({"ts": pa.array(p, pa.int64())}) for p in parts]
    items = exact_lwm_feed(batches)
    last = None
    for i, it in enumerate(items):
        if isinstance(it, Punctuation):
            later = [v for b in items[i + 1:] if isinstance(b, pa.RecordBatch)
                     for v in b.column("ts").to_pylist()]
            assert all(v >= it.value for v in later)  # valid
            if later:
                assert min(later) == it.value  # exact: the true low-watermark
            assert last is None or it.value > last
            last = it.value


def test_run_traced_attributes_rows_to_rounds_and_clock():
    from oop.window import aggregates as agg
    from oop.window.kinds import Tumbling

    t = pa.table({"ts": pa.array(list(range(0, 100)), pa.int64())})
    s = oop.from_arrow(t, time="ts", unit="ms", batch_size=10, punctuation=oop.Ordered())
    from oop.experiments import plans

    tr = run_traced(plans.oop_window(s, Tumbling(20), agg.count()))
    assert tr.table.num_rows == 5
    # window [0, 20) closes when punctuation reaches 20: after the batch ending at ts 29
    lat = tr.logical_latency()
    assert lat[0] == 29 - 20 and (lat[:-1] >= 0).all()
    d = tr.completion_delay(t.column("ts").to_numpy(), range_=20, slide=20)
    assert (d[:-1] == 10).all()  # one batch (10 ms) after the window's last tuple arrived
    assert tr.peak_items >= 1 and tr.rounds >= 10


def test_shape_helpers():
    assert rank_trend([1, 2, 3], [5, 5, 5]) == 0.0
    assert rank_trend([1, 2, 3, 4], [1, 3, 2, 4]) > 0.5
    assert growth([0, 0]) == 1.0 and growth([0, 1]) == float("inf")
