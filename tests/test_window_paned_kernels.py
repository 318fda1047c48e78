"""Paned-WID kernels (oop.window.paned_kernels) == their tuple-at-a-time references.

* ``pane_ids`` == exact Python floor division, also for huge / negative times
  (where the float estimate is off by more than one);
* ``paned_emit`` over a sequence of punctuations (running state carried from
  call to call, recomputed every ``P`` windows, leaving panes reset) ==
  ``paned_emit_ref`` recombining every window from its panes; the reset
  panes are exactly those below the last window, and the live-cell count it
  returns is exact;
* the Paned-WID operator with the fused emission keeps its ring invariants
  (``_check``: live-cell count, nothing outside ``[base, top)``) and equals
  WID and the oracle with many windows per punctuation; fused and hash
  paths are independent of arrival order and batch boundaries; a scenario
  timeline;
* the hash layout under panes == dense Paned-WID == WID == oracle, and
  ``layout="auto"`` picks it for sparse keys with sum-type aggregates;
* holistic stores: ``merge_counted`` == its reference, ``Multiset.select``
  (pairwise merge of pane runs) == a Counter group-by;
* the cost model prices holistic aggregates by values for both methods.
"""

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.window import Sliding, WindowAggregate, agg
from oop.window.paned_kernels import (pane_ids, pane_ids_ref, paned_emit, paned_emit_fused,
                                      paned_emit_ints, paned_emit_ref, paned_emit_rows)
from oop.window.reference import window_oracle

from test_window import assert_same_rows

I64 = st.integers(-(2 ** 62), 2 ** 62)


@settings(max_examples=60)
@given(times=st.lists(st.one_of(I64, st.integers(-3000, 3000)), min_size=1, max_size=50),
       o=st.integers(-(2 ** 40), 2 ** 40), g=st.one_of(st.integers(1, 5000), st.integers(1, 2 ** 40)))
def test_pane_ids_equal_floor_division(times, o, g):
    t = np.asarray(times, np.int64)
    t = np.clip(t, -(2 ** 62) + 2 ** 41, 2 ** 62 - 2 ** 41)  # t - o stays inside int64
    p, lo, hi, tmin = pane_ids(t, o, g)
    ref = pane_ids_ref(t, o, g)
    assert p.tolist() == ref
    assert (lo, hi) == (min(ref), max(ref))
    assert tmin == int(t.min())


def check_purge(zero, lanes, mask, C, base, top, plo_last, live, dead, panes):
    """After an emission call that reset (``zero``) the leaving panes: every pane in ``[base,
    plo_last)`` is 0 in every lane and ``dead`` counted exactly the live cells it reset (lane 0 =
    row count); without ``zero`` nothing was reset. Returns the next call's (live, base, panes)."""
    if not zero:
        assert dead == 0
        return live, base, panes
    for p in range(base, min(plo_last, top)):
        rr = (p & mask) * C
        for lane in lanes:
            assert not lane[rr:rr + C].any()
    live -= dead
    assert live == int(np.count_nonzero(lanes[0]))
    return live, max(base, plo_last), {key: v for key, v in panes.items() if key[0] >= plo_last}


@st.composite
def emit_scripts(draw):
    """A sliding geometry (range r, slide s, pane g) and punctuations emitting runs of windows."""
    g = draw(st.integers(1, 4))
    s = g * draw(st.integers(1, 3))
    r = s * draw(st.integers(1, 4))
    o = draw(st.integers(-5, 5))
    n = draw(st.integers(1, 6))
    runs = draw(st.lists(st.integers(1, 5), min_size=1, max_size=5))
    P = draw(st.integers(1, 6))  # recompute period (the operator uses range/g)
    seed = draw(st.integers(0, 2 ** 31))
    return g, s, r, o, n, runs, P, seed


@settings(max_examples=90)
@given(script=emit_scripts(), zero=st.booleans(), with_lut=st.booleans(),
       kernel=st.sampled_from(["general", "fused", "ints"]))
