"""Late rows of every IOP baseline: one policy path (drop / side_output / raise) per operator.

Each baseline assumes ordered input (or a slack); rows that break the
assumption are late. For disordered feeds (Hypothesis, random batch
boundaries) and every policy, against a tuple-at-a-time reference of which
rows are late:

* ``drop``: ``metrics.late == {"drop": n_late}``, ``dropped == n_late``, and the
  output accounts for every other row (out + late == in);
* ``side_output``: the late side output holds exactly the late rows, in
  arrival order, counted under ``side_output``;
* ``raise``: ``LateTupleError`` naming the operator iff some row is late.

Baselines: Merge, SortBuffer (time slack), BufferingWindow (ordered input),
GigascopeLowLevel, OPOB-Join, OPIB-Join.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.errors import LateTupleError
from oop.iop_baseline.buffering_window import BufferingWindow
from oop.iop_baseline.gigascope import GigascopeLowLevel
from oop.iop_baseline.merge import Merge
from oop.iop_baseline.opib_join import OPIBJoin
from oop.iop_baseline.opob_join import OPOBJoin
from oop.iop_baseline.sort_buffer import SortBuffer, time_slack_reference
from oop.join.spec import JoinConfig, WindowPredicate
from oop.testing import batch_splits, disordered_tables
from oop.window import agg
from oop.window.kinds import Tumbling

POLICIES = ["drop", "side_output", "raise"]
WINDOW = 5


def _running_max_late(values: list[int]) -> list[bool]:
    """Row i is late when it is below an earlier row (ordered-input assumption)."""
    out, m = [], None
    for v in values:
        out.append(m is not None and v < m)
        m = v if m is None else max(m, v)
    return out


def _merge_late(batches: list[pa.RecordBatch]) -> list[bool]:
    """Single-input Merge: a row is late below the largest time of earlier batches
    (a batch is sorted before it is merged, so disorder inside a batch is fine)."""
    out, m = [], None
    for b in batches:
        ts = b.column("ts").to_pylist()
        out += [m is not None and t < m for t in ts]
        kept = [t for t in ts if m is None or t >= m]
        if kept:
            m = max(kept) if m is None else max(m, max(kept))
    return out


def _src(batches, schema, name="src"):
    return oop.from_batches(batches, time="ts", unit="ms", punctuation=oop.External(),
                            schema=schema, name=name)


def _single(which: str, policy: str):
    """(operator, reference late mask from (table, batches), output rows kept per input row)."""
    if which == "merge":
        return Merge(1, late=policy, name="op"), lambda t, bs: _merge_late(bs)
    if which == "sort":
        def ref(t, bs):
            late = set(time_slack_reference(t.column("ts").to_pylist(), 3)[1])
            return [i in late for i in range(t.num_rows)]
        return SortBuffer(mode="time", slack=3, late=policy, name="op"), ref
    if which == "buffering":
        return (BufferingWindow(Tumbling(WINDOW), agg.count(), late=policy, name="op"),
                lambda t, bs: _running_max_late(t.column("ts").to_pylist()))
    if which == "gigascope":
        return (GigascopeLowLevel("key", WINDOW, table_size=8, late=policy, name="op"),
                lambda t, bs: _running_max_late([v // WINDOW for v in t.column("ts").to_pylist()]))
    raise AssertionError(which)


def _run(plan, policy: str, n_late: int):
    """Run ``plan``; under ``raise`` assert it raises iff rows are late and return None."""
    if policy != "raise":
        return plan.run()
    if n_late:
        with pytest.raises(LateTupleError, match="op"):
            plan.run()
    else:
        assert plan.run().late_total == 0
    return None


def _out_rows(which: str, table: pa.Table) -> int:
    """Input rows the output accounts for (rows, or the sum of the counts)."""
    if which in ("merge", "sort"):
        return table.num_rows
    return int(sum(table.column("count").to_pylist())) if table.num_rows else 0


@pytest.mark.parametrize("which", ["merge", "sort", "buffering", "gigascope"])
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=15)
@given(data=st.data())
def test_single_input_baselines_route_late_rows(which, policy, data):
    t = data.draw(disordered_tables(min_rows=1, max_rows=40, max_delay=6))
    batches = data.draw(batch_splits(t, max_batch=8))
    op, ref = _single(which, policy)
    late = ref(t, batches)
    n_late = sum(late)
    res = _run(_src(batches, t.schema).via(op), policy, n_late)
    if res is None:
        return
    m = res.metrics["op"]
    assert dict(m.late) == ({policy: n_late} if n_late else {})
    assert op.dropped == n_late
    assert _out_rows(which, res.table) + n_late == t.num_rows  # every row accounted for
    if policy == "side_output" and n_late:
        assert res.late["op"].to_pylist() == t.filter(pa.array(late)).to_pylist()
    else:
        assert "op" not in res.late or res.late["op"].num_rows == 0
    op._check()


@pytest.mark.parametrize("cls", [OPOBJoin, OPIBJoin], ids=lambda c: c.__name__)
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=12)
@given(data=st.data())
def test_order_preserving_joins_route_late_rows(cls, policy, data):
    left = data.draw(disordered_tables(min_rows=1, max_rows=30, max_delay=4))
    right = data.draw(disordered_tables(min_rows=1, max_rows=30, max_delay=4))
    late_l = _running_max_late(left.column("ts").to_pylist())
    late_r = _running_max_late(right.column("ts").to_pylist())
    n_late = sum(late_l) + sum(late_r)
    cfg = JoinConfig(WindowPredicate.band(3, 3), (("key", "key"),), name="op", late=policy)
    plan = _src(data.draw(batch_splits(left, max_batch=8)), left.schema, "L").via(
        cls(cfg), _src(data.draw(batch_splits(right, max_batch=8)), right.schema, "R"))
    res = _run(plan, policy, n_late)
    if res is None:
        return
    assert dict(res.metrics["op"].late) == ({policy: n_late} if n_late else {})
    if policy == "side_output" and n_late:
        got = sorted(map(repr, res.late["op"].to_pylist()))
        exp = sorted(map(repr, left.filter(pa.array(late_l)).to_pylist()
                         + right.filter(pa.array(late_r)).to_pylist()))
        assert got == exp
    else:
        assert "op" not in res.late or res.late["op"].num_rows == 0


def test_kept_fraction_gauge_reports_the_drops():
    t = pa.table({"ts": [1, 5, 3, 7, 2, 9], "key": [0] * 6, "val": [0] * 6})
    op = GigascopeLowLevel("key", 2, table_size=8, name="op")
    res = _src(t.to_batches(max_chunksize=2), t.schema).via(op).run()
    # windows 0, 2, 1 (late), 3, 1 (late), 4
    assert res.metrics["op"].late == {"drop": 2} and op.dropped == 2
    assert res.metrics["op"].gauges["kept_fraction"] == pytest.approx(4 / 6)
    assert int(np.sum(res.table.column("count").to_numpy())) == 4


def test_gigascope_refuses_update():
    with pytest.raises(oop.ConfigError, match="update"):
        GigascopeLowLevel("key", 2, table_size=8, late="update")
