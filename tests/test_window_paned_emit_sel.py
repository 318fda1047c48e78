"""Paned-WID's fused select emission (``paned_emit_sel``) == its tuple-at-a-time reference.

:meth:`PaneCombiner.emit_block` with min/max/first/last lanes goes through
:func:`~oop.window.paned_kernels.paned_emit_sel`, whose prefix/suffix block
state persists from punctuation to punctuation. The test drives a
:class:`~oop.window.ring.Ring` and the combiner directly, like the operator
does: batches of non-late tuples (int or float values, ties, nulls, codes
appearing late), a punctuation after each batch emitting every covered
window, then the purge. Every emitted block must equal
:func:`~oop.window.paned_kernels.paned_emit_sel_ref` (each window folded
from all tuples ever seen in its panes), for every op, int and float lanes
side by side, tumbling (P = 1) and sliding windows, range not a multiple of
slide (pane = gcd), gaps without data (the state restarts), and windows
whose first panes were purged before the first punctuation. After each
punctuation the ring keeps its invariants and every cell outside the live
panes holds its lane's identity (the kernel reset the leaving panes).

Timeline of the persistent state (P = 3, slide = 1 pane)::

    panes       0  1  2 | 3  4  5 | 6  7  8      blocks of P pane ids
    punct 1     windows [0,3) [1,4): pre folds 3, 4 (block 1); suf of block 0
    punct 2     windows [2,5) [3,6): pre folds 5;  suf of block 1 (closed at [3,6))
    window [2,5) = suf[2] (+) pre[4]; window [3,6) = suf[3] (block start)
"""

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from oop.window import Sliding, agg
from oop.window.paned import PaneCombiner
from oop.window.paned_kernels import paned_emit_sel_ref
from oop.window.ring import Ring
from oop.window.values import column_values, lane_infos

I64MAX = np.iinfo(np.int64).max
I64MIN = np.iinfo(np.int64).min
OPS = ["min", "max", "first", "last"]


@st.composite
def scripts(draw):
    g = draw(st.integers(1, 3))
    ks = draw(st.integers(1, 3))
    s = g * ks
    r = s * draw(st.integers(1, 4)) + (g if ks > 1 and draw(st.booleans()) else 0)
    o = draw(st.integers(-4, 4))
    floats = draw(st.booleans())
    # Any op on either column, in any lane order -- but the lane *counts* per dtype come from a
    # small menu: the kernel is compiled once per count of int / float / select lanes (tuples
    # of arrays), so free counts cost a fresh ~3 s specialization per example. Two ops on v,
    # none or two on u: float select lanes alone, int alone, and side by side.
    sel = [(op, "v") for op in draw(st.permutations(OPS))[:2]]
    if draw(st.booleans()):
        sel += [(op, "u") for op in draw(st.permutations(OPS))[:2]]
    sel = draw(st.permutations(sel))
    with_sum = draw(st.booleans())
    n_steps = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2 ** 31))
    nulls = draw(st.booleans())
    lut = draw(st.booleans())
    return g, s, r, o, floats, sel, with_sum, n_steps, seed, nulls, lut


def _partial(op, t, v):
    return (int(t), v) if op in ("first", "last") else v


def _eq(a, b) -> bool:
    """Equality with NaN == NaN (NaN is the float identity of min, docs/semantics.md)."""
    return bool(a == b) or (a != a and b != b)


