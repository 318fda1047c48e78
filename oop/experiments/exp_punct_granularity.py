"""punctuation-granularity (beyond the thesis): how often to punctuate -- latency vs cost.

After 004 §8.1 (granularity control, Tucker's Describe) and 002 (tunable
punctuation interval): punctuation finer than the window slide completes no
extra window but costs work; coarser punctuation delays results and makes
order-based plans buffer longer. A band-disordered packet stream feeds
``count(*) [RANGE 5 s, SLIDE 1 s] GROUP BY srcIP``; the punctuation is
``Granular(BoundedDelay(d), every=g)`` -- the bound rounded down to a grid of
``g`` ms -- for ``g`` from 1 ms to 5 s, with small batches (every batch may
carry a punctuation):

* OOP: WID, emitting and purging on each punctuation;
* IOP: heartbeat ``SortBuffer`` (releases on punctuation) -> buffering window.

Measured: punctuations delivered, wall time, latency (mean data clock at
emission - window end, ms of event time) and peak state bytes.

Expected shape: the number of punctuations falls as ``g`` grows; latency
rises with ``g``; IOP's state grows with ``g`` (the sort buffer holds
tuples until punctuation), more than OOP's (partial aggregates). Both plans
must return the same counts.
"""

from __future__ import annotations

from typing import Any

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import (band_packets, col, count_by_srcip, growth, latency_memory_row,
                                    panel_plot, pick, rank_trend)


def run(ctx: RunContext) -> Outcome:
    import oop
    from oop.punctuation.granularity import Granular
    from oop.window.kinds import Sliding

    rate = pick(ctx, tiny=2000, quick=5000, full=10_000)
    n = pick(ctx, tiny=30_000, quick=300_000, full=1_200_000)
    grains = pick(ctx, tiny=[1, 100, 2000], quick=[1, 10, 100, 500, 1000, 2000, 5000],
                  full=[1, 10, 100, 500, 1000, 2000, 5000])
    batch = pick(ctx, tiny=64, quick=128, full=128)
    disorder = 200
    kind = Sliding(range=5000, slide=1000)
    table, max_ts = band_packets(ctx, n=n, rate=rate, groups=50, delay=disorder)

    def src(g: int) -> Any:
        return oop.from_arrow(table, time="ts", unit="ms", batch_size=batch, name="packets",
                              punctuation=Granular(oop.BoundedDelay(disorder), every=g))

    rows = []
    for g in ctx.progress(grains, desc="granularity"):
        r = count_by_srcip(lambda: src(g), kind)
        rows.append({"grain_ms": g,
                     "punctuations": r.oop.result.metrics["packets"].punctuations_out,
                     "oop_wall_s": round(r.oop.wall_s, 4), "iop_wall_s": round(r.iop.wall_s, 4),
                     **latency_memory_row(r, max_ts)})
    agree = all(col(rows, "same_results"))
    x = col(rows, "grain_ms")
    pc, ol, il = col(rows, "punctuations"), col(rows, "oop_latency_ms"), col(rows, "iop_latency_ms")
    ob, ib = col(rows, "oop_peak_bytes"), col(rows, "iop_peak_bytes")
    plot = panel_plot(ctx, "granularity.png", x, [
        ("punctuations delivered", {"punctuations": pc}),
        ("latency (ms of event time)", {"OOP": ol, "IOP": il}),
        ("peak state (KiB)", {"OOP": [b / 1024 for b in ob], "IOP": [b / 1024 for b in ib]})],
        xlabel="punctuation grid g (ms)", logx=True,
        title="punctuation granularity: cost vs latency vs memory (slide 1000 ms)")
    checks = [
        Check("coarser punctuation means fewer punctuations to process",
              rank_trend(x, pc) < -0.8, {"trend": rank_trend(x, pc), "punctuations": pc},
              "rank trend < -0.8"),
        Check("coarser punctuation delays results", rank_trend(x, ol) > 0.8,
              {"trend": rank_trend(x, ol), "oop_latency_ms": ol}, "rank trend > 0.8"),
        Check("IOP state grows with coarser punctuation, more than OOP's",
              rank_trend(x, ib) > 0.8 and growth(ib) > growth(ob),
              {"iop_trend": rank_trend(x, ib), "iop_growth": growth(ib), "oop_growth": growth(ob)},
              "IOP rank trend > 0.8 and IOP growth > OOP growth"),
        Check("OOP and IOP return the same counts", agree, agree, "identical rows"),
    ]
    params = {"rows": n, "rate_per_s": rate, "band_delay_ms": disorder, "range_ms": 5000,
              "slide_ms": 1000, "grains_ms": grains, "batch_rows": batch,
              "punctuation": f"Granular(BoundedDelay({disorder}), every=g)",
              "aggregate": "count(*) GROUP BY srcIP"}
    return Outcome(params, rows, checks, [plot])


EXPERIMENT = Experiment(
    name="punctuation-granularity",
    reproduces="004 §8.1 granularity, 002 punctuation interval (beyond the thesis)",
    summary="Punctuation granularity: fewer punctuations vs later results vs IOP buffering.",
    run=run,
)
