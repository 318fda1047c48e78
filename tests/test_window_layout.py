"""``layout="auto"``: dense ring vs hash cells, re-checked after every punctuation.

* ``HashCells.from_ring`` / ``to_ring`` move exactly the live cells (same
  lane values at every (unit, code); invariants hold) on random rings, also
  with more than 512 live cells (the probe table must be a power of two: a
  2 x cap table of another size left slots unreachable and a probe looped
  forever);
* a phased stream whose key density changes makes WID and Paned-WID switch
  dense -> hash -> dense; the output equals forced dense, forced hash and a
  from-scratch pandas group-by, and ``_check`` holds after every call;
* Hypothesis: random phase sizes, disorder, batch sizes and punctuation
  spacing -- auto == oracle, whatever the switch points; every tuple is
  counted in exactly ``range/slide`` windows;
* Paned-WID with max stays dense (hash emission is for sum-type lanes);
* snapshot / restore after a switch resumes on the switched layout.

Key-density timeline of the phased stream (windows 4 s / 1 s, panes 1 s)::

    panes      0..2         3..(3+B-1)              then C panes
    keys       1100 dense   300 fresh ones per pane  C_KEYS of the seen keys per pane
    density    100 %        falls below 5 %          > 20 %
    layout     dense   ->   hash (switch)       ->   dense (switch back)
"""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.window import Sliding, agg, window_operator
from oop.window.hashstore import HashCells
from oop.window.ring import Ring
from oop.window.values import ColumnValues, lane_infos

RANGE, SLIDE = 4000, 1000
SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("v", pa.float64())])


def phased(rng: np.random.Generator, a_keys: int = 1100, b_panes: int = 30, b_keys: int = 300,
           c_panes: int = 6, c_keys: int = 1500) -> pa.Table:
    """Rows in arrival order; event time = pane start + U[0, 1 s), arrival shuffled within 2 panes."""
    ts, key = [], []
    pane = 0
    for _ in range(3):
        ts.append(pane * 1000 + rng.integers(0, 1000, a_keys))
        key.append(np.arange(a_keys))
        pane += 1
    fresh = a_keys
    for _ in range(b_panes):
        ts.append(pane * 1000 + rng.integers(0, 1000, b_keys))
        key.append(np.arange(fresh, fresh + b_keys))
        fresh += b_keys
        pane += 1
    for _ in range(c_panes):
        ts.append(pane * 1000 + rng.integers(0, 1000, c_keys))
        key.append(rng.choice(fresh, c_keys, replace=False))
        pane += 1
    t = np.concatenate(ts).astype(np.int64)
    k = np.concatenate(key).astype(np.int64)
    # band disorder: sort by (event time + U[0, 2 s))
    order = np.argsort(t + rng.integers(0, 2000, t.size), kind="stable")
    t, k = t[order], k[order]
    v = rng.integers(-5, 6, t.size).astype(np.float64)  # small ints: exact float sums
    return pa.table({"ts": t, "key": k, "v": v}, schema=SCHEMA)


def run(table: pa.Table, method: str, layout: str, batch: int, punct_every: int = 1,
        check: bool = True, r: int = RANGE) -> tuple[pa.Table, dict]:
    op = window_operator(Sliding(r, SLIDE), [agg.count(), agg.sum("v")], by="key",
                         method=method, layout=layout)
    op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
    ts = table.column("ts").to_numpy()
    out = []
    for i, b in enumerate(table.to_batches(max_chunksize=batch)):
        out += [o for o in op.on_batch(b) if isinstance(o, pa.RecordBatch)]
        if i % punct_every == 0:
            # exact low watermark of everything still to come
            rest = ts[(i + 1) * batch:]
            if rest.size:
                out += [o for o in op.on_punctuation(Punctuation("ts", int(rest.min())))
                        if isinstance(o, pa.RecordBatch)]
        if check:
            op._check()
    out += [o for o in op.flush() if isinstance(o, pa.RecordBatch)]
    if check:
        op._check()
    res = pa.Table.from_batches(out, schema=op.out_schema) if out else op.out_schema.empty_table()
    return res, op.plan_info


