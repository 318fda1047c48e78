"""Paned-WID holistic quantiles (median, quantile) of all windows of a punctuation in one call.

* ``paned_quantiles`` == ``paned_quantiles_ref`` (values expanded by count,
  sorted, interpolated) on random pane tables: duplicate values, NaN, codes
  missing from some panes or from every pane of a window (no value), panes
  outside the table's span, windows of different lengths (landmark-like);
* end to end: the operator's median/quantile under Paned-WID == WID == the
  from-scratch oracle, and the per-window ``Multiset.select`` path is not taken.
"""

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from oop.testing import batch_splits, exact_punctuation_feed
from oop.window import Sliding, agg
from oop.window.paned_kernels import paned_quantiles, paned_quantiles_ref
from oop.window.multiset import Multiset

from test_window import PANED_KINDS, assert_paned_in_one_call_equals_wid_and_oracle, matrix_table


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))
    rows = {}
    for _ in range(n):
        u = draw(st.integers(0, 8))
        c = draw(st.integers(0, 4))
        v = draw(st.one_of(st.integers(-4, 4).map(float), st.just(math.nan)))
        k = (u, c, v)
        if any(x == k or (x[0] == u and x[1] == c and x[2] != x[2] and v != v) for x in rows):
            continue  # one row per (unit, code, value): the table is compacted
        rows[k] = draw(st.integers(1, 3))
    out = sorted(((u, c, v, cnt) for (u, c, v), cnt in rows.items()),
                 key=lambda r: (r[0], r[1], r[2] != r[2], r[2] if r[2] == r[2] else 0))
    nw = draw(st.integers(1, 5))
    wins = []
    for _ in range(nw):
        lo = draw(st.integers(-2, 8))
        wins.append((lo, lo + draw(st.integers(1, 5)),
                     sorted(draw(st.sets(st.integers(0, 5), max_size=6)))))
    q = draw(st.sampled_from([0.5, 0.0, 1.0, 0.25, 0.9]))
    return out, wins, q


@settings(max_examples=150)
@given(tables())
def test_paned_quantiles_equals_reference(t):
    rows, wins, q = t
    unit = np.array([r[0] for r in rows], np.int64)
    code = np.array([r[1] for r in rows], np.int64)
    value = np.array([r[2] for r in rows], np.float64)
    count = np.array([r[3] for r in rows], np.int64)
    pa0 = -1
    offs = np.searchsorted(unit, np.arange(pa0, 7, dtype=np.int64)).astype(np.int64)  # span [-1, 6)
    inside = [(u, c, v, n) for u, c, v, n in rows if pa0 <= u < 6]
    plo = np.array([w[0] for w in wins], np.int64)
    phi = np.array([w[1] for w in wins], np.int64)
    cells = np.array([c for w in wins for c in w[2]], np.int64)
    cb = np.cumsum([0] + [len(w[2]) for w in wins]).astype(np.int64)
    got, present = paned_quantiles(code, value, count, pa0, offs, plo, phi, cb, cells, q)
    exp = paned_quantiles_ref(inside, wins, q)
    assert len(exp) == got.shape[0]
    for i, e in enumerate(exp):
        if e is None:
            assert present[i] == 0
        else:
            assert present[i] == 1
            assert (got[i] == e) or (got[i] != got[i] and e != e), (i, got[i], e)


def test_multiset_table_feeds_the_kernel_like_select():
    """Through a real Multiset (pending rows compacted) the kernel agrees with select()."""
    rng = np.random.default_rng(3)
    ms = Multiset(np.float64)
    for _ in range(4):
        m = 50
        ms.add(rng.integers(0, 6, m), rng.integers(0, 5, m), rng.integers(0, 7, m).astype(float))
    ms.compact()
    offs = np.searchsorted(ms.unit, np.arange(0, 7, dtype=np.int64)).astype(np.int64)
    for lo in range(0, 4):
        c, v, n = ms.select(lo, lo + 3)
        codes = np.unique(c)
        got, present = paned_quantiles(ms.code, ms.value, ms.count, 0, offs, np.array([lo]),
                                       np.array([lo + 3]), np.array([0, codes.shape[0]]), codes, 0.5)
        for i, cc in enumerate(codes):
            vals = np.repeat(v[c == cc], n[c == cc])
            assert present[i] and got[i] == np.quantile(vals, 0.5)


@pytest.mark.parametrize("kind", PANED_KINDS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_paned_median_in_one_call_equals_wid_and_oracle(kind, data):
    t = matrix_table(data, max_rows=70, max_gap=3)
    if data.draw(st.booleans()):
        t = t.set_column(2, "val", t.column("val").cast(pa.float64()))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    aggs = [agg.median("val"), agg.quantile("val", 0.25), agg.count()]
    assert_paned_in_one_call_equals_wid_and_oracle(items, t, kind, aggs, "medians")
