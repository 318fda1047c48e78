"""AdaptWID's fused kernels (oop.adapt.kernels) == their tuple-at-a-time references.

* ``route_batch`` -- the per-batch pass: window clip / late, winVol, per-source high-watermarks,
  lazy -> eager by Cond. 6.9 (with the skew term over several sources), row routing;
* ``close_scan`` -- the punctuation's pass over the lazy buffer: (row, closing window) pairs,
  expiry with winVol decrement, kept rows in bin order;
* ``count_dead`` -- groups leaving H after a punctuation;
* ``dense_assign_slots_sel`` -- slot assignment fused with the presence / tupcnt fold.

The end-to-end properties (AdaptWID == WID == oracle under forced and no switching, accounting,
snapshot mid-transition) are in tests/test_adapt.py; the batch-routing ones here additionally
check that routing a batch through the kernel path accounts for every tuple.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from oop.adapt import kernels as K
from oop.adapt.cost import Thresholds
from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.adapt.groups import MODE_BIT, VOL_MASK
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling

I64MIN = np.iinfo(np.int64).min

batch_rows = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 2), st.integers(0, 40)),
                      max_size=40)  # (group, source, time)


@given(batch_rows,
       st.lists(st.tuples(st.integers(0, 11), st.integers(0, 2), st.integers(0, 5)), max_size=20),
       st.sets(st.integers(0, 11)), st.sampled_from([I64MIN, 0, 3, 6]),
       st.integers(1, 3), st.integers(1, 4), st.booleans(), st.booleans(),
       st.floats(0.0, 3.0), st.floats(0.5, 2.0),
       st.lists(st.sampled_from([I64MIN, 0, 10, 25]), min_size=3, max_size=3), st.integers(0, 2))
def test_route_batch_equals_reference(rows, init, eager, first_open, slide, k, monitor,
                                      forced_eager, base, up, hw0, extra):
    S = 3
    g = np.array([r[0] for r in rows], np.int64)
    src = np.array([r[1] for r in rows], np.int8)
    ts = np.array([r[2] for r in rows], np.int64)
    rng = slide * k + extra  # RANGE a multiple of SLIDE or not
    wv0 = np.zeros((12, S), np.int32)
    for gg, s, c in init:
        wv0[gg, s] += c
    for gg in eager:
        wv0[gg, 0] |= MODE_BIT
    wv_k, wv_r = wv0.copy(), wv0.copy()
    hw_k, hw_r = np.array(hw0, np.int64), np.array(hw0, np.int64)
    lo_k, hi_k = np.empty(len(g), np.int64), np.empty(len(g), np.int64)
    cls = np.empty(len(g), np.int8)
    out = np.zeros(9, np.int64)
    lazy_idx = np.empty(len(g), np.int64)
    scratch = np.full(12, -1, np.int64)
    # the kernels take the origin of the grid of window ends, kind.o (= origin + RANGE mod
    # SLIDE: Spark alignment), as the operator passes it
    geom = (rng, slide, Sliding(rng, slide, 1).o)
    sw_k = K.route_batch(g, src, ts, np.array(geom, np.int64), lo_k, hi_k, np.int64(first_open),
                         wv_k, scratch, VOL_MASK,
                         MODE_BIT, monitor, forced_eager, base, float(rng), True, up, cls, hw_k,
                         out, lazy_idx)
    cls_r, sw_r, out_r, (lo_r, hi_r) = K.route_batch_reference(g, src, ts, geom, first_open, wv_r,
                                                    int(VOL_MASK), int(MODE_BIT), monitor,
                                                    forced_eager, base, float(rng), True, up, hw_r)
    assert (scratch == -1).all()
    assert cls.tolist() == cls_r.tolist()
    assert sw_k.tolist() == sw_r.tolist()
    assert out.tolist() == out_r
    assert lazy_idx[:out[1]].tolist() == np.flatnonzero(cls_r == 1).tolist()
    assert (wv_k == wv_r).all() and (hw_k == hw_r).all()
    assert (lo_k == np.maximum(lo_r, first_open)).all() and (hi_k == hi_r).all()
    exp_lo, exp_hi = Sliding(rng, slide, 1).wids(ts)  # the Bucket is the window kind's
    assert (hi_k == exp_hi).all() and (lo_k == np.maximum(exp_lo, first_open)).all()
    # accounting: every row is late, lazy or eager; winVol grew by the rows in time
    assert out[0] + out[1] + out[2] == len(g)
    if monitor:
        grown = (wv_k & VOL_MASK).sum() - (wv0 & VOL_MASK).sum()
        assert grown == len(g) - out[0]
        # a switched group was lazy, is eager now, and is over the upper threshold
        for gg in sw_k.tolist():
            assert not wv0[gg, 0] & MODE_BIT and wv_k[gg, 0] & MODE_BIT
    else:
        assert (wv_k == wv0).all() and len(sw_k) == 0


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2), st.integers(-5, 40)),
                max_size=40),
       st.integers(1, 3), st.integers(1, 4), st.integers(-3, 5), st.sampled_from([None, -2, 1, 4]),
       st.integers(0, 12), st.booleans(), st.integers(1, 5), st.booleans(), st.integers(0, 2))
def test_close_scan_equals_reference(rows, slide, k, origin, old, fo, monitor, n_bins, pairs,
                                     extra):
    g = np.array([r[0] for r in rows], np.int32)
    src = np.array([r[1] for r in rows], np.int8)
    ts = np.array([r[2] for r in rows], np.int64)
    old_ = I64MIN if old is None else old
    wv0 = np.full((10, 3), 50, np.int32)
    wv_k, wv_r = wv0.copy(), wv0.copy()
    scratch = np.full(10, -1, np.int64)
    got = K.close_scan(g, src, ts, slide * k + extra, slide, origin, np.int64(old_), np.int64(fo), wv_k,
                       monitor, scratch, n_bins, pairs)
    exp = K.close_scan_reference(g, src, ts, slide * k + extra, slide, origin, old_, fo, wv_r, monitor,
                                 n_bins, pairs)
    assert (scratch == -1).all()
    for a, b in zip(got, exp):
        assert a.tolist() == b.tolist()
    assert (wv_k == wv_r).all()
    order, cuts = got[3], got[4]
    # every row is either kept (exactly once, in its bin) or expired
    assert len(set(order.tolist())) == len(order)
    for b in range(n_bins):
        assert all(int(g[i]) % n_bins == b for i in order[cuts[b]:cuts[b + 1]])
    if monitor:
        assert (wv0 - wv_k).sum() == len(g) - len(order)


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.booleans()), min_size=8,
                max_size=8),
       st.lists(st.integers(0, 7), max_size=8), st.lists(st.integers(0, 7), max_size=8),
       st.booleans())
def test_count_dead_equals_reference(state, cand, gone, reset):
    wv = np.zeros((8, 2), np.int32)
    for gg, (a, b, e) in enumerate(state):
        wv[gg] = (a, b)
        if e:
            wv[gg, 0] |= MODE_BIT
    wv_k, wv_r = wv.copy(), wv.copy()
    scratch = np.full(8, -1, np.int64)
    c, o = np.array(cand, np.int64), np.array(gone, np.int64)
    got = K.count_dead(wv_k, c, o, scratch, VOL_MASK, MODE_BIT, reset)
    exp = K.count_dead_reference(wv_r, c, o, int(VOL_MASK), int(MODE_BIT), reset)
    assert tuple(got) == exp and (wv_k == wv_r).all() and (scratch == -1).all()


@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 2), st.integers(-6, 6),
                          st.integers(1, 3), st.integers(0, 2)), max_size=40),
       st.sets(st.integers(0, 12), max_size=5), st.booleans(), st.booleans())
def test_dense_assign_slots_sel_equals_reference(rows, has, has_rows, has_tc):
    """Slots == reference; the fused presence / tupcnt / last_w fold == dense_fold_rows."""
    gids = np.array([r[0] for r in rows], np.int64)
    cls = np.array([r[1] for r in rows], np.int8)
    lo = np.array([r[2] for r in rows], np.int64)
    hi = lo + np.array([r[3] for r in rows], np.int64)
    src = np.array([r[4] for r in rows], np.int8)
    C, R = 20, 8
    slot_of = np.full(13, -1, np.int32)
    gid_of = np.full(C, -1, np.int32)
    last_w = np.full(C, I64MIN, np.int64)
    free = list(range(C - 1, -1, -1))
    for g in sorted(has):  # groups holding a slot already
        s = free.pop()
        slot_of[g], gid_of[s], last_w[s] = s, g, -3
    so_r, go_r, lw_r = slot_of.copy(), gid_of.copy(), last_w.copy()
    free_k = np.array(free + [0] * (C - len(free)), np.int64)
    pres_k, pres_r = np.zeros((R, C), np.int32), np.zeros((R, C), np.int32)
    tc_k, tc_r = np.zeros((R, C, 3), np.int32), np.zeros((R, C, 3), np.int32)
    out = np.empty(len(gids), np.int64)
    n_free, new = K.dense_assign_slots_sel(slot_of, gid_of, last_w, gids, cls, 2, free_k,
                                           len(free), out, I64MIN, pres_k, has_rows, tc_k,
                                           has_tc, lo, hi, src, np.int64(R - 1))
    exp = K.dense_assign_slots_sel_reference(so_r, go_r, lw_r, gids, cls, 2, free, I64MIN)
    assert out.tolist() == exp.tolist() and n_free == len(free)
    new_r = K.dense_fold_rows(pres_r, has_rows, tc_r, has_tc, lw_r, exp, lo, hi, src,
                              np.int64(R - 1))
    assert new == (new_r if has_rows else 0)
    assert (slot_of == so_r).all() and (gid_of == go_r).all() and (last_w == lw_r).all()
    assert (pres_k == pres_r).all() and (tc_k == tc_r).all()


def test_dense_assign_slots_sel_asks_for_room():
    """Too few free slots: nothing changes, and the shortfall is returned."""
    slot_of = np.full(4, -1, np.int32)
    gid_of = np.full(1, -1, np.int32)
    last_w = np.full(1, I64MIN, np.int64)
    gids = np.array([0, 1, 1, 2], np.int64)
    cls = np.array([2, 2, 1, 2], np.int8)
    r, new = K.dense_assign_slots_sel(slot_of, gid_of, last_w, gids, cls, 2,
                                      np.zeros(1, np.int64), 1, np.empty(4, np.int64), I64MIN,
                                      np.zeros((1, 1), np.int32), False,
                                      np.zeros((1, 1, 1), np.int32), False, gids, gids + 1,
                                      np.zeros(4, np.int8), np.int64(0))
    assert (r, new) == (-4, 0)  # 3 groups need a slot, 1 is free
    assert (slot_of == -1).all() and (gid_of == -1).all()


@given(st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 30)), max_size=12),
                min_size=1, max_size=8),
       st.sampled_from([Tumbling(4), Sliding(8, 2), Sliding(6, 3)]),
       st.sampled_from(["adaptive", "eager", "lazy"]), st.booleans())
def test_logic_accounts_for_every_tuple(batches, kind, mode, forced):
    """Batch by batch: tuples in == late + buffered + those behind the partials' tupcnt, and
    at the end every in-time tuple's windows were emitted; invariants hold throughout."""
    th = (Thresholds(up=1, down=1, absolute=True) if forced and mode == "adaptive"
          else Thresholds(mode=mode))
    lg = AdaptLogic(AdaptConfig(kind, (agg.count(), agg.sum("v")), thresholds=th, n_bins=3),
                    {"v": np.dtype(np.int64)})
    t_hi = 0
    for i, b in enumerate(batches):
        g = np.array([r[0] for r in b], np.int64)
        ts = np.array([r[1] for r in b], np.int64) + t_hi - 10
        lg.on_batch(g, ts, None, {"v": (ts * 3, None)})
        lg._check()
        if lg.monitor:
            assert lg.volume.active == int(lg.wv.sum())
        if len(ts):
            t_hi = max(t_hi, int(ts.max()))
        out = lg.on_punctuation(t_hi - 5 + i)
        lg._check()
        for _, blk in out:
            assert len(blk)
    lg.flush()
    lg._check()
    assert lg.buffer.n_rows == 0 and lg.eager.n_partials == 0
    if lg.monitor:
        assert lg.volume.active == 0 and not lg.wv.any()


