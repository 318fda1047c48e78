"""oop.aggregates: the one description of every aggregate.

* every registered kind's scalar reference (init / update / merge / revert / finalize) against
  a from-scratch numpy computation on Hypothesis data with NaN, +-inf and nulls, under the
  documented rule: nulls skipped, NaN propagates through sum / mean / var / std and sorts
  above every number for min / max / first-last ties / median / quantiles;
* merge of a split input == the whole; revert of a suffix == the prefix (differential kinds);
* the output-type table, shared by the window operator and AdaptWID;
* no operator outside oop/aggregates decides by an aggregate's name.
"""

from __future__ import annotations

import math
import pathlib
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from oop.aggregates import REGISTRY, get
from oop.errors import ConfigError
from oop.window import agg
from oop.window.aggregates import Agg, output_type

ROOT = pathlib.Path(__file__).resolve().parents[1]

SQUARES = agg.udaf("sq", lambda: 0.0, lambda s, v: s + v * v, lambda a, b: a + b, lambda s: s,
                   column="v", revert=lambda s, v: s - v * v)

#: one aggregate of every registered kind
ALL: list[Agg] = [agg.count(), agg.sum("v"), agg.mean("v"), agg.min("v"), agg.max("v"),
                  agg.var("v"), agg.std("v"), agg.first("v"), agg.last("v"), agg.median("v"),
                  agg.quantile("v", 0.3), agg.distinct("v"), agg.heavy_hitters("v", 2), SQUARES]

finite = st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 3))
special = st.sampled_from([math.nan, math.inf, -math.inf])
value = st.one_of(st.none(), finite, finite, finite, special, st.integers(-5, 5).map(float))
rows = st.lists(st.tuples(st.integers(0, 6), value), max_size=25)


def test_every_kind_is_covered() -> None:
    assert sorted({a.fn for a in ALL}) == sorted(REGISTRY)


# ---- from scratch ---------------------------------------------------------------------
def _nan_last(vals: list[float]) -> np.ndarray:
    return np.sort(np.asarray(vals, dtype=np.float64))  # numpy sorts NaN last


def _quantile(vals: list[float], q: float) -> float | None:
    if not vals:
        return None
    b = _nan_last(vals)
    if np.isfinite(b).all():
        return float(np.quantile(b, q))  # numpy's linear method
    # +-inf / NaN: numpy interpolates even at an exact order statistic (inf * 0 = NaN); the
    # rule takes the order statistic itself there
    pos = q * (len(b) - 1)
    lo = int(math.floor(pos))
    if pos == lo:
        return float(b[lo])
    return float(b[lo] + (b[lo + 1] - b[lo]) * (pos - lo))


def scratch(a: Agg, data: list[tuple[int, Any]]) -> Any:
    """The aggregate by the documented rule, from numpy, without the scalar reference."""
    vals = [v for _, v in data if v is not None]
    if a.fn == "count":
        return len(data)
    if a.fn == "udaf":
        return float(np.sum(np.square(np.asarray(vals, dtype=np.float64)))) if vals else 0.0
    if not vals:
        return {"distinct": 0, "heavy_hitters": []}.get(a.fn)  # counts of nothing: 0, []
    x = np.asarray(vals, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if a.fn == "sum":
            return float(np.sum(x))
        if a.fn == "mean":
            return float(np.mean(x))
        if a.fn in ("var", "std"):
            if len(x) < 2:
                return None
            if not np.isfinite(x).all():
                return math.nan
            v = float(np.var(x, ddof=1))
            return v if a.fn == "var" else math.sqrt(v)
    if a.fn == "min":
        return float(np.nanmin(x)) if (~np.isnan(x)).any() else math.nan
    if a.fn == "max":
        return math.nan if np.isnan(x).any() else float(np.max(x))
    if a.fn in ("first", "last"):
        pairs = [(t, v) for t, v in data if v is not None]
        # by time, ties by value with NaN the greatest
        order = sorted(range(len(pairs)), key=lambda i: (pairs[i][0], math.isnan(pairs[i][1]),
                                                         0.0 if math.isnan(pairs[i][1])
                                                         else pairs[i][1]))
        return pairs[order[0] if a.fn == "first" else order[-1]][1]
    if a.fn in ("median", "quantile"):
        return _quantile(vals, 0.5 if a.fn == "median" else float(a.q))  # type: ignore[arg-type]
    if a.fn == "distinct":
        return int(len(np.unique(x)))  # numpy >= 1.21: all NaN count as one value
    if a.fn == "heavy_hitters":
        u, c = np.unique(x, return_counts=True)
        items = sorted(zip(u.tolist(), c.tolist()),
                       key=lambda vc: (-vc[1], math.isnan(vc[0]), 0 if math.isnan(vc[0]) else vc[0]))
        return [{"value": v, "count": n} for v, n in items[: a.k]]
    raise AssertionError(a.fn)


def same(x: Any, y: Any) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(p["value"], q["value"]) and p["count"] == q["count"]
                                        for p, q in zip(x, y))
    if x is None or y is None:
        return x is None and y is None
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6)