@settings(max_examples=15, deadline=None)
@given(scripts())
def test_emit_sel_equals_reference_over_punctuations(script):
    g, s, r, o, floats, sel, with_sum, n_steps, seed, nulls, use_lut = script
    rng = np.random.default_rng(seed)
    kind = Sliding(r, s, origin=o)
    o = kind.o  # the grid of window ends and panes (origin + range mod slide: Spark alignment)
    vt = pa.float64() if floats else pa.int64()
    schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("v", vt), ("u", pa.int64())])
    aggs = [agg.count()] + ([agg.sum("v")] if with_sum else []) + [getattr(agg, op)(c) for op, c in sel]
    lanes = lane_infos(aggs, schema)
    pc = PaneCombiner(kind, lanes, aggs)
    gp, P = pc.g, pc.P
    sel_l = [li for li in lanes if li.lane.op in OPS]
    sum_l = [li for li in lanes if li.lane.op == "sum"]
    lwm = int(rng.integers(-20, 20))
    ring = None
    cells: dict = {}  # (pane, code) -> [rows, [sums], [partials]]
    emitted = None
    n_codes = 0
    for step in range(n_steps):
        m = int(rng.integers(0, 12))
        if step == 0:
            m = max(m, 1)
        # non-late tuples: times from the low watermark on (the first batch may go below it)
        lo_t = lwm - (3 * r if step == 0 else 0)
        ts = lo_t + rng.integers(0, 3 * r + 1, m)
        if m:  # like the encoder: codes only appear with tuples
            n_codes = max(n_codes, int(rng.integers(1, 3 + 2 * step)))
        key = rng.integers(0, n_codes, m)
        v = rng.integers(-3, 4, m)
        u = rng.integers(-3, 4, m)
        vmask = rng.random(m) < (0.3 if nulls else 0.0)
        batch = pa.RecordBatch.from_arrays(
            [pa.array(ts), pa.array(key), pa.array(v / 2 if floats else v, vt, mask=vmask),
             pa.array(u)], schema=schema)
        if m:
            codes = key.astype(np.int64)  # codes = key ids (dense, appear in any order)
            pane = np.floor_divide(ts - o, gp)
            cols = {c: column_values(batch, c) for c in ("v", "u")}
            if ring is None:
                ring = Ring(lanes, base=int(pane.min()), rows=4, codes=2)
            elif int(pane.min()) < ring.base:
                ring.lower_base(int(pane.min()))
            ring.update(codes, pane, None, cols, ts, n_codes, single=True, top=int(pane.max()) + 1)
            for i in range(m):
                cell = cells.setdefault((int(pane[i]), int(codes[i])),
                                        [0, [0] * len(sum_l), [None] * len(sel_l)])
                cell[0] += 1
                for q, li in enumerate(sum_l):
                    if not vmask[i]:
                        cell[1][q] += batch.column("v")[i].as_py()
                for q, li in enumerate(sel_l):
                    col = li.lane.column
                    x = batch.column(col)[i].as_py()
                    if x is None:
                        continue
                    part = _partial(li.lane.op, ts[i], x)
                    y = cell[2][q]
                    if y is None:
                        cell[2][q] = part
                    else:
                        cell[2][q] = min(y, part) if li.lane.op in ("min", "first") else max(y, part)
        lwm += int(rng.integers(0, 2 * r + 1))
        if ring is None:
            continue
        # the operator's _advance: windows ending <= lwm, not past the data
        first_open = (lwm - o) // s
        start = emitted if emitted is not None else pc.first_window(ring.base)
        stop = min(first_open, pc.last_window(ring.top - 1) + 1)
        if stop > start:
            wids = list(range(start, stop))
            n = n_codes
            lut = (np.arange(n, dtype=np.int64) * 7 + 3) if use_lut else None
            res = pc.emit_block(ring, wids, n, key_lut=lut)
            assert res is not None
            codes_out, lanes_out, (wstart, wend) = res
            exp = paned_emit_sel_ref({k: tuple(x) for k, x in cells.items()},
                                     [li.lane.op for li in sel_l], wids[0], len(wids), s, r, gp, o)
            assert len(exp) == codes_out.shape[0]
            for i, (c, es, ee, rows, sums, parts) in enumerate(exp):
                assert codes_out[i] == (c * 7 + 3 if use_lut else c)
                assert (wstart[i], wend[i]) == (es, ee)
                assert lanes_out[("rows", None)][i] == rows
                for q, li in enumerate(sum_l):
                    assert math.isclose(lanes_out[li.key][i], sums[q], abs_tol=1e-9)
                for q, li in enumerate(sel_l):
                    op = li.lane.op
                    got = lanes_out[li.key][i]
                    if op in ("first", "last"):
                        gt = lanes_out[("t:" + op, li.key[1])][i]
                        tid = I64MAX if op == "first" else I64MIN
                        exp = (tid, li.identity()) if parts[q] is None else parts[q]
                        assert gt == exp[0] and _eq(got, exp[1])
                    else:
                        assert _eq(got, li.identity() if parts[q] is None else parts[q])
        emitted = max(first_open, emitted if emitted is not None else first_open)
        ring.purge_below(pc.first_unit_needed(emitted))
        ring._check()
        # every cell outside the live panes holds its identity (leaving panes were reset)
        live_rows = {u_ & ring.mask for u_ in range(ring.base, ring.top)}
        for li in lanes:
            a = ring.arr[ring.alias(li.key)].reshape(ring.R, ring.C)
            for rr in range(ring.R):
                if rr not in live_rows:
                    assert all(_eq(x, li.identity()) for x in a[rr, :n_codes]), (li.key, rr)
                    if li.key in ring.tarr:
                        t = ring.tarr[li.key].reshape(ring.R, ring.C)[rr, :n_codes]
                        assert (t == (I64MAX if li.lane.op == "first" else I64MIN)).all()
        assert P >= 1


