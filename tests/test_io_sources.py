"""Source connectors: files and folders (every format, offsets, schema drift, follow mode),
streams, standard input and sockets. Arrival reordering: test_io_reorder.py."""

from __future__ import annotations

import io
import json
import os
import socket
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oop.errors import SchemaMismatchError, SourceError
from oop.io.files import FileSource
from oop.io.protocol import END, IDLE, SourceConnector

T = pa.table({"ts": pa.array(range(23), pa.int64()),
              "name": pa.array([f"n{i % 5}" for i in range(23)], pa.string()),
              "v": pa.array([i * 0.5 for i in range(23)], pa.float64())})


def write(table: pa.Table, path: Path, fmt: str) -> Path:
    """Write ``table`` to ``path`` in ``fmt`` (several chunks / row groups where it applies)."""
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=7)
    elif fmt == "csv":
        pacsv.write_csv(table, path)
    elif fmt == "ndjson":
        path.write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()))
    elif fmt == "arrow-file":
        with ipc.new_file(path, table.schema) as w:
            w.write_table(table, max_chunksize=5)
    else:
        with ipc.new_stream(path, table.schema) as w:
            w.write_table(table, max_chunksize=5)
    return path


EXT = {"parquet": ".parquet", "csv": ".csv", "ndjson": ".ndjson",
       "arrow-file": ".arrow", "arrow-stream": ".arrow"}


def drain(src, max_rows: int, timeout: float = 0.0) -> list[pa.RecordBatch]:
    out = []
    while (b := src.poll(max_rows, timeout)) is not END:
        if b is not IDLE:
            out.append(b)
    return out


