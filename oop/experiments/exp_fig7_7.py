"""fig7-7: OA-Join vs OPIB-Join (and OPOB) -- memory vs band size.

Reproduces the shape of 004 Fig. 7-7 (§7.3, Experiment 2; the text calls it
Fig. 7-8): the band join Q7-2 of fig7-6, now against the order-preserving
*input-buffered* join. OPIB joins an M1 tuple only once M2 has passed
``M1.ts + n`` (all its partners are in), so its results leave in order with
no output buffer; it holds the pending M1 tuples plus M2 back to the oldest
pending tuple minus n. OA-Join holds one band of each input.

Expected shape (004: "OA-Join uses slightly less memory than the OPIB-Join
implementation for all window sizes ... although OPIB-Join uses much less
memory than OPOB-Join"): OA-Join <= OPIB at every band; OPIB < OPOB when the
join's output exceeds its input (it does here: several partners per tuple).
Latency and wall time are recorded too.
"""

from __future__ import annotations

from functools import partial

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import col as common_col, rank_trend, wins_everywhere
from oop.experiments.exp_fig7_6 import band_sweep, join_panels, join_params

__all__ = ["EXPERIMENT"]


def run(ctx: RunContext) -> Outcome:
    rows, n, batch = band_sweep(ctx, ("oa", "opib", "opob"), ctx.seed + 1, "fig7-7 band")
    for r in rows:
        r["results_per_input"] = round(r["oa_results"] / max(1, 2 * n), 3)
    x = [r["band_s"] for r in rows]
    col = partial(common_col, rows)
    checks = [
        Check("all three joins produce the same number of results",
              all(r["oa_results"] == r["opib_results"] == r["opob_results"] for r in rows),
              {"results": col("oa_results")}, "equal"),
        Check("OA-Join uses no more memory (items) than OPIB at every band size",
              all(a <= b for a, b in zip(col("oa_peak_items"), col("opib_peak_items"))),
              {"oa": col("oa_peak_items"), "opib": col("opib_peak_items")}, "oa <= opib"),
        Check("OPIB uses less memory than OPOB when the join outputs more than it reads",
              wins_everywhere(
                  [b for b, r in zip(col("opib_peak_bytes"), rows) if r["results_per_input"] > 1],
                  [b for b, r in zip(col("opob_peak_bytes"), rows) if r["results_per_input"] > 1]),
              {"opib": col("opib_peak_bytes"), "opob": col("opob_peak_bytes"),
               "results_per_input": col("results_per_input")}, "opib < opob where output > input"),
        Check("OPIB's memory grows with the band", rank_trend(x, col("opib_peak_items")) > 0.8,
              rank_trend(x, col("opib_peak_items")), "rank trend > 0.8"),
    ]
    plot = join_panels(ctx, "fig7-7.png", rows, ("oa", "opib", "opob"), [
        ("peak state (items)", "peak_items", 1),
        ("median latency (event-time ms)", "latency_ms", 1)],
        title="fig7-7: OA-Join vs OPIB-Join (memory) on Q7-2")
    return Outcome(params=join_params(ctx, batch), rows=rows, checks=checks, plots=[plot])


EXPERIMENT = Experiment(
    name="fig7-7",
    reproduces="004 Fig. 7-7",
    summary="OA-Join vs order-preserving input-buffered join: memory vs band size",
    run=run,
)
