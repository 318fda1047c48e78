"""OA-Join and SplitJoin against a from-scratch nested-loop join (004 ch. 7, 002).

Every example draws two disordered inputs with valid punctuation, a join
variant (band / tumbling, inner / left / right / full / semi / anti, keys of
several types, an optional residual) and an output-punctuation mode, pushes
a random interleaving of the two inputs through the operator (``_check()``
after every step) and asserts:

* the output bag == ``nested_loop_join`` over the same data (which also
  proves: no result emitted twice -- every input row has a unique ``id`` --
  and outer rows exactly once);
* every output punctuation is respected by every later output row;
* the state is empty at end of stream;
* SplitJoin (k workers) == single-worker join; arrival order and batch
  boundaries do not change the result.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.errors import ConfigError, LateTupleError
from oop.join import JoinConfig, OAJoin, SplitJoin, WindowPredicate, make_join
from oop.join.reference import drive, nested_loop_join, rows_counter
from oop.join.spec import HOWS, PUNCTUATION_MODES
from oop.join.state import SideState, probe_kernel, probe_reference
from oop.operators.base import StreamInfo
from oop.stream.elements import INT64_MIN, JointPunctuation, Punctuation
from oop.stream.late import LatePolicy
from oop.testing import resumed_output

TMAX = 30
KEY_KINDS = ("int", "str", "none", "two")


def _schema(kind: str) -> pa.Schema:
    f = [pa.field("ts", pa.int64()), pa.field("id", pa.int64()), pa.field("val", pa.int64())]
    if kind == "int":
        f.append(pa.field("k", pa.int64()))
    elif kind == "str":
        f.append(pa.field("k", pa.string()))
    elif kind == "two":
        f += [pa.field("k", pa.int64()), pa.field("s", pa.string())]
    return pa.schema(f)


def _on(kind: str) -> tuple[tuple[str, str], ...]:
    return {"int": (("k", "k"),), "str": (("k", "k"),), "none": (),
            "two": (("k", "k"), ("s", "s"))}[kind]


@st.composite
def side_feed(draw, kind: str, id0: int, n_max: int = 22):
    """(table of all rows, list of batches/punctuations in arrival order)."""
    n = draw(st.integers(0, n_max))
    ts = draw(st.lists(st.integers(0, TMAX), min_size=n, max_size=n))
    vals = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    cols = {"ts": ts, "id": list(range(id0, id0 + n)), "val": vals}
    small = st.one_of(st.none(), st.integers(0, 3))
    if kind in ("int", "two"):
        cols["k"] = draw(st.lists(small, min_size=n, max_size=n))
    if kind == "str":
        cols["k"] = draw(st.lists(st.one_of(st.none(), st.sampled_from("abcd")), min_size=n,
                                  max_size=n))
    if kind == "two":
        cols["s"] = draw(st.lists(st.sampled_from(["x", "yy"]), min_size=n, max_size=n))
    table = pa.table(cols, schema=_schema(kind))
    perm = draw(st.permutations(range(n)))
    arrived = table.take(pa.array(perm, type=pa.int64())) if n else table
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    bounds = [0, *cuts, n]
    feed = []
    last = INT64_MIN
    ats = arrived.column("ts").to_pylist()
    for a, b in zip(bounds, bounds[1:]):
        feed.append(pa.record_batch(arrived.slice(a, b - a).to_batches()[0].columns
                                    if b > a else [pa.array([], type=f.type) for f in table.schema],
                                    schema=table.schema))
        rest_min = min(ats[b:], default=TMAX + 5)
        if draw(st.booleans()) and rest_min > last:
            # exact punctuation (== the next minimum) half the time: boundary cases
            v = draw(st.one_of(st.just(rest_min), st.integers(max(last, -5), rest_min)))
            if v > last:
                feed.append(Punctuation("ts", v))
                last = v
    return table, feed


@st.composite
def join_case(draw):
    kind = draw(st.sampled_from(KEY_KINDS))
    L, lfeed = draw(side_feed(kind, 0))
    R, rfeed = draw(side_feed(kind, 1000))
    order = draw(st.lists(st.booleans(), min_size=len(lfeed) + len(rfeed),
                          max_size=len(lfeed) + len(rfeed)))
    feed, i, j = [], 0, 0
    for take_left in order:
        if (take_left and i < len(lfeed)) or j >= len(rfeed):
            feed.append((0, lfeed[i]))
            i += 1
        else:
            feed.append((1, rfeed[j]))
            j += 1
    if draw(st.booleans()):
        r0 = draw(st.integers(-3, 10))
        r1 = draw(st.integers(max(-3, -r0), 10))
        pred = WindowPredicate.band(r0, r1)
    else:
        pred = WindowPredicate.tumbling(draw(st.integers(1, 15)))
    return kind, L, R, feed, pred


def _infos(kind: str) -> list[StreamInfo]:
    s = _schema(kind)
    return [StreamInfo("L", s, {"ts": "ms"}, "ts"), StreamInfo("R", s, {"ts": "ms"}, "ts")]


def _run(cfg: JoinConfig, kind: str, feed, workers: int = 1, end_order=(0, 1)):
    op = make_join(cfg, workers)
    out = drive(op, _infos(kind), feed, check=True, end_order=end_order)
    return op, out


def _assert_punctuation_respected(out) -> None:
    """No output row after a punctuation violates it; values never go backwards."""
    later: list[dict] = []
    last: dict[str, int] = {}
    for el in reversed(out):
        if isinstance(el, pa.RecordBatch):
            later.extend(el.to_pylist())
        elif isinstance(el, Punctuation):
            bad = [r for r in later if r[el.attr] is not None and r[el.attr] < el.value]
            assert not bad, (el, bad[:3])
        elif isinstance(el, JointPunctuation):
            bad = [r for r in later
                   if all(r[a] is not None and r[a] < v for a, v in el.bounds)]
            assert not bad, (el, bad[:3])
    for el in out:
        if isinstance(el, Punctuation):
            assert el.value > last.get(el.attr, INT64_MIN), "punctuation did not grow"
            last[el.attr] = el.value


def _bag(out, names) -> Counter:
    c: Counter = Counter()
    for el in out:
        if isinstance(el, pa.RecordBatch):
            assert el.schema.names == names, (el.schema.names, names)
            c += rows_counter(el)
    return c


RESIDUALS = {
    None: (None, None),
    "expr": (pc.field("val") <= pc.field("val_right"), lambda d: d["val"] <= d["val_right"]),
    "call": (lambda b: pc.not_equal(b["val"], b["val_right"]),
             lambda d: d["val"] != d["val_right"]),
}


@settings(max_examples=150)
@given(case=join_case(), how=st.sampled_from(HOWS), mode=st.sampled_from(PUNCTUATION_MODES),
       residual=st.sampled_from(list(RESIDUALS)), workers=st.sampled_from([1, 1, 3]),
       end_first=st.sampled_from([0, 1]))
def test_oa_join_equals_nested_loop(case, how, mode, residual, workers, end_first):
    kind, L, R, feed, pred = case
    res_vec, res_row = RESIDUALS[residual]
    cfg = JoinConfig(pred, _on(kind), how, mode, res_vec)
    op, out = _run(cfg, kind, feed, workers, end_order=(end_first, 1 - end_first))
    expected = nested_loop_join(L, R, pred, _on(kind), "ts", "ts", how, res_row)
    got = _bag(out, op.output.schema.names)
    assert got == expected
    _assert_punctuation_respected(out)
    assert op.state_size().items == 0 and all(s.n == 0 for w in op.states for s in w)
    assert op.metrics.late_total == 0


@settings(max_examples=25)
@given(case=join_case(), how=st.sampled_from(HOWS), perm_seed=st.integers(0, 2**16))
def test_split_join_equals_single_worker_and_order_free(case, how, perm_seed):
    kind, L, R, feed, pred = case
    cfg = JoinConfig(pred, _on(kind), how, "both")
    _, a = _run(cfg, kind, feed, 1)
    _, b = _run(cfg, kind, feed, 2)
    names = a[0].schema.names if a and isinstance(a[0], pa.RecordBatch) else None
    bag_a = sum((rows_counter(e) for e in a if isinstance(e, pa.RecordBatch)), Counter())
    bag_b = sum((rows_counter(e) for e in b if isinstance(e, pa.RecordBatch)), Counter())
    assert bag_a == bag_b
    # a different arrival order / batching of the same data, without punctuation
    rng = np.random.default_rng(perm_seed)
    feed2 = []
    for port, t in ((0, L), (1, R)):
        if t.num_rows:
            t2 = t.take(pa.array(rng.permutation(t.num_rows)))
            for bt in t2.to_batches(max_chunksize=int(rng.integers(1, 8))):
                feed2.append((port, bt))
    rng.shuffle(feed2)
    _, c = _run(cfg, kind, feed2, 1)
    bag_c = sum((rows_counter(e) for e in c if isinstance(e, pa.RecordBatch)), Counter())
    assert bag_c == bag_a, names


@settings(max_examples=30)
@given(st.data())
def test_probe_kernel_equals_reference(data):
    n = data.draw(st.integers(0, 60))
    m = data.draw(st.integers(0, 30))
    st_ = SideState(4)
    if n:
        ts = np.array(data.draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), np.int64)
        kh = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.int64)
        st_.insert(pa.record_batch({"x": np.arange(n)}), ts, kh)
        dead = data.draw(st.lists(st.integers(0, n - 1), max_size=5))
        st_.mark(np.array(dead, dtype=np.int64), dead=True)
    st_._check()
    lo = np.array(data.draw(st.lists(st.integers(-5, 40), min_size=m, max_size=m)), np.int64)
    hi = lo + np.array(data.draw(st.lists(st.integers(0, 10), min_size=m, max_size=m)), np.int64)
    pk = np.array(data.draw(st.lists(st.integers(0, 4), min_size=m, max_size=m)), np.int64)
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), bool)
    if n and m:
        pi, ei = probe_kernel(lo, hi, pk, pk, valid, st_.ts, st_.kh, st_.nxt, st_.flag,
                              st_.head, np.int64(len(st_.head) - 1))
        got = set(zip(pi.tolist(), ei.tolist()))
        assert len(got) == len(pi)
        assert got == probe_reference(lo, hi, pk, valid, st_.ts, st_.kh, st_.flag, st_.n)


@settings(max_examples=20)
@given(case=join_case(), cut=st.integers(0, 40), how=st.sampled_from(HOWS))
def test_snapshot_restore_mid_stream(case, cut, how):
    kind, L, R, feed, pred = case
    cfg = JoinConfig(pred, _on(kind), how, "both")
    _, full = _run(cfg, kind, feed)
    cut = min(cut, len(feed))
    op = OAJoin(cfg)
    first = drive_prefix(op, kind, feed[:cut])
    snap = op.snapshot()
    op2 = OAJoin(cfg)
    op2.open(_infos(kind))
    op2.restore(snap)
    op2._check()
    rest = []
    for port, el in feed[cut:]:
        rest.extend(op2.on_batch(el, port) if isinstance(el, pa.RecordBatch)
                    else op2.on_punctuation(el, port))
    rest.extend(op2.on_end(0))
    rest.extend(op2.on_end(1))
    bag = lambda els: sum((rows_counter(e) for e in els if isinstance(e, pa.RecordBatch)),
                          Counter())
    assert bag(first) + bag(rest) == bag(full)


def drive_prefix(op, kind, feed):
    op.open(_infos(kind))
    out = []
    for port, el in feed:
        out.extend(op.on_batch(el, port) if isinstance(el, pa.RecordBatch)
                   else op.on_punctuation(el, port))
    return out


# ---- scenarios --------------------------------------------------------------
def test_scenario_band_store_purge_and_individual_punctuation():
    """Band S0.ts - 2 <= S1.ts <= S0.ts + 3 (range0=2, range1=3), key k.

    ts:   0    5    10   15
    S0:   a@4            P(12)
    S1:        b@6  P(9)       c@14
    a@4 is stored (no S1 punctuation yet); b@6 probes it -> (a, b).
    P(S1, 9): S0 tuples below 9 - 3 = 6 are purged -> a goes.
    P(S0, 12): S1 tuples below 12 - 2 = 10 are purged -> b goes.
    c@14 arrives: partners are S0 in [11, 16], but b0=12 -> c stored.
    """
    kind = "int"
    b = lambda ts, ids: pa.record_batch({"ts": ts, "id": ids, "val": [0] * len(ts),
                                         "k": [1] * len(ts)}, schema=_schema(kind))
    cfg = JoinConfig(WindowPredicate.band(2, 3), _on(kind), "inner", "both")
    op = OAJoin(cfg)
    op.open(_infos(kind))
    out = op.on_batch(b([4], [1]), 0)
    assert out == [] and op.side_state(0).items == 1
    out = op.on_batch(b([6], [2]), 1)
    assert [r["id"] for r in out[0].to_pylist()] == [1]
    out = op.on_punctuation(Punctuation("ts", 9), 1)
    assert op.side_state(0).items == 0
    # output bounds: S0.ts >= min(b0=-inf, 9-3), S1.ts >= min(9, b0 - 2) = -inf
    assert out == []  # b0 unknown: no bound on S0.ts yet (min(-inf, 6)); joint needs both
    out = op.on_punctuation(Punctuation("ts", 12), 0)
    assert op.side_state(1).items == 0
    assert Punctuation("ts", 6) in out and Punctuation("ts_right", 9) in out
    assert JointPunctuation((("ts", 12), ("ts_right", 9))) in out
    op.on_batch(b([14], [3]), 1)
    assert op.side_state(1).items == 1
    op._check()


def test_left_outer_emits_unmatched_when_punctuation_proves_it():
    kind = "int"
    b = lambda ts, ids, k: pa.record_batch({"ts": ts, "id": ids, "val": [0] * len(ts), "k": k},
                                           schema=_schema(kind))
    op = OAJoin(JoinConfig(WindowPredicate.band(1, 1), _on(kind), "left"))
    op.open(_infos(kind))
    assert op.on_batch(b([10, 10], [1, 2], [1, 2]), 0) == []
    op.on_batch(b([11], [3], [1]), 1)       # matches id 1 only
    out = op.on_punctuation(Punctuation("ts", 12), 1)   # S1 >= 12: nothing else can match 10
    rows = [r for el in out if isinstance(el, pa.RecordBatch) for r in el.to_pylist()]
    assert [(r["id"], r["id_right"]) for r in rows] == [(2, None)]


def test_late_tuples_policies():
    kind = "int"
    b = pa.record_batch({"ts": [3, 20], "id": [1, 2], "val": [0, 0], "k": [1, 1]},
                        schema=_schema(kind))
    op = OAJoin(JoinConfig(WindowPredicate.band(1, 1), _on(kind)))
    op.open(_infos(kind))
    op.on_punctuation(Punctuation("ts", 10), 0)
    op.on_batch(b, 0)
    assert op.metrics.late == {"drop": 1} and op.side_state(0).items == 1
    op = OAJoin(JoinConfig(WindowPredicate.band(1, 1), _on(kind), late=LatePolicy.RAISE))
    op.open(_infos(kind))
    op.on_punctuation(Punctuation("ts", 10), 0)
    with pytest.raises(LateTupleError):
        op.on_batch(b, 0)


def test_config_errors_say_why():
    with pytest.raises(ConfigError, match="empty"):
        WindowPredicate.band(-5, 2)
    with pytest.raises(ConfigError, match="how"):
        JoinConfig(WindowPredicate.band(1, 1), how="outer")
    with pytest.raises(ConfigError, match="exactly one"):
        oop.from_arrow(pa.table({"ts": [1]}), time="ts").join(
            oop.from_arrow(pa.table({"ts": [1]}), time="ts"))
    L = oop.from_arrow(pa.table({"ts": [1], "k": [1]}), time="ts")
    R = oop.from_arrow(pa.table({"ts": [1], "k": ["a"]}), time="ts")
    with pytest.raises(ConfigError, match="comparable"):
        L.join(R, on="k", band=(1, 1)).run()


@settings(max_examples=15)
@given(case=join_case(), how=st.sampled_from(["inner", "full", "anti"]),
       delay=st.integers(0, 70), bs=st.integers(1, 9))
def test_fluent_api_with_sources(case, how, delay, bs):
    """Through the executor: sources with BoundedDelay punctuation (late tuples dropped)."""
    kind, L, R, _, pred = case
    if L.num_rows == 0 or R.num_rows == 0:
        return
    kw = dict(band=(pred.range0, pred.range1)) if pred.kind == "band" else dict(tumbling=pred.size)
    res = (oop.from_arrow(L, time="ts", punctuation=oop.BoundedDelay(delay), batch_size=bs,
                          name="L")
           .join(oop.from_arrow(R, time="ts", punctuation=oop.BoundedDelay(delay),
                                batch_size=bs, name="R"),
                 on=[a for a, _ in _on(kind)], how=how, punctuation="both", **kw)
           .run())
    late_l = res.late.get("L")
    late_r = res.late.get("R")
    assert late_l is None and late_r is None  # drop policy: counted, not routed
    # the oracle over the tuples that were not dropped as late
    dropped = res.metrics["L"].late_total + res.metrics["R"].late_total
    if dropped == 0:
        assert rows_counter(res.table) == nested_loop_join(L, R, pred, _on(kind), "ts", "ts", how)
    assert res.metrics["join"].state_items == 0


def test_fluent_api_durations_and_names():
    L = oop.from_arrow(pa.table({"ts": [1000, 5000], "k": [1, 1]}), time="ts", unit="ms")
    R = oop.from_arrow(pa.table({"ts": [1500, 9000], "k": [1, 1]}), time="ts", unit="ms")
    out = L.join(R, on="k", band=("1s", "1s")).collect()
    assert out.column_names == ["ts", "k", "ts_right", "k_right"]
    assert out.to_pylist() == [{"ts": 1000, "k": 1, "ts_right": 1500, "k_right": 1}]
    L = oop.from_arrow(pa.table({"ts": [1000, 5000], "k": [1, 1]}), time="ts", unit="ms")
    R = oop.from_arrow(pa.table({"ts": [1500, 9000], "k": [1, 1]}), time="ts", unit="ms")
    s = L.join(R, on="k", tumbling="10s", how="semi")
    assert s.collect().num_rows == 2


def test_scenario_tumbling_window_boundaries():
    """Tumbling size 10, windows [0,10) [10,20) [20,30).

    S0: a@10                 (window [10,20))
    S1: P(15) then b@15, c@19, d@20
    P(S1, 15) must keep a (b@15 is still to come in its window); a joins b and c, not d.
    P(S1, 20) purges a; the individual bound on S0.ts is then min(b0, 20) and on S1.ts
    min(b1, floor(b0 / 10) * 10).
    """
    kind = "none"
    b = lambda ts, ids: pa.record_batch({"ts": ts, "id": ids, "val": [0] * len(ts)},
                                        schema=_schema(kind))
    op = OAJoin(JoinConfig(WindowPredicate.tumbling(10), (), "inner", "individual"))
    op.open(_infos(kind))
    op.on_punctuation(Punctuation("ts", 15), 1)
    assert op.on_batch(b([10], [1]), 0) == [] and op.side_state(0).items == 1
    out = op.on_batch(b([15, 19, 20], [2, 3, 4]), 1)
    assert sorted(r["id_right"] for r in out[0].to_pylist()) == [2, 3]
    op.on_punctuation(Punctuation("ts", 20), 1)
    assert op.side_state(0).items == 0
    out = op.on_punctuation(Punctuation("ts", 23), 0)
    assert out == [Punctuation("ts", 20), Punctuation("ts_right", 20)]
    op._check()


@settings(max_examples=10)
@given(case=join_case(), stop=st.integers(1, 6), workers=st.sampled_from([1, 2]))
def test_checkpoint_resume_through_the_executor(case, stop, workers):
    """Stop a join plan after some rounds, resume in a fresh plan: same rows as one run."""
    kind, L, R, _, pred = case
    if L.num_rows == 0 or R.num_rows == 0:
        return
    kw = dict(band=(pred.range0, pred.range1)) if pred.kind == "band" else dict(tumbling=pred.size)

    def plan():
        mk = lambda t, n: oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(100),
                                         batch_size=4, name=n)
        return mk(L, "L").join(mk(R, "R"), on=[a for a, _ in _on(kind)], how="full",
                               workers=workers, **kw)

    whole = plan().run().table
    first = plan().run(stop_after_rounds=stop)
    if first.checkpoint is None:
        return
    resumed = resumed_output(first, plan().run(resume_from=first.checkpoint)).table
    assert rows_counter(resumed) == rows_counter(whole)


def test_late_rows_of_two_unlike_inputs_come_back_per_input() -> None:
    """A join's own side output holds late rows of both inputs; when their schemas differ,
    ``Result.late`` keeps one table per input (``join.input``), every late row in it, and
    the workers / key partitions agree."""
    import oop.punctuation as punct

    a = pa.table({"ts": [5, 1, 9, 2, 20, 3, 30], "k": [1, 1, 2, 2, 1, 1, 2],
                  "x": [1.0, 2, 3, 4, 5, 6, 7]})
    b = pa.table({"ts": [4, 0, 8, 21, 1, 2, 31], "k": [1, 2, 2, 1, 2, 1, 2],
                  "name": ["p", "q", "r", "s", "t", "u", "v"]})

    def run(**kw: object) -> oop.Result:
        # the sources forward their late tuples (late="update"): the join decides them
        sa = oop.from_arrow(a, time="ts", punctuation=punct.parse_punctuation("bounded:1"),
                            batch_size=2, name="A", late="update")
        sb = oop.from_arrow(b, time="ts", punctuation=punct.parse_punctuation("bounded:1"),
                            batch_size=2, name="B", late="update")
        return sa.join(sb, on="k", band=(2, 2), late="side_output", name="j", **kw).run()

    ref = run()
    assert set(ref.late) == {"j.A", "j.B"}
    assert ref.late["j.A"].schema.names == ["ts", "k", "x"]
    assert ref.late["j.B"].schema.names == ["ts", "k", "name"]
    late = ref.metrics["j"].late_total
    assert late > 0 and late == ref.late["j.A"].num_rows + ref.late["j.B"].num_rows
    for kw in ({"workers": 2}, {"workers": 2, "keyed": True, "ordered": True}):
        got = run(**kw)
        assert {k: sorted(v.to_pylist(), key=str) for k, v in got.late.items()} == \
            {k: sorted(v.to_pylist(), key=str) for k, v in ref.late.items()}
