"""fig7-6: OA-Join vs OPOB-Join -- memory, latency and execution time vs band size.

Reproduces the shape of 004 Fig. 7-6 (§7.3, Experiment 1, Q7-2): a sliding-
window (band) join of two ordered, synchronised packet streams M1 and M2 on
the flow id (``srcIP``; the thesis joins the two directions of a NetFlow),
band ``M1.ts - n <= M2.ts <= M1.ts + n``, for band sizes n.

* OOP: ``OA-Join`` -- results leave as soon as the second tuple of a pair
  arrives; state = about one band of each input.
* IOP: ``OPOB-Join`` -- the same hash probes, but results are held in an
  output buffer and released in M1.ts order once ``M1.ts < min(f1, f2 - n)``;
  state = one band of each input **plus** the buffered results.

Measured in the same run on the same data: peak state (deterministic
accounting, items = tuples + buffered results, and bytes), median logical
latency of a result (data clock when it is emitted minus the larger of its two
times, event-time ms), and wall time. Expected shape (004: "OA-Join
significantly outperforms the OPOB-Join implementation on Q7-2, especially on
memory and latency"): OA-Join uses less memory and has lower latency at every
band size; OPOB's memory and latency grow with the band.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import col as common_col, panel_plot, pick, rank_trend, wins_everywhere
from oop.experiments.harness import run_traced

__all__ = ["EXPERIMENT", "make_streams", "measure_join", "sizes", "join_params", "band_sweep",
           "join_panels"]

#: legend of each join plan measured by :func:`measure_join`
JOIN_LABELS = {"oa": "OA-Join", "opib": "OPIB-Join", "opob": "OPOB-Join"}


def make_streams(rate: int, duration_ms: int, groups: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """Two ordered packet streams (M1, M2) over the same event-time span."""
    from oop.datasets.packets import Packets

    n = int(rate * duration_ms / 1000)
    m1 = Packets(n=n, rate=rate, groups=groups, seed=seed * 7 + 1).table()
    m2 = Packets(n=n, rate=rate, groups=groups, seed=seed * 7 + 2).table()
    return m1.select(["srcIP", "len", "ts"]), m2.select(["srcIP", "len", "ts"])


def measure_join(kind: str, m1: pa.Table, m2: pa.Table, band_ms: int, batch: int) -> dict[str, Any]:
    """Run one plan (``oa`` / ``opob`` / ``opib``) and measure memory, latency, time."""
    import oop
    from oop.iop_baseline.opib_join import OPIBJoin
    from oop.iop_baseline.opob_join import OPOBJoin
    from oop.join.spec import JoinConfig, WindowPredicate

    s1 = oop.from_arrow(m1, time="ts", unit="ms", punctuation=oop.Ordered(), batch_size=batch,
                        name="M1")
    s2 = oop.from_arrow(m2, time="ts", unit="ms", punctuation=oop.Ordered(), batch_size=batch,
                        name="M2")
    cfg = JoinConfig(WindowPredicate.band(band_ms, band_ms), (("srcIP", "srcIP"),), name=kind)
    if kind == "oa":
        plan = s1.join(s2, on="srcIP", band=(band_ms, band_ms), name=kind)
    else:
        cls = {"opob": OPOBJoin, "opib": OPIBJoin}[kind]
        plan = s1.via(cls(cfg), s2)
    tr = run_traced(plan)
    t = tr.table
    m = tr.result.metrics[kind]
    if t.num_rows:
        later = np.maximum(t.column("ts").to_numpy(), t.column("ts_right").to_numpy())
        lat = tr.clock_at_row - later
        lat_med = float(np.median(lat))
    else:
        lat_med = 0.0
    digest = int(t.num_rows)
    return {"peak_items": int(m.peak_state_items), "peak_bytes": int(m.peak_state_bytes),
            "latency_ms": lat_med, "wall_s": float(tr.wall_s), "results": digest,
            "ordered": bool(t.num_rows == 0 or bool(np.all(np.diff(t.column("ts").to_numpy()) >= 0)))}


def sizes(ctx: RunContext) -> tuple[int, int, int, list[int]]:
    rate = pick(ctx, tiny=300, quick=1000, full=4000)
    duration = pick(ctx, tiny=8000, quick=30_000, full=60_000)
    groups = pick(ctx, tiny=300, quick=1000, full=4000)
    bands = pick(ctx, tiny=[1000, 3000], quick=[1000, 3000, 5000, 7000, 9000],
                 full=[1000, 3000, 5000, 7000, 9000])
    return rate, duration, groups, bands


def join_params(ctx: RunContext, batch: int) -> dict[str, Any]:
    """``Outcome.params`` of the Q7-2 band-join studies (fig7-6, fig7-7) at this run's size."""
    rate, duration, groups, bands = sizes(ctx)
    return {"rate_per_s": rate, "duration_ms": duration, "groups": groups, "bands_ms": bands,
            "batch_rows": batch}


