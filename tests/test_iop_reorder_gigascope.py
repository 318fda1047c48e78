"""Reorder ring (003) and Gigascope two-level aggregation (004 §8.3.3).

Reorder: every tuple is preserved and emitted in serial order, whatever the
arrival order and batch boundaries; releases match the tuple-at-a-time
reference; punctuation is held back behind held rows.

Gigascope: the low-level kernel equals the Fig. 8-6 reference for every
flush policy; the high-level roll-up equals the exact per-(group, window)
count of the processed packets; IOP output is ordered by window; the
ring-buffer model drops nothing at a low rate and accounts for every drop.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

import oop
from oop.errors import ConfigError
from oop.iop_baseline import Reorder
from oop.iop_baseline.gigascope import (
    CostModel, FlushPolicy, GigascopeHighLevel, GigascopeLowLevel, LowLevelTable, _drain,
    _lowlevel, lowlevel_reference, max_sustainable_rate, rollup, simulate)
from oop.iop_baseline.reorder import reorder_reference
from oop.punctuation import External
from oop.testing import batch_splits, check_punctuation_respected


# ---- reorder ----------------------------------------------------------------------
@st.composite
def shuffled_serials(draw):
    n = draw(st.integers(0, 60))
    if draw(st.booleans()):
        order = draw(st.permutations(range(n))) if n else []
    else:  # bounded displacement
        d = draw(st.integers(0, 8))
        keys = [i + draw(st.integers(0, d)) for i in range(n)]
        order = sorted(range(n), key=lambda i: (keys[i], i))
    return np.asarray(order, np.int64)


@given(st.data())
def test_reorder_emits_every_tuple_in_serial_order(data):
    serials = data.draw(shuffled_serials())
    t = pa.table({"ts": pa.array(serials, pa.int64()), "seq": pa.array(serials, pa.int64())})
    op = Reorder("seq", capacity=data.draw(st.sampled_from([1, 4, 64])))
    batches = data.draw(batch_splits(t, max_batch=7))
    res = oop.from_batches(batches, time="ts", punctuation=External(), schema=t.schema).via(op).run()
    op._check()
    assert res.table.column("seq").to_pylist() == list(range(len(serials)))


@given(shuffled_serials())
def test_reorder_releases_match_reference(serials):
    op = Reorder("seq", capacity=2)
    t = pa.table({"ts": pa.array(serials, pa.int64()), "seq": pa.array(serials, pa.int64())})
    op.open([oop.operators.base.StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
    got = []
    for b in t.to_batches(max_chunksize=1):
        out = op.on_batch(b)
        got.append([x for o in out if isinstance(o, pa.RecordBatch) for x in o.column("seq").to_pylist()])
    assert got == reorder_reference(serials.tolist())


def test_reorder_holds_back_punctuation_and_rejects_duplicates():
    """
    arrival:  seq 1 (ts 10) | P(ts, 20)          | seq 0 (ts 25)      | seq 2 (ts 30)
    held:     {1}             row ts=10 still held   emits 0, 1 -> P(20)
                              -> forward only P(10)
    """
    sch = pa.schema([("ts", pa.int64()), ("seq", pa.int64())])
    feed = [pa.record_batch({"ts": [10], "seq": [1]}, schema=sch), oop.Punctuation("ts", 20),
            pa.record_batch({"ts": [25], "seq": [0]}, schema=sch),
            pa.record_batch({"ts": [30], "seq": [2]}, schema=sch)]
    res = oop.from_batches(feed, time="ts", punctuation=External(), schema=sch).via(
        Reorder("seq")).run()
    assert res.table.column("seq").to_pylist() == [0, 1, 2]
    assert [(k, p.value) for k, p in res.punctuations][:2] == [(0, 10), (2, 20)]
    with pytest.raises(ValueError, match="appears twice"):
        bad = [pa.record_batch({"ts": [1, 2], "seq": [3, 3]}, schema=sch)]
        oop.from_batches(bad, time="ts", punctuation=External(), schema=sch).via(Reorder("seq")).run()


def test_reorder_after_an_oop_operator_orders_its_output():
    """Results of an order-agnostic plan (here: a disordered select) re-ordered by serial."""
    rng = np.random.default_rng(3)
    n = 500
    order = np.argsort(np.arange(n) + rng.integers(0, 40, n), kind="stable")
    t = pa.table({"ts": pa.array(order, pa.int64()), "seq": pa.array(order, pa.int64()),
                  "v": pa.array(order % 7, pa.int64())})
    s = oop.from_arrow(t, time="ts", batch_size=33, punctuation=oop.BoundedDelay(40))
    res = s.select(lambda b: pa.compute.not_equal(b["v"], 3)).apply(
        seq=lambda b: b["seq"]).via(Reorder("seq", capacity=8)).run()
    kept = [i for i in range(n) if i % 7 != 3]
    # serials with gaps (filtered rows) are released at end of stream, still in order
    assert res.table.column("seq").to_pylist() == kept
    check_punctuation_respected(res.table, res.punctuations)


# ---- gigascope ----------------------------------------------------------------------
POLICIES = [FlushPolicy("iop-slow", every=1, max_delay=1), FlushPolicy("oop-lazy", max_delay=1),
            FlushPolicy("oop-lazy", max_delay=2), FlushPolicy("oop-slow", every=3, max_delay=2)]


@st.composite
def packets(draw):
    n = draw(st.integers(0, 300))
    groups = draw(st.integers(1, 30))
    keys = np.asarray(draw(st.lists(st.integers(0, groups - 1), min_size=n, max_size=n)), np.int64)
    ppw = draw(st.integers(1, 60))
    wids = np.arange(n, dtype=np.int64) // ppw
    return keys, wids


def _run_kernel(keys, wids, size, pol):
    t = LowLevelTable(size)
    k, w, c, *_ = _lowlevel(keys, wids, t.key, t.tag, t.cnt, t.st, pol.code, pol.every,
                            pol.max_delay, 1.0, 1.0, 0.0, 0.0, 1, True)
    t._check()
    k2, w2, c2 = _drain(t)
    return list(zip(np.concatenate([k, k2]).tolist(), np.concatenate([w, w2]).tolist(),
                    np.concatenate([c, c2]).tolist()))


@given(packets(), st.integers(1, 40), st.sampled_from(POLICIES))
def test_lowlevel_kernel_equals_reference_and_rolls_up_exactly(pk, size, pol):
    keys, wids = pk
    got = _run_kernel(keys, wids, size, pol)
    assert got == lowlevel_reference(keys.tolist(), wids.tolist(), size, pol)
    ks, ws, cs = (np.asarray([g[i] for g in got], np.int64) for i in range(3))
    assert rollup(ks, ws, cs) == dict(Counter(zip(keys.tolist(), wids.tolist())))
    if pol.kind == "iop-slow":  # in-order processing: partials leave in window order
        assert all(a[1] <= b[1] for a, b in zip(got, got[1:]))


@given(packets(), st.sampled_from(POLICIES), st.floats(0.05, 3.0), st.integers(1, 16))
def test_ring_model_accounts_for_every_packet(pk, pol, rate, ring):
    keys, wids = pk
    ppw = int(wids[1] - wids[0]) if len(wids) > 1 else 1
    res = simulate(keys, max(1, ppw), 8, pol, rate, CostModel(ring=ring))
    assert res.processed + res.dropped == len(keys)
    assert res.utilization <= 1.0 + 1e-9
    if rate <= 0.05 and ring >= 1:  # far below capacity: a packet every 20 units
        assert res.dropped == 0 or pol.kind == "iop-slow"


def test_max_sustainable_rate_shape_iop_vs_oop():
    """Many groups, table = 2x groups: IOP's order-preserving flush surges overflow the ring."""
    g = 2048
    keys = np.random.default_rng(0).integers(0, g, 400_000)
    cost = CostModel(ring=256)
    iop, _ = max_sustainable_rate(lambda n: keys[:n], 16.0 * g, 2 * g,
                                  FlushPolicy("iop-slow"), cost, windows=3, steps=6)
    lazy, _ = max_sustainable_rate(lambda n: keys[:n], 16.0 * g, 2 * g,
                                   FlushPolicy("oop-lazy", max_delay=2), cost, windows=3, steps=6)
    assert lazy > iop


def test_two_level_operators_equal_exact_counts():
    rng = np.random.default_rng(1)
    n = 3000
    t = pa.table({"ts": pa.array(np.sort(rng.integers(0, 1000, n)), pa.int64()),
                  "g": pa.array(rng.integers(0, 50, n), pa.int64())})
    exact = Counter(zip(t.column("g").to_pylist(), (t.column("ts").to_numpy() // 100).tolist()))
    for pol in POLICIES:
        s = oop.from_arrow(t, time="ts", batch_size=128)
        low = GigascopeLowLevel("g", 100, table_size=32, policy=pol)
        res = s.via(low).via(GigascopeHighLevel("g")).run()
        got = {(r["g"], r["window_start"] // 100): r["count"] for r in res.table.to_pylist()}
        assert got == dict(exact), pol
        assert res.table.num_rows == len(exact)  # one row per (group, window): roll-up complete


def test_flush_policy_validation():
    with pytest.raises(ConfigError, match="unknown flush policy"):
        FlushPolicy("eager")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="every"):
        FlushPolicy("oop-slow", every=0)
