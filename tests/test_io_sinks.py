"""Sinks: results leave as they are produced, memory stays bounded, failures are never silent.

Formats round-trip; part folders commit by rename and recover after a crash;
missing folders, full disks and closed pipes raise one-line SinkErrors;
Stream.sink / iter_batches / to_parquet stream instead of collecting, and a
late target receives exactly the rows ``run()`` keeps in ``Result.late``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

import oop
from oop.errors import ConfigError, SinkError
from oop.io.writers import csv_ready
from oop.io.parts import PartsSink, committed_parts, recover
from oop.io.protocol import Sink
from oop.io.sinks import CallbackSink, FileSink, StdoutSink, open_sink
from oop.plan.writer import SinkWriter
from oop.window import Tumbling, agg

REPO = Path(__file__).resolve().parents[1]


def batches(n: int = 5, rows: int = 100) -> list[pa.RecordBatch]:
    out = []
    for i in range(n):
        r = np.arange(i * rows, (i + 1) * rows)
        out.append(pa.record_batch({"ts": pa.array(r, pa.int64()), "x": pa.array(r * 0.5),
                                    "s": pa.array([f"r{j}" for j in r])}))
    return out


def write_all(sink: Sink, bs: list[pa.RecordBatch]) -> None:
    sink.open(bs[0].schema)
    for b in bs:
        sink.write(b)
    sink.close()


def read_back(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path)
    if fmt == "arrow":
        return pa.ipc.open_file(str(path)).read_all()
    if fmt == "csv":
        return pacsv.read_csv(path)
    return pajson.read_json(path)


# ---- formats -------------------------------------------------------------
@pytest.mark.parametrize("ext", ["parquet", "csv", "ndjson", "jsonl", "arrow"])
def test_each_format_round_trips(tmp_path: Path, ext: str) -> None:
    bs = batches()
    path = tmp_path / f"out.{ext}"
    write_all(open_sink(str(path)), bs)
    got = read_back(path, "ndjson" if ext == "jsonl" else ext)
    want = pa.Table.from_batches(bs)
    assert got.column_names == want.column_names
    assert got.to_pylist() == want.to_pylist()


def test_format_overrides_extension(tmp_path: Path) -> None:
    path = tmp_path / "out.dat"
    write_all(open_sink(str(path), fmt="csv"), batches(2))
    assert pacsv.read_csv(path).num_rows == 200


def test_unknown_extension_lists_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\.parquet.*\.csv.*\.ndjson.*\.arrow"):
        open_sink(str(tmp_path / "out.txt"))
    with pytest.raises(ConfigError, match="parquet, csv, ndjson, arrow"):
        open_sink(str(tmp_path / "out.csv"), fmt="xml")


def test_parquet_buffers_small_batches_into_large_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "out.parquet"
    write_all(open_sink(str(path)), batches(200, 50))  # 200 batches of 50 rows
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    write_all(FileSink(path, "parquet", row_group_rows=3000), batches(200, 50))
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 4 and meta.num_rows == 10_000


def test_parquet_dictionary_encodes_text_columns_only_and_reads_back(tmp_path: Path) -> None:
    """Strings (keys), binaries and dictionaries are dictionary-encoded, 32/64-bit integers
    and window bounds delta-packed, floats plain; pyarrow and DuckDB read every row back."""
    import duckdb

    n = 3000
    r = np.arange(n)
    ws = (r // 100 * 1000).astype("datetime64[ms]")
    t = pa.table({"k": pa.array([f"key{j % 37}" for j in r]), "ik": pa.array(r % 37),
                  "b": pa.array([bytes([j % 5]) for j in r], pa.binary()),
                  "d": pa.array([f"d{j % 3}" for j in r]).dictionary_encode(),
                  "window_start": ws, "window_end": ws + np.timedelta64(1000, "ms"),
                  "count": pa.array(r % 7), "sum_v": pa.array(r * 0.25),
                  "none": pa.array([None] * n, pa.string())})
    path = tmp_path / "out.parquet"
    write_all(open_sink(str(path)), t.to_batches(max_chunksize=512))
    meta = pq.ParquetFile(path).metadata
    dict_cols = {meta.row_group(0).column(i).path_in_schema
                 for i in range(meta.num_columns)
                 if meta.row_group(0).column(i).has_dictionary_page}
    assert dict_cols == {"k", "b", "d", "none"}
    encodings = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).encodings
                 for i in range(meta.num_columns)}
    delta = {c for c, e in encodings.items() if "DELTA_BINARY_PACKED" in e}
    assert delta == {"ik", "window_start", "window_end", "count"}
    assert "PLAIN" in encodings["sum_v"]
    assert pq.read_table(path).to_pylist() == t.to_pylist()
    got = duckdb.connect().execute(f"SELECT k, ik, count, sum_v, epoch_ms(window_end) "
                                   f"FROM read_parquet('{path}')").fetchall()
    want = zip(t["k"].to_pylist(), t["ik"].to_pylist(), t["count"].to_pylist(),
               t["sum_v"].to_pylist(), ((j // 100 + 1) * 1000 for j in r))
    assert sorted(got) == sorted(want)


def test_nested_column_to_csv_as_json_text(tmp_path: Path) -> None:
    b = pa.record_batch({"k": [1, 2, 3], "top": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
                         "st": pa.array([{"a": 1}, {"a": 2}, {"a": None}])})
    path = tmp_path / "nested.csv"
    write_all(open_sink(str(path)), [b])
    got = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        column_types={"top": pa.string(), "st": pa.string()}))
    assert [json.loads(v) if v else None for v in got.column("top").to_pylist()] == [[1, 2], None, []]
    assert [json.loads(v) for v in got.column("st").to_pylist()] == [{"a": 1}, {"a": 2}, {"a": None}]
    assert csv_ready(b).schema.field("top").type == pa.string()


@pytest.mark.parametrize("fmt", ["csv", "ndjson", "arrow"])
def test_stdout_formats_flush_each_batch(fmt: str) -> None:
    buf = io.BytesIO()
    sink = StdoutSink(fmt, stream=buf)
    bs = batches(3)
    sink.open(bs[0].schema)
    sink.write(bs[0])
    seen_after_one = len(buf.getvalue())
    for b in bs[1:]:
        sink.write(b)
    sink.close()
    assert seen_after_one > 0
    data = buf.getvalue()
    if fmt == "arrow":
        got = pa.ipc.open_stream(data).read_all()
    elif fmt == "csv":
        got = pacsv.read_csv(io.BytesIO(data))
    else:
        got = pajson.read_json(io.BytesIO(data))
    assert got.to_pylist() == pa.Table.from_batches(bs).to_pylist()


def test_ndjson_is_strict_json_nan_and_timestamps(tmp_path: Path) -> None:
    b = pa.record_batch({"x": pa.array([1.5, float("nan"), None, float("-inf")]),
                         "t": pa.array([0, 1, 2, 3], pa.timestamp("ms", tz="UTC"))})
    path = tmp_path / "out.ndjson"
    write_all(open_sink(str(path)), [b])
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
            for line in path.read_text().splitlines()]
    assert [r["x"] for r in rows] == [1.5, None, None, None]
    assert rows[1]["t"] == "1970-01-01T00:00:00.001000+00:00"


def test_stdout_cannot_carry_parquet() -> None:
    with pytest.raises(ConfigError, match="standard output"):
        open_sink("-", fmt="parquet")


# ---- part folders ----------------------------------------------------------
def visible(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if not n.startswith("."))


def test_parts_are_invisible_until_commit(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    sink = open_sink(str(folder) + "/", max_rows_per_part=150)
    assert isinstance(sink, PartsSink) and folder.is_dir()
    bs = batches(4)  # 400 rows: parts of 150, 150, 100
    sink.open(bs[0].schema)
    for b in bs:
        sink.write(b)
    assert visible(folder) == [] and len(os.listdir(folder)) == 3
    assert sink.commit() == {"parts": 3, "rows": 400}
    assert visible(folder) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [pq.read_metadata(folder / n).num_rows for n in visible(folder)] == [150, 150, 100]
    sink.write(bs[0])  # a commit rolls the part over: the next rows start part 3
    assert visible(folder)[-1] == "part-00002.parquet"
    sink.close()
    assert visible(folder)[-1] == "part-00003.parquet"
    assert pq.read_table(folder).num_rows == 500


def test_recover_removes_pending_and_beyond_commit_and_numbering_continues(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    bs = batches(6)
    sink = open_sink(str(folder) + "/", max_rows_per_part=100)
    sink.open(bs[0].schema)
    sink.write(bs[0])
    sink.write(bs[1])
    cp = sink.commit()  # the checkpoint records this
    assert cp == {"parts": 2, "rows": 200}
    sink.write(bs[2])
    sink.commit()  # committed after the checkpoint: a restart replays these rows
    sink.write(bs[3])  # pending when the run "crashes" (never closed)
    assert len(committed_parts(folder)) == 3 and len(os.listdir(folder)) == 4
    deleted = recover(folder, cp)
    assert sorted(p.name for p in deleted) == [".part-00003.parquet.pending", "part-00002.parquet"]
    assert os.listdir(folder) and visible(folder) == sorted(os.listdir(folder))
    again = open_sink(str(folder), max_rows_per_part=100)  # an existing folder: parts too
    again.open(bs[0].schema)
    for b in bs[2:]:
        again.write(b)
    assert again.commit() == {"parts": 6, "rows": 400}
    again.close()
    assert [n for n, _ in committed_parts(folder)] == list(range(6))
    assert pq.read_table(folder).to_pylist() == pa.Table.from_batches(bs).to_pylist()


def test_empty_run_leaves_one_empty_typed_part(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    sink = open_sink(str(folder) + "/")
    sink.open(batches(1)[0].schema)
    sink.close()
    t = pq.read_table(folder)
    assert t.num_rows == 0 and t.column_names == ["ts", "x", "s"]


def windowed(t: pa.Table, late: str = "side_output", batch_size: int = 500) -> oop.Stream:
    s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(300),
                       batch_size=batch_size, late=late)
    return s.window(Tumbling("1s"), [agg.count(), agg.sum("v")], by="k")


@pytest.fixture(scope="module")
def disordered() -> pa.Table:
    rng = np.random.default_rng(7)
    n = 20_000
    ts = np.sort(rng.integers(0, 30_000, n)) + rng.integers(-600, 600, n)
    return pa.table({"ts": ts, "k": rng.integers(0, 4, n), "v": rng.integers(0, 100, n)})


def test_checkpointed_part_sink_resumes_exactly_once(tmp_path: Path, disordered: pa.Table) -> None:
    want = windowed(disordered).run().table
    folder = tmp_path / "out"
    writer = SinkWriter(open_sink(str(folder) + "/", max_rows_per_part=7))
    ex, _ = windowed(disordered).executor(terminal=writer)
    cp = ex.run(stop_after_rounds=20)
    assert cp is not None and cp.states["sink"]["commit"]["rows"] > 0
    ex.run(stop_after_rounds=30)  # more work after the checkpoint, then a "crash"
    writer2 = SinkWriter(open_sink(str(folder) + "/", max_rows_per_part=7))
    ex2, _ = windowed(disordered).executor(terminal=writer2)
    ex2.resume(cp)  # recovers the folder to the checkpoint's commit point
    ex2.run()
    writer2.close()
    assert pq.read_table(folder).to_pylist() == want.to_pylist()


# ---- checks before work, failures ------------------------------------------
def counting_feed(bs: list[pa.RecordBatch], pulled: list[int]) -> Iterator[pa.RecordBatch]:
    for b in bs:
        pulled[0] += 1
        yield b


def test_missing_folder_is_reported_before_any_row_is_read(tmp_path: Path) -> None:
    bs = batches(3)
    for target in [tmp_path / "nope" / "out.csv", str(tmp_path / "nope" / "deeper") + "/"]:
        pulled = [0]
        s = oop.from_iter(counting_feed(bs, pulled), time="ts", schema=bs[0].schema)
        with pytest.raises(SinkError, match=r"no folder .*nope for --out .*; create it first"):
            s.sink(str(target))
        assert pulled == [0]
    assert not (tmp_path / "nope").exists()


class FullDisk(io.RawIOBase):
    """A file object on a full disk: every write raises ENOSPC."""

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "ndjson", "arrow"])
def test_full_disk_raises_one_line_sink_error(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"out.{fmt}"
    sink = open_sink(str(path), opener=lambda p, mode: FullDisk())
    s = oop.from_batches(batches(3), time="ts")
    with pytest.raises(SinkError) as e:
        s.sink(sink)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "ENOSPC" in msg
    assert isinstance(e.value.__cause__, OSError) and e.value.__cause__.errno == errno.ENOSPC


def test_full_disk_in_a_part_folder_discards_pending_parts(tmp_path: Path) -> None:
    opened: list[str] = []

    def opener(path: str, mode: str) -> Any:
        opened.append(path)
        return open(path, mode) if len(opened) < 3 else FullDisk()

    folder = tmp_path / "out"
    sink = open_sink(str(folder) + "/", fmt="csv", opener=opener, max_rows_per_part=100)
    with pytest.raises(SinkError, match="ENOSPC"):
        oop.from_batches(batches(5), time="ts").sink(sink)
    assert os.listdir(folder) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_full_file_and_stdout() -> None:
    with pytest.raises(SinkError, match="/dev/full.*ENOSPC"):
        oop.from_batches(batches(3), time="ts").sink("/dev/full", format="csv")
    with open("/dev/full", "wb") as full:
        p = subprocess.run([sys.executable, "-c", _STDOUT_SCRIPT], stdout=full,
                           stderr=subprocess.PIPE, env=_env(), timeout=120)
    err = p.stderr.decode().strip()
    assert p.returncode != 0 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and "ENOSPC" in err, err


_STDOUT_SCRIPT = """
import sys, pyarrow as pa, oop
from oop.errors import SinkError
def feed():
    for i in range(2000):
        yield pa.record_batch({"ts": pa.array(range(i * 500, (i + 1) * 500), pa.int64())})
