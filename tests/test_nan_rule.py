"""The NaN rule (docs/semantics.md, "NaN, infinity and null"): Spark's and DuckDB's.

* nulls are skipped by every value aggregate;
* NaN is a value: it propagates through sum/mean/var/std (a window holding a
  NaN gives NaN) and sorts above every number, +inf included, for
  min/max/median/quantiles/first/last ties (max of a window with a NaN is
  NaN; min is NaN only when every value is NaN);
* +-inf are ordinary values (inf + -inf is NaN by IEEE arithmetic).

Checks: the scalar algebra (the oracle's) == a from-scratch definition of the
rule; every window method (WID, Paned-WID, AdaptWID, IOP buffering) ==
``window_oracle`` on float columns with NaN / +-inf / null anywhere, the first
row included; NaN-aware equality (NaN == NaN).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

import oop
from oop.adapt import AdaptWID, Thresholds
from oop.iop_baseline import BufferingWindow
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling
from oop.window.reference import window_oracle

NAN, INF = float("nan"), float("inf")

AGGS = [agg.count(), agg.sum("val"), agg.mean("val"), agg.var("val"), agg.std("val"),
        agg.min("val"), agg.max("val"), agg.first("val"), agg.last("val"),
        agg.median("val"), agg.quantile("val", 0.25), agg.quantile("val", 0.9)]
BOUNDED = [a for a in AGGS if not a.holistic]
KINDS = [Tumbling(5), Sliding(8, 2), Sliding(12, 3), Sliding(6, 1)]

special = st.sampled_from([NAN, INF, -INF, None])
plain = st.floats(-100, 100, allow_nan=False).map(lambda x: float(round(x, 2)))
value = st.one_of(special, plain, plain)


# ---- the rule, from scratch -------------------------------------------------------------------
def _key(x: float) -> tuple:
    return (math.isnan(x), 0.0 if math.isnan(x) else x)  # NaN above +inf


def rule(fn: str, vals: list, times: list, q: float = 0.5):
    """The documented value of aggregate ``fn`` over ``vals`` (with nulls) at ``times``."""
    if fn == "count":
        return len(vals)
    pairs = [(t, v) for t, v in zip(times, vals) if v is not None]
    xs = [v for _, v in pairs]
    if not xs:
        return None
    if fn == "sum":
        return math.fsum(xs) if all(math.isfinite(x) for x in xs) else _ieee_sum(xs)
    if fn == "mean":
        s = rule("sum", vals, times)
        return s / len(xs)
    if fn in ("var", "std"):
        if len(xs) < 2:
            return None
        if not all(math.isfinite(x) for x in xs):
            return NAN
        m = math.fsum(xs) / len(xs)
        v = math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)
        return v if fn == "var" else math.sqrt(v)
    srt = sorted(xs, key=_key)
    if fn == "min":
        return srt[0]
    if fn == "max":
        return srt[-1]
    if fn in ("first", "last"):
        order = sorted(pairs, key=lambda p: (p[0], _key(p[1])))
        return order[0][1] if fn == "first" else order[-1][1]
    pos = q * (len(srt) - 1)
    lo = int(math.floor(pos))
    frac = pos - lo
    a = srt[lo]
    if frac == 0:
        return a
    b = srt[min(lo + 1, len(srt) - 1)]
    return a + (b - a) * frac


def _ieee_sum(xs: list) -> float:
    if any(math.isnan(x) for x in xs):
        return NAN
    pos, neg = INF in xs, -INF in xs
    if pos and neg:
        return NAN
    return INF if pos else -INF


def same(a, b, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=tol, abs_tol=1e-6)
    return a == b


@pytest.mark.parametrize("a", AGGS, ids=lambda a: a.name)
@given(st.lists(st.tuples(value, st.integers(0, 5)), max_size=12))
def test_scalar_algebra_follows_the_rule(a, items):
    s = a.init()
    for v, t in items:
        s = a.update(s, v, t)
    q = 0.5 if a.fn == "median" else (a.q or 0.5)
    exp = rule(a.fn if a.fn != "median" else "quantile", [v for v, _ in items],
               [t for _, t in items], q)
    assert same(a.finalize(s), exp), (items, a.finalize(s), exp)
    # merge of two halves == the whole, for the bounded aggregates
    if not a.holistic and items:
        k = len(items) // 2
        s1, s2 = a.init(), a.init()
        for v, t in items[:k]:
            s1 = a.update(s1, v, t)
        for v, t in items[k:]:
            s2 = a.update(s2, v, t)
        assert same(a.finalize(a.merge(s1, s2)), exp)


def test_rule_examples():
    mx, mn, sm = agg.max("v"), agg.min("v"), agg.sum("v")

    def fold(a, xs):
        s = a.init()
        for x in xs:
            s = a.update(s, x, 0)
        return a.finalize(s)

    assert math.isnan(fold(mx, [1.0, NAN, INF])) and fold(mn, [1.0, NAN, -INF]) == -INF
    assert math.isnan(fold(mn, [NAN, NAN])) and fold(mn, [NAN, 2.0]) == 2.0
    assert math.isnan(fold(sm, [INF, -INF])) and fold(sm, [INF, 1.0, None]) == INF
    assert fold(agg.median("v"), [1.0, 2.0, NAN]) == 2.0


@settings(max_examples=80)
@given(st.lists(st.one_of(st.floats(), st.sampled_from([1e150, -1e150, 1e149, NAN, INF])),
                max_size=40), st.sampled_from([1e150, 1.0, INF]))
def test_all_abs_below_equals_reference(xs, bound):
    """The all-finite check of every Paned-WID float batch (``note_nonfinite``): kernel ==
    value-by-value reference, NaN never below any bound."""
    from oop.window.kernels import all_abs_below, all_abs_below_ref

    v = np.asarray(xs, np.float64)
    assert all_abs_below(v, bound) == all_abs_below_ref(v, bound)
    assert all_abs_below_ref(v, bound) == bool(np.all(np.abs(v) < bound))


@settings(max_examples=80)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5),
                          st.one_of(st.floats(), st.sampled_from([1e150, -1e150, NAN, INF]))),
                max_size=40), st.sampled_from([1e150, 1.0, INF]))
@example([(0, 0, 1e200), (1, 0, NAN), (2, 1, 1.0)], 1e150)  # a NaN hides the largest |v|
@example([(0, 0, NAN), (1, 1, 2.0)], INF)  # ... and a later number the NaN
@example([(0, 0, INF), (1, 1, -INF)], INF)
def test_one_unit_update_kernel_checks_finite_as_it_folds(rows, bound):
    """The one-unit update kernel's fused check (Paned-WID's per-batch all-finite check,
    ``note_nonfinite``, reads no column twice): its flag == :func:`all_abs_below_ref` over the
    folded values, and the folded counts and sums == the tuple-at-a-time reference."""
    from oop.window import kernels as K

    C, R = 4, 8
    codes = np.array([r[0] for r in rows], np.int64)
    units = np.array([r[1] for r in rows], np.int64)
    v = np.array([r[2] for r in rows], np.float64)
    cnt, s = np.zeros(R * C, np.int64), np.zeros(R * C)
    new, below = K.upd_rows_sums1(cnt, (np.zeros(1, np.int64),), 0, (s,), (v,), 1, codes,
                                  units, C, R - 1, bound)
    assert below == K.all_abs_below_ref(v, bound)
    ref_rows = K.update_ref("rows", {}, codes, units, units + 1)
    ref_sum = K.update_ref("sum", {}, codes, units, units + 1, v.tolist())
    assert new == len(ref_rows) == np.count_nonzero(cnt)
    for (u, c), n in ref_rows.items():
        assert cnt[u * C + c] == n
        np.testing.assert_equal(s[u * C + c], ref_sum[(u, c)])


# ---- every method == the oracle ---------------------------------------------------------------
@st.composite
def hostile_feeds(draw, max_rows=40):
    t = draw(disordered_tables(max_rows=max_rows, n_keys=3, max_delay=6))
    vals = draw(st.lists(value, min_size=t.num_rows, max_size=t.num_rows))
    if t.num_rows and draw(st.booleans()):  # a non-finite value first, in event time too
        first = int(np.argmin(t.column("ts").to_numpy()))
        vals[first] = draw(st.sampled_from([NAN, INF, -INF]))
        vals[0] = draw(st.sampled_from([NAN, INF, -INF]))
    t = t.set_column(2, "val", pa.array(vals, pa.float64()))
    items = draw(exact_punctuation_feed(draw(batch_splits(t, max_batch=10))))
    return t, items


def _cells(table: pa.Table, aggs) -> dict:
    out = {}
    for r in table.to_pylist():
        k = (r["key"], r["window_start"], r["window_end"])
        assert k not in out, f"duplicate row {k}"
        out[k] = tuple(r[a.name] for a in aggs)
    return out


def _check(got: pa.Table, t: pa.Table, kind, aggs) -> None:
    exp = _cells(window_oracle(t, kind, aggs, by="key", time="ts"), aggs)
    res = _cells(got, aggs)
    assert set(res) == set(exp), (sorted(set(res) ^ set(exp))[:4])
    for k in exp:
        for a, x, y in zip(aggs, res[k], exp[k]):
            tol = 1e-6 if a.fn in ("var", "std") else 1e-9
            assert same(x, y, tol), (k, a.name, x, y)


def _source(t, items):
    return oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                            schema=t.schema)


@pytest.mark.parametrize("method", ["wid", "paned"])
@settings(max_examples=60, deadline=None)
@given(hostile_feeds(), st.sampled_from(KINDS))
def test_wid_and_paned_follow_the_rule(method, feed, kind):
    t, items = feed
    res = _source(t, items).window(kind, AGGS, by="key", method=method).run()
    _check(res.table, t, kind, AGGS)


@settings(max_examples=40, deadline=None)
@given(hostile_feeds(), st.sampled_from(KINDS),
       st.sampled_from([Thresholds.eager(), Thresholds.lazy(), Thresholds(),
                        Thresholds(up=2, down=1, absolute=True)]))
def test_adaptive_follows_the_rule(feed, kind, th):
    t, items = feed
    op = AdaptWID(kind, AGGS, by="key", thresholds=th, n_bins=2)
    res = _source(t, items).via(op).run()
    _check(res.table, t, kind, AGGS)


@settings(max_examples=40, deadline=None)
@given(hostile_feeds(), st.sampled_from(KINDS), st.booleans())
def test_iop_buffering_follows_the_rule(feed, kind, diff):
    t, _ = feed
    t = t.take(pa.compute.sort_indices(t, [("ts", "ascending")]))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val")] if diff else [
        a for a in BOUNDED if a.fn not in ("first", "last")]  # what the baseline implements
    op = BufferingWindow(kind, aggs, ("key",), differential=diff)
    res = oop.from_batches(t.to_batches(max_chunksize=7), time="ts", punctuation=oop.External(),
                           schema=t.schema).via(op).run()
    _check(res.table, t, kind, aggs)


def test_paned_nan_does_not_leak_into_later_windows():
    ts = np.arange(0, 200, dtype=np.int64)
    v = np.ones(200)
    v[3] = NAN
    v[50] = INF
    t = pa.table({"ts": ts, "key": np.zeros(200, np.int64), "val": v})
    kind = Sliding(16, 2)
    aggs = [agg.sum("val"), agg.mean("val"), agg.var("val"), agg.max("val")]
    for method in ("wid", "paned"):
        res = oop.from_batches(t.to_batches(max_chunksize=9), time="ts", unit="ms",
                               punctuation=oop.BoundedDelay(0), schema=t.schema
                               ).window(kind, aggs, by="key", method=method).run()
        _check(res.table, t, kind, aggs)


def test_first_value_nan_or_inf_does_not_poison_mean_and_var():
    for bad in (NAN, INF, -INF):
        v = [bad] + [float(i) for i in range(1, 40)]
        t = pa.table({"ts": np.arange(40, dtype=np.int64), "key": np.zeros(40, np.int64),
                      "val": v})
        for method in ("wid", "paned"):
            res = _source(t, t.to_batches(max_chunksize=5)).window(
                Sliding(10, 5), [agg.mean("val"), agg.var("val")], by="key", method=method).run()
            rows = res.table.to_pylist()
            later = [r for r in rows if r["window_start"] > 0]
            assert later and all(math.isfinite(r["mean_val"]) and math.isfinite(r["var_val"])
                                 for r in later), (bad, method, later[:2])
            _check(res.table, t, Sliding(10, 5), [agg.mean("val"), agg.var("val")])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25), value), max_size=30),
       st.integers(1, 40))
def test_pair_window_follows_the_rule(rows, cut):
    from oop.join.pair_window import PairWindow, pair_window_reference
    from oop.operators.base import StreamInfo

    aggs = [agg.count(), agg.sum("v"), agg.mean("v"), agg.min("v"), agg.max("v")]
    schema = pa.schema([("ts", pa.int64()), ("ts_right", pa.int64()), ("v", pa.float64())])
    op = PairWindow(aggs, sizes=(10, 10))
    op.open([StreamInfo("j", schema, {"ts": "ms", "ts_right": "ms"}, "ts")])
    out = []
    for part in (rows[:cut], rows[cut:]):
        if part:
            a, b, v = zip(*part)
            op.on_batch(pa.record_batch([pa.array(a, pa.int64()), pa.array(b, pa.int64()),
                                         pa.array(v, pa.float64())], schema=schema))
    for e in op.flush():
        out += e.to_pylist()
    exp = pair_window_reference([{"ts": a, "ts_right": b, "v": v} for a, b, v in rows], aggs,
                                times=("ts", "ts_right"), sizes=(10, 10))
    assert len(out) == len(exp)
    for x, y in zip(sorted(out, key=lambda r: (r["ts_start"], r["ts_right_start"])), exp):
        for a in aggs:
            assert same(x[a.name], y[a.name]), (a.name, x, y)
        cell = [v for t0, t1, v in rows
                if (t0 // 10, t1 // 10) == (x["ts_start"] // 10, x["ts_right_start"] // 10)]
        for a in aggs[1:]:
            assert same(y[a.name], rule(a.fn, cell, [0] * len(cell))), (a.name, cell, y)


def test_spark_comparison_takes_nan_as_equal_and_null_as_different():
    from oop.spark.verify import compare_windows

    w = {"window_start": [0, 10, 20, 30], "window_end": [10, 20, 30, 40]}
    eng = pa.table({**w, "x": [NAN, None, 1.0, INF]})
    truth = pa.table({**w, "x": [NAN, NAN, 1.0, INF]})
    assert compare_windows(eng, eng, values=["x"]).ok
    rep = compare_windows(eng, truth, values=["x"])
    assert rep.matched == 3 and rep.mismatched == 1


@pytest.mark.parametrize("method", ["wid", "paned"])
@pytest.mark.parametrize("late", [None, "update"])
@settings(max_examples=25, deadline=None)
@given(feed=hostile_feeds(), kind=st.sampled_from(KINDS[1:]))
def test_hash_layout_and_update_mode_follow_the_rule(method, late, feed, kind):
    """The sparse-key (hash cells) layout and late="update" (per-window path) under NaN/inf."""
    from oop.window.aggregate import WindowAggregate

    t, items = feed
    aggs = [agg.count(), agg.sum("val"), agg.mean("val"), agg.var("val")]
    layout = "hash" if late is None else "auto"
    op = WindowAggregate(kind, aggs, by="key", method=method, layout=layout, late=late)
    res = _source(t, items).via(op).run()
    table = res.table
    if "is_revision" in table.column_names:  # keep each window's last revision
        last = {}
        for r in table.to_pylist():
            last[(r["key"], r["window_start"])] = r
        table = pa.Table.from_pylist(list(last.values()), schema=table.schema)
    _check(table.select([c for c in table.column_names if c != "is_revision"]), t, kind, aggs)


@settings(max_examples=20, deadline=None)
@given(hostile_feeds(), st.sampled_from([1, 2, 3]),
       st.sampled_from(["RowSliding", "PartitionedRows", "SlideByTuple"]))
def test_row_and_slide_by_tuple_windows_follow_the_rule(feed, n, kind_name):
    from oop.window.kinds import PartitionedRows, RowSliding, SlideByTuple

    t, _ = feed
    kind = {"RowSliding": RowSliding(4 + n, n), "PartitionedRows": PartitionedRows(3 + n, n),
            "SlideByTuple": SlideByTuple(6, n)}[kind_name]
    aggs = BOUNDED if kind_name == "SlideByTuple" else AGGS  # the bins are bounded only
    res = oop.from_batches(t.to_batches(max_chunksize=7), time="ts", unit="ms",
                           punctuation=oop.External(), schema=t.schema
                           ).window(kind, aggs, by="key").run()
    _check(res.table, t, kind, aggs)


@pytest.mark.parametrize("kind_name", ["RowSliding", "PartitionedRows", "SlideByTuple"])
def test_row_and_slide_by_tuple_windows_cast_no_nan(kind_name):
    """NaN / infinite values reach the count lanes (rows, non-null count) without a cast to
    int64: no RuntimeWarning ("invalid value encountered in cast"), and the rule's results."""
    import warnings

    from oop.window.kinds import PartitionedRows, RowSliding, SlideByTuple

    kind = {"RowSliding": RowSliding(4, 2), "PartitionedRows": PartitionedRows(3, 1),
            "SlideByTuple": SlideByTuple(6, 1)}[kind_name]
    aggs = BOUNDED if kind_name == "SlideByTuple" else AGGS
    vals = [NAN, 1.5, INF, None, -INF, 2.0, NAN, 3.0, None, NAN]
    t = pa.table({"ts": pa.array([0, 2, 1, 3, 3, 5, 4, 7, 6, 8], pa.int64()),
                  "key": pa.array([0, 1, 0, 0, 1, 1, 0, 1, 0, 0], pa.int64()),
                  "val": pa.array(vals, pa.float64())})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = oop.from_batches(t.to_batches(max_chunksize=3), time="ts", unit="ms",
                               punctuation=oop.External(), schema=t.schema
                               ).window(kind, aggs, by="key").run()
    assert res.table.num_rows > 0
    _check(res.table, t, kind, aggs)


