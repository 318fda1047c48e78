"""Aggregates as algebra, kernels vs tuple-at-a-time references, key encoding, holistic helpers.

* merge(feed(A), feed(B)) == feed(A ∪ B) for every aggregate;
* revert undoes update for the differential ones;
* every ``upd_*`` kernel == ``update_ref`` on random (code, unit range, value) rows;
* KeyEncoder gives one stable dense code per distinct key across batches, any type;
* quantiles from (value, count) runs == numpy's quantile over the expanded values.
"""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from oop.errors import ConfigError
from oop.window import agg
from oop.window import kernels as K
from oop.window.keys import KeyEncoder
from oop.window.multiset import Multiset, group_bounds, quantiles_from_counts

AGGS = [agg.count(), agg.sum("v"), agg.mean("v"), agg.min("v"), agg.max("v"), agg.var("v"),
        agg.std("v"), agg.first("v"), agg.last("v"), agg.median("v"), agg.quantile("v", 0.25),
        agg.distinct("v"), agg.heavy_hitters("v", 2),
        agg.udaf("sumsq", lambda: 0.0, lambda s, x: s + x * x, lambda a, b: a + b, lambda s: s,
                 column="v", revert=lambda s, x: s - x * x)]

values = st.lists(st.tuples(st.one_of(st.none(), st.integers(-50, 50)), st.integers(0, 30)),
                  max_size=25)


def feed(a, items):
    s = a.init()
    for v, t in items:
        s = a.update(s, v if a.fn != "udaf" or v is not None else 0, t)
    return s


def close(x, y):
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    return x == y


@pytest.mark.parametrize("a", AGGS, ids=lambda a: a.name)
@given(values, values)
def test_merge_equals_feeding_the_union(a, xs, ys):
    assert close(a.finalize(a.merge(feed(a, xs), feed(a, ys))), a.finalize(feed(a, xs + ys)))


@pytest.mark.parametrize("a", [x for x in AGGS if x.differential], ids=lambda a: a.name)
@given(values, st.integers(-50, 50), st.integers(0, 30))
def test_revert_undoes_update(a, xs, x, t):
    s = feed(a, xs)
    assert close(a.finalize(a.revert(a.update(s, x, t), x, t)), a.finalize(s))


def test_declarations():
    assert [a.name for a in AGGS[:9]] == ["count", "sum_v", "mean_v", "min_v", "max_v", "var_v",
                                         "std_v", "first_v", "last_v"]
    assert agg.quantile("v", 0.5).name == "q50_v" and agg.quantile("v", 0.999).name == "q99.9_v"
    assert {a.name for a in AGGS if a.holistic} == {"median_v", "q25_v", "distinct_v",
                                                   "heavy_hitters_v", "sumsq_v"}
    assert agg.count().differential == "full" and agg.min("v").differential is None
    assert agg.heavy_hitters("v", 3).differential == "pseudo"
    with pytest.raises(ConfigError, match="not differential"):
        agg.max("v").revert((1, 3), 3)
    with pytest.raises(ConfigError, match="quantile q"):
        agg.quantile("v", 1.5)
    with pytest.raises(ConfigError, match="needs a column"):
        agg.sum("")


def test_first_last_ties_do_not_depend_on_order():
    a, b = agg.first("v"), agg.last("v")
    rows = [(5, 1), (3, 1), (9, 2), (7, 2)]
    for perm in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
        r = [rows[i] for i in perm]
        assert a.finalize(feed(a, r)) == 3 and b.finalize(feed(b, r)) == 9


# ---- kernels vs the tuple-at-a-time reference -------------------------------------
@st.composite
def kernel_inputs(draw):
    n = draw(st.integers(0, 40))
    C = 4
    codes = np.array(draw(st.lists(st.integers(0, C - 1), min_size=n, max_size=n)), np.int64)
    lo = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), np.int64)
    span = np.array(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)), np.int64)
    vals = np.array(draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n)), np.int64)
    times = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), np.int64)
    valid = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.uint8)
    if draw(st.booleans()):
        valid = np.zeros(0, np.uint8)
    return codes, lo, lo + span, vals, times, valid, C


