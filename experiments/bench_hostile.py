"""Hostile feeds: memory of window state under a poison pill and under never-repeating keys.

Cases (each in its own child process, so ``ru_maxrss`` is that case's peak RSS):

* ``pill-1y`` / ``pill-100y`` -- 5,000 rows over ~80 min, 20 keys, one row
  stamped 1 year / 100 years after its neighbour (a bad clock); tumbling 10 s
  WID count/sum/max, punctuation ``BoundedDelay("1s")``. Before the sparse-span
  rule the dense ring spanned every window up to the pill (x keys): ~8.6 GB
  for 1 year, a MemoryError for 100 years.
* ``pill-1y-paned`` -- the same under sliding 10 s / 1 s Paned-WID (count, sum).
* ``bounded-365d`` -- the 1-year pill with ``BoundedDelay("365d")`` punctuation.
* ``sessions`` -- ``--keys`` rows, 200 per second, each with a string key never
  seen again (session ids), tumbling 1 s count/sum; a punctuation 1 s behind
  every 2,000 rows. Before key compaction the key dictionary held every key.

Each child sets ``RLIMIT_AS`` to ``--as-gib`` (default 8) so a run that would
allocate a huge ring fails with MemoryError instead of taking the machine (the
default state limit of :mod:`oop.limits` is half of it). Columns: rows out,
the window operator's ``peak_state_items`` / ``peak_state_bytes`` (operator
metrics) and the child's peak RSS and wall time.

Usage::

    python experiments/bench_hostile.py                # all cases, 1M session keys
    python experiments/bench_hostile.py --keys 200000
    PYTHONPATH=/path/to/other/checkout python experiments/bench_hostile.py  # compare
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CASES = ["pill-1y", "pill-100y", "pill-1y-paned", "bounded-365d", "sessions"]
YEAR_MS = 365 * 86_400_000


def run_case(case: str, keys: int) -> dict:
    import numpy as np
    import pyarrow as pa

    import oop
    from oop.stream.elements import Punctuation
    from oop.window import Sliding, Tumbling, agg

    t0 = time.perf_counter()
    if case == "sessions":
        n = keys
        t = pa.table({"ts": np.arange(n, dtype=np.int64) * 5,
                      "key": pa.array([f"session-{i:010d}" for i in range(n)]),
                      "val": np.random.default_rng(0).random(n)})
        items: list = []
        for b in t.to_batches(max_chunksize=2000):
            items.append(b)
            items.append(Punctuation("ts", int(b.column("ts")[-1].as_py()) - 1000))
        t0 = time.perf_counter()
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        kind, aggs, method = Tumbling("1s"), [agg.count(), agg.sum("val")], "wid"
    else:
        n = 5000
        rng = np.random.default_rng(1)
        ts = np.sort(rng.integers(0, 5_000_000, n)).astype(np.int64)
        ts[n // 2] = ts[n // 2 - 1] + (100 if case == "pill-100y" else 1) * YEAR_MS
        t = pa.table({"ts": ts, "key": rng.integers(0, 20, n), "val": rng.random(n)})
        delay = "365d" if case == "bounded-365d" else "1s"
        s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(delay))
        if case == "pill-1y-paned":
            kind, aggs, method = Sliding("10s", "1s"), [agg.count(), agg.sum("val")], "paned"
        else:
            kind, aggs, method = Tumbling("10s"), [agg.count(), agg.sum("val"), agg.max("val")], "wid"
    out = {"case": case}
    try:
        res = s.window(kind, aggs, by=["key"], method=method).run()
        m = res.metrics["window"]
        out.update(rows=res.table.num_rows, peak_items=m.peak_state_items,
                   peak_bytes=m.peak_state_bytes, error="")
    except MemoryError as e:  # StateLimitError is one too
        out.update(rows=-1, peak_items=-1, peak_bytes=-1, error=f"{type(e).__name__}: {e}"[:100])
    out["wall_s"] = time.perf_counter() - t0
    out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000, help="session keys (rows)")
    ap.add_argument("--as-gib", type=float, default=8.0, help="RLIMIT_AS of each case (GiB)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--case", help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.case:
        lim = int(args.as_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        print(json.dumps(run_case(args.case, args.keys)))
        return
    print(f"{'case':>14s} {'rows out':>9s} {'peak items':>11s} {'peak state MiB':>15s} "
          f"{'peak RSS MiB':>13s} {'wall s':>7s}  error")
    for case in args.cases.split(","):
        p = subprocess.run([sys.executable, __file__, "--case", case, "--keys", str(args.keys),
                            "--as-gib", str(args.as_gib)], capture_output=True, text=True,
                           env=os.environ)
        line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            err = (p.stderr.strip().splitlines() or ["?"])[-1][:100]
            print(f"{case:>14s} {'-':>9s} {'-':>11s} {'-':>15s} {'-':>13s} {'-':>7s}  "
                  f"exit {p.returncode}: {err}")
            continue
        mib = r["peak_bytes"] / 2**20 if r["peak_bytes"] >= 0 else -1
        print(f"{case:>14s} {r['rows']:>9d} {r['peak_items']:>11d} {mib:>15.1f} "
              f"{r['maxrss_mib']:>13.0f} {r['wall_s']:>7.2f}  {r['error']}")


if __name__ == "__main__":
    main()
