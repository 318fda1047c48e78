"""Datasets: deterministic by seed, promised disorder bounds, valid punctuation, bounded batches."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.datasets import (
    CHUNK,
    DS_MIXES,
    Band,
    BlockSorted,
    Disordered,
    DSMix,
    InOrder,
    Link,
    MultiSource,
    Packets,
    Uniform,
    Zipf,
    rebatch,
    write_parquet,
)
from oop.errors import ConfigError
from oop.stream.elements import Punctuation


def _rows(t: pa.Table) -> Counter:
    return Counter(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def _lag(ts: np.ndarray) -> np.ndarray:
    """How far each tuple arrives behind the largest ts before it (0 for in-order)."""
    return np.maximum.accumulate(ts) - ts


# ---- ordered packets ---------------------------------------------------------
@pytest.mark.parametrize("skew", [Uniform(), Zipf(1.2), DSMix.ds(3)])
def test_packets_deterministic_and_batch_independent(skew):
    p = Packets(n=CHUNK + 1234, rate=3000, groups=50, skew=skew, seed=5)
    t = p.table()
    assert t.num_rows == CHUNK + 1234
    assert t.equals(p.table())
    assert t.equals(pa.Table.from_batches(list(p.batches(1000))))
    assert not t.equals(Packets(n=CHUNK + 1234, rate=3000, groups=50, skew=skew, seed=6).table())
    ts = t.column("ts").to_numpy()
    assert np.all(np.diff(ts) >= 0)
    # rate: tuples per second of event time
    assert abs(t.num_rows / (p.duration_ms / 1000) - 3000) < 3000 * 0.01
    assert p.duration_ms == int(ts[-1]) + 1


def test_zipf_skew_orders_group_frequencies():
    t = Packets(n=50_000, groups=20, skew=Zipf(1.5), seed=1).table()
    c = Counter(t.column("srcIP").to_pylist())
    assert set(c) <= set(range(20))
    assert c[0] > c[1] > c[5] > c[19]
    u = Counter(Packets(n=50_000, groups=20, skew=Uniform(), seed=1).table()["srcIP"].to_pylist())
    assert max(u.values()) < 2 * min(u.values())


@pytest.mark.parametrize("name", sorted(DS_MIXES))
def test_ds_mixes_match_table_6_2(name):
    mix = DS_MIXES[name]
    rate = 20_000
    t = Packets(n=3 * rate, rate=rate, skew=mix, seed=2).table()
    ids = t.column("srcIP").to_numpy()
    for p in range(3):  # the mix holds in every period (one second of event time)
        sizes = np.array(list(Counter(ids[p * rate:(p + 1) * rate].tolist()).values()))
        small = sizes[sizes == 1].sum() / rate
        assert abs(small - mix.small) < 0.005
        med = sizes[(sizes > 1) & (sizes < 100)]
        assert 10 < med.mean() < 20
        assert abs(med.sum() / rate - 0.20) < 0.02
        large = sizes[sizes >= 100]
        assert 250 < large.mean() < 350
    # the group percentages of Table 6-2 (small groups: DS1 39 % ... DS5 87 %)
    sizes = np.array(list(Counter(ids[:rate].tolist()).values()))
    expect_small_groups = {"DS1": .39, "DS2": .66, "DS3": .77, "DS4": .82, "DS5": .87}[name]
    assert abs((sizes == 1).mean() - expect_small_groups) < 0.03


def test_config_errors_say_why():
    with pytest.raises(ConfigError, match="rate"):
        Packets(n=10, rate=0)
    with pytest.raises(ConfigError, match="late_delay"):
        Band(delay=5, late_fraction=0.1)
    with pytest.raises(ConfigError, match="large"):
        DSMix(small=0.5, medium=0.5)
    with pytest.raises(ConfigError, match="DS1..DS5"):
        DSMix.ds(6)


@given(st.lists(st.integers(0, 50), max_size=12), st.integers(1, 17))
def test_rebatch_preserves_rows_and_bounds_batches(sizes, bs):
    src = [pa.record_batch({"x": list(range(s))}) for s in sizes]
    out = list(rebatch(iter(src), bs))
    assert all(b.num_rows == bs for b in out[:-1])
    assert all(0 < b.num_rows <= bs for b in out)
    flat = [v for b in out for v in b.column(0).to_pylist()]
    assert flat == [v for b in src for v in b.column(0).to_pylist()]


# ---- band disorder -----------------------------------------------------------
@settings(max_examples=25)
@given(n=st.integers(1, 3000), rate=st.sampled_from([100, 1000, 5000]),
       delay=st.integers(0, 400), seed=st.integers(0, 5), bs=st.integers(1, 900))
def test_band_bound_permutation_and_punctuation(n, rate, delay, seed, bs):
    p = Packets(n=n, rate=rate, groups=7, seed=seed)
    ds = Disordered(p, Band(delay=delay), seed=seed)
    items = list(ds.feed(bs))
    batches = [b for b in items if isinstance(b, pa.RecordBatch)]
    assert all(0 < b.num_rows <= bs for b in batches)
    t = pa.Table.from_batches(batches)
    assert _rows(t) == _rows(p.table())  # a permutation of the ordered stream
    assert int(_lag(t.column("ts").to_numpy()).max()) <= delay
    # every punctuation is strictly increasing and valid for everything after it (the
    # smallest time of all later batches, a suffix minimum)
    puncts = [it.value for it in items if isinstance(it, Punctuation)]
    assert all(a < b for a, b in zip(puncts, puncts[1:]))
    later_min = None
    for it in reversed(items):
        if isinstance(it, Punctuation):
            assert later_min is None or later_min >= it.value
        elif isinstance(it, pa.RecordBatch):
            m = int(it.column("ts").to_numpy().min())
            later_min = m if later_min is None else min(later_min, m)
    # independent of the batch size it is read with
    assert t.equals(ds.table())


def test_band_is_deterministic_by_seed_and_actually_disordered():
    p = Packets(n=20_000, rate=4000, seed=1)
    a = Disordered(p, Band(delay=200), seed=1).table()
    assert a.equals(Disordered(p, Band(delay=200), seed=1).table())
    assert not a.equals(Disordered(p, Band(delay=200), seed=2).table())
    lag = _lag(a.column("ts").to_numpy())
    assert lag.max() > 150 and (lag > 0).mean() > 0.5


def test_band_late_tuples_break_the_bound_and_become_late_in_a_source():
    p = Packets(n=20_000, rate=4000, seed=3)
    ds = Disordered(p, Band(delay=100, late_fraction=0.02, late_delay=2000), seed=3)
    lag = _lag(ds.table().column("ts").to_numpy())
    assert (lag > 100).sum() > 0 and lag.max() <= 2100
    res = ds.stream(batch_size=512, late="side_output").run()
    late = res.late_total if hasattr(res, "late_total") else sum(
        m.late_total for m in res.metrics.values())
    assert late > 0
    assert res.table.num_rows + late == 20_000  # every tuple accounted for
    ok = Disordered(p, Band(delay=100), seed=3).stream(batch_size=512).run()
    assert ok.table.num_rows == 20_000 and sum(m.late_total for m in ok.metrics.values()) == 0


# ---- block-sorted disorder ---------------------------------------------------
@settings(max_examples=20)
@given(n=st.integers(1, 4000), block=st.integers(1, 1500), bs=st.integers(1, 700),
       seed=st.integers(0, 3), marker=st.booleans())
def test_block_sorted_blocks_and_end_of_block_punctuation(n, block, bs, seed, marker):
    p = Packets(n=n, rate=1000, groups=5, seed=seed)
    ds = Disordered(p, BlockSorted(block=block, marker=marker), seed=seed)
    items = list(ds.feed(bs))
    lwm = None
    seen_blocks: list[int] = []
    rows = []
    for it in items:
        if isinstance(it, Punctuation):
            assert lwm is None or it.value > lwm
            assert it.value % block == 0
            lwm = it.value
            continue
        assert 0 < it.num_rows <= bs
        ts = it.column("ts").to_numpy()
        blk = set((ts // block).tolist())
        assert len(blk) == 1  # a batch never straddles a block
        if lwm is not None:
            assert ts.min() >= lwm  # punctuation valid
        b = blk.pop()
        if not seen_blocks or seen_blocks[-1] != b:
            assert not seen_blocks or b > seen_blocks[-1]  # ascending disjoint blocks
            seen_blocks.append(b)
        rows.append(it)
    t = pa.Table.from_batches(rows)
    assert t.schema.names[-1] == ("end_of_block" if marker else "ts")
    if marker:
        mk = t.column("end_of_block").to_numpy(zero_copy_only=False)
        ts = t.column("ts").to_numpy() // block
        ends = np.flatnonzero(np.diff(ts)) 
        assert mk.sum() == len(seen_blocks)
        assert mk[-1] and all(mk[e] for e in ends)
        t = t.drop(["end_of_block"])
    assert _rows(t) == _rows(p.table())
    assert isinstance(items[-1], Punctuation)


def test_block_sorted_needs_feed_punctuation_not_slack():
    p = Packets(n=6000, rate=1000, seed=0)
    ds = Disordered(p, BlockSorted(block=1000), seed=0)
    res = ds.stream(batch_size=256).run()
    assert res.table.num_rows == 6000
    assert [pp.value for _, pp in res.punctuations][:3] == [1000, 2000, 3000]
    lag = _lag(ds.table().column("ts").to_numpy())
    assert lag.max() > 900  # disorder spans almost a whole block


# ---- streaming in bounded memory --------------------------------------------
def test_streams_many_rows_in_bounded_memory():
    n = 2_000_000
    ds = Disordered(Packets(n=n, rate=50_000, seed=1), Band(delay=50), seed=1)
    base = pa.total_allocated_bytes()
    peak = 0
    total = 0
    for b in ds.batches(100_000):
        total += b.num_rows
        assert b.num_rows <= 100_000
        peak = max(peak, pa.total_allocated_bytes() - base)
    assert total == n
    full = n * 36  # bytes per row of the packet schema
    assert peak < full / 4, (peak, full)


# ---- several links -----------------------------------------------------------
def test_multisource_ticks_skew_lulls_heartbeat():
    links = (Link("main1", 2000), Link("main2", 2000, skew=700),
             Link("control", 2, lulls=((1000, 4000),), heartbeat=True))
    ms = MultiSource(links, duration=6000, tick=100, seed=4)
    feeds = {k: list(f()) for k, f in ms.feeds().items()}
    assert {len(v) for v in feeds.values()} == {ms.n_ticks}
    for j, ln in enumerate(links):
        got = [b for b in feeds[ln.name] if isinstance(b, pa.RecordBatch) and b.num_rows]
        t = pa.Table.from_batches(got) if got else None
        all_ts = ms.packets(j).table().column("ts").to_numpy()
        keep = np.ones(len(all_ts), bool)
        for a, b in ln.lulls:
            keep &= ~((all_ts >= a) & (all_ts < b))
        assert (t.num_rows if t else 0) == keep.sum()
        lp = None
        for k, it in enumerate(feeds[ln.name]):
            if isinstance(it, Punctuation):
                assert ln.heartbeat and (lp is None or it.value > lp)
                lp = it.value
                later = [b for b in feeds[ln.name][k + 1:] if isinstance(b, pa.RecordBatch)
                         and b.num_rows]
                assert all(b.column("ts").to_numpy().min() >= it.value for b in later)
                continue
            ts = it.column("ts").to_numpy()
            if len(ts):  # arrived in this tick: ts + skew in [k * tick, (k + 1) * tick)
                assert np.all(ts + ln.skew >= k * 100) and np.all(ts + ln.skew < (k + 1) * 100)
                for a, b in ln.lulls:
                    assert not np.any((ts >= a) & (ts < b))
    u = ms.table()
    assert u.num_rows == sum(b.num_rows for v in feeds.values() for b in v
                             if isinstance(b, pa.RecordBatch))
    res = ms.streams()[0].meld(*ms.streams()[1:]).run()
    assert res.table.num_rows == u.num_rows


def test_parquet_roundtrip_keeps_arrival_order(tmp_path):
    ds = Disordered(Packets(n=5000, seed=2), Band(delay=300), seed=2)
    n = write_parquet(ds.batches(777), tmp_path / "d.parquet")
    back = pq.read_table(tmp_path / "d.parquet")
    assert n == 5000 and back.column("arrival").to_pylist() == list(range(5000))
    assert back.drop(["arrival"]).equals(ds.table())


def test_inorder_feed_is_ordered_with_ordered_punctuation():
    ds = Disordered(Packets(n=1000, rate=100, seed=0), InOrder())
    assert isinstance(ds.punctuation(), oop.Ordered)
    res = ds.stream(batch_size=100).run()
    assert res.table.num_rows == 1000