def table_of(batches: list[pa.RecordBatch], schema: pa.Schema | None = None) -> pa.Table:
    return pa.Table.from_batches(batches, schema=schema) if batches or schema else pa.table({})


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Per format: a folder of three files (T split 10/0/13 rows) plus ignored files."""
    out = {}
    for fmt, ext in EXT.items():
        d = tmp_path_factory.mktemp(fmt)
        write(T.slice(0, 10), d / f"a{ext}", fmt)
        write(T.slice(10, 13), d / f"c{ext}", fmt)
        sub = d / "b"
        sub.mkdir()
        write(T.slice(10, 0), sub / f"empty{ext}", fmt)
        (d / "_SUCCESS").write_text("")
        (d / ".hidden.parquet").write_text("not a file to read")
        (d / "_tmp").mkdir()
        (d / "_tmp" / f"x{ext}").write_text("junk")
        out[fmt] = d
    return out


@pytest.mark.parametrize("fmt", list(EXT))
def test_each_format_file_and_folder(folders, tmp_path, fmt):
    one = write(T, tmp_path / f"t{EXT[fmt]}", fmt)
    for path in (one, folders[fmt]):
        src = FileSource(path)
        assert isinstance(src, SourceConnector) and not src.live and src.resumable
        assert src.open() == T.schema
        batches = drain(src, 4)
        assert all(b.num_rows <= 4 for b in batches)
        assert table_of(batches).equals(T)
        src.close()


def test_format_overrides_extension(tmp_path):
    path = write(T, tmp_path / "data.txt", "csv")
    src = FileSource(path, format="csv")
    src.open()
    assert table_of(drain(src, 100)).equals(T)


def test_folder_name_order_and_batch_sizes(folders):
    src = FileSource(folders["parquet"])
    src.open()
    sizes, files = [], []
    while (b := src.poll(4)) is not END:
        sizes.append(b.num_rows)
        files.append(src.offset()["file"])
    assert sizes == [4, 4, 2, 4, 4, 4, 1]  # exact except at each file's end
    assert files == ["a.parquet"] * 3 + ["c.parquet"] * 4


@settings(max_examples=10)
@given(st.sampled_from(list(EXT)), st.integers(1, 30), st.integers(0, 23), st.integers(1, 30))
def test_concat_and_resume_at_any_cut(folders, fmt, max_rows, cut, max_rows2):
    src = FileSource(folders[fmt])
    src.open()
    got: list[pa.RecordBatch] = []
    rows = 0
    while rows < cut:
        b = src.poll(min(max_rows, cut - rows))
        assert b is not END and b.num_rows <= max_rows
        got.append(b)
        rows += b.num_rows
    off = json.loads(json.dumps(src.offset()))
    src.close()
    again = FileSource(folders[fmt])  # a "crash": a new connector from the offset
    again.open()
    again.seek(off)
    rest = drain(again, max_rows2)
    assert all(b.num_rows <= max_rows2 for b in rest)
    assert table_of(got + rest, T.schema).equals(T)


def test_columns_restrict_reading_and_checking(tmp_path):
    write(T, tmp_path / "a.parquet", "parquet")
    write(T.drop_columns(["name"]), tmp_path / "b.parquet", "parquet")
    src = FileSource(tmp_path, columns=["v", "ts"])
    assert src.open().names == ["v", "ts"]
    assert table_of(drain(src, 8)).num_rows == 46
    with pytest.raises(SchemaMismatchError, match="b.parquet"):
        s = FileSource(tmp_path)
        s.open()
        drain(s, 8)


@pytest.mark.parametrize("second, message", [
    (T.drop_columns(["v"]), r"lacks column\(s\) \['v'\]"),
    (T.rename_columns(["ts", "label", "v"]), r"\['name'\].*renamed"),
    (T.set_column(2, "v", pa.array(range(23), pa.int64())), r"v: int64 \(first file: double\)"),
])
def test_schema_drift_errors(tmp_path, second, message):
    write(T, tmp_path / "a.parquet", "parquet")
    write(second, tmp_path / "b.parquet", "parquet")
    src = FileSource(tmp_path)
    src.open()
    with pytest.raises(SchemaMismatchError, match=message) as e:
        drain(src, 5)
    assert "b.parquet" in str(e.value) and "\n" not in str(e.value)


def test_timezone_and_unit_changes_are_errors(tmp_path):
    ts = pa.array([1, 2], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"t": ts}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"t": ts.cast(pa.timestamp("ms", tz="Europe/Paris"))}),
                   tmp_path / "b.parquet")
    src = FileSource(tmp_path)
    src.open()
    with pytest.raises(SchemaMismatchError, match="Europe/Paris"):
        drain(src, 5)


def test_allowed_drift_extra_column_and_widening(tmp_path):
    first = pa.table({"k": pa.array([1, 2], pa.int64()), "s": pa.array(["a", "b"], pa.string())})
    later = pa.table({"k": pa.array([3], pa.int32()), "s": pa.array(["c"], pa.large_string()),
                      "extra": pa.array([9])})
    pq.write_table(first, tmp_path / "a.parquet")
    pq.write_table(later, tmp_path / "b.parquet")
    src = FileSource(tmp_path)
    assert src.open() == first.schema
    out = table_of(drain(src, 10))
    assert out.schema == first.schema and out.to_pydict() == {"k": [1, 2, 3], "s": ["a", "b", "c"]}


def test_corrupt_parquet_is_a_source_error(tmp_path):
    write(T, tmp_path / "a.parquet", "parquet")
    (tmp_path / "b.parquet").write_bytes(b"PAR1 this is not parquet at all PAR1")
    src = FileSource(tmp_path)
    src.open()
    with pytest.raises(SourceError, match="b.parquet.*unreadable"):
        drain(src, 100)
    with pytest.raises(SourceError, match="no file or folder"):
        FileSource(tmp_path / "missing").open()


def test_follow_picks_up_renamed_files_in_name_order_until_stop(tmp_path):
    write(T.slice(0, 5), tmp_path / "b.parquet", "parquet")
    src = FileSource(tmp_path, follow=True, poll_interval=0.01)
    assert src.live and src.open() == T.schema

    def writer() -> None:
        for name, part in (("c", T.slice(5, 6)), ("a", T.slice(11, 7)), ("d", T.slice(18, 5))):
            time.sleep(0.05)
            tmp = tmp_path / f".{name}.parquet.tmp"
            write(part, tmp, "parquet")
            os.rename(tmp, tmp_path / f"{name}.parquet")

    th = threading.Thread(target=writer)
    th.start()
    got, idle = [], 0
    while sum(b.num_rows for b in got) < 23:
        b = src.poll(4, timeout=0.02)
        assert b is not END
        if b is IDLE:
            idle += 1
        else:
            got.append(b)
    th.join()
    assert idle > 0 and table_of(got).equals(T)  # "a" sorts first but is read once, late
    assert src.poll(4, timeout=0.02) is IDLE
    off = json.loads(json.dumps(src.offset()))
    assert off["done"] == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]
    src.stop()
    assert src.poll(4, timeout=5) is END
    again = FileSource(tmp_path, follow=True, poll_interval=0.01)
    again.open()
    again.seek(off)
    assert again.poll(4, timeout=0.02) is IDLE  # nothing re-read after a restart


@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_small_read_blocks_cut_inside_rows(folders, monkeypatch, fmt):
    import oop.io.formats as formats

    monkeypatch.setattr(formats, "_NDJSON_BLOCK", 50)
    monkeypatch.setattr(formats, "_CSV_BLOCK", 64)
    for max_rows in (1, 3, 100):
        src = FileSource(folders[fmt])
        src.open()
        assert table_of(drain(src, max_rows)).equals(T)


# ---- streams and sockets ---------------------------------------------------
from oop.io.live import SocketSource, StreamSource  # noqa: E402

CSV_TEXT = b"ts,name,v\n" + b"".join(f"{i},n{i % 5},{i * 0.5}\n".encode() for i in range(23))
NDJSON_TEXT = b"".join(json.dumps(r).encode() + b"\n" for r in T.to_pylist())


def arrow_stream_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=4)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("fmt, data", [("csv", CSV_TEXT), ("ndjson", NDJSON_TEXT),
                                       ("arrow", arrow_stream_bytes(T))],
                         ids=["csv", "ndjson", "arrow"])
@pytest.mark.parametrize("max_rows", [1, 5, 100])
def test_stream_source_reads_every_format(fmt, data, max_rows):
    src = StreamSource(io.BytesIO(data), fmt)
    assert isinstance(src, SourceConnector) and src.live and not src.resumable
    src.open()
    batches = drain(src, max_rows, timeout=1.0)
    assert all(b.num_rows <= max_rows for b in batches)
    assert table_of(batches).equals(T) and src.rows_read == 23 and src.offset() is None


def test_stream_source_unparsable_chunk_is_a_source_error():
    src = StreamSource(io.BytesIO(b"a,b\n1,2\n"), "csv")
    src.open()
    assert src.poll(10, 1.0).num_rows == 1
    src = StreamSource(io.BytesIO(b'{"a": 1}\n{"a": "x"}\n'), "ndjson",
                       schema=pa.schema([("a", pa.int64())]))
    src.open()
    with pytest.raises(SourceError, match="source 'stream': cannot read ndjson"):
        drain(src, 10, 1.0)


def serve(chunks: list[bytes], pause: float) -> tuple[int, threading.Thread]:
    """A one-connection TCP server on 127.0.0.1 sending ``chunks`` with pauses, then closing."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def run() -> None:
        conn, _ = server.accept()
        with conn:
            for chunk in chunks:
                conn.sendall(chunk)
                time.sleep(pause)
        server.close()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return port, th


