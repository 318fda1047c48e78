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

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import (band_packets, col, count_by_srcip, latency_memory_row,
                                    panel_plot, pick, rank_trend)


def run(ctx: RunContext) -> Outcome:
    import oop
    from oop.window.kinds import Tumbling

    rate = pick(ctx, tiny=5000, quick=20_000, full=50_000)
    n = pick(ctx, tiny=20_000, quick=600_000, full=3_000_000)
    sizes = pick(ctx, tiny=[64, 512, 4096], quick=[64, 256, 1024, 4096, 16384, 65536],
                 full=[64, 256, 1024, 4096, 16384, 65536])
    disorder, window = 200, 1000
    table, max_ts = band_packets(ctx, n=n, rate=rate, groups=100, delay=disorder)
    kind = Tumbling(window)

    def src(b: int) -> Any:
        return oop.from_arrow(table, time="ts", unit="ms", batch_size=b,
                              punctuation=oop.BoundedDelay(disorder))

    warm = table.slice(0, 5000)  # warm-up: compile the kernels outside the measurement
    count_by_srcip(lambda: oop.from_arrow(warm, time="ts", unit="ms", batch_size=512,
                                          punctuation=oop.BoundedDelay(disorder)), kind)
    rows = []
    for b in ctx.progress(sizes, desc="batch size"):
        r = count_by_srcip(lambda: src(b), kind)
        rows.append({"batch_rows": b,
                     "oop_tuples_per_s": round(n / r.oop.wall_s),
                     "iop_tuples_per_s": round(n / r.iop.wall_s), **latency_memory_row(r, max_ts)})
    agree = all(col(rows, "same_results"))
    x = col(rows, "batch_rows")
    ot, it = col(rows, "oop_tuples_per_s"), col(rows, "iop_tuples_per_s")
    ol, il = col(rows, "oop_latency_ms"), col(rows, "iop_latency_ms")
    plot = panel_plot(ctx, "throughput_latency_vs_batch.png", x, [
        ("throughput (M tuples/s)", {"OOP": [v / 1e6 for v in ot], "IOP": [v / 1e6 for v in it]}),
        ("latency (ms of event time)", {"OOP": ol, "IOP": il})],
        xlabel="batch size (rows)", logx=True,
        title="batch size: throughput vs latency (after 000, Trill)")
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
    return Outcome(params, rows, checks, [plot])


EXPERIMENT = Experiment(
    name="batch-size",
    reproduces="000 Trill batching (beyond the thesis)",
    summary="Batch-size sweep: throughput vs latency of OOP WID and IOP sort+buffer.",
    run=run,
)