@given(st.lists(st.integers(0, 15), max_size=40), st.sets(st.integers(0, 15), max_size=6),
       st.integers(1, 5))
def test_take_scan_equals_reference(gids, groups, n_bins):
    g = np.array(gids, np.int32)
    want = np.array(sorted(groups), np.int64)
    got = K.take_scan(g, want, n_bins)
    exp = K.take_scan_reference(g, want, n_bins)
    for a, b in zip(got, exp):
        assert a.tolist() == b.tolist()
    assert len(got[0]) + len(got[1]) == len(g)  # every row taken or kept once


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.booleans()), min_size=6,
                max_size=6),
       st.lists(st.integers(0, 5), max_size=8, unique=True), st.booleans(),
       st.floats(0.0, 5.0), st.floats(0.0, 1.5), st.booleans(),
       st.lists(st.sampled_from([I64MIN, 0, 7, 20]), min_size=2, max_size=2))
def test_switch_down_equals_reference(state, cand, use_pre, base, down, skew_on, hw):
    wv = np.zeros((6, 2), np.int32)
    for g, (a, b, e) in enumerate(state):
        wv[g] = (a, b)
        if e:
            wv[g, 0] |= MODE_BIT
    c = np.array(cand, np.int64)
    pre = (wv[c] & VOL_MASK).sum(axis=1).astype(np.int64) + 3
    wv_k, wv_r = wv.copy(), wv.copy()
    hwm = np.array(hw, np.int64)
    got = K.switch_down(wv_k, c, pre, use_pre, base, 10.0, skew_on, hwm, down, VOL_MASK,
                        MODE_BIT)
    exp = K.switch_down_reference(wv_r, c, pre, use_pre, base, 10.0, skew_on, hwm, down,
                                  int(VOL_MASK), int(MODE_BIT))
    assert got.tolist() == exp.tolist() and (wv_k == wv_r).all()
    for g in got.tolist():  # switched groups were eager and are lazy now
        assert wv[g, 0] & MODE_BIT and not wv_k[g, 0] & MODE_BIT


