"""How many of a command's threads are runnable, over its run: is the machine kept busy?

Runs the command given after ``--`` and samples, about every ``--every`` seconds, the
scheduler state of each of its threads (``/proc/PID/task/TID/stat``: ``R`` = running or
waiting for a core; anything else = blocked: a lock, the GIL, a queue, I/O). Prints, per
``--bucket`` of wall time, the mean number of runnable threads and the share of samples
with at most one (one core of two idle, unless another process takes it), then each
thread's runnable share. Allocator housekeeping threads (``jemalloc_bg_thd``) are left out.

With two cores, a stretch with two or more runnable threads keeps both busy; a stretch with
one is serial (start-up, the end). The sampler is itself a process on the same cores, so
the command runs a little slower than alone; the shape is what to read, not the seconds.

    python experiments/thread_states.py -- python -m oop.cli replay --input DATA --time ts \\
        --key key --agg count --agg sum:v --punctuation bounded:5s --out OUT/ --threads 2 \\
        --window sliding:10s,1s --quiet
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from typing import Iterator


def thread_states(pid: int) -> Iterator[tuple[str, str]]:
    """``(thread name:tid, state letter)`` of every thread of ``pid`` alive now."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name.startswith("jemalloc"):
            continue
        yield f"{name}:{tid}", stat[stat.rindex(")") + 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=0.0005, help="seconds between samples")
    ap.add_argument("--bucket", type=float, default=0.1, help="seconds per printed row")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command to sample after --")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    series: list[tuple[float, int]] = []
    runnable: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    while proc.poll() is None:
        states = dict(thread_states(proc.pid))
        running = [name for name, st in states.items() if st == "R"]
        runnable.update({name: 0 for name in states})  # a thread never runnable is listed too
        runnable.update(running)
        series.append((time.perf_counter() - t0, len(running)))
        time.sleep(args.every)
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(f"the command exited with {proc.returncode}", file=sys.stderr)
        return 1
    buckets: dict[int, list[int]] = collections.defaultdict(list)
    for t, n in series:
        buckets[int(t / args.bucket)].append(n)
    print(f"{len(series)} samples over {wall:.2f} s")
    print("    t  runnable  share<=1")
    for k in sorted(buckets):
        ns = buckets[k]
        print(f"{k * args.bucket:5.1f}  {sum(ns) / len(ns):8.2f}  {sum(n <= 1 for n in ns) / len(ns):8.2f}")
    print("share of samples each thread was runnable:")
    for name, n in sorted(runnable.items()):
        print(f"  {name:24s} {n / len(series):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
