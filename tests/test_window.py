"""Window aggregation end to end: oracle, WID == Paned-WID, reference, independence, accounting.

Random disordered feeds with valid punctuation (``oop.testing``) for every
window kind and every aggregate:

* output == ``window_oracle`` (a from-scratch group-by over ``extent()``);
* WID == Paned-WID;
* the compiled operator == the tuple-at-a-time reference (``TupleAtATimeWindow``);
* results do not depend on arrival order or batch boundaries;
* output punctuation on ``window_end`` is respected;
* every input tuple is accounted for (emitted counts + held in state + late);
* invariants (``_check``) hold after every element; snapshot/resume gives the same output.
"""

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.testing import (TABLE_SCHEMA, batch_splits, check_punctuation_respected,
                         disordered_tables, exact_punctuation_feed, late_scripts,
                         reference_replay, reordered_feeds, stop_and_resume)
from oop.window import (Landmark, PartitionedRows, RowSliding, SlideByTuple, Sliding, Tumbling,
                        WindowAggregate, agg, window_operator)
from oop.window.reference import TupleAtATimeWindow, window_oracle

BOUNDED = [agg.count(), agg.sum("val"), agg.mean("val"), agg.min("val"), agg.max("val"),
           agg.var("val"), agg.std("val"), agg.first("val"), agg.last("val")]
HOLISTIC = [agg.median("val"), agg.quantile("val", 0.9), agg.distinct("val"),
            agg.heavy_hitters("val", 2)]
UDAF = agg.udaf("sumsq", lambda: 0.0, lambda s, x: s + x * x, lambda a, b: a + b, lambda s: s,
                column="val")

KINDS = [Tumbling(7), Tumbling(5, origin=3), Sliding(10, 3), Sliding(9, 6, origin=2), Sliding(4, 4),
         Landmark(8), Landmark(5, origin=-1200), RowSliding(5, 2), PartitionedRows(4, 2), SlideByTuple(6, 1),
         SlideByTuple(9, 3)]


def methods_for(kind):
    if isinstance(kind, Landmark):
        return ["paned", "auto"]
    if isinstance(kind, (RowSliding, SlideByTuple)):
        return ["wid", "auto"]
    return ["wid", "paned", "auto"]


def aggs_for(kind):
    return BOUNDED if isinstance(kind, SlideByTuple) else BOUNDED + HOLISTIC + [UDAF]


def run(items, schema, kind, aggs, method="auto", by=("key",), **kw):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    return s.window(kind, aggs, by=list(by), method=method, **kw).run()


#: the sliding windows of the paned-vs-WID properties: overlapping, with an origin, tumbling
PANED_KINDS = [Sliding(12, 3), Sliding(10, 4, origin=1), Sliding(6, 6)]


def matrix_table(data, max_rows: int, max_gap: int) -> pa.Table:
    """A disordered table over the test matrix: disorder bound 0, 6 or 20; 1, 3 or 7 keys."""
    return data.draw(disordered_tables(max_rows=max_rows,
                                       max_delay=data.draw(st.sampled_from([0, 6, 20])),
                                       n_keys=data.draw(st.sampled_from([1, 3, 7])),
                                       max_gap=max_gap))


def assert_paned_in_one_call_equals_wid_and_oracle(items, table, kind, aggs, what):
    """Paned-WID (with ``Multiset.select``, the per-window combine, made to fail: ``what`` must
    take its one-call path) == WID == the from-scratch oracle over ``table``."""
    from oop.window.multiset import Multiset

    def no_select(*a, **k):
        raise AssertionError(f"Paned-WID {what} went window by window through Multiset.select")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Multiset, "select", no_select)
        paned = run(items, table.schema, kind, aggs, "paned").table
    assert_same_rows(paned, run(items, table.schema, kind, aggs, "wid").table)
    assert_same_rows(paned, window_oracle(table, kind, aggs, by=["key"], time="ts", unit="ms"))


#: the float tolerance of result comparisons (relative and absolute), row by row or by columns
TOL = 1e-7