def test_paned_emit_equals_reference_over_punctuations(script, zero, with_lut, kernel):
    """The three emission kernels (general; fused one-pass step for one int lane; general
    without float lanes, the sum then an int lane) == reference."""
    g, s, r, o, n, runs, P, seed = script
    rng = np.random.default_rng(seed)
    w0 = int(rng.integers(-3, 3))
    nw_total = sum(runs)
    # panes of every window to emit, in a ring large enough to hold them all
    first_p = ((w0 + 1) * s - r) // g
    last_p = (w0 + nw_total) * s // g
    R = 1 << int(math.ceil(math.log2(max(last_p - first_p + 1, 2))))
    C = n + int(rng.integers(0, 3))
    mask = R - 1
    rows = np.zeros(R * C, np.int64)
    sums = np.zeros(R * C, np.int64 if kernel == "ints" else np.float64)
    panes = {}
    for p in range(first_p, last_p):
        for c in range(n):
            if rng.random() < 0.5:
                k = int(rng.integers(1, 4))
                v = float(rng.integers(-50, 50))  # integral: exact under add/subtract
                j = (p & mask) * C + c
                rows[j], sums[j] = k, v
                panes[(p, c)] = [k, v]
    base, top = first_p, last_p
    live = int(np.count_nonzero(rows))
    irun, frun = np.zeros(C, np.int64), np.zeros(C, np.float64)
    srun = np.zeros(C, np.int64)
    prev, since, w = (0, 0), 0, w0
    lut = (rng.permutation(n) * 7 - 3).astype(np.int64) if with_lut else np.zeros(0, np.int64)
    for k, nw in enumerate(runs):
        tail = (C, mask, base, top, n, w, nw, s, r, g, o, prev[0], prev[1], k > 0, since, P,
                zero, lut)
        if kernel == "ints":
            codes, start, end, iv, fv, since, dead = paned_emit_ints(
                (rows, sums), 2, (frun,), 0, (irun, srun), (frun,), *tail)
            vals = iv[1]
        else:
            codes, start, end, iv, fv, since, dead = (
                paned_emit_fused if kernel == "fused" else paned_emit)(
                (rows,), 1, (sums,), 1, (irun,), (frun,), *tail)
            vals = fv[0]
        exp = paned_emit_ref(panes, w, nw, s, r, g, o)
        got = list(zip(codes.tolist(), start.tolist(), end.tolist(), iv[0].tolist(),
                       vals.tolist()))
        key = (lambda c: int(lut[c])) if with_lut else (lambda c: c)  # key values written directly
        assert got == [(key(c), a, b, v[0], v[1]) for c, a, b, v in exp]
        last = w + nw - 1
        plo_last = ((last + 1) * s - r) // g
        live, base, panes = check_purge(zero, (rows, sums), mask, C, base, top, plo_last, live,
                                        dead, panes)
        prev = (plo_last, (last + 1) * s // g)
        w += nw


@settings(max_examples=60)
@given(script=emit_scripts(), zero=st.booleans(), cont=st.lists(st.booleans(), max_size=5))
def test_paned_emit_rows_equals_reference_over_punctuations(script, zero, cont):
    """The row-count-only kernel (holistic queries) == reference, also when a punctuation does
    not continue the previous one (the running count is then rebuilt from the panes)."""
    g, s, r, o, n, runs, _, seed = script
    rng = np.random.default_rng(seed)
    w0 = int(rng.integers(-3, 3))
    first_p = ((w0 + 1) * s - r) // g
    last_p = (w0 + sum(runs)) * s // g
    R = 1 << int(math.ceil(math.log2(max(last_p - first_p + 1, 2))))
    C = n + int(rng.integers(0, 3))
    mask = R - 1
    rows = np.zeros(R * C, np.int64)
    panes = {}
    for p in range(first_p, last_p):
        for c in range(n):
            if rng.random() < 0.5:
                rows[(p & mask) * C + c] = k = int(rng.integers(1, 4))
                panes[(p, c)] = [k, 0.0]
    base, top = first_p, last_p
    live = int(np.count_nonzero(rows))
    run = np.full(C, 99, np.int64)  # garbage: the first window must not read it
    prev, w = (0, 0), w0
    for k, nw in enumerate(runs):
        inc0 = k > 0 and (cont[k] if k < len(cont) else True)
        if not inc0:
            run[:] = 99
        codes, start, end, cnt, dead = paned_emit_rows(rows, run, C, mask, base, top, n, w, nw,
                                                       s, r, g, o, prev[0], prev[1], inc0, zero)
        exp = paned_emit_ref(panes, w, nw, s, r, g, o)
        got = list(zip(codes.tolist(), start.tolist(), end.tolist(), cnt.tolist()))
        assert got == [(c, a, b, v[0]) for c, a, b, v in exp]
        last = w + nw - 1
        plo_last = ((last + 1) * s - r) // g
        live, base, panes = check_purge(zero, (rows,), mask, C, base, top, plo_last, live, dead,
                                        panes)
        prev = (plo_last, (last + 1) * s // g)
        w += nw


SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.float64())])


