"""Value columns of every type the window aggregates take, and decimals exactly.

Every type (small and unsigned ints, booleans, float32, timestamps with a
zone, dates, durations, dictionary-encoded strings) == the oracle under
WID and Paned-WID; uint64 values beyond int64 raise ``ValueRangeError``.

Decimals: exact sums, min/max and first/last.

Decimal values are held as unscaled int64 (``12.34`` in ``decimal(p, 2)`` is
``1234``): sums, min, max, first and last are exact (the sum's type is
``decimal(min(38, p + 10), s)``, Spark's rule), mean/var/std/quantiles are
float64 of the exact values. Before, decimals went through float64 and
``1234567890123456.78`` came back as ``...56.75``.

* the WID, Paned-WID and every other window operator == the from-scratch
  oracle (Python ``Decimal`` arithmetic), exactly, for values up to 17 digits;
* the in-order buffering baseline gives the same rows;
* values beyond int64 and sums that may overflow raise ``ValueRangeError``
  naming the column and what to do.
"""

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.errors import ValueRangeError
from oop.iop_baseline.buffering_window import BufferingWindow
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import Landmark, PartitionedRows, RowSliding, SlideByTuple, Sliding, Tumbling, agg
from oop.window.reference import window_oracle
from test_window import assert_same_rows, methods_for, run
from oop.testing import stop_and_resume

EXACT = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.first("val"),
         agg.last("val")]
EXACT_HOLISTIC = [agg.distinct("val"), agg.heavy_hitters("val", 2)]
FLOAT = [agg.mean("val"), agg.var("val"), agg.std("val"), agg.median("val"),
         agg.quantile("val", 0.25)]

KINDS = [Tumbling(7), Sliding(10, 3), Sliding(9, 6, origin=2), Landmark(8), RowSliding(5, 2),
         PartitionedRows(4, 2), SlideByTuple(6, 1)]


@st.composite
def decimal_feeds(draw, typ, magnitude):
    """A disordered table whose ``val`` is ``typ`` (unscaled |value| < ``magnitude``, nulls
    included) and an exact-punctuation feed of it."""
    t = draw(disordered_tables(max_rows=40, max_delay=draw(st.sampled_from([0, 3, None]))))
    unscaled = draw(st.lists(st.one_of(st.none(), st.integers(-magnitude + 1, magnitude - 1)),
                             min_size=t.num_rows, max_size=t.num_rows))
    vals = [None if u is None else Decimal(u).scaleb(-typ.scale) for u in unscaled]
    t = t.set_column(t.schema.get_field_index("val"), "val", pa.array(vals, typ))
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


def _aggs(kind, aggs):
    return [a for a in aggs if not (a.holistic and isinstance(kind, SlideByTuple))]


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=10)
@given(data=st.data())
def test_sum_min_max_first_last_are_exact(kind, data):
    """17-digit values (float64 holds 15-16): every operator == the Decimal oracle, exactly."""
    typ = data.draw(st.sampled_from([pa.decimal128(18, 2), pa.decimal128(38, 0),
                                     pa.decimal256(40, 4)]))
    t, items = data.draw(decimal_feeds(typ, 10 ** 17))
    aggs = _aggs(kind, EXACT + EXACT_HOLISTIC)
    res = run(items, t.schema, kind, aggs, data.draw(st.sampled_from(methods_for(kind))))
    exp = window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms")
    assert res.table.schema.field("sum_val").type == exp.schema.field("sum_val").type
    assert pa.types.is_decimal(res.table.schema.field("sum_val").type)
    assert res.table.schema.field("max_val").type == typ
    assert_same_rows(res.table, exp)


@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3), Landmark(8), SlideByTuple(6, 2)],
                         ids=repr)
