"""fig8-9: tumbling-window join memory vs arrival skew between the links of each input.

Reproduces the shape of 004 Fig. 8-9 (§8.4.1, Q8-3): a tumbling-window join
``(A UNION B) JOIN (C UNION D)`` on the flow id (``srcIP``), window W, where
links B and D arrive ``skew`` later than A and C (every link ordered, equal
rates; :class:`~oop.datasets.multisource.MultiSource` replays the arrival
clock).

* IOP: ``Merge(A, B)`` and ``Merge(C, D)`` (order-preserving unions) feeding
  the in-order tumbling join (OPIB, which joins a window once both ordered
  inputs have passed it). Merge holds A's (C's) tuples until B (D) catches up.
* OOP: ``Meld(A, B)`` and ``Meld(C, D)`` feeding OA-Join: no union buffers;
  the join's hash state holds the tuples instead (its punctuation is the min
  over the links, so it lags by the skew).

Memory = largest simultaneous deterministic state of the whole plan (items:
tuples held by merges and joins; bytes). Expected shape (004: "The number of
tuples that the IOP and OOP approaches need to maintain is the same. The
difference is that in the IOP version, the tuples reside in input buffers of
merge operators; in the OOP version, they are held in join hash tables"):
both grow with the skew, and OOP holds about as many tuples as IOP (same
order of magnitude at every skew).
"""

from __future__ import annotations

from typing import Any, Callable

from oop.experiments.base import Check, Experiment, Outcome, RunContext
from oop.experiments.common import panel_plot, pick, rank_trend
from oop.experiments.harness import run_traced

__all__ = ["EXPERIMENT", "tumbling_join_plans", "trace_both", "join_row"]


def tumbling_join_plans(left: list[Any], right: list[Any], window: int, kind: str) -> Any:
    """OOP (Meld + OA-Join) or IOP (Merge + OPIB) tumbling join of two unions."""
    from oop.experiments import plans
    from oop.iop_baseline.opib_join import OPIBJoin
    from oop.join.spec import JoinConfig, WindowPredicate

    if kind == "oop":
        lu = plans.meld(left, name="meld_l")
        ru = plans.meld(right, name="meld_r")
        return lu.join(ru, on="srcIP", tumbling=window, name="join")
    lu = plans.merge(left, name="merge_l") if len(left) > 1 else left[0]
    ru = plans.merge(right, name="merge_r") if len(right) > 1 else right[0]
    cfg = JoinConfig(WindowPredicate.tumbling(window), (("srcIP", "srcIP"),), name="join")
    return lu.via(OPIBJoin(cfg), ru)


def trace_both(ms: Any, split: Callable[[list[Any]], tuple[list[Any], list[Any]]],
               window: int) -> dict[str, Any]:
    """Trace both :func:`tumbling_join_plans` (``"oop"``, ``"iop"``), each over fresh streams
    of ``ms`` (a ``MultiSource``) that ``split`` divides into the left and right links."""
    out = {}
    for kind in ("oop", "iop"):
        left, right = split(ms.streams())
        out[kind] = run_traced(tumbling_join_plans(left, right, window, kind))
    return out


def join_row(tr: dict[str, Any], **extra: int) -> dict[str, Any]:
    """Row fields of :func:`trace_both`'s runs: peak items and bytes, ``extra``, result
    counts and wall seconds of both plans."""
    o, i = tr["oop"], tr["iop"]
    return {"oop_peak_items": int(o.peak_items), "iop_peak_items": int(i.peak_items),
            "oop_peak_bytes": int(o.peak_bytes), "iop_peak_bytes": int(i.peak_bytes), **extra,
            "oop_results": o.table.num_rows, "iop_results": i.table.num_rows,
            "oop_wall_s": round(o.wall_s, 4), "iop_wall_s": round(i.wall_s, 4)}


def run(ctx: RunContext) -> Outcome:
    from oop.datasets import Link, MultiSource

    rate = pick(ctx, tiny=300, quick=1000, full=2000)
    window = pick(ctx, tiny=1000, quick=2000, full=10_000)
    duration = pick(ctx, tiny=8000, quick=24_000, full=100_000)
    groups = pick(ctx, tiny=500, quick=2000, full=8000)
    skews = pick(ctx, tiny=[0, 1000, 3000], quick=[0, 2000, 4000, 6000, 8000],
                 full=[0, 10_000, 20_000, 30_000, 40_000])
    rows = []
    for sk in ctx.progress(skews, desc="fig8-9 skew"):
        links = (Link("A", rate, groups=groups), Link("B", rate, skew=sk, groups=groups),
                 Link("C", rate, groups=groups), Link("D", rate, skew=sk, groups=groups))
        ms = MultiSource(links, duration=duration, tick=100, seed=ctx.seed)
        tr = trace_both(ms, lambda s: (s[:2], s[2:]), window)
        m = tr["iop"].result.metrics
        merge_items = sum(int(m[n].peak_state_items) for n in ("merge_l", "merge_r") if n in m)
        rows.append({"skew_s": sk / 1000, **join_row(tr, iop_merge_peak_items=merge_items)})
    x = [r["skew_s"] for r in rows]
    col = lambda k: [r[k] for r in rows]
    ratio = [o / i if i else float("inf") for o, i in zip(col("oop_peak_items"), col("iop_peak_items"))]
    checks = [
        Check("OOP and IOP produce the same number of results",
              col("oop_results") == col("iop_results"),
              {"oop": col("oop_results"), "iop": col("iop_results")}, "equal"),
        Check("both plans' memory grows with the arrival skew",
              rank_trend(x, col("oop_peak_items")) > 0.8 and rank_trend(x, col("iop_peak_items")) > 0.8,
              {"oop": rank_trend(x, col("oop_peak_items")),
               "iop": rank_trend(x, col("iop_peak_items"))}, "rank trends > 0.8"),
        Check("OOP holds about as many tuples as IOP (in join state instead of merge buffers)",
              all(0.5 <= q <= 2.0 for q in ratio), [round(q, 3) for q in ratio],
              "OOP/IOP peak items within a factor of 2 at every skew"),
        Check("OOP's structural overhead in bytes is moderate (004: at most ~20% more)",
              all(0.5 <= o / i <= 2.0 for o, i in zip(col("oop_peak_bytes"), col("iop_peak_bytes"))
                  if i),
              [round(o / i, 3) for o, i in zip(col("oop_peak_bytes"), col("iop_peak_bytes")) if i],
              "OOP/IOP peak bytes within a factor of 2 at every skew (hash index vs Arrow rows)"),
    ]
    plot = panel_plot(ctx, "fig8-9.png", x, [
        ("peak state (items)", {"OOP (Meld + OA-Join)": col("oop_peak_items"),
                                "IOP (Merge + in-order join)": col("iop_peak_items"),
                                "IOP: merge buffers": col("iop_merge_peak_items")}),
        ("peak state (MiB)", {"OOP": [b / 2**20 for b in col("oop_peak_bytes")],
                              "IOP": [b / 2**20 for b in col("iop_peak_bytes")]}),
    ], xlabel="arrival skew of B and D (s)", title="fig8-9: tumbling join over unions, memory vs skew")
    return Outcome(params={"rate_per_link": rate, "window_ms": window, "duration_ms": duration,
                           "groups": groups, "skews_ms": skews, "tick_ms": 100},
                   rows=rows, checks=checks, plots=[plot])


EXPERIMENT = Experiment(
    name="fig8-9",
    reproduces="004 Fig. 8-9",
    summary="tumbling-window join over skewed unions: OOP join state vs IOP merge buffers",
    run=run,
)