def _close(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return a == b


def assert_same_rows(got: pa.Table, exp: pa.Table, keys=("key",)):
    """Same multiset of rows; floats compared with a tolerance (:func:`_close`)."""
    assert got.schema.names == exp.schema.names
    assert got.num_rows == exp.num_rows, (got.num_rows, exp.num_rows)
    idx = [*keys, "window_start", "window_end"]
    differ = rows_differ_columnar(got, exp, idx)
    if differ is NOT_COLUMNAR:
        differ = rows_differ(got, exp, idx)
    assert differ is None, differ


def rows_differ(got: pa.Table, exp: pa.Table, idx: list[str]):
    """The first pair of rows that differ after sorting both by ``idx`` (repr order), or None:
    the row-by-row comparison, for any column types and ties in ``idx``."""
    def rows(t):
        r = t.to_pylist()
        return sorted(r, key=lambda x: tuple((x[c] is None, repr(x[c])) for c in idx))

    for x, y in zip(rows(got), rows(exp)):
        if not all(_close(x[c], y[c]) for c in x):
            return (x, y)
    return None


NOT_COLUMNAR = "not comparable by columns"
_FLAT = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string,
         pa.types.is_large_string, pa.types.is_timestamp)


def rows_differ_columnar(got: pa.Table, exp: pa.Table, idx: list[str]):
    """:func:`rows_differ` by whole columns (tables of 10^5 rows and more): both sorted by
    ``idx`` with Arrow, then compared column by column, floats with :func:`_close`'s
    tolerance. :data:`NOT_COLUMNAR` where that pairing or comparison could differ from the
    row-by-row one: other column types, unlike schemas, or rows that tie on ``idx``."""
    if (got.schema.types != exp.schema.types
            or not all(any(f(t) for f in _FLAT) for t in got.schema.types)
            or got.group_by(idx).aggregate([]).num_rows != got.num_rows):
        return NOT_COLUMNAR
    order = [(c, "ascending") for c in idx]
    g, e = got.sort_by(order), exp.sort_by(order)
    same = np.ones(got.num_rows, bool)
    for c in got.schema.names:
        x, y = g.column(c).combine_chunks(), e.column(c).combine_chunks()
        nx, ny = x.is_null().to_numpy(zero_copy_only=False), y.is_null().to_numpy(zero_copy_only=False)
        if pa.types.is_floating(x.type):
            a = x.to_numpy(zero_copy_only=False).astype(np.float64)
            b = y.to_numpy(zero_copy_only=False).astype(np.float64)
            with np.errstate(invalid="ignore"):
                within = np.abs(a - b) <= np.maximum(TOL * np.maximum(np.abs(a), np.abs(b)), TOL)
                close = (a == b) | (np.isfinite(a) & np.isfinite(b) & within)  # as math.isclose
            same &= (nx == ny) & (nx | close)
        else:
            eq = pc.equal(x, y).fill_null(False).to_numpy(zero_copy_only=False)
            same &= (nx & ny) | eq
    if same.all():
        return None
    i = int(np.flatnonzero(~same)[0])
    return (g.slice(i, 1).to_pylist()[0], e.slice(i, 1).to_pylist()[0])


@st.composite
def result_pairs(draw):
    """Two window-result-like tables of the same rows up to a few changes: keys and bounds
    (ties on them or not), an int, a float (nulls, NaN, infinities, tiny and large changes)."""
    n = draw(st.integers(0, 12))
    key = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
    fl = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, 1.0, 1.0 + 1e-9, 1.0 + 1e-6, 1e-8]))
    rows = [{"key": draw(key), "window_start": draw(st.integers(0, 3)),
             "window_end": draw(st.integers(0, 3)), "n": draw(st.integers(0, 2)), "x": draw(fl)}
            for _ in range(n)]
    other = [dict(r) for r in draw(st.permutations(rows))]
    for r in other:
        if draw(st.integers(0, 4)) == 0:
            col = draw(st.sampled_from(list(r)))
            r[col] = draw({"key": key, "x": fl}.get(col, st.integers(0, 3)))
        elif r["x"] is not None and draw(st.booleans()):  # a relative change within/beyond TOL
            r["x"] = r["x"] * (1 + draw(st.sampled_from([1e-9, -1e-9, 1e-6, -1e-6])))
    schema = pa.schema([("key", pa.string()), ("window_start", pa.int64()),
                        ("window_end", pa.int64()), ("n", pa.int64()), ("x", pa.float64())])
    return pa.Table.from_pylist(rows, schema), pa.Table.from_pylist(other, schema)


