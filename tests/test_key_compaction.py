"""Key compaction under every aggregate and late policy: forgetting keys never changes results.

The key dictionary of a window operator forgets the keys whose windows all
closed (``WindowAggregate._compact_keys``). These tests run the compaction
far more often than in production (``KEYS_COMPACT_MIN`` patched down to 1)
on feeds whose keys rotate over time -- a key's windows close, the key is
forgotten, then it comes back with a new code -- and assert:

* WID and Paned-WID (sum, select, holistic, UDAF lanes; ``late=None`` and
  ``late="update"``) equal the from-scratch oracle;
* compactions did happen (``plan_info["key_compactions"]``) on the
  deterministic feeds, and the dictionary stays small with never-repeating
  keys (the bound tests live in ``test_state_bounds.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import oop
import oop.window.aggregate as WA
from oop.stream.elements import Punctuation
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import SlideByTuple, Sliding, Tumbling, agg
from oop.window.reference import window_oracle

from test_window import BOUNDED, HOLISTIC, UDAF, assert_same_rows

KINDS = [Tumbling(7), Sliding(10, 3), Sliding(12, 4, origin=2)]


def _rotate_keys(t: pa.Table, period: int = 30, block: int = 6, sets: int = 5) -> pa.Table:
    """Keys ``k`` of ``t`` become ``k + block x ((ts - min ts) // period mod sets)``: disjoint
    key sets take turns, so each set's windows close (its keys can be forgotten) and the set
    comes back ``(sets - 1) x period`` later."""
    if t.num_rows == 0:
        return t
    ts = t.column("ts").to_numpy()
    rot = ((ts - ts.min()) // period) % sets
    key = t.column("key")
    if pa.types.is_string(key.type):
        new = pa.array([f"{k}/{r}" for k, r in zip(key.to_pylist(), rot.tolist())], pa.string())
    else:
        new = pa.array(key.to_numpy() + block * rot, pa.int64())
    return t.set_column(t.schema.get_field_index("key"), "key", new)


@st.composite
def rotating_feeds(draw, max_rows=150):
    t = draw(disordered_tables(min_rows=30, max_rows=max_rows, n_keys=6, max_gap=4,
                               max_delay=draw(st.sampled_from([0, 3, 10, None])),
                               string_keys=draw(st.booleans())))
    t = _rotate_keys(t)
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


def _run(items, schema, kind, aggs, method, **kw):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    return s.window(kind, aggs, by=["key"], method=method, **kw).run()


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow])
@given(data=st.data())  # enough rows for the key sets to turn (large_base_example)
def test_keys_forgotten_and_coming_back_equal_the_oracle(kind, data):
    """Every aggregate, WID and Paned-WID, compaction checked at every punctuation."""
    t, items = data.draw(rotating_feeds())
    method = data.draw(st.sampled_from(["wid", "paned"]))
    aggs = BOUNDED + HOLISTIC + [UDAF]
    from oop.window import WindowAggregate

    with pytest.MonkeyPatch.context() as m:
        m.setattr(WA, "KEYS_COMPACT_MIN", 1)
        op = WindowAggregate(kind, aggs, by=["key"], method=method)
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        res = s.via(op).run()
    n = op.plan_info.get("key_compactions", 0)
    event(f"compactions > 0: {n > 0}")
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))
    assert res.late_total == 0


@pytest.mark.parametrize("kind", [Tumbling(10), Sliding(20, 5)], ids=repr)
@pytest.mark.parametrize("method", ["wid", "paned"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow])
@given(data=st.data())
def test_late_update_with_compaction_final_revisions_equal_the_oracle(kind, method, data):
    """late='update': keys stay while their windows may be revised (allowed lateness), then
    go; the last revision of every window equals the oracle over every tuple."""
    t = data.draw(disordered_tables(max_delay=10, min_rows=30, max_rows=150, n_keys=6,
                                     max_gap=4))
    t = _rotate_keys(t)
    batches = data.draw(batch_splits(t))
    s = oop.from_batches(batches, time="ts", unit="ms", punctuation=oop.Ordered(),
                         late="update", schema=t.schema)
    aggs = [agg.count(), agg.sum("val"), agg.min("val"), agg.last("val"), agg.median("val"),
            agg.distinct("val")]
    from oop.window import WindowAggregate

    with pytest.MonkeyPatch.context() as m:
        m.setattr(WA, "KEYS_COMPACT_MIN", 1)
        op = WindowAggregate(kind, aggs, by=["key"], method=method, late="update",
                             allowed_lateness=10)
        res = s.via(op).run()
    event(f"compactions > 0: {op.plan_info.get('key_compactions', 0) > 0}")
    assert res.late_total == 0  # every tuple is at most 10 ms behind: all revised in
    got = _final_rows(res.table.drop_columns(["is_revision"]))
    exp = _final_rows(window_oracle(t, kind, aggs, by="key", time="ts", unit="ms"))
    assert got.keys() == exp.keys()
    for k in exp:
        assert got[k]["count"] == exp[k]["count"] and got[k]["min_val"] == exp[k]["min_val"]
        assert got[k]["sum_val"] == exp[k]["sum_val"] and got[k]["last_val"] == exp[k]["last_val"]
        assert got[k]["median_val"] == pytest.approx(exp[k]["median_val"])
        assert got[k]["distinct_val"] == exp[k]["distinct_val"]


def _final_rows(t: pa.Table) -> dict:
    """The last row per (key, window_start)."""
    out = {}
    for r in t.to_pylist():
        out[(r["key"], r["window_start"])] = r
    return out


def test_rotating_keys_are_compacted_and_come_back():
    """Deterministic: the same key sets return every 2 periods; compaction runs many times and
    the results still equal the oracle, for every lane family under Paned-WID."""
    rng = np.random.default_rng(7)
    n = 6000
    ts = np.sort(rng.integers(0, 60_000, n)).astype(np.int64)
    blk = (ts // 2000) % 3  # 3 key sets of 500 keys, taking turns every 2 s
    t = pa.table({"ts": ts, "key": rng.integers(0, 500, n) + 500 * blk,
                  "val": rng.integers(-50, 50, n)})
    items: list = []
    for b in t.to_batches(max_chunksize=300):
        items += [b, Punctuation("ts", int(b.column("ts")[-1].as_py()) - 50)]
    kind = Sliding(1000, 250)
    aggs = BOUNDED + HOLISTIC + [UDAF]
    from oop.window import WindowAggregate

    with pytest.MonkeyPatch.context() as m:
        m.setattr(WA, "KEYS_COMPACT_MIN", 64)
        op = WindowAggregate(kind, aggs, by=["key"], method="paned")
        res = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                               schema=t.schema).via(op).run()
    assert op.plan_info["key_compactions"] >= 10
    assert op.enc.n_codes < 1500  # never all 1500 keys at once at the end
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("kind", [SlideByTuple(6, 1), SlideByTuple(9, 3)], ids=repr)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow])
@given(data=st.data())
def test_slide_by_tuple_forgets_keys_and_equals_the_oracle(kind, data):
    """The bins algorithm forgets groups no retained bin holds; results == the oracle."""
    t, items = data.draw(rotating_feeds())
    from oop.window import window_operator

    with pytest.MonkeyPatch.context() as m:
        m.setattr(WA, "KEYS_COMPACT_MIN", 1)
        op = window_operator(kind, BOUNDED, by="key")
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        res = s.via(op).run()
    event(f"compactions > 0: {op.plan_info.get('key_compactions', 0) > 0}")
    assert_same_rows(res.table, window_oracle(t, kind, BOUNDED, by=["key"], time="ts",
                                              unit="ms"))


def test_slide_by_tuple_never_repeating_keys_stay_bounded():
    """30k session ids, 200 a second, 1 s batches: the group axis and the dictionary follow
    the keys of the retained bins, not every key seen; the output equals the from-scratch
    oracle. Without compaction the dictionary keeps every key (shown on the first quarter
    of the feed: that run is quadratic in the keys, 13 s on the whole feed)."""
    from test_state_bounds import _session_feed
    from oop.window import window_operator

    t, items = _session_feed(30_000, False, every=200, lag=100)
    kind = SlideByTuple(200, 5)
    aggs = [agg.count(), agg.sum("val"), agg.min("val"), agg.last("val")]

    def go(feed: list) -> tuple:
        op = window_operator(kind, aggs, by="key")
        res = oop.from_batches(feed, time="ts", unit="ms", punctuation=oop.External(),
                               schema=t.schema).via(op).run()
        return op, res

    op, res = go(items)
    assert op.plan_info["key_compactions"] > 3
    assert op.enc.n_codes < 8192 and op.C <= 8192
    assert res.metrics[op.name].peak_state_items < 30_000 // 2
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))
    quarter = items[: len(items) // 4]
    seen = len({k for b in quarter if isinstance(b, pa.RecordBatch)
                for k in b.column("key").to_pylist()})
    with pytest.MonkeyPatch.context() as m:
        m.setattr(WA, "KEYS_COMPACT_MIN", 1 << 40)
        whole_op, _ = go(quarter)
    assert seen > 8192 // 2 and whole_op.enc.n_codes == seen
    assert whole_op.plan_info.get("key_compactions", 0) == 0


def test_partitioned_rows_never_repeating_partitions_hit_the_state_budget():
    """Partitioned row windows cannot forget a partition (its row counter is state): a run
    over never-repeating partitions is stopped by --max-state with one line naming the
    operator, not by the OOM killer."""
    from test_state_bounds import _session_feed
    from oop.errors import StateLimitError
    from oop.limits import state_budget
    from oop.window import PartitionedRows

    t, items = _session_feed(100_000, False)
    with state_budget(4 << 20):
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        with pytest.raises(StateLimitError, match=r"^parts: state would grow to .* over the "
                                                  r"--max-state limit of 4\.0 MiB; [^\n]*$"):
            s.window(PartitionedRows(4, 2), [agg.count(), agg.sum("val")], by="key",
                     name="parts").run()
