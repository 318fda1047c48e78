"""AdaptWID (004 §6.3): output == from-scratch oracle == WID, for every mode and aggregate.

Properties (DESIGN §8) over disordered feeds with valid punctuation:

* the result equals the oracle (windows by ``extent()``, aggregates by the
  scalar algebra) under forced eager (WID), forced lazy (buffering), the
  Cond. 6.9 model, and tiny absolute thresholds that make groups switch
  back and forth on almost every tuple and punctuation;
* it does not depend on batch boundaries (the oracle does not see them);
* every tuple is accounted for: ``count`` over the windows a tuple belongs to
  matches, nothing is left in state after end of stream, ``_check()`` holds;
* a checkpoint taken mid-run (with transitional groups) and resumed in a
  fresh plan gives the same output as the uninterrupted run.

Scenario (Tumbling 10, thresholds up=2 / down=2 absolute, one group ``a``)::

    ts:    1  2  3 |P10| 11 |P20|
    winVol 1  2  3    0   1    0
    mode   L  L  E    L   L    -      (E at the 3rd tuple: winVol 3 > 2, partial built
                                       from B; emitted at P10, then winVol 0 < 2: lazy)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.adapt import AdaptWID, Thresholds
from oop.errors import ConfigError
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import aggregates as agg
from oop.window.kinds import Landmark, Sliding, Tumbling

from test_adapt_oracle import assert_same_cells, oracle, result_cells
from oop.testing import resumed_output, stop_and_resume

ALL_AGGS = [
    agg.count(), agg.sum("val"), agg.mean("val"), agg.min("val"), agg.max("val"),
    agg.var("val"), agg.std("val"), agg.first("val"), agg.last("val"), agg.median("val"),
    agg.quantile("val", 0.9), agg.distinct("val"), agg.heavy_hitters("val", 2),
    agg.udaf("sumsq", lambda: 0.0, lambda s, v: s + v * v, lambda a, b: a + b, lambda s: s,
             column="val"),
]

kinds = st.one_of(
    st.builds(Tumbling, st.integers(1, 12), st.integers(-5, 5)),
    st.integers(1, 6).flatmap(lambda s: st.builds(
        Sliding, st.integers(s, 4 * s), st.just(s), st.integers(-5, 5))),
)
thresholds = st.one_of(
    st.sampled_from([Thresholds.eager(), Thresholds.lazy(), Thresholds(),
                     Thresholds(decide_on="remaining")]),
    st.builds(lambda d, e, how: Thresholds(up=d + e, down=d, absolute=True, decide_on=how),
              st.integers(0, 3), st.integers(0, 2), st.sampled_from(["closed_extent", "remaining"])),
)


def _with_nulls(t: pa.Table, mask: list[bool]) -> pa.Table:
    vals = t.column("val").to_pylist()
    vals = [None if m else v for v, m in zip(vals, mask)]
    return t.set_column(2, "val", pa.array(vals, pa.int64()))


@st.composite
def feeds(draw, max_rows=60, n_keys=5):
    t = draw(disordered_tables(max_rows=max_rows, n_keys=n_keys, max_delay=8))
    if t.num_rows and draw(st.booleans()):
        t = _with_nulls(t, draw(st.lists(st.booleans(), min_size=t.num_rows,
                                         max_size=t.num_rows)))
    items = draw(exact_punctuation_feed(draw(batch_splits(t, max_batch=12))))
    return t, items


def _run(t, items, kind, aggs, th, n_bins=3, **kw):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    op = AdaptWID(kind, aggs, by="key", thresholds=th, n_bins=n_bins, **kw)
    res = s.via(op).run()
    op._check()
    return res, op


@given(feeds(), kinds, thresholds, st.lists(st.sampled_from(range(len(ALL_AGGS))), min_size=1,
                                            max_size=4, unique=True), st.integers(1, 4))
def test_equals_oracle_all_modes(feed, kind, th, agg_idx, n_bins):
    t, items = feed
    aggs = [ALL_AGGS[i] for i in agg_idx]
    res, op = _run(t, items, kind, aggs, th, n_bins)
    assert_same_cells(result_cells(res.table, aggs), oracle(t.to_pylist(), kind, aggs))
    lg = op.logic
    assert lg.tuples_in == t.num_rows and lg.late == 0
    assert lg.buffer.n_rows == 0 and lg.eager.n_partials == 0 and lg.n_live == 0
    # output punctuation never precedes a row it excludes
    ends = res.table.column("window_end").to_pylist()
    for rows_before, p in res.punctuations:
        assert all(e > p.value for e in ends[rows_before:])


@settings(max_examples=25)
@given(feeds(max_rows=80, n_keys=3), kinds, st.integers(0, 2), st.integers(0, 2))
def test_forced_switching_equals_wid_mode(feed, kind, down, extra):
    """Tiny thresholds: AdaptWID's output is row-for-row the eager (WID) output."""
    t, items = feed
    aggs = [agg.count(), agg.sum("val"), agg.median("val"), agg.last("val")]
    wid, _ = _run(t, items, kind, aggs, Thresholds.eager())
    ada, op = _run(t, items, kind, aggs, Thresholds(up=down + extra, down=down, absolute=True))
    assert_same_cells(result_cells(ada.table, aggs), result_cells(wid.table, aggs))