def _norm_hh(x):
    if isinstance(x, list):  # heavy hitters: NaN values made comparable
        return [(None if isinstance(h["value"], float) and math.isnan(h["value"]) else h["value"],
                 h["count"]) for h in x]
    return x


@settings(max_examples=30, deadline=None)
@given(hostile_feeds(), st.sampled_from(KINDS), st.sampled_from(["wid", "paned", "adaptive"]))
def test_distinct_and_heavy_hitters_count_nan_as_one_value(feed, kind, method):
    """Every NaN is the same value for count-distinct and heavy hitters (Spark: NaN = NaN)."""
    t, items = feed
    aggs = [agg.count(), agg.distinct("val"), agg.heavy_hitters("val", 2)]
    src = _source(t, items)
    if method == "adaptive":
        res = src.via(AdaptWID(kind, aggs, by="key", thresholds=Thresholds(), n_bins=2)).run()
    else:
        res = src.window(kind, aggs, by="key", method=method).run()
    got, exp = _cells(res.table, aggs), _cells(window_oracle(t, kind, aggs, by="key"), aggs)
    assert set(got) == set(exp)
    for k in exp:
        assert [_norm_hh(x) for x in got[k]] == [_norm_hh(x) for x in exp[k]], k
    for r in window_oracle(t, kind, aggs, by="key").to_pylist():
        vals = [v for v, ts, key in zip(t.column("val").to_pylist(), t.column("ts").to_pylist(),
                                        t.column("key").to_pylist())
                if key == r["key"] and r["window_start"] <= ts < r["window_end"] and v is not None]
        distinct = len({("nan" if math.isnan(v) else v) for v in vals})
        assert r["distinct_val"] == distinct