s = oop.from_iter(feed(), time="ts", schema=pa.schema([("ts", pa.int64())]))
try:
    s.sink("-")
except SinkError as e:
    sys.exit(f"oop: {e}")
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_closed_pipe_exits_non_zero_with_one_line() -> None:
    p = subprocess.Popen([sys.executable, "-c", _STDOUT_SCRIPT], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=_env())
    assert p.stdout is not None and p.stderr is not None
    head = p.stdout.read(100)  # what `| head -c 100` does: read 100 bytes, then close the pipe
    p.stdout.close()
    err = p.stderr.read().decode().strip()
    assert p.wait(timeout=120) != 0
    assert head.startswith(b'"ts"\n0\n1\n')
    assert "Traceback" not in err and "Exception ignored" not in err
    assert len(err.splitlines()) == 1 and "EPIPE" in err and "standard output" in err, err


def test_closed_pipe_through_a_shell_pipeline() -> None:
    cmd = f"set -o pipefail; {sys.executable} -c '{_STDOUT_SCRIPT}' | head -c 100 >/dev/null"
    p = subprocess.run(["bash", "-c", cmd], stderr=subprocess.PIPE, env=_env(), timeout=120)
    err = p.stderr.decode().strip()
    assert p.returncode != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err


# ---- Stream API --------------------------------------------------------------
def test_sink_callable_gets_batches_while_sources_still_have_rows(disordered: pa.Table) -> None:
    bs = disordered.to_batches(max_chunksize=500)
    pulled = [0]
    calls: list[tuple[int, int]] = []
    s = oop.from_iter(counting_feed(bs, pulled), time="ts", unit="ms", schema=disordered.schema,
                      punctuation=oop.BoundedDelay(300))
    res = s.window(Tumbling("1s"), [agg.count()], by="k").sink(
        lambda b: calls.append((pulled[0], b.num_rows)))
    assert len(calls) > 1 and calls[0][0] < len(bs)
    assert sum(n for _, n in calls) == res.metrics["sink"].tuples_in > 0
    assert res.table.num_rows == 0 and res.metrics["sink"].peak_state_bytes == 0


