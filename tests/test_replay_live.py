"""`oop replay` on live feeds: streaming output, stdin, --follow, Redis, sinks, chunking-free
punctuation across formats, metrics lines, and one-line errors (subprocess runs of the CLI)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from _redis_server import SERVER, redis_server
from oop.cli import main
from oop.window import Tumbling, agg
from oop.window.reference import window_oracle

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
QUERY = ["--time", "ts", "--key", "k", "--window", "tumbling:1s", "--agg", "count",
         "--agg", "sum:v"]


def _cli(*argv: str, **kw) -> list[str]:
    return [sys.executable, "-m", "oop.cli", "replay", *argv]


@pytest.fixture(scope="module")
def feed() -> pa.Table:
    """4000 rows, ts in ms with arrival disorder under 800 ms, string keys, int values."""
    rng = np.random.default_rng(3)
    n = 4000
    arrival = np.arange(n, dtype=np.int64) * 10
    ts = arrival - rng.integers(0, 800, n)
    return pa.table({"ts": ts, "k": pa.array(rng.integers(0, 6, n).astype(str)),
                     "v": rng.integers(0, 100, n)})


def _oracle(table: pa.Table) -> list[dict]:
    t = window_oracle(table, Tumbling(1000), [agg.count(), agg.sum("v")], by="k", time="ts",
                      unit="ms")
    return sorted(t.to_pylist(), key=lambda r: (r["window_start"], r["k"]))


def _rows(t: pa.Table) -> list[dict]:
    return sorted(t.select(["k", "window_start", "window_end", "count", "sum_v"]).to_pylist(),
                  key=lambda r: (r["window_start"], r["k"]))


def test_stdin_first_window_leaves_before_input_ends(feed):
    """Keep stdin open; the first closed window must reach stdout while the feed goes on."""
    p = subprocess.Popen(_cli("--input", "-", *QUERY, "--punctuation", "bounded:1s"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=ENV)
    assert p.stdin is not None and p.stdout is not None
    head = feed.slice(0, 1000)
    buf = pa.BufferOutputStream()
    pacsv.write_csv(head, buf)
    p.stdin.write(buf.getvalue().to_pybytes())
    p.stdin.flush()
    header = p.stdout.readline()
    first = p.stdout.readline()  # blocks until a window has closed: stdin is still open
    assert b"window_start" in header and first.strip()
    assert p.poll() is None  # still running: the input has not ended
    rest = pa.BufferOutputStream()
    pacsv.write_csv(feed.slice(1000), rest, pacsv.WriteOptions(include_header=False))
    p.stdin.write(rest.getvalue().to_pybytes())
    p.stdin.close()
    out = header + first + p.stdout.read()
    assert p.wait(timeout=60) == 0, p.stderr.read() if p.stderr else ""
    got = pacsv.read_csv(pa.py_buffer(out), convert_options=pacsv.ConvertOptions(
        column_types={"k": pa.string()}))
    assert _rows(got) == _oracle(feed)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "ndjson", "arrow"])
def test_every_format_and_batch_size_gives_the_same_output_and_late_set(feed, tmp_path, fmt):
    """Punctuation after a row depends on the rows before it, not on the reader's chunks."""
    src = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(feed, src)
    elif fmt == "csv":
        pacsv.write_csv(feed, src)
    elif fmt == "ndjson":
        src.write_text("".join(json.dumps(r) + "\n" for r in feed.to_pylist()))
    else:
        with ipc.new_file(src, feed.schema) as w:
            w.write_table(feed)
    results = []
    for bs in ("37", "500", "4096"):
        out, late = tmp_path / f"o{bs}.parquet", tmp_path / f"l{bs}.parquet"
        rc = main(["replay", "--input", str(src), *QUERY, "--punctuation",
                   "bounded:300ms+cadence:250rows", "--batch-size", bs, "--late-out", str(late),
                   "--out", str(out), "--quiet"])
        assert rc == 0
        results.append((pq.read_table(out).to_pylist(),
                        sorted(map(tuple, (r.values() for r in pq.read_table(late).to_pylist())))))
    assert results[0] == results[1] == results[2]
    assert results[0][1], "the bound is below the disorder: some rows must be late"


