"""LateRule (oop/window/late.py): the late policy of the window operators, asked in one place.

* ``split`` against a from-scratch filter over random times, punctuation,
  allowed lateness and policy: every row is kept, revising (update) or
  late-counted / side-output, and nothing else (accounting);
* the horizon ``lwm - L`` and when emitted windows are kept for revision;
* the one-line refusals (row-based, landmark, slide-by-tuple with update;
  allowed_lateness without update or negative) through the public operators.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from oop.errors import ConfigError, LateTupleError
from oop.operators.base import StreamInfo
from oop.stream.elements import INT64_MIN
from oop.stream.late import LatePolicy
from oop.window import Session, SessionAggregate, agg
from oop.window.aggregate import WindowAggregate
from oop.window.kinds import Landmark, RowSliding, SlideByTuple, Sliding, Tumbling
from oop.window.late import LateRule
from oop.window.slide_by_tuple import SlideByTupleAggregate

SCHEMA = pa.schema([("ts", pa.int64()), ("v", pa.int64())])
POLICIES = [None, LatePolicy.DROP, LatePolicy.SIDE_OUTPUT, LatePolicy.UPDATE]


def _opened(policy: LatePolicy | None, lateness: int) -> WindowAggregate:
    op = WindowAggregate(Tumbling(10), agg.count(), late=policy, allowed_lateness=lateness)
    op.open([StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")])
    return op


@settings(max_examples=150, deadline=None)
@given(times=st.lists(st.integers(-60, 60), min_size=0, max_size=40),
       lwm=st.one_of(st.just(INT64_MIN), st.integers(-30, 30)),
       lateness=st.integers(0, 20), policy=st.sampled_from(POLICIES))
def test_split_matches_a_from_scratch_filter_and_accounts_for_every_row(
        times: list[int], lwm: int, lateness: int, policy: LatePolicy | None) -> None:
    if policy is not LatePolicy.UPDATE:
        lateness = 0
    op = _opened(policy, lateness)
    rule = op.rule
    t = np.array(times, np.int64)
    batch = pa.record_batch([pa.array(t), pa.array(np.arange(len(times)))], schema=SCHEMA)
    kept, kt, revise = rule.split(op, batch, t, lwm, "ts")
    bound = lwm if lwm == INT64_MIN else lwm - (lateness if policy is LatePolicy.UPDATE else 0)
    want = [x for x in times if x >= bound]
    assert kept.column("ts").to_pylist() == want
    assert kt.tolist() == want
    late = len(times) - len(want)
    counted = sum(op.metrics.late.values())
    side = sum(b.num_rows for b in op.side_outputs.get("late", []))
    assert counted == late  # accounting: kept + counted late == input
    if policy is LatePolicy.SIDE_OUTPUT:
        assert side == late
    else:
        assert side == 0
    if policy is LatePolicy.UPDATE and lwm != INT64_MIN:
        assert revise is not None and revise.tolist() == [x < lwm for x in want]
        assert op.metrics.late.get("late_dropped", 0) == late
    else:
        assert revise is None


def test_split_raise_names_the_stream_and_bound() -> None:
    op = _opened(LatePolicy.RAISE, 0)
    t = np.array([5, 1], np.int64)
    batch = pa.record_batch([pa.array(t), pa.array([0, 1])], schema=SCHEMA)
    with pytest.raises(LateTupleError, match="ts >= 3"):
        op.rule.split(op, batch, t, 3, "ts")


@pytest.mark.parametrize("policy", POLICIES)
def test_horizon_and_revisable_from(policy: LatePolicy | None) -> None:
    lateness = 7 if policy is LatePolicy.UPDATE else 0
    rule = LateRule.resolve("w", policy, lateness, "ms")
    assert rule.horizon(100) == 100 - lateness
    assert rule.revisable_from(INT64_MIN) is None
    if policy is LatePolicy.UPDATE:
        assert rule.revisable_from(100) == 93
        assert [f.name for f in rule.output_fields(retractions=True)] == [
            "is_revision", "is_retraction"]
        assert not rule.may_cache_pane_states and not rule.may_hash() and rule.may_hash(True)
    else:
        assert rule.revisable_from(100) is None
        assert rule.output_fields(retractions=True) == [] and rule.flag_columns(3, True) == []
        assert rule.may_cache_pane_states and rule.may_hash()


@pytest.mark.parametrize("make, text", [
    (lambda: WindowAggregate(RowSliding(4, 2), agg.count(), late="update"),
     "needs an event-time window, not rows"),
    (lambda: WindowAggregate(Landmark(5), agg.count(), late="update"),
     "not supported on landmark windows"),
    (lambda: SlideByTupleAggregate(SlideByTuple(10), agg.count(), late="update"),
     "not supported on slide-by-tuple windows"),
])
def test_update_is_refused_where_windows_cannot_be_revised(make: object, text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        make()  # type: ignore[operator]


@pytest.mark.parametrize("make", [
    lambda late, L: WindowAggregate(Sliding(10, 5), agg.count(), late=late, allowed_lateness=L),
    lambda late, L: SessionAggregate(Session(5), agg.count(), late=late, allowed_lateness=L),
])
def test_allowed_lateness_is_checked_once_for_every_window_operator(make: object) -> None:
    info = [StreamInfo("s", SCHEMA, {"ts": "ms"}, "ts")]
    with pytest.raises(ConfigError, match="only applies with late='update'"):
        make("drop", 5).open(info)  # type: ignore[operator]
    with pytest.raises(ConfigError, match="allowed_lateness must be >= 0"):
        make("update", -1).open(info)  # type: ignore[operator]
    assert make("update", "5ms").open(info).schema.names[-1] in (  # type: ignore[operator]
        "is_revision", "is_retraction")