@settings(max_examples=25)
@given(data=st.data())
def test_fused_emission_keeps_invariants_and_equals_wid_and_oracle(data):
    """Large batches (many windows per punctuation): ring invariants after every step."""
    kind = data.draw(st.sampled_from([Sliding(10, 2), Sliding(12, 4, origin=3), Sliding(6, 6)]))
    aggs = data.draw(st.sampled_from([[agg.count(), agg.sum("val")], [agg.count()],
                                      [agg.mean("val"), agg.var("val"), agg.sum("key")],
                                      [agg.count(), agg.mean("val"), agg.max("val")],
                                      [agg.var("val"), agg.median("val")]]))
    n_batches = data.draw(st.integers(1, 6))
    delay = data.draw(st.integers(0, 8))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31)))
    steps, rows_all, hi = [], [], 0
    for _ in range(n_batches):
        m = int(rng.integers(1, 40))
        arr = hi + np.arange(m) * int(rng.integers(1, 3))
        ts = arr - rng.integers(0, delay + 1, m)
        hi = int(arr.max()) + 1
        b = pa.record_batch({"ts": ts, "key": rng.integers(0, 6, m),
                             "val": rng.integers(-9, 9, m).astype(float)}, schema=SCHEMA)
        steps += [b, Punctuation("ts", hi - delay)]
        rows_all.append(b)
    outs = {}
    for method in ("paned", "wid"):
        op = WindowAggregate(kind, aggs, by="key", method=method)
        op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
        got = []
        for x in steps:
            res = op.on_punctuation(x) if isinstance(x, Punctuation) else op.on_batch(x)
            got += [b for b in res if isinstance(b, pa.RecordBatch)]
            op._check()
        got += [b for b in op.flush() if isinstance(b, pa.RecordBatch)]
        outs[method] = pa.Table.from_batches(got, schema=op.out_schema)
    exp = window_oracle(pa.Table.from_batches(rows_all), kind, aggs, by="key", time="ts")
    assert_same_rows(outs["paned"], outs["wid"])
    assert_same_rows(outs["paned"], exp)


SUM_AGGS = [agg.count(), agg.sum("val"), agg.mean("val"), agg.var("val"), agg.std("val")]


@settings(max_examples=20)
@given(data=st.data())
def test_paned_hash_layout_equals_wid_and_oracle(data):
    """Paned-WID on the hash layout (sparse keys) == dense Paned-WID == WID == the oracle."""
    import oop
    from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
    from oop.window import window_operator

    kind = data.draw(st.sampled_from([Sliding(10, 3), Sliding(12, 4, origin=-5), Sliding(6, 6),
                                      Sliding(20, 2)]))
    aggs = SUM_AGGS + data.draw(st.sampled_from([[], [agg.median("val")]]))
    t = data.draw(disordered_tables(max_rows=60, max_delay=data.draw(st.sampled_from([0, 3, 10])),
                                    string_keys=data.draw(st.booleans())))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))

    def run(method, layout):
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        op = window_operator(kind, aggs, by="key", method=method, layout=layout)
        return s.via(op).run(), op

    res, op = run("paned", "hash")
    if t.num_rows:
        assert op.plan_info["layout"].startswith("hash")
        op._check()
    exp = window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms")
    assert_same_rows(res.table, exp)
    assert_same_rows(res.table, run("paned", "dense")[0].table)
    assert_same_rows(res.table, run("wid", "dense")[0].table)


