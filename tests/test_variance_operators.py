"""One variance: every operator's var/std == a from-scratch ``numpy.var`` over the same windows.

The operators: the WID window (``method="wid"``, the ring's shifted sums), Paned-WID,
AdaptWID (eager, lazy, adaptive: ``(n, mean, M2)`` of :mod:`oop.aggregates.moments`),
session windows (Chan's merge of per-tuple partials) and the in-order buffering window
(plain and differential, 004 Eq. 6.4). The data: disordered streams with exact punctuation
(``BoundedDelay``), values ``offset + spread * u`` with a large offset and a small spread
(ill-conditioned: ``1e9 + 1e-3 * u``) or all equal (the variance must be exactly 0, also
per key with distinct constants). ``count`` rides along so every tuple is accounted for.
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings, strategies as st

import oop
from oop.aggregates.moments import (mom_merge, mom_merge_segments, mom_reduce, mom_update,
                                    shift_values, variance)
from oop.iop_baseline import BufferingWindow
from oop.testing import batch_splits, disordered_tables, stop_and_resume
from oop.window import Session, agg
from oop.window.kinds import Sliding, Tumbling

AGGS = [agg.count(), agg.var("val"), agg.std("val")]
DELAY = 10
#: the relative tolerance of tests/test_adapt_oracle.py; absolute: REL * (max - min)**2
REL = 1e-9
EPS = 2.0 ** -52  # float64's machine epsilon


# ---- the data --------------------------------------------------------------------------
@st.composite
def valued_tables(draw: st.DrawFn) -> tuple[pa.Table, bool]:
    """A disordered ``(ts, key, val)`` table and whether its values are all equal per key;
    float64 values lie near 0, 1e9 or -3e7, int64 values near 0 or an epoch in ns."""
    t = draw(disordered_tables(max_rows=50, n_keys=3, max_delay=DELAY))
    n = t.num_rows
    keys = t.column("key").to_numpy()
    floats = draw(st.booleans())
    if floats:
        offset: Any = draw(st.sampled_from([0.0, 1e9, -3e7]))
        c = np.asarray(draw(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=3)))
        spread = draw(st.sampled_from([1e-3, 1.0, 1e3]))
        # u in [-1, 1] on a grid of 1e-6 (no squares in float64's subnormal range)
        u = spread * np.asarray(draw(st.lists(st.integers(-10**6, 10**6), min_size=n,
                                              max_size=n)), np.float64) / 1e6
    else:  # int64 values near an epoch in ns
        offset = draw(st.sampled_from([0, 1_700_000_000_000_000_000]))
        c = np.asarray(draw(st.lists(st.integers(-1000, 1000), min_size=3, max_size=3)))
        u = np.asarray(draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n)), np.int64)
    equal = draw(st.booleans())
    if equal:  # one constant, or one per key
        u = np.full(n, c[0]) if draw(st.booleans()) else c[keys]
    vals = offset + u.astype(np.float64 if floats else np.int64)
    t = t.set_column(t.schema.get_field_index("val"), "val", pa.array(vals))
    return t, equal


# ---- the from-scratch oracle -----------------------------------------------------------
def _cells_fixed(t: pa.Table, rng: int, slide: int) -> dict[tuple, list]:
    """(key, start, end) -> values, windows ``[k*slide, k*slide + rng)`` holding the tuple."""
    cells: dict[tuple, list] = defaultdict(list)
    for r in t.to_pylist():
        ts = r["ts"]
        k = (ts - rng) // slide + 1  # the first window whose end is past ts
        while k * slide <= ts:
            cells[(r["key"], k * slide, k * slide + rng)].append(r["val"])
            k += 1
    return dict(cells)


def _cells_session(t: pa.Table, gap: int) -> dict[tuple, list]:
    """(key, first time, last time + gap) -> values of each session (steps < gap)."""
    by_key: dict[Any, list] = defaultdict(list)
    for r in t.to_pylist():
        by_key[r["key"]].append((r["ts"], r["val"]))
    cells = {}
    for k, rows in by_key.items():
        rows.sort(key=lambda p: p[0])
        run = [rows[0]]
        for p in rows[1:] + [None]:  # type: ignore[list-item]
            if p is not None and p[0] - run[-1][0] < gap:
                run.append(p)
                continue
            cells[(k, run[0][0], run[-1][0] + gap)] = [v for _, v in run]
            if p is not None:
                run = [p]
    return cells


def exact_var(x: list) -> float:
    """The sample variance of the float64 values in exact arithmetic, rounded once.
    (``numpy.var`` of the raw values is not this oracle: its float64 mean near ``1e9``
    carries ``ulp(1e9) ~ 1e-7``, off by up to 1e-4 relative for a spread of 1e-3.)"""
    f = [Fraction(v) for v in x]
    m = sum(f) / len(f)
    return float(sum((v - m) ** 2 for v in f) / (len(f) - 1))


def _pane_residue(t: pa.Table) -> float:
    """An absolute bound on what Paned-WID's add-new/subtract-old pane sums leave of earlier
    panes' rounding in a window's shifted sums: ``n * spread**2`` of the whole table (the
    shift is one of its values), times REL."""
    v = t.column("val").to_numpy()
    return 16 * REL * len(v) * float(v.max() - v.min()) ** 2 if len(v) else 0.0


def _check(got: pa.Table, cells: dict[tuple, list], equal: bool, n_in: int,
           windows_per_tuple: Callable[[int], int] | None, floor: float = 0.0) -> None:
    """``got``'s count/var/std per cell against the exact ones; ``floor``: an absolute error
    allowed beside the spread's rounding (Paned-WID's differential sums, see below)."""
    rows = {(r["key"], r["window_start"], r["window_end"]): r for r in got.to_pylist()}
    assert set(rows) == set(cells)
    # the shift is one value of the column, shared by every key: a cell's sums of squares of
    # ``x - shift`` carry ~eps * n * (x - shift)**2 of rounding, which the cell's own spread
    # does not bound when its values lie far from the shift relative to that spread (values
    # 0 and 1e-9 of one key beside -1.9e-6 of another: var 5e-19 off by 2e-27)
    col = [v for xs in cells.values() for v in xs if isinstance(v, float) and math.isfinite(v)]
    reach = float(max(col) - min(col)) ** 2 if col else 0.0
    total = 0
    for c, x in cells.items():
        r = rows[c]
        assert r["count"] == len(x)
        total += len(x)
        if len(x) < 2:
            assert r["var_val"] is None and r["std_val"] is None
            continue
        want = exact_var(x)
        if equal:
            assert r["var_val"] == 0.0 and r["std_val"] == 0.0, (c, x, r)
            continue
        shift_err = 64 * EPS * len(x) / (len(x) - 1) * reach
        err = max(REL * float(max(x) - min(x)) ** 2, floor, shift_err)  # rounding of the spread
        assert math.isclose(r["var_val"], want, rel_tol=REL, abs_tol=err), (c, r, want)
        assert math.isclose(r["std_val"], math.sqrt(want), rel_tol=REL, abs_tol=math.sqrt(err))
    if windows_per_tuple is not None:
        assert total == windows_per_tuple(n_in)  # every tuple in each of its windows


# ---- the operators ---------------------------------------------------------------------
def _window(kind: Any, method: str) -> Callable[[oop.Stream], oop.Stream]:
    return lambda s: s.window(kind, AGGS, by="key", method=method)


def _adapt(kind: Any, th: str) -> Callable[[oop.Stream], oop.Stream]:
    return lambda s: s.adaptive_window(kind, AGGS, by="key", thresholds=th)


def _run(t: pa.Table, batches: list, plan: Callable[[oop.Stream], oop.Stream]) -> pa.Table:
    s = oop.from_batches(batches, time="ts", punctuation=oop.BoundedDelay(DELAY), schema=t.schema)
    return plan(s).run().table


KINDS = [(Tumbling(10), 10, 10), (Sliding(20, 5), 20, 5)]

def _buffering(kind: Any, diff: bool, t: pa.Table) -> pa.Table:
    ordered = t.take(np.argsort(t.column("ts").to_numpy(), kind="stable"))
    op = BufferingWindow(kind, AGGS, ("key",), differential=diff)
    return oop.from_batches(ordered.to_batches(max_chunksize=7), time="ts",
                            punctuation=oop.Ordered(), schema=t.schema).via(op).run().table


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_window_operator_gives_the_exact_var(data: st.DataObject) -> None:
    t, equal = data.draw(valued_tables())
    kind, rng, slide = data.draw(st.sampled_from(KINDS))
    batches = data.draw(batch_splits(t))
    cells = _cells_fixed(t, rng, slide)
    per = rng // slide
    # (n, mean, M2) per window (Welford / Chan): within the window's own spread
    for th in ("eager", "lazy", "adaptive"):
        _check(_run(t, batches, _adapt(kind, th)), cells, equal, t.num_rows, lambda n: n * per)
    # Shifted sums (the ring of WID and Paned-WID, the buffering window) shift by one value
    # of the column, not of the window, so their rounding scales with the column's spread;
    # differential ones (Paned-WID, the differential buffering window: add the entering
    # pane, subtract the leaving one) also keep a residue of earlier panes' rounding (see
    # test_shifted_sum_lane_beside_sum_and_mean). Found: 1.2e-32 for a window of two 0.0
    # after one of 4e-9 and 1.4e-8; WID 4e-8 relative for a spread of 1e-10 far from the
    # shift. Equal values give exactly 0 wherever a window's sums are its own: WID, the
    # plain buffering window, and tumbling windows of the differential ones (Paned-WID
    # recomputes windows of <= 2 panes; the differential buffering window restarts a group
    # whose rows all expired). A sliding window that stepped keeps earlier panes' rounding
    # even over equal values (found: 3.6e-11 for two 0.0 after 27 0.0, shifted by 76.7).
    sliding = rng != slide
    for got, stepped in ((_run(t, batches, _window(kind, "wid")), False),
                         (_run(t, batches, _window(kind, "paned")), sliding),
                         (_buffering(kind, False, t), False), (_buffering(kind, True, t), sliding)):
        _check(got, cells, equal and not stepped, t.num_rows, lambda n: n * per,
               _pane_residue(t))


def test_equal_values_after_a_larger_window_give_exactly_zero() -> None:
    """The example Hypothesis found above: key 0 holds 27 zeros in window [0, 10) and two in
    [10, 20), the shift is key 2's 76.7. The differential buffering window subtracted the 27
    expired squares one by one and left 3.6e-11 (std 6e-6) in the next window's variance;
    Paned-WID stepped every other tumbling window. Now every operator gives exactly 0."""
    ts = [0] * 25 + [1, 4, 7, 10, 10, 10, 10]
    key = [2] + [0] * 28 + [0, 1, 1]
    vals = [76.67672455275147] + [0.0] * 31
    t = pa.table({"ts": pa.array(ts, pa.int64()), "key": pa.array(key, pa.int64()),
                  "val": pa.array(vals)})
    batches = [t.slice(0, 1), t.slice(1, 15), t.slice(16)]
    batches = [b.to_batches()[0] for b in batches]
    kind = Tumbling(10)
    cells = _cells_fixed(t, 10, 10)
    for got in (_run(t, batches, _window(kind, "wid")), _run(t, batches, _window(kind, "paned")),
                _buffering(kind, False, t), _buffering(kind, True, t),
                _run(t, batches, _adapt(kind, "adaptive"))):
        _check(got, cells, True, t.num_rows, lambda n: n)
        assert got.filter(pc.equal(got.column("key"), 0)).column("var_val").to_pylist() \
            == [0.0, 0.0]


def test_sum_lanes_of_floats_far_from_zero() -> None:
    """The ring's former gap (found by the test above): 19 x 1e9 and one 1e9 + 1e-3 in one
    window. With an unshifted float sum lane the ring was off by 6e-5 relative; var/std now
    read their own shifted sum lane (oop.window.values.LaneInfo.shifted)."""
    x = np.full(20, 1e9)
    x[-1] += 1e-3
    t = pa.table({"ts": np.arange(20) // 3, "key": np.zeros(20, np.int64), "val": x})
    cells = _cells_fixed(t, 10, 10)
    _check(_run(t, t.to_batches(max_chunksize=4), _adapt(Tumbling(10), "eager")), cells, False,
           20, None)
    _check(_run(t, t.to_batches(max_chunksize=4), _window(Tumbling(10), "wid")), cells, False,
           20, None)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_session_windows_give_the_exact_var(data: st.DataObject) -> None:
    t, equal = data.draw(valued_tables())
    gap = data.draw(st.integers(1, 8))
    got = _run(t, data.draw(batch_splits(t)), lambda s: s.window(Session(gap), AGGS, by="key"))
    _check(got, _cells_session(t, gap), equal, t.num_rows, lambda n: n)


# ---- the algebra itself ----------------------------------------------------------------
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=40),
       st.integers(0, 40), st.sampled_from([0.0, 1e9, -3e7]), st.sampled_from([1e-3, 1.0]))
def test_update_merge_reduce_agree(u: list, cut: int, offset: float, spread: float) -> None:
    """On shifted data: merge(reduce(A), reduce(B)) == the segment fold == Welford over A + B
    == the exact variance, for any split A | B."""
    x = offset + spread * np.asarray(u)
    y = shift_values(x, float(x[0]))
    cut = min(cut, len(x))
    ok = np.ones(len(x), bool)
    n, mean, m2 = mom_reduce(y, ok, np.array([0, cut]) if 0 < cut < len(x) else np.array([0]))
    merged = mom_merge(n[0], mean[0], m2[0], n[-1], mean[-1], m2[-1]) if len(n) == 2 else (
        n[0], mean[0], m2[0])
    seg = mom_merge_segments(n, mean, m2, np.array([0, len(n)]))
    w = (0, 0.0, 0.0)
    for v in y:
        w = mom_update(w[0], w[1], w[2], v)
    want = exact_var(x.tolist())
    # the range's square, plus a floor for subnormal data (range**2 underflows to 0 while
    # the variance of values ~1e-320 still differs by an ulp: 1e-323 vs 5e-324)
    err = REL * float(x.max() - x.min()) ** 2 + 1e-300
    for got_n, got_m2 in ((merged[0], merged[2]), (seg[0][0], seg[2][0]), (w[0], w[2])):
        assert got_n == len(x)
        assert math.isclose(variance(np.array([got_n]), np.array([got_m2]))[0], want,
                            rel_tol=REL, abs_tol=err)


@given(st.floats(-1e15, 1e15, allow_nan=False), st.integers(1, 30), st.integers(0, 30))
def test_equal_values_give_exactly_zero(c: float, a: int, b: int) -> None:
    x = np.full(a + b, c)
    n, mean, m2 = mom_reduce(x, np.ones(len(x), bool), np.array([0, a]) if b else np.array([0]))
    if b:
        n, mean, m2 = (np.array([v]) for v in mom_merge(n[0], mean[0], m2[0], n[1], mean[1], m2[1]))
    w = (0, 0.0, 0.0)
    for v in x:
        w = mom_update(w[0], w[1], w[2], v)
    assert m2[0] == 0.0 and w[2] == 0.0


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_shifted_sum_lane_beside_sum_and_mean(data: st.DataObject) -> None:
    """var/std of a float column read their own shifted sum lane beside the unshifted one
    ``sum``/``mean`` of the same column read: var/std exact, ``sum`` equal to the same
    window operator's without var/std (the same lane), ``mean`` close to the exact mean -- in
    WID, Paned-WID, the threaded window, late='update', and a run stopped and resumed from
    its checkpoint.

    Paned-WID adds the new pane and subtracts the old one (004 Eq. 6.4) even for tumbling
    windows, so a window's shifted sums keep a residue of the previous pane's rounding
    (``~eps`` of its ``(x - K)**2``, below ``eps * n * spread**2`` of the whole table): a
    window of equal values after a spread one is not exactly 0 there."""
    t, equal = data.draw(valued_tables())
    batches = data.draw(batch_splits(t))
    floats = pa.types.is_floating(t.schema.field("val").type)
    sums = [agg.sum("val")] if floats else []  # an int64 sum of epoch ns would overflow
    aggs = AGGS + sums + [agg.mean("val")]
    cells = _cells_fixed(t, 10, 10)
    floor = _pane_residue(t)
    kws: list[dict] = [{"method": "wid"}, {"method": "paned"}, {"threads": 2},
                       {"late": "update"}, {}]
    outs = []
    for kw in kws:
        plain = _run(t, batches, lambda s: s.window(Tumbling(10), [agg.count()] + sums,
                                                    by="key", **kw))
        outs.append((_run(t, batches, lambda s: s.window(Tumbling(10), aggs, by="key", **kw)),
                     plain, kw.get("method") == "wid"))

    def stream() -> oop.Stream:
        s = oop.from_batches(batches, time="ts", punctuation=oop.BoundedDelay(DELAY), schema=t.schema)
        return s.window(Tumbling(10), aggs, by="key")
    full, resumed = stop_and_resume(stream, data.draw(st.integers(1, 4)))
    outs += [(r.table, outs[-1][1], False) for r in (full, resumed) if r is not None]
    for got, plain, exact in outs:
        _check(got.select(["key", "window_start", "window_end", "count", "var_val", "std_val"]),
               cells, equal, t.num_rows, lambda n: n, 0.0 if exact else floor)
        rows = got.to_pylist()
        assert ({(r["key"], r["window_start"]): r.get("sum_val") for r in rows}
                == {(r["key"], r["window_start"]): r.get("sum_val") for r in plain.to_pylist()})
        for r in rows:
            x = cells[(r["key"], r["window_start"], r["window_end"])]
            exact_mean = sum(Fraction(v) for v in x) / len(x)
            assert math.isclose(r["mean_val"], float(exact_mean), rel_tol=1e-12, abs_tol=1e-12)