@settings(max_examples=10)
@given(data=st.data())
def test_mean_var_quantiles_are_float_of_the_exact_values(kind, data):
    """Also decimal32/decimal64, as values and as distinct / heavy-hitter values (Arrow has no
    hash kernel for them: the encoder widens them to decimal128)."""
    typ = data.draw(st.sampled_from([pa.decimal128(12, 3), pa.decimal64(18, 2), pa.decimal32(9, 1)]))
    t, items = data.draw(decimal_feeds(typ, 10 ** 6))
    aggs = _aggs(kind, [agg.sum("val"), *FLOAT, *EXACT_HOLISTIC])
    res = run(items, t.schema, kind, aggs, data.draw(st.sampled_from(methods_for(kind))))
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("differential", [False, True])
@settings(max_examples=15)
@given(data=st.data())
def test_buffering_baseline_is_exact_too(differential, data):
    """The in-order baseline reads decimals the same way: its rows == the oracle's."""
    t, items = data.draw(decimal_feeds(pa.decimal128(18, 2), 10 ** 17))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val")]
    if not differential:
        aggs += [agg.min("val"), agg.max("val")]
    kind = Sliding(10, 3)
    sorted_t = t.sort_by("ts")  # the baseline needs ordered input
    s = oop.from_batches(sorted_t.to_batches(max_chunksize=7), time="ts", unit="ms",
                         schema=t.schema)
    got = s.via(BufferingWindow(kind, aggs, by=["key"], differential=differential)).run().table
    assert_same_rows(got, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


def _typed(draw_vals, typ):
    return lambda data, n: pa.array(data.draw(st.lists(st.one_of(st.none(), draw_vals),
                                                       min_size=n, max_size=n)), typ)


SMALL = st.integers(-100, 100)
STRINGS = st.text(alphabet="ab\u00e9\U0001f600", max_size=3)  # code-point order == UTF-8 byte order
TYPES = {  # type -> (values, the aggregates it takes)
    "int8": (_typed(SMALL, pa.int8()), "numeric"),
    "uint64": (_typed(st.integers(0, 2 ** 63 - 1), pa.uint64()), "order"),
    "uint64 small": (_typed(st.integers(0, 1000), pa.uint64()), "numeric"),
    "bool": (_typed(st.booleans(), pa.bool_()), "numeric"),
    "float32": (_typed(st.integers(-1000, 1000).map(lambda i: i / 8), pa.float32()), "numeric"),
    "timestamp tz": (_typed(st.integers(0, 10 ** 12), pa.timestamp("ms", tz="Europe/Paris")), "order"),
    "date32": (_typed(st.integers(0, 30000), pa.date32()), "order"),
    "duration": (_typed(SMALL, pa.duration("us")), "order"),
    "string": (_typed(STRINGS, pa.string()), "order"),
    "large_string": (_typed(STRINGS, pa.large_string()), "order"),
    "binary": (_typed(STRINGS.map(str.encode), pa.binary()), "order"),
    "dictionary string": (lambda data, n: _typed(STRINGS, pa.string())(data, n).dictionary_encode(),
                          "order"),
}
AGGS_OF = {
    "numeric": EXACT + EXACT_HOLISTIC + FLOAT,
    "order": [agg.count(), agg.min("val"), agg.max("val"), agg.first("val"), agg.last("val"),
              *EXACT_HOLISTIC],
}


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3)], ids=repr)
@settings(max_examples=8)
@given(data=st.data())
def test_every_value_type_equals_the_oracle(name, kind, data):
    make, what = TYPES[name]
    t = data.draw(disordered_tables(max_rows=30, max_delay=data.draw(st.sampled_from([0, 3, None]))))
    t = t.set_column(t.schema.get_field_index("val"), "val", make(data, t.num_rows))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    aggs = AGGS_OF[what]
    for method in ("wid", "paned"):
        res = run(items, t.schema, kind, aggs, method)
        assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


