"""fig6-12: latency vs accuracy under block-sorted disorder -- punctuation vs slack.

Reproduces the shape of 004 Fig. 6-12 (§6.1.5, Experiment 3 of Table 6-1):
``count(*) [RANGE 10 B, SLIDE B]`` over a block-sorted packet stream (every
block of B ms of event time arrives at once, shuffled -- a router purging
its NetFlow cache, Fig. 6-9), answered with the feed's end-of-block
punctuation (OOP WID) and with consistent slack from 0 to beyond the
largest disorder (the IOP buffering window aggregate completing extents at
``hwm - slack``). Accuracy is the
percentage of wrong answers; latency is in ms of the data clock (see
:mod:`oop.experiments.latacc`).

Expected shape (004: "punctuation has better latency and accuracy for
block-sorted disorder than any of the slack values used"; "when slack is
less than optimal, latency is essentially independent of slack"; wrong
answers disappear only once the slack covers the disorder):

* punctuation gives 0 % wrong answers at a latency no higher than any slack;
* slacks below the disorder give wrong answers, slacks covering it none;
* below the optimal slack, latency varies less with slack than it jumps at
  the optimal slack.
"""

from __future__ import annotations

import numpy as np

from oop.datasets import BlockSorted, Disordered, Packets
from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import pick
from oop.experiments import latacc


def run(ctx: RunContext) -> Outcome:
    block = pick(ctx, tiny=1000, quick=6000, full=6000)
    rate = pick(ctx, tiny=200, quick=400, full=1000)
    duration = pick(ctx, tiny=30_000, quick=240_000, full=600_000)
    batch = pick(ctx, tiny=25, quick=64, full=128)
    range_, slide = 10 * block, block
    fractions = ctx.param("slack_fractions", [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25])
    slacks = [int(round(f * block)) for f in fractions]
    n = int(duration * rate / 1000)
    ds = Disordered(Packets(n=n, rate=rate, groups=100, seed=ctx.seed), BlockSorted(block=block),
                    seed=ctx.seed)
    items = list(ds.feed(batch))  # batches + end-of-block punctuation
    batches = [b for b in items if not hasattr(b, "attr")]
    ts = np.concatenate([b.column("ts").to_numpy() for b in batches])
    max_disorder = int((np.maximum.accumulate(ts) - ts).max())
    res = latacc.measure(batches, items, range_=range_, slide=slide, slacks=slacks,
                         metric="count", generous=False, progress=ctx.progress)
    rows = [vars(m) for m in res]
    punct, cons = res[0], res[1:]

    plot = latacc.latency_error_plot(
        ctx.out_dir, "latency_vs_wrong.png", [(cons, "o-")], punct,
        "end-of-block punctuation (OOP)", ylabel="wrong answers (%)",
        title=f"fig6-12: block-sorted, block {block} ms, RANGE {range_} SLIDE {slide} ms "
              "(labels: slack ms)")

    below = [m for m in cons if m.slack_ms < max_disorder]
    covering = [m for m in cons if m.slack_ms >= max_disorder]
    optimal = min(covering, key=lambda m: m.latency_ms) if covering else None
    spread_below = (max(m.latency_ms for m in below) - min(m.latency_ms for m in below)
                    if below else 0.0)
    jump = (optimal.latency_ms - max(m.latency_ms for m in below)) if (optimal and below) else 0.0
    checks = [
        Check("punctuation is exact and at least as fast as every slack",
              punct.error == 0 and all(punct.latency_ms <= m.latency_ms for m in cons),
              {"punctuation": {"wrong_pct": punct.error, "latency_ms": punct.latency_ms},
               "min_slack_latency_ms": min(m.latency_ms for m in cons)},
              "punctuation 0 % wrong and latency <= every slack's"),
        Check("slacks below the disorder give wrong answers; slacks covering it give none",
              all(m.error > 0 for m in below) and all(m.error == 0 for m in covering)
              and bool(below) and bool(covering),
              {"max_disorder_ms": max_disorder,
               "wrong_pct_by_slack": {m.slack_ms: m.error for m in cons}},
              "wrong % > 0 iff slack < max disorder"),
        Check("below the optimal slack, latency is nearly independent of slack",
              bool(below) and optimal is not None and spread_below < jump,
              {"latency_spread_below_ms": round(spread_below, 2),
               "jump_at_optimal_ms": round(jump, 2)},
              "latency range over slacks < disorder is smaller than the step to the optimal slack"),
    ]
    params = {"rows": n, "rate_per_s": rate, "block_ms": block, "range_ms": range_,
              "slide_ms": slide, "slacks_ms": slacks, "max_disorder_ms": max_disorder,
              "batch_rows": batch, "aggregate": "count(*)",
              "punctuation": "end-of-block feed punctuation P(ts, block end)",
              "latency": "mean (data clock at emission - window end), ms of event time",
              "accuracy": "% of windows whose count differs from the oracle (missing = wrong)"}
    return Outcome(params, rows, checks, [plot])


EXPERIMENT = Experiment(
    name="fig6-12",
    reproduces="004 Fig. 6-12",
    summary="Block-sorted disorder: latency/accuracy of end-of-block punctuation (WID) vs "
            "consistent slack (IOP buffering window).",
    run=run,
)
