"""fig6-15: Paned-WID / WID execution-time ratio vs tuples per pane and panes per window.

Reproduces the shape of 004 Fig. 6-15 (§6.2.3): a sliding-window max
(Q6-2) over an ordered packet stream, varying RANGE and SLIDE so that each
pane (``gcd(RANGE, SLIDE)`` = SLIDE here) holds ``t`` tuples and each window
``p`` panes. WID updates ``p`` window partials per tuple; Paned-WID updates
one pane partial per tuple and combines ``p`` panes per window.

Expected shape (004: "at 20 tuples per pane and 5 panes per window, the
paned option takes about 30 % of the time of the non-paned option ... using
panes has better execution-time performance than the original approach in
many cases"): the ratio is below 1 in most cells, and it falls as panes per
window and as tuples per pane grow (more sharing). Both methods must return
the same maxima. Both are in-engine OOP operators (the comparison is
OOP vs OOP; the IOP buffering baseline is fig6-10's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oop.datasets import Packets
from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import pick, plt, rank_trend, sorted_rows, time_runs
from oop.experiments import plans


def _run(table: Any, kind: Any, method: str, batch: int, repeats: int) -> tuple[float, Any]:
    """Minimum wall time of up to ``repeats`` runs (stop repeating once 2 s are spent)."""
    import oop
    from oop.window import aggregates as agg

    return time_runs(lambda: plans.oop_window(
        oop.from_arrow(table, time="ts", unit="ms", batch_size=batch, punctuation=oop.Ordered()),
        kind, agg.max("len"), method=method), repeats, budget_s=2.0)


_KEY = ("window_end", "max_len")


def run(ctx: RunContext) -> Outcome:
    from oop.window.kinds import Sliding

    rate = 1000  # tuples per second of event time: a pane of t tuples is t ms
    n = pick(ctx, tiny=8_000, quick=100_000, full=1_000_000)
    tpp = pick(ctx, tiny=[5, 50], quick=[5, 20, 100, 500], full=[1, 5, 20, 100, 500])
    ppw = pick(ctx, tiny=[2, 10], quick=[2, 5, 10, 50], full=[2, 5, 10, 50, 100])
    repeats = pick(ctx, tiny=1, quick=3, full=5)
    batch = 8192
    table = Packets(n=n, rate=rate, groups=10, seed=ctx.seed).table()
    warm = table.slice(0, 3000)
    for m in ("wid", "paned"):
        _run(warm, Sliding(range=20, slide=5), m, 1024, 1)
    rows = []
    agree = True
    cells = [(t, p) for p in ppw for t in tpp]
    for t, p in ctx.progress(cells, desc="fig6-15 cell"):
        kind = Sliding(range=t * p, slide=t)
        wid_s, wr = _run(table, kind, "wid", batch, repeats)
        pan_s, pr = _run(table, kind, "paned", batch, repeats)
        same = sorted_rows(wr.table, _KEY) == sorted_rows(pr.table, _KEY)
        agree &= same
        rows.append({"tuples_per_pane": t, "panes_per_window": p, "range_ms": t * p,
                     "slide_ms": t, "wid_s": round(wid_s, 5), "paned_s": round(pan_s, 5),
                     "ratio_paned_over_wid": round(pan_s / wid_s, 4), "same_results": same})
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(7.0, 4.2), dpi=100)
    width = 0.8 / len(ppw)
    for j, p in enumerate(ppw):
        ys = [r["ratio_paned_over_wid"] for r in rows if r["panes_per_window"] == p]
        ax.bar(np.arange(len(tpp)) + j * width, ys, width, label=f"{p} panes/window")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(tpp)) + 0.4 - width / 2)
    ax.set_xticklabels([str(t) for t in tpp])
    ax.set_xlabel("tuples per pane")
    ax.set_ylabel("time ratio Paned-WID / WID")
    ax.set_title("fig6-15: sliding max, Paned-WID vs WID (004 Fig. 6-15)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(ctx.out_dir / "paned_over_wid.png")
    pyplot.close(fig)

    ratios = [r["ratio_paned_over_wid"] for r in rows]
    mean_by_p = [float(np.mean([r["ratio_paned_over_wid"] for r in rows
                                if r["panes_per_window"] == p])) for p in ppw]
    mean_by_t = [float(np.mean([r["ratio_paned_over_wid"] for r in rows
                                if r["tuples_per_pane"] == t])) for t in tpp]
    checks = [
        Check("panes are faster than WID in many (most) cells", sum(x < 1 for x in ratios) > len(ratios) / 2,
              {"cells_with_ratio_below_1": sum(x < 1 for x in ratios), "cells": len(ratios)},
              "ratio < 1 in a majority of (tuples/pane, panes/window) cells"),
        Check("the benefit of panes grows with panes per window", rank_trend(ppw, mean_by_p) < 0,
              {"mean_ratio_by_panes_per_window": dict(zip(ppw, [round(x, 4) for x in mean_by_p]))},
              "mean ratio falls as panes/window grows (rank trend < 0)"),
        Check("the benefit of panes grows with tuples per pane", rank_trend(tpp, mean_by_t) < 0,
              {"mean_ratio_by_tuples_per_pane": dict(zip(tpp, [round(x, 4) for x in mean_by_t]))},
              "mean ratio falls as tuples/pane grows (rank trend < 0)"),
        Check("Paned-WID and WID return the same maxima", agree, agree, "identical windows"),
    ]
    params = {"rows": n, "rate_per_s": rate, "tuples_per_pane": tpp, "panes_per_window": ppw,
              "aggregate": "max(len), no grouping", "repeats": repeats, "batch_rows": batch,
              "timing": "min wall seconds of the whole plan run over repeats"}
    return Outcome(params, rows, checks, ["paned_over_wid.png"])


EXPERIMENT = Experiment(
    name="fig6-15",
    reproduces="004 Fig. 6-15",
    summary="Sliding max: Paned-WID / WID time ratio vs tuples per pane and panes per window.",
    run=run,
)