@settings(max_examples=200)
@given(pair=result_pairs())
def test_columnar_row_comparison_agrees_with_the_row_by_row_one(pair):
    """The columnar comparison of big results gives the row-by-row verdict wherever it applies."""
    got, exp = pair
    idx = ["key", "window_start", "window_end"]
    columnar = rows_differ_columnar(got, exp, idx)
    if columnar is not NOT_COLUMNAR:
        assert (columnar is None) == (rows_differ(got, exp, idx) is None), (got.to_pylist(),
                                                                           exp.to_pylist())


@pytest.mark.parametrize("a,b", [(math.inf, 1.7e308), (math.inf, math.inf), (math.nan, math.nan),
                                 (None, 0.0), (None, None), (0.0, -0.0), (1.0, 1.0 + 1e-6),
                                 (1.0, 1.0 + 1e-9), (1e-8, 0.0)])
def test_columnar_row_comparison_edge_values(a, b):
    schema = pa.schema([("key", pa.string()), ("window_start", pa.int64()),
                        ("window_end", pa.int64()), ("x", pa.float64())])
    got, exp = (pa.Table.from_pylist([{"key": "k", "window_start": 0, "window_end": 1, "x": v}],
                                     schema) for v in (a, b))
    idx = ["key", "window_start", "window_end"]
    assert (rows_differ_columnar(got, exp, idx) is None) == (rows_differ(got, exp, idx) is None)


@st.composite
def feeds(draw, max_rows=40, unbounded=True):
    delay = draw(st.sampled_from([0, 3, 10] + ([None] if unbounded else [])))
    t = draw(disordered_tables(max_rows=max_rows, max_delay=delay,
                               string_keys=draw(st.booleans())))
    items = draw(exact_punctuation_feed(draw(batch_splits(t))))
    return t, items


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=12)
@given(data=st.data())
def test_output_equals_the_oracle(kind, data):
    t, items = data.draw(feeds())
    method = data.draw(st.sampled_from(methods_for(kind)))
    aggs = aggs_for(kind)
    res = run(items, t.schema, kind, aggs, method)
    exp = window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms")
    assert_same_rows(res.table, exp)
    if not kind.row_based:
        check_punctuation_respected(res.table, res.punctuations, attr="window_end")
    before = int((t.column("ts").to_numpy() < kind.o).sum()) if isinstance(kind, Landmark) else 0
    assert res.late_total == before  # landmark: tuples before the origin are in no window


@pytest.mark.parametrize("kind", [Sliding(10, 3), Sliding(12, 8, origin=-5), Tumbling(6)], ids=repr)
@settings(max_examples=15)
@given(data=st.data())
def test_wid_equals_paned_wid(kind, data):
    t, items = data.draw(feeds(max_rows=60))
    aggs = BOUNDED + HOLISTIC
    wid = run(items, t.schema, kind, aggs, "wid")
    paned = run(items, t.schema, kind, aggs, "paned")
    assert_same_rows(paned.table, wid.table)
    assert paned.metrics["window"].peak_state_items > 0 or t.num_rows == 0


@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3), Sliding(9, 6, origin=2)], ids=repr)
@settings(max_examples=15)
@given(data=st.data())
def test_kernel_equals_tuple_at_a_time_reference(kind, data):
    t, items = data.draw(feeds())
    aggs = BOUNDED + [agg.median("val"), agg.distinct("val")]
    res = run(items, t.schema, kind, aggs, data.draw(st.sampled_from(["wid", "paned"])))
    ref = TupleAtATimeWindow(kind, aggs, ["key"])
    script = []
    for it in items:
        if isinstance(it, Punctuation):
            script.append(it.value)
        else:
            script.extend((r, r["ts"]) for r in it.to_pylist())
    rows = ref.run(script)
    exp = pa.Table.from_pylist(rows, schema=res.table.schema) if rows else res.table.slice(0, 0)
    assert_same_rows(res.table, exp)


@pytest.mark.parametrize("kind", [Tumbling(5), Sliding(8, 2), Landmark(6)], ids=repr)
@settings(max_examples=15)
@given(data=st.data())
def test_independent_of_arrival_order_and_batch_boundaries(kind, data):
    t = data.draw(disordered_tables(max_rows=40, max_delay=None))
    outs = [run(items, t.schema, kind, BOUNDED + HOLISTIC).table
            for items in data.draw(reordered_feeds(t))]
    assert_same_rows(outs[0], outs[1])