@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), max_size=40), st.booleans())
def test_transient_slots_equals_reference(rows, sort):
    g = np.array([r[0] for r in rows], np.int32)
    sel = np.array([2 if r[1] else 0 for r in rows], np.int8)
    scratch = np.full(21, -1, np.int64)
    slot, groups = K.transient_slots(g, sel, scratch, sort)
    slot_r, groups_r = K.transient_slots_reference(g, sel, sort)
    assert slot.tolist() == slot_r.tolist() and groups.tolist() == groups_r.tolist()
    assert (scratch == -1).all()
    assert all(groups[s] == x for s, x in zip(slot.tolist(), g.tolist()) if s >= 0)


@given(st.lists(st.integers(-2**40, 2**40), max_size=30), st.integers(1, 10**7),
       st.integers(0, 3), st.integers(-10**6, 10**6),
       st.sampled_from([1_700_000_000_000, 1_700_000_000_000_000_000, -2**61, 0]))
def test_bucket_is_exact_for_large_times(ts, slide, k, origin, base):
    """The kernels' float-reciprocal floor division == Python's ``//`` (epoch ms and ns)."""
    t = np.array(ts, np.int64) + base
    rng = slide * k + (slide // 3)  # a multiple of SLIDE or not
    rng = max(rng, slide)
    n = len(t)
    lo, hi = np.empty(n, np.int64), np.empty(n, np.int64)
    K.route_batch(np.zeros(n, np.int64), np.zeros(n, np.int8), t,
                  np.array([rng, slide, origin], np.int64), lo, hi, np.int64(I64MIN),
                  np.zeros((1, 1), np.int32), np.full(1, -1, np.int64), VOL_MASK, MODE_BIT,
                  False, True, 1.0, float(rng), False, 1.0, np.empty(n, np.int8),
                  np.full(1, I64MIN, np.int64), np.zeros(9, np.int64), np.empty(n, np.int64))
    assert lo.tolist() == [(int(x) - origin) // slide for x in t]
    assert hi.tolist() == [(int(x) - origin + rng) // slide for x in t]
    got = K.close_scan(np.zeros(n, np.int32), np.zeros(n, np.int8), t, rng, slide, origin,
                       np.int64(I64MIN), np.int64(2**62), np.zeros((1, 1), np.int32), False,
                       np.full(1, -1, np.int64), 8, False)
    assert got[6].tolist() == lo.tolist() and got[7].tolist() == hi.tolist()


@given(st.lists(st.integers(0, 30), unique=True, max_size=15),
       st.lists(st.integers(0, 30), unique=True, max_size=15))
def test_match_groups_equals_reference(a, b):
    ga, gb = np.array(a, np.int32), np.array(b, np.int32)
    scratch = np.full(31, -1, np.int64)
    pos, found = K.match_groups(ga, gb, scratch)
    assert pos.tolist() == K.match_groups_reference(ga, gb).tolist()
    assert found == len(set(a) & set(b)) and (scratch == -1).all()


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2), st.integers(-5, 40)),
                max_size=40),
       st.integers(1, 3), st.integers(1, 4), st.integers(-3, 5), st.sampled_from([None, -2, 1, 4]),
       st.integers(0, 12), st.booleans(), st.integers(1, 5), st.integers(0, 2),
       st.integers(0, 40))