# ---- end to end: checkpoint in the middle, arrival order -------------------------------------
from oop.operators.base import StreamInfo  # noqa: E402
from oop.stream.elements import Punctuation  # noqa: E402
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed  # noqa: E402
from oop.window import window_operator  # noqa: E402
from oop.window.reference import window_oracle  # noqa: E402

from test_window import assert_same_rows  # noqa: E402


def _drive(items, schema, kind, aggs, cut):
    """Feed ``items`` to a Paned-WID operator; at item ``cut`` snapshot it and go on with a
    fresh operator restored from the snapshot (the select block state must be rebuilt)."""
    def make():
        op = window_operator(kind, aggs, by="key", method="paned")
        op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
        return op

    op = make()
    out = []
    for i, it in enumerate(items):
        if i == cut:
            snap = op.snapshot()
            op = make()
            op.restore(snap)
        res = op.on_batch(it) if isinstance(it, pa.RecordBatch) else op.on_punctuation(it)
        out += [o for o in res if isinstance(o, pa.RecordBatch)]
        if op.ring is not None:
            op.ring._check()
    out += [o for o in op.flush() if isinstance(o, pa.RecordBatch)]
    return pa.Table.from_batches(out, schema=op.out_schema) if out else op.out_schema.empty_table()


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_select_state_survives_checkpoints_and_equals_oracle(data):
    kind = data.draw(st.sampled_from([Sliding(12, 2), Sliding(10, 4, origin=1), Sliding(9, 3),
                                      Sliding(5, 5)]))
    t = data.draw(disordered_tables(max_rows=90, max_delay=data.draw(st.sampled_from([0, 5, 20])),
                                    n_keys=data.draw(st.sampled_from([1, 4, 9])), max_gap=3))
    if data.draw(st.booleans()):
        t = t.set_column(2, "val", t.column("val").cast(pa.float64()))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    cut = data.draw(st.integers(0, len(items)))
    aggs = data.draw(st.sampled_from([[agg.max("val")], [agg.count(), agg.min("val")],
                                      [agg.first("val"), agg.last("val"), agg.sum("val")]]))
    got = _drive(items, t.schema, kind, aggs, cut)
    exp = window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms")
    assert_same_rows(got, exp)


def test_scenario_one_pass_window_answers():
    """P = 3 panes of 1 ms, slide 1 ms, one key; three punctuations close the windows ending
    1-4, 5-6 and 7-9 (the block state carries over from one to the next)::

        ts      0  1  2  3  4  5  6         blocks of panes: [0,3) [3,6) [6,9)
        val     5  1  2  7  0  3  4
        end     1  2  3  4  5  6  7  8  9   window [end - 3, end)
        max     5  5  5  7  7  7  4  4  4   e.g. [2,5) = suf[2] (+) pre[4] = max(2, max(7, 0))
        first   5  5  5  1  2  7  0  3  4
    """
    val = np.array([5, 1, 2, 7, 0, 3, 4], np.int64)
    ts = np.arange(7, dtype=np.int64)
    t = pa.table({"ts": ts, "key": np.zeros(7, np.int64), "val": val})
    items = [t.to_batches()[0], Punctuation("ts", 4), Punctuation("ts", 6), Punctuation("ts", 9)]
    got = _drive(items, t.schema, Sliding(3, 1), [agg.max("val"), agg.first("val")], cut=-1)
    d = got.sort_by("window_end").to_pydict()
    assert d["window_end"] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert d["max_val"] == [5, 5, 5, 7, 7, 7, 4, 4, 4]
    assert d["first_val"] == [5, 5, 5, 1, 2, 7, 0, 3, 4]
