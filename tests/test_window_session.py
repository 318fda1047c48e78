"""Session windows (oop.window.session): operator == tuple-at-a-time reference == batch oracle.

Timeline of the scenario (gap 5, key a; covers ``[t, t+5)``)::

    t:      1   3       8               20
            [1------6)
                [3------8)                  1 and 3 merge: session [1, 8)
                        [8------13)         touches [1, 8) (8 == 8): a session of its own
                                        [20-----25)
    P(8)  closes [1, 8)        P(13) closes [8, 13)       end of stream: [20, 25)
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oop
from oop.checkpoint.codec import decode, encode
from oop.errors import ConfigError, LateTupleError, StateLimitError
from oop.limits import state_budget
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.testing import (batch_splits, disordered_feeds, disordered_tables,
                         trailing_punctuation_feed)
from oop.window import Session, SessionAggregate, agg
from oop.window.session import SessionReference, session_oracle, session_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGGS = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.mean("val"),
        agg.var("val"), agg.std("val"), agg.first("val"), agg.last("val")]


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        if x is None or y is None:
            return x is y
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    return x == y


def _key(r: dict) -> tuple:
    return tuple(str(r.get(k)) for k in ("key", "window_start", "window_end", "is_retraction"))


def assert_rows_equal(got: list[dict], want: list[dict]) -> None:
    """Order-free equality of two row lists (floats to 1e-9, NaN == NaN)."""
    assert len(got) == len(want), (got, want)
    g, w = sorted(got, key=_key), sorted(want, key=_key)
    for a, b in zip(g, w):
        assert a.keys() == b.keys(), (a, b)
        assert all(_same(a[k], b[k]) for k in a), (a, b)


def _open(schema: pa.Schema, gap: int, aggs=AGGS, by=("key",), **kw: Any) -> SessionAggregate:
    op = SessionAggregate(Session(gap), aggs, by=list(by), **kw)
    op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    return op


def _rows(out: list) -> list[dict]:
    return [r for b in out if isinstance(b, pa.RecordBatch) for r in b.to_pylist()]


def run_steps(op: SessionAggregate, items: list, flush: bool = True) -> list[list[dict]]:
    """Push a feed into ``op``; the rows released by each element (+ a final flush)."""
    steps = []
    for item in items:
        out = op.on_punctuation(item) if isinstance(item, Punctuation) else op.on_batch(item)
        op._check()
        steps.append(_rows(out))
    if flush:
        steps.append(_rows(op.flush()))
    return steps


def ref_steps(ref: SessionReference, items: list) -> list[list[dict]]:
    steps = []
    for item in items:
        if isinstance(item, Punctuation):
            steps.append(ref.on_punctuation(item.value))
        else:
            steps.append([r for row in item.to_pylist() for r in ref.on_tuple(row, row["ts"])])
    steps.append(ref.flush())
    return steps


def on_time(items: list, bound_lag: int = 0) -> pa.Table:
    """The rows of a feed that are not late (``ts >= lwm - bound_lag`` at arrival)."""
    lwm, keep, schema = None, [], None
    for item in items:
        if isinstance(item, Punctuation):
            lwm = item.value if lwm is None else max(lwm, item.value)
            continue
        schema = item.schema
        keep += [r for r in item.to_pylist() if lwm is None or r["ts"] >= lwm - bound_lag]
    return pa.Table.from_pylist(keep, schema=schema)


# ---- scenarios ----------------------------------------------------------------------
def test_scenario_merge_touch_and_close():
    t = pa.table({"ts": [3, 1, 8, 20], "key": [0, 0, 0, 0], "val": [1, 2, 3, 4]})
    op = _open(t.schema, 5, [agg.count(), agg.sum("val")])
    b = t.to_batches()[0]
    steps = run_steps(op, [b, Punctuation("ts", 7), Punctuation("ts", 8), Punctuation("ts", 13)])
    assert steps[1] == []  # P(7): [1, 8) still open
    assert [(r["window_start"], r["window_end"], r["count"], r["sum_val"]) for r in steps[2]] \
        == [(1, 8, 2, 3)]
    assert [(r["window_start"], r["window_end"]) for r in steps[3]] == [(8, 13)]
    assert [(r["window_start"], r["window_end"]) for r in steps[4]] == [(20, 25)]


def test_late_tuple_bridges_two_open_sessions():
    # gap 5: [0, 5) and [7, 12) are apart; a tuple at 4 covers [4, 9) and bridges them
    t = pa.table({"ts": [0, 7, 4], "key": [1, 1, 1], "val": [1, 1, 1]})
    op = _open(t.schema, 5, [agg.count()])
    bs = [t.slice(i, 1).to_batches()[0] for i in range(3)]
    steps = run_steps(op, [bs[0], bs[1], Punctuation("ts", 4), bs[2]])
    assert [(r["window_start"], r["window_end"], r["count"]) for r in steps[-1]] == [(0, 12, 3)]


def test_update_retracts_the_sessions_a_late_tuple_merges():
    # [0, 5) and [7, 12) are emitted at P(12); late tuple 4 (allowed lateness 10) merges them
    t = pa.table({"ts": [0, 7, 4], "key": [1, 1, 1], "val": [1, 2, 3]})
    bs = [t.slice(i, 1).to_batches()[0] for i in range(3)]
    op = _open(t.schema, 5, [agg.count(), agg.sum("val")], late="update", allowed_lateness=10)
    steps = run_steps(op, [bs[0], bs[1], Punctuation("ts", 12), bs[2]])
    got = [(r["window_start"], r["window_end"], r["count"], r["is_revision"], r["is_retraction"])
           for r in steps[-2]]
    assert sorted(got) == [(0, 5, 1, True, True), (0, 12, 3, True, False), (7, 12, 1, True, True)]
    assert sorted((r["window_start"], r["is_revision"]) for r in steps[-4 + 1]) \
        == [(0, False), (7, False)]


# ---- properties ---------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_valid_punctuation_operator_equals_reference_and_oracle(data):
    t, items = data.draw(disordered_feeds(max_delay=10, max_rows=80,
                                          string_keys=data.draw(st.booleans())))
    gap = data.draw(st.integers(1, 12))
    by = data.draw(st.sampled_from([("key",), ()]))
    op = _open(t.schema, gap, by=by)
    got = run_steps(op, items)
    want = ref_steps(SessionReference(gap, AGGS, by), items)
    for g, w in zip(got, want):  # the same rows at the same element: closing on punctuation
        assert_rows_equal(g, w)
    flat = [r for s in got for r in s]
    assert_rows_equal(flat, session_oracle(t, gap, AGGS, list(by)).to_pylist())
    assert sum(r["count"] for r in flat) == t.num_rows and op.metrics.late_total == 0
    # closing exactly when punctuation passes: emitted rows end at or before the last P
    lwm = None
    for item, rows in zip(items, got):
        if isinstance(item, Punctuation):
            lwm = item.value
            assert all(r["window_end"] <= lwm for r in rows)
        else:
            assert rows == []


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_result_is_independent_of_arrival_order_and_batches(data):
    t = data.draw(disordered_tables(max_delay=None, max_rows=60))
    gap = data.draw(st.integers(1, 10))
    perm = data.draw(st.permutations(range(t.num_rows)))
    t2 = t.take(pa.array(perm, pa.int64())) if t.num_rows else t
    res = []
    for table in (t, t2):
        batches = data.draw(batch_splits(table))
        # a delay bound beyond the table's time span: no tuple is late in either order
        src = oop.from_batches(batches, time="ts", unit="ms", punctuation=oop.BoundedDelay(10**4),
                               schema=t.schema)
        res.append(src.window(Session(gap), AGGS, by="key").run())
    assert res[0].late_total == res[1].late_total == 0
    assert_rows_equal(res[0].table.to_pylist(), res[1].table.to_pylist())
    assert_rows_equal(res[0].table.to_pylist(), session_oracle(t, gap, AGGS, ["key"]).to_pylist())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_late_tuples_are_counted_and_the_rest_is_exact(data):
    # unbounded disorder, punctuation far ahead: many tuples late; every tuple accounted for
    t = data.draw(disordered_tables(max_delay=None, max_rows=80))
    gap = data.draw(st.integers(1, 12))
    items = data.draw(trailing_punctuation_feed(data.draw(batch_splits(t)), max_lag=8))
    policy = data.draw(st.sampled_from([None, "drop", "side_output"]))
    op = _open(t.schema, gap, late=policy)
    got = run_steps(op, items)
    ref = SessionReference(gap, AGGS, ["key"])
    want = ref_steps(ref, items)
    for g, w in zip(got, want):
        assert_rows_equal(g, w)
    flat = [r for s in got for r in s]
    assert_rows_equal(flat, session_oracle(on_time(items), gap, AGGS, ["key"]).to_pylist())
    late = op.metrics.late_total
    assert late == ref.late and sum(r["count"] for r in flat) + late == t.num_rows
    if policy == "side_output":
        side = sum(b.num_rows for b in op.side_outputs.get("late", []))
        assert side == late


def test_raise_policy_names_the_tuple():
    t = pa.table({"ts": [10, 2], "key": [1, 1], "val": [1, 1]})
    op = _open(t.schema, 5, late="raise")
    op.on_batch(t.slice(0, 1).to_batches()[0])
    op.on_punctuation(Punctuation("ts", 10))
    with pytest.raises(LateTupleError, match="ts=2"):
        op.on_batch(t.slice(1, 1).to_batches()[0])


def _apply(rows: list[dict]) -> list[dict]:
    """A changelog applied: retraction deletes (key, start, end), any other row upserts it."""
    state: dict[tuple, dict] = {}
    for r in rows:
        k = (r.get("key"), r["window_start"], r["window_end"])
        if r["is_retraction"]:
            assert k in state, f"retraction of a row never emitted: {r}"
            del state[k]
        else:
            state[k] = {c: v for c, v in r.items() if c not in ("is_revision", "is_retraction")}
    return list(state.values())


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_update_changelog_equals_reference_and_oracle(data):
    t = data.draw(disordered_tables(max_delay=None, max_rows=60))
    gap = data.draw(st.integers(1, 10))
    L = data.draw(st.sampled_from([0, 5, 20, 10**6]))
    items = data.draw(trailing_punctuation_feed(data.draw(batch_splits(t)), max_lag=5))
    aggs = [agg.count(), agg.sum("val"), agg.max("val"), agg.first("val")]
    op = _open(t.schema, gap, aggs, late="update", allowed_lateness=L)
    got = [r for s in run_steps(op, items) for r in s]
    want, late = session_reference(items, gap, aggs, ["key"], update=True, allowed_lateness=L)
    final = _apply(got)
    assert_rows_equal(final, _apply(want))
    assert_rows_equal(final, session_oracle(on_time(items, L), gap, aggs, ["key"]).to_pylist())
    assert op.metrics.late_total == late
    assert sum(r["count"] for r in final) + late == t.num_rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow])
@given(st.data())
def test_float_values_nan_inf_null(data):
    value = st.one_of(st.none(), st.sampled_from([math.nan, math.inf, -math.inf]),
                      st.floats(-1e3, 1e3))
    rows = data.draw(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 2), value),
                              min_size=1, max_size=40))
    ts, keys, vals = (list(c) for c in zip(*rows))
    t = pa.table({"ts": pa.array(ts, pa.int64()), "key": pa.array(keys, pa.int64()),
                  "val": pa.array(vals, pa.float64())})
    gap = data.draw(st.integers(1, 10))
    items = data.draw(batch_splits(t))
    got = [r for s in run_steps(_open(t.schema, gap), items) for r in s]
    assert_rows_equal(got, session_oracle(t, gap, AGGS, ["key"]).to_pylist())


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("split", [1, 2, 4])
def test_inf_and_minus_inf_in_one_session_sum_to_nan_without_a_warning(split):
    t = pa.table({"ts": pa.array([0, 1, 2, 3], pa.int64()), "key": pa.array([0] * 4, pa.int64()),
                  "val": pa.array([math.inf, -math.inf, 1.0, math.inf])})
    items = [b for i in range(0, 4, split) for b in (t.slice(i, split).to_batches())]
    got = [r for s in run_steps(_open(t.schema, 5), items) for r in s]
    assert len(got) == 1 and math.isnan(got[0]["sum_val"])
    assert_rows_equal(got, session_oracle(t, 5, AGGS, ["key"]).to_pylist())


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_snapshot_restore_through_the_codec_continues_exactly(data):
    t, items = data.draw(disordered_feeds(max_delay=10, max_rows=60, string_keys=True))
    gap = data.draw(st.integers(1, 12))
    cut = data.draw(st.integers(0, len(items)))
    whole = [r for s in run_steps(_open(t.schema, gap), items) for r in s]
    op = _open(t.schema, gap)
    first = run_steps(op, items[:cut], flush=False)
    tree, arrays = encode(op.snapshot())
    op2 = _open(t.schema, gap)
    op2.restore(decode(tree, arrays))
    op2._check()
    rest = run_steps(op2, items[cut:])
    assert_rows_equal([r for s in first + rest for r in s], whole)


# ---- configuration and limits ---------------------------------------------------------
def test_refusals_are_one_line():
    schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.int64()),
                        ("s", pa.string())])
    for bad in (lambda: _open(schema, 5, [agg.median("val")]),
                lambda: _open(schema, 5, [agg.max("s")]),
                lambda: Session(0),
                lambda: _open(schema, 5, [agg.count()], allowed_lateness=3)):
        with pytest.raises(ConfigError) as e:
            bad()
        assert "\n" not in str(e.value)


def test_state_budget_stops_growth():
    n = 5000
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "key": np.arange(n, dtype=np.int64),
                  "val": np.ones(n, np.int64)})
    with state_budget(64 * 1024):
        op = _open(t.schema, 10**6)
        with pytest.raises(StateLimitError, match="session"):
            op.on_batch(t.to_batches()[0])


def test_stream_api_and_replay_cli(tmp_path):
    t = pa.table({"ts": [1, 3, 20, 9, 40], "key": [1, 1, 1, 2, 1], "val": [1, 2, 3, 4, 5]})
    s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(12))
    got = s.window(Session("5s"), [agg.count()], by="key").collect().to_pylist()
    assert_rows_equal(got, session_oracle(t, 5, [agg.count()], ["key"]).to_pylist())
    import pyarrow.parquet as pq
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(t, src)
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", str(src), "--time",
                        "ts", "--time-unit", "s", "--window", "session:5s", "--key", "key",
                        "--agg", "count",
                        "--agg", "sum:val", "--punctuation", "bounded:12s", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    want = session_oracle(t, 5, [agg.count(), agg.sum("val")], ["key"]).to_pylist()
    assert_rows_equal(pq.read_table(out).to_pylist(), want)


def test_replay_cli_late_update_has_the_retraction_column(tmp_path):
    import pyarrow.parquet as pq
    t = pa.table({"ts": [0, 7, 20, 4, 40], "key": [1, 1, 1, 1, 1], "val": [1, 2, 3, 4, 5]})
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(t, src)
    r = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", str(src), "--time",
                        "ts", "--time-unit", "s", "--window", "session:5s", "--key", "key",
                        "--agg", "count", "--punctuation", "ordered", "--late", "update",
                        "--allowed-lateness", "30s", "--out", str(out), "--quiet"],
                       env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got = pq.read_table(out)
    assert got.column_names[-2:] == ["is_revision", "is_retraction"]
    final = _apply(got.to_pylist())
    assert_rows_equal(final, session_oracle(t, 5, [agg.count()], ["key"]).to_pylist())


def test_time_plus_gap_beyond_int64_is_refused():
    from oop.errors import ValueRangeError
    t = pa.table({"ts": [2**63 - 3], "key": [1], "val": [1]})
    op = _open(t.schema, 5)
    with pytest.raises(ValueRangeError, match="int64 max"):
        op.on_batch(t.to_batches()[0])


def test_int64_sum_overflow_is_an_error_not_a_wrap():
    from oop.errors import ValueRangeError
    t = pa.table({"ts": [1, 2], "key": [1, 1], "val": [2**62, 2**62]})
    op = _open(t.schema, 5, [agg.sum("val")])
    op.on_batch(t.to_batches()[0])
    with pytest.raises(ValueRangeError):
        op.flush()


# ---- stateful: operator and reference side by side, invariants after every step ---------
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule  # noqa: E402

SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.int64())])


class SessionMachine(RuleBasedStateMachine):
    """Random batches (on-time and late rows) and punctuations; the operator, with
    late='update', must release the same changelog state as the reference at every step."""

    GAP, L = 4, 6

    def __init__(self) -> None:
        super().__init__()
        self.op = _open(SCHEMA, self.GAP, [agg.count(), agg.sum("val")], late="update",
                        allowed_lateness=self.L)
        self.ref = SessionReference(self.GAP, [agg.count(), agg.sum("val")], ["key"],
                                    update=True, allowed_lateness=self.L)
        self.lwm = 0
        self.got: list[dict] = []
        self.want: list[dict] = []

    @rule(rows=st.lists(st.tuples(st.integers(-12, 20), st.integers(0, 2), st.integers(-5, 5)),
                        min_size=1, max_size=6))
    def push(self, rows: list) -> None:
        b = pa.RecordBatch.from_pylist(
            [{"ts": self.lwm + d, "key": k, "val": v} for d, k, v in rows], schema=SCHEMA)
        self.got += _rows(self.op.on_batch(b))
        self.want += [r for row in b.to_pylist() for r in self.ref.on_tuple(row, row["ts"])]

    @rule(step=st.integers(1, 8))
    def punctuate(self, step: int) -> None:
        self.lwm += step
        self.got += _rows(self.op.on_punctuation(Punctuation("ts", self.lwm)))
        self.want += self.ref.on_punctuation(self.lwm)

    @invariant()
    def same_results_and_invariants(self) -> None:
        self.op._check()
        assert_rows_equal(_apply(self.got), _apply(self.want))
        assert self.op.metrics.late_total == self.ref.late


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