def oracle(table: pa.Table, r: int = RANGE) -> pd.DataFrame:
    """From scratch: every tuple into its r/SLIDE windows, then one group-by."""
    df = table.to_pandas()
    parts = []
    for off in range(r // SLIDE):
        w = df["ts"] // SLIDE + off  # window ending at (w + 1) * SLIDE
        parts.append(df.assign(w=w))
    d = pd.concat(parts)
    g = d.groupby(["key", "w"]).agg(count=("v", "size"), sum_v=("v", "sum")).reset_index()
    g["window_end"] = (g["w"] + 1) * SLIDE
    g["window_start"] = g["window_end"] - r
    return canon(g)


def canon(df: pd.DataFrame) -> pd.DataFrame:
    df = df[["key", "window_start", "window_end", "count", "sum_v"]].astype(
        {"key": np.int64, "window_start": np.int64, "window_end": np.int64, "count": np.int64,
         "sum_v": np.float64})
    return df.sort_values(["window_end", "key"]).reset_index(drop=True)


def assert_equal(got: pa.Table, exp: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(canon(got.to_pandas()), exp)


# ---- conversions ------------------------------------------------------------------
def random_ring(seed: int, units: int, n: int, aggs: list, *, jitter: bool = False):
    """A dense ring over units ``5 .. 4 + units`` and ``n`` codes holding up to
    ``4 * units * n`` random single-unit tuples (``v`` in -9..8, stamp ``unit * 10``, plus
    0..9 with ``jitter``): ``(ring, their units, their codes, the generator for more)``."""
    rng = np.random.default_rng(seed)
    ring = Ring(lane_infos(aggs, SCHEMA), base=5, rows=units, codes=n)
    m = int(rng.integers(0, 4 * units * n + 1))
    u = 5 + rng.integers(0, units, m)
    c = rng.integers(0, n, m)
    ring.reserve(5 + units, n)
    cols = {"v": ColumnValues(rng.integers(-9, 9, m).astype(np.float64), np.zeros(0, bool))}
    stamps = u * 10 + (rng.integers(0, 10, m) if jitter else 0)
    ring.update(c, u, u + 1, cols, stamps, n, single=True, top=5 + units)
    return ring, u, c, rng


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 70))
def test_ring_hash_roundtrip(seed, units, n):
    ring, _, _, _ = random_ring(seed, units, n, [agg.count(), agg.sum("v"), agg.var("v")])
    ring._check()
    h = HashCells.from_ring(ring, n)
    h._check()
    assert h.live == ring.live == h.n_cells
    back = h.to_ring(n)
    back._check()
    assert back.live == ring.live
    uu, cc = np.divmod(np.arange(units * n), n)
    uu = uu + 5
    a, b = ring.gather(uu, cc), back.gather(uu, cc)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    if h.n_cells:
        hv = {k: h.arr[h.alias(k)][: h.n_cells] for k in h.arr}
        gv = ring.gather(h.cell_u[: h.n_cells], h.cell_c[: h.n_cells])
        for k in hv:
            np.testing.assert_array_equal(hv[k], gv[k])




@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 70))
def test_take_block_ring_and_hash(seed, units, n):
    """take_block on hash cells returns the cells the dense ring returns, in the same order,
    and leaves the same live cells behind (the taken ones reset)."""
    ring, u, c, rng = random_ring(seed, units, n, [agg.count(), agg.sum("v"), agg.first("v")],
                                  jitter=True)
    h = HashCells.from_ring(ring, n)
    take = sorted(5 + int(x) for x in rng.choice(units, int(rng.integers(0, units + 1)),
                                                 replace=False))
    ru, rc, rl = ring.take_block(take, n)
    hu, hc, hl = h.take_block(take, n)
    np.testing.assert_array_equal(ru, hu)
    np.testing.assert_array_equal(rc, hc)
    assert rl.keys() == hl.keys()
    for k in rl:
        np.testing.assert_array_equal(rl[k], hl[k])
    ring._check()
    h._check()
    left = ~np.isin(u, take)
    assert ring.live == h.live == len(set(zip(u[left].tolist(), c[left].tolist())))
    assert hu.shape[0] == len(set(zip(u[~left].tolist(), c[~left].tolist())))
    back = h.to_ring(n)
    uu, cc = np.divmod(np.arange(units * n), n)
    a, b = ring.gather(uu + 5, cc), back.gather(uu + 5, cc)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_large_ring_to_hash_and_back():
    """> 512 live cells: the table sizing that used to hang."""
    rng = np.random.default_rng(7)
    lanes = lane_infos([agg.count(), agg.sum("v")], SCHEMA)
    units, n = 6, 3000
    ring = Ring(lanes, base=0, rows=units, codes=n)
    m = 20_000
    u = rng.integers(0, units, m)
    c = rng.integers(0, n, m)
    cols = {"v": ColumnValues(rng.integers(-9, 9, m).astype(np.float64), np.zeros(0, bool))}
    ring.update(c, u, u + 1, cols, u * 10, n, single=True, top=units)
    h = HashCells.from_ring(ring, n)
    h._check()
    assert h.live == ring.live > 512
    assert h.table.shape[0] & (h.table.shape[0] - 1) == 0
    back = h.to_ring(n)
    back._check()
    uu, cc = np.divmod(np.arange(units * n), n)
    a, b = ring.gather(uu, cc), back.gather(uu, cc)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# ---- end to end ---------------------------------------------------------------------
