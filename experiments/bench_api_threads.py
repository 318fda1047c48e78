"""The Python API on files: on one thread, with its default threads, with jemalloc, and
``oop replay`` beside it.

The workload and queries of ``bench_replay.py`` / ``bench_threads.py`` (10k Zipf keys,
band disorder up to 5 s, 20 Parquet files; count + sum(v) per key, sliding 10 s / 1 s and
tumbling 1 s, punctuation ``BoundedDelay("5s")``, results to a Parquet part folder), run
as a Python script in a fresh process each time::

    oop.from_parquet(data, ...).window(...).to_parquet(out)

in four variants, interleaved within each repeat:

* ``plain``: ``read_ahead=False``, ``background=False`` (everything on the calling thread);
* ``default``: no flags -- on more than one core, decoding on a reading thread and
  encoding on two writing lanes (what ``oop replay --threads 2`` does around the window);
* ``default+jemalloc``: the same with ``ARROW_DEFAULT_MEMORY_POOL=jemalloc`` set before
  pyarrow loads (the allocator ``oop replay`` picks for itself; a library leaves it to its
  caller: ``oop/io/memory_pool.py``);
* ``oop replay``: the command, ``--threads`` at every usable core.

Each run reports the whole process's wall time, its CPU (user + sys, ``wait4``), peak RSS
and tuples/s; every output is compared with the plain one (all parts, ``Table.equals``:
same rows, same order). The load average is recorded before and after.

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
from bench_replay import QUERIES as CLI_QUERIES  # noqa: E402
from bench_replay import compile_oop  # noqa: E402
from bench_threads import benchmark_input, min_median_max, read_parts, run_oop  # noqa: E402

from oop.limits import usable_cores  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_api_threads.json"

#: the queries of bench_replay.QUERIES, as the API writes them
QUERIES = {"tumbling 1s": 'Tumbling("1s")', "sliding 10s/1s": 'Sliding("10s", "1s")'}

_SCRIPT = """
import sys
import oop
from oop.window import Sliding, Tumbling, agg
data, out, plain = sys.argv[1], sys.argv[2], sys.argv[3] == "plain"
reading, writing = (dict(read_ahead=False), dict(background=False)) if plain else ({{}}, {{}})
res = (oop.from_parquet(data, time="ts", punctuation=oop.BoundedDelay("5s"), **reading)
       .window({kind}, [agg.count(), agg.sum("v")], by="key")
       .to_parquet(out + "/", **writing))
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print(res.metrics["window"].tuples_in, hwm[0] if hwm else 0)
"""


#: variant -> extra environment of the API script (None: the command, ``oop replay``)
VARIANTS: dict[str, dict[str, str] | None] = {
    "plain": {}, "default": {}, "default+jemalloc": {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"},
    "oop replay": None}


def run_script(data: Path, kind: str, out: Path, variant: str) -> dict[str, Any]:
    """One fresh process of the API script: wall, CPU, peak RSS (the script's own
    ``VmHWM``: ``ru_maxrss`` would carry over this process's peak through fork), tuples/s."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    env.update(VARIANTS[variant] or {})
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT.format(kind=kind), str(data),
                             str(out), variant], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    tuples, peak_kb = (int(x) for x in (proc.stdout.read() or b"0 0").split())
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the API script failed ({kind}, {variant})")
    return {"variant": variant, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "peak_rss_mb": peak_kb / 1024, "tuples_per_s": tuples / wall,
            "tuples": tuples}


def run_variant(data: Path, name: str, out: Path, variant: str) -> dict[str, Any]:
    """One run of ``variant`` on query ``name``: the API script, or ``oop replay``."""
    if VARIANTS[variant] is not None:
        return run_script(data, QUERIES[name], out, variant)
    r = run_oop(data, CLI_QUERIES[name], out, usable_cores())
    return {"variant": variant, "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
            "peak_rss_mb": r["peak_rss_mb"], "tuples_per_s": r["tuples_per_s"],
            "tuples": round(r["tuples_per_s"] * r["wall_s"])}


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
        for name in QUERIES:
            for r in range(args.repeat):
                outs = {}
                for variant in VARIANTS:
                    out = Path(tmp) / f"out-{r}-{len(outs)}"
                    res = {"rows": args.rows, "query": name, "repeat": r,
                           **run_variant(data, name, out, variant)}
                    outs[variant] = out
                    if variant != "plain":
                        res["identical_to_plain"] = read_parts(out).equals(
                            read_parts(outs["plain"]))
                    results.append(res)
                    print(json.dumps(res), flush=True)
                for out in outs.values():
                    for f in out.glob("*"):
                        f.unlink()
            runs = [x for x in results if x["query"] == name]
            summary[name] = {v: {k: min_median_max([x[k] for x in runs if x["variant"] == v])
                                 for k in ("wall_s", "cpu_s", "peak_rss_mb")}
                             for v in VARIANTS}
            summary[name]["all_identical"] = all(x.get("identical_to_plain", True)
                                                 for x in runs)
    load_after = os.getloadavg()
    report = {"results": results, "summary": summary, "loadavg_before": load_before,
              "loadavg_after": load_after, "cpu_count": os.cpu_count()}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))
    for name in QUERIES:
        print(f"{name} (medians): " + "; ".join(
            f"{v} {summary[name][v]['wall_s'][1]:.2f} s, CPU {summary[name][v]['cpu_s'][1]:.2f} s, "
            f"{summary[name][v]['peak_rss_mb'][1]:.0f} MiB" for v in VARIANTS)
            + f"; identical: {summary[name]['all_identical']}")
    print(f"load average before: {load_before}, after: {load_after}, cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