def _three_sources(t: pa.Table, skew: int):
    """Split ``t`` into three sources; source 2 lags by ``skew`` in arrival (not in event time)."""
    n = t.num_rows
    parts = [t.take(pa.array(np.arange(k, n, 3), pa.int64())) for k in range(3)]
    return parts


@settings(max_examples=25)
@given(disordered_tables(max_rows=60, n_keys=4, max_delay=4), kinds, thresholds,
       st.integers(1, 8))
def test_union_of_three_sources_equals_oracle(t, kind, th, bs):
    aggs = [agg.count(), agg.sum("val"), agg.max("val")]
    parts = _three_sources(t, 0)
    streams = [oop.from_arrow(p, time="ts", unit="ms", punctuation=oop.BoundedDelay(4),
                              batch_size=bs + k, name=f"s{k}") for k, p in enumerate(parts)]
    op = AdaptWID(kind, aggs, by="key", thresholds=th, n_inputs=3)
    res = streams[0].via(op, *streams[1:]).run()
    op._check()
    assert res.late_total == 0
    assert_same_cells(result_cells(res.table, aggs), oracle(t.to_pylist(), kind, aggs))


def test_multi_source_offsets_enter_the_threshold():
    """Cond. 6.9: a leading source makes the others' volume*offset raise the threshold."""
    kind = Sliding(10, 1)
    main = pa.table({"ts": np.arange(0, 100, dtype=np.int64), "key": np.zeros(100, np.int64),
                     "val": np.ones(100, np.int64)})
    ahead = pa.table({"ts": np.array([500], np.int64), "key": np.array([1], np.int64),
                      "val": np.array([1], np.int64)})
    a = oop.from_arrow(main, time="ts", unit="ms", punctuation=oop.Ordered(), batch_size=10, name="m")
    b = oop.from_arrow(ahead, time="ts", unit="ms", punctuation=oop.Ordered(), batch_size=10,
                       name="c")
    op = AdaptWID(kind, [agg.count()], by="key", n_inputs=2)
    a.via(op, b).run(stop_after_rounds=3)
    lg = op.logic
    off = lg.offsets.offsets()
    assert off[1] == 0 and off[0] > 0  # source 1 is S1 (earliest-arriving)
    th = lg._theta(np.array([0]))
    base = lg.aggr * lg.wed.value / (lg.tup * kind.s)
    assert th[0] == pytest.approx(base + lg.wv[0, 0] / kind.r * off[0])


def snapshot_plan(cls, feed, kind):
    """``plan()`` making a fresh stream of ``feed`` through ``cls`` (AdaptWID or
    PanedAdaptWID; count, sum, median by key) whose groups switch at every chance (thresholds
    1/1, 2 bins): the plan of the stop-and-resume tests."""
    t, items = feed
    aggs = [agg.count(), agg.sum("val"), agg.median("val")]
    th = Thresholds(up=1, down=1, absolute=True)

    def plan():
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        return s.via(cls(kind, aggs, by="key", thresholds=th, n_bins=2, name="ad"))

    return plan