@pytest.mark.parametrize("fmt, data", [("csv", CSV_TEXT), ("ndjson", NDJSON_TEXT)],
                         ids=["csv", "ndjson"])
def test_socket_source_rows_arrive_with_idle_during_pauses(fmt, data):
    cuts = [0, 7, 40, 41, 150, len(data)]  # pieces cut inside lines
    port, th = serve([data[a:b] for a, b in zip(cuts, cuts[1:])], pause=0.15)
    src = SocketSource("127.0.0.1", port, fmt)
    src.open()
    got, idle = [], 0
    while (b := src.poll(4, timeout=0.03)) is not END:
        if b is IDLE:
            idle += 1
        else:
            got.append(b)
    th.join()
    src.close()
    assert idle > 0 and all(b.num_rows <= 4 for b in got)
    assert table_of(got).equals(T if fmt == "ndjson" else pacsv.read_csv(io.BytesIO(data)))


def test_socket_source_arrow_and_refused_connection():
    port, th = serve([arrow_stream_bytes(T)], pause=0.0)
    src = SocketSource("127.0.0.1", port, "arrow")
    src.open()
    assert table_of(drain(src, 6, 1.0)).equals(T)
    th.join()
    with socket.create_server(("127.0.0.1", 0)) as s:
        dead = s.getsockname()[1]
    with pytest.raises(SourceError, match=f"cannot connect to 127.0.0.1:{dead}"):
        SocketSource("127.0.0.1", dead).open()


