"""oop.spark.files: source shards read from Parquet fragments inside Spark tasks (fast path).

Checks: fragments read in arrival order (streamed when sorted, stably sorted otherwise --
vs a numpy reference, Hypothesis, no Spark); every row once, each shard in arrival order
with valid in-band punctuation; the local-then-global window over files == the same plan
over the DataFrame (mapInArrow path) == Spark SQL == the oracle, for file and row-group
fragments and any task count; late rows accounted for; bad input in one line.

Real PySpark in local[2] (one shared session, tests/conftest_spark.py). Small data.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from conftest_spark import spark  # noqa: F401 - the shared session fixture
from oop.errors import UnknownColumnError
from oop.spark.files import parquet_fragments, read_fragment, shard_files
from oop.spark.plans import sharded_window
from oop.spark.physical import DATA, SEQ, SRC, K
from oop.spark.verify import compare_windows, spark_windows
from oop.window import Sliding, Tumbling, agg
from oop.window.reference import window_oracle
from test_spark_sharded import _check_punctuation_rows, _rows, _table

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("ts", pa.int64()), ("arr", pa.int64()), ("k", pa.int64()),
                    ("v", pa.int64())])


def _write(folder: Path, t: pa.Table, files: int, row_group: int = 250,
           unsorted: tuple[int, ...] = ()) -> list[str]:
    """``t`` in arrival order cut into ``files`` files; files in ``unsorted`` are shuffled."""
    t = t.sort_by("arr")
    bounds = np.linspace(0, t.num_rows, files + 1).astype(int)
    paths = []
    rng = np.random.default_rng(9)
    for i in range(files):
        part = t.slice(bounds[i], bounds[i + 1] - bounds[i])
        if i in unsorted:
            part = part.take(pa.array(rng.permutation(part.num_rows)))
        p = folder / f"part-{i:03d}.parquet"
        pq.write_table(part, p, row_group_size=row_group)
        paths.append(str(p))
    return paths


@pytest.fixture(scope="module")
def files(tmp_path_factory, spark):  # type: ignore[no-untyped-def]  # noqa: F811
    t = _table(6000, seed=3)
    folder = tmp_path_factory.mktemp("files")
    paths = _write(folder, t, 5, unsorted=(2,))
    return t, paths, spark.read.parquet(*paths)


# ---- reading one fragment (no Spark) -------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.data())
def test_read_fragment_is_arrival_order(tmp_path_factory, d) -> None:  # type: ignore[no-untyped-def]
    n = d.draw(st.integers(1, 300))
    arr = np.array(d.draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), np.int64)
    if d.draw(st.booleans()):
        arr = np.sort(arr)
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "arr": arr,
                  "k": np.zeros(n, np.int64), "v": np.arange(n, dtype=np.int64)})
    p = tmp_path_factory.mktemp("frag") / "f.parquet"
    rg = d.draw(st.integers(1, 120))
    pq.write_table(t, p, row_group_size=rg)
    bs = d.draw(st.integers(1, 97))
    for split in ("file", "row_group"):
        frags = parquet_fragments([str(p)], split)
        assert sum(f.rows for f in frags) == n
        got = []
        for f in frags:
            batches = list(read_fragment(f, SCHEMA, bs, "arr"))
            assert all(0 < b.num_rows <= bs for b in batches)
            got.append(pa.Table.from_batches(batches, schema=SCHEMA))
            # reference: the fragment's rows stably sorted by arrival (tuple at a time)
            raw = pq.ParquetFile(p).read_row_groups(list(f.row_groups)) if f.row_groups \
                is not None else pq.read_table(p)
            ref = sorted(raw.to_pylist(), key=lambda r: r["arr"])  # sorted() is stable
            assert got[-1].to_pylist() == ref
        assert sorted(pa.concat_tables(got).column("v").to_pylist()) == list(range(n))
    # without an arrival column: row order, as written
    f = parquet_fragments([str(p)])[0]
    rows = pa.Table.from_batches(list(read_fragment(f, SCHEMA, bs, None)), schema=SCHEMA)
    assert rows.column("v").to_pylist() == list(range(n))


# ---- shards in Spark ------------------------------------------------------------------
@pytest.mark.parametrize("split,tasks", [("file", None), ("row_group", 3)])
def test_every_row_once_in_arrival_order_with_valid_punctuation(spark, files, split, tasks) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t, paths, _ = files
    s = shard_files(spark, paths, time="ts", arrival="arr",
                    punctuation=oop.BoundedDelay(300), batch_size=128, split=split, tasks=tasks)
    frags = parquet_fragments(paths, split)
    assert s.producers == len(frags)
    phys = s.query(lambda st_: st_.select(pc.field("v") >= 0), name="ident").df.toArrow()
    assert _check_punctuation_rows(phys, "ts") >= len(frags)
    data = phys.filter(pc.equal(phys.column(K), DATA))
    assert _rows(data) == _rows(t)
    srcs = data.column(SRC).to_numpy()
    assert set(srcs.tolist()) == set(range(len(frags)))
    for j in range(len(frags)):  # each shard = one fragment, replayed in arrival order
        part = data.filter(pa.array(srcs == j)).sort_by(SEQ)
        assert part.num_rows == frags[j].rows
        assert np.all(np.diff(part.column("arr").to_numpy()) >= 0)
    res = s.query(lambda st_: st_.select(pc.field("v") >= 0)).collect()
    assert res.tuples_in == t.num_rows == res.table.num_rows + res.late_total
    if split == "file":  # movement straight from the file sources (no fused query)
        moved = s.redistribute(2, "k").query(lambda st_: st_.select(pc.field("v") >= 0))
        res = moved.collect()
        assert res.late_total == 0 and _rows(res.table) == _rows(t)


@pytest.mark.parametrize("kind", [Tumbling(1000), Sliding(2100, 700)], ids=["tumbling", "sliding"])
def test_window_over_files_equals_dataframe_path_sql_and_oracle(files, kind) -> None:  # type: ignore[no-untyped-def]
    t, paths, df = files
    aggs = [agg.count(), agg.sum("v"), agg.max("v")]
    kw = dict(time="ts", unit="ms", kind=kind, aggs=aggs, by=("k",), shards=2,
              punctuation=oop.BoundedDelay(300), arrival="arr", batch_size=300)
    fast = sharded_window(paths, **kw)
    assert fast.path == "files" and fast.late_total == 0 and fast.tuples_in == t.num_rows
    oracle = window_oracle(t, kind, aggs, ("k",), "ts", "ms")
    refs, gots = [oracle], [fast.table]
    if isinstance(kind, Tumbling):  # (sliding: the oracle only, to keep the Spark set fast)
        slow = sharded_window(df, spread_input=False, **kw)
        assert slow.path == "mapInArrow"
        gots.append(slow.table)
        refs.append(spark_windows(df, time="ts", unit="ms", kind=kind, aggs=aggs,
                                  by=("k",)).toArrow())
    vals = [a.name for a in aggs]
    for got in gots:
        for ref in refs:
            rep = compare_windows(got, ref, by=("k",), values=vals)
            assert rep.ok and rep.windows == oracle.num_rows, rep
    # the melded punctuation of the result never goes back and never precedes its rows
    ws = fast.table.column("window_start").to_numpy()
    for rows_before, p in fast.punctuations:
        assert p.attr in ("window_start", "window_end")
        col = fast.table.column(p.attr).to_numpy()
        assert np.all(col[rows_before:] >= p.value)
    assert len(ws) == oracle.num_rows


def test_row_groups_and_tasks_do_not_change_the_result(files) -> None:  # type: ignore[no-untyped-def]
    t, paths, _ = files
    aggs = [agg.count(), agg.min("v")]
    kw = dict(time="ts", unit="ms", kind=Tumbling(500), aggs=aggs, by=("k",), shards=3,
              punctuation=oop.BoundedDelay(300), arrival="arr", batch_size=100)
    oracle = window_oracle(t, Tumbling(500), aggs, ("k",), "ts", "ms")
    for split, tasks, per in (("row_group", 1, "fragment"), ("row_group", 7, "fragment"),
                              ("row_group", 2, "task")):
        # (per task: the task's row groups one after the other, each sorted by arrival on
        # its own -- the shuffled file makes late rows, which are counted)
        res = sharded_window(paths, split=split, tasks=tasks, shard_per=per, **kw)
        assert res.table.num_rows and res.tuples_in == t.num_rows
        if per == "task":
            assert res.late_total > 0
            kept = res.tuples_in - res.late_total
            assert sum(res.table.column("count").to_pylist()) == kept
            continue
        rep = compare_windows(res.table, oracle, by=("k",), values=["count", "min_v"])
        assert rep.ok, (split, tasks, rep)
    # the global merge on the driver (shard outputs melded there, no shuffle of partials)
    res = sharded_window(paths, global_on="driver", **kw)
    assert res.path == "files+driver" and res.tuples_in == t.num_rows and res.late_total == 0
    rep = compare_windows(res.table, oracle, by=("k",), values=["count", "min_v"])
    assert rep.ok, rep


def test_late_rows_are_counted(spark, files) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    t, paths, _ = files
    # no arrival column: the shuffled file is replayed as written -> late rows under 50 ms
    s = shard_files(spark, paths, time="ts", punctuation=oop.BoundedDelay(50),
                    batch_size=64)
    res = s.query(lambda st_: st_.select(pc.field("v") >= 0)).collect()
    assert res.late_total > 0
    assert res.table.num_rows + res.late_total == t.num_rows == res.tuples_in
    assert Counter(_rows(res.table)) <= _rows(t)


def test_bad_input_one_line(spark, files, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    _, paths, _ = files
    sp = spark
    with pytest.raises(UnknownColumnError, match="tss"):
        shard_files(sp, paths, time="tss")
    with pytest.raises(UnknownColumnError, match="nope"):
        shard_files(sp, paths, time="ts", columns=["nope"])
    with pytest.raises(FileNotFoundError):
        shard_files(sp, [str(tmp_path / "missing.parquet")], time="ts")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(oop.errors.ConfigError, match="Parquet footer"):
        shard_files(sp, [str(bad)], time="ts")
