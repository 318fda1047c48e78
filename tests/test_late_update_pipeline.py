"""late='update' end to end: the source forwards late tuples, the window revises its results.

Timeline (tumbling 10 s, Ordered punctuation, one row per batch):

    arrival:  ts=1   ts=12 | P(12) closes [0,10) -> emit count 1
              ts=5   (late: 5 < 12) -> revision of [0,10): count 2, is_revision
              ts=25  | P(25) closes [10,20) -> emit count 1
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, strategies as st

import oop
from oop.testing import batch_splits, disordered_tables
from oop.window import Tumbling, Sliding, agg
from oop.window.reference import window_oracle


def _final_rows(t: pa.Table, keys: list[str]) -> dict[tuple, dict]:
    """The last row emitted per (key..., window_start): the current revision."""
    out: dict[tuple, dict] = {}
    for r in t.to_pylist():
        out[tuple(r[k] for k in keys)] = r
    return out


def test_scenario_revision_follows_late_tuple():
    t = pa.table({"ts": [1, 12, 5, 25], "v": [1, 2, 3, 4]})
    s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.Ordered(), batch_size=1,
                       late="update", name="src")
    res = s.window(Tumbling(10), [agg.count(), agg.sum("v")], late="update",
                   allowed_lateness=100).run()
    got = [(r["window_start"], r["count"], r["sum_v"], r["is_revision"])
           for r in res.table.to_pylist()]
    assert got == [(0, 1, 1, False), (0, 2, 4, True), (10, 1, 2, False), (20, 1, 4, False)]
    assert res.metrics["src"].counters == {"late_forwarded": 1}


@given(st.data())
def test_final_revisions_equal_the_oracle_over_every_tuple(data):
    # unbounded disorder, punctuation that assumes none: many tuples are late,
    # and with enough allowed lateness every one of them is folded in by a revision
    t = data.draw(disordered_tables(max_delay=None, max_rows=120))
    kind = data.draw(st.sampled_from([Tumbling(10), Sliding(20, 5)]))
    batches = data.draw(batch_splits(t))
    s = oop.from_batches(batches, time="ts", unit="ms", punctuation=oop.Ordered(),
                         late="update", schema=t.schema)
    aggs = [agg.count(), agg.sum("val")]
    res = s.window(kind, aggs, by="key", late="update", allowed_lateness=10**9).run()
    keys = ["key", "window_start"]
    expected = _final_rows(window_oracle(t, kind, aggs, by="key", time="ts", unit="ms"), keys)
    got = _final_rows(res.table.drop_columns(["is_revision"]), keys)
    assert got == expected
    assert res.late_total == 0
