"""``oop sql`` takes ``oop replay``'s output, late and runtime flags (:mod:`oop.command.flags`).

Every test runs the real command in a subprocess (``python -m oop.cli sql``, this
worktree first on the path) over a disordered Parquet folder, and checks the results
against a from-scratch group-by of the rows the run did not declare late (every input
tuple is either in a window or in ``--late-out``), against ``oop replay`` running the
same query, or against an uninterrupted run after SIGKILLs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from _recovery_util import Job, bag, kill_until_done, pending, write_data

ROOT = Path(__file__).resolve().parents[1]
N = 12_000
PUNCT = "bounded:1s+cadence:1000rows"


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "OOP_FAULT"}
    e["PYTHONPATH"] = str(ROOT)
    return e


def sql_cmd(script: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "oop.cli", "sql", "-e", script, *flags]


def run_sql(script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sql_cmd(script, *flags), env=_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, p.stderr
    return p


def one_line_error(p: subprocess.CompletedProcess[str], *words: str) -> str:
    """The run failed with exit 2 and said why in one line naming ``words``."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("oop: error: ") and all(w in lines[0] for w in words), lines[0]
    return lines[0]


def table(path: str, extra: str = "", name: str = "t", punct: str = PUNCT) -> str:
    opts = f"'path' = '{path}', 'time-unit' = 'ms', 'punctuation' = '{punct}'{extra}"
    return (f"CREATE TABLE {name} (ts BIGINT, k STRING, v BIGINT, arr BIGINT, "
            f"WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ({opts});\n")