def test_timestamp_time_column_and_typed_outputs():
    ts = pa.array([1_000, 2_500, 1_200, 4_000, 3_100], pa.timestamp("ms"))
    t = pa.table({"ts": ts, "key": ["a", "b", "a", "a", "b"], "val": [1.5, 2.0, 3.0, 4.0, 5.0],
                  "when": ts})
    res = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay("2s"), batch_size=2) \
        .window(Tumbling("2s"), [agg.count(), agg.sum("val"), agg.min("when")], by="key").run()
    out = res.table
    assert out.schema.field("window_start").type == pa.timestamp("ms")
    assert out.schema.field("min_when").type == pa.timestamp("ms")
    exp = window_oracle(t, Tumbling("2s"), [agg.count(), agg.sum("val"), agg.min("when")],
                        by="key", time="ts")
    assert_same_rows(out, exp)
    assert res.punctuations[-1][1] == Punctuation("window_end", 4_000)


def test_several_key_columns_and_no_keys():
    t = pa.table({"ts": [1, 2, 3, 11, 12], "a": ["x", "x", "y", "x", "x"], "b": [1, 2, 1, 1, 1],
                  "val": [1, 2, 3, 4, 5]})
    for by in (["a", "b"], []):
        out = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(1)) \
            .window(Tumbling(10), [agg.count(), agg.sum("val")], by=by).collect()
        assert_same_rows(out, window_oracle(t, Tumbling(10), [agg.count(), agg.sum("val")], by=by,
                                            time="ts", unit="s"), keys=by)


# ---- operator-level driving: late policies, accounting, invariants ------------------------
SCHEMA = TABLE_SCHEMA


def open_op(op):
    op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
    return op


def scripts():
    """Batches and punctuations in any order -- punctuation may make later tuples late."""
    return late_scripts(max_steps=12, max_rows=6, n_keys=4)


@pytest.mark.parametrize("method", ["wid", "paned"])
@pytest.mark.parametrize("kind", [Tumbling(6), Sliding(9, 3)], ids=repr)
@given(steps=scripts())
def test_accounting_late_and_invariants(kind, method, steps):
    """tuples in == tuples counted in emitted windows + held in the ring + late (tumbling),
    and late rows are exactly those behind the last punctuation."""
    op = open_op(WindowAggregate(kind, [agg.count(), agg.sum("val")], by="key", method=method))
    emitted = []
    for i, s in enumerate(steps):
        out = op.on_punctuation(s) if isinstance(s, Punctuation) else op.on_batch(s)
        emitted += [b for b in out if isinstance(b, pa.RecordBatch)]
        op._check()
        so_far = reference_replay(steps[: i + 1])
        late, n_in = len(so_far.late), len(so_far.late) + len(so_far.rows)
        assert op.metrics.late.get("late_dropped", 0) == late
        if isinstance(kind, Tumbling):
            held = 0
            if op.ring is not None:  # rows in units not emitted yet (paned keeps one more pane)
                first = op.ring.base if op.emitted is None else (
                    op.emitted if op.units is None else op.units.window_panes(op.emitted)[0])
                held = sum(int(op.ring.view(("rows", None), u).sum())
                           for u in range(max(first, op.ring.base), op.ring.top))
            out_count = sum(sum(b.column("count").to_pylist()) for b in emitted)
            assert out_count + held + late == n_in
    emitted += [b for b in op.flush() if isinstance(b, pa.RecordBatch)]
    got = pa.Table.from_batches(emitted, schema=op.out_schema)
    exp = window_oracle(pa.Table.from_pylist(reference_replay(steps).rows, schema=SCHEMA), kind,
                        [agg.count(), agg.sum("val")], by="key", time="ts")
    assert_same_rows(got, exp)


@pytest.mark.parametrize("policy", ["drop", "side_output", "raise"])
def test_operator_late_policies(policy):
    op = open_op(WindowAggregate(Tumbling(10), [agg.count()], late=policy))
    op.on_batch(pa.record_batch({"ts": [1, 15], "key": [0, 0], "val": [1, 1]}, schema=SCHEMA))
    op.on_punctuation(Punctuation("ts", 12))
    late = pa.record_batch({"ts": [3, 20, 11], "key": [0, 0, 0], "val": [1, 1, 1]}, schema=SCHEMA)
    if policy == "raise":
        with pytest.raises(oop.LateTupleError, match="ts=3"):
            op.on_batch(late)
        return
    op.on_batch(late)
    assert op.metrics.late == {policy: 2}
    if policy == "side_output":
        assert op.side_outputs["late"][0].column("ts").to_pylist() == [3, 11]


