"""Whole-command benchmark of ``oop replay``: wall time, tuples/s, peak RSS and state.

Workload: the window benchmark's stream (``bench_window.make_workload``: 10k
Zipf keys, ~10k tuples per second of event time, band disorder up to 5 s, ms
units, float64 values) written to 20 Parquet files, generated file by file so
that making 50M rows does not hold them all. Queries, count + sum(v) per key:
tumbling 1 s and sliding 10 s / 1 s, punctuation ``bounded:5s`` (nothing is
late), results to a Parquet part folder.

Each run is a fresh process (``python -m oop.cli replay ...``), timed from
start to exit (wall, and the CPU time user + sys of all its threads); its peak RSS is the child's own high-water mark (``VmHWM``; a
forked child's ``ru_maxrss`` would start at its parent's size, so the data is
generated in another child). Before timing, the oop package the children import is
byte-compiled (``python -m compileall``), as a regular ``pip install`` leaves it: an
editable install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile ~100
modules from source in every run (~0.09 s) -- duckdb, numba and pyarrow come
compiled from their wheels. ``--threads N`` (repeatable) sets ``oop replay
--threads``; without it, its default (all cores). With ``--duckdb`` the same
query runs in DuckDB (batch ``GROUP BY`` from the same files to Parquet) in the
same run, beside it, also as a whole command (a fresh Python process importing
duckdb), with one thread and with all cores. Each row records the 1-minute
load average when it started.

    python experiments/bench_replay.py --rows 10000000 --threads 1 --threads 2 --duckdb
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FILES = 20
KEYS = 10_000
RATE_PER_S = 10_000
DELAY_MS = 5_000
QUERIES = {
    "tumbling 1s": ["--window", "tumbling:1s"],
    "sliding 10s/1s": ["--window", "sliding:10s,1s"],
}


def write_workload(folder: Path, n: int, seed: int = 0) -> None:
    """``n`` rows in ``FILES`` Parquet files, in arrival order, made one file at a time."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, KEYS + 1)
    p /= p.sum()
    perm = rng.permutation(KEYS)
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-n // FILES)
    for i in range(FILES):
        lo, hi = i * per, min(n, (i + 1) * per)
        if lo >= hi:
            break
        m = hi - lo
        key = perm[rng.choice(KEYS, size=m, p=p)].astype(np.int64)
        arrival_ms = np.arange(lo, hi, dtype=np.int64) * 1000 // RATE_PER_S
        ts = arrival_ms - rng.integers(0, DELAY_MS, m)
        pq.write_table(pa.table({"ts": ts, "key": key, "v": rng.random(m)}),
                       folder / f"part-{i:03d}.parquet")


