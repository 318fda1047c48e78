"""CPU time of the sliding 10 s / 1 s Paned-WID count + sum(v) operator alone, per phase.

bench_window's workload (``make_workload``: Zipf keys, 5 s band disorder, 64K-row
batches, a punctuation after each), the operator driven directly with
``on_batch`` / ``on_punctuation`` (as ``bench_window.drive``, without its
checksums and state sampling), timed in process CPU time (``time.process_time``:
steadier than wall time on a shared machine) and wall time, every run a new
operator, ``--repeat`` runs after a warm-up. Prints JSON: per run, CPU of the
batches and of the punctuations, wall of both, output rows. To compare two
checkouts (the ``oop`` of each, this file's workload), run it for each in turn,
interleaved, several times::

    PYTHONPATH=<checkout> python experiments/bench_paned_cpu.py --rows 4000000
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import pyarrow as pa

from bench_window import make_workload
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.window import Sliding, agg, window_operator


def run(schema: pa.Schema, batches: list[pa.RecordBatch], puncts: list[int]) -> dict[str, Any]:
    """One replay by a new operator: CPU / wall seconds of its batch and punctuation calls."""
    op = window_operator(Sliding("10s", "1s"), [agg.count(), agg.sum("v")], by="key",
                         method="paned")
    op.open([StreamInfo("bench", schema, {"ts": "ms"}, "ts")])
    cpu = {"batch": 0.0, "punct": 0.0}
    wall = 0.0
    rows = 0
    last = None
    for b, p in zip(batches, puncts):
        c0, w0 = time.process_time(), time.perf_counter()
        op.on_batch(b)
        cpu["batch"] += time.process_time() - c0
        wall += time.perf_counter() - w0
        if last is None or p > last:
            last = p
            c0, w0 = time.process_time(), time.perf_counter()
            out = op.on_punctuation(Punctuation("ts", p))
            cpu["punct"] += time.process_time() - c0
            wall += time.perf_counter() - w0
            rows += sum(o.num_rows for o in out if isinstance(o, pa.RecordBatch))
    c0, w0 = time.process_time(), time.perf_counter()
    out = op.flush()
    cpu["punct"] += time.process_time() - c0
    wall += time.perf_counter() - w0
    rows += sum(o.num_rows for o in out if isinstance(o, pa.RecordBatch))
    return {"cpu_batch": cpu["batch"], "cpu_punct": cpu["punct"], "wall": wall, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    table, batches, puncts = make_workload(args.rows)
    run(table.schema, batches, puncts)  # warm-up: numba caches, allocations
    runs = [run(table.schema, batches, puncts) for _ in range(args.repeat)]
    cpu = sorted(r["cpu_batch"] + r["cpu_punct"] for r in runs)
    print(json.dumps({"rows": args.rows, "cpu_min_s": cpu[0], "cpu_median_s": cpu[len(cpu) // 2],
                      "mtps_cpu_best": args.rows / cpu[0] / 1e6, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
