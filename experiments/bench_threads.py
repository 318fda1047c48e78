"""Whole-command benchmark of ``oop replay --threads N``: 1 thread vs N threads, same run.

Workload and queries: those of ``bench_replay.py`` (10k Zipf keys, ~10k
tuples per second of event time, band disorder up to 5 s, Parquet files;
count + sum(v) per key, sliding 10 s / 1 s and tumbling 1 s, punctuation
``bounded:5s``, results to a Parquet part folder). Each run is a fresh
process timed from start to exit, with its CPU time (user + sys, from
``wait4``), its own peak RSS (``VmHWM``) and the engine's wall time (the
``--metrics`` summary, i.e. without interpreter start-up and imports).
Thread counts alternate within each repeat, so a change in the machine's
load hits both; the load average is recorded before and after, and each run's ``steal_s``:
the CPU seconds the hypervisor gave to other guests while it ran (``/proc/stat``): time
the run's threads could have run and did not (summed over both cores), and its ``idle_s``:
the machine's core seconds no thread used while it ran (the serial start-up leaves the other
cores idle; the rest is what the pipeline leaves unused; other processes fill it).

``oop replay --threads N`` (N > 1) reads and writes on threads of its own
(the result parts encoded on two lanes) and runs the window on N - 1 key
partitions: ``--threads 2`` is the one-thread window with decode and encode
beside it, ``--threads 3`` the first to partition (ThreadedWindow). Threaded runs report their threads' CPU.

The checkout's ``oop`` is byte-compiled first, as ``bench_replay.py`` does (a regular
install's state: an editable install under ``PYTHONDONTWRITEBYTECODE=1`` compiles ~100
modules in every run, which adds to the serial start-up of both thread counts).

Every threaded output is compared with the one-thread output of the same
query (all part files in order, ``Table.equals``: same rows, same order).

The summary gives, per thread count, the median speed-ups of the whole command and of
the engine, and ``speedup_wall_ceiling``: the whole-command speed-up if the N threads
divided the one-thread engine time exactly by N, with the measured serial rest of the
command (start-up and exit) -- what no better use of the threads could beat.

Per-stage figures for the extrapolation to more cores (``--stages``): the
CPU seconds of decoding the input alone and of encoding the one-thread
output alone (Parquet, same files / same rows), measured in this process;
the rest of the one-thread engine time is the window (late check, keys,
aggregation, emission).

    python experiments/bench_threads.py --rows 10000000 --threads 1 --threads 2 --threads 3 --repeat 3

``--method adapt`` runs the same study with AdaptWID (``oop replay --method adapt``;
``--threads 3`` partitions it, :class:`oop.adapt.threaded.ThreadedAdapt`); its results go
to ``results/bench_threads_adapt.json``.
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

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import QUERIES, compile_oop  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_threads.json"


_SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range(10_000_000): x += i\n"


def machine_pair_speedup(rounds: int = 3) -> float:
    """What two cores give this machine right now, whatever ``oop`` does: a pure-Python loop
    (~0.5 s) run alone, then twice at once in two processes; the speed-up is twice the
    lone run's wall over the pair's (2.0 on two free cores). Median of ``rounds``. The
    threads' speed-up cannot exceed it: on this VM it was 1.75-2.0 within one hour."""
    def wall(n: int) -> float:
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(n)]
        for p in procs:
            p.wait()
        return time.perf_counter() - t0

    ratios = sorted(2 * wall(1) / wall(2) for _ in range(rounds))
    return ratios[len(ratios) // 2]


def machine_cpu_s() -> dict[str, float]:
    """CPU seconds of this machine's cores since boot, from the first line of ``/proc/stat``
    (zeros where there is none): ``idle`` (idle and iowait: no thread of any process ran) and
    ``steal`` (the hypervisor gave the physical core to another guest). A run's difference
    of ``idle`` is core time its threads left unused (~the serial start-up on all but one
    core, plus whatever the pipeline leaves idle); of ``steal``, time its threads were
    runnable but not running."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        tick = os.sysconf("SC_CLK_TCK")
        return {"idle": (int(fields[4]) + int(fields[5])) / tick, "steal": int(fields[8]) / tick}
    except (OSError, IndexError, ValueError):
        return {"idle": 0.0, "steal": 0.0}


def run_oop(data: Path, query: list[str], out: Path, threads: int,
            method: str = "auto") -> dict[str, Any]:
    metrics = out.parent / f"m-{out.name}.json"
    cmd = [sys.executable, "-m", "oop.cli", "replay", "--input", str(data), "--time", "ts",
           "--key", "key", *query, "--agg", "count", "--agg", "sum:v",
           "--punctuation", "bounded:5s", "--out", f"{out}/", "--metrics", str(metrics),
           "--quiet", "--threads", str(threads), "--method", method]
    cpu0 = machine_cpu_s()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    cpu1 = machine_cpu_s()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    m = json.loads(metrics.read_text())
    return {"threads": threads, "method": method, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "engine_wall_s": m["wall_s"], "tuples_per_s": m["tuples_in"] / wall,
            "engine_tuples_per_s": m["tuples_in"] / m["wall_s"],
            "peak_rss_mb": m["peak_rss_bytes"] / 2**20, "windows_out": m["windows_out"],
            "late": m["late"], "steal_s": cpu1["steal"] - cpu0["steal"],
            "idle_s": cpu1["idle"] - cpu0["idle"],
            # threaded runs: CPU seconds of the driving thread, the reader and the writer
            # (oop.plan.background) and, partitioned (--threads >= 3), of each partition
            "thread_cpu_s": {k: v for k, v in m.get("plan", {}).items() if k.endswith("cpu_s")}}


def wall_ceiling(one: dict[str, Any], many: dict[str, Any], threads: int) -> float:
    """The whole-command speed-up ``threads`` threads would give if they divided the
    one-thread engine time exactly by ``threads`` and left the rest of the N-thread command
    (interpreter start, imports, kernel loading, exit: wall minus engine time, serial)
    as measured; medians. The measured ``speedup_wall_median`` over this figure is how much
    of the start-up-bound ceiling the threaded engine reaches."""
    wall1, eng1 = one["wall_s_min_median_max"][1], one["engine_s_min_median_max"][1]
    walln, engn = many["wall_s_min_median_max"][1], many["engine_s_min_median_max"][1]
    return float(wall1 / (walln - engn + eng1 / threads))


def benchmark_input(data: str | None, tmp: str, rows: int) -> Path:
    """The folder of generated input: ``data`` (made there if missing) or one in ``tmp``."""
    folder = Path(data) if data else Path(tmp) / "in"
    if not (folder / "part-000.parquet").exists():
        subprocess.run([sys.executable, str(Path(__file__).parent / "bench_replay.py"),
                        "--generate", str(folder), str(rows)], check=True)
    return folder


def min_median_max(values: list[float]) -> list[float]:
    """``[min, median, max]`` of ``values`` (the upper median of an even count)."""
    v = sorted(values)
    return [v[0], v[len(v) // 2], v[-1]]


def read_parts(folder: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in sorted(folder.glob("*.parquet"))])


def rounding_only(a: pa.Table, b: pa.Table) -> bool:
    """Whether ``a`` and ``b`` differ only in float columns, within 1e-12 relative
    (AdaptWID's float sums follow each group's eager / lazy mode, a partition's choice)."""
    import numpy as np

    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if pa.types.is_floating(x.type):
            if not np.allclose(x.to_numpy(), y.to_numpy(), rtol=1e-12, atol=0, equal_nan=True):
                return False
        elif not x.equals(y):
            return False
    return True


def stages(data: Path, out: Path) -> dict[str, float]:
    """CPU seconds (this process) of decoding the input and of encoding ``out``'s rows, both
    as ``oop replay`` does them (its Parquet reader; its result encoder and settings)."""
    from oop.io.filewrite import native_open
    from oop.io.formats import parquet_file
    from oop.io.writers import make_writer

    t0 = time.process_time()
    rows = 0
    for f in sorted(data.glob("*.parquet")):
        for b in parquet_file(str(f)).iter_batches(batch_size=65_536):
            rows += b.num_rows
    read = time.process_time() - t0
    table = read_parts(out)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        f = native_open(str(Path(tmp) / "x.parquet"), "wb")
        w = make_writer("parquet", f, table.schema)
        for b in table.to_batches(max_chunksize=65_536):
            w.write(b)
        w.close()
        f.close()
        write = time.process_time() - t0
    return {"read_cpu_s": read, "write_cpu_s": write, "input_rows": rows,
            "output_rows": table.num_rows}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, action="append", help="thread counts (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", help="reuse this folder of generated input (made if missing)")
    ap.add_argument("--no-stages", action="store_true", help="skip the per-stage figures")
    ap.add_argument("--method", default="auto", choices=["auto", "wid", "paned", "adapt"],
                    help="oop replay --method (default auto)")
    ap.add_argument("--json", default=None,
                    help=f"results file (default {RESULTS.name}, or bench_threads_adapt.json "
                         "with --method adapt)")
    args = ap.parse_args(argv)
    if args.json is None:
        args.json = str(RESULTS if args.method != "adapt"
                        else RESULTS.with_name("bench_threads_adapt.json"))
    counts = args.threads or [1, 2]
    if 1 not in counts:
        counts = [1, *counts]
    results: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    print(f"byte-compiled {compile_oop()}", file=sys.stderr, flush=True)
    load_before = os.getloadavg()
    pair_before = machine_pair_speedup()
    with tempfile.TemporaryDirectory() as tmp:
        data = benchmark_input(args.data, tmp, args.rows)
        for name, q in QUERIES.items():
            for r in range(args.repeat):
                outs: dict[int, Path] = {}
                for th in counts:
                    out = Path(tmp) / f"out-{name.split()[0]}-{r}-{th}"
                    res = {"rows": args.rows, "query": name, "repeat": r,
                           **run_oop(data, q, out, th, args.method)}
                    outs[th] = out
                    results.append(res)
                    print(json.dumps(res), flush=True)
                one = read_parts(outs[1])
                for th in counts[1:]:
                    other = read_parts(outs[th])
                    same = other.equals(one)
                    res = results[-len(counts) + counts.index(th)]
                    res["identical_to_1_thread"] = same
                    if not same:
                        res["float_rounding_only"] = rounding_only(other, one)
                        print(f"{name}: --threads {th} output differs from --threads 1 "
                              f"(float rounding only: {res['float_rounding_only']})",
                              file=sys.stderr)
                if r == args.repeat - 1 and not args.no_stages:
                    summary[name] = {"stages": stages(data, outs[1])}
                for th, out in outs.items():
                    for f in out.glob("*"):
                        f.unlink()
        for name in QUERIES:
            for th in counts:
                runs = [x for x in results if x["query"] == name and x["threads"] == th]
                summary.setdefault(name, {})[f"threads_{th}"] = {
                    "steal_s_median": min_median_max([x.get("steal_s", 0.0) for x in runs])[1],
                    "idle_s_median": min_median_max([x.get("idle_s", 0.0) for x in runs])[1],
                    "wall_s_min_median_max": min_median_max([x["wall_s"] for x in runs]),
                    "engine_s_min_median_max": min_median_max([x["engine_wall_s"]
                                                               for x in runs])}
            base = summary[name]["threads_1"]
            for th in counts[1:]:
                s = summary[name][f"threads_{th}"]
                s["speedup_wall_median"] = (base["wall_s_min_median_max"][1]
                                            / s["wall_s_min_median_max"][1])
                s["speedup_engine_median"] = (base["engine_s_min_median_max"][1]
                                              / s["engine_s_min_median_max"][1])
                s["speedup_wall_ceiling"] = wall_ceiling(base, s, th)
    load_after = os.getloadavg()
    pair_after = machine_pair_speedup()
    print(json.dumps(summary, indent=2))
    print(f"load average before: {load_before}, after: {load_after}, cores: {os.cpu_count()}")
    print(f"the machine's own two-process speed-up (a pure-Python loop alone and twice at "
          f"once): {pair_before:.2f}x before, {pair_after:.2f}x after")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(
        {"results": results, "summary": summary, "loadavg_before": load_before,
         "machine_pair_speedup_before": pair_before, "machine_pair_speedup_after": pair_after,
         "loadavg_after": load_after, "cpu_count": os.cpu_count()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