def timed(cmd: list[str], quiet: bool = False) -> tuple[float, float]:
    """Run ``cmd`` to its end: (wall seconds, CPU seconds user + sys of the child, all its
    threads), from ``os.wait4``. Raises on a non-zero exit."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL if quiet else None)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    return wall, ru.ru_utime + ru.ru_stime


def compile_oop() -> str:
    """Byte-compile the oop package that ``python -m oop.cli`` resolves from the current
    folder (a regular install's state; see module doc); returns its folder."""
    where = subprocess.run([sys.executable, "-c", "import os, oop; print(os.path.dirname("
                            "oop.__file__))"], check=True, capture_output=True,
                           text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=True)
    return where


def run_oop(data: Path, query: list[str], out: Path, threads: int | None = None) -> dict[str, Any]:
    metrics = out.parent / "m.json"
    cmd = [sys.executable, "-m", "oop.cli", "replay", "--input", str(data), "--time", "ts",
           "--key", "key", *query, "--agg", "count", "--agg", "sum:v",
           "--punctuation", "bounded:5s", "--out", f"{out}/", "--metrics", str(metrics),
           "--quiet", *([] if threads is None else ["--threads", str(threads)])]
    wall, cpu = timed(cmd, quiet=True)
    m = json.loads(metrics.read_text())
    return {"wall_s": wall, "cpu_s": cpu, "tuples_per_s": m["tuples_in"] / wall,
            "peak_rss_mb": m["peak_rss_bytes"] / 2**20,  # the child's own VmHWM
            "peak_state_bytes": m["peak_state_bytes"], "windows_out": m["windows_out"],
            "late": m["late"], "engine_wall_s": m["wall_s"]}


def duckdb_sql(data: Path, query: str) -> str:
    """The batch query DuckDB runs for ``query`` over the same files."""
    src = f"read_parquet('{data}/*.parquet')"
    # the window start of ts: its floor to 1 s (DuckDB's integer // truncates toward zero,
    # which would put negative times one window late)
    start = "(ts - ((ts % 1000) + 1000) % 1000)"
    if query.startswith("tumbling"):
        return (f"SELECT key, {start} AS window_start, count(*) AS count, "
                f"sum(v) AS sum_v FROM {src} GROUP BY ALL")
    # panes of 1 s, then the 10 windows each pane belongs to
    return (f"WITH p AS (SELECT key, {start} // 1000 AS pane, count(*) c, sum(v) s FROM {src} "
            f"GROUP BY ALL) SELECT key, (pane - k) * 1000 AS window_start, sum(c) AS count, "
            f"sum(s) AS sum_v FROM p, range(10) r(k) GROUP BY ALL")


def run_duckdb(data: Path, query: str, out: Path, threads: int | None = 1) -> dict[str, Any] | None:
    """DuckDB as a whole command, like ``oop replay``: a fresh Python process that imports
    duckdb and copies the query's result to Parquet (``threads``: None = all cores)."""
    try:
        import duckdb  # noqa: F401  (only: is it installed)
    except ImportError:
        return None
    setting = "" if threads is None else f"con.execute('SET threads TO {threads}'); "
    code = (f"import duckdb; con = duckdb.connect(); {setting}"
            "con.execute('SET enable_progress_bar = false'); "  # a terminal's bar costs time
            f"con.execute({f'COPY ({duckdb_sql(data, query)}) TO {chr(39)}{out}.parquet{chr(39)} (FORMAT parquet)'!r})")
    wall, cpu = timed([sys.executable, "-c", code])
    return {"wall_s": wall, "cpu_s": cpu}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--generate"]:
        write_workload(Path(argv[1]), int(argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, action="append", help="input sizes (repeatable)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--duckdb", action="store_true", help="also run DuckDB, 1 thread")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--threads", type=int, action="append",
                    help="oop replay --threads, repeatable (default: its own, all cores)")
    args = ap.parse_args(argv)
    sizes = args.rows or [10_000_000]
    print(f"byte-compiled {compile_oop()}", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            data = Path(tmp) / f"in-{n}"
            # in a child process: a forked child's ru_maxrss starts at its parent's size
            subprocess.run([sys.executable, __file__, "--generate", str(data), str(n)],
                           check=True)
            for name, q in QUERIES.items():
                for r in range(args.repeat):
                    out = Path(tmp) / f"out-{n}-{r}-{name.split()[0]}"
                    for th in args.threads or [None]:
                        res = {"rows": n, "query": name, "engine": "oop replay",
                               "threads": th, "load": os.getloadavg()[0],
                               **run_oop(data, q, out, th)}
                        results.append(res)
                        print(json.dumps(res), flush=True)
                    if args.duckdb:
                        for t, label in ((1, "duckdb 1t"), (None, "duckdb all cores")):
                            d = run_duckdb(data, name, out.with_name(out.name + "-duck"), t)
                            if d is not None:
                                row = {"rows": n, "query": name, "engine": label,
                                       "load": os.getloadavg()[0], **d}
                                results.append(row)
                                print(json.dumps(row), flush=True)
            for f in data.iterdir():
                f.unlink()
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"results": results, "loadavg": load},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