STRING_AGGS = [agg.count(), agg.min("val"), agg.max("val"), agg.first("val"), agg.last("val")]


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=10)
@given(data=st.data())
def test_min_max_first_last_of_strings_on_every_kind(kind, data):
    """Lanes hold ranks among the sorted distinct values; batches that bring new values re-rank
    the state (small batches: many re-rankings), and the result == the oracle on str order."""
    t = data.draw(disordered_tables(max_rows=40, max_delay=data.draw(st.sampled_from([0, 3, None]))))
    t = t.set_column(t.schema.get_field_index("val"), "val",
                     _typed(STRINGS, pa.string())(data, t.num_rows))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    res = run(items, t.schema, kind, STRING_AGGS, data.draw(st.sampled_from(methods_for(kind))))
    assert_same_rows(res.table, window_oracle(t, kind, STRING_AGGS, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("kind, method", [(Sliding(20, 5), "paned"), (Sliding(20, 5), "wid"),
                                          (Landmark(30), "paned"), (SlideByTuple(9, 2), "auto"),
                                          (PartitionedRows(6, 3), "auto")], ids=repr)
def test_string_ranks_survive_snapshot_and_resume(kind, method):
    """New values keep arriving after the checkpoint, so the restored ranks are re-ranked."""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 400
    words = np.array([f"w{i:03d}" for i in rng.permutation(300)])
    t = pa.table({"ts": np.arange(n) * 2 + rng.integers(0, 20, n), "key": rng.integers(0, 5, n),
                  "val": words[rng.integers(0, 300, n)]})

    def plan():
        return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(20),
                              batch_size=37).window(kind, STRING_AGGS, by="key", method=method)

    full, resumed = stop_and_resume(plan, 4)
    assert resumed is not None, "the run ended before the stop"
    assert_same_rows(resumed.table, full.table)
    assert_same_rows(full.table, window_oracle(t, kind, STRING_AGGS, by="key", time="ts", unit="ms"))


@pytest.mark.parametrize("kind, method", [(Tumbling(20), "wid"), (Sliding(40, 10), "wid"),
                                          (Sliding(40, 10), "paned"), (Landmark(30), "paned"),
                                          (SlideByTuple(9, 2), "auto"), (PartitionedRows(6, 3), "auto"),
                                          (RowSliding(8, 4), "auto")], ids=repr)
def test_unbounded_string_vocabulary_is_compacted(kind, method, monkeypatch):
    """A new id in every row: the dictionary forgets the values no cell holds (compacting at
    16 values here), the ranks held are remapped, and the output still == the oracle."""
    import numpy as np

    from oop.window import window_operator
    from oop.window.keys import ValueRanks

    monkeypatch.setattr(ValueRanks, "COMPACT_MIN", 16)
    rng = np.random.default_rng(2)
    n = 1500
    t = pa.table({"ts": np.arange(n) * 2 + rng.integers(0, 30, n), "key": rng.integers(0, 6, n),
                  "val": np.char.add("id", rng.permutation(n).astype(str))})
    op = window_operator(kind, STRING_AGGS, by="key", method=method)
    res = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(30),
                         batch_size=50).via(op).run()
    assert_same_rows(res.table, window_oracle(t, kind, STRING_AGGS, by="key", time="ts", unit="ms"))
    if not isinstance(kind, Landmark):  # a landmark window holds its minimum forever
        assert op.value_ranks["val"].enc.n_codes < 400  # not the 1500 values seen


@pytest.mark.parametrize("method", ["wid", "paned"])
def test_string_revisions_under_late_update_converge_to_the_oracle(method):
    """late='update': revised rows re-read ranked cells (re-ranked since they were emitted)."""
    import numpy as np

    rng = np.random.default_rng(1)
    n = 3000
    words = np.array([f"w{i:04d}" for i in rng.permutation(2000)])
    t = pa.table({"ts": np.arange(n) * 2 + rng.integers(0, 50, n), "key": rng.integers(0, 400, n),
                  "val": words[rng.integers(0, 2000, n)]})
    res = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(10), batch_size=64,
                         late="update").window(Tumbling(20), STRING_AGGS, by="key", method=method,
                                               late="update", allowed_lateness=1000).run()
    rows = res.table.to_pylist()
    assert sum(r["is_revision"] for r in rows) > 10
    final = {(r["key"], r["window_start"]): {c: r[c] for c in r if c != "is_revision"} for r in rows}
    exp = window_oracle(t, Tumbling(20), STRING_AGGS, by="key", time="ts", unit="ms").to_pylist()
    assert final == {(r["key"], r["window_start"]): r for r in exp}


BASELINE_TYPES = [n for n, (_, what) in TYPES.items() if what == "numeric" or
                  what == "order" and n not in ("string", "large_string", "binary", "dictionary string")]


