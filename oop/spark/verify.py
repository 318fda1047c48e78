"""Spark ground truth for window queries, and the window-by-window comparison (DESIGN §7).

:func:`spark_windows` runs the same logical query as the engine as a Spark
SQL *batch* job: ``groupBy(window(ts, range, slide, origin), *by).agg(...)``
over all rows (integer event times are turned into timestamps in the unit;
nanosecond units use the equivalent integer arithmetic). Window bounds come
back as ``window_start``/``window_end`` in the stream's unit, so they compare
1:1 with the engine's output (DESIGN §3).

:func:`compare_windows` matches two window tables on ``(*by, window_start,
window_end)`` and reports

* ``windows`` -- windows in the ground truth;
* ``matched`` / ``mismatched`` -- present in both, all aggregate values
  equal (floats to ``rtol``) / not;
* ``missing`` -- in the truth, not in the engine's output; ``extra`` -- the
  reverse;
* ``late`` -- tuples the engine counted as late (passed in);
* ``accuracy`` -- ``matched / windows`` (how much of the truth an IOP plan
  that dropped data still got right).

Cost: one Spark aggregation; the comparison runs on the driver over the
window tables (one row per window and key, not per tuple).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.stream.timecol import UNIT_NS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["VerifyReport", "spark_windows", "compare_windows", "last_revisions", "spark_agg",
           "window_params"]

WINDOW_COLS = ("window_start", "window_end")


@dataclass
class VerifyReport:
    """Window-by-window comparison of an engine result with the ground truth."""

    windows: int
    matched: int
    mismatched: int
    missing: int
    extra: int
    late: int = 0

    @property
    def ok(self) -> bool:
        return self.mismatched == 0 and self.missing == 0 and self.extra == 0

    @property
    def accuracy(self) -> float:
        return self.matched / self.windows if self.windows else 1.0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def json(self) -> str:
        """The one-line JSON of ``oop replay --verify``."""
        return json.dumps(self.as_dict())


def window_params(kind: Any, unit: str) -> tuple[int, int, int]:
    """``(range, slide, origin)`` in ``unit`` of a Tumbling/Sliding kind (resolved here)."""
    if hasattr(kind, "resolve"):
        kind = kind.resolve(unit)
    rng = getattr(kind, "r", None)
    if rng is None or type(kind).__name__ not in ("Tumbling", "Sliding"):
        raise ConfigError(
            f"Spark ground truth covers time windows (Tumbling, Sliding); got {kind!r}"
        )
    # the user's origin: window starts are origin + k*slide (Spark's startTime), also when
    # range is not a multiple of slide (kind.o, the origin of the grid of window ends, then
    # differs by range mod slide -- docs/semantics.md)
    return int(kind.r), int(kind.s), int(getattr(kind, "origin", 0) or 0)


def spark_agg(a: Any) -> Any:
    """The Spark SQL aggregate column for an engine aggregate (named like the engine's)."""
    from pyspark.sql import functions as F

    # the registry's Spark SQL form (ConfigError for kinds without Spark ground truth)
    return F.expr(a.spec.spark_sql(a.column, a)).alias(a.name)


def spark_windows(
    df: "DataFrame",
    *,
    time: str,
    unit: str,
    kind: Any,
    aggs: Sequence[Any],
    by: Sequence[str] = (),
) -> "DataFrame":
    """Spark SQL batch ``groupBy(window(...), *by).agg(...)``; bounds as ints in ``unit``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rng, slide, origin = window_params(kind, unit)
    is_ts = isinstance(df.schema[time].dataType, (T.TimestampType, T.TimestampNTZType))
    if is_ts:
        unit = "us"
    aggs_c = [spark_agg(a) for a in aggs]
    if unit != "ns":
        f = UNIT_NS[unit] // 1000  # microseconds per unit
        ts = F.col(time) if is_ts else F.timestamp_micros(F.col(time) * F.lit(f))
        start = f"{(origin % slide) * f} microseconds"
        w = F.window(ts, f"{rng * f} microseconds", f"{slide * f} microseconds", start)
        out = df.groupBy(w.alias("__w"), *by).agg(*aggs_c)
        ws = (F.unix_micros(F.col("__w.start")) / F.lit(f)).cast("long")
        we = (F.unix_micros(F.col("__w.end")) / F.lit(f)).cast("long")
        if is_ts:
            ws, we = F.col("__w.start"), F.col("__w.end")
        return out.select(*by, ws.alias("window_start"), we.alias("window_end"),
                          *[a.name for a in aggs])
    # nanoseconds: Spark timestamps are microseconds; the same windows by integer arithmetic:
    # starts origin + k*slide with start <= t < start + range
    t = F.col(time).cast("long")
    lo = F.floor((t - F.lit(origin) - F.lit(rng)) / F.lit(slide)) + 1
    hi = F.floor((t - F.lit(origin)) / F.lit(slide))
    k = F.explode(F.sequence(lo, hi))
    started = df.withColumn("__k", k)
    out = started.groupBy("__k", *by).agg(*aggs_c)
    ws = F.lit(origin) + F.col("__k") * F.lit(slide)
    return out.select(*by, ws.alias("window_start"), (ws + F.lit(rng)).alias("window_end"),
                      *[a.name for a in aggs])


def _as_int(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    return np.asarray(col.to_numpy(zero_copy_only=False))


def last_revisions(table: pa.Table, by: Sequence[str] = ()) -> pa.Table:
    """The last row of every window ``(*by, window_start, window_end)`` in emission order.

    Under ``late="update"`` a window is emitted, then re-emitted revised
    (``is_revision``); its last row is its final value, the one to verify.
    """
    keys = [*by, *WINDOW_COLS]
    if table.num_rows == 0:
        return table
    idx = table.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    last = idx.group_by(keys, use_threads=False).aggregate([("__row", "max")])
    return table.take(pa.array(np.sort(last.column("__row_max").to_numpy())))


def _same(x: Any, y: Any) -> bool:
    """Equality with NaN equal to NaN (values that are not plain floats)."""
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return True
    try:
        return bool(x == y)
    except (TypeError, ValueError):  # arrays (lists of heavy hitters)
        return bool(np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object)))


def compare_windows(
    engine: pa.Table,
    truth: pa.Table,
    *,
    by: Sequence[str] = (),
    values: Sequence[str],
    late: int = 0,
    rtol: float = 1e-9,
) -> VerifyReport:
    """Match ``engine`` and ``truth`` windows on ``(*by, window_start, window_end)``."""
    import pandas as pd

    keys = [*by, *WINDOW_COLS]
    for name, t in (("engine result", engine), ("ground truth", truth)):
        missing = [c for c in [*keys, *values] if c not in t.column_names]
        if missing:
            raise ConfigError(f"{name} has no column(s) {missing}; its columns are {t.column_names}")

    def frame(t: pa.Table) -> "pd.DataFrame":
        d = {k: (_as_int(t.column(k)) if k in WINDOW_COLS else t.column(k).to_pandas())
             for k in keys}
        for v in values:
            d[v] = t.column(v).to_pandas()
            # pandas turns nulls into NaN: keep them apart (a null is not a NaN value)
            d[f"{v}\0null"] = np.asarray(t.column(v).is_null().to_numpy(zero_copy_only=False),
                                          dtype=bool)
        return pd.DataFrame(d)

    e, g = frame(engine), frame(truth)
    if e.duplicated(keys).any():
        dup = int(e.duplicated(keys).sum())
        raise ConfigError(f"engine result has {dup} duplicate window row(s) for the same key")
    m = g.merge(e, on=keys, how="outer", suffixes=("_truth", "_engine"), indicator=True)
    both = m[m["_merge"] == "both"]
    ok = np.ones(len(both), dtype=bool)
    for v in values:
        a = both[f"{v}_truth"].to_numpy()
        b = both[f"{v}_engine"].to_numpy()
        na = both[f"{v}\0null_truth"].to_numpy(dtype=bool)
        nb = both[f"{v}\0null_engine"].to_numpy(dtype=bool)
        try:
            af, bf = a.astype(np.float64), b.astype(np.float64)
            # NaN == NaN (the NaN rule, docs/semantics.md); +-inf equal only to themselves
            with np.errstate(invalid="ignore"):
                eq = np.isclose(af, bf, rtol=rtol, atol=1e-12) | (np.isnan(af) & np.isnan(bf))
        except (TypeError, ValueError):
            eq = np.array([_same(x, y) for x, y in zip(a, b)], dtype=bool)
        ok &= np.where(na | nb, na & nb, eq)
    matched = int(ok.sum())
    return VerifyReport(
        windows=len(g),
        matched=matched,
        mismatched=int(len(both) - matched),
        missing=int((m["_merge"] == "left_only").sum()),
        extra=int((m["_merge"] == "right_only").sum()),
        late=int(late),
    )