@pytest.mark.parametrize("op", ["rows", "nn", "sum", "min", "max", "first", "last"])
@given(kernel_inputs())
def test_kernel_equals_reference(op, inp):
    codes, lo, hi, vals, times, valid, C = inp
    R, mask = 8, 7
    ident = {"min": np.iinfo(np.int64).max, "max": np.iinfo(np.int64).min}.get(op, 0)
    acc = np.full(R * C, ident, np.int64)
    tacc = np.full(R * C, np.iinfo(np.int64).max if op == "first" else np.iinfo(np.int64).min,
                   np.int64)
    if op == "rows":
        K.upd_rows(acc, codes, lo, hi, C, mask)
    elif op == "nn":
        K.upd_nn(acc, codes, lo, hi, C, mask, valid)
    elif op in ("sum", "min", "max"):
        getattr(K, f"upd_{op}")(acc, codes, lo, hi, C, mask, vals, valid)
    else:
        getattr(K, f"upd_{op}")(tacc, acc, codes, lo, hi, C, mask, times, vals, valid)
    ref = K.update_ref(op, {}, codes, lo, hi, vals.tolist(), times, valid)
    for u in range(R):
        for c in range(C):
            j = u * C + c
            expect = ref.get((u, c))
            if expect is None:
                assert acc[j] == ident
            elif op in ("first", "last"):
                assert (tacc[j], acc[j]) == expect
            else:
                assert acc[j] == expect


@given(kernel_inputs())
def test_fused_count_sum_kernel_equals_reference(inp):
    codes, lo, hi, vals, _, _, C = inp
    rows = np.zeros(8 * C, np.int64)
    nn = np.zeros(8 * C, np.int64)
    s = np.zeros(8 * C, np.float64)
    new = K.upd_rows_sums(rows, (nn,), 1, (s,), (vals.astype(np.float64),), 1, codes, lo, hi, C, 7)
    ref_rows = K.update_ref("rows", {}, codes, lo, hi)
    ref_sum = K.update_ref("sum", {}, codes, lo, hi, vals.tolist())
    assert new == len(ref_rows)
    for (u, c), n in ref_rows.items():
        assert rows[u * C + c] == n == nn[u * C + c]
        assert s[u * C + c] == ref_sum[(u, c)]
    assert rows.sum() == sum(ref_rows.values())


# ---- key encoding -----------------------------------------------------------------
key_values = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=20).map(lambda v: pa.array(v, pa.int64())),
    st.lists(st.integers(0, 50), min_size=1, max_size=20).map(lambda v: pa.array(v, pa.int64())),
    st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "é", ""])), min_size=1, max_size=20).map(pa.array),
    st.lists(st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -2.0])), min_size=1, max_size=20).map(pa.array),
)


@given(st.lists(st.tuples(key_values, key_values), min_size=1, max_size=4))
def test_key_encoder_codes_are_stable_and_dense(batches):
    batches = [(a, b) for a, b in batches if len(a) == len(b)] or [batches[0]]
    batches = [(a[: min(len(a), len(b))], b[: min(len(a), len(b))]) for a, b in batches]
    types = (batches[0][0].type, batches[0][1].type)
    batches = [(a, b) for a, b in batches if (a.type, b.type) == types]
    enc = KeyEncoder(["x", "y"])
    seen: dict = {}
    for a, b in batches:
        rb = pa.record_batch({"x": a, "y": b})
        codes = enc.encode(rb)
        for key, c in zip(zip(a.to_pylist(), b.to_pylist()), codes.tolist()):
            key = tuple(0.0 if k == 0.0 and isinstance(k, float) else k for k in key)
            assert seen.setdefault(key, c) == c
        enc._check()
    assert sorted(seen.values()) == list(range(len(seen)))
    back = enc.keys(np.array(sorted(seen.values())))
    decoded = list(zip(back[0].to_pylist(), back[1].to_pylist()))
    assert [tuple(0.0 if k == 0.0 and isinstance(k, float) else k for k in d) for d in decoded] == \
        sorted(seen, key=seen.get)


