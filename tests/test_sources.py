"""Every source kind, Arrow timestamp time columns, output to Parquet/pandas, per-operator metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.testing import check_punctuation_respected, disordered_tables, same_bag

T = pa.table({"ts": pa.array([5, 1, 7, 4, 9, 8, 12, 10], pa.int64()),
              "key": pa.array([1, 2, 1, 2, 1, 2, 1, 2], pa.int64()),
              "val": pa.array(range(8), pa.int64())})


def _check(res, expected: pa.Table, attr: str = "ts") -> None:
    assert res.table.to_pylist() == expected.to_pylist()  # arrival order kept, nothing late
    assert res.late_total == 0
    check_punctuation_respected(res.table, res.punctuations, attr)
    assert [p.value for _, p in res.punctuations][-1] == 9  # max 12 - delay 3


def test_from_arrow_table_and_record_batch():
    _check(oop.from_arrow(T, time="ts", punctuation=oop.BoundedDelay(3), batch_size=3).run(), T)
    rb = T.to_batches()[0]
    _check(oop.from_arrow(rb, time="ts", punctuation=oop.BoundedDelay(3), batch_size=3).run(), T)


def test_from_batches():
    _check(oop.from_batches(T.to_batches(max_chunksize=2), time="ts",
                            punctuation=oop.BoundedDelay(3)).run(), T)


def test_from_parquet_file_and_folder_in_arrival_order(tmp_path):
    pq.write_table(T, tmp_path / "one.parquet", row_group_size=3)
    _check(oop.from_parquet(tmp_path / "one.parquet", time="ts", batch_size=2,
                            punctuation=oop.BoundedDelay(3)).run(), T)
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(T.slice(0, 3), folder / "part-000.parquet")
    pq.write_table(T.slice(3, 5), folder / "part-001.parquet")
    res = oop.from_parquet(folder, time="ts", punctuation=oop.BoundedDelay(3)).run()
    _check(res, T)
    assert res.sources == ("parts",)
    cols = oop.from_parquet(folder, time="ts", columns=["ts", "val"]).collect()
    assert cols.column_names == ["ts", "val"]


def test_from_pandas_and_to_pandas():
    df = T.to_pandas()
    s = oop.from_pandas(df, time="ts", punctuation=oop.BoundedDelay(3), batch_size=3)
    _check(s.run(), T)
    out = s.to_pandas()
    assert isinstance(out, pd.DataFrame) and out["val"].tolist() == list(range(8))


def test_from_iter_generator():
    def gen():
        for b in T.to_batches(max_chunksize=3):
            yield b

    _check(oop.from_iter(gen(), time="ts", punctuation=oop.BoundedDelay(3)).run(), T)


def test_write_output_to_parquet(tmp_path):
    res = oop.from_arrow(T, time="ts", punctuation=oop.BoundedDelay(3)).select(
        pc.field("key") == 1).to_parquet(tmp_path / "out.parquet")
    back = pq.read_table(tmp_path / "out.parquet")
    # Stream.to_parquet streams (nothing collected): the rows are in the file only
    assert res.table.num_rows == 0 and back.num_rows == res.metrics["sink"].tuples_in
    assert back.column("key").to_pylist() == [1, 1, 1, 1]


def test_arrow_timestamp_time_column_keeps_type_and_uses_its_unit():
    for unit, factor in (("ms", 1), ("us", 1000), ("s", None)):
        if factor is None:
            ts = pa.array(T.column("ts").to_numpy(), pa.timestamp("s"))
            delay = 3
        else:
            ts = pa.array(T.column("ts").to_numpy() * 1000 * factor, pa.timestamp(unit))
            delay = "3s"
        t = T.set_column(0, "ts", ts)
        res = oop.from_arrow(t, time="ts", unit="ns",  # the timestamp's own unit wins
                             punctuation=oop.BoundedDelay(delay), batch_size=3).run()
        assert res.table.schema.field("ts").type == pa.timestamp(unit)
        assert res.table.column("ts").equals(t.column("ts"))  # event time never rewritten
        check_punctuation_respected(res.table, res.punctuations)
        last = res.punctuations[-1][1].value
        expected = 9 if factor is None else 9 * 1000 * factor
        assert last == expected


def test_narrow_integer_time_column():
    t = T.set_column(0, "ts", T.column("ts").cast(pa.int32()))
    res = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(3), batch_size=3).run()
    assert res.table.schema.field("ts").type == pa.int32()
    assert [p.value for _, p in res.punctuations][-1] == 9


@given(st.data())
def test_every_source_kind_gives_the_same_bag(data):
    t = data.draw(disordered_tables(max_delay=4, min_rows=1))
    g = oop.BoundedDelay(4)
    outs = [
        oop.from_arrow(t, time="ts", punctuation=g, batch_size=3).collect(),
        oop.from_batches(t.to_batches(max_chunksize=5), time="ts", punctuation=g).collect(),
        oop.from_pandas(t.to_pandas(), time="ts", punctuation=g, batch_size=4).collect(),
        oop.from_iter(iter(t.to_batches(max_chunksize=2)), time="ts", punctuation=g).collect(),
    ]
    for o in outs:
        assert same_bag(o, t)


def test_per_operator_metrics():
    t = pa.table({"ts": [1, 1, 2, 0, 3, 3], "key": [1, 1, 1, 1, 1, 2]})
    res = (oop.from_arrow(t, time="ts", punctuation=oop.Ordered(), batch_size=2, name="src")
           .select(pc.field("key") >= 1).dupelim(["ts", "key"]).run())
    src, sel, de = res.metrics["src"], res.metrics["select"], res.metrics["dupelim"]
    assert (src.tuples_in, src.batches_in, src.late) == (6, 3, {"drop": 1})
    assert src.tuples_out == 5 and src.punctuations_out == 3
    assert sel.tuples_in == 5 and sel.tuples_out == 5 and sel.punctuations_in == 3
    assert de.tuples_in == 5 and de.tuples_out == 4 and de.counters["duplicates"] == 1
    assert de.peak_state_items >= 1 and de.peak_state_bytes > 0
    assert de.state_items == 0                    # purged by punctuation / end of stream
    assert de.punctuations_out == 3
    d = res.metrics_dict()
    assert d["dupelim"]["counters"] == {"duplicates": 1}
    assert "latency_p50_ms" in d["dupelim"] or de.latency_ns == []
    assert '"src"' in res.metrics_json()


def test_running_a_stream_twice_gives_the_same_result():
    """A Stream's operators hold state after a run; a second run must rebuild them."""
    a = oop.from_arrow(T, time="ts", punctuation=oop.BoundedDelay(3), batch_size=3, name="a")
    b = oop.from_arrow(T, time="ts", punctuation=oop.BoundedDelay(3), batch_size=2, name="b")
    s = a.meld(b).dupelim()
    r1, r2 = s.run(), s.run()
    assert r1.table.equals(r2.table) and r1.punctuations == r2.punctuations
    assert r2.late_total == 0 and r2.table.num_rows == 8


def test_one_shot_iterator_stream_cannot_run_twice():
    s = oop.from_iter(iter(T.to_batches(max_chunksize=3)), time="ts",
                      punctuation=oop.BoundedDelay(3))
    assert s.run().table.num_rows == 8
    import pytest

    with pytest.raises(oop.ConfigError, match="one-shot Python iterator.*from_batches"):
        s.run()
