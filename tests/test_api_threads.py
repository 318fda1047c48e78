"""The Python API's reading and writing threads: ``from_parquet(read_ahead=True)`` and
``sink`` / ``to_parquet(background=True)`` give the one-thread output row for row.

Disordered feeds are cut into several Parquet files; the window runs with and without the
threads, and every variant is compared with the one-thread run. Feeds whose disorder the
punctuation bounds (``max_delay=4``) are also compared with the from-scratch oracle; the
others (any arrival order) have late rows, which both runs must drop alike.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.testing import disordered_tables
from oop.window import Sliding, agg
from oop.window.reference import window_oracle

KIND = Sliding(6, 2)
AGGS = [agg.count(), agg.sum("val"), agg.min("val")]


def _files(t: pa.Table, folder: Path, cuts: list[int]) -> Path:
    """``t`` as one Parquet file per piece between ``cuts``, named in arrival order."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted(min(c, t.num_rows) for c in cuts), t.num_rows]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        pq.write_table(t.slice(a, b - a), folder / f"part-{i:03d}.parquet", row_group_size=5)
    return folder


def _windowed(folder: Path, read_ahead: bool | None, batch_size: int) -> oop.Stream:
    s = oop.from_parquet(folder, time="ts", punctuation=oop.BoundedDelay(4),
                         batch_size=batch_size, read_ahead=read_ahead)
    return s.window(KIND, AGGS, by="key")


@st.composite
def _feeds(draw: st.DrawFn) -> pa.Table:
    return draw(disordered_tables(min_rows=1, max_rows=80,
                                  max_delay=draw(st.sampled_from([4, None]))))


@settings(max_examples=25, deadline=None)
@given(t=_feeds(), cuts=st.lists(st.integers(0, 80), max_size=3),
       batch_size=st.integers(1, 9))
def test_read_ahead_and_background_writing_change_nothing(tmp_path_factory, t: pa.Table,
                                                          cuts: list[int],
                                                          batch_size: int) -> None:
    root = tmp_path_factory.mktemp("api")
    folder = _files(t, root / "in", cuts)
    plain = _windowed(folder, False, batch_size).run()
    ahead = _windowed(folder, True, batch_size).run()
    assert ahead.table.equals(plain.table)  # same rows, same order
    assert ahead.late_total == plain.late_total
    assert ahead.metrics["window"].tuples_in + ahead.late_total == t.num_rows
    for target in ("out/", "out.parquet"):  # a part folder (two lanes), one file (one thread)
        out = f"{root}/bg-{target}"  # a str: a Path would drop the folder's "/"
        _windowed(folder, True, batch_size).to_parquet(out, background=True)
        assert pq.read_table(out).equals(plain.table)
    got: list[pa.RecordBatch] = []
    _windowed(folder, False, batch_size).sink(got.append, background=True)
    assert pa.Table.from_batches(got, plain.table.schema).equals(plain.table)
    if plain.late_total == 0:  # then the one-thread run is the oracle's
        expected = window_oracle(t, KIND, AGGS, by=["key"], time="ts", unit="ms")
        assert sorted(plain.table.to_pylist(), key=repr) == sorted(expected.to_pylist(),
                                                                   key=repr)


def test_background_writing_with_checkpoints_and_read_ahead_resume(tmp_path: Path) -> None:
    """A checkpointed run with both threads writes what the one-thread run writes; a second
    run on the same checkpoint folder resumes from the final checkpoint and adds nothing."""
    rows = 3000
    t = pa.table({"ts": pa.array([(i * 7919) % rows for i in range(rows)], pa.int64()),
                  "key": pa.array([i % 5 for i in range(rows)], pa.int64()),
                  "val": pa.array(range(rows), pa.int64())})
    folder = _files(t, tmp_path / "in", [1000, 2000])

    def run(out: str, threads: bool) -> None:
        s = oop.from_parquet(folder, time="ts", punctuation=oop.BoundedDelay(rows),
                             batch_size=100, read_ahead=threads)
        s.window(KIND, AGGS, by="key").to_parquet(
            f"{tmp_path}/{out}/", checkpoint_dir=tmp_path / f"ck-{out}",
            checkpoint_every="500rows", background=threads)

    run("plain", False)
    run("threads", True)
    plain = pq.read_table(tmp_path / "plain")
    assert plain.num_rows > 0
    assert pq.read_table(tmp_path / "threads").equals(plain)
    run("threads", True)  # finished: resumes from the final checkpoint, writes nothing new
    assert pq.read_table(tmp_path / "threads").equals(plain)