def test_sink_accepts_sink_objects_and_paths(tmp_path: Path, disordered: pa.Table) -> None:
    want = windowed(disordered).run().table
    cb = CallbackSink(lambda b: None)
    windowed(disordered).sink(cb)
    assert cb.rows == want.num_rows
    windowed(disordered).sink(str(tmp_path / "w.arrow"))
    assert pa.ipc.open_file(str(tmp_path / "w.arrow")).read_all().equals(want)


def test_iter_batches_equals_run_and_is_lazy(disordered: pa.Table) -> None:
    want = windowed(disordered).run().table
    got = pa.Table.from_batches(list(windowed(disordered).iter_batches()), schema=want.schema)
    assert got.equals(want)
    bs = disordered.to_batches(max_chunksize=500)
    pulled = [0]
    s = oop.from_iter(counting_feed(bs, pulled), time="ts", unit="ms", schema=disordered.schema,
                      punctuation=oop.BoundedDelay(300))
    it = s.window(Tumbling("1s"), [agg.count()], by="k").iter_batches()
    first = next(it)
    assert first.num_rows > 0 and pulled[0] < len(bs)
    it.close()


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_to_parquet_streams_and_equals_run(tmp_path: Path, disordered: pa.Table,
                                           kind: str) -> None:
    want = windowed(disordered).run().table
    target = str(tmp_path / "out") + "/" if kind == "dir" else str(tmp_path / "out.parquet")
    res = windowed(disordered).to_parquet(target)
    assert res.table.num_rows == 0
    assert pq.read_table(target.rstrip("/")).equals(want)


