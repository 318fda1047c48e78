"""Partitioned row-based windows (PA): oracle equality and sound group-wise output punctuation.

The PA operator emits ``GroupPunctuation("window_end", keys, v)``: every
later output row of partition ``k`` has ``window_end >= v``. These tests
drive it with disordered feeds carrying valid (exact) punctuation and prove:

* output == ``window_oracle`` (from-scratch PA over arrival order);
* no output row ever violates a group punctuation emitted before it, and
  each partition's bound never goes backwards;
* each bound is tight: it is the ``window_end`` of the partition's next
  window (last emitted ``window_end`` + slide);
* no linear punctuation is emitted (none is sound, see the module docstring);
* the output (rows and punctuation values) does not depend on batch
  boundaries; invariants hold; snapshot/resume gives the same rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.stream.elements import GroupPunctuation
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import PartitionedRows, agg, window_operator
from oop.window.reference import window_oracle

from test_window import assert_same_rows
from oop.testing import resumed_output

AGGS = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.median("val")]
KINDS = st.sampled_from([PartitionedRows(1, 1), PartitionedRows(4, 2), PartitionedRows(5, 2),
                         PartitionedRows(6, 3), PartitionedRows(3, 3), PartitionedRows(7, 1)])


def _run(items, schema, kind, aggs=AGGS, by=("key",)):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    op = window_operator(kind, aggs, by=list(by))
    res = s.via(op).run()
    op._check()
    return res, op


def check_group_punctuation(table: pa.Table, punctuations, kind, by=("key",)) -> int:
    """Assert the group punctuation is sound, monotone and tight; return the number of bounds."""
    keys = list(zip(*(table.column(c).to_pylist() for c in by)))
    ends = table.column("window_end").to_numpy()
    bound: dict = {}
    n_bounds = 0
    for rows_before, p in punctuations:
        assert isinstance(p, GroupPunctuation), f"only group-wise punctuation is sound, got {p!r}"
        assert p.attr == "window_end" and p.keys.schema.names == list(by)
        pkeys = list(zip(*(p.keys.column(c).to_pylist() for c in by)))
        for k, v in zip(pkeys, p.values.tolist()):
            assert v > bound.get(k, -(2**63)), f"group bound for {k} went backwards or repeated"
            bound[k] = v
            n_bounds += 1
            mine = [i for i in range(table.num_rows) if keys[i] == k]
            before = [int(ends[i]) for i in mine if i < rows_before]
            after = [int(ends[i]) for i in mine if i >= rows_before]
            assert all(e >= v for e in after), (
                f"partition {k}: a row with window_end={min(after)} after P(window_end, {v})")
            assert before and v == max(before) + kind.slide, "bound is the next window's end"
    return n_bounds


@st.composite
def feeds(draw, max_rows=50):
    t = draw(disordered_tables(max_rows=max_rows, max_delay=draw(st.sampled_from([0, 3, None])),
                               n_keys=draw(st.sampled_from([1, 3, 6])),
                               string_keys=draw(st.booleans())))
    items = draw(exact_punctuation_feed(draw(batch_splits(t))))
    return t, items


@settings(max_examples=40)
@given(feed=feeds(), kind=KINDS)
def test_oracle_and_group_punctuation_is_sound(feed, kind):
    t, items = feed
    res, op = _run(items, t.schema, kind)
    assert_same_rows(res.table, window_oracle(t, kind, AGGS, by=["key"], time="ts", unit="ms"))
    n = check_group_punctuation(res.table, res.punctuations, kind)
    # every partition that completed a window got a bound, the last one (count // slide + 1) * slide
    final: dict = {}
    for _, p in res.punctuations:
        final.update(zip(p.keys.column(0).to_pylist(), p.values.tolist()))
    counts = {}
    for k in t.column("key").to_pylist():
        counts[k] = counts.get(k, 0) + 1
    s = kind.slide
    assert final == {k: (c // s + 1) * s for k, c in counts.items() if c >= s}
    assert res.late_total == 0


@settings(max_examples=25)
@given(data=st.data())
def test_batch_boundaries_do_not_matter(data):
    t = data.draw(disordered_tables(max_rows=50, max_delay=5, n_keys=4))
    kind = data.draw(KINDS)
    a, _ = _run(data.draw(exact_punctuation_feed(data.draw(batch_splits(t)))), t.schema, kind)
    b, _ = _run(data.draw(exact_punctuation_feed(data.draw(batch_splits(t)))), t.schema, kind)
    assert_same_rows(a.table, b.table)

    def final_bounds(res):
        out: dict = {}
        for _, p in res.punctuations:
            out.update(zip(p.keys.column(0).to_pylist(), p.values.tolist()))
        return out

    assert final_bounds(a) == final_bounds(b)


def test_scenario_two_partitions():
    """RANGE 4 rows, SLIDE 2 rows, partitions a and b (ranks per partition).

    arrival   a0 a1 b0 | a2 a3 b1 b2 | b3 b4
    batch 1   a completes window 0 (ranks [-2,2)): emit (a, 0, 2); bound a: 4
    batch 2   b completes window 0 ([-2,2)), a window 1 ([0,4)): bounds a: 6, b: 4
    batch 3   b completes window 1 ([0,4)): bound b: 6
    end       incomplete: a window 2 ([2,6)) ; b window 2 ([2,6)), window 3 ([4,8))
    """
    key = ["a", "a", "b", "a", "a", "b", "b", "b", "b"]
    val = [1, 2, 10, 3, 4, 20, 30, 40, 50]
    ts = [5, 1, 3, 9, 7, 8, 12, 11, 15]
    t = pa.table({"ts": ts, "key": key, "val": val})
    batches = [t.slice(0, 3).to_batches()[0], t.slice(3, 4).to_batches()[0],
               t.slice(7, 2).to_batches()[0]]
    res, _ = _run(batches, t.schema, PartitionedRows(4, 2), aggs=[agg.sum("val")])
    rows = [(r["key"], r["window_start"], r["window_end"], r["sum_val"])
            for r in res.table.to_pylist()]
    assert rows == [("a", -2, 2, 3),                                   # batch 1
                    ("b", -2, 2, 30), ("a", 0, 4, 10),                 # batch 2, by (wid, key)
                    ("b", 0, 4, 100),                                  # batch 3
                    ("a", 2, 6, 7), ("b", 2, 6, 120), ("b", 4, 8, 50)]  # end of stream
    got = [(rb, dict(zip(p.keys.column(0).to_pylist(), p.values.tolist())))
           for rb, p in res.punctuations]
    assert got == [(1, {"a": 4}), (3, {"a": 6, "b": 4}), (4, {"b": 6})]
    check_group_punctuation(res.table, res.punctuations, PartitionedRows(4, 2))


def test_group_punctuation_passes_through_meld_and_project():
    """Downstream operators keep the promise: Meld of two PA outputs, then a projection."""
    t = pa.table({"ts": list(range(12)), "key": [1, 2] * 6, "val": list(range(12))})
    k = PartitionedRows(2, 2)

    def pa_stream(name):
        return oop.from_arrow(t, time="ts", unit="ms", batch_size=4, name=name) \
            .window(k, agg.count(), by="key")

    res = pa_stream("x").meld(pa_stream("y")).project(["key", "window_end", "count"]).run()
    assert res.table.num_rows == 12
    assert res.punctuations and all(isinstance(p, GroupPunctuation) for _, p in res.punctuations)
    # Meld emits min over inputs per key: every later row of that key respects it
    keys = res.table.column("key").to_pylist()
    ends = res.table.column("window_end").to_pylist()
    for rb, p in res.punctuations:
        for kk, v in zip(p.keys.column(0).to_pylist(), p.values.tolist()):
            assert all(e >= v for key_, e in zip(keys[rb:], ends[rb:]) if key_ == kk)


@pytest.mark.parametrize("rounds", [2, 5])
def test_snapshot_resume_same_rows_and_bounds(rounds):
    rng = np.random.default_rng(rounds)
    n = 400
    t = pa.table({"ts": np.arange(n) + rng.integers(0, 30, n), "key": rng.integers(0, 7, n),
                  "val": rng.integers(0, 9, n)})

    def plan():
        return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(30),
                              batch_size=23).window(PartitionedRows(6, 3), [agg.count()], by="key")

    full = plan().run()
    part = plan().run(stop_after_rounds=rounds)
    resumed = resumed_output(part, plan().run(resume_from=part.checkpoint))
    assert_same_rows(resumed.table, full.table)
    check_group_punctuation(full.table, full.punctuations, PartitionedRows(6, 3))
