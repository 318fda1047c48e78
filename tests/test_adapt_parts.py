"""AdaptWID's parts: cost model, binned buffer, block merge, expansion kernel, and a stateful
``RuleBasedStateMachine`` over the group state machine that calls ``_check()`` after every step
and compares every emitted window with the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from oop.adapt.kernels import (bin_order, bin_order_reference, group_pairs,
                                 group_pairs_reference)
from oop.adapt.algebra import Rows, block_agg
from oop.adapt.buffer import LazyBuffer
from oop.adapt.cost import MemoryCostModel, Thresholds
from oop.adapt.bucket import expand, expand_reference
from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.adapt.groups import EAGER, LAZY
from oop.adapt.store import Block, merge_blocks
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling

from test_adapt_oracle import assert_same_cells, oracle, windows_of

pos = st.floats(0.01, 1e4, allow_nan=False)


# ---- cost model ------------------------------------------------------------------
@given(pos, pos, pos, st.integers(1, 50), st.integers(1, 50),
       st.lists(st.tuples(st.floats(0, 100), st.integers(0, 1000)), min_size=1, max_size=4))
def test_cond_6_9_is_mc_lazy_over_mc_eager(aggr, tup, wed, rng, slide, srcs):
    """Cond. 6.9 holds exactly when Eq. 6.8 (lazy) costs more than Eq. 6.5 (eager)."""
    m = MemoryCostModel(max(rng, slide), slide)
    vol_src = np.array([[v for v, _ in srcs]])
    off = np.array([o for _, o in srcs])
    off = off.max() - off  # offsets to the earliest source
    vol = vol_src.sum(axis=1)
    winvol = vol * wed
    theta = m.threshold(aggr, tup, wed, vol_src, off)
    lazy = m.mc_lazy(tup, vol, wed, vol_src, off)
    eager = m.mc_eager(aggr, wed)
    raw_lazy = tup * (winvol - vol_src @ off)
    if abs(raw_lazy[0] - eager) > 1e-6 * max(1.0, eager):
        assert bool(winvol[0] > theta[0]) == bool(raw_lazy[0] > eager)
    assert lazy[0] >= 0


def test_eq_values_by_hand():
    m = MemoryCostModel(range_=10_000, slide=1_000)  # Q6-8: 10 s / 1 s in ms
    assert m.mc_eager(aggr=40, wed=10_000) == 400.0
    # two main links 4 tuples/s each for this group, control lags 2 s but is empty
    vol_src = np.array([[0.004, 0.004, 0.0]])
    off = np.array([0, 0, 2000])
    assert m.threshold(40, 17, 10_000, vol_src, off)[0] == pytest.approx(400 / 17)
    off2 = np.array([0, 2000, 0])  # main2 lags 2 s: its 8 tuples there are never buffered
    assert m.threshold(40, 17, 10_000, vol_src, off2)[0] == pytest.approx(400 / 17 + 8)
    assert m.mc_lazy(17, np.array([0.008]), 10_000, vol_src, off2)[0] == pytest.approx(17 * 72)


# ---- buffer -----------------------------------------------------------------------
def _buffer(n_bins: int, gid_dtype: type) -> LazyBuffer:
    """An empty lazy buffer of (gid, ts) rows."""
    return LazyBuffer(n_bins, {"gid": np.dtype(gid_dtype), "ts": np.dtype(np.int64)})


def _fill(b: LazyBuffer, batches: list[list[int]], t: int = 0,
          check: bool = False) -> tuple[list[tuple[int, int]], int]:
    """Append each list of group codes to ``b`` as one batch (``ts``: arrival position from
    ``t``; ``b._check()`` after each append when ``check``). Returns the appended rows as
    (gid, ts) pairs and the next ``ts``."""
    ref: list[tuple[int, int]] = []
    for gs in batches:
        ts = np.arange(t, t + len(gs))
        t += len(gs)
        b.append({"gid": np.asarray(gs, b.dtypes["gid"]), "ts": ts})
        ref += list(zip(gs, ts.tolist()))
        if check:
            b._check()
    return ref, t


@given(st.integers(1, 5), st.lists(st.lists(st.integers(0, 12), max_size=10), max_size=6),
       st.lists(st.integers(0, 12), max_size=4))
def test_buffer_bins_take_groups_equals_reference(n_bins, batches, take):
    b = _buffer(n_bins, np.int64)
    ref, _ = _fill(b, batches, check=True)
    untouched = {k: list(b.bins[k]) for k in range(n_bins)
                 if k not in {g % n_bins for g in take}}
    out = b.take_groups(np.asarray(take, np.int64))
    b._check()
    got = sorted(zip(out["gid"].tolist(), out["ts"].tolist()))
    assert got == sorted(r for r in ref if r[0] in set(take))
    assert b.n_rows == len(ref) - len(got)
    if 2 * len({g % n_bins for g in take}) <= n_bins:  # (more: one kernel pass over B)
        for k, chunks in untouched.items():  # bins of other groups were not scanned or rebuilt
            assert all(x is y for x, y in zip(b.bins[k], chunks))



@given(st.integers(1, 5), st.lists(st.lists(st.integers(0, 12), max_size=10), max_size=6),
       st.integers(0, 30))
def test_buffer_one_pass_purge_equals_reference(n_bins, batches, cut):
    """all_rows + keep_rows (the punctuation's one pass over B) == filtering the rows."""
    b = _buffer(n_bins, np.int32)
    ref, _ = _fill(b, batches)
    whole = b.all_rows()
    b._check()
    assert sorted(zip(whole["gid"].tolist(), whole["ts"].tolist())) == sorted(ref)
    b.keep_rows(whole, whole["ts"] >= cut)
    b._check()
    held = [(int(g), int(x)) for chs in b.bins for ch in chs for g, x in zip(ch["gid"], ch["ts"])]
    assert sorted(held) == sorted(r for r in ref if r[1] >= cut)
    assert b.n_rows == len(held) and b.nbytes == 12 * len(held)

# ---- kernels -------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(-20, 20), st.integers(0, 5)), max_size=30))
def test_expand_kernel_equals_reference(pairs):
    lo = np.array([a for a, _ in pairs], np.int64)
    hi = lo + np.array([d for _, d in pairs], np.int64)
    r1, w1 = expand(lo, hi)
    r2, w2 = expand_reference(lo, hi)
    assert r1.tolist() == r2.tolist() and w1.tolist() == w2.tolist()


AGGS = [agg.count(), agg.sum("v"), agg.min("v"), agg.var("v"), agg.first("v"), agg.median("v")]


def _block(rows: list[tuple[int, int, bool, int]], bas: list | None = None) -> Block:
    """A block from (gid, value, valid, time) rows, via reduce by ``bas`` (partials merge only
    within one aggregate instance: var/std's shift is its own)."""
    rows = sorted(rows)
    g = np.array([r[0] for r in rows], np.int64)
    r = Rows(np.array([r[1] for r in rows], np.int64), np.array([r[2] for r in rows], bool),
             np.array([r[3] for r in rows], np.int64))
    starts = np.flatnonzero(np.r_[True, np.diff(g) != 0]) if len(g) else np.zeros(0, np.int64)
    bas = [block_agg(a) for a in AGGS] if bas is None else bas
    states = [a.reduce(r if a.fn != "count" else Rows(g, np.ones(len(g), bool), r.times), starts)
              for a in bas]
    lengths = np.diff(np.r_[starts, len(g)]).astype(np.int64)
    return Block(g[starts], lengths[:, None], states)


rows_st = st.lists(st.tuples(st.integers(0, 6), st.integers(-5, 5), st.booleans(),
                             st.integers(0, 9)), max_size=15)


@given(rows_st, rows_st)
def test_merge_blocks_equals_reduce_of_union(a, b):
    """merge(A, B) == reduce(A ∪ B): the algebra's merge law, keyed by group."""
    bas = [block_agg(x) for x in AGGS]
    merged, _ = merge_blocks(bas, _block(a, bas), _block(b, bas))
    whole = _block(a + b, bas)
    assert merged.gids.tolist() == whole.gids.tolist()
    assert merged.tupcnt.tolist() == whole.tupcnt.tolist()
    for ba, s1, s2 in zip(bas, merged.states, whole.states):
        x, y = ba.finalize(s1).to_pylist(), ba.finalize(s2).to_pylist()
        for p, q in zip(x, y):
            assert (p is None and q is None) or p == pytest.approx(q, rel=1e-9, abs=1e-9)


# ---- the group state machine ------------------------------------------------------------
class GroupStateMachine(RuleBasedStateMachine):
    """Random batches (some late) and punctuations into AdaptLogic; ``_check()`` after each step;
    every closed window equals the oracle over the tuples admitted so far."""

    @initialize(kind=st.sampled_from([Tumbling(4), Sliding(6, 2), Sliding(5, 2, 1)]),
                up=st.integers(0, 3), down=st.integers(0, 3), n_bins=st.integers(1, 3),
                mode=st.sampled_from(["adaptive", "absolute", "eager", "lazy"]),
                how=st.sampled_from(["closed_extent", "remaining"]))
    def setup(self, kind, up, down, n_bins, mode, how):
        if mode == "absolute":
            th = Thresholds(up=max(up, down), down=min(up, down), absolute=True, decide_on=how)
        else:
            th = Thresholds(mode=mode)
        self.kind = kind
        self.aggs = (agg.count(), agg.sum("v"), agg.median("v"))
        self.cfg = AdaptConfig(kind, self.aggs, n_sources=2, thresholds=th, n_bins=n_bins)
        self.lg = AdaptLogic(self.cfg, {"v": np.dtype(np.int64)})
        self.punct = 0
        self.rows: list[dict] = []
        self.min_wid: dict[int, int] = {}
        self.emitted: dict = {}
        self.late = 0

    @rule(data=st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 10), st.integers(0, 9),
                                  st.integers(0, 1)), min_size=1, max_size=8))
    def batch(self, data):
        gids = np.array([d[0] for d in data], np.int64)
        ts = np.array([self.punct + d[1] for d in data], np.int64)
        vals = np.array([d[2] for d in data], np.int64)
        src = np.array([d[3] for d in data], np.int8)
        fo = self.lg.first_open
        late = self.lg.on_batch(gids, ts, src, {"v": (vals, np.ones(len(data), bool))})
        exp_late = 0
        for g, t, v in zip(gids.tolist(), ts.tolist(), vals.tolist()):
            if not windows_of(self.kind, t, None if fo == np.iinfo(np.int64).min else fo):
                exp_late += 1
                continue
            self.min_wid[len(self.rows)] = fo
            self.rows.append({"key": g, "ts": t, "v": v})
        assert late == exp_late
        self.late += late

    @rule(step=st.integers(0, 6))
    def punctuate(self, step):
        self.punct += step
        self._collect(self.lg.on_punctuation(self.punct))
        fo = self.lg.first_open
        exp = {k: v for k, v in self._oracle().items()
               if self.kind.first_open(self.punct) > self._wid_of(k)}
        assert_same_cells(self.emitted, exp)
        _ = fo

    def _wid_of(self, key) -> int:
        start, end = key[1], key[2]
        return (end - self.kind.o) // self.kind.s - 1

    def _oracle(self):
        return oracle(self.rows, self.kind, self.aggs, by=("key",), time="ts",
                      min_wid={i: w for i, w in self.min_wid.items()
                               if w != np.iinfo(np.int64).min})

    def _collect(self, closed):
        for w, blk in closed:
            start, end = self.kind.extent(w)
            cols = [a.finalize(s).to_pylist() for a, s in zip(self.lg.aggs, blk.states)]
            for i, g in enumerate(blk.gids.tolist()):
                key = (g, start, end)
                assert key not in self.emitted, f"window {key} emitted twice"
                self.emitted[key] = tuple(c[i] for c in cols)

    @rule()
    def snapshot_roundtrip(self):
        lg2 = AdaptLogic(self.cfg, {"v": np.dtype(np.int64)})
        lg2.restore(self.lg.snapshot())
        lg2._check()
        self.lg = lg2

    @invariant()
    def check(self):
        if hasattr(self, "lg"):
            self.lg._check()
            g = self.lg.n_groups
            assert set(np.unique(self.lg.mode[:g]).tolist()) <= {LAZY, EAGER}

    def teardown(self):
        if hasattr(self, "lg"):
            self._collect(self.lg.flush())
            assert_same_cells(self.emitted, self._oracle())
            assert self.lg.buffer.n_rows == 0 and self.lg.eager.n_partials == 0
            assert not self.lg.wv.any()


GroupStateMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25,
                                               deadline=None)
TestGroupStateMachine = GroupStateMachine.TestCase


# ---- group-by / binning kernels (oop.adapt.kernels) ------------------------------------
@given(st.lists(st.tuples(st.integers(-6, 6), st.integers(0, 9)), max_size=60))
def test_group_pairs_kernel_equals_reference(pairs):
    ws = np.array([w for w, _ in pairs], np.int64)
    gs = np.array([g for _, g in pairs], np.int64)
    scratch = np.full(12, -1, np.int64)
    o1, s1 = group_pairs(ws, gs, scratch)
    o2, s2 = group_pairs_reference(ws, gs)
    assert o1.tolist() == o2.tolist() and s1.tolist() == s2.tolist()
    assert (scratch == -1).all(), "scratch slots not reset"


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 9))
def test_bin_order_kernel_equals_reference(gids, n_bins):
    g = np.array(gids, np.int32)
    o1, c1 = bin_order(g, n_bins)
    o2, c2 = bin_order_reference(g, n_bins)
    assert o1.tolist() == o2.tolist() and c1.tolist() == c2.tolist()


@given(st.lists(st.tuples(st.integers(-30, 30), st.integers(-1, 6)), max_size=30))
def test_covered_windows_kernel_equals_reference(pairs):
    from oop.adapt.kernels import covered_windows_reference
    from oop.adapt.bucket import covered_windows
    lo = np.array([a for a, _ in pairs], np.int64)
    hi = lo + np.array([d for _, d in pairs], np.int64)
    got = covered_windows(lo, hi)
    assert got is not None and got.tolist() == covered_windows_reference(lo, hi).tolist()


