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

from oop.datasets import Band, Disordered, Packets
from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import growth, pick, plt, rank_trend
from oop.experiments.harness import run_traced
from oop.experiments import plans


def _result(table: Any) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("srcIP", "window_end", "count"))))


def run(ctx: RunContext) -> Outcome:
    import oop
    from oop.iop_baseline.buffering_window import BufferingWindow
    from oop.punctuation.granularity import Granular
    from oop.window import aggregates as agg
    from oop.window.kinds import Sliding

    rate = pick(ctx, tiny=2000, quick=5000, full=10_000)
    n = pick(ctx, tiny=30_000, quick=300_000, full=1_200_000)
    grains = pick(ctx, tiny=[1, 100, 2000], quick=[1, 10, 100, 500, 1000, 2000, 5000],
                  full=[1, 10, 100, 500, 1000, 2000, 5000])
    batch = pick(ctx, tiny=64, quick=128, full=128)
    disorder = 200
    kind = Sliding(range=5000, slide=1000)
    table = Disordered(Packets(n=n, rate=rate, groups=50, seed=ctx.seed), Band(delay=disorder),
                       seed=ctx.seed).table()
    max_ts = int(table["ts"].to_numpy().max())

    def src(g: int) -> Any:
        return oop.from_arrow(table, time="ts", unit="ms", batch_size=batch, name="packets",
                              punctuation=Granular(oop.BoundedDelay(disorder), every=g))

    rows = []
    agree = True
    for g in ctx.progress(grains, desc="granularity"):
        o = run_traced(plans.oop_window(src(g), kind, agg.count(), by=["srcIP"]))
        i = run_traced(plans.sort_buffer(src(g), "punctuation").via(
            BufferingWindow(kind, agg.count(), by=("srcIP",))))
        same = _result(o.table) == _result(i.table)
        agree &= same
        inner_o = o.table.column("window_end").to_numpy() <= max_ts
        inner_i = i.table.column("window_end").to_numpy() <= max_ts
        rows.append({"grain_ms": g,
                     "punctuations": o.result.metrics["packets"].punctuations_out,
                     "oop_wall_s": round(o.wall_s, 4), "iop_wall_s": round(i.wall_s, 4),
                     "oop_latency_ms": round(float(o.logical_latency()[inner_o].mean()), 2),
                     "iop_latency_ms": round(float(i.logical_latency()[inner_i].mean()), 2),
                     "oop_peak_bytes": o.peak_bytes, "iop_peak_bytes": i.peak_bytes,
                     "same_results": same})
    x = [r["grain_ms"] for r in rows]
    pyplot = plt()
    fig, axes = pyplot.subplots(1, 3, figsize=(11.0, 3.6), dpi=100)
    axes[0].plot(x, [r["punctuations"] for r in rows], "o-")
    axes[0].set_ylabel("punctuations delivered")
    for who, mk in (("oop", "o-"), ("iop", "s-")):
        axes[1].plot(x, [r[f"{who}_latency_ms"] for r in rows], mk, label=who.upper())
        axes[2].plot(x, [r[f"{who}_peak_bytes"] / 1024 for r in rows], mk, label=who.upper())
    axes[1].set_ylabel("latency (ms of event time)")
    axes[2].set_ylabel("peak state (KiB)")
    for a in axes:
        a.set_xscale("log")
        a.set_xlabel("punctuation grid g (ms)")
        a.grid(True, alpha=0.3)
    axes[1].legend(fontsize=8)
    axes[2].legend(fontsize=8)
    fig.suptitle("punctuation granularity: cost vs latency vs memory (slide 1000 ms)", fontsize=10)
    fig.tight_layout()
    fig.savefig(ctx.out_dir / "granularity.png")
    pyplot.close(fig)
    pc = [r["punctuations"] for r in rows]
    ol = [r["oop_latency_ms"] for r in rows]
    ob = [r["oop_peak_bytes"] for r in rows]
    ib = [r["iop_peak_bytes"] for r in rows]
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
    return Outcome(params, rows, checks, ["granularity.png"])


EXPERIMENT = Experiment(
    name="punctuation-granularity",
    reproduces="004 §8.1 granularity, 002 punctuation interval (beyond the thesis)",
    summary="Punctuation granularity: fewer punctuations vs later results vs IOP buffering.",
    run=run,
)