@settings(max_examples=20)
@given(feeds(max_rows=70, n_keys=4), kinds, st.integers(1, 12))
def test_snapshot_restore_mid_run_identical(feed, kind, stop):
    full, resumed = stop_and_resume(snapshot_plan(AdaptWID, feed, kind), stop)
    if resumed is not None:
        assert resumed.table.to_pylist() == full.table.to_pylist()


def test_snapshot_restore_with_transitional_groups():
    """Deterministic: the checkpoint is taken while a group is transitional."""
    kind = Sliding(6, 2)
    ts = [0, 1, 1, 1, 2, 3, 4, 5, 7, 9, 11, 12, 13, 20]
    t = pa.table({"ts": ts, "key": [0] * len(ts), "val": list(range(len(ts)))})
    aggs = [agg.count(), agg.sum("val")]
    th = Thresholds(up=3, down=3, absolute=True, decide_on="remaining")

    def plan():
        return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.Ordered(),
                              batch_size=1).via(AdaptWID(kind, aggs, by="key", thresholds=th,
                                                         name="ad"))

    full_plan = plan()
    ex, sink = full_plan.executor()
    ex.open()
    op = next(n.op for n in ex.nodes if n.op.name == "ad")
    seen_trans_at = None
    rounds = 0
    while not all(s.op.exhausted for s in ex.sources):
        ex.run(stop_after_rounds=rounds + 1)
        rounds += 1
        lg = op.logic
        if seen_trans_at is None and ((lg.mode[:1] == 0) & (lg.partial_counts()[:1] > 0)).any():
            seen_trans_at = rounds
    assert seen_trans_at is not None, "scenario never produced a transitional group"
    full = plan().run()
    first = plan().run(stop_after_rounds=seen_trans_at)
    resumed = resumed_output(first, plan().run(resume_from=first.checkpoint))
    assert resumed.table.to_pylist() == full.table.to_pylist()
    assert_same_cells(result_cells(full.table, aggs), oracle(t.to_pylist(), kind, aggs))


def test_scenario_lazy_eager_lazy():
    kind = Tumbling(10)
    batches = [pa.record_batch({"ts": [t], "key": ["a"], "val": [1]}) for t in (1, 2, 3)]
    feed = [*batches, oop.Punctuation("ts", 10), pa.record_batch({"ts": [11], "key": ["a"],
                                                                  "val": [5]}),
            oop.Punctuation("ts", 20)]
    op = AdaptWID(kind, [agg.sum("val")], by="key",
                  thresholds=Thresholds(up=2, down=2, absolute=True, decide_on="remaining"))
    res = oop.from_batches(feed, time="ts", unit="ms", punctuation=oop.External()).via(op).run()
    assert res.table.to_pylist() == [
        {"key": "a", "window_start": 0, "window_end": 10, "sum_val": 3},
        {"key": "a", "window_start": 10, "window_end": 20, "sum_val": 5},
    ]
    m = op.adapt_metrics()
    assert m["switches_to_eager"] == 1
    tl = m["timeline"]
    assert tl["punct"][:2] == [10, 20]
    assert (tl["eager"][0], tl["lazy"][0], tl["transitional"][0]) == (0, 0, 0)  # winVol 0: removed
    # P10 expired all three tuples: winVol 0 < down, so the group went lazy (and was removed);
    # the one tuple of [10, 20) stayed lazy
    assert op.logic.switches_to_lazy == 1


def test_late_tuples_are_counted_and_clipped():
    """A tuple below the punctuation still joins its open windows (004: max{punctuatedWid+1, i})."""
    kind = Sliding(10, 5)
    feed = [pa.record_batch({"ts": [12], "key": [0], "val": [1]}), oop.Punctuation("ts", 10),
            pa.record_batch({"ts": [4, 8], "key": [0, 0], "val": [10, 100]})]
    s = oop.from_batches(feed, time="ts", unit="ms", punctuation=oop.External())
    op = AdaptWID(kind, [agg.sum("val")], by="key")
    # feed the operator directly: the source would drop these as late
    op.open([s.node.op.open()])
    op.on_batch(feed[0])
    op.on_punctuation(feed[1])
    op.on_batch(feed[2])
    assert op.metrics.late == {"drop": 1}  # ts 4: windows [0,10) closed, [-5,5) closed
    out = op.flush()[0].to_pylist()
    assert {(r["window_start"], r["sum_val"]) for r in out} == {(5, 101), (10, 1)}


