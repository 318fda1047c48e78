"""Windows downstream of OA-Join on S1.ts, on max/min of the two times, closed by punctuation.

Plan under test::

    S0 --\\
          JOIN (band | tumbling, punctuation individual/joint/both)
    S1 --/    -> derive_time(t_max = max(ts, ts_right)), derive_time(t_min = min(...))
              -> window(kind, aggs, by=key, time = ts | ts_right | t_max | t_min)

Properties (DESIGN §8):

* result == window oracle (:func:`oop.window.reference.window_oracle`) over the
  nested-loop join (:func:`oop.join.nested_loop_join`), for random disordered
  inputs cut into random batches with valid, sometimes lagging punctuation;
* the derived punctuation is valid (every later join row obeys it) and is the
  tightest bound the seen punctuation allows (brute-force coverage,
  :func:`oop.operators.derive_time.bound_reference`);
* windows are closed by punctuation, not by the final flush: every window whose
  end is <= the largest punctuation the join + derive stage produced on the
  window's attribute was emitted before the window's last punctuation, and in
  the scenario test some rows do come out before it;
* where no bound exists (min of the two times, or S1.ts, under joint
  punctuation only) the window emits nothing before the end -- and is still right.

Timeline of the min rule (individual punctuation, band (0, 0))::

    S0.ts punct:   P(ts, 10) ................................
    S1.ts punct:   ..............P(ts_right, 6) .............
    t_min punct:   (none)        P(t_min, 6) = min(10, 6)
    t_max punct:   P(t_max, 10)  (no advance: max(10, 6) = 10)
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.errors import ConfigError
from oop.join import WindowPredicate, nested_loop_join
from oop.operators.base import StreamInfo
from oop.operators.derive_time import (DeriveTime, DerivedBound, bound_reference,
                                       derive_reference)
from oop.stream.elements import INT64_MIN, JointPunctuation, Punctuation
from oop.testing import (band_disordered_pair, batch_splits, check_punctuation_respected,
                         disordered_tables, exact_punctuation_feed)
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling
from oop.window.reference import canonical, window_oracle

TIMES = ("ts", "ts_right", "t_max", "t_min")
MODES = ("individual", "joint", "both")
AGGS = (agg.count(), agg.sum("val"), agg.max("val_right"))


def _joined(L: pa.Table, R: pa.Table, pred: WindowPredicate) -> pa.Table:
    """The nested-loop join as a table, with the derived times computed tuple at a time."""
    bag = nested_loop_join(L, R, pred, [("key", "key")], "ts", "ts")
    names = ["ts", "key", "val", "ts_right", "key_right", "val_right"]
    rows = [dict(zip(names, r)) for r, m in bag.items() for _ in range(m)]
    for fn in ("max", "min"):
        col = derive_reference(rows, fn, ["ts", "ts_right"])
        for r, v in zip(rows, col):
            r["t_" + fn] = v
    schema = pa.schema([(n, pa.int64()) for n in names + ["t_max", "t_min"]])
    return pa.Table.from_pylist(rows, schema=schema)


def _plan(left, right, *, band, tumbling, mode):
    s0 = oop.from_batches(left, time="ts", punctuation=oop.External(), name="S0") \
        if isinstance(left, list) else \
        oop.from_arrow(left, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25, name="S0")
    s1 = oop.from_batches(right, time="ts", punctuation=oop.External(), name="S1") \
        if isinstance(right, list) else \
        oop.from_arrow(right, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25, name="S1")
    j = s0.join(s1, on="key", band=band, tumbling=tumbling, punctuation=mode)
    return (j.derive_time("t_max", "max", ["ts", "ts_right"], name="dmax")
             .derive_time("t_min", "min", ["ts", "ts_right"], name="dmin"))


def _last_bound(res, attr: str) -> int | None:
    vals = [p.value for _, p in res.punctuations if isinstance(p, Punctuation) and p.attr == attr]
    return max(vals) if vals else None


def _check_closed_by_punctuation(win_res, bound: int | None) -> int:
    """Windows with end <= bound came out before the window's last punctuation.

    Returns the number of rows emitted before that punctuation (0: all at the flush).
    """
    t = win_res.table
    ends = t.column("window_end").to_pylist()
    early = max((n for n, p in win_res.punctuations if isinstance(p, Punctuation)), default=0)
    if bound is not None:
        due = sum(1 for e in ends if e <= bound)
        got = sum(1 for e in ends[:early] if e <= bound)
        assert got == due, f"{due - got} window rows with end <= {bound} waited for the flush"
    return early


@st.composite
def _feeds(draw):
    """Two disordered inputs over overlapping event time (S1 shifted onto S0's start, plus a
    small offset; a shift keeps the disorder bound), each with valid punctuation."""
    out = []
    start = None
    for _ in range(2):
        t = draw(disordered_tables(max_rows=35, n_keys=3, max_delay=8, max_gap=3))
        lo = pc.min(t.column("ts")).as_py()
        if start is None:
            start = lo
        elif lo is not None:
            shift = start - lo + draw(st.integers(-10, 10))
            t = t.set_column(0, "ts", pc.add(t.column("ts"), shift))
        out.append((t, draw(exact_punctuation_feed(draw(batch_splits(t, max_batch=10))))))
    return out


@given(feeds=_feeds(), time=st.sampled_from(TIMES), mode=st.sampled_from(MODES),
       r0=st.integers(0, 8), r1=st.integers(0, 8), tumbling=st.booleans(),
       size=st.integers(2, 12), sliding=st.booleans(),
       method=st.sampled_from(["auto", "wid", "paned"]))
def test_window_on_join_times_equals_oracle(feeds, time, mode, r0, r1, tumbling, size, sliding,
                                            method):
    (L, Lfeed), (R, Rfeed) = feeds
    band, tsize = (None, size + 1) if tumbling else ((r0, r1), None)
    pred = WindowPredicate.tumbling(size + 1) if tumbling else WindowPredicate.band(r0, r1)
    kind = Sliding(2 * size, size) if sliding else Tumbling(size)
    stage = _plan(Lfeed, Rfeed, band=band, tumbling=tsize, mode=mode)
    mid = stage.run()
    expected_join = _joined(L, R, pred)
    # the join + derive stage: right rows, valid punctuation on every time attribute
    assert Counter(canonical(mid.table)) == Counter(canonical(expected_join))
    for attr in TIMES:
        check_punctuation_respected(mid.table, mid.punctuations, attr=attr)
    res = stage.window(kind, AGGS, by="key", method=method, time=time).run()
    want = window_oracle(expected_join, kind, AGGS, by="key", time=time)
    assert canonical(res.table) == canonical(want)
    check_punctuation_respected(res.table, res.punctuations, attr="window_end")
    _check_closed_by_punctuation(res, _last_bound(mid, time))
    # nothing late at the window: the derived punctuation never contradicted a row
    assert res.late_total == 0


def _tables(seed: int, n: int = 400):
    return band_disordered_pair(seed, n, span=2000, keys=4)


# (mode, time) pairs with a bound before end of input: S0.ts and S1.ts need their individual
# punctuation, the min needs both of them, the max either of them or a joint one
_HAS_BOUND = {
    ("individual", "ts"), ("individual", "ts_right"), ("individual", "t_max"),
    ("individual", "t_min"), ("both", "ts"), ("both", "ts_right"), ("both", "t_max"),
    ("both", "t_min"), ("joint", "t_max"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("time", TIMES)
def test_windows_close_mid_stream(mode, time):
    L, R = _tables(7)
    stage = _plan(L, R, band=(15, 5), tumbling=None, mode=mode)
    mid = stage.run()
    res = stage.window(Tumbling(100), AGGS, by="key", time=time).run()
    want = window_oracle(_joined(L, R, WindowPredicate.band(15, 5)), Tumbling(100), AGGS,
                         by="key", time=time)
    assert canonical(res.table) == canonical(want)
    bound = _last_bound(mid, time)
    early = _check_closed_by_punctuation(res, bound)
    if (mode, time) in _HAS_BOUND:
        assert bound is not None
        assert 0 < early < res.table.num_rows, "windows were not closed by punctuation mid-stream"
    else:  # joint only: no valid bound on S0.ts, S1.ts alone or on the min
        assert bound is None and early == 0


def test_joint_punctuation_bounds_the_max_sooner_than_individual():
    """004 §7.2: a box finishes before the slab. Band (300, 300), both inputs punctuated at
    1000: individual punctuation gives P(ts, 700), P(ts_right, 700) -> P(t_max, 700); the
    joint (1000, 1000) gives P(t_max, 1000) at once.

        S0: [ts 900..999]  P(ts, 1000)  [ts 1000..1099]
        S1: [ts 900..999]  P(ts, 1000)  [ts 1000..1099]
    """
    def feed():
        b = lambda lo: pa.record_batch({"ts": np.arange(lo, lo + 100, dtype=np.int64),
                                        "key": np.zeros(100, np.int64),
                                        "val": np.ones(100, np.int64)})
        return [b(900), Punctuation("ts", 1000), b(1000)]

    first = {}
    for mode in ("individual", "joint"):
        res = _plan(feed(), feed(), band=(300, 300), tumbling=None, mode=mode).run()
        vals = [p.value for _, p in res.punctuations
                if isinstance(p, Punctuation) and p.attr == "t_max"]
        first[mode] = vals[0]
        check_punctuation_respected(res.table, res.punctuations, attr="t_max")
    assert first == {"individual": 700, "joint": 1000}


@pytest.mark.parametrize("time", ["ts_right", "t_min"])
def test_slide_by_tuple_window_on_join_time(time):
    """The bins operator (004 §6.1.4) reads ``time=`` too. Its windows depend on arrival
    order (every n-th tuple), so the oracle runs over the join output in arrival order."""
    from oop.window.kinds import SlideByTuple

    L, R = _tables(3, n=200)
    stage = _plan(L, R, band=(10, 10), tumbling=None, mode="individual")
    mid = stage.run()
    kind = SlideByTuple(50, 3)
    res = stage.window(kind, agg.count(), time=time).run()
    assert canonical(res.table) == canonical(window_oracle(mid.table, kind, agg.count(), time=time))
    assert any(0 < n < res.table.num_rows for n, _ in res.punctuations)


# ---- the bound rule itself ---------------------------------------------------------------

_punct = st.one_of(
    st.builds(Punctuation, st.sampled_from(["a", "b", "c"]), st.integers(0, 12)),
    st.builds(lambda x, y: JointPunctuation((("a", x), ("b", y))), st.integers(0, 12),
              st.integers(0, 12)),
    st.builds(lambda x, y: JointPunctuation((("a", x), ("c", y))), st.integers(0, 12),
              st.integers(0, 12)),
)


@given(ps=st.lists(_punct, max_size=6), fn=st.sampled_from(["max", "min"]))
def test_derived_bound_is_tightest_valid_bound(ps, fn):
    """DerivedBound == brute-force coverage of attribute space (sound and tight)."""
    logic = DerivedBound(fn, ["a", "b"])
    emitted = []
    for i, p in enumerate(ps):
        c = logic.observe(p)
        logic._check()
        ref = bound_reference(ps[: i + 1], fn, ["a", "b"], lo=-4, hi=20)
        assert (logic.bound if logic.bound > INT64_MIN else None) == ref
        if c is not None:
            assert not emitted or c > emitted[-1]
            emitted.append(c)


def test_min_rule_scenario():
    """The timeline of the module docstring."""
    dmin, dmax = DerivedBound("min", ["ts", "ts_right"]), DerivedBound("max", ["ts", "ts_right"])
    assert dmin.observe(Punctuation("ts", 10)) is None
    assert dmax.observe(Punctuation("ts", 10)) == 10
    assert dmin.observe(Punctuation("ts_right", 6)) == 6
    assert dmax.observe(Punctuation("ts_right", 6)) is None
    # a joint punctuation never bounds the min, and bounds the max by its smaller corner
    assert dmin.observe(JointPunctuation((("ts", 50), ("ts_right", 40)))) is None
    assert dmax.observe(JointPunctuation((("ts", 50), ("ts_right", 40)))) == 40


# ---- operator details -------------------------------------------------------------------

def _info(types=("int64", "int64")):
    fields = [("a", getattr(pa, types[0])()), ("b", getattr(pa, types[1])()),
              ("v", pa.int64())]
    return StreamInfo("s", pa.schema(fields), {"a": "ms", "b": "ms"}, "a")


def test_derive_nulls_propagate_and_reference_agrees():
    op = DeriveTime("t", "min", ["a", "b"])
    op.open([_info()])
    b = pa.record_batch({"a": pa.array([1, None, 5], pa.int64()),
                         "b": pa.array([3, 2, None], pa.int64()), "v": [0, 0, 0]})
    got = op.on_batch(b)[0].column("t").to_pylist()
    assert got == derive_reference(b.to_pylist(), "min", ["a", "b"]) == [1, None, None]


def test_derive_timestamp_columns_keep_their_type():
    ts = pa.timestamp("ms")
    info = StreamInfo("s", pa.schema([("a", ts), ("b", ts)]), {"a": "ms", "b": "ms"}, "a")
    op = DeriveTime("t", "max", ["a", "b"], primary=True)
    out = op.open([info])
    assert out.time == "t" and out.schema.field("t").type == ts
    b = pa.record_batch({"a": pa.array([1, 9], pa.int64()).view(ts),
                         "b": pa.array([4, 2], pa.int64()).view(ts)})
    assert op.on_batch(b)[0].column("t").cast(pa.int64()).to_pylist() == [4, 9]


def test_derive_snapshot_restore():
    op = DeriveTime("t", "min", ["a", "b"])
    op.open([_info()])
    op.on_punctuation(Punctuation("a", 5))
    snap = op.snapshot()
    op2 = op.fresh()
    op2.open([_info()])
    op2.restore(snap)
    assert op2.on_punctuation(Punctuation("b", 7)) == [Punctuation("b", 7), Punctuation("t", 5)]
    op2._check()


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="use 'max' or 'min'"):
        DeriveTime("t", "sum", ["a", "b"])
    with pytest.raises(ConfigError, match="at least two"):
        DeriveTime("t", "max", ["a"])
    with pytest.raises(ConfigError, match="overwrite"):
        DeriveTime("a", "max", ["a", "b"])
    with pytest.raises(ConfigError, match="not progressing attributes"):
        DeriveTime("t", "max", ["a", "v"]).open([_info()])
    with pytest.raises(ConfigError, match="one unit and type"):
        DeriveTime("t", "max", ["a", "b"]).open(
            [StreamInfo("s", pa.schema([("a", pa.int64()), ("b", pa.int64())]),
                        {"a": "ms", "b": "s"}, "a")])
    L, R = _tables(1, n=20)
    j = oop.from_arrow(L, time="ts").join(oop.from_arrow(R, time="ts"), on="key", band=(1, 1))
    with pytest.raises(ConfigError, match=r"time='val' is not a progressing attribute.*ts_right"):
        j.window(Tumbling(10), agg.count(), time="val").run()
