"""Paned-WID window-level query for min/max/first/last (004 §6.2): compiled block combine.

* end to end: Paned-WID == WID == the from-scratch oracle for min/max/first/last
  (with and without keys, int and float values, windows of many panes, many windows
  per punctuation), and the per-window Python path is not taken;
* ``method="auto"`` picks panes for max when windows hold many panes and plain WID
  when they hold one or two.

Pane timeline of one punctuation (``P = 3`` panes per window, slide = 1 pane)::

    panes    a0  a0+1 a0+2 | a0+3 a0+4 a0+5 | a0+6 ...    blocks of P panes from a0
    pre      ->   ->   ->  |  ->   ->   ->  |             running combine from block start
    suf      <-   <-   <-  |  <-   <-   <-  |             running combine to block end
    window a0+1 = suf[a0+1] (+) pre[a0+3]                 (straddles two blocks)
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import Sliding, Tumbling, agg, choose_method
from oop.window.paned import PaneCombiner
from oop.window.reference import window_oracle

from test_window import assert_same_rows



# ---- end to end: Paned-WID == WID == oracle -----------------------------------------------
SELECT = [agg.min("val"), agg.max("val"), agg.first("val"), agg.last("val")]
KINDS = [Sliding(20, 2), Sliding(12, 8, origin=-5), Sliding(9, 6, origin=2), Sliding(15, 5),
         Tumbling(6)]


def _run(items, schema, kind, aggs, method, by):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    return s.window(kind, aggs, by=list(by), method=method).run()


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_paned_select_path_equals_wid_and_oracle(kind, data):
    delay = data.draw(st.sampled_from([0, 4, 15, None]))
    t = data.draw(disordered_tables(max_rows=80, max_delay=delay, n_keys=data.draw(st.sampled_from([1, 3, 6])),
                                    string_keys=data.draw(st.booleans()), max_gap=data.draw(st.sampled_from([1, 3, 8]))))
    if data.draw(st.booleans()):  # float lanes
        t = t.set_column(2, "val", t.column("val").cast(pa.float64()))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    by = data.draw(st.sampled_from([("key",), ()]))
    aggs = SELECT + ([agg.count()] if data.draw(st.booleans()) else [])

    def no_per_window(*a, **k):  # the compiled block path serves every window
        raise AssertionError("Paned-WID took the per-window path for bounded aggregates")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(PaneCombiner, "window_cells", no_per_window)
        paned = _run(items, t.schema, kind, aggs, "paned", by)
    wid = _run(items, t.schema, kind, aggs, "wid", by)
    exp = window_oracle(t, kind, aggs, by=list(by), time="ts", unit="ms")
    assert_same_rows(paned.table, wid.table, keys=by)
    assert_same_rows(paned.table, exp, keys=by)


def test_select_scenario_many_windows_per_punctuation():
    """One key, 40 panes of 1 ms, windows of 5 panes sliding by 1: a single punctuation
    closes 36 windows; every max is the max of its 5 tuples (value = its time, reversed)."""
    ts = np.arange(40, dtype=np.int64)
    val = (100 - ts) * ((ts % 3) - 1)  # non-monotone
    t = pa.table({"ts": ts, "key": np.zeros(40, np.int64), "val": val})
    res = _run([t.to_batches()[0]], t.schema, Sliding(5, 1), [agg.max("val"), agg.first("val")],
               "paned", ())
    out = res.table.sort_by("window_end").to_pydict()
    ends = out["window_end"]
    for e, mx, fs in zip(ends, out["max_val"], out["first_val"]):
        inside = val[(ts >= e - 5) & (ts < e)]
        assert mx == inside.max() and fs == inside[0]
    assert len(ends) == 44  # windows ending 1..44 (every tuple is in 5 windows)


# ---- the cost model ----------------------------------------------------------------------
def test_auto_picks_panes_for_max_over_many_panes_and_wid_over_few():
    # 50 panes per window, one pane per slide, one group: WID updates 50 cells per tuple;
    # panes update one and combine in O(1) per window (block combine)
    assert choose_method(Sliding(250, 5), [agg.max("v")], 1.0, 1)[0] == "paned"
    assert choose_method(Sliding(50, 5), [agg.max("v")], 1.0, 1)[0] == "paned"
    # two panes per window, many groups per pane: WID's 2 updates per tuple are cheaper
    assert choose_method(Sliding(10, 5), [agg.max("v")], 1.0, 5)[0] == "wid"
    # holistic aggregates still combine P pane tables per window
    m, c = choose_method(Sliding(100, 10), [agg.median("v")], 1.0, 10)
    assert c["cost_paned"] > choose_method(Sliding(100, 10), [agg.max("v")], 1.0, 10)[1]["cost_paned"]


@settings(max_examples=60)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 5), st.integers(-30, 30), st.integers(-40, 40))
def test_pane_window_geometry_matches_the_kind(g, pane_per_slide, slides_per_range, origin, pane):
    """first_window/last_window (integer formulas) == the windows of the kind's wids()."""
    s = g * pane_per_slide
    r = s * slides_per_range + g * (pane_per_slide > 1)  # range need not be a multiple of slide
    kind = Sliding(r, s, origin=origin)
    pc = PaneCombiner(kind, [], [])
    o = kind.o  # panes start at the grid of window ends: origin + range mod slide (Spark)
    lo, hi = kind.wids(np.array([o + pane * pc.g, o + (pane + 1) * pc.g - 1]))
    assert pc.first_window(pane) == int(lo[0]) and pc.last_window(pane) == int(hi[1]) - 1
    for w in range(pc.first_window(pane), pc.last_window(pane) + 1):
        a, b = pc.window_panes(w)
        assert a <= pane < b
