"""AdaptWID's dense eager store (oop.adapt.dense): fold kernels == tuple-at-a-time reference;
store == block algebra of the same rows (per window, across ring growth, slot reuse, compaction,
snapshot/restore); bytes == the arrays actually held.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oop.adapt import kernels as K
from oop.adapt.algebra import Rows, block_agg
from oop.adapt.dense import DenseEagerStore, lane_dtypes
from oop.window import aggregates as agg

FNS = ["count", "sum", "mean", "min", "max", "var", "first", "last"]
row_st = st.tuples(st.integers(0, 5), st.integers(-9, 9), st.integers(0, 3),  # slot, lo, span
                   st.integers(-50, 50), st.booleans(), st.integers(0, 20))  # value, valid, ts


def _fold_kernel(fn, lanes, slot, lo, hi, x, valid, ts, mask):
    if fn == "count":
        K.dense_fold_count(lanes[0], slot, lo, hi, mask, False)
    elif fn in ("sum", "mean"):
        K.dense_fold_sum(lanes[0], lanes[1], slot, lo, hi, x.astype(lanes[1].dtype), valid, mask)
    elif fn in ("min", "max"):
        K.dense_fold_minmax(lanes[0], lanes[1], slot, lo, hi, x, valid, mask, fn == "min")
    elif fn == "var":
        K.dense_fold_var(lanes[0], lanes[1], lanes[2], slot, lo, hi, x.astype(np.float64), 0.0,
                         valid, mask)
    else:
        K.dense_fold_firstlast(lanes[0], lanes[1], lanes[2], slot, lo, hi, x, valid, ts, mask,
                               fn == "first")


@pytest.mark.parametrize("fn", FNS)
@given(rows=st.lists(row_st, max_size=40), floats=st.booleans())
def test_dense_fold_kernels_equal_reference(fn, rows, floats):
    col = np.dtype(np.float64 if floats else np.int64)
    dts = lane_dtypes(block_agg(getattr(agg, fn)() if fn == "count" else getattr(agg, fn)("v")), col)
    R, C = 32, 6
    slot = np.array([r[0] for r in rows], np.int64)
    lo = np.array([r[1] for r in rows], np.int64)
    hi = lo + np.array([r[2] for r in rows], np.int64)
    x = np.array([r[3] for r in rows], col) * (1.5 if floats else 1)
    valid = np.array([r[4] for r in rows], bool)
    ts = np.array([r[5] for r in rows], np.int64)
    got = [np.zeros((R, C), dt) for dt in dts]
    ref = [np.zeros((R, C), dt) for dt in dts]
    _fold_kernel(fn, got, slot, lo, hi, x, valid, ts, R - 1)
    K.dense_fold_reference(fn, ref, slot, lo, hi, x, valid, ts, R - 1)
    for g, r in zip(got, ref):
        assert np.allclose(g, r, rtol=1e-9, atol=1e-9), (fn, g, r)


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-9, 9), st.integers(1, 3),
                          st.integers(0, 2)), max_size=40))
def test_dense_fold_rows_kernel_equals_reference(rows):
    R, C, S = 32, 5, 3
    slot = np.array([r[0] for r in rows], np.int64)
    lo = np.array([r[1] for r in rows], np.int64)
    hi = lo + np.array([r[2] for r in rows], np.int64)
    src = np.array([r[3] for r in rows], np.int8)
    pres, tc = np.zeros((R, C), np.int32), np.zeros((R, C, S), np.int32)
    last = np.full(C, np.iinfo(np.int64).min, np.int64)
    new = K.dense_fold_rows(pres, True, tc, True, last, slot, lo, hi, src, np.int64(R - 1))
    p2, t2 = np.zeros((R, C), np.int32), np.zeros((R, C, S), np.int32)
    l2 = np.full(C, np.iinfo(np.int64).min, np.int64)
    for s, a, b, k in zip(slot.tolist(), lo.tolist(), hi.tolist(), src.tolist()):
        for w in range(a, b):
            p2[w & (R - 1), s] += 1
        t2[(b - 1) & (R - 1), s, k] += 1
        l2[s] = max(l2[s], b - 1)
    assert (pres == p2).all() and (tc == t2).all() and (last == l2).all()
    assert new == int(np.count_nonzero(p2))


def _reference_block(a, rows, w):
    """The block algebra's partials of window ``w``: {gid: finalized value}, tupcnt by gid."""
    sel = sorted([r for r in rows if r[1] <= w < r[2]], key=lambda r: r[0])
    if not sel:
        return {}, {}
    g = np.array([r[0] for r in sel])
    starts = np.flatnonzero(np.r_[True, np.diff(g) != 0])
    vals = np.array([r[3] for r in sel], np.int64)
    st_ = a.reduce(Rows(vals, np.array([r[4] for r in sel]), np.array([r[5] for r in sel], np.int64)),
                   starts)
    fin = a.finalize(st_).to_pylist()
    tc = {}
    for r in sel:
        tc.setdefault(r[0], [0, 0])
        if r[2] - 1 == w:
            tc[r[0]][r[6]] += 1
    return dict(zip(g[starts].tolist(), fin)), tc


@pytest.mark.parametrize("fn", ["count", "sum", "min", "var", "last"])
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3), st.integers(1, 4),
                                           st.integers(-9, 9), st.booleans(), st.integers(0, 99),
                                           st.integers(0, 1)), max_size=15), max_size=6),
       jump=st.integers(0, 12), snap_at=st.integers(0, 6))