def band_sweep(ctx: RunContext, kinds: Sequence[str], seed: int,
               desc: str) -> tuple[list[dict[str, Any]], int, int]:
    """:func:`measure_join` of each plan of ``kinds`` at every band of :func:`sizes`, over
    :func:`make_streams` (after one small warm-up run that loads the compiled kernels):
    rows ``{"band_s", f"{kind}_{measure}": ...}``, the tuples per stream and the batch rows
    (250 ms of data per batch, a punctuation after each)."""
    rate, duration, groups, bands = sizes(ctx)
    m1, m2 = make_streams(rate, duration, groups, seed)
    batch = max(1, rate // 4)
    measure_join(kinds[0], m1.slice(0, 500), m2.slice(0, 500), 1000, 100)
    rows = []
    for band in ctx.progress(bands, desc=desc):
        r: dict[str, Any] = {"band_s": band / 1000}
        for kind in kinds:
            m = measure_join(kind, m1, m2, band, batch)
            m["wall_s"] = round(m["wall_s"], 4)
            r.update({f"{kind}_{k}": v for k, v in m.items()})
        rows.append(r)
    return rows, m1.num_rows, batch


def join_panels(ctx: RunContext, filename: str, rows: Sequence[dict[str, Any]],
                kinds: Sequence[str], panels: Sequence[tuple[str, str, float]],
                title: str) -> str:
    """Plot panels against the band: each ``(ylabel, measure, divisor)`` shows
    ``{kind}_{measure} / divisor`` of every plan of ``kinds``."""
    return panel_plot(ctx, filename, common_col(rows, "band_s"), [
        (ylabel, {JOIN_LABELS[k]: [v / div for v in common_col(rows, f"{k}_{measure}")]
                  for k in kinds}) for ylabel, measure, div in panels],
        xlabel="band size n (s)", title=title)


def run(ctx: RunContext) -> Outcome:
    rows, _, batch = band_sweep(ctx, ("oa", "opob"), ctx.seed, "fig7-6 band")
    x = [r["band_s"] for r in rows]
    col = partial(common_col, rows)
    checks = [
        Check("OA-Join and OPOB produce the same number of results; OPOB's are in M1.ts order",
              all(r["oa_results"] == r["opob_results"] and r["opob_ordered"] for r in rows),
              {"results": col("oa_results")}, "equal counts, ordered OPOB output"),
        Check("OA-Join uses less memory than OPOB at every band size",
              wins_everywhere(col("oa_peak_bytes"), col("opob_peak_bytes")),
              {"oa": col("oa_peak_bytes"), "opob": col("opob_peak_bytes")}, "oa < opob everywhere"),
        Check("OA-Join has lower result latency than OPOB at every band size",
              wins_everywhere(col("oa_latency_ms"), col("opob_latency_ms")),
              {"oa": col("oa_latency_ms"), "opob": col("opob_latency_ms")}, "oa < opob everywhere"),
        Check("OPOB's memory and latency grow with the band",
              rank_trend(x, col("opob_peak_bytes")) > 0.8
              and rank_trend(x, col("opob_latency_ms")) > 0.8,
              {"mem_trend": rank_trend(x, col("opob_peak_bytes")),
               "lat_trend": rank_trend(x, col("opob_latency_ms"))}, "rank trend > 0.8"),
        Check("OA-Join takes no more total execution time than OPOB",
              sum(col("oa_wall_s")) <= sum(col("opob_wall_s")),
              {"oa": round(sum(col("oa_wall_s")), 3), "opob": round(sum(col("opob_wall_s")), 3)},
              "sum(oa) <= sum(opob) (wall time on a shared machine)"),
    ]
    plot = join_panels(ctx, "fig7-6.png", rows, ("oa", "opob"), [
        ("peak state (MiB)", "peak_bytes", 2**20),
        ("median latency (event-time ms)", "latency_ms", 1),
        ("execution time (s)", "wall_s", 1)],
        title="fig7-6: OA-Join vs OPOB-Join (Q7-2 band join)")
    return Outcome(params=join_params(ctx, batch), rows=rows, checks=checks, plots=[plot])


EXPERIMENT = Experiment(
    name="fig7-6",
    reproduces="004 Fig. 7-6",
    summary="OA-Join vs order-preserving output-buffered join: memory, latency, time vs band",
    run=run,
)
