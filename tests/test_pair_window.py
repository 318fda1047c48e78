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
