"""Integer sums are exact or refused; means of large integers do not wrap.

Before, every integer column was summed in a wrapping int64 lane: a window
``sum`` of ten ``1.7e18`` values came back negative, and the ``mean`` of
epoch-nanosecond timestamps was garbage. Now (``store.lane_infos``,
``store.check_exact_sum``):

* ``sum`` of an integer column is int64 and exact: a window whose sum may
  leave int64 (rows x largest ``|value|`` > ``2**63 - 1``) raises
  ``ValueRangeError`` naming the column and what to do. int64 arithmetic
  wraps, but the wrapped result equals the true sum whenever that is in
  range, so WID's scatter in any arrival order and Paned-WID's differential
  add/subtract of panes (whose running sums may wrap on the way) are exact
  under the bound -- the first test drives values up to ``2**63 / 40``;
* ``mean``/``var``/``std`` of an integer column without a ``sum`` of it
  accumulate in float64 (Spark's ``avg`` does the same), so large values
  give the float mean of the exact values;
* the in-order buffering baseline follows the same rules.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.errors import ValueRangeError
from oop.iop_baseline.buffering_window import BufferingWindow
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import Landmark, PartitionedRows, RowSliding, SlideByTuple, Sliding, Tumbling, agg
from oop.window.reference import window_oracle
from oop.window.values import lane_infos
from test_window import assert_same_rows, methods_for, run

KINDS = [Tumbling(7), Sliding(10, 3), Sliding(9, 6, origin=2), Landmark(8), RowSliding(5, 2),
         PartitionedRows(4, 2), SlideByTuple(6, 1)]
MAX_ROWS = 40
BOUND = (2 ** 63 - 1) // MAX_ROWS  # any window of <= 40 rows of |value| <= BOUND fits int64
SPREAD = 2 ** 20  # epoch-ns tests: values base .. base + SPREAD (see the test's docstring)


@st.composite
def int_feeds(draw, lo, hi, max_delay=(0, 3, None)):
    """A disordered table whose int64 ``val`` lies in ``[lo, hi]`` (nulls included) and an
    exact-punctuation feed of it."""
    t = draw(disordered_tables(max_rows=MAX_ROWS, max_delay=draw(st.sampled_from(max_delay))))
    vals = draw(st.lists(st.one_of(st.none(), st.integers(lo, hi)),
                         min_size=t.num_rows, max_size=t.num_rows))
    t = t.set_column(t.schema.get_field_index("val"), "val", pa.array(vals, pa.int64()))
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=12)
@given(data=st.data())
def test_sums_of_values_near_the_int64_range_are_exact(kind, data):
    """Values up to 2**63 / 40: partial and running sums wrap, the emitted sums are exact."""
    t, items = data.draw(int_feeds(-BOUND, BOUND))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val"), agg.min("val"), agg.max("val")]
    res = run(items, t.schema, kind, aggs, data.draw(st.sampled_from(methods_for(kind))))
    exp = window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms")
    assert res.table.schema.field("sum_val").type == pa.int64()
    assert_same_rows(res.table, exp)


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=10)
@given(data=st.data())
def test_mean_var_std_of_epoch_nanoseconds_do_not_wrap(kind, data):
    """Epoch-nanosecond-sized values (1.7e18 + up to 2**20 ns; float64 steps by 256 there):
    mean/var/std == the oracle's (exact rationals, rounded once); before, their int64 sum
    wrapped after five rows. (A spread under 2**20 keeps every shifted square sum exact in
    float64, so differential add/subtract -- Paned-WID, the differential baseline -- adds no
    rounding of its own; wider spreads get the usual float drift of differential sums.)"""
    base = 1_700_000_000_000_000_000
    t, items = data.draw(int_feeds(base, base + SPREAD))
    aggs = [agg.count(), agg.mean("val"), agg.var("val"), agg.std("val")]
    res = run(items, t.schema, kind, aggs, data.draw(st.sampled_from(methods_for(kind))))
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


def test_only_an_integer_sum_keeps_an_int64_sum_lane():
    schema = pa.schema([("a", pa.int64()), ("b", pa.int32()), ("f", pa.float64()),
                        ("d", pa.decimal128(10, 2))])
    dtypes = {li.key: li.dtype for li in lane_infos(
        [agg.sum("a"), agg.mean("a"), agg.mean("b"), agg.var("f"), agg.mean("d")], schema)}
    assert dtypes[("sum", "a")] == np.int64  # shared by sum and mean: exact, checked
    assert dtypes[("sum", "b")] == np.float64  # mean only: float, like Spark's avg
    assert dtypes[("ssum", "f")] == np.float64  # var of a float: its own shifted sum lane
    assert ("sum", "f") not in dtypes  # no sum/mean of f: no unshifted lane
    assert dtypes[("sum", "d")] == np.int64  # decimals stay unscaled int64


def _big(n, value=10 ** 18, ts=None):
    return pa.table({"ts": pa.array(ts or list(range(n)), pa.int64()), "key": ["k"] * n,
                     "val": pa.array([value] * n, pa.int64())})


@pytest.mark.parametrize("kind, method", [(Tumbling(100), "wid"), (Sliding(100, 50), "wid"),
                                          (Sliding(100, 50), "paned"), (Landmark(50), "paned"),
                                          (SlideByTuple(100, 1), "wid"), (RowSliding(20, 10), "wid")],
                         ids=str)
def test_an_integer_sum_that_may_overflow_raises_naming_the_column(kind, method):
    t = _big(10)  # 10 x 1e18 > 2**63 - 1
    with pytest.raises(ValueRangeError, match=r"integer column 'val'.*10 rows x max \|value\| "
                                              r"1000000000000000000.*cast 'val' to float64"):
        run(t.to_batches(max_chunksize=3), t.schema, kind, [agg.sum("val")], method)
    # nine rows fit: exact, even though the running sums of Paned-WID wrap on the way
    t9 = _big(9)
    res = run(t9.to_batches(max_chunksize=3), t9.schema, kind, [agg.sum("val"), agg.count()], method)
    full = [s for s, c in zip(res.table.column("sum_val").to_pylist(),
                              res.table.column("count").to_pylist()) if c == 9]
    assert full and all(s == 9 * 10 ** 18 for s in full)
    # without a sum, the mean is summed in float64 and does not overflow
    res = run(t.to_batches(max_chunksize=3), t.schema, kind, [agg.mean("val")], method)
    assert all(m == pytest.approx(1e18, rel=1e-12) for m in res.table.column("mean_val").to_pylist())


@pytest.mark.parametrize("differential", [False, True])
def test_the_buffering_baseline_follows_the_same_rules(differential):
    kind = Sliding(100, 50)
    t = _big(10)
    stream = oop.from_arrow(t, time="ts", unit="ms")
    with pytest.raises(ValueRangeError, match=r"integer column 'val'.*cast 'val' to float64"):
        stream.via(BufferingWindow(kind, [agg.sum("val")], by=["key"],
                                   differential=differential)).run()
    aggs = [agg.count(), agg.mean("val"), agg.std("val")]
    got = oop.from_arrow(t, time="ts", unit="ms").via(
        BufferingWindow(kind, aggs, by=["key"], differential=differential)).run().table
    assert_same_rows(got, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@settings(max_examples=15)
@given(data=st.data())
def test_the_buffering_baseline_sums_near_the_int64_range_exactly(data):
    t, _ = data.draw(int_feeds(-BOUND, BOUND))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val")]
    kind = Sliding(10, 3)
    got = oop.from_batches(t.sort_by("ts").to_batches(max_chunksize=7), time="ts", unit="ms",
                           schema=t.schema).via(BufferingWindow(kind, aggs, by=["key"])).run().table
    assert_same_rows(got, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("differential", [False, True])
@settings(max_examples=15)
@given(data=st.data())
def test_the_buffering_baseline_keeps_the_low_digits_of_epoch_nanoseconds(differential, data):
    base = 1_700_000_000_000_000_000
    t, _ = data.draw(int_feeds(base, base + SPREAD))
    aggs = [agg.count(), agg.mean("val"), agg.var("val"), agg.std("val")]
    kind = Sliding(10, 3)
    got = oop.from_batches(t.sort_by("ts").to_batches(max_chunksize=7), time="ts", unit="ms",
                           schema=t.schema).via(
        BufferingWindow(kind, aggs, by=["key"], differential=differential)).run().table
    assert_same_rows(got, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("kind, method", [(Tumbling(100), "wid"), (Sliding(100, 50), "paned"),
                                          (SlideByTuple(100, 1), "wid")], ids=str)
def test_variance_beside_an_exact_integer_sum_keeps_the_low_digits(kind, method):
    """With ``sum`` asked too, the int64 lane serves var/std: ``sum - n * shift`` is taken in
    int64 (it fits although neither the sum's float nor ``n * shift`` is exact)."""
    import statistics

    base = 1_800_000_000_000_000_000
    offs = [0, 129, 7, 1000, 3]
    t = pa.table({"ts": pa.array([1, 2, 3, 4, 5], pa.int64()), "key": ["k"] * 5,
                  "val": pa.array([base + o for o in offs], pa.int64())})
    aggs = [agg.sum("val"), agg.mean("val"), agg.var("val"), agg.std("val"), agg.count()]
    res = run(t.to_batches(max_chunksize=2), t.schema, kind, aggs, method).table.to_pylist()
    full = [r for r in res if r["count"] == 5]
    assert full
    for r in full:
        assert r["sum_val"] == 5 * base + sum(offs)
        assert r["var_val"] == pytest.approx(statistics.variance(offs), rel=1e-12)
        assert r["std_val"] == pytest.approx(statistics.stdev(offs), rel=1e-12)
        assert r["mean_val"] == pytest.approx(base + statistics.mean(offs), rel=1e-15)


@pytest.mark.parametrize("differential", [False, True])
@pytest.mark.parametrize("with_sum", [False, True])
def test_the_buffering_baseline_variance_keeps_the_low_digits(differential, with_sum):
    import statistics

    base = 1_800_000_000_000_000_000
    offs = [0, 129, 7, 1000, 3]
    t = pa.table({"ts": pa.array([1, 2, 3, 4, 5], pa.int64()), "key": ["k"] * 5,
                  "val": pa.array([base + o for o in offs], pa.int64())})
    aggs = [agg.mean("val"), agg.var("val"), agg.std("val"), agg.count()]
    aggs += [agg.sum("val")] if with_sum else []
    r = oop.from_arrow(t, time="ts", unit="ms").via(
        BufferingWindow(Tumbling(100), aggs, by=["key"], differential=differential)
    ).run().table.to_pylist()[0]
    assert r["var_val"] == pytest.approx(statistics.variance(offs), rel=1e-12)
    assert r["std_val"] == pytest.approx(statistics.stdev(offs), rel=1e-12)
    assert r["mean_val"] == pytest.approx(base + statistics.mean(offs), rel=1e-15)
    if with_sum:
        assert r["sum_val"] == 5 * base + sum(offs)


@pytest.mark.parametrize("kind", [Tumbling(100), Sliding(100, 50)], ids=repr)
def test_adaptwid_integer_sums_are_exact_or_refused_too(kind):
    """AdaptWID keeps its own partials (004 §6.3): the same bound at emission."""
    from oop.adapt import AdaptWID

    def adapt(t):
        return oop.from_batches(t.to_batches(max_chunksize=3), time="ts", unit="ms",
                                schema=t.schema).via(AdaptWID(kind, [agg.sum("val"), agg.count()],
                                                              by="key")).run().table

    with pytest.raises(ValueRangeError, match=r"integer column 'val'.*10 rows x max \|value\|"):
        adapt(_big(10))
    res = adapt(_big(9))
    full = [s for s, c in zip(res.column("sum_val").to_pylist(), res.column("count").to_pylist())
            if c == 9]
    assert full and all(s == 9 * 10 ** 18 for s in full)