@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=40),
       st.data())
def test_segment_tupcnt_kernel_equals_reference(rows, data):
    from oop.adapt.kernels import segment_tupcnt, segment_tupcnt_reference
    src = np.array([r[0] for r in rows], np.int8)
    last = np.array([r[1] for r in rows], bool)
    cuts = data.draw(st.lists(st.integers(1, len(rows) - 1), unique=True)) if len(rows) > 1 else []
    starts = np.array([0] + sorted(cuts), np.int64)
    got = segment_tupcnt(starts, src, last, 3)
    assert got.dtype == np.int32
    assert got.tolist() == segment_tupcnt_reference(starts, src, last, 3).tolist()


@given(st.integers(1, 5), st.lists(st.lists(st.integers(0, 12), max_size=10), max_size=6),
       st.integers(0, 30), st.lists(st.integers(0, 12), max_size=4),
       st.lists(st.integers(0, 12), max_size=6))
def test_buffer_rebuild_then_switch_equals_reference(n_bins, batches, cut, take, more):
    """scan_rows + rebuild (a punctuation; rows packed in bin order), more appends, then a
    switch's take_groups and another pass == filtering a plain list of rows."""
    b = _buffer(n_bins, np.int32)
    ref, t = _fill(b, batches)
    whole = b.scan_rows()
    keep = [i for i in range(len(whole["gid"])) if whole["ts"][i] >= cut]
    order = sorted(keep, key=lambda i: (int(whole["gid"][i]) % n_bins, i))
    cuts = np.cumsum([0] + [sum(1 for i in keep if int(whole["gid"][i]) % n_bins == k)
                            for k in range(n_bins)])
    b.rebuild(whole, np.asarray(order, np.int64), cuts.astype(np.int64))
    b._check()
    ref = [r for r in ref if r[1] >= cut]
    ref += _fill(b, [more], t, check=True)[0]
    out = b.take_groups(np.asarray(take, np.int64))
    b._check()
    got = sorted(zip(out["gid"].tolist(), out["ts"].tolist()))
    assert got == sorted(r for r in ref if r[0] in set(take))
    rest = b.scan_rows()
    assert sorted(zip(rest["gid"].tolist(), rest["ts"].tolist())) == \
        sorted(r for r in ref if r[0] not in set(take))
    assert b.n_rows == len(rest["gid"]) and b.nbytes == 12 * b.n_rows