def test_from_stdin_gives_first_rows_before_the_input_ends(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = ("import sys\nfrom oop.io.live import from_stdin\n"
            "from oop.io.protocol import END, IDLE\n"
            "s = from_stdin('csv'); s.open()\n"
            "while (b := s.poll(100, 0.05)) is not END:\n"
            "    if b is not IDLE: print(b.num_rows, flush=True)\n"
            "print('END', flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(root)})
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(b"a,b\n1,2\n3,4\n")
    p.stdin.flush()
    assert p.stdout.readline() == b"2\n"  # while stdin is still open
    p.stdin.write(b"5,6\n")
    p.stdin.close()
    assert p.stdout.read().split() == [b"1", b"END"]
    assert p.wait(10) == 0


def test_package_exports_and_unknown_extension(tmp_path):
    import oop.io

    assert oop.io.FileSource is FileSource and oop.io.StreamSource is StreamSource
    path = write(T, tmp_path / "data.txt", "csv")
    with pytest.raises(Exception, match="pass format="):
        FileSource(path).open()


def test_follow_resumes_inside_a_file_then_waits(tmp_path):
    write(T.slice(0, 10), tmp_path / "a.parquet", "parquet")
    write(T.slice(10, 13), tmp_path / "b.parquet", "parquet")
    src = FileSource(tmp_path, follow=True, poll_interval=0.01)
    src.open()
    head = [src.poll(4, 0.01) for _ in range(4)]  # 4 + 4 + 2 (a) + 4 (b)
    off = json.loads(json.dumps(src.offset()))
    assert off == {"file": "b.parquet", "row": 4, "done": ["a.parquet"]}
    again = FileSource(tmp_path, follow=True, poll_interval=0.01)
    again.open()
    again.seek(off)
    tail = [again.poll(100, 0.01)]
    assert again.poll(100, 0.01) is IDLE
    assert table_of(head + tail).equals(T)
    again.stop()
    assert again.poll(100, 1.0) is END


def test_stream_source_stop_ends_a_silent_feed():
    r, w = os.pipe()
    src = StreamSource(os.fdopen(r, "rb"), "ndjson")
    src.open()
    assert src.poll(10, 0.02) is IDLE
    threading.Timer(0.05, src.stop).start()
    t0 = time.monotonic()
    assert src.poll(10, 5.0) is END
    assert time.monotonic() - t0 < 2.0  # woken by stop(), not by the timeout
    assert src.poll(10, 0.01) is END
    os.close(w)


@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_text_files_take_the_first_files_types(tmp_path, fmt):
    first = pa.table({"k": ["a", "b"], "v": [0.5, 1.5]})
    later = pa.table({"k": ["c"], "v": pa.array([2], pa.int64())})  # integers only: would be int64
    write(first, tmp_path / f"a{EXT[fmt]}", fmt)
    write(later, tmp_path / f"b{EXT[fmt]}", fmt)
    src = FileSource(tmp_path)
    src.open()
    out = table_of(drain(src, 10))
    assert out.schema == first.schema and out.column("v").to_pylist() == [0.5, 1.5, 2.0]


def test_a_file_failing_midway_keeps_failing(tmp_path, monkeypatch):
    import oop.io.formats as formats

    monkeypatch.setattr(formats, "_CSV_BLOCK", 64)
    rows = "".join(f"{i},{i}\n" for i in range(30))
    (tmp_path / "a.csv").write_text("a,b\n" + rows + "x,y\n" + "1,2\n" * 5)
    src = FileSource(tmp_path / "a.csv")
    src.open()
    for _ in range(2):  # never mistaken for the file's end
        with pytest.raises(SourceError, match=r"file 'a.csv': unreadable .*'x'"):
            drain(src, 5)


def test_parquet_reads_only_the_needed_columns(tmp_path, monkeypatch):
    write(T, tmp_path / "a.parquet", "parquet")
    asked = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("columns"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    src = FileSource(tmp_path, columns=["v"])
    src.open()
    assert table_of(drain(src, 50)).equals(T.select(["v"]))
    assert asked == [["v"]]