def test_late_target_receives_exactly_the_late_rows(tmp_path: Path, disordered: pa.Table) -> None:
    ref = windowed(disordered).run()
    want = pa.concat_tables(ref.late.values())
    assert want.num_rows > 0
    got: list[pa.RecordBatch] = []
    res = windowed(disordered).sink(lambda b: None, late=got.append)
    assert res.late == {} and res.late_total == ref.late_total
    assert pa.Table.from_batches(got).equals(want)
    path = tmp_path / "late.parquet"
    out = list(windowed(disordered).iter_batches(late=str(path)))
    assert sum(b.num_rows for b in out) == ref.table.num_rows
    assert pq.read_table(path).equals(want)
    # no late row at all: the late file is still written, empty and typed
    none = tmp_path / "none.parquet"
    windowed(disordered, late="drop").sink(lambda b: None, late=str(none))
    assert pq.read_table(none).num_rows == 0
    assert pq.read_table(none).schema.names == disordered.schema.names


def test_run_still_collects(disordered: pa.Table) -> None:
    ex, sink = windowed(disordered).executor()
    ex.run()
    assert sink.table().equals(windowed(disordered).run().table)


def test_a_single_file_refuses_to_resume_a_checkpoint_with_rows(tmp_path: Path,
                                                                 disordered: pa.Table) -> None:
    path = tmp_path / "out.csv"
    writer = SinkWriter(open_sink(str(path)))
    ex, _ = windowed(disordered).executor(terminal=writer)
    cp = ex.run(stop_after_rounds=20)
    assert cp is not None and cp.states["sink"]["commit"]["rows"] > 0
    writer.abort()
    before = path.read_bytes()
    ex2, _ = windowed(disordered).executor(terminal=SinkWriter(open_sink(str(path))))
    with pytest.raises(oop.errors.CheckpointError, match="folder of parts"):
        ex2.resume(cp)
    assert path.read_bytes() == before  # the earlier run's file is left as it was


