"""``oop replay --spark``: --verify JSON line and exit codes, --shards, bad input -> one line, exit 2.

In-process through ``oop.cli.main`` on the shared local[2] session (tests/conftest_spark.py);
the no-Java case runs in a subprocess without java on PATH (no JVM is started).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest_spark import spark  # noqa: F401 - the shared session fixture
from oop.cli import main

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def flows(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    n = 4000
    ts = np.arange(n, dtype=np.int64) * 5
    arr = ts + rng.integers(0, 300, n)
    p = tmp_path_factory.mktemp("cli") / "flows.parquet"
    pq.write_table(pa.table({"ts": ts, "arr": arr, "k": rng.integers(0, 4, n),
                             "len": rng.integers(40, 1500, n),
                             "name": [f"h{i % 7}" for i in range(n)]}), p)
    return p


def _run(capsys, *argv: str) -> tuple[int, list[str], list[str]]:  # type: ignore[no-untyped-def]
    if "--punctuation" not in argv:
        argv = (*argv, "--punctuation", "bounded:0")
    rc = main(["replay", *argv])
    out, err = capsys.readouterr()
    return rc, out.strip().splitlines(), [l for l in err.strip().splitlines() if l]


def test_verify_all_matched_exit_0(spark, flows, capsys, tmp_path) -> None:  # noqa: F811
    out_file = tmp_path / "w.parquet"
    rc, out, _ = _run(capsys, "--input", str(flows), "--time", "ts", "--arrival", "arr",
                      "--key", "k", "--window", "sliding:2s,500ms", "--agg", "count",
                      "--agg", "sum:len", "--punctuation", "bounded:300ms", "--batch-size", "256",
                      "--spark", "--verify", "--out", str(out_file))
    assert rc == 0
    assert len(out) == 1, out  # exactly one JSON line on stdout
    rep = json.loads(out[0])
    assert set(rep) == {"windows", "matched", "mismatched", "missing", "extra", "late"}
    assert rep["windows"] == rep["matched"] > 0 and rep["late"] == 0
    assert pq.read_table(out_file).num_rows == rep["windows"]


def test_verify_sharded_and_late_rows_left_out(spark, flows, capsys) -> None:  # noqa: F811
    rc, out, err = _run(capsys, "--input", str(flows), "--time", "ts", "--arrival", "arr",
                      "--key", "k", "--window", "tumbling:1s", "--agg", "count",
                      "--punctuation", "bounded:300ms", "--spark", "--shards", "2", "--verify")
    rep = json.loads(out[0])
    assert rc == 0 and len(out) == 1 and rep["matched"] == rep["windows"] > 0
    assert any("path files" in line for line in err), err  # Parquet: tasks read with pyarrow
    # a delay bound below the real disorder: tuples are late; --verify compares with Spark SQL
    # over the rows the engine did not declare late, so a correct run still matches (exit 0)
    rc, out, _ = _run(capsys, "--input", str(flows), "--time", "ts", "--arrival", "arr",
                      "--window", "tumbling:1s", "--agg", "count", "--punctuation",
                      "bounded:20ms+cadence:64rows", "--batch-size", "64", "--spark", "--verify")
    rep = json.loads(out[0])
    assert rc == 0 and len(out) == 1
    assert rep["late"] > 0 and rep["mismatched"] == rep["missing"] == rep["extra"] == 0


def test_spark_replay_equals_local_replay_for_any_batch_size(spark, flows, tmp_path,
                                                              capsys) -> None:  # noqa: F811
    """Punctuation follows the cadence, not Spark's partitions or --batch-size: the Spark
    replay path gives the local replay's windows and late count."""
    base = ["--input", str(flows), "--time", "ts", "--arrival", "arr", "--key", "k",
            "--window", "tumbling:1s", "--agg", "count", "--punctuation",
            "bounded:50ms+cadence:100rows"]
    got = []
    for extra in (["--batch-size", "64", "--spark"], ["--batch-size", "1000"]):
        out, m = tmp_path / f"o{len(got)}.parquet", tmp_path / f"m{len(got)}.json"
        rc, _, _ = _run(capsys, *base, *extra, "--out", str(out), "--metrics", str(m))
        assert rc == 0
        got.append((sorted(map(tuple, (r.values() for r in pq.read_table(out).to_pylist()))),
                    json.loads(m.read_text())["late"]))
    assert got[0] == got[1] and got[0][1] > 0


@pytest.mark.parametrize("argv,needle", [
    (["--time", "tss"], "did you mean 'ts'"),
    (["--time", "name"], "cannot be event time"),
    (["--time", "ts", "--key", "kk"], "--key column 'kk'"),
    (["--time", "ts", "--arrival", "arival"], "--arrival column 'arival'"),
    (["--time", "ts", "--agg", "sum:lenn"], "'lenn'"),
])
def test_bad_columns_one_line_exit_2(spark, flows, capsys, argv, needle) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    rc, out, err = _run(capsys, "--input", str(flows), *argv, "--window", "tumbling:1s",
                        "--agg", "count", "--spark", "--verify")
    assert rc == 2 and out == []
    assert len(err) == 1 and err[0].startswith("oop: error:") and needle in err[0], err


def test_empty_corrupt_missing_file_exit_2(spark, flows, capsys, tmp_path) -> None:  # noqa: F811
    empty = tmp_path / "empty.parquet"
    pq.write_table(pq.read_table(flows).slice(0, 0), empty)
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not a parquet file at all" * 10)
    for path, needle in ((empty, "no rows"), (corrupt, "cannot read"),
                         (tmp_path / "nope.parquet", "no file")):
        rc, out, err = _run(capsys, "--input", str(path), "--time", "ts", "--window",
                            "tumbling:1s", "--agg", "count", "--spark")
        assert rc == 2 and out == []
        assert len(err) == 1 and err[0].startswith("oop: error:") and needle in err[0], err


