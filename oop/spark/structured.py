"""The same window query in Spark Structured Streaming, for comparison (DESIGN §7).

:func:`write_arrival_files` splits a dataset, in arrival order, into ``files``
Parquet files whose modification times increase in that order (Spark's file
source replays files oldest first). :func:`structured_windows` runs
``readStream`` over the folder (``maxFilesPerTrigger=1``: one micro-batch per
file) with ``withWatermark(time, delay)`` -- the same delay as the engine's
``BoundedDelay`` -- and ``groupBy(window(...), *by).agg(...)`` in *append*
mode into a memory sink, trigger ``availableNow``. A final *sentinel* file
(one row far beyond the data, filtered from the result) advances the
watermark so the last windows are emitted too, as a live feed would.

Semantics differ from the engine in one known way: Spark's watermark is
``max event time - delay`` taken at the *end of the previous micro-batch*, so
it is more lenient inside a batch; rows below it are dropped by Spark.
Returns the windows as ``(*by, window_start, window_end, aggs...)`` with
bounds as ints in the stream's unit, and the wall time from ``start()`` to
termination.
"""

from __future__ import annotations

import os
import shutil
import time as _time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oop.errors import ConfigError
from oop.spark.verify import spark_agg, window_params
from oop.stream.timecol import UNIT_NS, parse_duration

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["write_arrival_files", "structured_windows", "SENTINEL_KEY"]

SENTINEL_KEY = -987654321


def write_arrival_files(table: pa.Table, folder: str | Path, *, files: int,
                        arrival: str | None = None) -> list[Path]:
    """Write ``table`` (in ``arrival`` order, else row order) as ``files`` Parquet files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if arrival is not None:
        table = table.sort_by(arrival)
    n = table.num_rows
    files = max(1, min(files, n))
    bounds = np.linspace(0, n, files + 1).astype(int)
    base = _time.time() - 10 * (files + 2)
    out = []
    for i in range(files):
        p = folder / f"part-{i:06d}.parquet"
        pq.write_table(table.slice(bounds[i], bounds[i + 1] - bounds[i]), p)
        os.utime(p, (base + 2 * i, base + 2 * i))  # strictly increasing mtimes (ms resolution)
        out.append(p)
    return out


def structured_windows(
    spark: "SparkSession",
    folder: str | Path,
    *,
    time: str,
    unit: str,
    kind: Any,
    aggs: Sequence[Any],
    by: Sequence[str] = (),
    delay: str | int,
    workdir: str | Path | None = None,
) -> tuple[pa.Table, float]:
    """Run the window query in Structured Streaming over ``folder``; (windows, wall seconds).

    ``folder`` holds the data as Parquet files in arrival order (file-name
    order, increasing modification times: :func:`write_arrival_files`). Two
    sentinel files are added for the run and removed afterwards.
    """
    from pyspark.sql import functions as F

    if unit == "ns":
        raise ConfigError("Structured Streaming comparison needs a time unit of s, ms or us")
    folder = Path(folder)
    files = sorted(p for p in folder.glob("*.parquet") if "sentinel" not in p.name)
    if not files:
        raise ConfigError(f"no Parquet files in {str(folder)!r}")
    rng, slide, origin = window_params(kind, unit)
    d = parse_duration(delay, unit)
    f = UNIT_NS[unit] // 1000  # microseconds per unit
    root = Path(workdir or "/tmp") / f"oop-ss-{uuid.uuid4().hex[:8]}"
    schema_pa = pq.read_schema(files[0])
    tmax = int(spark.read.parquet(*[str(p) for p in files]).agg(F.max(time)).first()[0])
    sentinels = []
    try:
        # sentinel: far beyond every window, advances the watermark past the last one
        sentinel = {c: [None] for c in schema_pa.names}
        sentinel[time] = [tmax + 2 * (rng + slide + d) + 1]
        for b in by:
            sentinel[b] = [SENTINEL_KEY]
        sent = pa.Table.from_pydict(sentinel, schema=schema_pa)
        last_m = os.path.getmtime(files[-1])
        for j in range(2):  # one batch raises the watermark, the next evicts the windows
            p = folder / f"zz-sentinel-{j}.parquet"
            pq.write_table(sent, p)
            os.utime(p, (last_m + 2 * (j + 1), last_m + 2 * (j + 1)))
            sentinels.append(p)
        schema = spark.read.parquet(str(files[0])).schema
        stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                  .parquet(str(folder)))
        et = F.timestamp_micros(F.col(time) * F.lit(f))
        w = F.window(F.col("__et"), f"{rng * f} microseconds", f"{slide * f} microseconds",
                     f"{(origin % slide) * f} microseconds")
        q = (stream.withColumn("__et", et).withWatermark("__et", f"{d * f} microseconds")
             .groupBy(w.alias("__w"), *by).agg(*[spark_agg(a) for a in aggs]))
        name = f"oop_ss_{uuid.uuid4().hex[:8]}"
        t0 = _time.perf_counter()
        query = (q.writeStream.format("memory").queryName(name).outputMode("append")
                 .option("checkpointLocation", str(root / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        wall = _time.perf_counter() - t0
        ws = (F.unix_micros(F.col("__w.start")) / F.lit(f)).cast("long")
        we = (F.unix_micros(F.col("__w.end")) / F.lit(f)).cast("long")
        res = spark.table(name).select(*by, ws.alias("window_start"), we.alias("window_end"),
                                       *[a.name for a in aggs])
        out = res.where(F.col("window_start") <= F.lit(tmax)).toArrow()
        spark.catalog.dropTempView(name)
        return out, wall
    finally:
        for p in sentinels:
            p.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