@pytest.fixture
def no_key_compaction(monkeypatch):
    """The switching tests build sparsity from keys whose windows closed; key compaction
    (WindowAggregate._compact_keys) forgets those keys, which keeps the ring dense. These tests
    exercise the switches themselves, so they keep every key (a stream whose live keys are
    sparse needs the same switches)."""
    import oop.window.aggregate as A

    monkeypatch.setattr(A, "KEYS_COMPACT_MIN", 1 << 62)


def _switches(info: dict) -> int:
    return int(info.get("layout_switches", 0))


@pytest.mark.parametrize("method, r", [("paned", RANGE), ("wid", SLIDE)])
def test_phased_stream_switches_and_matches_oracle(method, r, no_key_compaction):
    """Paned-WID (sliding 4 s / 1 s) and tumbling WID (1 s): dense -> hash -> dense."""
    table = phased(np.random.default_rng(3), b_panes=40, c_panes=8, c_keys=8000)
    exp = oracle(table, r)
    got, info = run(table, method, "auto", batch=1000, r=r)
    assert_equal(got, exp)
    assert _switches(info) >= 2, info  # dense -> hash, then back to dense
    assert info["layout"] == "dense ring x codes"
    for layout in ("dense", "hash"):
        forced, finfo = run(table, method, layout, batch=1000, check=False, r=r)
        assert_equal(forced, exp)
        assert _switches(finfo) == 0


def test_sliding_wid_stays_dense_under_auto():
    """Sliding WID updates range/slide cells per tuple: auto keeps the dense ring (measured faster)."""
    table = phased(np.random.default_rng(3), b_panes=100, c_panes=0)
    got, info = run(table, "wid", "auto", batch=1000)
    assert_equal(got, oracle(table))
    assert _switches(info) == 0 and info["layout"] == "dense ring x codes"


def test_sparse_only_stays_hash_after_switch(no_key_compaction):
    """Fresh keys all along: one switch to hash, none back; peak state far below dense."""
    rng = np.random.default_rng(5)
    table = phased(rng, a_keys=1100, b_panes=40, b_keys=300, c_panes=0)
    exp = oracle(table)
    got, info = run(table, "paned", "auto", batch=400)
    assert_equal(got, exp)
    assert _switches(info) == 1 and info["layout"] == "hash (unit, code) cells", info


def test_paned_max_stays_dense():
    table = phased(np.random.default_rng(4), b_panes=12)
    op = window_operator(Sliding(RANGE, SLIDE), [agg.count(), agg.max("v")], by="key",
                         method="paned", layout="auto")
    op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
    ts = table.column("ts").to_numpy()
    for i, b in enumerate(table.to_batches(max_chunksize=500)):
        op.on_batch(b)
        rest = ts[(i + 1) * 500:]
        if rest.size:
            op.on_punctuation(Punctuation("ts", int(rest.min())))
    assert _switches(op.plan_info) == 0 and op.plan_info["layout"] == "dense ring x codes"


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), a_keys=st.integers(1024, 1400), b_panes=st.integers(2, 14),
       b_keys=st.integers(5, 120), c_panes=st.integers(0, 4), batch=st.integers(50, 900),
       punct_every=st.integers(1, 3), method=st.sampled_from(["wid", "paned", "tumbling"]))