def test_no_java_one_line_exit_2(flows, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(tmp_path)  # no java here
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    p = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", str(flows),
                        "--time", "ts", "--window", "tumbling:1s", "--agg", "count", "--spark",
                        "--punctuation", "bounded:0"],
                       capture_output=True, text=True, env=env, timeout=120)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 2, p.stderr
    assert lines[-1].startswith("oop: error: no Java found") and "Traceback" not in p.stderr


def test_late_side_writes_every_late_tuple_and_accounts_for_every_input(spark, flows,  # noqa: F811
                                                                         capsys, tmp_path) -> None:
    """``--late side --late-out`` with ``--spark``: the late tuples (input columns) go to the
    file; per window, emitted count + late tuples == the input rows it covers. (Which tuples
    are late depends on the batches Spark's partitions make, so it is not compared with the
    local replay row by row; the schema is.)"""
    argv = ["--input", str(flows), "--time", "ts", "--arrival", "arr", "--key", "k",
            "--window", "tumbling:1s", "--agg", "count", "--punctuation", "bounded:20ms+cadence:64rows",
            "--batch-size", "64", "--late", "side"]
    late_f, out_f, m = tmp_path / "late.parquet", tmp_path / "w.parquet", tmp_path / "m.json"
    rc, _, err = _run(capsys, *argv, "--late-out", str(late_f), "--out", str(out_f),
                      "--metrics", str(m), "--spark")
    assert rc == 0 and any("late tuples ->" in line for line in err), err
    late, out, src = pq.read_table(late_f), pq.read_table(out_f), pq.read_table(flows)
    summary = json.loads(m.read_text())
    assert late.num_rows == summary["late"] == summary["late_out_rows"] > 0
    assert late.schema == src.schema
    src_rows = {tuple(r.values()) for r in src.to_pylist()}
    assert all(tuple(r.values()) in src_rows for r in late.to_pylist())  # real input rows
    assert len({tuple(r.values()) for r in late.to_pylist()}) == late.num_rows  # each once

    def per_window(t):  # (key, 1 s window) -> rows
        c: dict = {}
        for k, ts in zip(t.column("k").to_pylist(), t.column("ts").to_pylist()):
            c[(k, ts // 1000)] = c.get((k, ts // 1000), 0) + 1
        return c

    emitted = {(k, s // 1000): n for k, s, n in zip(out.column("k").to_pylist(),
                                                   out.column("window_start").to_pylist(),
                                                   out.column("count").to_pylist())}
    late_n, all_n = per_window(late), per_window(src)
    assert all(emitted.get(w, 0) + late_n.get(w, 0) == n for w, n in all_n.items())
    # the local replay writes the same columns
    rc, _, _ = _run(capsys, *argv, "--late-out", str(tmp_path / "local.parquet"))
    assert rc == 0 and pq.read_schema(tmp_path / "local.parquet") == late.schema


def test_late_side_with_shards_is_refused_in_one_line(spark, flows, capsys, tmp_path  # noqa: F811
                                                      ) -> None:
    rc = main(["replay", "--input", str(flows), "--time", "ts", "--window", "tumbling:1s",
               "--agg", "count", "--late-out", str(tmp_path / "l.parquet"), "--spark",
               "--shards", "2", "--punctuation", "bounded:0"])
    err = capsys.readouterr().err
    assert rc == 2 and "not supported with --shards" in err


def test_late_update_revises_windows_to_the_true_counts(spark, flows, capsys, tmp_path  # noqa: F811
                                                        ) -> None:
    """``--late update`` with ``--spark`` re-emits revised rows (``is_revision``) as the local
    replay does; the last row of each window holds its true count (disorder < lateness)."""
    out_f = tmp_path / "w.parquet"
    rc, _, _ = _run(capsys, "--input", str(flows), "--time", "ts", "--arrival", "arr", "--key",
                    "k", "--window", "tumbling:1s", "--agg", "count", "--punctuation",
                    "bounded:20ms+cadence:64rows", "--batch-size", "64", "--late", "update",
                    "--allowed-lateness", "1s", "--out", str(out_f), "--spark")
    assert rc == 0
    out = pq.read_table(out_f).to_pylist()
    assert any(r["is_revision"] for r in out) and not all(r["is_revision"] for r in out)
    final = {(r["k"], r["window_start"]): r["count"] for r in out}  # later rows revise earlier
    src = pq.read_table(flows).to_pylist()
    want: dict = {}
    for r in src:
        w = (r["k"], r["ts"] // 1000 * 1000)
        want[w] = want.get(w, 0) + 1
    assert final == want
    # --verify checks each window's last revision against Spark SQL (was: exit 2, "duplicate
    # window rows")
    rc, out_lines, _ = _run(capsys, "--input", str(flows), "--time", "ts", "--arrival", "arr",
                            "--key", "k", "--window", "tumbling:1s", "--agg", "count",
                            "--punctuation", "bounded:20ms+cadence:64rows", "--batch-size", "64", "--late",
                            "update", "--allowed-lateness", "1s", "--spark", "--verify")
    rep = json.loads(out_lines[0])
    assert rc == 0 and rep["matched"] == rep["windows"] == len(want)
    rc = main(["replay", "--input", str(flows), "--time", "ts", "--window", "tumbling:1s",
               "--agg", "count", "--late", "update", "--spark", "--shards", "2",
               "--punctuation", "bounded:0"])
    assert rc == 2 and "not supported with --shards" in capsys.readouterr().err
