"""From-scratch oracle for AdaptWID tests: windows by ``extent()``, aggregates by the scalar algebra.

Independent of ``kind.wids()`` and of every AdaptWID structure: for each tuple
the windows holding it are found by testing ``start <= t < end`` of
``kind.extent(w)`` on a generous candidate range, and each (group, window)
cell folds its tuples with :meth:`Agg.update` (the tuple-at-a-time reference
of :mod:`oop.window.aggregates`).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import pyarrow as pa


def windows_of(kind: Any, t: int, first_open: int | None = None) -> list[int]:
    s, r, o = kind.s, kind.r, kind.o
    base = (t - o) // s
    out = []
    for w in range(base - 3, base + r // s + 3):
        a, b = kind.extent(w)
        if a <= t < b and (first_open is None or w >= first_open):
            out.append(w)
    return out


def oracle(rows: Iterable[dict], kind: Any, aggs: Sequence[Any], by: Sequence[str] = ("key",),
           time: str = "ts", min_wid: dict[int, int] | None = None) -> dict[tuple, tuple]:
    """``{(key..., window_start, window_end): (agg values...)}``.

    ``min_wid`` (row index -> first admissible window id) models tuples that
    arrived when some of their windows were already closed.
    """
    cells: dict[tuple, list] = {}
    for i, r in enumerate(rows):
        fo = None if min_wid is None else min_wid.get(i)
        for w in windows_of(kind, r[time], fo):
            key = tuple(r[c] for c in by) + kind.extent(w)
            st = cells.get(key)
            if st is None:
                st = cells[key] = [a.init() for a in aggs]
            for j, a in enumerate(aggs):
                v = None if a.fn == "count" else r[a.column]
                st[j] = a.update(st[j], v, r[time])
    return {k: tuple(a.finalize(s) for a, s in zip(aggs, st)) for k, st in cells.items()}


def result_cells(table: pa.Table, aggs: Sequence[Any], by: Sequence[str] = ("key",)) -> dict:
    out = {}
    names = [a.name for a in aggs]
    for r in table.to_pylist():
        key = tuple(r[c] for c in by) + (r["window_start"], r["window_end"])
        assert key not in out, f"duplicate output row for {key}"
        out[key] = tuple(r[n] for n in names)
    return out


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def assert_same_cells(got: dict, exp: dict) -> None:
    assert set(got) == set(exp), (
        f"missing {sorted(set(exp) - set(got))[:5]} extra {sorted(set(got) - set(exp))[:5]}")
    for k in exp:
        for x, y in zip(got[k], exp[k]):
            assert close(x, y), (k, got[k], exp[k])


# ---- the oracle's own check: extent()-based membership == kind.wids() ----------------------
from hypothesis import given, strategies as st  # noqa: E402
import numpy as np  # noqa: E402

from oop.window.kinds import Sliding, Tumbling  # noqa: E402


@given(st.integers(1, 6).flatmap(lambda s: st.builds(Sliding, st.integers(s, 4 * s), st.just(s),
                                                     st.integers(-5, 5))) |
       st.builds(Tumbling, st.integers(1, 9), st.integers(-5, 5)),
       st.lists(st.integers(-50, 50), max_size=20))
def test_oracle_membership_equals_wids(kind, ts):
    lo, hi = kind.wids(np.asarray(ts, np.int64))
    for t, a, b in zip(ts, lo.tolist(), hi.tolist()):
        assert windows_of(kind, t) == list(range(a, b))