def test_key_encoder_leaves_the_direct_path_when_keys_turn_negative():
    enc = KeyEncoder(["k"])
    assert enc.encode(pa.record_batch({"k": [5, 3, 5]})).tolist() == [0, 1, 0]
    assert enc.encode(pa.record_batch({"k": [-1, 3, 7]})).tolist() == [2, 1, 3]
    assert enc.encode(pa.record_batch({"k": [7, 5, 10]})).tolist() == [3, 0, 4]
    enc._check()
    snap = enc.snapshot()
    other = KeyEncoder(["k"])
    other.restore(snap)
    assert other.encode(pa.record_batch({"k": [10, -1, 99]})).tolist() == [4, 2, 5]


@pytest.mark.parametrize("snapshot_first", [False, True])
def test_key_encoder_with_more_than_1024_direct_keys(snapshot_first):
    """The direct (LUT) path leaves the code table unfilled; growing it, leaving the
    path and snapshot/restore must still work past its initial 1024 rows."""
    enc = KeyEncoder(["k"])
    assert enc.encode(pa.record_batch({"k": np.arange(3000)})).tolist() == list(range(3000))
    if snapshot_first:
        other = KeyEncoder(["k"])
        other.restore(enc.snapshot())
        other._check()
        enc = other
    assert enc.encode(pa.record_batch({"k": [-5, 7, 2999]})).tolist() == [3000, 7, 2999]
    enc._check()
    again = KeyEncoder(["k"])
    again.restore(enc.snapshot())
    assert again.encode(pa.record_batch({"k": [2999, -5, -6]})).tolist() == [2999, 3000, 3001]
    assert again.keys(np.array([3001, 0]))[0].to_pylist() == [-6, 0]


# ---- holistic helpers -------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 5)), min_size=1, max_size=40),
       st.floats(0, 1))
def test_quantiles_from_counts_equal_numpy(rows, q):
    ms = Multiset(np.float64)
    ms.add(np.zeros(len(rows), np.int64), np.array([r[0] for r in rows]),
           np.array([r[1] for r in rows], np.float64))
    c, v, n = ms.select(0, 1)
    gcodes, bounds = group_bounds(c)
    got = quantiles_from_counts(v, n, bounds, q)
    for code, x in zip(gcodes.tolist(), got.tolist()):
        vals = [r[1] for r in rows if r[0] == code]
        assert math.isclose(x, float(np.quantile(vals, q)), rel_tol=1e-9, abs_tol=1e-9)
    ms._check()


@pytest.mark.parametrize("nulls", [False, True])
def test_key_encoder_hash_table_grows_inside_a_batch(nulls):
    """Two key columns (string + int64, the int with nulls or not): batches bringing up to
    40k new keys each make the compiled table stop, grow and resume many times; the codes
    == first appearance over the batches (a dict), and decode back to the keys."""
    rng = np.random.default_rng(3)
    enc = KeyEncoder(["s", "i"])
    seen: dict = {}
    for size, card in ((5, 3), (60_000, 40_000), (70_000, 90_000), (1_000, 10)):
        ids = rng.integers(0, card, size)
        s = pa.array([f"k{x % 977}" for x in ids])
        iv = (ids // 977).tolist()
        # nulls on a row basis: (s, None) and (s, 0) both occur, and must differ
        i = pa.array([None if nulls and r % 5 == 0 else x for r, x in zip(ids.tolist(), iv)],
                     pa.int64())
        codes = enc.encode(pa.record_batch({"s": s, "i": i}))
        want = [seen.setdefault(k, len(seen)) for k in zip(s.to_pylist(), i.to_pylist())]
        assert codes.tolist() == want
        enc._check()
    back = enc.keys(np.arange(len(seen)))
    assert list(zip(back[0].to_pylist(), back[1].to_pylist())) == list(seen)
