"""Bad input: every case below raises a clear error (stream, value, fix) or follows the policy.

Cases: late tuple under each policy; punctuation going backwards; null/NaN
event time; a batch whose schema does not match; an unknown column name; an
unsupported time type; an empty input. Plus the accounting property: tuples in
= tuples out + held in state + late (counted or routed).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.progress import LowWatermark
from oop.testing import disordered_tables, same_bag


def _late_table():
    # Ordered(): after [10] the source promises ts >= 10, so 3 is late
    return pa.table({"ts": [10, 3, 11], "v": [1, 2, 3]})


# ---- late tuples, each policy ------------------------------------------------------------------
def test_late_drop_is_counted():
    res = oop.from_arrow(_late_table(), time="ts", punctuation=oop.Ordered(), batch_size=1,
                         late="drop", name="feed").run()
    assert res.table.column("v").to_pylist() == [1, 3]
    assert res.metrics["feed"].late == {"drop": 1}
    assert res.late == {}


def test_late_side_output_is_routed():
    res = oop.from_arrow(_late_table(), time="ts", punctuation=oop.Ordered(), batch_size=1,
                         late="side_output", name="feed").run()
    assert res.late["feed"].to_pylist() == [{"ts": 3, "v": 2}]
    assert res.metrics["feed"].late == {"side_output": 1}


def test_late_raise_names_stream_value_bound_and_fix():
    s = oop.from_arrow(_late_table(), time="ts", punctuation=oop.Ordered(), batch_size=1,
                       late="raise", name="feed")
    with pytest.raises(oop.LateTupleError, match=r"'feed'.*ts=3.*ts >= 10.*late='drop'"):
        s.run()


def test_late_update_forwards_late_tuples_and_unknown_policy_raises():
    # late='update' on a source forwards late tuples (counted) so a window with
    # late='update' can revise its results; nothing is dropped
    res = oop.from_arrow(_late_table(), time="ts", punctuation=oop.Ordered(), batch_size=1,
                         late="update", name="feed").run()
    assert res.table.column("v").to_pylist() == [1, 2, 3]
    assert res.metrics["feed"].counters == {"late_forwarded": 1}
    assert res.metrics["feed"].late == {}
    with pytest.raises(oop.ConfigError, match="unknown late policy 'ignore'"):
        oop.from_arrow(_late_table(), time="ts", late="ignore")


# ---- punctuation going backwards -------------------------------------------------------------------
def test_feed_punctuation_backwards_raises():
    b = pa.record_batch({"ts": [20]})
    items = [b, oop.Punctuation("ts", 10), b, oop.Punctuation("ts", 5)]
    s = oop.from_batches(items, time="ts", punctuation=oop.External(), name="feed")
    with pytest.raises(oop.PunctuationOrderError, match=r"'feed'.*from 10 to 5.*never decrease"):
        s.run()


def test_feed_punctuation_on_other_attribute_raises():
    items = [pa.record_batch({"ts": [1]}), oop.Punctuation("other", 5)]
    with pytest.raises(oop.PunctuationOrderError, match="'other'.*'ts'"):
        oop.from_batches(items, time="ts", punctuation=oop.External(), name="feed").run()


def test_low_watermark_advance_backwards_raises_try_advance_does_not():
    lw = LowWatermark("ts", stream="s")
    lw.advance(7)
    with pytest.raises(oop.PunctuationOrderError, match="'s'.*from 7 to 6"):
        lw.advance(6)
    assert lw.try_advance(6) is False and lw.value == 7


def test_generator_bound_going_down_emits_nothing():
    # an adaptive estimate may shrink the bound: the source must never emit it backwards
    t = pa.table({"ts": [100, 0, 1, 2, 3, 200, 201]})
    res = oop.from_arrow(t, time="ts", punctuation=oop.Adaptive(0.0), batch_size=1,
                         late="side").run()
    vals = [p.value for _, p in res.punctuations]
    assert vals == sorted(set(vals))


# ---- null / NaN event time -------------------------------------------------------------------------
def test_null_time_raises_under_drop_and_raise():
    t = pa.table({"ts": pa.array([1, None, 3], pa.int64()), "v": [1, 2, 3]})
    for late in ("drop", "raise"):
        with pytest.raises(oop.NullTimeError, match=r"'feed'.*null 'ts'.*side_output"):
            oop.from_arrow(t, time="ts", late=late, name="feed").run()


def test_null_time_routed_under_side_output():
    t = pa.table({"ts": pa.array([1, None, 3], pa.int64()), "v": [1, 2, 3]})
    res = oop.from_arrow(t, time="ts", late="side", name="feed").run()
    assert res.table.column("v").to_pylist() == [1, 3]
    assert res.late["feed"].column("v").to_pylist() == [2]
    assert res.tuples_in == res.table.num_rows + res.late_total


def test_nan_time_float_column_is_refused_with_fix():
    t = pa.table({"ts": [1.0, float("nan")], "v": [1, 2]})
    with pytest.raises(oop.TimeTypeError, match=r"'feed'.*'ts'.*double.*integer column"):
        oop.from_arrow(t, time="ts", name="feed").run()


# ---- schema mismatch ---------------------------------------------------------------------------------
def test_batch_schema_mismatch_names_source_and_position():
    b1 = pa.record_batch({"ts": [1], "v": [1]})
    b2 = pa.record_batch({"ts": [2], "v": ["x"]})
    with pytest.raises(oop.SchemaMismatchError, match=r"'feed'.*batch 2.*cast it"):
        oop.from_batches([b1, b2], time="ts", name="feed").run()
    with pytest.raises(oop.SchemaMismatchError):
        oop.from_batches([b1], time="ts", schema=b2.schema, name="feed").run()


# ---- unknown column ----------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [
    lambda t: oop.from_arrow(t, time="nope", name="feed"),
    lambda t: oop.from_batches(t.to_batches(), time="nope", name="feed"),
    lambda t: oop.from_arrow(t, time="ts", name="feed").select(pc.field("nope") > 1),
    lambda t: oop.from_arrow(t, time="ts", name="feed").project(["ts", "nope"]),
    lambda t: oop.from_arrow(t, time="ts", name="feed").apply(x=pc.field("nope") + 1),
    lambda t: oop.from_arrow(t, time="ts", name="feed").dupelim(["ts", "nope"]),
])
def test_unknown_column_is_named(build):
    t = pa.table({"ts": [1, 2], "v": [1, 2]})
    with pytest.raises(oop.UnknownColumnError, match=r"nope.*(feed|columns)"):
        build(t).run()


# ---- unsupported time type ---------------------------------------------------------------------------
@pytest.mark.parametrize("col", [pa.array(["a", "b"]), pa.array([1.5, 2.5]),
                                 pa.array([True, False])])
def test_unsupported_time_type(col):
    t = pa.table({"ts": col, "v": [1, 2]})
    with pytest.raises(oop.TimeTypeError, match="cannot be event time.*cast it"):
        oop.from_arrow(t, time="ts", name="feed").run()


def test_unknown_unit():
    with pytest.raises(oop.ConfigError, match="unknown.*unit 'hours'"):
        oop.from_arrow(pa.table({"ts": [1]}), time="ts", unit="hours").run()


# ---- empty input ------------------------------------------------------------------------------------
def test_empty_inputs():
    with pytest.raises(oop.EmptyInputError, match="'feed'.*schema="):
        oop.from_batches([], time="ts", name="feed").run()
    with pytest.raises(oop.EmptyInputError):
        oop.from_iter(iter([]), time="ts", name="feed").run()
    schema = pa.schema([("ts", pa.int64()), ("v", pa.int64())])
    res = oop.from_batches([], time="ts", schema=schema).select(pc.field("v") > 0).run()
    assert res.table.num_rows == 0 and res.table.schema == schema and res.punctuations == []
    res = oop.from_arrow(schema.empty_table(), time="ts").dupelim().run()
    assert res.table.num_rows == 0
    empty_batches = [pa.RecordBatch.from_pylist([], schema=schema)] * 3
    res = oop.from_batches(empty_batches, time="ts").run()
    assert res.table.num_rows == 0 and res.tuples_in == 0


def test_missing_parquet_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Parquet"):
        oop.from_parquet(tmp_path / "missing.parquet", time="ts")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no"):
        oop.from_parquet(tmp_path / "empty", time="ts")


# ---- accounting property -----------------------------------------------------------------------------
@given(st.data(), st.sampled_from(["drop", "side_output"]), st.integers(0, 3))
def test_accounting_in_equals_out_plus_held_plus_late(data, late, d):
    """Unbounded disorder with a too-small delay bound: many late tuples, none lost."""
    tables = [data.draw(disordered_tables(max_delay=None)) for _ in range(2)]
    streams = [oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(d), late=late,
                              batch_size=data.draw(st.integers(1, 8)), name=f"s{i}")
               for i, t in enumerate(tables)]
    res = streams[0].meld(streams[1]).project(["ts", "key", "val"]).run()
    held = sum(m.state_items for name, m in res.metrics.items() if name != "sink")
    assert res.tuples_in == sum(t.num_rows for t in tables)
    assert res.tuples_in == res.table.num_rows + held + res.late_total
    for m in res.metrics.values():
        assert m.tuples_in >= m.tuples_out
    if late == "side_output":
        routed = [res.late[n] for n in ("s0", "s1") if n in res.late]
        assert same_bag(pa.concat_tables([res.table, *routed]), pa.concat_tables(tables))


# ---- late-policy matrix: policy x batch size x disorder, source kernel vs reference ---------------
def _source_reference(table: pa.Table, batch_size: int, d: int):
    """Tuple-at-a-time Source + BoundedDelay(d): which rows are late, batch by batch."""
    rows_ = table.to_pylist()
    lwm = None
    on_time, late = [], []
    for start in range(0, len(rows_), batch_size):
        batch = rows_[start:start + batch_size]
        kept = [r for r in batch if lwm is None or r["ts"] >= lwm]
        late.extend(r for r in batch if lwm is not None and r["ts"] < lwm)
        on_time.extend(kept)
        if kept:
            v = max(r["ts"] for r in kept) - d
            lwm = v if lwm is None else max(lwm, v)
    return on_time, late


@pytest.mark.parametrize("policy", ["drop", "side_output", "raise"])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
@pytest.mark.parametrize("disorder", [0, 3, None])
def test_late_policy_matrix(policy, batch_size, disorder):
    rng = np.random.default_rng(batch_size * 31 + (disorder or 99))
    n = 300
    ts = np.arange(n, dtype=np.int64)
    if disorder is None:
        order = rng.permutation(n)
    else:
        order = np.argsort(ts + rng.integers(0, disorder + 1, n), kind="stable")
    t = pa.table({"ts": ts[order], "val": np.arange(n, dtype=np.int64)})
    d = 2
    exp_on_time, exp_late = _source_reference(t, batch_size, d)
    s = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(d), batch_size=batch_size,
                       late=policy, name="feed")
    if policy == "raise":
        if exp_late:
            with pytest.raises(oop.LateTupleError, match="'feed'"):
                s.run()
        else:
            assert s.run().table.num_rows == n
        return
    res = s.run()
    assert res.table.to_pylist() == exp_on_time
    assert res.late_total == len(exp_late)
    assert res.metrics["feed"].late.get(policy, 0) == len(exp_late)
    if policy == "side_output" and exp_late:
        assert res.late["feed"].to_pylist() == exp_late
    assert res.tuples_in == res.table.num_rows + res.late_total
