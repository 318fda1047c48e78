"""What a user waits for before the first result: import, ``--help``, first-run compile.

Measures, each in fresh processes of this checkout:

* ``import oop`` wall time (best of ``--repeat``; ``python -c pass`` beside it);
* ``oop --help`` and ``oop replay --help`` wall time (``python -m oop.cli``);
* for each query of the README and docs/usage.md (the quick start, the usage
  example, the CLI replays and the SQL query), and two more (sparse keys, which get
  hash cells, and min/max lanes), the first run in an empty
  ``NUMBA_CACHE_DIR`` (every kernel compiles: a first run after install) and
  the second, warm run in the same cache: wall time, numba compile seconds (in
  the running process), how many kernel specializations were compiled (``.nbc``
  files written to the cache) and whether stderr said it was compiling. Beside
  it, the first run with every kernel compiled in the running process
  (``OOP_COMPILE_AHEAD=0``, :mod:`oop.compile_ahead` off): the baseline of the
  compile-ahead helper, in another empty cache.

The machine's load average (``os.getloadavg``) is recorded before and after.
The checkout's ``oop`` package is byte-compiled first (``python -m compileall``), as a
regular ``pip install`` leaves it: under ``PYTHONDONTWRITEBYTECODE=1`` an editable
checkout would otherwise compile ~100 modules from source in every run (~0.09 s), which
no installed user pays.

    python experiments/bench_startup.py --json experiments/results/bench_startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTE = "oop: compiling kernels for this query"
COMPILE_AHEAD = "OOP_COMPILE_AHEAD"  # oop.compile_ahead.ENV

#: README quick start, then docs/usage.md's first Python example (run as written)
_README_BLOCK = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]
_USAGE_BLOCK = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "usage.md").read_text(),
                          re.S)[0]

_SQL = """CREATE TABLE feed (ts BIGINT, src STRING, len BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH ('time-unit' = 'ms');
SELECT src, window_start, COUNT(*) AS n, SUM(len) AS bytes
FROM TABLE(HOP(TABLE feed, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '4' SECOND))
GROUP BY window_start, window_end, src"""

_REPLAY = ["replay", "--input", "{data}", "--time", "ts", "--time-unit", "ms", "--key", "src",
           "--punctuation", "bounded:5s", "--out", "{out}", "--quiet"]

#: name -> ("python", code) | ("cli", argv); ``{data}`` / ``{out}`` filled in per run
QUERIES: dict[str, tuple[str, Any]] = {
    "README quick start": ("python", _README_BLOCK),
    "usage: Python example": ("python", _USAGE_BLOCK),
    "usage: replay sliding count+sum": (
        "cli", _REPLAY + ["--window", "sliding:10s,1s", "--agg", "count", "--agg", "sum:len"]),
    "README: replay tumbling count+sum": (
        "cli", _REPLAY + ["--window", "tumbling:1s", "--agg", "count", "--agg", "sum:len"]),
    "usage: replay --late update": (
        "cli", _REPLAY + ["--window", "sliding:10s,1s", "--agg", "count", "--agg", "sum:len",
                          "--late", "update", "--allowed-lateness", "1min"]),
    "usage: replay holistic": (
        "cli", _REPLAY + ["--window", "sliding:10s,1s", "--agg", "median:len",
                          "--agg", "distinct:dstIP", "--agg", "heavy:dstIP:3"]),
    "usage: replay iop-slack": (
        "cli", _REPLAY + ["--window", "sliding:10s,1s", "--agg", "count", "--agg", "sum:len",
                          "--strategy", "iop-slack:2s,consistent"]),
    "usage: sql HOP": ("cli", ["sql", "-e", _SQL, "--table", "feed={data}", "--out", "{out}"]),
    # not in the documents: the two cell stores and lane kinds the queries above leave out
    "sparse keys: replay sliding count+sum (hash cells)": (
        "cli", [a if a != "src" else "flow" for a in _REPLAY]
        + ["--window", "sliding:10s,1s", "--agg", "count", "--agg", "sum:len"]),
    "select lanes: replay sliding count+max+min": (
        "cli", _REPLAY + ["--window", "sliding:10s,1s", "--agg", "count", "--agg", "max:len",
                          "--agg", "min:len"]),
}

_PY_RUNNER = """
import json, sys, time
t0 = time.perf_counter()
from oop.cli import compile_notice
from oop.metrics import compile_timer
with compile_notice(), compile_timer() as ct:
    exec(compile(sys.stdin.read(), "query", "exec"), {})
print(json.dumps({"compile_s": ct.seconds, "inner_wall_s": time.perf_counter() - t0}))
"""

#: ``oop ...`` as the console script runs it (``oop.cli.main``), numba's compile time beside it
_CLI_RUNNER = """
import json, sys
from oop.cli import main
from oop.metrics import compile_timer
with compile_timer() as ct:
    rc = main(sys.argv[1:])
print(json.dumps({"compile_s": ct.seconds, "rc": rc}))
sys.exit(rc)
"""


def write_data(path: Path, n: int = 100_000) -> None:
    """A disordered flow feed: ts (ms, up to 3 s late), srcIP, dstIP, len, and a flow id of
    1M values (sparse: a 1 s pane holds ~100 of the ~63k seen in the first batch)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    ts = np.arange(n, dtype=np.int64) * 10 - rng.integers(0, 3_000, n)
    pq.write_table(pa.table({
        "ts": ts, "src": rng.choice([f"10.0.0.{i}" for i in range(50)], n),
        "dstIP": rng.choice([f"10.1.0.{i}" for i in range(20)], n),
        "len": rng.integers(40, 1_500, n), "flow": rng.integers(0, 1_000_000, n)}), path)


def _env(cache: Path, ahead: bool = True) -> dict[str, str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop(COMPILE_AHEAD, None)
    if not ahead:
        env[COMPILE_AHEAD] = "0"
    return env


def run_query(kind: str, body: Any, cache: Path, work: Path, data: Path, tag: str,
              ahead: bool = True) -> dict[str, Any]:
    """One run of a query in a child process with ``cache`` as numba's cache; ``ahead``
    false: every kernel compiles in the running process (``OOP_COMPILE_AHEAD=0``)."""
    before = len(list(cache.rglob("*.nbc")))
    t0 = time.perf_counter()
    if kind == "python":
        r = subprocess.run([sys.executable, "-c", _PY_RUNNER], input=body, text=True,
                           capture_output=True, cwd=work, env=_env(cache, ahead), timeout=900)
        wall = time.perf_counter() - t0
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        compile_s = json.loads(r.stdout.strip().splitlines()[-1])["compile_s"]
    else:
        out = work / f"out-{tag}.parquet"
        argv = [a.format(data=data, out=out) for a in body]
        r = subprocess.run([sys.executable, "-c", _CLI_RUNNER, *argv], capture_output=True,
                           text=True, cwd=work, env=_env(cache, ahead), timeout=900)
        wall = time.perf_counter() - t0
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        compile_s = json.loads(r.stdout.strip().splitlines()[-1])["compile_s"]
        out.unlink(missing_ok=True)
    return {"wall_s": round(wall, 3),
            "compile_s": None if compile_s is None else round(compile_s, 3),
            "specializations_compiled": len(list(cache.rglob("*.nbc"))) - before,
            "said_compiling": r.stderr.count(NOTE)}


def best_wall(argv: list[str], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``argv`` (seconds, whole process)."""
    best = float("inf")
    env = _env(Path(tempfile.gettempdir()))
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env, cwd=ROOT)
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per startup figure (best kept)")
    ap.add_argument("--query", action="append", help="only these queries (name substring)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    py = sys.executable
    subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "oop")], check=True)
    res: dict[str, Any] = {
        "python_pass_s": best_wall([py, "-c", "pass"], args.repeat),
        "import_oop_s": best_wall([py, "-c", "import oop"], args.repeat),
        "oop_help_s": best_wall([py, "-m", "oop.cli", "--help"], args.repeat),
        "oop_replay_help_s": best_wall([py, "-m", "oop.cli", "replay", "--help"], args.repeat),
    }
    print(json.dumps(res), flush=True)
    queries = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "flows.parquet"
        write_data(data)
        for i, (name, (kind, body)) in enumerate(QUERIES.items()):
            if args.query and not any(q in name for q in args.query):
                continue
            alone = work / f"numba-cache-{i}-alone"
            alone.mkdir()
            first_alone = run_query(kind, body, alone, work, data, f"{i}o", ahead=False)
            cache = work / f"numba-cache-{i}"
            cache.mkdir()
            first = run_query(kind, body, cache, work, data, f"{i}a")
            warm = run_query(kind, body, cache, work, data, f"{i}b")
            row = {"query": name, "first_run": first, "warm_run": warm,
                   "first_run_one_process": first_alone}
            queries.append(row)
            print(json.dumps(row), flush=True)
    res["queries"] = queries
    res["loadavg_before"] = [round(x, 2) for x in load_before]
    res["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average before {res['loadavg_before']}, after {res['loadavg_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
