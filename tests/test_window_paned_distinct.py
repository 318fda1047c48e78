"""Paned-WID count-distinct and heavy hitters: every window of a punctuation in one call.

* ``paned_distinct`` == ``paned_distinct_ref`` (distinct values per cell, from
  scratch) and ``paned_heavy`` == ``paned_heavy_ref`` (top-k values by count,
  ties by a value order unrelated to the codes) on random pane tables and
  ascending windows that overlap, jump ahead (no overlap) or grow
  (landmark-like), split over two calls that carry the running state, with
  the table regrown from a tiny start; the table then holds exactly the last
  window's multiplicities and the per-code distinct counts;
* through a real :class:`Multiset`: a state whose leaving panes were purged
  is not continued (it is rebuilt), and the result still equals ``select()``;
* end to end: the operator's ``distinct`` and ``heavy_hitters`` under
  Paned-WID == WID == the from-scratch oracle (int, float and string values,
  nulls, gaps), the per-window ``Multiset.select`` path is not taken, a
  snapshot/restore mid-stream gives the same rows as the uninterrupted run,
  and on an ordinary stream the state is carried across punctuations.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.testing import batch_splits, exact_punctuation_feed
from oop.window import Sliding, agg
from oop.window.paned import PaneCombiner
from oop.window.paned_kernels import (paned_distinct, paned_distinct_ref, paned_heavy,
                                      paned_heavy_ref)
from oop.window.reference import window_oracle
from oop.window.multiset import Multiset
from oop.window.values import LaneInfo

from test_window import (PANED_KINDS, assert_paned_in_one_call_equals_wid_and_oracle,
                         assert_same_rows, matrix_table, run)


@st.composite
def tables(draw):
    rows = {}
    for _ in range(draw(st.integers(0, 60))):
        rows[(draw(st.integers(0, 9)), draw(st.integers(0, 4)), draw(st.integers(0, 5)))] = \
            draw(st.integers(1, 3))
    out = sorted((u, c, v, n) for (u, c, v), n in rows.items())
    wins, lo, hi = [], draw(st.integers(-2, 3)), 0
    hi = lo + draw(st.integers(1, 4))
    for _ in range(draw(st.integers(1, 7))):
        wins.append((lo, hi, sorted(draw(st.sets(st.integers(0, 5), max_size=6)))))
        lo += draw(st.integers(0, 3))  # 0: landmark-like growth
        hi = max(hi + draw(st.integers(0, 3)), lo + 1)  # may jump past the last window
    return out, wins, draw(st.integers(0, len(wins)))


def _call(kernel, rows, wins, pa0, pa1, prev, cont, state, extra=()):
    """One kernel call; ``state`` = [tc, tv, tm, used, dcount], updated in place."""
    unit = np.array([r[0] for r in rows], np.int64)
    offs = np.searchsorted(unit, np.arange(pa0, pa1 + 1, dtype=np.int64)).astype(np.int64)
    plo = np.array([w[0] for w in wins], np.int64)
    phi = np.array([w[1] for w in wins], np.int64)
    cells = np.array([c for w in wins for c in w[2]], np.int64)
    cb = np.cumsum([0] + [len(w[2]) for w in wins]).astype(np.int64)
    res = kernel(np.array([r[1] for r in rows], np.int64), np.array([r[2] for r in rows], np.int64),
                 np.array([r[3] for r in rows], np.int64), pa0, offs, plo, phi, prev[0], prev[1],
                 cont, *state, *extra, cb, cells)
    state[:4] = res[-4:]
    return res[:-4]


def _fresh_state():
    return [np.full(16, -1, np.int64), np.zeros(16, np.int64), np.zeros(16, np.int64), 0,
            np.zeros(8, np.int64)]


def _in_two_calls(kernel, rows, wins, split, extra=()):
    """The kernel over ``wins[:split]`` from scratch, then ``wins[split:]`` continuing."""
    state, outs = _fresh_state(), []
    if split:
        outs.append(_call(kernel, rows, wins[:split], -1, 8, (0, 0), False, state, extra))
    if split < len(wins):
        prev = (wins[split - 1][0], wins[split - 1][1]) if split else (0, 0)
        outs.append(_call(kernel, rows, wins[split:], -1, 8, prev, split > 0, state, extra))
    return outs, state


@settings(max_examples=200, deadline=None)
@given(tables())
def test_paned_distinct_equals_reference_across_calls(t):
    rows, wins, split = t
    inside = [r for r in rows if -1 <= r[0] < 8]  # panes outside [-1, 8): not in the span
    outs, state = _in_two_calls(paned_distinct, rows, wins, split)
    assert [x for o in outs for x in o[0].tolist()] == paned_distinct_ref(inside, wins)
    # the running table holds exactly the last window's values with their multiplicities,
    # and dcount is the number of live values per code
    lo, hi = wins[-1][0], wins[-1][1]
    tc, tv, tm, _, dcount = state
    live = {(c, v): n for c, v, n in zip(tc, tv, tm) if c >= 0 and n > 0}
    exp: dict = {}
    for u, c, v, n in inside:
        if lo <= u < hi:
            exp[(c, v)] = exp.get((c, v), 0) + n
    assert live == exp
    assert dcount.tolist() == [sum(1 for (cc, _) in live if cc == c) for c in range(dcount.shape[0])]


@settings(max_examples=200, deadline=None)
@given(tables(), st.integers(1, 3), st.randoms(use_true_random=False))
def test_paned_heavy_equals_reference_across_calls(t, k, rnd):
    rows, wins, split = t
    inside = [r for r in rows if -1 <= r[0] < 8]
    rank = np.array(rnd.sample(range(6), 6), np.int64)  # value order: not the codes' order
    outs, _ = _in_two_calls(paned_heavy, rows, wins, split, (rank, k))
    got = []
    for off, hv, hn in outs:
        got += [list(zip(hv[off[i]:off[i + 1]].tolist(), hn[off[i]:off[i + 1]].tolist()))
                for i in range(off.shape[0] - 1)]
    assert got == paned_heavy_ref(inside, wins, rank.tolist(), k)


def test_distinct_state_is_rebuilt_when_its_leaving_panes_were_purged():
    rng = np.random.default_rng(5)
    ms = Multiset(np.int64)
    ms.add(rng.integers(0, 12, 400), rng.integers(0, 6, 400), rng.integers(0, 9, 400))
    pc = PaneCombiner(Sliding(4, 1).resolve("ms"), [LaneInfo(agg.count().lanes()[0], np.int64)],
                      [agg.distinct("v")])

    def expect(w):
        lo, hi = pc.window_panes(w)
        c, v, _ = ms.select(lo, hi)
        codes = np.unique(c)
        return codes, np.array([np.unique(v[c == x]).shape[0] for x in codes], np.int64)

    for ws in ([3, 4], [5], [9, 10]):  # 5 -> 9 skips windows: their panes are purged first
        if ws[0] == 9:
            ms.purge_below(pc.window_panes(8)[0])
            assert ms.floor > pc._d[("distinct", "v")]["lo"]  # the state's leaving panes are gone
        parts = [(w, expect(w)[0], None) for w in ws]
        got = pc.distinct(ms, parts, "v", 6)
        assert got.tolist() == np.concatenate([expect(w)[1] for w in ws]).tolist()


def _values(t, draw):
    """The value column as int (as drawn), float or string, with some nulls."""
    v = t.column("val").to_numpy(zero_copy_only=False)
    kind = draw(st.sampled_from(["int", "float", "str"]))
    mask = np.array([draw(st.booleans()) and draw(st.booleans()) for _ in range(len(v))], bool) \
        if len(v) else np.zeros(0, bool)
    if kind == "float":
        col = pa.array(v.astype(np.float64) / 2, mask=mask)
    elif kind == "str":
        col = pa.array([f"s{int(x) % 5}" for x in v], pa.string(), mask=mask)
    else:
        col = pa.array(v, pa.int64(), mask=mask)
    return t.set_column(t.schema.get_field_index("val"), "val", col)


@pytest.mark.parametrize("kind", PANED_KINDS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_paned_distinct_and_heavy_in_one_call_equal_wid_and_oracle(kind, data):
    t = matrix_table(data, max_rows=80, max_gap=4)
    t = _values(t, data.draw)
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    aggs = [agg.distinct("val"), agg.heavy_hitters("val", data.draw(st.integers(1, 3))), agg.count()]
    assert_paned_in_one_call_equals_wid_and_oracle(items, t, kind, aggs, "distinct/heavy hitters")


def test_snapshot_restore_mid_stream_equals_uninterrupted():
    from oop.operators.base import StreamInfo
    from oop.stream.elements import Punctuation
    from oop.window import window_operator

    rng = np.random.default_rng(11)
    n = 3000
    ts = np.arange(n, dtype=np.int64) * 3 - rng.integers(0, 40, n)
    table = pa.table({"ts": ts, "key": rng.integers(0, 6, n), "val": rng.integers(0, 30, n)})
    batches = table.to_batches(max_chunksize=200)

    def make():
        op = window_operator(Sliding(300, 60), [agg.distinct("val"), agg.count()], by="key",
                             method="paned")
        op.open([StreamInfo("s", table.schema, {"ts": "ms"}, "ts")])
        return op

    def feed(op, lo, hi):
        out = []
        for i in range(lo, hi):
            out += op.on_batch(batches[i])
            rest = ts[(i + 1) * 200:]
            if rest.size:
                out += op.on_punctuation(Punctuation("ts", int(rest.min())))
        return [o for o in out if isinstance(o, pa.RecordBatch)]

    whole = make()
    full = feed(whole, 0, len(batches)) + whole.flush()
    first = make()
    head = feed(first, 0, 7)
    again = make()
    again.restore(first.snapshot())
    tail = feed(again, 7, len(batches)) + again.flush()
    as_table = lambda bs: pa.Table.from_batches([b for b in bs if isinstance(b, pa.RecordBatch)])  # noqa: E731
    assert_same_rows(as_table(head + tail), as_table(full))
    exp = window_oracle(table, Sliding(300, 60), [agg.distinct("val"), agg.count()], by=["key"],
                        time="ts", unit="ms")
    assert_same_rows(as_table(full), exp)


def test_distinct_state_continues_across_punctuations():
    """On an ordinary stream the running table is carried over (built once, not per call)."""
    import oop.window.paned as P

    calls = []
    real = P.PK.paned_distinct

    def spy(*a):
        calls.append(bool(a[9]))  # cont
        return real(*a)

    rng = np.random.default_rng(2)
    n = 4000
    ts = np.arange(n, dtype=np.int64) * 2 - rng.integers(0, 30, n)
    t = pa.table({"ts": ts, "key": rng.integers(0, 4, n), "val": rng.integers(0, 50, n)})
    items = []
    for i, b in enumerate(t.to_batches(max_chunksize=250)):
        items.append(b)
        items.append(oop.Punctuation("ts", int(ts[(i + 1) * 250:].min())) if (i + 1) * 250 < n else None)
    items = [x for x in items if x is not None]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(P.PK, "paned_distinct", spy)
        got = run(items, t.schema, Sliding(200, 50), [agg.distinct("val")], "paned")
    assert len(calls) > 10 and calls[0] is False and all(calls[1:])
    exp = window_oracle(t, Sliding(200, 50), [agg.distinct("val")], by=["key"], time="ts", unit="ms")
    assert_same_rows(got.table, exp)