def test_auto_equals_oracle_whatever_the_switch_points(seed, a_keys, b_panes, b_keys, c_panes,
                                                      batch, punct_every, method):
    rng = np.random.default_rng(seed)
    table = phased(rng, a_keys=a_keys, b_panes=b_panes, b_keys=b_keys, c_panes=c_panes,
                   c_keys=min(a_keys, 1100))
    r = SLIDE if method == "tumbling" else RANGE
    got, _ = run(table, "wid" if method == "tumbling" else method, "auto", batch=batch,
                 punct_every=punct_every, r=r)
    assert_equal(got, oracle(table, r))
    # accounting: every tuple is counted in exactly r/SLIDE windows
    assert int(pc_sum(got.column("count"))) == table.num_rows * (r // SLIDE)


def pc_sum(col) -> int:
    return int(np.asarray(col.to_numpy(zero_copy_only=False)).sum())


def test_snapshot_restore_after_switch(no_key_compaction):
    table = phased(np.random.default_rng(9), b_panes=40, c_panes=0)
    ts = table.column("ts").to_numpy()
    batches = table.to_batches(max_chunksize=500)

    def make():
        op = window_operator(Sliding(RANGE, SLIDE), [agg.count(), agg.sum("v")], by="key",
                             method="paned", layout="auto")
        op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
        return op

    def feed(op, lo, hi):
        out = []
        for i in range(lo, hi):
            out += [o for o in op.on_batch(batches[i]) if isinstance(o, pa.RecordBatch)]
            rest = ts[(i + 1) * 500:]
            if rest.size:
                out += [o for o in op.on_punctuation(Punctuation("ts", int(rest.min())))
                        if isinstance(o, pa.RecordBatch)]
        return out

    op = make()
    first, cut = [], 0
    while _switches(op.plan_info) == 0:  # up to the switch, then two batches more
        first += feed(op, cut, cut + 1)
        cut += 1
    first += feed(op, cut, cut + 2)
    cut += 2
    assert cut < len(batches) and isinstance(op.ring, HashCells)
    state = op.snapshot()
    op2 = make()
    op2.restore(state)
    assert isinstance(op2.ring, HashCells)
    rest = feed(op2, cut, len(batches)) + [o for o in op2.flush() if isinstance(o, pa.RecordBatch)]
    op2._check()
    got = pa.Table.from_batches(first + rest, schema=op2.out_schema)
    assert_equal(got, oracle(table))


def test_dead_keys_are_compacted_instead_of_switching():
    """Fresh keys all along with key compaction on: the dictionary forgets the keys of closed
    windows, the ring stays dense and small, and the results equal the oracle."""
    table = phased(np.random.default_rng(5), a_keys=1100, b_panes=40, b_keys=300, c_panes=0)
    got, info = run(table, "paned", "auto", batch=400)
    assert_equal(got, oracle(table))
    assert info.get("key_compactions", 0) >= 1, info


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 40), st.integers(0, 2),
       st.integers(0, 2), st.floats(0.0, 1.0))
def test_take_rows_equals_its_reference(seed, units, n, n_i, n_f, live):
    """The branch-free take_rows == take_rows_ref: same cells, values and order, and every
    taken row left at the identities (dead cells hold them before, as in the ring)."""
    from oop.window.kernels import take_rows, take_rows_ref

    rng = np.random.default_rng(seed)
    C = n + int(rng.integers(0, 5))  # codes beyond n are not taken
    rows = np.where(rng.random(units * C) < live, rng.integers(1, 9, units * C), 0)
    iident = np.array([0, -(2**63)][:n_i] or [0], np.int64)
    fident = np.array([0.0, np.inf][:n_f] or [0.0], np.float64)
    ilanes = tuple(np.where(rows != 0, rng.integers(-50, 50, units * C), iident[q])
                   for q in range(n_i))
    flanes = tuple(np.where(rows != 0, rng.standard_normal(units * C), fident[q])
                   for q in range(n_f))
    rr = rng.permutation(units)[: int(rng.integers(0, units + 1))].astype(np.int64)
    r1, i1, f1 = rows.copy(), [a.copy() for a in ilanes], [a.copy() for a in flanes]
    wi, codes, rv, iv, fv = take_rows(
        r1, C, rr, n, tuple(i1) or (np.zeros(1, np.int64),), n_i, iident,
        tuple(f1) or (np.zeros(1, np.float64),), n_f, fident)
    r2, i2, f2 = rows.copy(), [a.copy() for a in ilanes], [a.copy() for a in flanes]
    ewi, ecodes, erv, eiv, efv = take_rows_ref(r2, C, rr, n, tuple(i2), iident, tuple(f2),
                                               fident)
    assert wi.tolist() == ewi and codes.tolist() == ecodes and rv.tolist() == erv
    for q in range(n_i):
        assert iv[q].tolist() == eiv[q]
    for q in range(n_f):
        assert fv[q].tolist() == efv[q]
    np.testing.assert_array_equal(r1, r2)  # the same cells reset, the others untouched
    for a, b in zip(i1 + f1, i2 + f2):
        np.testing.assert_array_equal(a, b)
