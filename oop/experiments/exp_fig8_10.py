"""fig8-10: tumbling-window join memory vs the delay of late input on one side.

Reproduces the shape of 004 Fig. 8-10 (§8.4.2, Q8-4): ``M1 JOIN (M2 UNION C)``
on the flow id (``srcIP``), tumbling window W, where M1 and M2 are ordered,
synchronised, high-volume links and C is a near-empty link (< 1 tuple/s)
whose tuples arrive ``delay`` late (its heartbeat follows its own, delayed
clock). The union's progress therefore lags by ``delay``.

* IOP: ``Merge(M2, C)`` must hold M2's tuples for ``delay`` (C might still
  send something older), and the in-order join (OPIB) then holds M1's tuples
  until the merged input has passed their window: both inputs buffered.
* OOP: ``Meld(M2, C)`` forwards M2 at once; OA-Join still keeps M1's tuples
  (the union's punctuation lags), but purges M2's tuples by M1's punctuation,
  which is on time.

Expected shape (004: "with the increase in the delay of the late tuples ...
the memory use for OOP increases more slowly than for IOP ... The memory
advantage of OOP comes from the Join operator in OOP purging M2 tuples
sooner than in IOP"): OOP's memory grows more slowly with the delay than
IOP's, and OOP uses no more memory (items) than IOP at every delay.
"""

from __future__ import annotations

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import panel_plot, pick, rank_trend
from oop.experiments.exp_fig8_9 import join_row, trace_both

__all__ = ["EXPERIMENT"]


def _slope(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    den = sum((a - mx) ** 2 for a in x)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / den if den else 0.0


def run(ctx: RunContext) -> Outcome:
    from oop.datasets import Link, MultiSource

    rate = pick(ctx, tiny=300, quick=1000, full=2000)
    window = pick(ctx, tiny=1000, quick=1000, full=10_000)
    duration = pick(ctx, tiny=8000, quick=24_000, full=90_000)
    groups = pick(ctx, tiny=500, quick=2000, full=8000)
    delays = pick(ctx, tiny=[0, 1000, 3000], quick=[0, 2000, 4000, 6000, 8000, 10_000],
                  full=[0, 2000, 4000, 6000, 8000, 10_000])
    rows = []
    for d in ctx.progress(delays, desc="fig8-10 delay"):
        links = (Link("M1", rate, groups=groups), Link("M2", rate, groups=groups),
                 Link("C", 0.5, skew=d, groups=groups, heartbeat=True))
        ms = MultiSource(links, duration=duration, tick=100, seed=ctx.seed)
        tr = trace_both(ms, lambda s: (s[:1], s[1:]), window)
        join = {k: int(t.result.metrics["join"].peak_state_items) for k, t in tr.items()}
        rows.append({"delay_s": d / 1000,
                     **join_row(tr, oop_join_items=join["oop"], iop_join_items=join["iop"])})
    x = [r["delay_s"] for r in rows]
    col = lambda k: [r[k] for r in rows]
    so, si = _slope(x, col("oop_peak_items")), _slope(x, col("iop_peak_items"))
    checks = [
        Check("OOP and IOP produce the same number of results",
              col("oop_results") == col("iop_results"),
              {"oop": col("oop_results"), "iop": col("iop_results")}, "equal"),
        Check("IOP's memory grows with the delay of the late input",
              rank_trend(x, col("iop_peak_items")) > 0.8, rank_trend(x, col("iop_peak_items")),
              "rank trend > 0.8"),
        Check("OOP's memory grows more slowly with the delay than IOP's",
              so < si, {"oop_items_per_s": round(so, 1), "iop_items_per_s": round(si, 1)},
              "slope(oop) < slope(iop)"),
        Check("OOP uses no more memory (items) than IOP at every delay",
              all(a <= b for a, b in zip(col("oop_peak_items"), col("iop_peak_items"))),
              {"oop": col("oop_peak_items"), "iop": col("iop_peak_items")}, "oop <= iop"),
        Check("OOP's memory in bytes also grows more slowly than IOP's",
              _slope(x, col("oop_peak_bytes")) < _slope(x, col("iop_peak_bytes")),
              {"oop_bytes_per_s": round(_slope(x, col("oop_peak_bytes"))),
               "iop_bytes_per_s": round(_slope(x, col("iop_peak_bytes")))},
              "slope(oop bytes) < slope(iop bytes) (OOP's hash index costs bytes per tuple)"),
    ]
    plot = panel_plot(ctx, "fig8-10.png", x, [
        ("peak state (items)", {"OOP (Meld + OA-Join)": col("oop_peak_items"),
                                "IOP (Merge + in-order join)": col("iop_peak_items")}),
        ("peak state (MiB)", {"OOP": [b / 2**20 for b in col("oop_peak_bytes")],
                              "IOP": [b / 2**20 for b in col("iop_peak_bytes")]}),
    ], xlabel="delay of the late link C (s)", title="fig8-10: tumbling join with late input, memory")
    return Outcome(params={"rate_per_link": rate, "late_link_rate": 0.5, "window_ms": window,
                           "duration_ms": duration, "groups": groups, "delays_ms": delays},
                   rows=rows, checks=checks, plots=[plot])


EXPERIMENT = Experiment(
    name="fig8-10",
    reproduces="004 Fig. 8-10",
    summary="tumbling-window join with a late input link: OOP purges the on-time side sooner",
    run=run,
)
