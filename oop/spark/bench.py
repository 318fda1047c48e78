"""Shared by ``experiments/bench_spark.py`` and the ``spark-vs-structured-streaming`` experiment.

:func:`write_dataset` streams a NetFlow-like packet feed (:mod:`oop.datasets`,
band disorder) to a folder of Parquet files in *arrival* order (column
``arr`` = arrival position), one file per future micro-batch, with increasing
modification times. :func:`run_systems` answers one window query over that
folder with

* ``sharded`` -- the engine sharded over Spark tasks, **file path**
  (:mod:`oop.spark.files`): each Spark task reads its range of the Parquet
  files with pyarrow, in arrival order (written in arrival order, the range
  is one shard: ``shard_per="task"``), and aggregates it locally;
  only the partials are shuffled by Spark and merged (local-then-global,
  :func:`oop.spark.plans.sharded_window` given the paths);
* ``sharded_drv`` -- the same file path, but the partials are melded and
  merged on the driver (``global_on="driver"``: no shuffle, one Spark stage
  and one Python stage less -- ~1 s of fixed cost on local[2]);
* ``sharded_df`` -- the same plan over the Spark DataFrame (``mapInArrow``
  path: Spark reads the files, every Spark file partition is a source shard,
  sorted by ``arr`` within the partition, rows cross JVM -> Python);
* the engine reads only the columns the query needs (as Spark SQL does);
* ``driver`` -- the engine on the driver fed by :func:`oop.spark.replay`;
* ``structured`` -- Spark Structured Streaming, same watermark delay, append
  mode (:func:`oop.spark.structured.structured_windows`);
* ``sql`` -- Spark SQL batch ``groupBy(window(...))``, also the ground truth;

timing each from query start (the JVM is already up) and comparing each
result with the ground truth window by window.
"""

from __future__ import annotations

import math
import os
import time as _time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from oop.spark.verify import compare_windows, spark_windows

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["write_dataset", "run_systems", "SYSTEMS"]

SYSTEMS = ("sharded", "sharded_drv", "sharded_df", "driver", "structured", "sql")


def write_dataset(folder: str | Path, *, rows: int, files: int, delay_ms: int, groups: int = 1000,
                  rate: float = 100_000.0, seed: int = 0) -> Path:
    """Write ``rows`` band-disordered packets as ``files`` Parquet files in arrival order."""
    from oop.datasets import Band, Disordered, Packets

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    per_file = max(1, math.ceil(rows / max(1, files)))
    ds = Disordered(Packets(n=rows, rate=rate, groups=groups, seed=seed), Band(delay=delay_ms),
                    seed=seed)
    base = _time.time() - 4 * (files + 4)
    pending: list[pa.RecordBatch] = []
    n_pending, pos, k = 0, 0, 0

    def flush(tbl: pa.Table) -> None:
        nonlocal k, pos
        arr = pa.array(range(pos, pos + tbl.num_rows), pa.int64())
        p = folder / f"part-{k:06d}.parquet"
        pq.write_table(tbl.append_column("arr", arr), p)
        os.utime(p, (base + 2 * k, base + 2 * k))
        k += 1
        pos += tbl.num_rows

    for b in ds.batches(65_536):
        pending.append(b)
        n_pending += b.num_rows
        while n_pending >= per_file:
            t = pa.Table.from_batches(pending)
            flush(t.slice(0, per_file))
            rest = t.slice(per_file)
            pending = rest.to_batches() if rest.num_rows else []
            n_pending -= per_file
    if n_pending:
        flush(pa.Table.from_batches(pending))
    return folder


def run_systems(
    spark: "SparkSession",
    folder: str | Path,
    *,
    kind: Any,
    aggs: Sequence[Any],
    by: Sequence[str],
    delay: str,
    shards: int,
    time: str = "ts",
    unit: str = "ms",
    systems: Sequence[str] = SYSTEMS,
    batch_size: int = 65_536,
    warmup: bool = True,
) -> list[dict[str, Any]]:
    """Run each system once; one result row per system (wall time, rows/s, accuracy).

    ``warmup`` first runs the sharded engine once, unmeasured, over the first
    files: it starts Spark's Python workers and loads the compiled kernels,
    a one-off cost per Spark application (reported by the callers as part of
    the start-up, like the JVM).
    """
    import oop
    from oop.spark.plans import sharded_window
    from oop.spark.replay import replay
    from oop.spark.structured import structured_windows

    folder = str(folder)
    files = sorted(str(p) for p in Path(folder).glob("part-*.parquet"))
    df = spark.read.parquet(*files)
    n = df.count()
    values = [a.name for a in aggs]
    t0 = _time.perf_counter()
    truth = spark_windows(df, time=time, unit=unit, kind=kind, aggs=aggs, by=by).toArrow()
    sql_s = _time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    if warmup:
        # two files -> two tasks: both of Spark's Python workers load the kernels
        inputs = ([files[:2]] if {"sharded", "sharded_drv"} & set(systems) else []) + (
            [spark.read.parquet(files[0])] if "sharded_df" in systems else [])
        for inp in inputs:
            sharded_window(inp, time=time, unit=unit, kind=kind,
                           aggs=aggs, by=by, shards=shards, punctuation=oop.BoundedDelay(delay),
                           arrival="arr", batch_size=batch_size, spread_input=False)

    def record(system: str, table: pa.Table, wall: float, late: int, path: str = "") -> None:
        rep = compare_windows(table, truth, by=by, values=values, late=late)
        rows.append({"system": system, "path": path, "rows": n, "wall_s": round(wall, 3),
                     "rows_per_s": round(n / wall, 1) if wall > 0 else None,
                     **rep.as_dict(), "accuracy": round(rep.accuracy, 6)})

    for system in systems:
        if system == "sql":
            record("sql", truth, sql_s, 0)
        elif system in ("sharded", "sharded_drv", "sharded_df"):
            t0 = _time.perf_counter()
            # sharded: each file is a source shard read by its own Spark task (file path);
            # sharded_df: each Spark file partition is a source shard (mapInArrow path);
            # both replay their shard in arrival order
            # (the files are written in arrival order: a task's consecutive files are one
            # shard, shard_per="task")
            extra: dict[str, Any] = {} if system == "sharded_df" else {"shard_per": "task"}
            if system == "sharded_drv":
                extra["global_on"] = "driver"
            res = sharded_window(df if system == "sharded_df" else files, time=time, unit=unit,
                                 kind=kind, aggs=aggs, by=by, shards=shards,
                                 punctuation=oop.BoundedDelay(delay), arrival="arr",
                                 batch_size=batch_size, spread_input=False, **extra)
            record(system, res.table, _time.perf_counter() - t0, res.late_total, res.path)
        elif system == "driver":
            t0 = _time.perf_counter()
            needed = list(dict.fromkeys([time, *by, *(a.column for a in aggs if a.column),
                                         "arr"]))
            r = replay(df.select(*needed), time=time, unit=unit, arrival="arr",
                       punctuation=oop.BoundedDelay(delay), batch_size=batch_size,
                       plan=lambda s: s.window(kind, list(aggs), by=tuple(by)))
            record("driver", r.table, _time.perf_counter() - t0, r.late_total)
        elif system == "structured":
            out, wall = structured_windows(spark, folder, time=time, unit=unit, kind=kind,
                                           aggs=aggs, by=by, delay=delay)
            record("structured", out, wall, 0)
        else:
            raise ValueError(f"unknown system {system!r}; use {SYSTEMS}")
    return rows