def test_close_fold_equals_reference(rows, slide, k, origin, old, fo, monitor, n_bins, extra,
                                     n_binned):
    """The fused dense close == the unfused references, and == close_scan + transient_slots.

    The first ``n_binned`` rows are the buffer's binned part (stably in bin order, as the
    buffer holds them), the rest staged."""
    n_binned = min(n_binned, len(rows))
    binned = sorted(rows[:n_binned], key=lambda r: r[0] % n_bins)  # stable
    rows = binned + rows[n_binned:]
    pc = np.zeros(n_bins + 1, np.int64)
    for r in binned:
        pc[r[0] % n_bins + 1] += 1
    pc = np.cumsum(pc)
    g = np.array([r[0] for r in rows], np.int32)
    src = np.array([r[1] for r in rows], np.int8)
    ts = np.array([r[2] for r in rows], np.int64)
    old_ = I64MIN if old is None else old
    rng = slide * k + extra
    wv0 = np.full((10, 3), 50, np.int32)
    wv_k, wv_r, wv_s = wv0.copy(), wv0.copy(), wv0.copy()
    scratch = np.full(10, -1, np.int64)
    # closing windows of any row lie in [lowest window, fo): a ring that covers them
    lo_all = [(int(t) - origin) // slide for t in ts] or [0]
    span = max(fo - max(min(lo_all), old_), 1)
    mask = (1 << max(span - 1, 0).bit_length()) - 1
    got = K.close_fold(g, src, ts, rng, slide, origin, np.int64(old_), np.int64(fo), wv_k,
                       monitor, scratch, n_bins, np.int64(mask), pc)
    exp = K.close_fold_reference(g, src, ts, rng, slide, origin, old_, fo, wv_r, monitor,
                                 n_bins, mask, pc)
    assert (scratch == -1).all()
    for a, b in zip(got, exp):
        assert a.tolist() == b.tolist()
    assert (wv_k == wv_r).all()
    # the same as the unfused kernels
    sc = K.close_scan(g, src, ts, rng, slide, origin, np.int64(old_), np.int64(fo), wv_s,
                      monitor, np.full(10, -1, np.int64), n_bins, False)
    slot, groups = K.transient_slots(g, sc[8], np.full(10, -1, np.int64), False)
    for a, b in zip(got[:7], (sc[3], sc[4], sc[5], slot, groups, sc[6], sc[7])):
        assert a.tolist() == b.tolist()
    order = got[0]  # the kept rows' columns are gathered in the kernel's order
    assert got[8].tolist() == g[order].tolist() and got[9].tolist() == ts[order].tolist()
    assert got[10].tolist() == src[order].tolist() and got[8].dtype == g.dtype
    assert (wv_s == wv_k).all()
    # every (row, closing window) pair is counted once; every row is kept or expired
    pres = got[7]
    assert pres.sum() == int(np.maximum(got[6] - got[5], 0).sum())
    if monitor:
        assert (wv0 - wv_k).sum() == len(g) - len(got[0])


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.booleans()), min_size=8,
                max_size=8),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), st.integers(0, 2)), max_size=12),
       st.lists(st.integers(0, 7), max_size=8), st.booleans(), st.booleans(),
       st.floats(0.0, 8.0), st.booleans(), st.sampled_from([0.5, 1.0]), st.booleans())