def test_follow_picks_up_renamed_files_and_stops_after_idle(feed, tmp_path):
    folder = tmp_path / "feed"
    folder.mkdir()
    pq.write_table(feed.slice(0, 2000), folder / "a.parquet")
    out = tmp_path / "out"
    p = subprocess.Popen(_cli("--input", str(folder), "--follow", *QUERY, "--punctuation",
                              "bounded:1s", "--stop-after-idle", "2s", "--out", f"{out}/"),
                         stderr=subprocess.PIPE, env=ENV)
    time.sleep(1.0)
    tmp = folder / ".b.parquet.tmp"
    pq.write_table(feed.slice(2000), tmp)
    os.rename(tmp, folder / "b.parquet")  # writers rename into place
    assert p.wait(timeout=60) == 0, p.stderr.read() if p.stderr else ""
    err = p.stderr.read().decode() if p.stderr else ""
    assert "no new input for 2s" in err
    assert _rows(pq.read_table(out)) == _oracle(feed)


def test_out_forms_by_extension_folder_and_stdout(feed, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(feed, src)
    base = ["replay", "--input", str(src), *QUERY, "--punctuation", "bounded:1s", "--quiet"]
    want = _oracle(feed)
    assert main([*base, "--out", str(tmp_path / "o.csv")]) == 0
    got = pacsv.read_csv(tmp_path / "o.csv", convert_options=pacsv.ConvertOptions(
        column_types={"k": pa.string()}))
    assert _rows(got) == want  # CSV, not Parquet, for a .csv name
    assert main([*base, "--out", str(tmp_path / "o.ndjson")]) == 0
    lines = [json.loads(x) for x in (tmp_path / "o.ndjson").read_text().splitlines()]
    assert _rows(pa.Table.from_pylist(lines)) == want
    assert main([*base, "--out", str(tmp_path / "o.arrow")]) == 0
    assert _rows(ipc.open_file(tmp_path / "o.arrow").read_all()) == want
    assert main([*base, "--out", f"{tmp_path / 'parts'}/"]) == 0
    assert _rows(pq.read_table(tmp_path / "parts")) == want
    capsys.readouterr()
    assert main([*base, "--out", "-", "--out-format", "ndjson"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert _rows(pa.Table.from_pylist([json.loads(x) for x in out])) == want


@pytest.mark.parametrize("extra,needle", [
    (["--out", "/no/such/folder/out.parquet"], "no folder"),
    (["--batch-size", "0"], "--batch-size 0"),
    (["--allowed-lateness", "1s"], "--late update"),
    (["--metrics-every", "1s"], "--metrics-log"),
    (["--stop-after-idle", "10rows"], "--stop-after-idle"),
    (["--checkpoint-dir", "CK", "--out", "x.parquet"], "must be a folder"),
])
def test_bad_flags_are_one_line_exit_2(feed, tmp_path, capsys, extra, needle):
    src = tmp_path / "in.parquet"
    pq.write_table(feed, src)
    extra = [str(tmp_path / "ck") if x == "CK" else x for x in extra]
    rc = main(["replay", "--input", str(src), *QUERY, "--punctuation", "bounded:1s", "--quiet",
               *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("oop: error:") and needle in err[0]


def test_punctuation_is_required_and_lists_the_choices(feed, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(feed, src)
    assert main(["replay", "--input", str(src), *QUERY, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--punctuation is required" in err[0] and "bounded:DUR" in err[0]


def test_many_late_tuples_warn_and_metrics_log_appends(feed, tmp_path, capsys):
    src = tmp_path / "in.parquet"
    pq.write_table(feed, src)
    log = tmp_path / "m.jsonl"
    rc = main(["replay", "--input", str(src), *QUERY, "--punctuation", "ordered+cadence:100rows",
               "--out", str(tmp_path / "o.parquet"), "--metrics-every", "1000rows", "--batch-size", "500",
               "--metrics-log", str(log), "--quiet"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "were late" in err
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) >= 3
    assert lines[-1]["tuples_in"] == feed.num_rows
    assert all(a["tuples_in"] <= b["tuples_in"] for a, b in zip(lines, lines[1:]))
    assert {"low_watermark", "state_bytes", "late", "tuples_per_s"} <= set(lines[-1])


def test_closed_stdout_is_an_error_not_a_truncated_success(feed, tmp_path):
    src = tmp_path / "in.parquet"
    big = pa.concat_tables([feed] * 20)
    big = big.set_column(0, "ts", pa.array(np.arange(big.num_rows, dtype=np.int64) * 10))
    pq.write_table(big, src)
    cmd = " ".join(_cli("--input", str(src), "--time", "ts", "--key", "k", "--window",
                        "tumbling:10ms", "--agg", "count", "--punctuation", "bounded:0",
                        "--quiet"))
    r = subprocess.run(f"{cmd} | head -c 100 > /dev/null; echo \"rc=${{PIPESTATUS[0]}}\"",
                       shell=True, executable="/bin/bash", capture_output=True, text=True,
                       env=ENV, timeout=120)
    rc = int(r.stdout.strip().split("rc=")[-1])
    assert rc != 0 and "Traceback" not in r.stderr
    assert any(line.startswith("oop: error:") for line in r.stderr.splitlines()), r.stderr


@pytest.fixture(scope="module")
def redis_url():
    if SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    pytest.importorskip("redis")
    with redis_server() as (port, client):
        yield f"redis://127.0.0.1:{port}", client


def test_redis_stream_input_until_idle(feed, redis_url):
    url, client = redis_url
    pipe = client.pipeline()
    for r in feed.to_pylist():
        pipe.xadd("flows", {"ts": r["ts"], "k": r["k"], "v": r["v"]})
    pipe.execute()
    r = subprocess.run(_cli("--input", f"{url}/flows", *QUERY, "--punctuation", "bounded:1s",
                            "--stop-after-idle", "1s", "--quiet"),
                       capture_output=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    got = pacsv.read_csv(pa.py_buffer(r.stdout), convert_options=pacsv.ConvertOptions(
        column_types={"k": pa.string()}))
    assert _rows(got) == _oracle(feed)


def test_socket_source_in_the_library(feed):
    """``oop.from_socket``: rows written in pieces with pauses all arrive; windows == oracle."""
    import threading

    import oop

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    lines = ["ts,k,v"] + [f"{r['ts']},{r['k']},{r['v']}" for r in feed.to_pylist()]

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            for i in range(0, len(lines), 900):
                conn.sendall(("\n".join(lines[i:i + 900]) + "\n").encode())
                time.sleep(0.2)
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    s = oop.from_socket("127.0.0.1", port, format="csv", time="ts",
                        punctuation=oop.BoundedDelay("1s"))
    batches = list(s.window(Tumbling("1s"), [agg.count(), agg.sum("v")], by="k").iter_batches())
    got = pa.Table.from_batches(batches)
    got = got.set_column(got.schema.get_field_index("k"), "k", got.column("k").cast(pa.string()))
    assert _rows(got) == _oracle(feed)


def test_peak_rss_does_not_grow_with_the_input(tmp_path):
    """A 10x longer input runs within 1.25x the peak RSS (nothing is held per row)."""
    rng = np.random.default_rng(5)
    peaks = []
    for n in (300_000, 3_000_000):
        src = tmp_path / f"in{n}.parquet"
        ts = np.arange(n, dtype=np.int64) - rng.integers(0, 2000, n)
        pq.write_table(pa.table({"ts": ts, "k": rng.integers(0, 500, n),
                                 "v": rng.random(n)}), src, row_group_size=100_000)
        m = tmp_path / f"m{n}.json"
        r = subprocess.run(_cli("--input", str(src), "--time", "ts", "--key", "k", "--window",
                                "sliding:1s,100ms", "--agg", "count", "--agg", "sum:v",
                                "--punctuation", "bounded:2s", "--out", f"{tmp_path}/o{n}/",
                                "--metrics", str(m), "--quiet"),
                           capture_output=True, env=ENV, timeout=300)
        assert r.returncode == 0, r.stderr.decode()
        peaks.append(json.loads(m.read_text())["peak_rss_bytes"])
    assert peaks[1] <= 1.25 * peaks[0], peaks
