"""Times at the edge of the int64 range, huge row ranges, bad strategies: clear errors, no
silent corruption (docs/semantics.md, "Times at the edge of the int64 range").

* a uint64 time above 2**63-1 is refused (it used to wrap to a negative time);
* a window whose end (or start) does not fit int64 raises ValueRangeError naming the
  window and the time (window_end used to wrap to year 1677);
* int64 min/max among normal times: a clear error instead of ``array is too big``;
* RowSliding / PartitionedRows with huge ranges: StateLimitError, not a bare MemoryError;
* a negative slack: ConfigError.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import oop
from oop.errors import ConfigError, OopError, StateLimitError, ValueRangeError
from oop.query import parse_strategy
from oop.stream.timecol import time_values
from oop.window import Landmark, PartitionedRows, RowSliding, Sliding, Tumbling, agg

I64MAX = np.iinfo(np.int64).max
I64MIN = np.iinfo(np.int64).min


def _run(ts, kind, method="auto", by=(), aggs=None):
    t = pa.table({"ts": np.array(ts, np.int64), "k": np.zeros(len(ts), np.int64),
                  "v": np.ones(len(ts))})
    src = oop.from_batches(t.to_batches(), time="ts", unit="ms", punctuation=oop.External(),
                           schema=t.schema)
    return src.window(kind, aggs or [agg.count()], by=by, method=method).run().table


def test_uint64_time_above_int64_max_is_refused():
    b = pa.record_batch({"ts": pa.array([1, 2**63 + 5], pa.uint64())})
    with pytest.raises(ValueRangeError, match=r"'ts'.*9223372036854775813.*rebase"):
        time_values(b, "ts", "src")
    ok = pa.record_batch({"ts": pa.array([1, 2**63 - 1], pa.uint64())})
    assert time_values(ok, "ts").tolist() == [1, I64MAX]


def test_uint64_time_through_a_pipeline():
    t = pa.table({"ts": pa.array([1, 2, 2**64 - 1], pa.uint64()), "v": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueRangeError, match="ts"):
        oop.from_batches(t.to_batches(), time="ts", unit="ms", schema=t.schema).window(
            Tumbling(10), [agg.count()]).run()


@pytest.mark.parametrize("method", ["wid", "paned"])
@pytest.mark.parametrize("kind", [Tumbling(10), Sliding(10, 5), Sliding(10, 3)], ids=repr)
def test_window_end_beyond_int64_max_is_a_clear_error(kind, method):
    with pytest.raises(ValueRangeError, match=r"window.*int64") as e:
        _run([0, 1, I64MAX - 2], kind, method)
    assert str(I64MAX - 2) in str(e.value)


@pytest.mark.parametrize("method", ["wid", "paned"])
def test_window_start_below_int64_min_is_a_clear_error(method):
    with pytest.raises(ValueRangeError, match=r"window.*int64"):
        _run([0, 1, I64MIN + 2], Sliding(10, 5), method)


def test_times_near_the_edge_that_fit_still_work():
    end = (I64MAX // 10) * 10  # the last whole tumbling window ends here
    got = _run([end - 10, end - 1], Tumbling(10))
    assert got.to_pylist() == [{"k": 0, "window_start": end - 10, "window_end": end, "count": 2}] \
        or got.column("window_end").to_pylist() == [end]


@pytest.mark.parametrize("method", ["wid", "paned"])
def test_int64_extremes_among_normal_times_give_a_clear_error(method):
    """A window that would end beyond int64 is a clear error; a time near the edge whose
    windows fit is computed correctly (the state goes sparse, it is not a huge ring)."""
    for bad in (I64MAX, I64MIN):
        with pytest.raises(OopError) as e:
            _run([0, 5, 17, bad, 3], Sliding(10, 5), method)
        assert isinstance(e.value, (ValueRangeError, StateLimitError))
    near = I64MAX - 10**6
    got = _run([0, 5, 17, near, 3], Sliding(10, 5), method).to_pylist()
    assert {(r["window_start"], r["count"]) for r in got if r["window_start"] > 100} == \
        {(near - near % 5 - 5, 1), (near - near % 5, 1)}


def test_far_apart_times_are_computed_not_array_too_big():
    """Times 10^18 apart: the state holds three windows (sparse), not the span between."""
    got = _run([-10**18, 0, 10**18], Tumbling(10), "wid").to_pylist()
    assert [(r["window_start"], r["count"]) for r in got] == [(-10**18, 1), (0, 1), (10**18, 1)]


@pytest.mark.parametrize("kind", [RowSliding(10**18, 1), RowSliding(10**10, 3)], ids=repr)
def test_huge_row_range_is_a_state_limit_error(kind):
    with pytest.raises(StateLimitError, match="shorter range|shorter windows"):
        _run(list(range(10)), kind)


def test_huge_partitioned_row_range_is_a_state_limit_error():
    with pytest.raises(StateLimitError, match="shorter range"):
        _run(list(range(10)), PartitionedRows(10**10, 1), by="k")


def test_landmark_far_times():
    with pytest.raises(OopError):
        _run([0, I64MAX - 1], Landmark(10))


@pytest.mark.parametrize("spec", ["iop-slack:-2s", "iop-slack:-5,generous", "iop-bsort:-3"])
def test_negative_slack_is_a_config_error(spec):
    with pytest.raises(ConfigError, match=">= 0"):
        parse_strategy(spec)
    assert parse_strategy("iop-slack:0").amount == 0


@pytest.mark.parametrize("ts", [[0, 1, I64MAX - 2], [I64MIN, 0, 1], [-10**18, 0, 10**18]])
def test_adaptive_and_buffering_edge_times(ts):
    from oop.adapt import AdaptWID
    from oop.iop_baseline import BufferingWindow

    t = pa.table({"ts": np.array(sorted(ts), np.int64), "key": np.zeros(3, np.int64),
                  "v": np.ones(3)})
    for op in (AdaptWID(Sliding(10, 5), [agg.count()], by="key"),
               BufferingWindow(Sliding(10, 5), [agg.count()], ("key",))):
        src = oop.from_batches(t.to_batches(), time="ts", unit="ms", punctuation=oop.External(),
                               schema=t.schema)
        try:
            got = src.via(op).run().table
        except (ValueRangeError, StateLimitError):
            assert ts[-1] != 10**18 or isinstance(op, AdaptWID)  # the far-apart case fits IOP
            continue
        assert sum(got.column("count").to_pylist()) == 2 * len(ts)  # each time in 2 windows