AGG = ("SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total "
       "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
       "GROUP BY window_start, window_end, k")


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of 3 Parquet files: ``ts`` (ms) disordered by up to 3 s, so ``bounded:1s``
    makes some tuples late; ``arr`` a further arrival order (ts jittered by up to 1.5 s)."""
    folder = tmp_path_factory.mktemp("sqlflags") / "feed"
    folder.mkdir()
    rng = np.random.default_rng(11)
    ts = np.arange(N, dtype=np.int64) * 5 + rng.integers(0, 3000, N)
    k = np.array([f"k{i}" for i in range(20)])[rng.integers(0, 20, N)]
    v = rng.integers(0, 100, N)
    arr = np.argsort(ts + rng.integers(0, 1500, N), kind="stable").argsort()
    for i in range(3):
        sl = slice(i * N // 3, (i + 1) * N // 3)
        pq.write_table(pa.table({"ts": ts[sl], "k": k[sl], "v": v[sl], "arr": arr[sl]}),
                       folder / f"part-{i}.parquet")
    return folder


def read_any(path: Path) -> pa.Table:
    """A results file (by extension) or a folder of Parquet parts, as one table."""
    if path.is_dir():
        parts = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        return pa.concat_tables([pq.read_table(p) for p in parts])
    if path.suffix == ".csv":
        return pacsv.read_csv(path)
    return pq.read_table(path)


def rows(t: pa.Table, cols: list[str] | None = None) -> Counter[tuple[Any, ...]]:
    cols = cols or t.column_names
    return Counter(zip(*(t.column(c).to_pylist() for c in cols)))


def group_by(src: pa.Table) -> Counter[tuple[Any, ...]]:
    """From scratch: (k, window_start, window_end, count, sum v) of 1 s tumbling windows."""
    d = src.to_pydict()
    acc: dict[tuple[str, int], list[int]] = {}
    for ts, k, v in zip(d["ts"], d["k"], d["v"]):
        a = acc.setdefault((k, ts // 1000 * 1000), [0, 0])
        a[0] += 1
        a[1] += v
    return Counter((k, s, s + 1000, n, tot) for (k, s), (n, tot) in acc.items())


def minus(whole: pa.Table, late: pa.Table) -> pa.Table:
    """``whole`` without the rows of ``late`` (a multiset difference)."""
    gone = rows(late, whole.column_names)
    keep = []
    for r in zip(*(whole.column(c).to_pylist() for c in whole.column_names)):
        if gone[r]:
            gone[r] -= 1
        else:
            keep.append(r)
    assert not +gone, "a late row that is not in the input"
    return pa.Table.from_pylist([dict(zip(whole.column_names, r)) for r in keep],
                                schema=whole.schema)


COLS = ["k", "window_start", "window_end", "n", "total"]


# ---- --out forms, --late side, --metrics ------------------------------------------------
def test_out_forms_late_side_and_metrics_account_for_every_tuple(feed: Path,
                                                                 tmp_path: Path) -> None:
    q = table(str(feed)) + AGG
    late = tmp_path / "late.parquet"
    m = tmp_path / "m.json"
    log = tmp_path / "log.jsonl"
    ok(run_sql(q, "--out", str(tmp_path / "o.parquet"), "--late", "side", "--late-out",
               str(late), "--metrics", str(m), "--metrics-every", "3000rows",
               "--metrics-log", str(log), "--quiet"))
    whole = read_any(feed)
    late_rows = pq.read_table(late)
    got = rows(read_any(tmp_path / "o.parquet"), COLS)
    assert late_rows.num_rows > 0 and got == group_by(minus(whole, late_rows))
    summary = json.loads(m.read_text())
    assert summary["tuples_in"] == N and summary["late"] == summary["late_out_rows"] \
        == late_rows.num_rows and summary["windows_out"] == sum(got.values())
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) >= 2 and all("operators" in x or "tuples_in" in x for x in lines)
    # the same results as CSV, as a folder of parts, on stdout (CSV and NDJSON)
    ok(run_sql(q, "--out", str(tmp_path / "o.csv"), "--quiet"))
    ok(run_sql(q, "--out", f"{tmp_path / 'parts'}/", "--quiet"))
    assert rows(read_any(tmp_path / "o.csv"), COLS) == got
    assert rows(read_any(tmp_path / "parts"), COLS) == got
    out = ok(run_sql(q, "--out", "-", "--quiet")).stdout
    (tmp_path / "stdout.csv").write_text(out)
    assert rows(read_any(tmp_path / "stdout.csv"), COLS) == got
    nd = ok(run_sql(q, "--out-format", "ndjson", "--quiet")).stdout
    assert Counter(tuple(json.loads(x)[c] for c in COLS) for x in nd.splitlines()) == got


def test_late_policy_raise_and_checks_are_one_line(feed: Path, tmp_path: Path) -> None:
    q = table(str(feed)) + AGG
    one_line_error(run_sql(q, "--late", "raise", "--quiet"), "late")
    one_line_error(run_sql(q, "--allowed-lateness", "2s"), "--late update")
    one_line_error(run_sql(q, "--late", "side"), "--late-out")
    one_line_error(run_sql(q, "--checkpoint-dir", str(tmp_path / "ck"), "--out",
                           str(tmp_path / "x.csv")), "--out must be a folder")
    one_line_error(run_sql(q, "--metrics-every", "1s"), "--metrics-log")
    # a table that routes its own late tuples needs somewhere to put them
    side = table(str(feed), ", 'late' = 'side'") + AGG
    one_line_error(run_sql(side, "--quiet"), "--late-out", "'t'")


# ---- --strategy ---------------------------------------------------------------------------
def test_in_order_strategy_equals_oop_plan_and_refuses_outer_joins(feed: Path,
                                                                    tmp_path: Path) -> None:
    q = table(str(feed)) + AGG
    res = {}
    for st in ("oop", "iop-sort"):
        out = tmp_path / f"{st.replace(':', '_')}.parquet"
        ok(run_sql(q, "--strategy", st, "--out", str(out), "--quiet"))
        res[st] = rows(read_any(out), COLS)
    assert res["oop"] == res["iop-sort"] and sum(res["oop"].values()) > 0
    join = (table(str(feed)) + table(str(feed), name="u") +
            "SELECT t.k, u.ts AS uts FROM t LEFT JOIN u ON t.k = u.k AND "
            "u.ts BETWEEN t.ts - INTERVAL '1' SECOND AND t.ts")
    one_line_error(run_sql(join, "--strategy", "iop-sort"), "in-order strategy",
                   "LEFT OUTER", "--strategy oop")
    one_line_error(run_sql(q, "--strategy", "iop-sort", "--late", "update"),
                   "--strategy oop")


# ---- --max-state, --max-ahead -------------------------------------------------------------
def test_tiny_max_state_stops_with_one_line(feed: Path) -> None:
    line = one_line_error(run_sql(table(str(feed)) + AGG, "--max-state", "1KiB", "--quiet"),
                          "--max-state")
    assert "window" in line
    one_line_error(run_sql(table(str(feed)) + AGG, "--max-state", "lots"), "--max-state")


def test_max_ahead_keeps_a_bad_clock_from_making_everything_late(feed: Path,
                                                                 tmp_path: Path) -> None:
    whole = read_any(feed)
    bad = pa.table({"ts": [365 * 86_400_000], "k": ["k0"], "v": [1], "arr": [-1]},
                   schema=whole.schema)
    base = tmp_path / "base.parquet"
    ok(run_sql(table(str(feed)) + AGG, "--late", "side", "--late-out", str(base), "--quiet"))
    # a row a year ahead at the end (the cadence points of the others stay where they were)
    end = tmp_path / "end"
    end.mkdir()
    pq.write_table(pa.concat_tables([whole, bad]), end / "all.parquet")
    late = tmp_path / "late.parquet"
    ok(run_sql(table(str(end)) + AGG, "--max-ahead", "1min", "--late", "side", "--late-out",
               str(late), "--out", str(tmp_path / "o.parquet"), "--quiet"))
    assert rows(pq.read_table(late)) == rows(pq.read_table(base)) + rows(bad)
    late3 = tmp_path / "late3.parquet"  # the table option says the same
    ok(run_sql(table(str(end), ", 'max-ahead' = '1min'") + AGG, "--late", "side",
               "--late-out", str(late3), "--quiet"))
    assert rows(pq.read_table(late3)) == rows(pq.read_table(late))
    # early in the feed and unguarded, it makes every row after the next cadence point late
    early = tmp_path / "early"
    early.mkdir()
    pq.write_table(pa.concat_tables([whole.slice(0, 2500), bad, whole.slice(2500)]),
                   early / "all.parquet")
    for flags, many in (((), True), (("--max-ahead", "1min"), False)):
        out = tmp_path / f"late-{many}.parquet"
        ok(run_sql(table(str(early)) + AGG, *flags, "--late", "side", "--late-out", str(out),
                   "--quiet"))
        n_late = pq.read_table(out).num_rows
        assert (n_late > N - 3100) if many else (n_late < pq.read_table(base).num_rows + 50)


# ---- the same query through oop replay ---------------------------------------------------
def _replay(feed: Path, out: Path, *flags: str) -> Counter[tuple[Any, ...]]:
    p = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", str(feed),
                        "--time", "ts", "--time-unit", "ms", "--key", "k", "--window",
                        "tumbling:1s", "--agg", "count", "--agg", "sum:v", "--punctuation",
                        PUNCT, "--out", str(out), "--quiet", *flags],
                       env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    ok(p)
    return rows(read_any(out))


def test_late_update_and_arrival_option_match_oop_replay(feed: Path, tmp_path: Path) -> None:
    cols = [*COLS, "is_revision"]
    ref = _replay(feed, tmp_path / "r.parquet", "--late", "update", "--allowed-lateness",
                  "2s", "--method", "wid")
    ok(run_sql(table(str(feed)) + AGG, "--late", "update", "--allowed-lateness", "2s",
               "--out", str(tmp_path / "s.parquet"), "--quiet"))
    got = rows(read_any(tmp_path / "s.parquet"), cols)
    assert got == ref and any(r[-1] for r in got)  # revisions were emitted
    ref = _replay(feed, tmp_path / "ra.parquet", "--arrival", "arr")
    ok(run_sql(table(str(feed), ", 'arrival' = 'arr'") + AGG, "--out",
               str(tmp_path / "sa.parquet"), "--quiet"))
    assert rows(read_any(tmp_path / "sa.parquet"), COLS) == ref
    assert ref != _replay(feed, tmp_path / "rn.parquet")  # the arrival order mattered
    join = (table(str(feed)) + table(str(feed), name="u") +
            "SELECT t.k, u.ts AS uts FROM t JOIN u ON t.k = u.k AND "
            "u.ts BETWEEN t.ts - INTERVAL '1' SECOND AND t.ts")
    one_line_error(run_sql(join, "--late", "update"), "--late update", "join")


# ---- --follow, --stop-after-idle ---------------------------------------------------------
def test_follow_reads_files_renamed_in_and_stops_after_idle(feed: Path,
                                                            tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(feed / "part-0.parquet", live / "part-0.parquet")
    out = tmp_path / "out"
    proc = subprocess.Popen(sql_cmd(table(str(live)) + AGG, "--follow", "--stop-after-idle",
                                    "4s", "--out", f"{out}/", "--quiet"),
                            env=_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    for i in (1, 2):  # written elsewhere, renamed into place (as the folder contract says)
        shutil.copy(feed / f"part-{i}.parquet", tmp_path / "tmp.parquet")
        os.replace(tmp_path / "tmp.parquet", live / f"part-{i}.parquet")
        time.sleep(0.3)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "no new input for 4s" in err
    ref = tmp_path / "ref.parquet"
    ok(run_sql(table(str(feed)) + AGG, "--out", str(ref), "--quiet"))
    assert rows(read_any(out), COLS) == rows(read_any(ref), COLS)
    # --follow applies to folders only; a table's own option on a file is an error
    one_line_error(run_sql(table(str(feed / "part-0.parquet"), ", 'follow' = 'true'") + AGG),
                   "--follow", "is a file")


# ---- --checkpoint-dir: SIGKILL and rerun --------------------------------------------------
class SqlJob(Job):
    """A restartable ``oop sql`` job for :func:`_recovery_util.kill_until_done`."""

    script: str = ""

    def command(self, checkpointed: bool = True) -> list[str]:
        ck = ["--checkpoint-dir", str(self.ck), "--checkpoint-every", "4000rows"] \
            if checkpointed else []
        return sql_cmd(self.script, "--out", f"{self.out}/", "--late", "side", "--late-out",
                       f"{self.late}/", "--batch-size", "2000", "--quiet", *ck)


def test_sigkill_then_rerun_gives_the_uninterrupted_output(tmp_path: Path) -> None:
    a, _ = write_data(tmp_path / "data")
    script = ("CREATE TABLE t (ts BIGINT, k STRING, v BIGINT, WATERMARK FOR ts AS ts - "
              f"INTERVAL '3' SECOND) WITH ('path' = '{a}', 'time-unit' = 'ms', "
              "'punctuation' = 'bounded:3s+cadence:5000rows');\n"
              "SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS mx "
              "FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '500' MILLISECOND, "
              "INTERVAL '2' SECOND)) GROUP BY window_start, window_end, k")
    ref = SqlJob("sql", [], tmp_path / "ref-out", tmp_path / "ref-late", tmp_path / "ref-ck")
    ref.script = script
    ok(subprocess.run(ref.command(checkpointed=False), env=_env(), cwd=ROOT,
                      capture_output=True, text=True, timeout=300))
    job = SqlJob("sql", [], tmp_path / "out", tmp_path / "late", tmp_path / "ck")
    job.script = script
    log: list[str] = []
    kills = 0
    for attempt in range(3):  # a fast machine may finish before all kills: start over,
        for d in (job.out, job.late, job.ck):  # with other kill moments
            shutil.rmtree(d, ignore_errors=True)
        kills = kill_until_done(job, np.random.default_rng(5 + attempt), 3, log, "sql")
        assert bag(job.out) == bag(ref.out) and sum(bag(job.out).values()) > 0
        assert bag(job.late) == bag(ref.late) and sum(bag(job.late).values()) > 0
        assert pending(job.out) == [] and pending(job.late) == []
        if kills >= 2:
            break
    assert kills >= 2, log
    rerun = subprocess.run(job.command(), env=_env(), cwd=ROOT, capture_output=True,
                           text=True, timeout=300)  # a finished job's rerun is a no-op
    assert rerun.returncode == 0 and bag(job.out) == bag(ref.out), rerun.stderr


def test_insert_into_a_part_folder_under_checkpoints(feed: Path, tmp_path: Path) -> None:
    """The INSERT target's cast keeps the part folder's commit protocol (resume, no-op rerun)."""
    out = tmp_path / "sink"
    script = (table(str(feed)) +
              f"CREATE TABLE s (k STRING, ws BIGINT, n INT) WITH ('path' = '{out}/');\n"
              "INSERT INTO s SELECT k, window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE t, "
              "DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end, k")
    flags = ("--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "2000rows",
             "--quiet")
    assert f"-> {out}/" in ok(run_sql(script, *flags)).stderr
    got = read_any(out)
    assert got.column_names == ["k", "ws", "n"] and got.schema.field("n").type == pa.int32()
    ref = tmp_path / "ref.parquet"
    ok(run_sql(table(str(feed)) + AGG, "--out", str(ref), "--quiet"))
    assert rows(got) == rows(read_any(ref), ["k", "window_start", "n"])
    first = bag(out)
    ok(run_sql(script, *flags))  # the finished job's rerun is a no-op
    assert bag(out) == first and pending(out) == []


# ---- table options -------------------------------------------------------------------------
@pytest.mark.parametrize("opt, match", [
    ("'follow' = 'sometimes'", "'follow' = 'sometimes': write 'true' or 'false'"),
    ("'arrival-bound' = '0'", "'arrival-bound' = '0': give a row count of at least 1"),
    ("'late' = 'later'", "option 'late': unknown late policy 'later'"),
    ("'watch' = 'true'", "unknown table option 'watch'"),
])
def test_bad_table_options_are_one_line_sql_errors(opt: str, match: str) -> None:
    from oop.sql import SqlError, plan_sql

    with pytest.raises(SqlError, match=match):
        plan_sql(table("x.parquet", f", {opt}") + AGG)


def test_a_table_read_from_standard_input(feed: Path, tmp_path: Path) -> None:
    whole = read_any(feed)
    pacsv.write_csv(whole, tmp_path / "in.csv")
    p = subprocess.run(sql_cmd(table("-") + AGG, "--quiet"), env=_env(), cwd=ROOT,
                       stdin=(tmp_path / "in.csv").open("rb"), capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (tmp_path / "o.csv").write_bytes(p.stdout)
    ref = tmp_path / "ref.parquet"
    ok(run_sql(table(str(feed)) + AGG, "--out", str(ref), "--quiet"))
    assert rows(read_any(tmp_path / "o.csv"), COLS) == rows(read_any(ref), COLS)
    one_line_error(run_sql(table("-") + AGG, "--checkpoint-dir", str(tmp_path / "ck"),
                           "--out", f"{tmp_path / 'o'}/"), "cannot be re-read")


# ---- punctuation does not depend on --batch-size ---------------------------------------
def per_batch_late(ts: np.ndarray, delay: int, every: int) -> np.ndarray:
    """Reference: which rows ``bounded:delay`` makes late when the bound is asked after every
    ``every`` rows (after each batch, or at each cadence point): row i is late when its time
    is below the max of the segments before its own minus ``delay``."""
    seg_max = np.maximum.reduceat(ts, np.arange(0, len(ts), every))
    before = np.concatenate([[np.iinfo(np.int64).min + delay], np.maximum.accumulate(seg_max)])
    return ts < before[np.arange(len(ts)) // every] - delay


def test_watermark_results_do_not_depend_on_the_batch_size(tmp_path: Path) -> None:
    """A WATERMARK (and a 'punctuation' naming no cadence) punctuates every 65536 rows read,
    as ``oop replay`` does: --batch-size 7, 1000 and 65536 give the same windows and late
    rows, those of the reference at the cadence points, and the rows of ``oop replay``."""
    n, delay = 80_000, 1000
    rng = np.random.default_rng(5)
    ts = np.arange(n, dtype=np.int64) * 5 + rng.integers(0, 3000, n)
    data = pa.table({"ts": ts, "k": np.array([f"k{i}" for i in range(7)])[rng.integers(0, 7, n)],
                     "v": rng.integers(0, 100, n), "arr": np.arange(n)})
    path = tmp_path / "d.parquet"
    pq.write_table(data, path)
    assert not np.array_equal(per_batch_late(ts, delay, 7), per_batch_late(ts, delay, 1000))
    want_late = per_batch_late(ts, delay, 65_536)
    assert 0 < want_late.sum() < n  # some late rows, all after the first cadence point
    wm = (f"CREATE TABLE t (ts BIGINT, k STRING, v BIGINT, arr BIGINT, WATERMARK FOR ts AS "
          f"ts - INTERVAL '1' SECOND) WITH ('path' = '{path}', 'time-unit' = 'ms');\n")
    opt = table(str(path), punct="bounded:1s")
    runs = []
    for script, bs in ((wm, 7), (wm, 1000), (wm, 65_536), (opt, 7)):
        out, late, m = (tmp_path / f"{x}-{len(runs)}.parquet" for x in ("o", "l", "m"))
        ok(run_sql(script + AGG, "--batch-size", str(bs), "--out", str(out), "--late", "side",
                   "--late-out", str(late), "--metrics", str(m), "--quiet"))
        summary = json.loads(m.read_text())
        late_rows = pq.read_table(late)
        assert summary["late"] == late_rows.num_rows == int(want_late.sum())
        assert sorted(late_rows.column("arr").to_pylist()) == np.flatnonzero(want_late).tolist()
        runs.append(rows(read_any(out), COLS))
    assert all(r == runs[0] for r in runs)
    assert runs[0] == group_by(data.filter(pa.array(~want_late)))
    p = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", str(path),
                        "--time", "ts", "--time-unit", "ms", "--key", "k", "--window",
                        "tumbling:1s", "--agg", "count", "--agg", "sum:v", "--punctuation",
                        "bounded:1s", "--batch-size", "1000", "--out",
                        str(tmp_path / "r.parquet"), "--quiet"],
                       env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    ok(p)
    assert rows(read_any(tmp_path / "r.parquet")) == runs[0]