def test_settle_close_equals_reference(state, popped, gone, use_pre, skew_on, base, reset, down,
                                       derived):
    """The fused bookkeeping == its unfused references (and winVol never goes below 0 when
    the popped tupcnt is part of it)."""
    wv = np.zeros((8, 2), np.int32)
    for gg, (a, b, e) in enumerate(state):
        wv[gg] = (a, b)
        if e:
            wv[gg, 0] |= MODE_BIT
    pg = np.array([p[0] for p in popped], np.int32)
    ptc = np.array([[p[1], p[2]] for p in popped], np.int64 if derived else np.int32)
    ptc = ptc.reshape(len(popped), 2)
    for g, row in zip(pg.tolist(), ptc.tolist()):  # the popped tupcnt is held in winVol
        wv[g, 0] += row[0]
        wv[g, 1] += row[1]
    hwm = np.array([5, I64MIN], np.int64)
    wv_k, wv_r = wv.copy(), wv.copy()
    scratch = np.full(8, -1, np.int64)
    gone_ = np.array(gone, np.int64)
    got = K.settle_close(wv_k, pg, ptc, gone_, scratch, use_pre, base, 10.0, skew_on, hwm, down,
                         VOL_MASK, MODE_BIT, reset)
    exp = K.settle_close_reference(wv_r, pg, ptc, gone_, use_pre, base, 10.0, skew_on, hwm,
                                   down, int(VOL_MASK), int(MODE_BIT), reset)
    assert tuple(int(x) for x in got) == exp
    assert (wv_k == wv_r).all() and (scratch == -1).all()
    assert ((wv_k & VOL_MASK) >= 0).all()
    assert got[3] == int(ptc.sum())


