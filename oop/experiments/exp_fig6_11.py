"""fig6-11: latency vs accuracy under band disorder -- punctuation vs consistent and generous slack.

Reproduces the shape of 004 Fig. 6-11 (§6.1.5, Experiment 2 of Table 6-1):
``avg(len) [RANGE 64 s, SLIDE 6.4 s]`` over a band-disordered packet stream
(every tuple delayed by up to 3.2 s), answered with punctuation (OOP WID)
and with buffering behind a slack of 0 ... 3.2 s, consistent and generous
(see :mod:`oop.experiments.latacc` for the plans and the metrics).

Expected shape (004: "as slack increases, error decreases and latency
increases ... external punctuation has better latency and accuracy than
either slack mechanism ... generous slack has significantly better accuracy
at comparable latency when compared to consistent slack"):

* for both slack kinds, error falls and latency rises with the slack;
* punctuation is exact (0 % error) and no slower than any slack setting
  that is exact too;
* generous slack's error is at most consistent slack's, at every slack.

``--set punctuation_delay_ms=N`` replaces the exact punctuation by a
``BoundedDelay(N)`` bound (N below the disorder breaks it on purpose).
``--tiny`` / ``--quick`` scale RANGE, SLIDE, disorder and slacks down
together (by 10 for tiny).
"""

from __future__ import annotations


from oop.datasets import Band, Disordered, Packets
from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import pick, rank_trend
from oop.experiments import latacc


def run(ctx: RunContext) -> Outcome:
    scale = pick(ctx, tiny=10, quick=1, full=1)  # divide the thesis' times by this
    rate = pick(ctx, tiny=250, quick=500, full=1000)
    duration = pick(ctx, tiny=40_000, quick=256_000, full=640_000)
    batch = pick(ctx, tiny=32, quick=64, full=64)
    range_, slide, disorder = 64_000 // scale, 6_400 // scale, 3_200 // scale
    slacks = [s // scale for s in pick(ctx, tiny=[0, 1600, 3200],
                                       quick=[0, 320, 640, 1280, 2560, 3200],
                                       full=[0, 320, 640, 1280, 2560, 3200])]
    slacks = [int(x) for x in ctx.param("slacks_ms", slacks)]
    pdelay = ctx.param("punctuation_delay_ms", None)
    n = int(duration * rate / 1000)
    ds = Disordered(Packets(n=n, rate=rate, groups=100, seed=ctx.seed), Band(delay=disorder),
                    seed=ctx.seed)
    batches = list(ds.batches(batch))
    if pdelay is None:
        items = latacc.exact_items(batches)
        pmode = "exact low-watermark of the feed"
    else:
        from oop.stream.elements import Punctuation

        items, hwm, last = [], None, None
        for b in batches:
            items.append(b)
            m = int(b.column("ts").to_numpy().max())
            hwm = m if hwm is None else max(hwm, m)
            if last is None or hwm - int(pdelay) > last:
                last = hwm - int(pdelay)
                items.append(Punctuation("ts", last))
        pmode = f"BoundedDelay({pdelay}) (override)"
    res = latacc.measure(batches, items, range_=range_, slide=slide, slacks=slacks, metric="mean",
                         generous=True, progress=ctx.progress)
    rows = [vars(m) for m in res]
    punct = res[0]
    cons = [m for m in res if m.mechanism == "consistent slack"]
    gen = [m for m in res if m.mechanism == "generous slack"]

    plot = latacc.latency_error_plot(
        ctx.out_dir, "latency_vs_error.png", [(cons, "o-"), (gen, "s-")], punct,
        "punctuation (OOP)", ylabel="mean error of avg(len) (%)",
        title=f"fig6-11: band disorder ≤ {disorder} ms, RANGE {range_} SLIDE {slide} ms "
              "(labels: slack ms)")

    def falls_rises(ms: list[latacc.Measured]) -> tuple[bool, dict]:
        x = [m.slack_ms for m in ms]
        e = [m.error for m in ms]
        lat = [m.latency_ms for m in ms]
        ok = rank_trend(x, e) < -0.8 and rank_trend(x, lat) > 0.8 and e[-1] < e[0]
        return ok, {"trend(slack, error)": rank_trend(x, e),
                    "trend(slack, latency)": rank_trend(x, lat)}

    c_ok, c_m = falls_rises(cons)
    g_ok, g_m = falls_rises(gen)
    exact_slack = [m for m in cons + gen if m.error == 0]
    checks = [
        Check("consistent slack: error falls and latency rises as slack grows", c_ok, c_m,
              "rank trend(slack, error) < -0.8 and rank trend(slack, latency) > 0.8"),
        Check("generous slack: error falls and latency rises as slack grows", g_ok, g_m,
              "rank trend(slack, error) < -0.8 and rank trend(slack, latency) > 0.8"),
        Check("punctuation is exact (better accuracy than either slack)", punct.error == 0.0,
              {"punctuation_error_pct": punct.error,
               "best_slack_error_pct": min(m.error for m in cons + gen)},
              "punctuation error = 0 % <= every slack's error"),
        Check("punctuation has lower latency than any slack setting that is as accurate",
              all(punct.latency_ms <= m.latency_ms for m in exact_slack) and punct.error == 0.0,
              {"punctuation_latency_ms": punct.latency_ms,
               "exact_slack_latencies_ms": {f"{m.mechanism} {m.slack_ms}": m.latency_ms
                                            for m in exact_slack}},
              "punctuation latency <= latency of every 0 %-error slack setting"),
        Check("generous slack is at least as accurate as consistent slack at every slack",
              all(g.error <= c.error for g, c in zip(gen, cons)),
              {"consistent": [c.error for c in cons], "generous": [g.error for g in gen]},
              "generous error <= consistent error, slack by slack"),
    ]
    params = {"rows": n, "rate_per_s": rate, "range_ms": range_, "slide_ms": slide,
              "max_disorder_ms": disorder, "slacks_ms": slacks, "batch_rows": batch,
              "aggregate": "avg(len)", "punctuation": pmode,
              "latency": "mean (data clock at emission - window end), ms of event time",
              "accuracy": "mean error % of avg per window vs oracle; missing window = 100 %"}
    return Outcome(params, rows, checks, [plot])


EXPERIMENT = Experiment(
    name="fig6-11",
    reproduces="004 Fig. 6-11",
    summary="Band disorder: latency/accuracy of punctuation (WID) vs consistent and generous "
            "slack (IOP buffering window).",
    run=run,
)