def test_config_errors_name_the_fix():
    t = pa.table({"ts": [1], "key": ["a"], "val": ["x"]})
    s = oop.from_arrow(t, time="ts", unit="ms")
    with pytest.raises(ConfigError, match="Tumbling or Sliding"):
        s.via(AdaptWID(Landmark(5), [agg.count()], by="key")).run()
    with pytest.raises(ConfigError, match="numeric"):
        s.via(AdaptWID(Tumbling(5), [agg.sum("val")], by="key")).run()
    with pytest.raises(ConfigError, match="thrashing"):
        Thresholds(up=1, down=2)
    with pytest.raises(ConfigError, match="adaptive"):
        Thresholds.parse("sometimes")


def test_duration_specs_and_string_keys():
    t = pa.table({"ts": pa.array([0, 1500, 2500, 3100], pa.timestamp("ms")),
                  "key": ["x", "y", "x", "x"], "val": [1.0, 2.0, 3.0, None]})
    s = oop.from_arrow(t, time="ts", punctuation=oop.Ordered())
    res = s.via(AdaptWID(Sliding("2s", "1s"), [agg.mean("val"), agg.count()], by="key")).run()
    got = {(r["key"], r["window_start"].timestamp(), r["mean_val"], r["count"])
           for r in res.table.to_pylist()}
    assert ("x", 2.0, 3.0, 2) in got and ("x", 3.0, None, 1) in got


@settings(max_examples=30)
@given(feeds(max_rows=60, n_keys=4), kinds, thresholds,
       st.lists(st.sampled_from(range(len(ALL_AGGS) - 1)), min_size=1, max_size=4, unique=True))
def test_equals_wid_operator_and_window_oracle(feed, kind, th, agg_idx):
    """Through the fluent API: ``adaptive_window`` == ``window(method="wid")`` == ``window_oracle``."""
    from oop.window.reference import window_oracle

    t, items = feed
    aggs = [ALL_AGGS[i] for i in agg_idx]

    def src():
        return oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                                schema=t.schema)

    ada = src().adaptive_window(kind, aggs, by="key", thresholds=th).run()
    wid = src().window(kind, aggs, by="key", method="wid").run()
    assert ada.table.schema.equals(wid.table.schema)
    got = result_cells(ada.table, aggs)
    assert_same_cells(got, result_cells(wid.table, aggs))
    assert_same_cells(got, result_cells(window_oracle(t, kind, aggs, by="key"), aggs))


@settings(max_examples=30)
@given(feeds(max_rows=60, n_keys=4), kinds, thresholds,
       st.lists(st.sampled_from(range(len(ALL_AGGS))), min_size=1, max_size=3, unique=True))
def test_pane_variant_equals_oracle(feed, kind, th, agg_idx):
    """Pane-enhanced AdaptWID (eager/lazy per pane, lazy super-aggregate) == oracle."""
    from oop.adapt import PanedAdaptWID

    t, items = feed
    aggs = [ALL_AGGS[i] for i in agg_idx]
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    op = PanedAdaptWID(kind, aggs, by="key", thresholds=th, n_bins=2)
    res = s.via(op).run()
    op._check()
    assert_same_cells(result_cells(res.table, aggs), oracle(t.to_pylist(), kind, aggs))
    assert not op.panes and op.pane_bytes == 0
    ends = res.table.column("window_end").to_pylist()
    for rows_before, p in res.punctuations:
        assert all(e > p.value for e in ends[rows_before:])