@given(st.sampled_from([Tumbling(4), Sliding(6, 2), Sliding(5, 2, 1), Sliding(10, 1)]),
       st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 5), st.integers(-4, 12)),
                                   min_size=1, max_size=8), st.integers(0, 5)),
                min_size=1, max_size=12))
def test_open_extents_fast_paths_equal_the_scan(kind, steps):
    """The windows a batch opens (and the ``wed`` starts of their extents) are the same
    whether found by the open-span shortcuts or by scanning the batch's windows."""
    cfg = AdaptConfig(kind, (agg.count(),), n_sources=1, thresholds=Thresholds(), n_bins=2)
    fast, slow = AdaptLogic(cfg, {}), AdaptLogic(cfg, {})
    now = 0
    for rows, step in steps:
        gids = np.array([r[0] for r in rows], np.int64)
        ts = np.array([now + r[1] for r in rows], np.int64)
        slow.extents._open_span = (2**62, 2**62 - 1)  # no span known: the scan (or the set check)
        for lg in (fast, slow):
            lg.on_batch(gids, ts, None, {})
        assert list(fast.open_wids) == list(slow.open_wids)
        assert fast.wed.snapshot() == slow.wed.snapshot()
        now += step
        for lg in (fast, slow):
            lg.on_punctuation(now)
        assert list(fast.open_wids) == list(slow.open_wids)
    fast._check()
