"""`oop replay`: results equal the batch oracle; bad input gives one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from oop.cli import main
from oop.window import Sliding, Tumbling, agg
from oop.window.reference import window_oracle


@pytest.fixture(scope="module")
def flows(tmp_path_factory) -> tuple[Path, pa.Table]:
    """3000 rows; event time ts (ms), arrival order arr = ts + delay (delay < 2 s)."""
    rng = np.random.default_rng(7)
    n = 3000
    ts = np.sort(rng.integers(0, 30_000, n))
    arr = ts + rng.integers(0, 2_000, n)
    t = pa.table({
        "ts": ts.astype(np.int64),
        "arr": arr.astype(np.int64),
        "src": pa.array(rng.integers(0, 5, n).astype(str)),
        "len": rng.integers(40, 1500, n).astype(np.int64),
        "name": pa.array(["x"] * n),
    })
    path = tmp_path_factory.mktemp("replay") / "flows.parquet"
    pq.write_table(t, path)
    return path, t


def _sorted(t: pa.Table, keys: list[str]) -> list[dict]:
    return t.sort_by([(k, "ascending") for k in keys]).to_pylist()


@pytest.mark.parametrize(
    "window,kind,strategy",
    [
        ("tumbling:1s", Tumbling(1000), "oop"),
        ("sliding:5s,1s", Sliding(5000, 1000), "oop"),
        ("sliding:5s,1s", Sliding(5000, 1000), "iop-slack:2s,consistent"),
    ],
)
def test_replay_matches_oracle(flows, tmp_path, window, kind, strategy):
    path, table = flows
    out, metrics = tmp_path / "out.parquet", tmp_path / "m.json"
    rc = main([
        "replay", "--input", str(path), "--time", "ts", "--arrival", "arr", "--key", "src",
        "--window", window, "--agg", "count", "--agg", "sum:len", "--punctuation", "bounded:2s",
        "--batch-size", "256", "--strategy", strategy, "--out", str(out), "--metrics", str(metrics),
        "--quiet",
    ])
    assert rc == 0
    arrival = table.sort_by([("arr", "ascending")])
    expected = window_oracle(arrival, kind, [agg.count(), agg.sum("len")], by="src", time="ts", unit="ms")
    got = pq.read_table(out)
    assert got.column_names == ["src", "window_start", "window_end", "count", "sum_len"]
    keys = ["src", "window_start"]
    assert _sorted(got.select(expected.column_names), keys) == _sorted(expected, keys)
    m = json.loads(metrics.read_text())
    for field in ("tuples_in", "late", "windows_out", "peak_state_items", "peak_state_bytes",
                  "wall_s", "tuples_per_s"):
        assert field in m
    assert m["tuples_in"] == table.num_rows and m["late"] == 0
    assert m["windows_out"] == got.num_rows
    assert 0.0 <= m["jit_compile_s"] <= m["wall_s"]  # numba compilation, part of the wall
    assert 0.0 <= m["compile_wait_s"] <= m["wall_s"]  # waiting for the compile-ahead helper
    if strategy == "oop":  # which method and layout the window operator picked
        assert m["plan"]["method"] == ("wid" if isinstance(kind, Tumbling) else "paned")
        assert m["plan"]["layout"] in ("dense ring x codes", "hash (unit, code) cells")


def test_replay_csv_to_stdout_and_late_counted(flows, tmp_path, capsys):
    path, table = flows
    # arrival order is disordered: with ordered punctuation many rows are late and dropped
    rc = main(["replay", "--input", str(path), "--time", "ts", "--arrival", "arr",
               "--window", "tumbling:10s", "--batch-size", "64",
               "--agg", "count", "--punctuation", "ordered+cadence:64rows", "--quiet",
               "--metrics", str(tmp_path / "m.json")])
    assert rc == 0
    out = capsys.readouterr().out
    csv = pacsv.read_csv(pa.py_buffer(out.encode()))
    m = json.loads((tmp_path / "m.json").read_text())
    # every tuple is accounted for: counted in a window or counted late
    assert m["late"] > 0
    assert sum(csv.column("count").to_pylist()) + m["late"] == table.num_rows


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--time", "nope", "--window", "tumbling:1s", "--agg", "count"], "'nope'"),
        (["--time", "ts", "--window", "tumbling:1parsec", "--agg", "count"], "tumbling:1parsec"),
        (["--time", "ts", "--window", "hopping:1s", "--agg", "count"], "unknown window kind"),
        (["--time", "ts", "--window", "tumbling:1s", "--agg", "sum"], "needs a column"),
        (["--time", "ts", "--window", "tumbling:1s", "--agg", "avg:len"], "unknown aggregate"),
        (["--time", "name", "--window", "tumbling:1s", "--agg", "count"], "cannot be event time"),
        (["--time", "ts", "--key", "dst", "--window", "tumbling:1s", "--agg", "count"], "'dst'"),
        (["--time", "ts", "--window", "tumbling:1s", "--agg", "count", "--punctuation", "soon"],
         "soon"),
        (["--time", "ts", "--window", "tumbling:1s", "--agg", "heavy:src"], "heavy:COL:K"),
        (["--time", "ts", "--window", "tumbling:1s", "--agg", "heavy:src:0"], "K >= 1"),
    ],
)
def test_bad_input_one_line_exit_2(flows, capsys, argv, message):
    path, _ = flows
    if "--punctuation" not in argv:
        argv = [*argv, "--punctuation", "bounded:0"]
    rc = main(["replay", "--input", str(path), "--quiet", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("oop: error:") and message in err[0]


def test_missing_file_and_help(tmp_path):
    r = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input",
                        str(tmp_path / "none.parquet"), "--time", "ts", "--window", "tumbling:1s",
                        "--agg", "count", "--punctuation", "bounded:1s"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no file or folder" in r.stderr and "Traceback" not in r.stderr
    h = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--help"],
                       capture_output=True, text=True)
    assert h.returncode == 0 and "--window" in h.stdout and "--strategy" in h.stdout


def test_late_update_revises_windows(flows, tmp_path):
    path, table = flows
    out = tmp_path / "out.parquet"
    # arrival order with ordered punctuation: many rows are late; with update and a large
    # allowed lateness the last revision of every window equals the oracle
    rc = main(["replay", "--input", str(path), "--time", "ts", "--arrival", "arr",
               "--window", "tumbling:5s", "--batch-size", "64",
               "--agg", "count", "--punctuation", "ordered+cadence:64rows", "--late", "update",
               "--allowed-lateness", "1h", "--quiet", "--out", str(out)])
    assert rc == 0
    got = pq.read_table(out)
    assert "is_revision" in got.column_names and any(got.column("is_revision").to_pylist())
    final = {r["window_start"]: r["count"] for r in got.to_pylist()}
    expected = window_oracle(table, Tumbling(5000), [agg.count()], time="ts", unit="ms")
    assert final == {r["window_start"]: r["count"] for r in expected.to_pylist()}


@pytest.mark.parametrize("method", ["wid", "paned"])
def test_replay_distinct_of_a_string_column(flows, tmp_path, method):
    """``--agg distinct:COL`` on a string column (it used to crash in the numeric reader)."""
    path, table = flows
    out = tmp_path / "out.parquet"
    rc = main([
        "replay", "--input", str(path), "--time", "ts", "--arrival", "arr", "--key", "name",
        "--window", "sliding:5s,1s", "--agg", "distinct:src", "--agg", "count",
        "--punctuation", "bounded:2s", "--method", method, "--out", str(out), "--quiet",
    ])
    assert rc == 0
    arrival = table.sort_by([("arr", "ascending")])
    expected = window_oracle(arrival, Sliding(5000, 1000), [agg.distinct("src"), agg.count()],
                             by="name", time="ts", unit="ms")
    got = pq.read_table(out)
    assert got.column_names == ["name", "window_start", "window_end", "distinct_src", "count"]
    assert _sorted(got.select(expected.column_names), ["window_start"]) == \
        _sorted(expected, ["window_start"])
    assert set(got.column("distinct_src").to_pylist()) <= {1, 2, 3, 4, 5}


def test_replay_heavy_hitters_to_parquet_and_csv(flows, tmp_path, capsys):
    """``--agg heavy:COL:K``: Parquet keeps the list of {value, count}; CSV on stdout holds it as
    JSON text (CSV cannot hold lists). Both equal the oracle."""
    path, table = flows
    out = tmp_path / "out.parquet"
    argv = ["replay", "--input", str(path), "--time", "ts", "--arrival", "arr", "--key", "name",
            "--window", "tumbling:5s", "--agg", "heavy:src:2", "--punctuation", "bounded:2s",
            "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    arrival = table.sort_by([("arr", "ascending")])
    expected = window_oracle(arrival, Tumbling(5000), [agg.heavy_hitters("src", 2)], by="name",
                             time="ts", unit="ms")
    got = pq.read_table(out)
    assert _sorted(got, ["window_start"]) == _sorted(expected, ["window_start"])
    capsys.readouterr()
    assert main(argv) == 0
    csv = pacsv.read_csv(pa.py_buffer(capsys.readouterr().out.encode()))
    top = {r["window_start"]: json.loads(r["heavy_hitters_src"]) for r in csv.to_pylist()}
    assert top == {r["window_start"]: r["heavy_hitters_src"] for r in expected.to_pylist()}


def test_replay_late_side_output_to_file(flows, tmp_path, capsys):
    """``--late-out`` gets every late tuple; output == oracle over the rest (nothing lost)."""
    path, table = flows
    out, late, metrics = tmp_path / "out.parquet", tmp_path / "late.parquet", tmp_path / "m.json"
    rc = main(["replay", "--input", str(path), "--time", "ts", "--arrival", "arr", "--key", "src",
               "--window", "tumbling:1s", "--agg", "count", "--punctuation", "bounded:500ms+cadence:128rows",
               "--batch-size", "128", "--late-out", str(late), "--out", str(out),
               "--metrics", str(metrics), "--quiet"])
    assert rc == 0
    late_rows = pq.read_table(late)
    m = json.loads(metrics.read_text())
    assert late_rows.num_rows == m["late"] == m["late_out_rows"] > 0
    assert late_rows.schema == table.schema
    arrival = table.sort_by([("arr", "ascending")])
    gone = {(r["ts"], r["arr"], r["src"], r["len"]) for r in late_rows.to_pylist()}
    keep = [r for r in arrival.to_pylist() if (r["ts"], r["arr"], r["src"], r["len"]) not in gone]
    assert len(keep) + late_rows.num_rows == table.num_rows
    expected = window_oracle(pa.Table.from_pylist(keep, schema=table.schema), Tumbling(1000),
                             [agg.count()], by="src", time="ts", unit="ms")
    got = pq.read_table(out)
    keys = ["src", "window_start"]
    assert _sorted(got.select(expected.column_names), keys) == _sorted(expected, keys)
    assert "late tuples ->" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--late", "side"], "add --late-out"),
    (["--late", "raise", "--late-out", "x.parquet"], "cannot go with --late raise"),
])
def test_replay_late_out_needs_side(flows, capsys, argv, message):
    path, _ = flows
    rc = main(["replay", "--input", str(path), "--time", "ts", "--window", "tumbling:1s",
               "--agg", "count", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and message in err[0]


def test_compile_timer_counts_numba_compilation_only():
    """compile_timer: a kernel compiled inside the block adds its compile time; calling it
    again (compiled) adds nothing."""
    import numba as nb

    from oop.metrics import compile_timer

    @nb.njit(cache=False)
    def _fresh(x):
        return x * 3 + 1

    with compile_timer() as first:
        assert _fresh(2) == 7
    with compile_timer() as again:
        assert _fresh(3) == 10
    assert first.seconds > 0.0
    assert again.seconds == 0.0
