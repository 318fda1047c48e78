"""Where the partitioned window's merge runs: whole on the driving thread, or cut into ranges.

``oop replay --threads N`` (N >= 3) runs the window on N - 1 key partitions
(:class:`oop.window.threaded.ThreadedWindow`); the driving thread merges the
partitions' results into the one-thread order. That merge is the largest
serial part of the pipeline. Where the machine has more cores than
partitions, each merge is cut by value into one range per partition, merged
at once (the driving thread takes one range, merge threads the others;
``oop.window.threaded.cut_merges``). A 2-core machine cannot show the
gain in wall time (the partitions, reader and writer already fill both cores),
so this study reports what scales: the CPU seconds of each thread, from the
``--metrics`` summary, with the merge forced whole and forced cut
(``threaded.CUT_MERGES``), same data, alternating runs, and checks that both
outputs are identical (same rows, same order). Each run starts after ``sync``, and
the outputs are deleted once compared: a run writing while earlier results are still
being written back spent up to twice the encoding CPU.

    python experiments/bench_cut_merge.py --rows 50000000 --threads 3 --repeat 3

The checkout's ``oop`` is byte-compiled first, as ``bench_replay.py`` does.
Workload and query: ``bench_replay.py``'s (10k Zipf keys, band disorder 5 s,
20 Parquet files), sliding 10 s / 1 s count + sum(v) per key, ``bounded:5s``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import QUERIES, compile_oop  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_cut_merge.json"
RUN = ("import sys; from oop.window import threaded; threaded.CUT_MERGES = sys.argv[1] == 'cut'; "
       "from oop.cli import main; sys.exit(main(sys.argv[2:]))")
FIGURES = ("driver_cpu_s", "driver_window_in_cpu_s", "driver_window_out_cpu_s", "merge_cpu_s",
           "partition_cpu_s", "reader_cpu_s", "writer_cpu_s")


def run(data: Path, out: Path, threads: int, mode: str) -> dict[str, Any]:
    metrics = out.parent / f"m-{out.name}.json"
    cmd = [sys.executable, "-c", RUN, mode, "replay", "--input", str(data), "--time", "ts",
           "--key", "key", *QUERIES["sliding 10s/1s"], "--agg", "count", "--agg", "sum:v",
           "--punctuation", "bounded:5s", "--out", f"{out}/", "--metrics", str(metrics),
           "--quiet", "--threads", str(threads)]
    os.sync()  # the previous run's result pages written back: each run starts alike
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    m = json.loads(metrics.read_text())
    plan = m.get("plan", {})
    return {"mode": mode, "threads": threads, "wall_s": wall, "engine_wall_s": m["wall_s"],
            "peak_rss_mb": m["peak_rss_bytes"] / 2**20,
            "peak_state_bytes": m.get("peak_state_bytes"),
            **{k: plan.get(k) for k in FIGURES}}


def same_output(a: Path, b: Path) -> bool:
    return bool(pq.read_table(a).equals(pq.read_table(b)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=3, help="oop replay --threads (>= 3)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", help="reuse this folder of generated input (made if missing)")
    ap.add_argument("--json", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.threads < 3:
        ap.error("--threads must be >= 3 (fewer runs the window unpartitioned)")
    print(f"byte-compiled {compile_oop()}", file=sys.stderr, flush=True)
    load_before = os.getloadavg()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(args.data) if args.data else Path(tmp) / "in"
        if not (data / "part-000.parquet").exists():
            subprocess.run([sys.executable, str(Path(__file__).parent / "bench_replay.py"),
                            "--generate", str(data), str(args.rows)], check=True)
        for r in range(args.repeat):
            outs = {}
            for mode in ("whole", "cut"):
                outs[mode] = Path(tmp) / f"out-{mode}-{r}"
                runs.append({"repeat": r, **run(data, outs[mode], args.threads, mode)})
                print(json.dumps(runs[-1]), file=sys.stderr)
            runs[-1]["identical_to_whole"] = same_output(outs["whole"], outs["cut"])
            if not runs[-1]["identical_to_whole"]:
                raise SystemExit("cut merges changed the output")
            for out in outs.values():  # ~0.5 GB each: dirty pages would slow the next runs
                shutil.rmtree(out)
    summary: dict[str, Any] = {}
    for mode in ("whole", "cut"):
        mine = [x for x in runs if x["mode"] == mode]
        summary[mode] = {k: statistics.median(float(x[k]) for x in mine)
                         for k in ("wall_s", "engine_wall_s", "driver_cpu_s",
                                   "driver_window_out_cpu_s", "merge_cpu_s", "peak_rss_mb")
                         if all(x.get(k) is not None for x in mine)}
    report = {"rows": args.rows, "threads": args.threads, "load_before": load_before,
              "load_after": os.getloadavg(), "cores": os.cpu_count(), "summary": summary,
              "runs": runs}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(json.dumps({k: report[k] for k in ("rows", "threads", "load_before", "load_after",
                                              "summary")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