def test_dense_tumbling_group_does_not_flip_at_every_boundary():
    """Tumbling 10, one group with 5 tuples per window, thresholds 2/2.

    ``decide_on="remaining"`` (004 to the letter) sees winVol ~0 right after each
    boundary and flips the dense group lazy and back every window;
    ``"closed_extent"`` judges it on the window that just closed (5 > 2) and keeps
    it eager. Same output either way.
    """
    ts = [t for w in range(4) for t in range(10 * w, 10 * w + 10, 2)]
    t = pa.table({"ts": ts, "key": [0] * len(ts), "val": [1] * len(ts)})
    outs, flips = [], {}
    for how in ("remaining", "closed_extent"):
        op = AdaptWID(Tumbling(10), [agg.count()], by="key",
                      thresholds=Thresholds(up=2, down=2, absolute=True, decide_on=how))
        res = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.Ordered(),
                             batch_size=1).via(op).run()
        outs.append(res.table.to_pylist())
        flips[how] = (op.logic.switches_to_eager, op.logic.switches_to_lazy)
    assert outs[0] == outs[1] and [r["count"] for r in outs[0]] == [5, 5, 5, 5]
    assert flips["remaining"][0] >= 3 and flips["remaining"][1] >= 3
    assert flips["closed_extent"] == (1, 0)


def test_compact_state_layout_and_tupcnt_derived_from_presence_lane():
    """Tumbling, one source: tupcnt is the dense store's presence lane (rows per cell), so a
    null in the value column (nn < rows) changes nothing; no tupcnt lane is held.

    Timeline (Tumbling 10, absolute thresholds up=0 / down=0: every group eager)::

        ts:   1 2 (val ok) | 3 4 (val null) |P10| 12 |P20|
        tupcnt lanes: 0 throughout (derived: tupcnt == rows of the cell)
    """
    kind = Tumbling(10)
    feed = [pa.record_batch({"ts": [1, 2], "key": ["a", "b"], "val": [1, 2]})]
    op = AdaptWID(kind, [agg.sum("val")], by="key",
                  thresholds=Thresholds(up=0, down=0, absolute=True))
    s = oop.from_batches([*feed, pa.record_batch({"ts": [3, 4], "key": ["a", "a"],
                                                  "val": pa.array([None, 7], pa.int64())}),
                          oop.Punctuation("ts", 10),
                          pa.record_batch({"ts": [12], "key": ["b"], "val": [4]}),
                          oop.Punctuation("ts", 20)],
                         time="ts", unit="ms", punctuation=oop.External())
    res = s.via(op).run()
    lg = op.logic
    assert lg.tupcnt_from is None and lg.eager.tc_mode == "derived" and lg.eager.tc is None
    assert res.table.to_pylist() == [
        {"key": "a", "window_start": 0, "window_end": 10, "sum_val": 8},
        {"key": "b", "window_start": 0, "window_end": 10, "sum_val": 2},
        {"key": "b", "window_start": 10, "window_end": 20, "sum_val": 4},
    ]
    op._check()
    # before any null: no tupcnt column, group entry = 4 B (flag packed into winVol)
    op2 = AdaptWID(kind, [agg.sum("val")], by="key",
                   thresholds=Thresholds(up=0, down=0, absolute=True))
    oop.from_batches(feed, time="ts", unit="ms", punctuation=oop.External()).via(op2).run()
    assert op2.logic.eager.tc is None and op2.logic.group_entry_bytes == 4
    assert op2.logic.aggr == 4 + 8 + 8  # cell: int32 rows + nn + sum, no tupcnt lane


def test_forced_modes_hold_no_monitoring_state():
    t = pa.table({"ts": list(range(40)), "key": [i % 7 for i in range(40)], "val": list(range(40))})
    for mode in ("eager", "lazy"):
        op = AdaptWID(Sliding(10, 5), [agg.count()], by="key", thresholds=Thresholds(mode=mode))
        oop.from_arrow(t, time="ts", unit="ms", batch_size=6).via(op).run()
        lg = op.logic
        assert lg._wv.size == 0 and lg.group_entry_bytes == 0 and lg.volume.active == 0
        assert op.adapt_metrics()["timeline"]["eager" if mode == "eager" else "lazy"][0] > 0
