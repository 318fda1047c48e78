"""`oop replay` guards against hostile feeds: --max-ahead (a bad clock), --max-state, and flags
or inputs that cannot work (one line each, exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oop.cli import main

YEAR_MS = 365 * 86_400_000


@pytest.fixture()
def poisoned(tmp_path):
    """5000 rows of a normal feed with one row stamped a year ahead at row 100."""
    n = 5000
    ts = np.arange(n, dtype=np.int64) * 10
    ts[100] += YEAR_MS
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"ts": ts, "k": np.arange(n) % 20, "v": np.ones(n)}), path)
    return path


def _run(path, tmp_path, *extra):
    m = tmp_path / "m.json"
    rc = main(["replay", "--input", str(path), "--time", "ts", "--key", "k", "--window",
               "tumbling:1s", "--agg", "count", "--punctuation", "bounded:1s+cadence:50rows",
               "--out", str(tmp_path / "o.parquet"), "--metrics", str(m), "--quiet", *extra])
    return rc, (json.loads(m.read_text()) if m.exists() else None)


def test_without_a_guard_the_bad_clock_makes_later_rows_late(poisoned, tmp_path, capsys):
    rc, m = _run(poisoned, tmp_path)
    assert rc == 0 and m["late"] > 4000  # every row after the pill is behind its punctuation
    assert "warning:" in capsys.readouterr().err


def test_max_ahead_routes_the_bad_row_and_keeps_the_rest(poisoned, tmp_path):
    late = tmp_path / "late.parquet"
    rc, m = _run(poisoned, tmp_path, "--max-ahead", "1h", "--late-out", str(late))
    assert rc == 0
    assert m["late"] == 1 and m["operators"]["input"]["late"] == {"ahead": 1}
    assert pq.read_table(late).column("ts").to_pylist() == [100 * 10 + YEAR_MS]
    out = pq.read_table(tmp_path / "o.parquet")
    assert sum(out.column("count").to_pylist()) == 4999  # everything else is counted


def test_max_state_stops_before_the_machine_does(poisoned, tmp_path, capsys):
    rc, _ = _run(poisoned, tmp_path, "--max-state", "1KiB")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "oop: error:" in err[0] and "--max-state" in err[0]


@pytest.mark.parametrize("extra,needle", [
    (["--max-state", "lots"], "--max-state 'lots'"),
    (["--max-ahead", "soon"], "soon"),
])
def test_bad_guard_values_are_one_line(poisoned, tmp_path, capsys, extra, needle):
    rc, _ = _run(poisoned, tmp_path, *extra)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0]


def test_external_without_a_column_and_duplicate_csv_columns_are_refused(tmp_path, capsys):
    csv = tmp_path / "dup.csv"
    csv.write_text("ts,k,k\n1,a,b\n2,a,b\n")
    base = ["replay", "--input", str(csv), "--time", "ts", "--window", "tumbling:1s",
            "--agg", "count", "--quiet"]
    assert main([*base, "--punctuation", "external"]) == 2
    assert "external:COLUMN" in capsys.readouterr().err
    assert main([*base, "--punctuation", "bounded:0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "duplicate column" in err[0]
