"""Buffering window aggregate (004 §3.1, Eq. 6.4, §6.1.5) against the batch oracle.

* ordered input (any batch boundaries): rows == ``window_oracle``; the
  differential variant == the same; row-based windows too;
* consistent slack ``d``: rows == oracle over the tuples the slack kept
  (``time_slack_reference``), and == SortBuffer(time d) -> ordered buffering;
* generous slack: rows == a tuple-at-a-time reference that adds each tuple to
  its still-open extents only;
* disorder within the slack: rows == oracle, nothing dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

import oop
from oop.errors import ConfigError
from oop.iop_baseline import BufferingWindow, SortBuffer
from oop.iop_baseline.buffering_window import Slack
from oop.iop_baseline.sort_buffer import time_slack_reference
from oop.punctuation import External
from oop.testing import batch_splits, disordered_tables
from oop.window import aggregates as agg
from oop.window.kinds import RowSliding, Sliding, Tumbling
from oop.window.reference import canonical, output_schema, window_oracle

KINDS = [Tumbling(5), Sliding(8, 2), Sliding(9, 3), Sliding(4, 4)]
AGGS = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.mean("val")]
DIFF_AGGS = [agg.count(), agg.sum("val"), agg.mean("val")]


def _run(batches, schema, op, punct=None) -> Any:
    res = oop.from_batches(batches, time="ts", punctuation=punct or External(), schema=schema).via(op).run()
    op._check()
    return res


def _sorted(t: pa.Table) -> pa.Table:
    return t.take(pa.compute.sort_indices(t, [("ts", "ascending")]))


@given(st.data())
def test_ordered_input_equals_oracle(data):
    t = _sorted(data.draw(disordered_tables(max_rows=60)))
    kind = data.draw(st.sampled_from(KINDS))
    by = data.draw(st.sampled_from([(), ("key",)]))
    diff = data.draw(st.booleans())
    aggs = DIFF_AGGS if diff else AGGS
    op = BufferingWindow(kind, aggs, by, differential=diff)
    res = _run(data.draw(batch_splits(t)), t.schema, op)
    assert res.table.schema.equals(output_schema(t.schema, kind, aggs, by, "ts"))
    assert canonical(res.table) == canonical(window_oracle(t, kind, aggs, by))
    assert op.dropped == 0 and res.metrics[op.name].state_items == 0


@given(st.data())
def test_row_based_window_equals_oracle(data):
    t = data.draw(disordered_tables(max_rows=40, max_delay=None))
    kind = RowSliding(data.draw(st.integers(1, 6)) + 2, 2)
    aggs = [agg.count(), agg.max("val")]
    op = BufferingWindow(kind, aggs, ("key",))
    res = _run(data.draw(batch_splits(t)), t.schema, op)
    assert canonical(res.table) == canonical(window_oracle(t, kind, aggs, ("key",)))


@given(st.data())
def test_consistent_slack_equals_oracle_over_kept_tuples(data):
    t = data.draw(disordered_tables(max_rows=60, max_delay=data.draw(st.sampled_from([4, 12, None]))))
    d = data.draw(st.integers(0, 10))
    kind = data.draw(st.sampled_from(KINDS))
    op = BufferingWindow(kind, AGGS, ("key",), slack=Slack(d, "consistent"))
    batches = data.draw(batch_splits(t))
    res = _run(batches, t.schema, op)
    _, late = time_slack_reference(t.column("ts").to_pylist(), d)
    keep = np.ones(t.num_rows, bool)
    keep[late] = False
    kept = t.filter(pa.array(keep))
    assert op.dropped == len(late)
    assert canonical(res.table) == canonical(window_oracle(kept, kind, AGGS, ("key",)))
    # the same as a time-slack sort buffer in front of the ordered buffering window
    op2 = BufferingWindow(kind, AGGS, ("key",))
    res2 = oop.from_batches(batches, time="ts", punctuation=External(), schema=t.schema).via(
        SortBuffer(mode="time", slack=d)).via(op2).run()
    assert canonical(res2.table) == canonical(res.table)


def generous_reference(t: pa.Table, kind: Any, d: int, by: str = "key") -> dict:
    """Tuple at a time: each tuple joins the extents still open at its arrival."""
    members: dict[tuple[int, Any], list[int]] = {}
    hwm = None
    bound = None
    dropped = 0
    for r in t.to_pylist():
        ts = r["ts"]
        if hwm is not None:
            bound = hwm - d if bound is None else max(bound, hwm - d)
        lo, hi = kind.wids(np.array([ts]))
        open_w = [w for w in range(int(lo[0]), int(hi[0]))
                  if bound is None or kind.extent(w)[1] > bound]
        if not open_w:
            dropped += 1
            continue
        hwm = ts if hwm is None else max(hwm, ts)
        for w in open_w:
            members.setdefault((w, r[by]), []).append(r["val"])
    out = {}
    for (w, g), vals in members.items():
        s, e = kind.extent(w)
        out[(g, s, e)] = (len(vals), sum(vals), min(vals), max(vals))
    return {"rows": out, "dropped": dropped}


@given(st.data())
def test_generous_slack_equals_tuple_at_a_time_reference(data):
    t = data.draw(disordered_tables(max_rows=50, max_delay=data.draw(st.sampled_from([4, 12, None]))))
    d = data.draw(st.integers(0, 10))
    kind = data.draw(st.sampled_from(KINDS))
    aggs = AGGS[:4]
    op = BufferingWindow(kind, aggs, ("key",), slack=Slack(d, "generous"))
    res = _run(data.draw(batch_splits(t)), t.schema, op)
    ref = generous_reference(t, kind, d)
    got = {(r["key"], r["window_start"], r["window_end"]):
           (r["count"], r["sum_val"], r["min_val"], r["max_val"]) for r in res.table.to_pylist()}
    assert got == ref["rows"]
    assert op.dropped == ref["dropped"]


@given(st.data())
def test_slack_covering_the_disorder_is_exact(data):
    d = data.draw(st.integers(0, 10))
    t = data.draw(disordered_tables(max_rows=60, max_delay=d))
    kind = data.draw(st.sampled_from(KINDS))
    for sem in ("consistent", "generous"):
        diff = sem == "consistent" and data.draw(st.booleans())
        op = BufferingWindow(kind, DIFF_AGGS, ("key",), slack=Slack(d, sem), differential=diff)
        res = _run(data.draw(batch_splits(t)), t.schema, op)
        assert op.dropped == 0
        assert canonical(res.table) == canonical(window_oracle(t, kind, DIFF_AGGS, ("key",)))


def test_buffering_state_is_the_extent_and_differential_touches_less():
    """Sliding RANGE 100 SLIDE 1: the buffer holds ~one extent; both variants agree."""
    n = 2000
    t = pa.table({"ts": pa.array(np.arange(n), pa.int64()), "key": pa.array(np.zeros(n, np.int64)),
                  "val": pa.array(np.arange(n) % 13, pa.int64())})
    kind = Sliding(100, 1)
    outs = []
    for diff in (False, True):
        op = BufferingWindow(kind, [agg.count(), agg.sum("val")], (), differential=diff)
        res = oop.from_arrow(t, time="ts", batch_size=256).via(op).run()
        assert res.metrics[op.name].peak_state_items <= 100 + 256
        outs.append(canonical(res.table))
    assert outs[0] == outs[1]


def test_config_errors_name_the_fix():
    with pytest.raises(ConfigError, match="differential"):
        BufferingWindow(Tumbling(5), [agg.max("val")], differential=True)
    with pytest.raises(ConfigError, match="holistic"):
        BufferingWindow(Tumbling(5), [agg.median("val")])
    with pytest.raises(ConfigError, match="generous"):
        Slack(3, "lenient")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cannot subtract"):
        BufferingWindow(Tumbling(5), [agg.count()], differential=True, slack=Slack(3, "generous"))


@given(st.sampled_from(KINDS + [RowSliding(10, 3), RowSliding(4, 1)]),
       st.lists(st.integers(-50, 200), max_size=40))
def test_nonempty_windows_equals_kind_windows(kind, ts):
    from oop.iop_baseline.buffering_window import nonempty_windows

    t = np.sort(np.asarray(ts, np.int64))
    assert nonempty_windows(kind, t).tolist() == kind.windows(t).tolist()
