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
from oop.spark.replay import _suffix_min

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