def test_dense_store_equals_block_algebra(fn, batches, jump, snap_at):
    """Batches fold rows (gid, lo offset, span, value, valid, ts, src) into windows ahead of
    the punctuation; after each batch the punctuation closes one window (and sometimes
    ``jump`` more), the last one closes everything. Every popped block == the block algebra over the rows of that window."""
    a = block_agg(agg.count() if fn == "count" else getattr(agg, fn)("v"))
    store = DenseEagerStore([a], {"v": np.dtype(np.int64)}, n_sources=2, tupcnt="stored", ring=2)
    snaps: list = []
    out = _drive(a, store, batches, jump, 0, -5, [], snap_at, snaps)
    assert store.n_slots == 0 and store.n_partials == 0
    if snaps:  # restore mid-run and replay from there: the same blocks again
        s, fo0, held0 = snaps[0]
        store.restore(s)
        store._check()
        assert store.n_slots == len({r[0] for r in held0 if r[2] > fo0})
        again = _drive(a, store, batches, jump, snap_at, fo0, held0, -1, [])
        assert again == out[len(out) - len(again):] and len(again) <= len(out)


def _drive(a, store, batches, jump, start, fo, held, snap_at, snaps):
    """Feed ``batches[start:]`` (+ a final closing step); returns the popped blocks' cells."""
    out = []
    for i in range(start, len(batches) + 1):
        b = batches[i] if i < len(batches) else []
        if i == snap_at:
            snaps.append((store.snapshot(), fo, list(held)))
        rows = [(g, fo + d, fo + d + s, v, ok, t, k) for g, d, s, v, ok, t, k in b]
        if rows:
            store.fold({"gid": np.array([r[0] for r in rows], np.int32),
                        "ts": np.array([r[5] for r in rows], np.int64),
                        "src": np.array([r[6] for r in rows], np.int8),
                        "v": np.array([r[3] for r in rows], np.int64),
                        "v?": np.array([r[4] for r in rows], bool)},
                       np.array([r[1] for r in rows], np.int64), np.array([r[2] for r in rows], np.int64))
            held = held + rows
        store._check()
        new_fo = fo + 10 if i == len(batches) else fo + 1 + (jump if i % 2 else 0)
        for w in range(fo, new_fo):
            blk = store.pop(w)
            exp, tc = _reference_block(a, held, w)
            got = {} if blk is None else dict(zip(blk.gids.tolist(), a.finalize(blk.states[0]).to_pylist()))
            assert got.keys() == exp.keys(), (w, got, exp)
            for g in exp:
                assert got[g] == exp[g] or got[g] == pytest.approx(exp[g], rel=1e-9, abs=1e-9)
            if blk is not None:
                assert blk.tupcnt.tolist() == [tc[g] for g in blk.gids.tolist()]
                out.append((w, sorted(got.items()), blk.tupcnt.tolist()))
        fo = new_fo
        store.release(fo)
        held = [r for r in held if r[2] > fo]
        store._check()
        # a slot per group with a partial in an open window, no more
        assert sorted(store.held_gids().tolist()) == sorted({r[0] for r in held})
    return out


def test_bytes_are_the_arrays_held_and_shrink_after_release():
    a = block_agg(agg.sum("v"))
    st_ = DenseEagerStore([a], {"v": np.dtype(np.int64)}, n_sources=1, tupcnt="none", ring=2)
    n = 1000
    st_.fold({"gid": np.arange(n, dtype=np.int32), "ts": np.zeros(n, np.int64), "v": np.ones(n, np.int64)},
             np.zeros(n, np.int64), np.full(n, 3, np.int64))  # 3 windows: ring grows 2 -> 4
    assert st_.R == 4 and st_.C >= n and st_.n_partials == 3 * n
    held = st_.R * st_.C * (4 + 8 + 8) + st_.C * (4 + 8) + 4 * n  # rows, nn, sum; gid_of, last_w
    assert st_.nbytes == held
    for w in range(3):
        st_.pop(w)
    st_.release(3)  # every slot freed; the slot axis compacts to the minimum
    st_._check()
    assert st_.n_slots == 0 and st_.C == 16 and st_.nbytes == st_.R * 16 * 20 + 16 * 12


@given(st.lists(st.integers(0, 12), max_size=40), st.sets(st.integers(0, 12), max_size=5))
def test_dense_slot_kernels_equal_reference(gids, has):
    """Slot allocation: count of new groups and first-occurrence assignment from the stack."""
    C = 20
    slot_of = np.full(13, -1, np.int32)
    gid_of = np.full(C, -1, np.int32)
    last = np.zeros(C, np.int64)
    for i, g in enumerate(sorted(has)):  # groups that already hold slots 0..
        slot_of[g], gid_of[i] = i, g
    free = list(range(C - 1, len(has) - 1, -1))
    g = np.array(gids, np.int64)
    k = K.dense_count_new(slot_of, g)
    assert k == len(set(gids) - has) and (slot_of[list(has)] >= 0).all()
    assert int(np.count_nonzero(slot_of == -1)) == 13 - len(has)  # marks undone
    s2, gi2, l2 = slot_of.copy(), gid_of.copy(), last.copy()
    ref = K.dense_assign_slots_reference(s2, gi2, l2, g, list(free), -7)
    out = np.empty(len(g), np.int64)
    n_free = K.dense_assign_slots(slot_of, gid_of, last, g, np.array(free, np.int64), len(free),
                                  out, -7)
    assert (out == ref).all() and (slot_of == s2).all() and (gid_of == gi2).all() and (last == l2).all()
    assert n_free == len(free) - k
