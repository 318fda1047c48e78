"""IOP sort buffers and Merge: kernel == reference, ordered output, nothing lost.

Sort buffers (004 §3.3) re-emit a disordered stream in order; BSort with
tuple slack ``n`` and time slack ``d`` drop (and count) what arrives too late.
Merge (004 §8.2) is the order-preserving union: it never emits out of order,
and punctuation bridges a lull on one input.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

import oop
from oop.errors import ConfigError
from oop.iop_baseline import Merge, SortBuffer
from oop.iop_baseline.sort_buffer import SortSpec, bsort_reference, time_slack_reference
from oop.punctuation import External
from oop.testing import (batch_splits, check_punctuation_respected, disordered_tables,
                         exact_punctuation_feed, same_bag)


def _with_pos(t: pa.Table) -> pa.Table:
    return t.append_column("pos", pa.array(np.arange(t.num_rows, dtype=np.int64)))


def _run(items, schema, op, punct=None):
    s = oop.from_batches(items, time="ts", punctuation=punct or External(), schema=schema)
    res = s.via(op).run()
    op._check()
    return res


def _is_sorted(t: pa.Table, col: str = "ts") -> bool:
    v = t.column(col).to_numpy() if t.num_rows else np.zeros(0)
    return bool(np.all(v[1:] >= v[:-1]))


# ---- sort buffers ---------------------------------------------------------------
@given(st.data())
def test_bsort_kernel_equals_reference_any_batches(data):
    t = _with_pos(data.draw(disordered_tables(max_rows=50, max_delay=None)))
    n = data.draw(st.integers(0, 8))
    batches = data.draw(batch_splits(t, max_batch=9))
    op = SortBuffer(mode="tuples", slack=n)
    res = _run(batches, t.schema, op)
    out, late = bsort_reference(t.column("ts").to_pylist(), n)
    assert res.table.column("pos").to_pylist() == out
    assert res.metrics[op.name].late.get("drop", 0) == len(late) == op.dropped
    assert res.table.num_rows + len(late) == t.num_rows  # every tuple accounted for
    assert _is_sorted(res.table)


@given(st.data())
def test_time_slack_kernel_equals_reference_any_batches(data):
    t = _with_pos(data.draw(disordered_tables(max_rows=50, max_delay=data.draw(st.sampled_from([3, 10, None])))))
    d = data.draw(st.integers(0, 12))
    op = SortBuffer(mode="time", slack=d)
    res = _run(data.draw(batch_splits(t, max_batch=9)), t.schema, op)
    out, late = time_slack_reference(t.column("ts").to_pylist(), d)
    assert res.table.column("pos").to_pylist() == out
    assert op.dropped == len(late)
    assert _is_sorted(res.table)
    check_punctuation_respected(res.table, res.punctuations)


@given(st.data())
def test_slack_covering_disorder_loses_nothing_and_sorts(data):
    d = data.draw(st.integers(0, 10))
    t = data.draw(disordered_tables(max_rows=60, max_delay=d))
    for op in (SortBuffer(mode="time", slack=d), SortBuffer(mode="tuples", slack=max(t.num_rows, 1))):
        res = _run(data.draw(batch_splits(t)), t.schema, op)
        assert op.dropped == 0
        assert same_bag(res.table, t)
        assert res.table.column("ts").to_pylist() == sorted(t.column("ts").to_pylist())


@given(st.data())
def test_heartbeat_sort_with_valid_punctuation(data):
    t = data.draw(disordered_tables(max_rows=60, max_delay=data.draw(st.sampled_from([5, None]))))
    items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
    op = SortBuffer(mode="punctuation")
    res = _run(items, t.schema, op)
    assert op.dropped == 0 and same_bag(res.table, t)
    assert _is_sorted(res.table)
    check_punctuation_respected(res.table, res.punctuations)
    assert res.metrics[op.name].state_items == 0  # everything released by the end


def test_sort_spec_validation():
    with pytest.raises(ConfigError, match="unknown mode"):
        SortSpec("bogus")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="integer count"):
        SortSpec("tuples", "5s")


def test_sort_late_side_output_keeps_rows():
    t = pa.table({"ts": pa.array([5, 6, 7, 1, 8], pa.int64())})
    op = SortBuffer(mode="time", slack=1, late="side_output")
    res = _run([t.to_batches()[0]], t.schema, op)
    assert res.late[op.name].column("ts").to_pylist() == [1]
    assert res.table.column("ts").to_pylist() == [5, 6, 7, 8]


# ---- merge ------------------------------------------------------------------------
@st.composite
def ordered_inputs(draw, n_inputs: int):
    out = []
    for _ in range(n_inputs):
        k = draw(st.integers(0, 25))
        start = draw(st.integers(0, 30))
        ts = start + np.cumsum(draw(st.lists(st.integers(0, 4), min_size=k, max_size=k)) or [0])[:k]
        out.append(pa.table({"ts": pa.array(np.asarray(ts, np.int64), pa.int64())}))
    return out


@given(st.data())
def test_merge_is_ordered_union(data):
    k = data.draw(st.integers(1, 4))
    tabs = data.draw(ordered_inputs(k))
    srcs = []
    for i, t in enumerate(tabs):
        batches = data.draw(batch_splits(t, max_batch=6))
        items = data.draw(exact_punctuation_feed(batches)) if data.draw(st.booleans()) else batches
        srcs.append(oop.from_batches(items, time="ts", punctuation=External(), schema=t.schema,
                                     name=f"s{i}"))
    op = Merge(k)
    res = srcs[0].via(op, *srcs[1:]).run()
    op._check()
    got = res.table.column("ts").to_pylist()
    assert got == sorted(x for t in tabs for x in t.column("ts").to_pylist())  # ordered, nothing lost
    check_punctuation_respected(res.table, res.punctuations)
    assert op.dropped == 0


@given(st.data())
def test_merge_never_emits_out_of_order_even_on_disordered_input(data):
    t = data.draw(disordered_tables(max_rows=40, max_delay=None))
    u = data.draw(disordered_tables(max_rows=40, max_delay=None))
    op = Merge(2)
    a = oop.from_batches(data.draw(batch_splits(t)), time="ts", punctuation=External(),
                         schema=t.schema, name="a")
    b = oop.from_batches(data.draw(batch_splits(u)), time="ts", punctuation=External(),
                         schema=u.schema, name="b")
    res = a.via(op, b).run()
    assert _is_sorted(res.table)
    assert res.table.num_rows + op.dropped == t.num_rows + u.num_rows  # accounted


def test_merge_buffers_during_a_lull_and_punctuation_bridges_it():
    """
    main:    1 2 3 4 5 6 7 8        (ordered, data every tick)
    control: .  (silent)            lull: without punctuation Merge must hold main's tuples
    """
    main = pa.table({"ts": pa.array(np.arange(1, 9), pa.int64())})

    def run(control_items):
        m = oop.from_batches(main.to_batches(max_chunksize=1), time="ts", punctuation=External(),
                             schema=main.schema, name="main")
        c = oop.from_batches(control_items, time="ts", punctuation=External(),
                             schema=main.schema, name="control")
        op = Merge(2)
        res = m.via(op, c).run()
        return res, op

    empty = pa.record_batch({"ts": pa.array([], pa.int64())})
    silent, op1 = run([empty] * 9)  # a lull as long as main's whole feed
    bridged_items = [oop.Punctuation("ts", v) for v in range(2, 10)]
    bridged, op2 = run(bridged_items)
    assert silent.table.column("ts").to_pylist() == list(range(1, 9))
    assert bridged.table.column("ts").to_pylist() == list(range(1, 9))
    # the lull made Merge buffer main's tuples; punctuation on the control link bridges it
    assert silent.metrics["merge"].peak_state_items == 8  # all of main held back
    assert bridged.metrics["merge"].peak_state_items <= 1