@given(st.lists(st.tuples(st.integers(-1, 9), st.integers(0, 3), st.integers(0, 6)),
                max_size=20), st.integers(0, 3), st.integers(0, 7))
def test_dense_slot_kernels_equal_reference(slots, r, first_open):
    """dense_pop_slots, dense_release and count_transitional == their references."""
    C = len(slots)
    gid_of = np.full(C, -1, np.int32)
    used = set()
    for s, (g, _, _) in enumerate(slots):  # distinct groups per held slot
        if g >= 0 and g not in used:
            gid_of[s] = g
            used.add(g)
    pres = np.zeros((4, max(C, 1)), np.int64)
    last_w = np.full(C, I64MIN, np.int64)
    for s, (_, row, lw) in enumerate(slots):
        if gid_of[s] >= 0:
            pres[row, s] = 1 + lw
            last_w[s] = lw
    got = K.dense_pop_slots(pres, r, C, gid_of)
    exp = K.dense_pop_slots_reference(pres, r, C, gid_of)
    assert got[0].tolist() == exp[0].tolist() and got[1].tolist() == exp[1].tolist()
    assert got[1].dtype == np.int32
    wv = np.zeros((10, 1), np.int32)
    for g in range(0, 10, 3):
        wv[g, 0] |= MODE_BIT
    assert K.count_transitional(gid_of, wv, MODE_BIT) == \
        K.count_transitional_reference(gid_of, wv, int(MODE_BIT))
    slot_of = np.full(10, -1, np.int32)
    for s, g in enumerate(gid_of.tolist()):
        if g >= 0:
            slot_of[g] = s
    free = np.full(C + 1, -7, np.int64)
    n_free = 1
    a = [gid_of.copy(), last_w.copy(), slot_of.copy(), free.copy()]
    b = [gid_of.copy(), last_w.copy(), slot_of.copy(), free.copy()]
    nk = K.dense_release(a[0], a[1], a[2], a[3], n_free, first_open)
    nr = K.dense_release_reference(b[0], b[1], b[2], b[3], n_free, first_open)
    assert nk == nr and all((x == y).all() for x, y in zip(a, b))
    # released slots are exactly the held ones with no partial at or above first_open
    assert nk - n_free == sum(1 for s in range(C) if gid_of[s] >= 0 and last_w[s] < first_open)