def test_auto_layout_picks_hash_for_sparse_keys_under_panes_too():
    import oop
    from oop.window import window_operator

    rng = np.random.default_rng(0)
    n = 20_000
    ts = np.sort(rng.integers(0, 100_000, n))
    kind = Sliding(1000, 100)
    for keys, aggs, expect in ((rng.integers(0, 1_000_000, n), [agg.count(), agg.sum("val")], "hash"),
                               (rng.integers(0, 1_000_000, n), [agg.max("val")], "dense"),
                               (rng.integers(0, 50, n), [agg.count(), agg.sum("val")], "dense")):
        t = pa.table({"ts": ts, "key": keys, "val": rng.integers(0, 9, n)})
        op = window_operator(kind, aggs, by="key", method="paned")
        res = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(0),
                             batch_size=4096).via(op).run()
        assert op.plan_info["layout"].startswith(expect), (aggs, op.plan_info)
        assert_same_rows(res.table, window_oracle(t, kind, aggs, by="key", time="ts"))
        op._check()


def _runs(draw, float_vals):
    vals = st.sampled_from([0.5, -1.0, 2.0, 3.25, float("nan")]) if float_vals else st.integers(-3, 3)
    rows = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), vals,
                                   st.integers(1, 4)), max_size=25))
    acc = {}
    for a, b, x, n in rows:  # distinct keys per run (NaN rows stay apart, like after lexsort)
        key = (a, b, x if x == x else ("nan", len(acc)))
        acc[key] = (a, b, x, acc.get(key, (0, 0, 0, 0))[3] + n)
    out = list(acc.values())
    out.sort(key=lambda r: (r[0], r[1], r[2] != r[2], r[2] if r[2] == r[2] else 0))
    return out


@settings(max_examples=60)
@given(data=st.data(), float_vals=st.booleans())
def test_merge_counted_equals_reference(data, float_vals):
    from oop.window.kernels import merge_counted, merge_counted_ref

    r1, r2 = _runs(data.draw, float_vals), _runs(data.draw, float_vals)
    dt = np.float64 if float_vals else np.int64

    def arrs(rows):
        return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64),
                np.array([r[2] for r in rows], dt), np.array([r[3] for r in rows], np.int64))

    a, b, x, n = merge_counted(*arrs(r1), *arrs(r2))
    got = list(zip(a.tolist(), b.tolist(), x.tolist(), n.tolist()))
    nan = [r for r in got if r[2] != r[2]]
    assert len(nan) == sum(1 for r in r1 + r2 if r[2] != r[2])  # NaN rows never merge
    exp = merge_counted_ref([r for r in r1 if r[2] == r[2]], [r for r in r2 if r[2] == r[2]])
    assert [r for r in got if r[2] == r[2]] == exp
    keys = [(r[0], r[1], r[2] != r[2], r[2] if r[2] == r[2] else 0) for r in got]
    assert keys == sorted(keys)


@settings(max_examples=40)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(-3, 3)),
                     max_size=60),
       split=st.integers(1, 5), lo=st.integers(0, 6), width=st.integers(0, 7))
def test_multiset_select_merges_pane_runs_like_a_group_by(rows, split, lo, width):
    """Multiset (incremental compaction by merging, select by pairwise run merges) == Counter."""
    from collections import Counter

    from oop.window.multiset import Multiset

    ms = Multiset(np.int64)
    for q in range(0, len(rows), split):  # several appends and compactions
        part = rows[q:q + split]
        ms.add(np.array([r[0] for r in part], np.int64), np.array([r[1] for r in part], np.int64),
               np.array([r[2] for r in part], np.int64))
        if q % 2:
            ms.compact()
    ms._check()
    c, v, n = ms.select(lo, lo + width)
    exp = Counter((r[1], r[2]) for r in rows if lo <= r[0] < lo + width)
    assert list(zip(c.tolist(), v.tolist(), n.tolist())) == [(k[0], k[1], exp[k]) for k in sorted(exp)]


