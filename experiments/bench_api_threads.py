"""The Python API on files, one thread against reading and writing on threads of their own.

The workload and queries of ``bench_replay.py`` / ``bench_threads.py`` (10k Zipf keys,
band disorder up to 5 s, 20 Parquet files; count + sum(v) per key, sliding 10 s / 1 s and
tumbling 1 s, punctuation ``BoundedDelay("5s")``, results to a Parquet part folder), run
as a Python script in a fresh process each time::

    oop.from_parquet(data, ..., read_ahead=R).window(...).to_parquet(out, background=R)

with ``R`` false (everything on the calling thread) and true (decoding on a reading
thread, encoding on two writing lanes: what ``oop replay --threads 2`` does around the
window). The two alternate within each repeat; each run reports the whole script's wall
time, its CPU (user + sys, ``wait4``), peak RSS and tuples/s, and the threaded output is
compared with the plain one (all parts, ``Table.equals``: same rows, same order). The load
average is recorded before and after.

    python experiments/bench_api_threads.py --rows 50000000 --repeat 3 --data /tmp/bt50
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import compile_oop  # noqa: E402
from bench_threads import benchmark_input, min_median_max, read_parts  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_api_threads.json"

#: the queries of bench_replay.QUERIES, as the API writes them
QUERIES = {"tumbling 1s": 'Tumbling("1s")', "sliding 10s/1s": 'Sliding("10s", "1s")'}

_SCRIPT = """
import sys
import oop
from oop.window import Sliding, Tumbling, agg
data, out, threaded = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
res = (oop.from_parquet(data, time="ts", punctuation=oop.BoundedDelay("5s"),
                        read_ahead=threaded)
       .window({kind}, [agg.count(), agg.sum("v")], by="key")
       .to_parquet(out + "/", background=threaded))
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(res.metrics["window"].tuples_in, hwm[0] if hwm else 0)
"""


def run_script(data: Path, kind: str, out: Path, threaded: bool) -> dict[str, Any]:
    """One fresh process of the API script: wall, CPU, peak RSS (the script's own
    ``VmHWM``: ``ru_maxrss`` would carry over this process's peak through fork), tuples/s."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT.format(kind=kind), str(data),
                             str(out), "1" if threaded else "0"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    tuples, peak_kb = (int(x) for x in (proc.stdout.read() or b"0 0").split())
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the API script failed ({kind}, threaded={threaded})")
    return {"threaded": threaded, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mb": peak_kb / 1024, "tuples_per_s": tuples / wall,
            "tuples": tuples}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", help="reuse this folder of generated input (made if missing)")
    ap.add_argument("--json", default=str(RESULTS), help="results file")
    args = ap.parse_args(argv)
    print(f"byte-compiled {compile_oop()}", file=sys.stderr, flush=True)
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = benchmark_input(args.data, tmp, args.rows)
        for name, kind in QUERIES.items():
            for r in range(args.repeat):
                outs = {}
                for threaded in (False, True):
                    out = Path(tmp) / f"out-{r}-{int(threaded)}"
                    res = {"rows": args.rows, "query": name, "repeat": r,
                           **run_script(data, kind, out, threaded)}
                    outs[threaded] = out
                    results.append(res)
                    print(json.dumps(res), flush=True)
                results[-1]["identical_to_plain"] = read_parts(outs[True]).equals(
                    read_parts(outs[False]))
                for out in outs.values():
                    for f in out.glob("*"):
                        f.unlink()
            walls = {th: min_median_max([x["wall_s"] for x in results
                                         if x["query"] == name and x["threaded"] == th])
                     for th in (False, True)}
            summary[name] = {
                "plain_wall_s_min_median_max": walls[False],
                "threaded_wall_s_min_median_max": walls[True],
                "speedup_median": walls[False][1] / walls[True][1],
                "all_identical": all(x.get("identical_to_plain", True) for x in results
                                     if x["query"] == name)}
    load_after = os.getloadavg()
    report = {"results": results, "summary": summary, "loadavg_before": load_before,
              "loadavg_after": load_after, "cpu_count": os.cpu_count()}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(json.dumps(summary, indent=2))
    print(f"load average before: {load_before}, after: {load_after}, cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
