"""Compiled (numba) UDAFs under Paned-WID: every window of a punctuation in one call.

* end to end, for random disordered streams: an order-insensitive UDAF
  (sum of squares) under Paned-WID == WID == the from-scratch oracle, and the
  per-window ``Multiset.select`` path is not taken;
* an order-sensitive UDAF (a running polynomial hash of the values) gives the
  same bits under the one-call path as under the per-window path: both feed
  ``update`` the window's values in sorted order (NaN last), each as often
  as it occurs;
* windows whose cells hold no value (all null) get ``finalize(init())``.
"""

import math

import numba as nb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
import oop.window.udaf as U
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import Sliding, agg
from oop.window.reference import window_oracle

from test_window import (PANED_KINDS, assert_paned_in_one_call_equals_wid_and_oracle,
                         assert_same_rows, matrix_table, run)


@nb.njit
def _zero():
    return 0.0


@nb.njit
def _sq(s, v):
    return s + v * v


@nb.njit
def _same(s):
    return s


@nb.njit
def _poly(s, v):
    return s * 1.000001 + v  # depends on the order the values come in


SUMSQ = agg.udaf("sumsq", _zero, _sq, lambda a, b: a + b, _same, column="val")
POLY = agg.udaf("poly", _zero, _poly, lambda a, b: a + b, _same, column="val")


@pytest.mark.parametrize("kind", PANED_KINDS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_compiled_udaf_in_one_call_equals_wid_and_oracle(kind, data):
    t = matrix_table(data, max_rows=80, max_gap=4)
    if data.draw(st.booleans()):  # some nulls: a cell may have no value at all
        v = t.column("val").to_pylist()
        t = t.set_column(2, "val", pa.array([None if i % 3 == 0 else x for i, x in enumerate(v)],
                                            pa.int64()))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    assert_paned_in_one_call_equals_wid_and_oracle(items, t, kind, [SUMSQ, agg.count()],
                                                   "the compiled UDAF")


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_order_sensitive_udaf_same_bits_as_the_per_window_path(data):
    t = data.draw(disordered_tables(max_rows=80, max_delay=10, n_keys=3, max_gap=3))
    v = np.asarray(t.column("val").to_numpy(zero_copy_only=False), np.float64) / 4
    if data.draw(st.booleans()):
        v[::5] = np.nan
    t = t.set_column(2, "val", pa.array(v))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    kind = Sliding(12, 3)
    one_call = run(items, t.schema, kind, [POLY], "paned").table
    with pytest.MonkeyPatch.context() as m:
        m.setattr(U, "udaf_windows", lambda *a, **k: None)  # force the per-window path
        import oop.window.output as A  # the output rows call it (oop.window.output)
        m.setattr(A, "udaf_windows", lambda *a, **k: None)
        per_window = run(items, t.schema, kind, [POLY], "paned").table
    key = ["key", "window_start"]
    a = one_call.sort_by([(k, "ascending") for k in key]).to_pylist()
    b = per_window.sort_by([(k, "ascending") for k in key]).to_pylist()
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x["key"] == y["key"] and x["window_start"] == y["window_start"]
        assert (x["poly_val"] == y["poly_val"]
                or (math.isnan(x["poly_val"]) and math.isnan(y["poly_val"])))


def test_cells_without_values_get_finalize_of_init():
    t = pa.table({"ts": pa.array([1, 2, 5, 9], pa.int64()), "key": [0, 0, 1, 1],
                  "val": pa.array([None, None, 3, 4], pa.int64())})
    got = run(t.to_batches(max_chunksize=2), t.schema, Sliding(6, 3), [SUMSQ, agg.count()], "paned").table
    rows = {(r["key"], r["window_start"]): r["sumsq_val"] for r in got.to_pylist()}
    assert rows[(0, 0)] == 0.0  # key 0 has rows but only null values
    assert rows[(1, 0)] == rows[(1, 3)] == 9.0 and rows[(1, 6)] == 16.0  # ts 5: 3, ts 9: 4


def test_python_udaf_folds_each_pane_once():
    """Plain-Python UDAF under Paned-WID: one ``update`` per value (the pane states are kept
    and merged into each window), not one per value and window; results == WID == oracle."""
    calls = [0]

    def update(s, v):
        calls[0] += 1
        return s + v * v

    sumsq = agg.udaf("sumsq", lambda: 0.0, update, lambda a, b: a + b, lambda s: s, column="val")
    rng = np.random.default_rng(4)
    n = 600
    ts = np.arange(n, dtype=np.int64) * 2 - rng.integers(0, 8, n)
    vals = pa.array(rng.integers(-5, 6, n), mask=rng.random(n) < 0.1)
    t = pa.table({"ts": ts, "key": rng.integers(0, 3, n), "val": vals})
    items = []
    for i, b in enumerate(t.to_batches(max_chunksize=50)):
        items.append(b)
        rest = ts[(i + 1) * 50:]
        if rest.size:
            items.append(oop.Punctuation("ts", int(rest.min())))
    kind = Sliding(40, 10)  # 4 panes per window
    paned = run(items, t.schema, kind, [sumsq, agg.count()], "paned").table
    paned_calls, calls[0] = calls[0], 0
    wid = run(items, t.schema, kind, [sumsq, agg.count()], "wid").table
    assert paned_calls == n - vals.null_count  # every non-null value folded exactly once
    assert calls[0] > 3 * paned_calls  # WID folds a value in each of its 4 windows
    assert_same_rows(paned, wid)
    assert_same_rows(paned, window_oracle(t, kind, [sumsq, agg.count()], by=["key"], time="ts",
                                          unit="ms"))
