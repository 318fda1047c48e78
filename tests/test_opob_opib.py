"""OPOB / OPIB (order-preserving band and tumbling joins, 004 §7.3) against the oracle.

On ordered inputs (random batching, random interleaving of the two inputs,
random valid punctuation) both baselines must produce exactly the
nested-loop join, emit it in non-decreasing S0.ts order, respect their
output punctuation and end with empty state. On disordered input the tuples
that break the order are dropped and counted, and the result equals the
oracle over the tuples that were kept.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.errors import ConfigError
from oop.iop_baseline.opib_join import OPIBJoin, plan_opib
from oop.iop_baseline.opob_join import OPOBJoin, plan_opob
from oop.join import JoinConfig, WindowPredicate
from oop.join.reference import drive, nested_loop_join, rows_counter
from oop.operators.base import StreamInfo
from oop.stream.elements import INT64_MIN, Punctuation

SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("id", pa.int64())])
INFOS = [StreamInfo("L", SCHEMA, {"ts": "ms"}, "ts"), StreamInfo("R", SCHEMA, {"ts": "ms"}, "ts")]
CLASSES = {"opob": OPOBJoin, "opib": OPIBJoin}


@st.composite
def ordered_side(draw, id0: int, sort: bool = True):
    n = draw(st.integers(0, 25))
    ts = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    if sort:
        ts = sorted(ts)
    k = draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=n, max_size=n))
    t = pa.table({"ts": ts, "k": k, "id": list(range(id0, id0 + n))}, schema=SCHEMA)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    feed = []
    last = INT64_MIN
    for a, b in zip([0, *cuts], [*cuts, n]):
        if b > a:
            feed.append(t.slice(a, b - a).combine_chunks().to_batches()[0])
        nxt = min(ts[b:], default=25)
        if sort and draw(st.booleans()) and nxt > last:
            v = draw(st.one_of(st.just(nxt), st.integers(max(last, 0), nxt)))
            if v > last:
                feed.append(Punctuation("ts", v))
                last = v
    return t, feed


@st.composite
def case(draw, sort: bool = True):
    L, lf = draw(ordered_side(0, sort))
    R, rf = draw(ordered_side(1000, sort))
    feed, i, j = [], 0, 0
    for left in draw(st.lists(st.booleans(), min_size=len(lf) + len(rf),
                              max_size=len(lf) + len(rf))):
        if (left and i < len(lf)) or j >= len(rf):
            feed.append((0, lf[i]))
            i += 1
        else:
            feed.append((1, rf[j]))
            j += 1
    if draw(st.booleans()):
        r0 = draw(st.integers(-2, 8))
        pred = WindowPredicate.band(r0, draw(st.integers(max(-2, -r0), 8)))
    else:
        pred = WindowPredicate.tumbling(draw(st.integers(1, 12)))
    return L, R, feed, pred


def _check_output(out, punct_attr="ts"):
    rows = []
    p = INT64_MIN
    for el in out:
        if isinstance(el, pa.RecordBatch):
            t0 = el.column("ts").to_pylist()
            assert all(x >= p for x in t0), "a result below an emitted punctuation"
            rows.extend(t0)
        elif isinstance(el, Punctuation):
            assert el.attr == punct_attr and el.value > p
            p = el.value
    assert rows == sorted(rows), "results not emitted in S0.ts order"


@settings(max_examples=100)
@given(c=case(), which=st.sampled_from(["opob", "opib"]), end_first=st.sampled_from([0, 1]))
def test_ordered_input_equals_oracle_in_order(c, which, end_first):
    L, R, feed, pred = c
    op = CLASSES[which](JoinConfig(pred, (("k", "k"),)))
    out = drive(op, INFOS, feed, check=True, end_order=(end_first, 1 - end_first))
    got = sum((rows_counter(e) for e in out if isinstance(e, pa.RecordBatch)), Counter())
    assert got == nested_loop_join(L, R, pred, (("k", "k"),), "ts", "ts", "inner")
    _check_output(out)
    assert op.state_size().items == 0
    assert op.metrics.late_total == 0


@settings(max_examples=40)
@given(c=case(sort=False), which=st.sampled_from(["opob", "opib"]))
def test_disordered_input_drops_and_counts(c, which):
    L, R, feed, pred = c
    op = CLASSES[which](JoinConfig(pred, (("k", "k"),)))
    out = drive(op, INFOS, feed, check=True)
    kept = {0: [], 1: []}
    runmax = {0: INT64_MIN, 1: INT64_MIN}
    dropped = 0
    for port, b in feed:
        for r in b.to_pylist():
            if r["ts"] < runmax[port]:
                dropped += 1
            else:
                runmax[port] = r["ts"]
                kept[port].append(r)
    KL = pa.Table.from_pylist(kept[0], schema=SCHEMA)
    KR = pa.Table.from_pylist(kept[1], schema=SCHEMA)
    got = sum((rows_counter(e) for e in out if isinstance(e, pa.RecordBatch)), Counter())
    assert got == nested_loop_join(KL, KR, pred, (("k", "k"),), "ts", "ts", "inner")
    assert op.metrics.late_total == dropped
    _check_output(out)


def test_opob_buffers_output_opib_buffers_input():
    """Band +-5: OPOB holds results until S0.ts < min(f0, f1 - 5); OPIB holds S0 tuples."""
    b = lambda ts, ids: pa.record_batch({"ts": ts, "k": [1] * len(ts), "id": ids}, schema=SCHEMA)
    cfg = JoinConfig(WindowPredicate.band(5, 5), (("k", "k"),))
    ob = OPOBJoin(cfg)
    ob.open(INFOS)
    ob.on_batch(b([10], [1]), 0)
    out = ob.on_batch(b([11], [2]), 1)          # result (10, 11) computed, buffered
    assert not [e for e in out if isinstance(e, pa.RecordBatch)] and ob.buffer_rows == 1
    ob.on_batch(b([15], [3]), 1)                # (10, 15) buffered too
    assert ob.buffer_rows == 2
    out = ob.on_punctuation(Punctuation("ts", 16), 1)   # bound = min(f0=10, 16-5) = 10
    assert ob.buffer_rows == 2
    out = ob.on_punctuation(Punctuation("ts", 12), 0)   # bound = min(12, 11) = 11
    rows = [r for e in out if isinstance(e, pa.RecordBatch) for r in e.to_pylist()]
    assert [(r["id"], r["id_right"]) for r in rows] == [(1, 2), (1, 3)]
    assert Punctuation("ts", 11) in out and ob.buffer_rows == 0
    ib = OPIBJoin(cfg)
    ib.open(INFOS)
    out = ib.on_batch(b([10], [1]), 0)
    assert out == [Punctuation("ts", 10)] and ib.pending_rows == 1
    ib.on_batch(b([11], [2]), 1)
    out = ib.on_batch(b([16], [3]), 1)          # 10 + 5 < 16: S0 tuple 10 released
    rows = [r for e in out if isinstance(e, pa.RecordBatch) for r in e.to_pylist()]
    assert [(r["id"], r["id_right"]) for r in rows] == [(1, 2)] and ib.pending_rows == 0


def test_baselines_are_inner_only():
    with pytest.raises(ConfigError, match="inner"):
        OPOBJoin(JoinConfig(WindowPredicate.band(1, 1), how="left"))


@settings(max_examples=15)
@given(c=case(sort=False), which=st.sampled_from(["opob", "opib"]), bs=st.integers(1, 6))
def test_iop_plan_with_sort_buffers_equals_oracle(c, which, bs):
    """plan_opob / plan_opib: heartbeat sort buffer per input, then the in-order join."""
    L, R, _, pred = c
    if L.num_rows == 0 or R.num_rows == 0:
        return
    kw = dict(band=(pred.range0, pred.range1)) if pred.kind == "band" else dict(tumbling=pred.size)
    mk = lambda t, n: oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(50),
                                     batch_size=bs, name=n)
    plan = {"opob": plan_opob, "opib": plan_opib}[which]
    res = plan(mk(L, "L"), mk(R, "R"), strategy="iop-sort", on="k", **kw).run()
    assert rows_counter(res.table) == nested_loop_join(L, R, pred, (("k", "k"),), "ts", "ts")
    t0 = res.table.column("ts").to_pylist()
    assert t0 == sorted(t0)


def test_opib_waits_for_ties_at_the_frontier():
    """Band [S0.ts, S0.ts + 2]; S0 = 5, 8 pending; S1 = 10 arrives: f1 = 10.

    S0@5 (partners <= 7) is complete and released; S0@8 (partners <= 10) is not:
    another S1 tuple at 10 may still come -- and does.
    """
    b = lambda ts, ids: pa.record_batch({"ts": ts, "k": [1] * len(ts), "id": ids}, schema=SCHEMA)
    op = OPIBJoin(JoinConfig(WindowPredicate.band(0, 2), (("k", "k"),)))
    op.open(INFOS)
    op.on_batch(b([5, 8], [1, 2]), 0)
    op.on_batch(b([10], [3]), 1)
    assert op.pending_rows == 1
    out = op.on_batch(b([10], [4]), 1)
    out += op.on_end(1)
    rows = [(r["id"], r["id_right"]) for e in out if isinstance(e, pa.RecordBatch)
            for r in e.to_pylist()]
    assert sorted(rows) == [(2, 3), (2, 4)]
