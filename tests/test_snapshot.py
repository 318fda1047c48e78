"""Snapshot/restore: stop a run mid-stream, restore into a freshly built plan, finish.

The output (rows in order, punctuations, late side outputs) must be identical
to an uninterrupted run, for every stopping round.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.testing import resumed_output


def _plan(t1: pa.Table, items2: list, schema: pa.Schema, gen) -> oop.Stream:
    a = oop.from_arrow(t1, time="ts", punctuation=gen, batch_size=5, late="side", name="a")
    b = oop.from_batches(items2, time="ts", punctuation=oop.External(), schema=schema, name="b")
    return (a.meld(b)
            .select(pc.field("val") > -80)
            .apply(v2=pc.field("val") * 2)
            .dupelim(["ts", "key"]))


def _same(r1, r2) -> None:
    assert r1.table.equals(r2.table)
    assert [(n, p) for n, p in r1.punctuations] == [(n, p) for n, p in r2.punctuations]
    assert set(r1.late) == set(r2.late)
    for k in r1.late:
        assert r1.late[k].equals(r2.late[k])


@given(st.data())
def test_stop_and_resume_equals_uninterrupted(data):
    t1 = data.draw(disordered_tables(max_delay=None, n_keys=2, max_gap=1))
    t2 = data.draw(disordered_tables(max_delay=4, n_keys=2, max_gap=1))
    items2 = data.draw(exact_punctuation_feed(data.draw(batch_splits(t2))))
    gen = data.draw(st.sampled_from([oop.BoundedDelay(3), oop.Adaptive(0.1, window=8),
                                     oop.Idle(oop.BoundedTuples(2), 5),
                                     oop.Granular(oop.BoundedDelay(1), 4)]))
    full = _plan(t1, items2, t2.schema, gen).run()
    k = data.draw(st.integers(0, 30))
    stopped = _plan(t1, items2, t2.schema, gen).run(stop_after_rounds=k)
    if stopped.checkpoint is None:  # the run finished before round k
        _same(stopped, full)
        return
    resumed = resumed_output(
        stopped, _plan(t1, items2, t2.schema, gen).run(resume_from=stopped.checkpoint))
    _same(resumed, full)


def test_resume_parquet_source_and_twice(tmp_path):
    t = pa.table({"ts": [5, 1, 7, 3, 9, 8, 12, 10, 15, 11], "key": [1] * 10, "val": list(range(10))})
    pq.write_table(t, tmp_path / "f.parquet", row_group_size=3)

    def plan():
        return oop.from_parquet(tmp_path / "f.parquet", time="ts", batch_size=2,
                                punctuation=oop.BoundedDelay(3), late="side").dupelim()

    full = plan().run()
    r1 = plan().run(stop_after_rounds=2)
    r2 = plan().run(resume_from=r1.checkpoint, stop_after_rounds=4)
    r3 = plan().run(resume_from=r2.checkpoint)
    _same(resumed_output(r1, r2, r3), full)
    assert r3.table.num_rows < full.table.num_rows  # the checkpoints held no output


def test_iterator_source_cannot_resume_with_clear_error():
    batches = [pa.record_batch({"ts": [i]}) for i in range(5)]
    r = oop.from_iter(iter(batches), time="ts").run(stop_after_rounds=2)
    with pytest.raises(ValueError, match="cannot resume"):
        oop.from_iter(iter(batches), time="ts").run(resume_from=r.checkpoint)


def test_resume_into_differently_built_plan_is_refused():
    t = pa.table({"ts": [1, 2, 3]})
    r = oop.from_arrow(t, time="ts", batch_size=1).run(stop_after_rounds=1)
    with pytest.raises(ValueError, match="no state for operator 'select'"):
        oop.from_arrow(t, time="ts", batch_size=1).select(pc.field("ts") > 0).run(
            resume_from=r.checkpoint)
