"""Whole-command benchmark against Apache Flink: PyFlink SQL and ``oop replay`` on the same feed.

Workload: ``bench_replay.py``'s stream (10k Zipf keys, ~10k tuples per second of event
time, band disorder up to 5 s, ms times). Flink has no Parquet format among PyFlink's
bundled jars (and this machine reaches no Maven repository), so both engines read the
same rows in the same (arrival) order from one CSV file (Flink's without a header line,
``oop``'s with one) and write CSV part folders; ``oop``'s own path, the 20 Parquet files
in and Parquet out, runs beside them.

Queries, count + sum(v) per key: tumbling 1 s and sliding 10 s / 1 s, with
``--punctuation bounded:5s`` for ``oop`` and ``WATERMARK FOR rt AS rt - INTERVAL '5'
SECOND`` for Flink (streaming mode, event time; ``flink_job.py`` has the SQL). Nothing is
late for either. ``oop`` runs with ``--threads 1`` and with all cores, Flink with
parallelism 1 and all cores (its local mini-cluster). Each run is a fresh process timed
from start to exit: for Flink the Python process that starts the JVM, plans the SQL, runs
the job and exits. CPU and peak RSS: ``oop``'s from ``wait4`` and its ``--metrics``
(``VmHWM``); Flink's add the JVM's, read by ``flink_job.py`` from ``/proc`` before it exits.
A one-row input measures each engine's fixed cost (Flink: JVM start, SQL planning, job
submission).

Every Flink result is checked against ``oop``'s, row for row after sorting by key and
window: same keys, windows and counts, sums within 1e-9 (relative).

PyFlink pins its own numpy / pyarrow, so it lives in a Python of its own:

    python -m venv /tmp/flinkenv && /tmp/flinkenv/bin/pip install apache-flink==2.3.0
    python experiments/bench_flink.py --flink-python /tmp/flinkenv/bin/python --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import QUERIES, compile_oop  # noqa: E402

HERE = Path(__file__).resolve().parent
PLOT = HERE.parent / "docs" / "figures" / "flink" / "whole_command.png"
FLINK_QUERY = {"tumbling 1s": "tumbling", "sliding 10s/1s": "sliding"}


def to_csv(parquet_folder: Path, with_header: Path, headerless: Path) -> None:
    """The workload's Parquet files, in order, as one CSV file with a header line and one
    without. One file: Flink's file source enumerates the files of a folder in no set
    order and its watermark follows the rows it read, so over 20 files it dropped most
    rows as late (19k of 87k tumbling windows left in a 300k-row trial); one file is read
    in arrival order, as ``oop`` reads the folder."""
    for folder in (with_header, headerless):
        folder.mkdir(parents=True, exist_ok=True)
    files = sorted(parquet_folder.glob("*.parquet"))
    schema = pq.read_schema(files[0])
    with pcsv.CSVWriter(with_header / "feed.csv", schema) as head, \
            pcsv.CSVWriter(headerless / "feed.csv", schema,
                           write_options=pcsv.WriteOptions(include_header=False)) as bare:
        for f in files:
            for batch in pq.ParquetFile(f).iter_batches():
                head.write_batch(batch)
                bare.write_batch(batch)


def _wait(cmd: list[str], stdout: Any = subprocess.DEVNULL) -> tuple[float, float, Any]:
    """Run ``cmd`` to its end: (wall s, CPU s user + sys from ``wait4``, the process)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {code}")
    return wall, ru.ru_utime + ru.ru_stime, proc


def run_oop(data: Path, query: str, out: Path, threads: int, fmt: str) -> dict[str, Any]:
    """``oop replay`` over ``data`` into the part folder ``out`` (format ``fmt``)."""
    metrics = out.parent / f"m-{out.name}.json"
    cmd = [sys.executable, "-m", "oop.cli", "replay", "--input", str(data), "--time", "ts",
           "--key", "key", *QUERIES[query], "--agg", "count", "--agg", "sum:v",
           "--punctuation", "bounded:5s", "--out", f"{out}/", "--out-format", fmt,
           "--metrics", str(metrics), "--quiet", "--threads", str(threads)]
    wall, cpu, _ = _wait(cmd)
    m = json.loads(metrics.read_text())
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": m["peak_rss_bytes"] / 2**20,
            "peak_state_bytes": m["peak_state_bytes"], "rows_out": m["windows_out"],
            "tuples_per_s": m["tuples_in"] / wall}