@pytest.mark.parametrize("method", ["wid", "paned"])
@given(steps=scripts(), lateness=st.integers(0, 12))
def test_update_policy_revisions_converge_to_the_oracle(method, steps, lateness):
    """With late='update', the last row emitted per (key, window) equals the oracle over every
    tuple that was not more than ``allowed_lateness`` behind the punctuation."""
    kind = Sliding(8, 4)
    aggs = [agg.count(), agg.sum("val"), agg.max("val"), agg.median("val"), agg.distinct("val"),
            UDAF]
    op = open_op(WindowAggregate(kind, aggs, by="key", method=method, late="update",
                                 allowed_lateness=lateness))
    emitted = []
    for s in steps:
        out = op.on_punctuation(s) if isinstance(s, Punctuation) else op.on_batch(s)
        emitted += [b for b in out if isinstance(b, pa.RecordBatch)]
        op._check()
    emitted += [b for b in op.flush() if isinstance(b, pa.RecordBatch)]
    ref = reference_replay(steps, allowed_lateness=lateness)
    accepted = ref.rows
    assert op.metrics.late.get("late_dropped", 0) == len(ref.late)
    got = pa.Table.from_batches(emitted, schema=op.out_schema).to_pylist()
    final = {}
    for r in got:  # later rows revise earlier ones
        final[(r["key"], r["window_start"])] = r
    exp = window_oracle(pa.Table.from_pylist(accepted, schema=SCHEMA), kind, aggs, by="key",
                        time="ts").to_pylist()
    assert len(final) == len(exp)
    for e in exp:
        g = final[(e["key"], e["window_start"])]
        assert all(_close(g[k], e[k]) for k in e), (g, e)
    # a revision follows an emission of the same window (or revises a window emitted empty)
    assert all(isinstance(r["is_revision"], bool) for r in got)


def test_update_scenario_timeline():
    """
    Sliding(10, 5), allowed_lateness 10, late='update':

        ts:   1  3  7   |P(10)|  2(late, ok)  12  |P(25)|  4 (too late: 4 < 25-10)
        w0 [-5,5):  a{1,3}             -> emitted at P(10): count 2, then revised: count 3
        w1 [0,10):  a{1,3} b{7}        -> emitted at P(10); a revised to count 3
    """
    sch = pa.schema([("ts", pa.int64()), ("k", pa.string()), ("v", pa.int64())])
    op = WindowAggregate(Sliding(10, 5), [agg.count(), agg.sum("v")], by="k", late="update",
                         allowed_lateness=10)
    op.open([StreamInfo("s", sch, {"ts": "s"}, "ts")])
    out = op.on_batch(pa.record_batch({"ts": [1, 3, 7], "k": ["a", "a", "b"], "v": [1, 2, 3]}, schema=sch))
    assert out == []
    first = op.on_punctuation(Punctuation("ts", 10))
    assert [r["count"] for r in first[0].to_pylist()] == [2, 2, 1]
    assert first[1] == Punctuation("window_end", 5)
    rev = op.on_batch(pa.record_batch({"ts": [2, 12], "k": ["a", "a"], "v": [10, 20]}, schema=sch))
    assert [(r["window_start"], r["count"], r["sum_v"], r["is_revision"]) for r in rev[0].to_pylist()] \
        == [(-5, 3, 13, True), (0, 3, 13, True)]
    op.on_punctuation(Punctuation("ts", 25))
    assert op.on_batch(pa.record_batch({"ts": [4], "k": ["a"], "v": [100]}, schema=sch)) == []
    assert op.metrics.late == {"late_dropped": 1}


def test_tumbling_scenario_timeline():
    """
    Tumbling(10), BoundedDelay(4), batches of 2 rows, one key:

        arrival:  ts=3  ts=12 | ts=8  ts=15 | ts=21 ts=17 | end
        punct in:       P(8)  |       P(11) |       P(17) | EOS
        emits:                | [0,10):2    |             | [10,20):3 [20,30):1
        punct out: P(window_end,10) | P(window_end,20) |  (P(17) completes no window)
    """
    t = pa.table({"ts": [3, 12, 8, 15, 21, 17], "val": [1, 1, 1, 1, 1, 1]})
    res = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(4), batch_size=2) \
        .window(Tumbling(10), agg.count()).run()
    assert [(r["window_start"], r["count"]) for r in res.table.to_pylist()] == [(0, 2), (10, 3), (20, 1)]
    assert [(n, p.value) for n, p in res.punctuations] == [(0, 10), (1, 20)]