@pytest.mark.parametrize("name", BASELINE_TYPES)
@settings(max_examples=8)
@given(data=st.data())
def test_buffering_baseline_takes_every_numeric_and_temporal_type(name, data):
    make, what = TYPES[name]
    t = data.draw(disordered_tables(max_rows=30, max_delay=0)).sort_by("ts")
    t = t.set_column(t.schema.get_field_index("val"), "val", make(data, t.num_rows))
    aggs = [agg.count(), agg.min("val"), agg.max("val")]
    if what == "numeric":
        aggs += [agg.sum("val"), agg.mean("val"), agg.var("val")]
    s = oop.from_batches(t.to_batches(max_chunksize=7), time="ts", unit="ms", schema=t.schema)
    got = s.via(BufferingWindow(Sliding(10, 3), aggs, by=["key"])).run().table
    assert_same_rows(got, window_oracle(t, Sliding(10, 3), aggs, by=["key"], time="ts", unit="ms"))


def test_buffering_baseline_refuses_strings_with_a_clear_error():
    t = pa.table({"ts": [1, 2], "key": ["a", "a"], "val": ["x", "y"]})
    s = oop.from_batches(t.to_batches(), time="ts", unit="ms", schema=t.schema)
    with pytest.raises(oop.errors.ConfigError, match="max_val on column 'val' of type string.*WID"):
        s.via(BufferingWindow(Sliding(10, 3), [agg.max("val")], by=["key"])).run()


def test_uint64_beyond_int64_raises_naming_column_and_value():
    t = pa.table({"ts": pa.array([1, 2], pa.int64()), "key": ["k", "k"],
                  "val": pa.array([1, 2 ** 63 + 5], pa.uint64())})
    with pytest.raises(ValueRangeError, match=r"column 'val' \(uint64\) holds 9223372036854775813.*"
                                              r"cast the column to float64"):
        run(t.to_batches(), t.schema, Tumbling(10), [agg.max("val")], "wid")


def _table(unscaled, typ, ts=None):
    vals = [Decimal(u).scaleb(-typ.scale) for u in unscaled]
    return pa.table({"ts": pa.array(ts or [1] * len(vals), pa.int64()), "key": ["k"] * len(vals),
                     "val": pa.array(vals, typ)})


@pytest.mark.parametrize("method", ["wid", "paned"])
def test_a_sum_that_may_overflow_int64_raises_naming_the_column(method):
    t = _table([9 * 10 ** 17] * 11, pa.decimal128(18, 0))  # 11 x 9e17 > 2^63
    with pytest.raises(ValueRangeError, match=r"decimal column 'val'.*11 rows.*cast 'val' to float64"):
        run(t.to_batches(max_chunksize=4), t.schema, Tumbling(10), [agg.sum("val")], method)
    # min/max/first/last need no sum: the same input is fine for them
    res = run(t.to_batches(), t.schema, Tumbling(10), [agg.max("val"), agg.last("val")], method)
    assert res.table.column("max_val").to_pylist() == [Decimal(9 * 10 ** 17)]


def test_a_value_beyond_int64_raises_naming_column_and_value():
    t = _table([5, 10 ** 20], pa.decimal128(38, 2))
    with pytest.raises(ValueRangeError, match=r"column 'val' \(decimal128\(38, 2\)\) holds "
                                                r"1000000000000000000\.00, beyond the 18 digits"):
        run(t.to_batches(), t.schema, Tumbling(10), [agg.sum("val")], "wid")


def test_cli_replay_writes_exact_decimal_sums(tmp_path):
    """``oop replay --agg sum:price`` on a decimal Parquet column writes a decimal column."""
    import pyarrow.parquet as pq

    from oop.cli import main

    t = pa.table({"ts": pa.array([0, 1, 2, 11], pa.int64()), "sym": ["a", "a", "b", "a"],
                  "price": pa.array([Decimal("0.10"), Decimal("0.20"), Decimal("1.00"),
                                     Decimal("99999999999999.99")], pa.decimal128(16, 2))})
    pq.write_table(t, tmp_path / "in.parquet")
    rc = main(["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts", "--key", "sym",
               "--window", "tumbling:10", "--agg", "sum:price", "--agg", "max:price",
               "--punctuation", "ordered", "--out", str(tmp_path / "out.parquet")])
    assert rc == 0
    out = pq.read_table(tmp_path / "out.parquet").sort_by([("window_start", "ascending"),
                                                           ("sym", "ascending")])
    assert out.schema.field("sum_price").type == pa.decimal128(26, 2)
    assert out.column("sum_price").to_pylist() == [Decimal("0.30"), Decimal("1.00"),
                                                   Decimal("99999999999999.99")]