def run_flink(flink_python: str, data: Path, query: str, out: Path,
              parallelism: int) -> dict[str, Any]:
    """``flink_job.py`` under ``flink_python``: the whole command, the JVM included."""
    cmd = [flink_python, str(HERE / "flink_job.py"), str(data), str(out), str(parallelism),
           FLINK_QUERY[query]]
    wall, cpu, proc = _wait(cmd, stdout=subprocess.PIPE)
    job = json.loads(proc.stdout.read().decode().strip().splitlines()[-1])
    proc.stdout.close()
    return {"wall_s": wall, "cpu_s": cpu + job["jvm_cpu_s"], "job_s": job["job_s"],
            "peak_rss_mb": job["jvm_peak_rss_mb"]}


def oop_rows(folder: Path) -> pa.Table:
    """``oop``'s CSV parts as (key, window_start ms, count, sum_v), sorted."""
    t = pa.concat_tables([pcsv.read_csv(f) for f in sorted(folder.glob("part-*.csv"))])
    return t.select(["key", "window_start", "count", "sum_v"]).sort_by(
        [("key", "ascending"), ("window_start", "ascending")])


def flink_rows(folder: Path) -> pa.Table:
    """Flink's CSV parts (no header; window_start a UTC timestamp) in ``oop_rows``' form."""
    opts = pcsv.ReadOptions(column_names=["key", "window_start", "count", "sum_v"])
    conv = pcsv.ConvertOptions(column_types={"key": pa.int64(), "window_start": pa.timestamp("ms"),
                                             "count": pa.int64(), "sum_v": pa.float64()})
    parts = [f for f in sorted(folder.iterdir()) if f.is_file() and not f.name.startswith(".")]
    t = pa.concat_tables([pcsv.read_csv(f, read_options=opts, convert_options=conv)
                          for f in parts])
    start = pc.cast(t.column("window_start"), pa.int64())
    t = t.set_column(1, "window_start", start)
    return t.sort_by([("key", "ascending"), ("window_start", "ascending")])


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Same keys, windows and counts row for row; sums within 1e-9 relative."""
    if a.num_rows != b.num_rows:
        return False
    for col in ("key", "window_start", "count"):
        if not np.array_equal(a.column(col).to_numpy(), b.column(col).to_numpy()):
            return False
    return bool(np.allclose(a.column("sum_v").to_numpy(), b.column("sum_v").to_numpy(),
                            rtol=1e-9, atol=0.0))


def print_summary(results: list[dict[str, Any]]) -> None:
    """Median wall time per input, query, engine, format and thread count (stderr)."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in results:
        key = (r["rows"], r["query"], r["engine"], r["io"], r["threads"])
        groups.setdefault(key, []).append(r["wall_s"])
    for (rows, query, engine, io, threads), walls in groups.items():
        walls.sort()
        print(f"{rows:>10} {query:15s} {engine:11s} {io:8s} x{threads}: "
              f"{walls[len(walls) // 2]:7.2f} s (median of {len(walls)})", file=sys.stderr)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Bars of the median whole-command time per query and run (log scale), the feed only."""
    from oop.experiments.common import plt

    runs = [("flink", "csv", "Flink"), ("oop replay", "csv", "oop\nCSV"),
            ("oop replay", "parquet", "oop\nParquet")]
    feed = [r for r in results if r["input"] == "feed"]
    counts = sorted({r["threads"] for r in feed})
    pyplot = plt()
    fig, axes = pyplot.subplots(1, len(QUERIES), figsize=(10, 4), sharey=True)
    for ax, query in zip(axes, QUERIES):
        labels, values = [], []
        for engine, io, name in runs:
            for th in counts:
                walls = sorted(r["wall_s"] for r in feed if r["query"] == query
                               and r["engine"] == engine and r["io"] == io and r["threads"] == th)
                if walls:
                    labels.append(f"{name}\n{'p' if engine == 'flink' else 't'}={th}")
                    values.append(walls[len(walls) // 2])
        bars = ax.bar(range(len(values)), values,
                      color=["#b0b0b0" if "Flink" in x else "#3070b0" for x in labels])
        ax.bar_label(bars, labels=[f"{v:.1f} s" for v in values], fontsize=8)
        ax.set_xticks(range(len(values)), labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{query}, {feed[0]['rows'] / 1e6:g}M rows")
    axes[0].set_ylabel("whole command, seconds (log scale)")
    fig.suptitle("Apache Flink 2.3.0 (PyFlink SQL) and oop replay, same rows, same results")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot.close(fig)


def check_flink(flink_python: str) -> None:
    """Refuse to start without a Python that imports pyflink, saying how to make one."""
    ok = subprocess.run([flink_python, "-c", "import pyflink"], capture_output=True).returncode
    if ok != 0:
        raise SystemExit(f"{flink_python} cannot import pyflink; make one with: python -m venv "
                         "/tmp/flinkenv && /tmp/flinkenv/bin/pip install apache-flink==2.3.0, "
                         "then give --flink-python /tmp/flinkenv/bin/python")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flink-python", default=os.environ.get("OOP_FLINK_PYTHON"),
                    help="a Python with apache-flink (default: $OOP_FLINK_PYTHON)")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default=str(HERE / "results" / "bench_flink.json"))
    ap.add_argument("--plot", default=str(PLOT), help="the bar chart (PNG) of the walls")
    ap.add_argument("--plot-only", action="store_true",
                    help="draw --plot from the --json of an earlier run, run nothing")
    args = ap.parse_args(argv)
    if args.plot_only:
        plot(json.loads(Path(args.json).read_text())["results"], Path(args.plot))
        return 0
    if not args.flink_python:
        ap.error("give --flink-python (a Python with apache-flink; see the module doc)")
    check_flink(args.flink_python)
    cores = os.cpu_count() or 1
    counts = sorted({1, cores})
    load_before = os.getloadavg()
    print(f"byte-compiled {compile_oop()}", file=sys.stderr, flush=True)
    results: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> None:
        row["load"] = os.getloadavg()[0]
        results.append(row)
        print(json.dumps(row), flush=True)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sets = {}
        for label, n in (("one row", 1), ("feed", args.rows)):
            pq_dir = tmp / f"pq-{n}"
            subprocess.run([sys.executable, str(HERE / "bench_replay.py"), "--generate",
                            str(pq_dir), str(n)], check=True)
            to_csv(pq_dir, tmp / f"csv-{n}", tmp / f"csv-nh-{n}")
            sets[label] = (n, pq_dir, tmp / f"csv-{n}", tmp / f"csv-nh-{n}")
        for label, (n, pq_dir, csv_dir, flink_dir) in sets.items():
            for query in QUERIES:
                for r in range(args.repeat if label == "feed" else 1):
                    base = {"rows": n, "input": label, "query": query, "repeat": r}
                    ref = None
                    for th in counts:
                        out = tmp / f"oop-csv-{th}"
                        record({**base, "engine": "oop replay", "io": "csv", "threads": th,
                                **run_oop(csv_dir, query, out, th, "csv")})
                        ref = oop_rows(out) if ref is None else ref
                        shutil.rmtree(out)
                    for th in counts:
                        out = tmp / f"oop-parquet-{th}"
                        record({**base, "engine": "oop replay", "io": "parquet", "threads": th,
                                **run_oop(pq_dir, query, out, th, "parquet")})
                        shutil.rmtree(out)
                    for par in counts:
                        out = tmp / f"flink-{par}"
                        row = {**base, "engine": "flink", "io": "csv", "threads": par,
                               **run_flink(args.flink_python, flink_dir, query, out, par)}
                        got = flink_rows(out)
                        row["rows_out"] = got.num_rows
                        row["same_rows_as_oop"] = same_rows(got, ref)
                        record(row)
                        shutil.rmtree(out)
    load_after = os.getloadavg()
    print(f"load average before: {load_before}, after: {load_after}, cores: {cores}",
          file=sys.stderr)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"results": results, "loadavg_before": load_before,
                                           "loadavg_after": load_after, "cpu_count": cores},
                                          indent=2))
    print_summary(results)
    plot(results, Path(args.plot))
    bad = [r for r in results if r.get("same_rows_as_oop") is False]
    for r in bad:
        print(f"Flink's rows differ from oop's: {r['query']}, parallelism {r['threads']}, "
              f"{r['rows']} rows", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