def test_snapshot_resume_gives_the_same_output():
    rng = np.random.default_rng(3)
    n = 400
    ts = np.arange(n) * 2 + rng.integers(0, 20, n)
    t = pa.table({"ts": ts, "key": rng.integers(0, 5, n), "val": rng.integers(0, 9, n)})
    for kind, method in [(Sliding(20, 5), "paned"), (Sliding(20, 5), "wid"), (SlideByTuple(9, 2), "auto"),
                         (PartitionedRows(6, 3), "auto"), (Landmark(30), "auto")]:
        aggs = [agg.count(), agg.sum("val")] + ([] if isinstance(kind, SlideByTuple) else
                                                [agg.median("val"), agg.distinct("val"),
                                                 agg.heavy_hitters("val", 2), UDAF])

        def plan():
            return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(20),
                                  batch_size=37).window(kind, aggs, by="key", method=method)

        full, resumed = stop_and_resume(plan, 4)
        assert resumed is not None, f"{kind}: the run ended before the stop"
        assert_same_rows(resumed.table, full.table)


@pytest.mark.parametrize("make, msg", [
    (lambda: window_operator(Landmark(5), agg.count(), method="wid"), "no upper wid bound"),
    (lambda: window_operator(Tumbling(5), agg.count(), method="fast"), "method='fast'"),
    (lambda: window_operator(SlideByTuple(5), agg.median("val")), "holistic aggregates"),
    (lambda: window_operator(PartitionedRows(5, 1), agg.count()), "needs by="),
    (lambda: window_operator(Tumbling(5), [agg.count(), agg.count()]), "duplicate output"),
])
def test_config_errors_say_why(make, msg):
    with pytest.raises(oop.ConfigError, match=msg):
        make()


@pytest.mark.parametrize("kwargs, msg, exc", [
    (dict(aggs=agg.sum("nope")), "no column", oop.UnknownColumnError),
    (dict(aggs=agg.sum("name")), "needs a numeric column", oop.ConfigError),
    (dict(aggs=agg.count(), allowed_lateness=5), "only applies with late='update'", oop.ConfigError),
])
def test_open_errors_name_operator_and_column(kwargs, msg, exc):
    t = pa.table({"ts": [1, 2], "name": ["a", "b"]})
    aggs = kwargs.pop("aggs")
    with pytest.raises(exc, match=msg):
        oop.from_arrow(t, time="ts", unit="s").window(Tumbling(5), aggs, **kwargs).run()


def test_auto_method_follows_the_cost_model():
    from oop.window import choose_method

    # many tuples per pane, few groups: panes win (Eq. 6.2 vs 6.4)
    assert choose_method(Sliding(10_000, 1_000), [agg.count()], 10.0, 100)[0] == "paned"
    # one tuple per pane and as many groups: WID
    assert choose_method(Sliding(10, 9), [agg.max("v")], 0.01, 1)[0] == "wid"
    assert choose_method(Tumbling(10), [agg.count()], 100.0, 1)[0] == "wid"
    assert choose_method(Landmark(10), [agg.count()], 0.0, 1)[0] == "paned"


@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3), RowSliding(6, 2)], ids=repr)
@settings(max_examples=15)
@given(data=st.data())
def test_hash_layout_equals_the_oracle(kind, data):
    t, items = data.draw(feeds())
    aggs = BOUNDED + [agg.median("val")]
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    op = window_operator(kind, aggs, by="key", method="wid", layout="hash")
    res = s.via(op).run()
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))
    if t.num_rows:
        assert op.plan_info["layout"].startswith("hash")


def test_auto_layout_picks_hash_for_sparse_keys_and_dense_otherwise():
    rng = np.random.default_rng(0)
    n = 20_000
    ts = np.sort(rng.integers(0, 100_000, n))
    for keys, expect in ((rng.integers(0, 1_000_000, n), "hash"), (rng.integers(0, 50, n), "dense")):
        t = pa.table({"ts": ts, "key": keys, "val": rng.integers(0, 9, n)})
        op = window_operator(Tumbling(100), [agg.count(), agg.sum("val")], by="key", method="wid")
        res = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(0),
                             batch_size=4096).via(op).run()
        assert op.plan_info["layout"].startswith(expect)
        assert_same_rows(res.table, window_oracle(t, Tumbling(100), [agg.count(), agg.sum("val")],
                                                  by="key", time="ts"))
        op._check()


