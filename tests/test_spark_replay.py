"""oop.spark.replay: arrival order, batch bound, ideal punctuation, disorder models, errors.

Real PySpark in local[2] (one shared session, tests/conftest_spark.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import oop
from conftest_spark import spark  # noqa: F401 - the shared session fixture
from oop.errors import EmptyInputError, TimeTypeError, UnknownColumnError
from oop.spark import replay
from oop.spark.common import suffix_min as _suffix_min

pytestmark = pytest.mark.spark


def _table(n: int = 3000, seed: int = 0, disorder: int = 400) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, n * 10, n))
    arr = ts + rng.integers(0, disorder, n)  # arrival = event time + bounded delay
    return pa.table({"ts": ts, "arr": arr, "k": rng.integers(0, 7, n), "v": rng.integers(0, 100, n)})


def _df(spark, t: pa.Table, parts: int = 3):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(t.to_pandas()).repartition(parts)


def test_replay_in_arrival_order_every_row_once(spark) -> None:  # noqa: F811
    t = _table()
    res = replay(_df(spark, t), time="ts", arrival="arr", punctuation=oop.BoundedDelay(400),
                 batch_size=256)
    out = res.table
    # arrival order: the arrival column is non-decreasing along the replay
    assert np.all(np.diff(out.column("arr").to_numpy()) >= 0)
    # every input row exactly once (none late: the delay bound holds by construction)
    assert res.late_total == 0 and res.tuples_in == t.num_rows
    key = lambda tb: sorted(zip(*(tb.column(c).to_pylist() for c in ("ts", "arr", "k", "v"))))  # noqa: E731
    assert key(out) == key(t)


def test_replay_batches_bounded_by_batch_size(spark) -> None:  # noqa: F811
    t = _table(2000)
    seen: list[int] = []

    def plan(s):  # type: ignore[no-untyped-def]
        def mask(b: pa.RecordBatch) -> pa.Array:
            seen.append(b.num_rows)
            return pa.array(np.ones(b.num_rows, bool))
        return s.select(mask)

    replay(_df(spark, t), time="ts", arrival="arr", plan=plan, batch_size=300,
           punctuation=oop.BoundedDelay(400))
    assert max(seen) <= 300 and sum(seen) == 2000 and len(seen) >= 2000 // 300


def test_ideal_punctuation_is_the_true_low_watermark(spark) -> None:  # noqa: F811
    t = _table(2500, seed=3, disorder=2000)
    res = replay(_df(spark, t), time="ts", arrival="arr", punctuation="ideal", batch_size=200)
    ts = res.table.column("ts").to_numpy()
    assert res.late_total == 0 and len(ts) == 2500
    assert res.punctuations, "the ideal feed must punctuate"
    suffix = np.minimum.accumulate(ts[::-1])[::-1]
    for rows_before, p in res.punctuations:
        # exact: the punctuation equals min{t after this point} (Eq. 4.1)
        assert 0 < rows_before < len(ts)
        assert p.value == suffix[rows_before]
    # at most one punctuation per batch (batches are cut per Spark partition)
    assert len(res.punctuations) <= len(ts) // 10


def test_suffix_min_reference() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        m = rng.integers(-50, 50, rng.integers(1, 30))
        ref = [min(m[i + 1:]) if i + 1 < len(m) else np.iinfo(np.int64).max for i in range(len(m))]
        assert _suffix_min(m).tolist() == ref


def test_file_order_without_arrival(spark) -> None:  # noqa: F811
    t = _table(1000)
    df = spark.createDataFrame(t.to_pandas()).coalesce(1)  # rows keep their order
    res = replay(df, time="ts", punctuation=oop.Ordered(), batch_size=128)
    assert res.table.column("arr").to_pylist() == t.column("arr").to_pylist()
    assert res.late_total == 0


def test_disorder_models_in_spark(spark) -> None:  # noqa: F811
    from oop.datasets.disorder import Band, BlockSorted

    t = _table(3000).select(["ts", "k", "v"])
    df = _df(spark, t)
    res = replay(df, time="ts", unit="ms", disorder=Band(250), punctuation=oop.BoundedDelay(250),
                 batch_size=500, seed=5)
    ts = res.table.column("ts").to_numpy()
    assert res.late_total == 0 and len(ts) == 3000
    assert (np.maximum.accumulate(ts) - ts).max() <= 250
    assert (np.maximum.accumulate(ts) - ts).max() > 0  # it really is disordered
    res = replay(df, time="ts", disorder=BlockSorted(1000), punctuation="ideal", batch_size=500)
    ts = res.table.column("ts").to_numpy()
    blocks = ts // 1000
    assert np.all(np.diff(blocks) >= 0) and not np.all(np.diff(ts) >= 0)


def test_bad_input_errors(spark) -> None:  # noqa: F811
    t = _table(100)
    df = _df(spark, t, 1)
    with pytest.raises(UnknownColumnError, match="tss"):
        replay(df, time="tss")
    with pytest.raises(TimeTypeError, match="cannot be event time"):
        replay(df.withColumn("s", df["k"].cast("string")), time="s")
    with pytest.raises(UnknownColumnError, match="arrival"):
        replay(df, time="ts", arrival="nope")
    with pytest.raises(EmptyInputError):
        replay(df.limit(0), time="ts")


# ---- MultiSourceSkew, Lulls, CSV input --------------------------------------------------
def _local_order(spark, df, model, seed: int) -> pa.Table:  # type: ignore[no-untyped-def]  # noqa: F811
    """The disorder applied locally: the model's arrival key (as Spark computes it for these
    rows) brought to the driver and the rows sorted by it with numpy."""
    from pyspark.sql import functions as F

    from oop.spark.disorder import arrival_key, time_as_long

    keyed = df.withColumn("__key", arrival_key(model, time_as_long(F.col("ts"), False), "ms",
                                               seed)).toArrow()
    order = np.argsort(keyed.column("__key").to_numpy(), kind="stable")
    return keyed.take(pa.array(order)).drop_columns(["__key"])


@pytest.mark.parametrize("model,bound", [
    ("skew", 3 * 40), ("lulls", 600),
], ids=["multi_source_skew", "lulls"])
def test_multisource_skew_and_lulls(spark, model, bound) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from oop.spark.disorder import Lulls, MultiSourceSkew
    from oop.spark.verify import compare_windows, spark_windows
    from oop.window import Tumbling, agg
    from oop.window.reference import window_oracle

    m = MultiSourceSkew(4, 40) if model == "skew" else Lulls(1500, 600)
    t = _table(3000, seed=11).select(["ts", "k", "v"])
    df = _df(spark, t).cache()
    aggs = [agg.count(), agg.sum("v")]
    res = replay(df, time="ts", unit="ms", disorder=m, punctuation=oop.BoundedDelay(bound),
                 batch_size=256, seed=3)
    # the bound of the model holds: nothing late
    assert res.late_total == 0 and res.tuples_in == t.num_rows
    # the replayed order == the same disorder applied locally, row for row
    got = res.table
    exp = _local_order(spark, df, m, 3)
    assert got.select(["ts", "k", "v"]).equals(exp.select(["ts", "k", "v"]))
    ts = got.column("ts").to_numpy()
    behind = np.maximum.accumulate(ts) - ts
    assert 0 < behind.max() <= bound  # really disordered, within the model's bound
    if model == "lulls":  # rows of a lull arrive at its end: none before a later on-time row
        start = ts // 1500 * 1500
        in_lull = ts - start < 600
        first_after = {}
        for i, (s0, lull) in enumerate(zip(start, in_lull)):
            if not lull and ts[i] > s0 + 600:  # (ties at the lull's end interleave)
                first_after.setdefault(s0, i)
        for i in np.flatnonzero(in_lull):
            assert i < first_after.get(start[i], len(ts))
    # the windows over the replayed feed (same punctuation) == Spark SQL == oracle
    win = oop.from_arrow(got, time="ts", unit="ms", punctuation=oop.BoundedDelay(bound),
                         batch_size=256).window(Tumbling(1000), aggs, by=("k",)).run()
    assert win.late_total == 0
    truth = spark_windows(df, time="ts", unit="ms", kind=Tumbling(1000), aggs=aggs,
                          by=("k",)).toArrow()
    for ref in (truth, window_oracle(t, Tumbling(1000), aggs, ("k",), "ts", "ms")):
        rep = compare_windows(win.table, ref, by=("k",), values=["count", "sum_v"])
        assert rep.ok, rep
    # a tighter bound than the model's: late rows appear and are accounted for
    tight = replay(df, time="ts", unit="ms", disorder=m, punctuation=oop.BoundedDelay(bound // 4),
                   batch_size=256, seed=3)
    assert tight.late_total > 0 and tight.table.num_rows + tight.late_total == t.num_rows


def test_csv_input_replay_matches_sql_and_oracle(spark, tmp_path) -> None:  # noqa: F811
    import pyarrow.csv as pacsv

    from oop.spark.cli import read_spark_input
    from oop.spark.verify import compare_windows, spark_windows
    from oop.window import Sliding, agg
    from oop.window.reference import window_oracle

    t = _table(2500, seed=5)
    path = tmp_path / "flows.csv"
    pacsv.write_csv(t, path)
    df = read_spark_input(spark, str(path))
    assert df.columns == ["ts", "arr", "k", "v"]
    kind, aggs = Sliding(3000, 1000), [agg.count(), agg.max("v")]
    oracle = window_oracle(t, kind, aggs, ("k",), "ts", "ms")
    truth = spark_windows(df, time="ts", unit="ms", kind=kind, aggs=aggs, by=("k",)).toArrow()
    res = replay(df, time="ts", arrival="arr", punctuation=oop.BoundedDelay(400), batch_size=300,
                 plan=lambda s: s.window(kind, aggs, by=("k",)))
    assert res.late_total == 0
    for ref in (oracle, truth):
        rep = compare_windows(res.table, ref, by=("k",), values=["count", "max_v"])
        assert rep.ok and rep.windows == oracle.num_rows, rep
    # ideal punctuation over CSV: exact, nothing late
    ideal = replay(df, time="ts", arrival="arr", punctuation="ideal", batch_size=300)
    assert ideal.late_total == 0 and ideal.table.num_rows == t.num_rows
