"""A window aggregate downstream of OA-Join closes its windows from the join's punctuation.

Q7-1-like plan: ``S0 JOIN S1 (band) -> tumbling count on S0.ts``. The join's
individual punctuation on S0.ts (``min(b0, b1 - range1)``) is what the window
operator needs: windows are emitted *during* the run (not only at the end)
and the counts equal a from-scratch count over the nested-loop join.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.join import WindowPredicate, nested_loop_join
from oop.testing import band_disordered_pair


@settings(max_examples=10)
@given(seed=st.integers(0, 10_000), r0=st.integers(0, 15), r1=st.integers(0, 15),
       size=st.integers(10, 80))
def test_window_count_over_join_closes_windows_early(seed, r0, r1, size):
    from oop.window import aggregates as agg
    from oop.window.kinds import Tumbling

    L, R = band_disordered_pair(seed, 300, 1000, 5, key="k")
    res = (oop.from_arrow(L, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25, name="L")
           .join(oop.from_arrow(R, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25,
                                name="R"), on="k", band=(r0, r1))
           .window(Tumbling(size), agg.count())
           .run())
    pairs = nested_loop_join(L, R, WindowPredicate.band(r0, r1), [("k", "k")], "ts", "ts")
    expected: Counter = Counter()
    for row, mult in pairs.items():
        expected[(row[0] // size) * size] += mult
    got = dict(zip(res.table.column("window_start").to_pylist(),
                   res.table.column("count").to_pylist()))
    assert got == dict(expected)
    # the window operator emitted results before the end of the input: the join's
    # punctuation on S0.ts let it close windows mid-stream
    mid = [n for n, p in res.punctuations if isinstance(p, oop.Punctuation) and 0 < n < len(got)]
    assert mid, "no window was closed before end of stream"
