"""Spark agrees: window alignment and the NaN rule (docs/semantics.md) against real PySpark.

``spark.verify.spark_windows`` (Spark SQL ``window()``, and its nanosecond integer form)
over float values with NaN, +-inf and null == ``window_oracle``, for a sliding window whose
range is not a multiple of its slide, with and without an origin. Small data, one shared
local[2] session (tests/conftest_spark.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conftest_spark import spark  # noqa: F401 - the shared session fixture
from oop.spark.verify import compare_windows, spark_windows
from oop.window import Sliding, agg
from oop.window.reference import window_oracle


@pytest.mark.parametrize("unit,kind", [("ms", Sliding(10_000, 3_000)), ("ns", Sliding(10_000, 3_000)),
                                       ("ms", Sliding(10_000, 3_000, origin=1000))], ids=str)
def test_spark_windows_and_nan_rule_equal_the_oracle(spark, unit, kind):  # noqa: F811
    rng = np.random.default_rng(0)
    n = 200
    ts = rng.integers(-40_000, 40_000, n).astype(np.int64)
    keys = rng.integers(0, 3, n).tolist()
    v = rng.random(n).tolist()
    v[5], v[17], v[40], v[41], v[90] = float("nan"), float("inf"), float("-inf"), float("inf"), None
    t = pa.table({"ts": ts, "k": pa.array(keys, pa.int64()), "v": pa.array(v, pa.float64())})
    aggs = [agg.count(), agg.sum("v"), agg.mean("v"), agg.min("v"), agg.max("v")]
    # rows, not pandas: pandas would turn NaN into null on the way in and out
    df = spark.createDataFrame([(int(a), b, c) for a, b, c in zip(ts, keys, v)],
                               "ts long, k long, v double")
    got = spark_windows(df, time="ts", unit=unit, kind=kind, aggs=aggs, by=["k"])
    truth = pa.Table.from_pylist([r.asDict() for r in got.collect()])
    oracle = window_oracle(t, kind, aggs, by="k", time="ts", unit=unit)
    rep = compare_windows(oracle, truth, by=["k"], values=[a.name for a in aggs])
    assert rep.ok, rep.as_dict()
    starts = set(oracle.column("window_start").to_pylist())
    assert all((s - kind.origin) % kind.slide == 0 for s in starts)  # Spark's start grid
