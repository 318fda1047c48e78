"""PairWindow: windows on the pair (S0.ts, S1.ts) of a join's output, closed by joint punctuation.

Timeline (cells 10 x 10, band join, joint punctuation)::

    S0 punct P(ts, 40), S1 punct P(ts, 40)  -> join emits J(ts < 40-r, ts_right < 40-r)-style boxes
    a cell [0,10) x [0,10) is complete as soon as a box (u, v) with u >= 10, v >= 10 arrives,
    before either individual bound reaches 10 on *both* attributes' slabs.

Properties: result == the tuple-at-a-time reference over the nested-loop join, for random
disordered inputs with valid punctuation, every punctuation mode; emitted rows respect the
output punctuation; cells covered by the last punctuation come out before the flush; the
state is a set of open (cell, key) rows with no complete cell held (``_check``).
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.join import WindowPredicate
from oop.join.pair_window import PairWindow, pair_window_reference
from oop.operators.base import StreamInfo
from oop.stream.elements import JointPunctuation, Punctuation
from oop.window import aggregates as agg

from test_join_window_time import _feeds, _joined

AGGS = [agg.count(), agg.sum("val"), agg.max("val_right"), agg.mean("val")]


def _canon(rows):
    return Counter(tuple(sorted((k, round(v, 9) if isinstance(v, float) else v)
                                for k, v in r.items())) for r in rows)


@given(feeds=_feeds(), mode=st.sampled_from(["individual", "joint", "both"]),
       r0=st.integers(0, 8), r1=st.integers(0, 8), s0=st.integers(1, 12), s1=st.integers(1, 12),
       keyed=st.booleans())
def test_pair_window_equals_reference_over_the_join(feeds, mode, r0, r1, s0, s1, keyed):
    (L, Lfeed), (R, Rfeed) = feeds
    a = oop.from_batches(Lfeed, time="ts", punctuation=oop.External(), name="S0")
    b = oop.from_batches(Rfeed, time="ts", punctuation=oop.External(), name="S1")
    by = ("key",) if keyed else ()
    res = a.join(b, on="key", band=(r0, r1), punctuation=mode) \
        .pair_window(AGGS, sizes=(s0, s1), by=by).run()
    joined = _joined(L, R, WindowPredicate.band(r0, r1)).to_pylist()
    expected = pair_window_reference(joined, AGGS, times=("ts", "ts_right"), sizes=(s0, s1),
                                     by=by)
    assert _canon(res.table.to_pylist()) == _canon(expected)
    # every emitted punctuation holds for all later output rows
    rows = res.table.to_pylist()
    for before, p in res.punctuations:
        later = rows[before:]
        if isinstance(p, Punctuation):
            assert all(r[p.attr] >= p.value for r in later)
        elif isinstance(p, JointPunctuation):
            assert not any(p.covers_point(r) for r in later)


def _op(**kw) -> PairWindow:
    schema = pa.schema([("ts", pa.int64()), ("ts_right", pa.int64()), ("v", pa.int64())])
    op = PairWindow([agg.count(), agg.sum("v")], **kw)
    op.open([StreamInfo("j", schema, {"ts": "ms", "ts_right": "ms"}, "ts")])
    return op


def test_joint_punctuation_closes_a_box_that_neither_slab_covers():
    op = _op(sizes=(10, 10))
    op.on_batch(pa.record_batch({"ts": [1, 15, 3], "ts_right": [2, 4, 25], "v": [1, 2, 3]}))
    # individual bounds below 10 on both attributes cover nothing
    assert op.on_punctuation(Punctuation("ts", 9)) == [Punctuation("ts_end", 10)]
    # a joint box (12, 12) covers cell [0,10)x[0,10) only
    out = op.on_punctuation(JointPunctuation((("ts", 12), ("ts_right", 12))))
    assert out[0].to_pylist() == [{"ts_start": 0, "ts_end": 10, "ts_right_start": 0,
                                   "ts_right_end": 10, "count": 1, "sum_v": 1}]
    assert out[1] == JointPunctuation((("ts_end", 13), ("ts_right_end", 13)))
    op._check()
    # a dominated box adds nothing; the slab on ts_right closes [10,20)x[0,10)
    assert op.on_punctuation(JointPunctuation((("ts", 11), ("ts_right", 5)))) == []
    out = op.on_punctuation(Punctuation("ts_right", 10))
    assert [(r["ts_start"], r["ts_right_start"]) for r in out[0].to_pylist()] == [(10, 0)]
    assert op.state_size().items == 1
    op._check()
    assert [r["count"] for r in op.flush()[0].to_pylist()] == [1]


def test_snapshot_restore_gives_identical_output():
    batches = [pa.record_batch({"ts": [1, 15, 3], "ts_right": [2, 4, 25], "v": [1, 2, 3]}),
               pa.record_batch({"ts": [7, 22], "ts_right": [9, 30], "v": [4, 5]})]
    a = _op(sizes=(10, 10))
    a.on_batch(batches[0])
    snap = a.snapshot()
    b = _op(sizes=(10, 10))
    b.restore(snap)
    for op in (a, b):
        op.on_batch(batches[1])
    assert [x.to_pylist() for x in a.flush()] == [x.to_pylist() for x in b.flush()]


def test_bad_configuration_messages():
    import pytest

    with pytest.raises(oop.ConfigError, match="not supported by pair windows"):
        PairWindow([agg.median("v")])
    with pytest.raises(oop.ConfigError, match="not a progressing attribute"):
        _op(times=("ts", "v"))


def _keyed_op(**kw) -> PairWindow:
    schema = pa.schema([("ts", pa.int64()), ("ts_right", pa.int64()), ("key", pa.int64()),
                        ("v", pa.int64())])
    op = PairWindow([agg.count(), agg.sum("v")], by="key", **kw)
    op.open([StreamInfo("j", schema, {"ts": "ms", "ts_right": "ms"}, "ts")])
    return op


def _rotating(n: int, period: int, sets: int):
    """Rows 1 ms apart; key set ``(ts // period) % sets``: keys are forgotten and come back."""
    ts = list(range(n))
    key = [t % 5 + 100 * ((t // period) % sets) for t in ts]
    return [{"ts": t, "ts_right": t + (t % 3), "key": k, "v": t % 7} for t, k in zip(ts, key)]


def _drive(op: PairWindow, rows, step: int, stop: int | None = None):
    out = []
    for i in range(0, len(rows), step):
        if stop is not None and i >= stop:
            return out
        chunk = rows[i:i + step]
        op.on_batch(pa.RecordBatch.from_pylist(chunk, schema=pa.schema(
            [("ts", pa.int64()), ("ts_right", pa.int64()), ("key", pa.int64()),
             ("v", pa.int64())])))
        for e in op.on_punctuation(Punctuation("ts", chunk[-1]["ts"])):
            if isinstance(e, pa.RecordBatch):
                out += e.to_pylist()
        op._check()
    for e in op.flush():
        out += e.to_pylist()
    return out


@given(n=st.integers(1, 300), period=st.integers(1, 20), sets=st.integers(2, 5),
       step=st.integers(1, 30), s0=st.integers(1, 6))
def test_pair_window_forgets_keys_and_equals_the_reference(n, period, sets, step, s0):
    """Key compaction checked at every emission (KEYS_COMPACT_MIN patched to 1): rotating
    key sets are forgotten and come back with new codes; the rows equal the reference."""
    import pytest
    import oop.join.pair_window as PW

    rows = _rotating(n, period, sets)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(PW, "KEYS_COMPACT_MIN", 1)
        op = _keyed_op(sizes=(s0, 4))
        got = _drive(op, rows, step)
    exp = pair_window_reference(rows, op.aggs, times=("ts", "ts_right"), sizes=(s0, 4),
                                by=("key",))
    assert _canon(got) == _canon(exp)
    assert op.enc.n_codes <= 4 * 5 * ((step + s0) // period + 2)  # the open cells' keys
    # with two key sets at most half the dictionary is dead at once, and compaction needs
    # more than half: only three or more sets must compact. The dictionary is checked when
    # it reaches 1, 2, 4, 8, ... keys; with s0 >= 4 a set's cells can still be open at each
    # check, so none sees more than half dead (Hypothesis found n=121, period=10, sets=3,
    # step=9, s0=6); 3000 sampled cases with s0 < 4 all compacted
    if sets >= 3 and n > 4 * period * sets and step < period and s0 < 4:
        assert op.key_compactions > 0


def test_pair_window_snapshot_after_compaction_gives_identical_output():
    import pytest
    import oop.join.pair_window as PW

    rows = _rotating(400, 10, 4)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(PW, "KEYS_COMPACT_MIN", 1)
        full = _drive(_keyed_op(sizes=(3, 4)), rows, 7)
        a = _keyed_op(sizes=(3, 4))
        first = _drive(a, rows, 7, stop=210)
        assert a.key_compactions > 0
        b = _keyed_op(sizes=(3, 4))
        b.restore(a.snapshot())
        rest = _drive(b, rows[210:], 7)
    assert first + rest == full


def test_pair_window_never_repeating_keys_bounded():
    """Session ids: one new key per row; the dictionary stays under twice the first
    compaction threshold plus one batch, for 4x as many keys (default KEYS_COMPACT_MIN)."""
    import oop.join.pair_window as PW

    peaks = []
    for n in (10_000, 40_000):
        rows = [{"ts": t, "ts_right": t, "key": 7 * t + 3, "v": 1} for t in range(n)]
        op = _keyed_op(sizes=(10, 10))
        peak = 0
        orig = op.on_batch

        def on_batch(batch, port=0, op=op, orig=orig):
            nonlocal peak
            out = orig(batch, port)
            peak = max(peak, op.enc.n_codes)
            return out
        op.on_batch = on_batch
        got = _drive(op, rows, 500)
        assert sum(r["count"] for r in got) == n and len(got) == n
        peaks.append(peak)
        assert op.key_compactions >= (n // (2 * PW.KEYS_COMPACT_MIN))
    assert max(peaks) <= 2 * PW.KEYS_COMPACT_MIN + 500