def test_numba_udaf_runs_compiled_and_matches_the_oracle():
    import numba as nb

    @nb.njit
    def init():
        return (0.0, 0.0)

    @nb.njit
    def update(s, v):
        return (s[0] + v, s[1] + 1.0)

    @nb.njit
    def merge(a, b):
        return (a[0] + b[0], a[1] + b[1])

    @nb.njit
    def finalize(s):
        return s[0] / s[1]

    mean2 = agg.udaf("mymean", init, update, merge, finalize, column="val")
    rng = np.random.default_rng(5)
    n = 300
    t = pa.table({"ts": np.arange(n) * 3 + rng.integers(0, 10, n), "key": rng.integers(0, 4, n),
                  "val": rng.integers(-9, 9, n)})
    for method in ("wid", "paned"):
        out = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(10),
                             batch_size=32).window(Sliding(30, 10), [mean2, agg.mean("val")],
                                                   by="key", method=method).collect()
        assert_same_rows(out, window_oracle(t, Sliding(30, 10), [mean2, agg.mean("val")],
                                            by="key", time="ts"))
        assert all(_close(a, b) for a, b in zip(out.column("mymean_val").to_pylist(),
                                                out.column("mean_val").to_pylist()))


@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3), Landmark(8), SlideByTuple(6, 2),
                                  PartitionedRows(4, 2)], ids=repr)
@settings(max_examples=12)
@given(data=st.data())
def test_null_values_are_ignored_like_sql(kind, data):
    """Value aggregates skip nulls (count() counts rows); nulls may first appear mid-stream."""
    t = data.draw(disordered_tables(max_rows=40, max_delay=5))
    nulls = data.draw(st.lists(st.booleans(), min_size=t.num_rows, max_size=t.num_rows))
    vals = [None if z else v for z, v in zip(nulls, t.column("val").to_pylist())]
    t = t.set_column(2, "val", pa.array(vals, pa.int64()))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    method = data.draw(st.sampled_from(methods_for(kind)))
    aggs = aggs_for(kind)
    res = run(items, t.schema, kind, aggs, method)
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


def test_emit_wid_and_output_punctuation_on_window_end():
    t = pa.table({"ts": [1, 7, 3, 12, 25, 18], "key": [1, 1, 2, 1, 2, 2], "val": [1, 2, 3, 4, 5, 6]})
    for method in ("wid", "paned"):
        res = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(5), batch_size=2) \
            .window(Sliding(10, 5), agg.sum("val"), by="key", method=method, emit_wid=True).run()
        exp = window_oracle(t, Sliding(10, 5), agg.sum("val"), by="key", time="ts", unit="s",
                            emit_wid=True)
        assert_same_rows(res.table, exp)
        check_punctuation_respected(res.table, res.punctuations, attr="window_end")
        assert all(p.attr == "window_end" for _, p in res.punctuations)


def test_snapshot_resume_with_the_hash_layout():
    rng = np.random.default_rng(3)
    n = 1500
    t = pa.table({"ts": np.arange(n) * 2 + rng.integers(0, 20, n), "key": rng.integers(0, 10**6, n),
                  "val": rng.integers(0, 9, n)})

    def plan():
        op = window_operator(Sliding(40, 10), [agg.count(), agg.sum("val"), agg.median("val")],
                             by="key", method="wid", layout="hash")
        return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(20),
                              batch_size=200).via(op)

    full, resumed = stop_and_resume(plan, 3)
    assert resumed is not None, "the run ended before the stop"
    assert_same_rows(resumed.table, full.table)


@pytest.mark.parametrize("kind", [Sliding(10, 3), Sliding(12, 8, origin=-5), Sliding(20, 2)], ids=repr)
@settings(max_examples=20)
@given(data=st.data())
def test_paned_compiled_sum_path_equals_wid_and_oracle(kind, data):
    """count/sum/mean/var/std only: Paned-WID emits through the compiled differential kernel."""
    t, items = data.draw(feeds(max_rows=60))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val"), agg.var("val"), agg.std("val")]
    paned = run(items, t.schema, kind, aggs, "paned")
    assert_same_rows(paned.table, run(items, t.schema, kind, aggs, "wid").table)
    assert_same_rows(paned.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))
