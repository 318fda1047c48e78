"""``oop sql --threads N`` (issue 20): the same rows in the same order, and the same late
tuples, as ``--threads 1``; and EXPLAIN / ``--metrics`` say what ran on threads and why not.

The command runs in a subprocess (``python -m oop.cli sql``, this worktree first on the
path) over disordered Parquet tables with late tuples (``bounded:1s`` under up to 3 s of
disorder), at ``--threads 1, 2, 3`` (3: two key partitions / SplitJoin workers beside the
reading and writing threads), for a TUMBLE and a HOP aggregate and an interval LEFT JOIN.
Each run is checked against ``--threads 1`` (``Table.equals``: row for row, in order; the
late side output likewise) and against a from-scratch computation over the tuples the run
did not route to ``--late-out`` -- so every input tuple is accounted for, in a window /
joined row or in the late output. A Hypothesis test plans the same queries in-process on
generated disordered tables (any batch size, late tuples) with 1, 2 and 3 partitions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oop.sql import plan_sql
from oop.sql.parallel import Parallelism
from oop.testing import disordered_tables

ROOT = Path(__file__).resolve().parents[1]
N = 4000
KEYS = 40
PUNCT = "bounded:1s+cadence:500rows"
THREADS = (1, 2, 3)


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "OOP_FAULT"}
    e["PYTHONPATH"] = str(ROOT)
    return e


def table(name: str, path: Path) -> str:
    return (f"CREATE TABLE {name} (ts BIGINT, k STRING, v BIGINT, src BIGINT, "
            f"WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('path' = '{path}', "
            f"'time-unit' = 'ms', 'punctuation' = '{PUNCT}');\n")


def _write(path: Path, rng: np.random.Generator, src: int, files: int) -> None:
    """``N`` rows in arrival (file) order: ``ts`` 5 ms apart plus up to 3 s of disorder."""
    path.mkdir()
    ts = np.arange(N, dtype=np.int64) * 5 + rng.integers(0, 3000, N)
    k = np.array([f"k{i}" for i in range(KEYS)])[rng.integers(0, KEYS, N)]
    v = rng.integers(-50, 50, N)
    for i in range(files):
        sl = slice(i * N // files, (i + 1) * N // files)
        pq.write_table(pa.table({"ts": ts[sl], "k": k[sl], "v": v[sl],
                                 "src": np.full(sl.stop - sl.start, src)}),
                       path / f"part-{i}.parquet")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sqlthreads")
    rng = np.random.default_rng(20)
    _write(root / "a", rng, 0, 3)
    _write(root / "b", rng, 1, 2)
    return {"a": root / "a", "b": root / "b"}


TUMBLE = ("SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total "
          "FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' SECOND)) "
          "GROUP BY window_start, window_end, k")
HOP = ("SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total "
       "FROM TABLE(HOP(TABLE a, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' SECOND)) "
       "GROUP BY window_start, window_end, k")
JOIN = ("SELECT a.k, a.ts, a.v, b.ts AS bts, b.v AS bv FROM a LEFT JOIN b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND")


def run(query: str, data: dict[str, Path], out: Path, threads: int) -> dict[str, Any]:
    """One ``oop sql`` run: its results, late tuples and ``--metrics`` JSON."""
    out.mkdir()
    script = table("a", data["a"]) + table("b", data["b"]) + query
    p = subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e", script,
                        "--threads", str(threads), "--batch-size", "700", "--quiet",
                        "--out", str(out / "out.parquet"), "--late-out",
                        str(out / "late.parquet"), "--metrics", str(out / "m.json")],
                       env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Warning" not in p.stderr, p.stderr
    return {"out": pq.read_table(out / "out.parquet"), "late": pq.read_table(out / "late.parquet"),
            "m": json.loads((out / "m.json").read_text())}


def bag(t: pa.Table, cols: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(t.column(c).to_pylist() for c in cols)))


def on_time(data: dict[str, Path], late: pa.Table, src: int) -> list[tuple[int, str, int]]:
    """The (ts, k, v) tuples of table ``src`` the run did not route to --late-out."""
    whole = pa.concat_tables(pq.read_table(p) for p in sorted(data["ab"[src]].iterdir()))
    gone = bag(late.filter(pa.compute.equal(late["src"], src)), ["ts", "k", "v"])
    assert not +(gone - bag(whole, ["ts", "k", "v"])), "a late tuple that is not in the input"
    keep = []
    for r in zip(*(whole.column(c).to_pylist() for c in ("ts", "k", "v"))):
        if gone[r]:
            gone[r] -= 1
        else:
            keep.append(r)
    return keep


def windows(rows: list[tuple[int, str, int]], size: int, slide: int) -> Counter[tuple[Any, ...]]:
    """From scratch: (k, start, end, count, sum v) of every window [s, s + size) holding rows."""
    acc: dict[tuple[str, int], list[int]] = {}
    for ts, k, v in rows:
        first = (ts - size) // slide * slide + slide
        for s in range(first, ts + 1, slide):
            a = acc.setdefault((k, s), [0, 0])
            a[0] += 1
            a[1] += v
    return Counter((k, s, s + size, n, tot) for (k, s), (n, tot) in acc.items())


def left_join(a: list[tuple[int, str, int]], b: list[tuple[int, str, int]],
              band: int) -> Counter[tuple[Any, ...]]:
    """From scratch: (k, ts, v, bts, bv) of a LEFT JOIN b on k, |b.ts - a.ts| <= band."""
    by_key: dict[str, list[tuple[int, int]]] = {}
    for ts, k, v in b:
        by_key.setdefault(k, []).append((ts, v))
    out: Counter[tuple[Any, ...]] = Counter()
    for ts, k, v in a:
        hits = [(bt, bv) for bt, bv in by_key.get(k, []) if ts - band <= bt <= ts + band]
        for bt, bv in hits or [(None, None)]:
            out[(k, ts, v, bt, bv)] += 1
    return out


CASES = {"tumble": (TUMBLE, "TUMBLE window: 2 key partitions"),
         "hop": (HOP, "HOP window: 2 key partitions"),
         "join": (JOIN, "interval_join: 2 key partitions, one thread each (KeyedJoin")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_threads_give_the_one_thread_rows_in_order(case: str, data: dict[str, Path],
                                                   tmp_path: Path) -> None:
    query, note = CASES[case]
    res = {t: run(query, data, tmp_path / f"t{t}", t) for t in THREADS}
    one = res[1]
    assert one["late"].num_rows > 0 and one["out"].num_rows > 0  # the data has late tuples
    for t in THREADS[1:]:
        assert res[t]["out"].equals(one["out"]), f"--threads {t}: other rows or order"
        assert res[t]["late"].equals(one["late"]), f"--threads {t}: other late tuples"
        assert res[t]["m"]["late"] == one["m"]["late"] == one["late"].num_rows
        assert res[t]["m"]["tuples_in"] == one["m"]["tuples_in"]
    # what ran where: --threads 3 splits the operator in two; 2 runs it on the driving
    # thread beside the reading and writing threads; 1 has no other thread
    th = {t: res[t]["m"]["threads"] for t in THREADS}
    assert [th[t]["partitions"] for t in THREADS] == [1, 1, 2]
    tables = ["a", "b"] if case == "join" else ["a"]
    assert [th[t]["read_ahead"] for t in THREADS] == [[], tables, tables]
    assert any(note in n for n in th[3]["operators"]), th[3]
    assert "writer_cpu_s" in th[2] and "reader_a_cpu_s" in th[3]
    # from scratch over the tuples that were not late: every input tuple is accounted for
    a = on_time(data, one["late"], 0)
    if case == "join":
        b = on_time(data, one["late"], 1)
        assert len(a) + len(b) + one["late"].num_rows == 2 * N
        assert bag(one["out"], ["k", "ts", "v", "bts", "bv"]) == left_join(a, b, 1000)
        return
    assert len(a) + one["late"].num_rows == N
    size = 1000 if case == "tumble" else 3000
    assert bag(one["out"], ["k", "window_start", "window_end", "n", "total"]) == \
        windows(a, size, 1000)


def test_explain_and_metrics_say_why_a_window_runs_on_one_thread(data: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    cum = ("SELECT k, window_start, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE a, "
           "DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' SECOND)) "
           "GROUP BY window_start, window_end, k")
    res = {t: run(cum, data, tmp_path / f"t{t}", t) for t in (1, 3)}
    assert res[3]["out"].equals(res[1]["out"]) and res[3]["late"].equals(res[1]["late"])
    notes = res[3]["m"]["threads"]["operators"]
    assert notes == ["CUMULATE window: one thread, not partitioned: Cumulate windows are not "
                     "partitioned (tumbling and sliding are)"], notes
    script = table("a", data["a"]) + (
        "EXPLAIN SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), "
        "INTERVAL '1' SECOND)) GROUP BY window_start, window_end")
    p = subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e", script, "--threads", "3"],
                       env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    tail = p.stdout.split("== threads ==\n")[1]
    assert tail.strip() == ("TUMBLE window: one thread, not partitioned: there is no by= key "
                            "to partition on"), p.stdout


@pytest.mark.parametrize("flags,words", [
    (["--threads", "0"], ["--threads 0", "at least 1"]),
    (["--threads", "3", "--strategy", "iop-sort"], ["--threads 3", "--strategy iop-sort"]),
])
def test_threads_that_cannot_work_are_refused_in_one_line(flags: list[str], words: list[str],
                                                          data: dict[str, Path],
                                                          tmp_path: Path) -> None:
    flags = [f"{tmp_path}/{f}" if f in ("CK", "OUT/") else f for f in flags]
    p = subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e",
                        table("a", data["a"]) + TUMBLE, *flags], env=_env(), cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("oop: error: ") and all(w in lines[0] for w in words), lines[0]


# ---- in-process: generated disordered tables, any batch size ---------------------------
DDL = ("CREATE TABLE t (ts BIGINT, key BIGINT, val BIGINT, WATERMARK FOR ts AS ts - INTERVAL "
       "'3' SECOND) WITH ('time-unit' = 's', 'batch-size' = '{b}', 'punctuation' = "
       "'bounded:3s+cadence:{c}rows');\n")
DDL_U = DDL.replace("TABLE t", "TABLE u")
QUERIES = {
    "tumble": ("SELECT key, window_start, COUNT(*) AS n, SUM(val) AS s, MIN(val) AS lo FROM "
               "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND)) "
               "GROUP BY window_start, window_end, key"),
    "hop": ("SELECT key, window_start, COUNT(*) AS n, AVG(val) AS m FROM TABLE(HOP(TABLE t, "
            "DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND)) "
            "GROUP BY window_start, window_end, key"),
    "join": ("SELECT t.key, t.ts, t.val, u.ts AS uts, u.val AS uval FROM t FULL JOIN u "
             "ON t.key = u.key AND u.ts BETWEEN t.ts - INTERVAL '2' SECOND AND "
             "t.ts + INTERVAL '1' SECOND"),
}


def _run_in_process(query: str, t: pa.Table, u: pa.Table, b: int, c: int,
                    parts: int) -> tuple[pa.Table, int]:
    plan = plan_sql(DDL.format(b=b, c=c) + DDL_U.format(b=b, c=c) + query,
                    tables={"t": t, "u": u}, parallel=Parallelism(partitions=parts))
    res = plan.stream.run()
    return res.table, res.late_total


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(QUERIES)),
       disordered_tables(min_rows=1, max_rows=80, n_keys=5, max_delay=8),
       disordered_tables(min_rows=1, max_rows=80, n_keys=5, max_delay=8),
       st.integers(1, 20), st.integers(1, 15))
def test_partitions_keep_rows_order_and_late_counts(case: str, t: pa.Table, u: pa.Table,
                                                     b: int, c: int) -> None:
    """1, 2 and 3 partitions/workers: the same table row for row and the same late count;
    for the windows, every tuple is in a window or late (count sums)."""
    one, late = _run_in_process(QUERIES[case], t, u, b, c, 1)
    for parts in (2, 3):
        out, late_k = _run_in_process(QUERIES[case], t, u, b, c, parts)
        assert out.equals(one), (case, parts)
        assert late_k == late
    if case == "tumble":
        assert sum(one["n"].to_pylist()) + late == t.num_rows


@pytest.mark.parametrize("seed", range(4))
def test_keys_renumbered_by_compaction_stay_in_their_partition(seed: int,
                                                                monkeypatch: Any) -> None:
    """Transient keys (a few alive at a time) make the window compact its key dictionary
    over and over while other keys are still open; a compaction renumbers the codes, so a
    key routed by its current code would move partitions and have its window emitted as
    two partial rows. Every partition count gives the one-thread table and the
    from-scratch group-by."""
    from oop.plan.executor import topological
    from oop.window import aggregate
    from oop.window.threaded import ThreadedWindow

    monkeypatch.setattr(aggregate, "KEYS_COMPACT_MIN", 8)
    rng = np.random.default_rng(seed)
    n = 3000
    i = np.arange(n)
    ts = i * 2 + rng.integers(0, 40, n)
    key = i // 6 + rng.integers(0, 3, n) * 10_000  # a key lives ~12 ms of event time
    t = pa.table({"ts": ts, "key": key, "val": rng.integers(-9, 9, n)})
    q = (DDL.replace("'s'", "'ms'").replace("'3' SECOND", "'0.05' SECOND")
         .format(b=97, c=97).replace("bounded:3s", "bounded:50ms")
         + "SELECT key, window_start, COUNT(*) AS n, SUM(val) AS s FROM TABLE(TUMBLE(TABLE t, "
           "DESCRIPTOR(ts), INTERVAL '0.02' SECOND)) GROUP BY window_start, window_end, key")
    truth: Counter[tuple[int, int, int, int]] = Counter()
    acc: dict[tuple[int, int], list[int]] = {}
    for a, k, v in zip(ts.tolist(), key.tolist(), t["val"].to_pylist()):
        cell = acc.setdefault((k, a // 20 * 20), [0, 0])
        cell[0] += 1
        cell[1] += v
    truth.update((k, w, c, s) for (k, w), (c, s) in acc.items())
    outs = {}
    for parts in (1, 2, 3):
        plan = plan_sql(q, tables={"t": t}, parallel=Parallelism(partitions=parts))
        res = plan.stream.run()
        assert res.late_total == 0
        outs[parts] = res.table
        got = Counter(zip(*(res.table.column(c).to_pylist() for c in ("key", "window_start",
                                                                      "n", "s"))))
        assert got == truth, parts
        if parts > 1:
            op = next(nd.op for nd in topological([plan.stream.node])
                      if isinstance(nd.op, ThreadedWindow))
            assert op.plan_info.get("global_key_compactions", 0) >= 2
            assert outs[parts].equals(outs[1]), parts


def test_a_live_table_is_not_read_ahead(tmp_path: Path) -> None:
    """Standard input may pause: it is read on the driving thread (a read-ahead thread
    would hold back its idle rounds); the results still leave through the writing thread."""
    rng = np.random.default_rng(3)
    ts = np.arange(3000) * 7 + rng.integers(0, 2500, 3000)
    csv = "ts,k,v\n" + "".join(f"{a},{b},{c}\n" for a, b, c in
                                zip(ts, rng.integers(0, 30, 3000), rng.integers(0, 9, 3000)))
    script = ("CREATE TABLE s (ts BIGINT, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL "
              "'1' SECOND) WITH ('path' = '-', 'format' = 'csv', 'time-unit' = 'ms', "
              "'batch-size' = '256'); SELECT k, window_start, COUNT(*) AS n, SUM(v) AS s FROM "
              "TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) "
              "GROUP BY window_start, window_end, k")
    outs = {}
    for t in (1, 3):
        m = tmp_path / f"m{t}.json"
        p = subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e", script, "--threads",
                            str(t), "--metrics", str(m), "--quiet"], input=csv, env=_env(),
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outs[t] = p.stdout
        th = json.loads(m.read_text())["threads"]
        assert th["read_ahead"] == [] and ("writer_cpu_s" in th) == (t > 1), th
    assert outs[3] == outs[1] and outs[1].count("\n") > 100
