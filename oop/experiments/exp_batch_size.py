"""batch-size (beyond the thesis): throughput vs latency as the batch size grows.

After 000 (Trill): columnar batches amortise per-batch overhead, so larger
batches raise throughput; but a result can only leave once the batch that
completes it has been read (punctuation is generated per batch and batches
are flushed on punctuation), so larger batches also raise latency. Here a
band-disordered packet stream (delay <= ``disorder``) feeds ``count(*)
[TUMBLING w] GROUP BY srcIP`` with ``BoundedDelay`` punctuation, read in
batches of 64 ... 65536 rows:

* OOP: WID directly on the disordered batches;
* IOP: heartbeat ``SortBuffer`` (release on punctuation) -> buffering window.

Throughput = rows / wall seconds of the whole plan; latency = mean (data
clock at emission - window end) in ms of event time (deterministic).

Expected shape: for both plans throughput rises with the batch size, and
latency rises with it too (the trade-off batch size controls). Both plans
must return the same counts.
"""

from __future__ import annotations

from typing import Any


from oop.datasets import Band, Disordered, Packets
from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import pick, plt, rank_trend
from oop.experiments.harness import run_traced
from oop.experiments import plans


def _result(table: Any) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("srcIP", "window_end", "count"))))


def run(ctx: RunContext) -> Outcome:
    import oop
    from oop.iop_baseline.buffering_window import BufferingWindow
    from oop.window import aggregates as agg
    from oop.window.kinds import Tumbling

    rate = pick(ctx, tiny=5000, quick=20_000, full=50_000)
    n = pick(ctx, tiny=20_000, quick=600_000, full=3_000_000)
    sizes = pick(ctx, tiny=[64, 512, 4096], quick=[64, 256, 1024, 4096, 16384, 65536],
                 full=[64, 256, 1024, 4096, 16384, 65536])
    disorder, window = 200, 1000
    ds = Disordered(Packets(n=n, rate=rate, groups=100, seed=ctx.seed), Band(delay=disorder),
                    seed=ctx.seed)
    table = ds.table()
    kind = Tumbling(window)

    def src(b: int) -> Any:
        return oop.from_arrow(table, time="ts", unit="ms", batch_size=b,
                              punctuation=oop.BoundedDelay(disorder))

    for how in ("oop", "iop"):  # warm-up
        w = oop.from_arrow(table.slice(0, 5000), time="ts", unit="ms", batch_size=512,
                           punctuation=oop.BoundedDelay(disorder))
        (plans.oop_window(w, kind, agg.count(), by=["srcIP"]) if how == "oop" else
         plans.sort_buffer(w, "punctuation").via(BufferingWindow(kind, agg.count(),
                                                                 by=("srcIP",)))).run()
    rows = []
    agree = True
    for b in ctx.progress(sizes, desc="batch size"):
        o = run_traced(plans.oop_window(src(b), kind, agg.count(), by=["srcIP"]))
        i = run_traced(plans.sort_buffer(src(b), "punctuation").via(
            BufferingWindow(kind, agg.count(), by=("srcIP",))))
        same = _result(o.table) == _result(i.table)
        agree &= same
        inner_o = o.table.column("window_end").to_numpy() <= int(table["ts"].to_numpy().max())
        inner_i = i.table.column("window_end").to_numpy() <= int(table["ts"].to_numpy().max())
        rows.append({"batch_rows": b,
                     "oop_tuples_per_s": round(n / o.wall_s), "iop_tuples_per_s": round(n / i.wall_s),
                     "oop_latency_ms": round(float(o.logical_latency()[inner_o].mean()), 2),
                     "iop_latency_ms": round(float(i.logical_latency()[inner_i].mean()), 2),
                     "oop_peak_bytes": o.peak_bytes, "iop_peak_bytes": i.peak_bytes,
                     "same_results": same})
    x = [r["batch_rows"] for r in rows]
    pyplot = plt()
    fig, (a1, a2) = pyplot.subplots(1, 2, figsize=(9.0, 3.8), dpi=100)
    for who, mk in (("oop", "o-"), ("iop", "s-")):
        a1.plot(x, [r[f"{who}_tuples_per_s"] / 1e6 for r in rows], mk, label=who.upper())
        a2.plot(x, [r[f"{who}_latency_ms"] for r in rows], mk, label=who.upper())
    for a, yl in ((a1, "throughput (M tuples/s)"), (a2, "latency (ms of event time)")):
        a.set_xscale("log")
        a.set_xlabel("batch size (rows)")
        a.set_ylabel(yl)
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle("batch size: throughput vs latency (after 000, Trill)", fontsize=10)
    fig.tight_layout()
    fig.savefig(ctx.out_dir / "throughput_latency_vs_batch.png")
    pyplot.close(fig)
    ot = [r["oop_tuples_per_s"] for r in rows]
    it = [r["iop_tuples_per_s"] for r in rows]
    ol = [r["oop_latency_ms"] for r in rows]
    il = [r["iop_latency_ms"] for r in rows]
    checks = [
        Check("OOP throughput rises with the batch size", rank_trend(x, ot) > 0.8,
              {"trend": rank_trend(x, ot), "tuples_per_s": ot}, "rank trend > 0.8"),
        Check("OOP latency rises with the batch size", rank_trend(x, ol) > 0.8,
              {"trend": rank_trend(x, ol), "latency_ms": ol}, "rank trend > 0.8"),
        Check("IOP shows the same trade-off (throughput and latency rise)",
              rank_trend(x, it) > 0.8 and rank_trend(x, il) > 0.8,
              {"throughput_trend": rank_trend(x, it), "latency_trend": rank_trend(x, il)},
              "both rank trends > 0.8"),
        Check("OOP and IOP return the same counts", agree, agree, "identical rows"),
    ]
    params = {"rows": n, "rate_per_s": rate, "band_delay_ms": disorder, "window_ms": window,
              "batch_sizes": sizes, "punctuation": f"BoundedDelay({disorder}) per batch",
              "aggregate": "count(*) GROUP BY srcIP", "timing": "one run per point, wall clock"}
    return Outcome(params, rows, checks, ["throughput_latency_vs_batch.png"])


EXPERIMENT = Experiment(
    name="batch-size",
    reproduces="000 Trill batching (beyond the thesis)",
    summary="Batch-size sweep: throughput vs latency of OOP WID and IOP sort+buffer.",
    run=run,
)
