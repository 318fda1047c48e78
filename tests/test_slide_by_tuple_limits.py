"""Slide-by-tuple (004 §6.1.4) within bounded memory, or a clear error.

The bins algorithm keeps one partial aggregate per (bin, group) and logs one
update per bin in RANGE for every tuple. Before, a batch reserved lanes for
``2 x rows`` new bins (64K rows x 10k groups: 16 GiB at once) and planned its
whole update log in one go (tens of GB on ms-resolution data): the process
was OOM-killed. Now:

* lanes are reserved for the batch's *actual* new bins (distinct ``t`` and
  ``t + RANGE`` not yet bins);
* a batch is planned and replayed in pieces of at most ``LOG_BUDGET`` logged
  steps -- the output is the same (== the from-scratch oracle) however small
  the pieces;
* lanes beyond the plan's state budget (:mod:`oop.limits`) raise
  ``StateLimitError`` naming the sizes and what to do, before allocating.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop.window.slide_by_tuple as sbt
from oop.errors import StateLimitError
from oop.limits import state_budget
from oop.window import SlideByTuple, agg, window_operator
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.window.reference import window_oracle
from test_window import BOUNDED, assert_same_rows, feeds, run


@pytest.mark.parametrize("kind", [SlideByTuple(6, 1), SlideByTuple(9, 3)], ids=repr)
@settings(max_examples=15)
@given(data=st.data())
def test_planning_in_pieces_changes_nothing(kind, data):
    """A log budget of 1..5 steps replays after (nearly) every row: == the oracle."""
    t, items = data.draw(feeds())
    saved, sbt.LOG_BUDGET = sbt.LOG_BUDGET, data.draw(st.integers(1, 5))
    try:
        res = run(items, t.schema, kind, BOUNDED)
    finally:
        sbt.LOG_BUDGET = saved
    assert_same_rows(res.table, window_oracle(t, kind, BOUNDED, by=["key"], time="ts", unit="ms"))


def _op(kind):
    schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.float64())])
    op = window_operator(kind, [agg.count(), agg.sum("val")], by="key")
    op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    return op, schema


def test_a_batch_reserves_its_new_bins_not_two_per_row():
    op, schema = _op(SlideByTuple(100, 10))
    n = 20_000  # three distinct times: six bins, not 40,000
    b = pa.record_batch([pa.array(np.repeat([5, 6, 7], [7000, 7000, 6000])),
                         pa.array(np.arange(n) % 50), pa.array(np.ones(n))], schema=schema)
    op.on_batch(b)
    assert op.nbins == 6 and op.S <= 256
    rows = sum(x.num_rows for x in op.on_punctuation(Punctuation("ts", 1000))
               if isinstance(x, pa.RecordBatch))
    assert rows > 0


def test_state_beyond_the_memory_limit_raises_before_allocating():
    with state_budget(1 << 20):  # 1 MiB for the plan's operators
        op, schema = _op(SlideByTuple(10_000, 1000))
    n = 5000
    b = pa.record_batch([pa.array(np.arange(n)), pa.array(np.arange(n) % 3000),
                         pa.array(np.ones(n))], schema=schema)
    with pytest.raises(StateLimitError, match=r"state would grow to .* GiB .*\d+ bin "
                                              r"slots x .* group columns .*coarser time unit.*"
                                              r"over the --max-state limit of 1.0 MiB; raise"):
        op.on_batch(b)


@settings(max_examples=25)
@given(st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=40), min_size=1, max_size=5))
def test_new_bins_is_exactly_what_a_batch_inserts(batches):
    op, schema = _op(SlideByTuple(7, 2))
    for ts in batches:
        ts = np.asarray(ts, np.int64)
        predicted, before = op._new_bins(ts), op.nbins
        op.on_batch(pa.record_batch([pa.array(ts), pa.array(ts % 3), pa.array(np.ones(len(ts)))],
                                    schema=schema))
        assert op.nbins - before == predicted