@pytest.mark.parametrize("background", [False, True])
def test_commit_every_shows_parts_during_the_run(tmp_path: Path, disordered: pa.Table,
                                                 background: bool) -> None:
    want = windowed(disordered).run().table
    folder = tmp_path / "out"
    seen: list[int] = []
    windowed(disordered).sink(str(folder) + "/", commit_every=10, background=background,
                              on_round=lambda r: seen.append(len(committed_parts(folder))))
    assert 0 < seen[-1] <= len(committed_parts(folder))
    if not background:  # on lanes, a part shows once its lane has made it durable
        assert 0 < seen[len(seen) // 2] < seen[-1]
    assert pq.read_table(folder).to_pylist() == want.to_pylist()


def test_publish_renames_the_durable_parts_without_waiting(tmp_path: Path) -> None:
    """The periodic commit of a part folder encoded on lanes (PartsSink.publish) returns
    while a lane still waits to close a part, renames nothing that is not durable, and
    renames the parts in number order once they are; close commits the rest."""
    gate = threading.Event()

    class Gated(io.FileIO):
        def close(self) -> None:  # the lane's sync closes a finished part after its fsync
            if not self.closed:
                gate.wait(10)
            super().close()

    folder = tmp_path / "out"
    sink = PartsSink(folder, opener=lambda p, m: Gated(p, m), max_rows_per_part=100)
    sink.write_on_threads(2)
    bs = batches(5)
    sink.open(bs[0].schema)
    for b in bs[:3]:  # parts 0-2; finishing part 1 queued part 0's sync (it waits at close)
        sink.write(b)
    t0 = time.monotonic()
    sink.publish()
    assert time.monotonic() - t0 < 5 and not gate.is_set()  # it did not wait for the lane
    assert committed_parts(folder) == []  # nothing was durable
    gate.set()
    deadline = time.monotonic() + 10
    while not committed_parts(folder) and time.monotonic() < deadline:
        time.sleep(0.01)
        sink.publish()
    shown = [n for n, _ in committed_parts(folder)]
    assert shown and shown == list(range(len(shown)))  # a prefix, in number order
    for b in bs[3:]:
        sink.write(b)
    sink.close()
    assert [n for n, _ in committed_parts(folder)] == list(range(5))
    assert pq.read_table(folder).equals(pa.Table.from_batches(bs))


def test_stdout_without_a_byte_buffer_takes_text(monkeypatch: pytest.MonkeyPatch) -> None:
    text = io.StringIO()
    monkeypatch.setattr(sys, "stdout", text)
    write_all(open_sink("-", fmt="ndjson"), batches(2, 3))
    assert [json.loads(line)["ts"] for line in text.getvalue().splitlines()] == list(range(6))
    with pytest.raises(ConfigError, match="text only"):
        open_sink("-", fmt="arrow").open(batches(1)[0].schema)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("fmt", ["parquet", "csv", "arrow"])
def test_the_default_arrow_file_reports_a_full_disk_with_its_errno(fmt: str) -> None:
    """The default opener is Arrow's own file (oop.io.filewrite.native_open): a write that
    fails on a full device is the same one-line SinkError naming ENOSPC as with open()."""
    sink = open_sink("/dev/full", fmt=fmt)
    s = oop.from_batches(batches(3), time="ts")
    with pytest.raises(SinkError) as e:
        s.sink(sink)
    msg = str(e.value)
    assert "\n" not in msg and "/dev/full" in msg and "ENOSPC" in msg
    assert isinstance(e.value.__cause__, OSError) and e.value.__cause__.errno == errno.ENOSPC


def test_publish_cuts_the_open_part_only_when_no_part_rolled_since(tmp_path: Path) -> None:
    """publish finishes the open part when nothing else would come into view (no part rolled
    over since the last publish), and leaves it open when one did: a commit every part's
    worth of rows then keeps parts of max_rows_per_part rows instead of doubling them."""
    folder = tmp_path / "out"
    sink = PartsSink(folder, max_rows_per_part=100)
    bs = batches(6, 60)  # 360 rows
    sink.open(bs[0].schema)
    sink.write(bs[0])  # 60 rows in part 0, none finished
    sink.publish()  # nothing rolled: part 0 is cut (60 rows)
    assert sink._part is None and [p.rows for p in sink.pending] == [60]
    sink.write(bs[1])
    sink.write(bs[2])  # part 1 rolls at 100 rows, part 2 holds 20
    sink.publish()  # part 1 rolled: part 2 stays open
    assert sink._part is not None and sink._part.rows == 20
    sink.publish()  # nothing rolled since: part 2 is cut now
    assert sink._part is None
    for b in bs[3:]:
        sink.write(b)
    sink.close()
    rows = [pq.read_metadata(f).num_rows for _, f in committed_parts(folder)]
    assert rows == [60, 100, 20, 100, 80]
    assert pq.read_table(folder).equals(pa.Table.from_batches(bs))
