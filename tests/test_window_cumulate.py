"""Cumulate windows (oop.window.cumulate): wids() is the exact inverse of extent(), and the
WID operator over disordered input equals the from-scratch oracle."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

import oop
from oop.window import Cumulate, agg
from oop.window.reference import window_oracle


@settings(max_examples=200, deadline=None)
@given(step=st.integers(1, 7), n=st.integers(1, 5), origin=st.integers(-20, 20),
       values=st.lists(st.integers(-200, 200), min_size=1, max_size=40))
def test_wids_is_the_inverse_of_extent(step: int, n: int, origin: int, values: list[int]) -> None:
    k = Cumulate(step, step * n, origin)
    v = np.array(values, np.int64)
    lo, hi = k.wids(v)
    for x, a, b in zip(values, lo.tolist(), hi.tolist()):
        # every window near x: x is in it iff its id is in [lo, hi)
        for w in range(a - 3 * n - 2, b + 3 * n + 2):
            s, e = k.extent(w)
            assert (s <= x < e) == (a <= w < b), (x, w, s, e, a, b)
    s, e = k.extents(np.arange(-10, 10))
    assert [(int(x), int(y)) for x, y in zip(s, e)] == [k.extent(w) for w in range(-10, 10)]
    for bound in values:  # first_open: every window below it has ended at the bound
        f = k.first_open(bound)
        assert k.extent(f - 1)[1] <= bound < k.extent(f)[1]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), step=st.integers(1, 4), n=st.integers(1, 4))
def test_cumulate_window_matches_oracle(seed: int, step: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 60, 40))
    ts = ts + rng.integers(0, 4, ts.size)  # disorder of at most 3
    t = pa.table({"ts": ts, "k": rng.choice(["a", "b", None], ts.size),
                  "v": rng.integers(0, 9, ts.size)})
    kind = Cumulate(step, step * n)
    aggs = [agg.count(), agg.sum("v"), agg.max("v")]
    got = (oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(4), batch_size=7)
           .window(kind, aggs, by="k").collect())
    want = window_oracle(t, kind, aggs, by="k", time="ts", unit="s")
    key = lambda r: (r["window_start"], r["window_end"], str(r["k"]))  # noqa: E731
    assert sorted(got.to_pylist(), key=key) == sorted(want.to_pylist(), key=key)
