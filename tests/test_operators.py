"""Select / Project / Apply / DupElim / Meld: kernel vs tuple-at-a-time reference vs oracle.

Each property test draws a disordered table, cuts it into random batches,
interleaves valid punctuation (``oop.testing``), runs the operator in a plan
and checks (a) the result equals the operator's reference run tuple by tuple
over the same feed, (b) it equals a from-scratch computation over the whole
table (oracle), (c) it does not depend on batch boundaries, (d) every tuple is
accounted for, and that punctuation stays true of the output.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.operators.apply import Apply, apply_reference
from oop.operators.base import StreamInfo
from oop.operators.dupelim import DupElim, dupelim_reference
from oop.operators.meld import Meld, UnsupportedPunctuationError, meld_reference
from oop.operators.project import Project, project_reference
from oop.operators.select import Select, select_reference
from oop.stream.elements import END_OF_STREAM, GroupPunctuation, JointPunctuation, Punctuation
from oop.testing import (
    batch_splits,
    check_punctuation_respected,
    disordered_tables,
    exact_punctuation_feed,
    reference_replay,
    reordered_feeds,
    rows,
    same_bag,
)


@st.composite
def feeds(draw, **table_kw):
    t = draw(disordered_tables(**table_kw))
    items = draw(exact_punctuation_feed(draw(batch_splits(t))))
    return t, items


def _src(items, t, name="src"):
    return oop.from_batches(items, time="ts", punctuation=oop.External(), schema=t.schema,
                            name=name)


# ---- Select ---------------------------------------------------------------------------------
@given(feeds(), st.integers(-50, 50))
def test_select_reference_oracle_and_punctuation(feed, c):
    t, items = feed
    res = _src(items, t).select(pc.field("val") > c).run()
    ref = select_reference(reference_replay(items).rows, lambda r: r["val"] > c)
    assert res.table.to_pylist() == ref                                   # kernel == reference
    assert same_bag(res.table, t.filter(pc.field("val") > c))             # oracle
    check_punctuation_respected(res.table, res.punctuations)
    assert [p.value for _, p in res.punctuations] == [v for _, v in reference_replay(items).punctuations]


@given(feeds())
def test_select_callable_equals_expression(feed):
    t, items = feed
    a = _src(items, t).select(pc.field("key") == 1).collect()
    b = _src(items, t).select(lambda b: np.asarray(b["key"]) == 1).collect()
    assert a.equals(b)


# ---- Project --------------------------------------------------------------------------------
@given(feeds())
def test_project_reference_and_punctuation_rule(feed):
    t, items = feed
    res = _src(items, t).project(["val", "ts"]).run()
    assert res.table.column_names == ["val", "ts"]
    assert res.table.to_pylist() == project_reference(reference_replay(items).rows, ["val", "ts"])
    check_punctuation_respected(res.table, res.punctuations)
    # dropping the progressing attribute drops its punctuation (counted)
    res2 = _src(items, t).project(["key"]).run()
    assert res2.punctuations == []
    n_p = len(reference_replay(items).punctuations)
    assert res2.metrics["project"].counters.get("punctuations_dropped", 0) == n_p


def test_project_group_and_joint_punctuation_rules():
    op = Project(["ts", "k"])
    op.open([StreamInfo("s", pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("u", pa.int64())]),
                        {"ts": "ms", "u": "ms"}, "ts")])
    gp_kept = GroupPunctuation("ts", pa.record_batch({"k": [1]}), np.array([5]))
    gp_lost = GroupPunctuation("ts", pa.record_batch({"u": [1]}), np.array([5]))
    assert op.on_punctuation(gp_kept) == [gp_kept]
    assert op.on_punctuation(gp_lost) == []
    assert op.on_punctuation(JointPunctuation((("ts", 1), ("u", 2)))) == []
    assert op.on_punctuation(Punctuation("u", 3)) == []
    assert op.output.times == {"ts": "ms"}


# ---- Apply ----------------------------------------------------------------------------------
@given(feeds())
def test_apply_expressions_and_callables_vs_reference(feed):
    t, items = feed
    res = _src(items, t).apply(
        w=pc.field("val") * 3 + pc.field("key"),
        neg=lambda b: pc.negate(b["val"]),
        val=pc.field("val") - 1,          # overwrite a plain column: expressions see the input
    ).run()
    ref = apply_reference(reference_replay(items).rows, {
        "w": lambda r: r["val"] * 3 + r["key"], "neg": lambda r: -r["val"],
        "val": lambda r: r["val"] - 1,
    })
    assert res.table.column_names == ["ts", "key", "val", "w", "neg"]
    assert res.table.to_pylist() == ref
    check_punctuation_respected(res.table, res.punctuations)


@given(feeds())
def test_apply_monotone_overwrite_maps_punctuation(feed):
    t, items = feed
    op = Apply({"ts": pc.field("ts") * 2 + 1}, monotone={"ts": lambda v: 2 * v + 1})
    res = _src(items, t).via(op).run()
    ref = reference_replay(items)
    assert [p.value for _, p in res.punctuations] == [2 * v + 1 for _, v in ref.punctuations]
    assert res.table.column("ts").to_pylist() == [2 * r["ts"] + 1 for r in ref.rows]
    check_punctuation_respected(res.table, res.punctuations)


def test_apply_refuses_to_overwrite_progressing_attribute_and_drops_group_punct():
    t = pa.table({"ts": [1, 2], "k": [1, 1]})
    with pytest.raises(oop.ConfigError, match=r"'ts' is a progressing attribute.*monotone"):
        oop.from_arrow(t, time="ts").apply(ts=pc.field("ts") + 1).run()
    with pytest.raises(oop.ConfigError, match="monotone mapping given for 'x'"):
        oop.from_arrow(t, time="ts").via(Apply({"k": 1}, monotone={"x": abs})).run()
    op = Apply({"k": pc.field("k") + 1})
    op.open([StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
    gp = GroupPunctuation("ts", pa.record_batch({"k": [1]}), np.array([5]))
    assert op.on_punctuation(gp) == []
    assert op.on_punctuation(Punctuation("ts", 4)) == [Punctuation("ts", 4)]


def test_apply_bad_results_are_clear_errors():
    t = pa.table({"ts": [1, 2], "k": [1, 1]})
    with pytest.raises(oop.SchemaMismatchError, match="2 rows"):
        # one value too few for every non-empty batch
        oop.from_arrow(t, time="ts").apply(
            x=lambda b: pa.array(list(range(max(b.num_rows - 1, 0))), pa.int64())).run()
    with pytest.raises(oop.ConfigError, match="must be a pyarrow.compute Expression"):
        Apply({"x": object()})


# ---- DupElim --------------------------------------------------------------------------------
@given(st.data(), st.sampled_from([None, ["ts", "key"]]), st.sampled_from(["auto", "arrow"]))
def test_dupelim_reference_oracle_state_and_accounting(data, keys, kernel):
    t, items = data.draw(feeds(n_keys=3, max_gap=1, string_keys=data.draw(st.booleans())))
    op = DupElim(keys, kernel=kernel)
    res = _src(items, t).via(op).run()
    kcols = keys or ["ts", "key", "val"]
    ref_rows, ref_p, _ = dupelim_reference(items, kcols, "ts")
    assert res.table.to_pylist() == ref_rows                              # kernel == reference
    assert Counter(rows(res.table, kcols)) == Counter(set(rows(t, kcols)))  # oracle: distinct keys
    m = res.metrics["dupelim"]
    assert m.tuples_in == m.tuples_out + m.counters.get("duplicates", 0)  # accounting
    # the source forwards each punctuation once; DupElim forwards what it gets
    assert [p.value for _, p in res.punctuations] == sorted(set(ref_p))
    check_punctuation_respected(res.table, res.punctuations)
    op._check()


@given(st.data())
def test_dupelim_independent_of_batch_boundaries(data):
    t = data.draw(disordered_tables(n_keys=2, max_gap=1, max_delay=4))
    outs = []
    for _ in range(2):
        items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
        outs.append(_src(items, t).dupelim(["ts", "key"]).collect().to_pylist())
    assert outs[0] == outs[1]


def test_dupelim_purges_on_punctuation_and_checks_invariants():
    """Timeline: keys (ts, k); P3 purges every key with ts < 3.

    in : [1a 2a 1a] P3 [3a 3a 4b]  P5
    out: [1a 2a]       [3a 4b]
    state: 2 keys  -> 0 -> 2 -> 0
    """
    b1 = pa.record_batch({"ts": [1, 2, 1], "k": ["a", "a", "a"]})
    b2 = pa.record_batch({"ts": [3, 3, 4], "k": ["a", "a", "b"]})
    op = DupElim()
    op.open([StreamInfo("s", b1.schema, {"ts": "ms"}, "ts")])
    assert op.on_batch(b1)[0].to_pylist() == [{"ts": 1, "k": "a"}, {"ts": 2, "k": "a"}]
    assert op.state_size().items == 2
    op._check()
    op.on_punctuation(Punctuation("ts", 3))
    assert op.state_size().items == 0
    assert op.on_batch(b2)[0].to_pylist() == [{"ts": 3, "k": "a"}, {"ts": 4, "k": "b"}]
    op._check()
    op.on_punctuation(Punctuation("ts", 5))
    assert op.state_size().items == 0
    assert op.metrics.counters["duplicates"] == 2


@pytest.mark.parametrize("kernel", ["auto", "arrow"])
@pytest.mark.parametrize("ktype", [pa.int64(), pa.uint8(), pa.string()])
def test_dupelim_nulls_compare_equal_and_key_rule(kernel, ktype):
    vals = [None, None, "2"] if ktype == pa.string() else [None, None, 2]
    b = pa.record_batch({"ts": [1, 1, 1], "k": pa.array(vals, ktype)})
    op = DupElim(kernel=kernel)
    op.open([StreamInfo("s", b.schema, {"ts": "ms"}, "ts")])
    assert op.on_batch(b)[0].column("k").to_pylist() == [None, vals[2]]
    b2 = pa.record_batch({"ts": [1, 1], "k": pa.array([vals[2], None], ktype)})
    assert op.on_batch(b2) == []
    op._check()
    t = pa.table({"ts": [1], "k": [1]})
    with pytest.raises(oop.ConfigError, match="does not include its progressing attribute 'ts'"):
        oop.from_arrow(t, time="ts").dupelim(["k"]).run()
    res = oop.from_arrow(t, time="ts").via(DupElim(["k"], unbounded=True)).run()
    assert res.table.num_rows == 1


# ---- Meld -----------------------------------------------------------------------------------
@st.composite
def meld_events(draw):
    n = draw(st.integers(1, 4))
    per_input = []
    for _ in range(n):
        vals = sorted(draw(st.lists(st.integers(0, 30), max_size=6)))
        evs = []
        for v in vals:
            if draw(st.booleans()):
                evs.append({"ts": v + draw(st.integers(0, 5))})
            evs.append(Punctuation("ts", v))
        if draw(st.booleans()):
            evs.append(None)
        per_input.append(evs)
    # a random interleaving preserving each input's order
    events = []
    cursors = [0] * n
    while any(c < len(e) for c, e in zip(cursors, per_input)):
        live = [i for i in range(n) if cursors[i] < len(per_input[i])]
        i = draw(st.sampled_from(live))
        events.append((i, per_input[i][cursors[i]]))
        cursors[i] += 1
    return n, events


@given(meld_events())
def test_meld_operator_equals_reference(ne):
    n, events = ne
    schema = pa.schema([("ts", pa.int64())])
    op = Meld(n)
    op.open([StreamInfo(f"in{i}", schema, {"ts": "ms"}, "ts") for i in range(n)])
    out = []
    for port, item in events:
        if item is None:
            res = op.on_end(port)
        elif isinstance(item, Punctuation):
            res = op.on_punctuation(item, port)
        else:
            res = op.on_batch(pa.RecordBatch.from_pylist([item], schema=schema), port)
        for el in res:
            out.extend(el.to_pylist() if isinstance(el, pa.RecordBatch) else [el.value])
        op._check()
        assert op.state_size().items == 0  # a Meld never holds tuples
    assert out == meld_reference(events, n)


@given(st.data(), st.integers(2, 4))
def test_meld_plan_oracle_and_punctuation(data, k):
    tables, streams = [], []
    for i in range(k):
        t = data.draw(disordered_tables(max_delay=5))
        items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
        tables.append(t)
        streams.append(_src(items, t, name=f"s{i}"))
    res = streams[0].meld(*streams[1:]).run()
    assert same_bag(res.table, pa.concat_tables(tables))
    check_punctuation_respected(res.table, res.punctuations)
    m = res.metrics["meld"]
    assert m.tuples_in == m.tuples_out and m.peak_state_items == 0


def test_meld_joint_punctuation_and_group_error():
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64())])
    op = Meld(2)
    op.open([StreamInfo(f"in{i}", schema, {"a": "ms", "b": "ms"}, "a") for i in range(2)])
    assert op.on_punctuation(JointPunctuation((("a", 5), ("b", 9))), 0) == []
    assert op.on_punctuation(JointPunctuation((("a", 7), ("b", 4))), 1) == [
        JointPunctuation((("a", 5), ("b", 4)))]
    assert op.on_end(1) == [JointPunctuation((("a", 5), ("b", 9)))]
    with pytest.raises(UnsupportedPunctuationError, match="same attributes"):
        op.on_punctuation(JointPunctuation((("b", 1), ("a", 1))), 0)


def _gp(keys, values, attr="ts"):
    return GroupPunctuation(attr, pa.record_batch({"g": pa.array(keys, pa.int64())}),
                            np.asarray(values, dtype=np.int64))


def _gvals(els):
    out = {}
    for el in els:
        if isinstance(el, GroupPunctuation):
            out.update(zip(el.keys.column("g").to_pylist(), el.values.tolist()))
    return out


def test_meld_group_punctuation_scenario():
    """Group bound of the union = min over inputs of max(linear, group bound).

    in0: G(1:10, 2:4) ........ P6 .............
    in1: ........... G(1:8) ........ P9 .... end
    out: ........... G(1:8) .. - ... P6 G(1:9) G(1:10)

    (after in1's P9, group 1 = min(max(6, 10), max(9, 8)) = 9; group 2 = min(6, 9) = 6
    is no better than the linear P6, so it is not emitted; in1's end lifts group 1 to 10)
    """
    schema = pa.schema([("ts", pa.int64()), ("g", pa.int64())])
    op = Meld(2)
    op.open([StreamInfo(f"in{i}", schema, {"ts": "ms"}, "ts") for i in range(2)])
    assert op.on_punctuation(_gp([1, 2], [10, 4]), 0) == []       # in1 knows nothing yet
    assert _gvals(op.on_punctuation(_gp([1], [8]), 1)) == {1: 8}
    out = op.on_punctuation(Punctuation("ts", 6), 0)
    assert _gvals(out) == {} and not any(isinstance(e, Punctuation) for e in out)
    out = op.on_punctuation(Punctuation("ts", 9), 1)
    assert [e for e in out if isinstance(e, Punctuation)] == [Punctuation("ts", 6)]
    assert _gvals(out) == {1: 9}          # min(max(6, 10), max(9, 8)); group 2: min(6, 9) = 6 = linear
    op._check()
    out = op.on_end(1)
    assert _gvals(out) == {1: 10} and Punctuation("ts", 6) not in out
    assert op.state_size().items == 2
    with pytest.raises(UnsupportedPunctuationError, match="same group key"):
        op.on_punctuation(GroupPunctuation("ts", pa.record_batch({"h": [1]}), np.array([1])), 0)


@given(st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 3),
                          st.integers(0, 20)), max_size=25))
def test_meld_group_punctuation_model(events):
    """After any sequence, every emitted group bound is <= the model's combined bound,
    and the last one emitted for each group equals it whenever it beats the linear bound."""
    n = 3
    schema = pa.schema([("ts", pa.int64()), ("g", pa.int64())])
    op = Meld(n)
    op.open([StreamInfo(f"in{i}", schema, {"ts": "ms"}, "ts") for i in range(n)])
    lin = [None] * n
    grp = {}
    last = {}
    for port, is_group, g, v in events:
        if is_group:
            cur = grp.setdefault(g, [None] * n)
            # group punctuation must not go below what this input promised before
            base = max(x for x in (cur[port], lin[port], -1) if x is not None)
            v = max(v, base)
            cur[port] = v
            out = op.on_punctuation(_gp([g], [v]), port)
        else:
            v = max(v, lin[port] if lin[port] is not None else v)
            lin[port] = v
            out = op.on_punctuation(Punctuation("ts", v), port)
        for k, val in _gvals(out).items():
            assert val > last.get(k, -10**9)
            last[k] = val
        op._check()
    for k, b in grp.items():
        per = [max(x for x in (b[i], lin[i]) if x is not None) if (b[i] is not None or lin[i] is not None)
               else None for i in range(n)]
        if any(x is None for x in per):
            assert k not in last
            continue
        combined = min(per)
        linear = min(lin) if all(x is not None for x in lin) else None
        if linear is None or combined > linear:
            assert last.get(k) == combined


def test_meld_lull_holds_no_tuples():
    """in0 is busy, in1 is silent (no punctuation): every in0 batch leaves at once.

    in0: [1] P1 [2] P2 [3] P3
    in1: ......................   (lull)
    out: [1]    [2]    [3]        (no punctuation: in1 knows nothing)
    """
    schema = pa.schema([("ts", pa.int64())])
    op = Meld(2)
    op.open([StreamInfo(f"in{i}", schema, {"ts": "ms"}, "ts") for i in range(2)])
    for v in (1, 2, 3):
        out = op.on_batch(pa.record_batch({"ts": [v]}), 0)
        assert [r["ts"] for r in out[0].to_pylist()] == [v]
        assert op.on_punctuation(Punctuation("ts", v), 0) == []
    assert op.on_punctuation(Punctuation("ts", 2), 1) == [Punctuation("ts", 2)]


def test_meld_rejects_mismatched_inputs():
    a = oop.from_arrow(pa.table({"ts": [1], "v": [1]}), time="ts", name="a")
    b = oop.from_arrow(pa.table({"ts": [1], "v": [1.0]}), time="ts", name="b")
    with pytest.raises(oop.SchemaMismatchError, match="input 1 \\(stream 'b'\\)"):
        a.meld(b).run()


@given(st.data())
def test_dupelim_result_independent_of_arrival_order(data):
    """Two different arrival orders of the same tuples: the same distinct rows come out."""
    t = data.draw(disordered_tables(n_keys=2, max_gap=1, max_delay=None))
    outs = [_src(items, t).dupelim().collect() for items in data.draw(reordered_feeds(t))]
    assert Counter(rows(outs[0])) == Counter(rows(outs[1])) == Counter(set(rows(t)))


@pytest.mark.parametrize("kernel", ["auto", "arrow"])
def test_dupelim_large_state_growth_and_purge_vs_reference(kernel):
    """Thousands of keys: the hash set grows and rehashes many times; purges compact it."""
    rng = np.random.default_rng(3)
    n = 20_000
    ts = np.arange(n, dtype=np.int64) // 4 + rng.integers(0, 50, n)
    t = pa.table({"ts": pa.array(ts, pa.timestamp("ms")), "key": rng.integers(0, 30, n),
                  "val": rng.integers(0, 2, n)})
    items = []
    batches = t.to_batches(max_chunksize=1500)
    for i, b in enumerate(batches):
        items.append(b)
        if i % 3 == 2:
            rest = [x.column(0).cast(pa.int64()).to_numpy() for x in batches[i + 1:]]
            if rest:
                items.append(Punctuation("ts", int(min(r.min() for r in rest))))
    op = DupElim(kernel=kernel)
    res = oop.from_batches(items, time="ts", punctuation=oop.External()).via(op).run()
    ref_items = [x if isinstance(x, Punctuation) else
                 x.set_column(0, "ts", x.column(0).cast(pa.int64())) for x in items]
    ref_rows, _, _ = dupelim_reference(ref_items, ["ts", "key", "val"], "ts")
    got = res.table.set_column(0, "ts", res.table.column(0).cast(pa.int64()))
    assert got.to_pylist() == ref_rows
    m = res.metrics["dupelim"]
    assert m.tuples_in == m.tuples_out + m.counters["duplicates"] and m.counters["duplicates"] > 0
    assert 0 < m.peak_state_items < n