def fold(a: Agg, data: list[tuple[int, Any]]) -> Any:
    s = a.init()
    for t, v in data:
        s = a.update(s, v, t)
    return s


@pytest.mark.parametrize("a", ALL, ids=lambda a: a.fn)
@settings(max_examples=150, deadline=None)
@given(data=rows, cut=st.integers(0, 25))
def test_scalar_reference_equals_scratch(a: Agg, data: list[tuple[int, Any]], cut: int) -> None:
    want = scratch(a, data)
    assert same(a.finalize(fold(a, data)), want), (a.fn, data)
    # merge of a split input == the whole
    left, right = data[:cut], data[cut:]
    assert same(a.finalize(a.merge(fold(a, left), fold(a, right))), want), (a.fn, cut)


@pytest.mark.parametrize("a", [a for a in ALL if a.differential], ids=lambda a: a.fn)
@settings(max_examples=100, deadline=None)
@given(data=st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(-50, 50))),
                     max_size=20),
       cut=st.integers(0, 20))
def test_revert_of_a_suffix_is_the_prefix(a: Agg, data: list[tuple[int, Any]], cut: int) -> None:
    s = fold(a, data)
    for t, v in data[cut:]:
        s = a.revert(s, v, t)
    assert same(a.finalize(s), a.finalize(fold(a, data[:cut])))


@pytest.mark.parametrize("a", [a for a in ALL if not a.differential], ids=lambda a: a.fn)
def test_non_differential_kinds_refuse_revert(a: Agg) -> None:
    with pytest.raises(ConfigError, match="not differential"):
        a.revert(a.init(), 1.0)


# ---- output types ------------------------------------------------------------------------
TYPES = [pa.int32(), pa.int64(), pa.bool_(), pa.float32(), pa.float64(), pa.decimal128(10, 2)]


def expected_type(fn: str, t: pa.DataType) -> pa.DataType:
    if fn in ("count", "distinct"):
        return pa.int64()
    if fn == "sum":
        if pa.types.is_decimal(t):
            return pa.decimal128(t.precision + 10, t.scale)
        return pa.float64() if pa.types.is_floating(t) else pa.int64()
    if fn in ("min", "max", "first", "last"):
        return t
    if fn == "heavy_hitters":
        return pa.list_(pa.struct([("value", t), ("count", pa.int64())]))
    return pa.float64()


@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("a", ALL, ids=lambda a: a.fn)
def test_output_type_table(a: Agg, t: pa.DataType) -> None:
    assert output_type(a, t) == expected_type(a.fn, t) == a.spec.output_type(t)


@pytest.mark.parametrize("t", [pa.int64(), pa.bool_(), pa.float64()], ids=str)
@pytest.mark.parametrize("a", [a for a in ALL if a.fn != "udaf"], ids=lambda a: a.fn)
def test_adaptwid_output_type_is_the_window_operators(a: Agg, t: pa.DataType) -> None:
    from oop.adapt.operator import AdaptWID

    schema = pa.schema([("v", t)])
    assert AdaptWID._agg_type(a, schema) == output_type(a, t)


# ---- properties --------------------------------------------------------------------------
def test_properties() -> None:
    assert [n for n, s in REGISTRY.items() if s.holistic] == [
        "median", "quantile", "distinct", "heavy_hitters", "udaf"]
    assert [n for n, s in REGISTRY.items() if s.selective] == ["min", "max", "first", "last"]
    assert [n for n, s in REGISTRY.items() if s.differential == "full"] == [
        "count", "sum", "mean", "var", "std"]
    for s in REGISTRY.values():
        assert s.holistic == (not s.lane_ops) == (s.store_op is not None)
    assert SQUARES.differential == "pseudo" and agg.udaf(
        "x", float, max, max, float, column="v").differential is None


def test_spark_sql() -> None:
    assert get("count").spark_sql(None) == "count(1)"
    assert get("mean").spark_sql("v") == "avg(`v`)"
    assert agg.quantile("v", 0.9).spec.spark_sql("v", agg.quantile("v", 0.9)) == \
        "percentile(`v`, 0.9)"
    with pytest.raises(ConfigError, match="no Spark ground truth"):
        get("first").spark_sql("v")


def test_unknown_kind() -> None:
    with pytest.raises(ConfigError, match="unknown aggregate 'mode'"):
        get("mode")
    with pytest.raises(ConfigError, match="unknown aggregate"):
        Agg("mode", "v")


# ---- one place ---------------------------------------------------------------------------
#: ``fn == "sum"``, ``a.fn in (...)``, ``fn != "count"`` ... naming a registered aggregate
_NAME_TEST = re.compile(
    r"""\bfn\s*(==|!=)\s*["'](%s)["']|\bfn\s+(not\s+)?in\s+\(\s*["'](%s)["']"""
    % ("|".join(REGISTRY), "|".join(REGISTRY)))


def test_no_aggregate_name_tests_outside_oop_aggregates() -> None:
    hits = []
    for p in sorted((ROOT / "oop").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith("oop/aggregates/"):
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if _NAME_TEST.search(line):
                hits.append(f"{rel}:{i}: {line.strip()}")
    assert not hits, "decide by an oop.aggregates property, not the name:\n" + "\n".join(hits)