def test_cost_model_prices_holistic_values_for_both_methods():
    """Holistic: WID sorts range/slide copies of every value, panes sort each once and merge
    log2(P) rounds -- panes win on many panes per window, WID on one or two."""
    from oop.window import Tumbling, choose_method

    m, c = choose_method(Sliding(10_000, 1_000), [agg.median("v")], 10.0, 4000)
    assert m == "paned" and c["cost_wid"] > 2 * c["cost_paned"]
    assert choose_method(Sliding(10, 9), [agg.median("v")], 1.0, 1)[0] == "wid"
    assert choose_method(Tumbling(10), [agg.median("v")], 1.0, 1)[0] == "wid"
    # mixing a holistic aggregate in makes both methods costlier, never cheaper
    base = choose_method(Sliding(100, 10), [agg.count()], 1.0, 10)[1]
    mixed = choose_method(Sliding(100, 10), [agg.count(), agg.median("v")], 1.0, 10)[1]
    assert mixed["cost_wid"] > base["cost_wid"] and mixed["cost_paned"] > base["cost_paned"]


@settings(max_examples=20)
@given(data=st.data(), layout=st.sampled_from(["dense", "hash"]))
def test_fused_and_hash_paths_independent_of_arrival_order_and_batches(data, layout):
    """The fused emission (count/sum/mean/var only) and the hash emission: same rows for
    any arrival order and batch split of the same tuples, and == the oracle."""
    import oop
    from oop.testing import disordered_tables, reordered_feeds
    from oop.window import window_operator

    kind = data.draw(st.sampled_from([Sliding(8, 2), Sliding(9, 3, origin=1), Sliding(5, 5)]))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val"), agg.var("val")]
    t = data.draw(disordered_tables(max_rows=50, max_delay=None))
    outs = []
    for items in data.draw(reordered_feeds(t)):
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
        outs.append(s.via(window_operator(kind, aggs, by="key", method="paned", layout=layout)).run().table)
    assert_same_rows(outs[0], outs[1])
    assert_same_rows(outs[0], window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


def test_fused_emission_scenario_timeline():
    """Sliding(4, 2), pane 2: one pane enters and one leaves per window (the fused path).

    ts:      0  1  2  3  4  5  6  7
    key 1:   1     2        3            (val)
    key 2:      10    20       30
    panes:  [p0 ][p1  ][p2  ][p3  ]
    windows: w0=[-2,2) w1=[0,4) w2=[2,6) w3=[4,8)
    P(ts, 8) closes w0..w3 in one punctuation; P(ts, 4) first closes w0, w1.
    """
    op = WindowAggregate(Sliding(4, 2), [agg.count(), agg.sum("val")], by="key", method="paned")
    op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
    b = pa.record_batch({"ts": [0, 1, 2, 3, 5, 6], "key": [1, 2, 1, 2, 1, 2],
                         "val": [1.0, 10.0, 2.0, 20.0, 3.0, 30.0]}, schema=SCHEMA)
    out = op.on_batch(b) + op.on_punctuation(Punctuation("ts", 4))
    first = [x for x in out if isinstance(x, pa.RecordBatch)][0].to_pylist()
    assert [(r["key"], r["window_start"], r["window_end"], r["count"], r["sum_val"]) for r in first] == [
        (1, -2, 2, 1, 1.0), (2, -2, 2, 1, 10.0),
        (1, 0, 4, 2, 3.0), (2, 0, 4, 2, 30.0)]
    op._check()
    out = op.on_punctuation(Punctuation("ts", 8))
    rows = [x for x in out if isinstance(x, pa.RecordBatch)][0].to_pylist()
    assert [(r["key"], r["window_start"], r["count"], r["sum_val"]) for r in rows] == [
        (1, 2, 2, 5.0), (2, 2, 1, 20.0), (1, 4, 1, 3.0), (2, 4, 1, 30.0)]
    assert [x for x in out if isinstance(x, Punctuation)] == [Punctuation("window_end", 10)]
    op._check()
    # held: pane 3 (window 4 = [6, 10) needs it) and pane 2 (its differential step subtracts it)
    assert op.ring.live == 2


def test_bench_window_runs_small_and_its_methods_agree(capsys):
    """experiments/bench_window.py stays alive: a tiny run, every method's row count == numpy's,
    max and median checksums agree across methods (exit code 0)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "bench_window.py"
    spec = importlib.util.spec_from_file_location("bench_window", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--rows", "60000", "--repeat", "1", "--extra-rows", "20000"]) == 0
    out = capsys.readouterr().out
    assert "row counts agree with numpy: True" in out and "layout [sliding 10s/1s Paned-WID]" in out
    assert "Paned-WID vs plain WID round by round" in out