def test_a_stream_reads_its_files_again_on_every_run(tmp_path: Path) -> None:
    t = pa.table({"ts": [1, 3, 2, 5, 4, 8], "key": [1, 1, 2, 2, 1, 2], "val": [1, 2, 3, 4, 5, 6]})
    folder = _files(t, tmp_path / "in", [3])
    for read_ahead in (False, True):
        w = _windowed(folder, read_ahead, 2)
        first, second = w.run().table, w.run().table
        assert first.num_rows and first.equals(second)


def test_a_run_that_stops_early_stops_its_reading_thread(tmp_path: Path) -> None:
    """Dropping a run's output generator midway (or an error) closes the read-ahead: its
    thread ends and no file stays held by it."""
    import gc
    import threading

    rows = 2000
    t = pa.table({"ts": pa.array(range(rows), pa.int64()), "key": pa.array([0] * rows),
                  "val": pa.array(range(rows), pa.int64())})
    folder = _files(t, tmp_path / "in", [500, 1000, 1500])
    before = threading.active_count()
    batches = _windowed(folder, True, 10).iter_batches()
    next(batches)
    assert threading.active_count() == before + 1  # the reading thread
    batches.close()
    del batches
    gc.collect()
    assert threading.active_count() == before


def test_threads_are_on_by_default_where_there_is_more_than_one_core(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """Without ``read_ahead`` / ``background``, a Parquet source is read ahead and a path
    target written on threads of their own when the process may use more than one core,
    and neither on one core, with the same rows either way; a callable target runs on the
    calling thread unless ``background=True``."""
    import threading

    import oop.plan.background as bg

    rows = 600
    t = pa.table({"ts": pa.array([(i * 7919) % rows for i in range(rows)], pa.int64()),
                  "key": pa.array([i % 7 for i in range(rows)], pa.int64()),
                  "val": pa.array(range(rows), pa.int64())})
    folder = _files(t, tmp_path / "in", [200, 400])
    expected = _windowed(folder, False, 25).run().table
    assert expected.num_rows > 0
    for cores in (1, 2):
        monkeypatch.setattr(bg, "usable_cores", lambda: cores)
        seen: set[str] = set()

        def look(_round: int) -> None:
            seen.update(th.name for th in threading.enumerate())

        out = f"{tmp_path}/out-{cores}/"
        _windowed(folder, None, 25).sink(out, format="parquet", on_round=look)
        assert pq.read_table(out).equals(expected)
        assert any(n.startswith("oop-read-") for n in seen) == (cores > 1)
        assert any(n.startswith("oop-part-") for n in seen) == (cores > 1)  # encoding lanes

    callers: list[threading.Thread] = []

    def record(_b: pa.RecordBatch) -> None:
        callers.append(threading.current_thread())

    for background in (None, True):
        callers.clear()
        _windowed(folder, False, 25).sink(record, background=background)
        assert callers
        assert all((c is threading.main_thread()) == (background is None) for c in callers)


def test_a_checkpointed_run_refuses_a_single_file_written_on_threads(tmp_path: Path) -> None:
    """The restart check sees through the writing threads: a single file cannot be cut back
    after a crash, written on the calling thread or not."""
    t = pa.table({"ts": [1, 3, 2, 5], "key": [1, 1, 2, 2], "val": [1, 2, 3, 4]})
    folder = _files(t, tmp_path / "in", [2])
    for background in (False, True):
        with pytest.raises(oop.ConfigError, match="folder of parts"):
            _windowed(folder, background, 2).to_parquet(
                tmp_path / "x.parquet", checkpoint_dir=tmp_path / "ck", background=background)
