"""The engine on Spark vs Spark Structured Streaming vs Spark SQL batch.

Workload: a NetFlow-like packet feed (``oop.datasets``: ``--groups`` srcIP
groups, band disorder ``--delay-ms``) written as ``--files`` Parquet files in
arrival order. Queries, per srcIP: tumbling 1 s ``count`` + ``sum(len)``, and
sliding 10 s / 1 s ``count`` + ``sum(len)``. Systems, all on ``local[2]``:

* ``sharded``    -- oop sharded over Spark tasks, file path (``oop.spark.files``):
  each Spark task reads its Parquet files with pyarrow, replays each file in
  arrival order into the local window aggregation; only the partial windows
  go through Spark (shuffled by key and merged, local-then-global);
* ``sharded_drv`` -- the file path with the partials merged on the driver
  (no shuffle of partials: ``global_on="driver"``);
* ``sharded_df`` -- the same plan over the Spark DataFrame (mapInArrow path:
  Spark reads the files and hands every row to Python);
* ``driver``     -- oop on the driver fed by ``oop.spark.replay``;
* ``structured`` -- Structured Streaming, ``withWatermark`` at the same delay,
  append mode, one file per trigger;
* ``sql``        -- Spark SQL batch ``groupBy(window(...))`` (the ground truth).

Wall time from query start; the JVM start is reported separately, and the
sharded engine gets one unmeasured warm-up over the first file (Python
workers + compiled kernels). Each measurement is the best of ``--repeat``.
Every system's result is compared with the ground truth (accuracy column).

Usage::

    python experiments/bench_spark.py                  # 10M rows (the size the targets are set at)
    python experiments/bench_spark.py --rows 500000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--delay-ms", type=int, default=50)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--rate", type=float, default=100_000.0,
                    help="event-time rate, rows per second (10M rows = 100 s of data)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--systems", default="sharded,sharded_drv,sharded_df,structured,sql,driver",
                    help="comma-separated subset of sharded,sharded_drv,sharded_df,driver,"
                         "structured,sql")
    ap.add_argument("--queries", default="tumbling,sliding")
    args = ap.parse_args()

    t0 = time.perf_counter()
    from oop.spark.bench import run_systems, write_dataset
    from oop.spark.session import get_spark
    from oop.window import Sliding, Tumbling, agg

    spark = get_spark(args.master, app_name="bench_spark",
                      conf={"spark.sql.shuffle.partitions": str(max(2, args.shards))})
    jvm_s = time.perf_counter() - t0
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    try:
        t0 = time.perf_counter()
        write_dataset(work / "in", rows=args.rows, files=args.files, delay_ms=args.delay_ms,
                      groups=args.groups, rate=args.rate)
        gen_s = time.perf_counter() - t0
        print(f"# {args.rows} rows, {args.files} files, {args.groups} groups, band delay "
              f"{args.delay_ms} ms, master {args.master}; JVM start {jvm_s:.1f}s, "
              f"data written in {gen_s:.1f}s (not counted); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print("# wall time from query start (JVM up); path: files = Parquet fragments read by "
              "pyarrow inside Spark tasks, mapInArrow = Spark reads, rows cross JVM -> Python")
        queries = {"tumbling": Tumbling("1s"), "sliding": Sliding("10s", "1s")}
        systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
        header = f"{'query':9} {'system':10} {'path':10} {'best_s':>8} {'M rows/s':>9} " \
                 f"{'windows':>8} {'accuracy':>8}  all_s"
        print(header)
        for qname in args.queries.split(","):
            kind = queries[qname.strip()]
            runs: dict[str, list[dict]] = {}
            for rep in range(args.repeat):
                for r in run_systems(spark, work / "in", kind=kind,
                                     aggs=[agg.count(), agg.sum("len")], by=("srcIP",),
                                     delay=f"{args.delay_ms}ms", shards=args.shards,
                                     systems=systems, warmup=rep == 0):
                    runs.setdefault(r["system"], []).append(r)
            for s in systems:
                rs = runs[s]
                best = min(rs, key=lambda r: r["wall_s"])
                print(f"{qname:9} {s:10} {best['path'] or '-':10} {best['wall_s']:8.2f} "
                      f"{best['rows_per_s'] / 1e6:9.3f} "
                      f"{best['windows']:8d} {best['accuracy']:8.4f}  "
                      f"{[r['wall_s'] for r in rs]}")
            for sys_ in ("sharded", "sharded_drv"):
                if sys_ in runs and "structured" in runs:
                    a = min(r["wall_s"] for r in runs[sys_])
                    b = min(r["wall_s"] for r in runs["structured"])
                    print(f"{qname:9} {sys_} engine vs Structured Streaming: {b / a:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
