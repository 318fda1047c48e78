"""fig8-11: memory of a sliding count over three links when the control link is delayed.

Reproduces the shape of 004 Fig. 8-11 (§8.4, Q8-5): ``count(*) [RANGE r,
SLIDE s] FROM M1 UNION M2 UNION C`` where M1, M2 are high-rate links and C
is a near-empty control link whose arrivals lag by ``delay``. Each link is
ordered; C sends heartbeat punctuation on empty ticks (the Gigascope
remedy for lulls), so neither plan blocks forever.

* IOP: order-preserving ``Merge`` of the three links -> the same window
  count operator, now fed in order (so the plans differ only in how order is
  handled). Merge must hold the main links' tuples until C's frontier
  catches up: ``delay x (rate1 + rate2)`` tuples.
* OOP: ``Meld`` (no buffering) -> WID window count, which reduces tuples to
  one partial count per open window at once.

Expected shape (004: "the memory usage of IOP grows significantly as the
delay of C increases, while that of OOP is relatively stable"): IOP peak
state grows with the delay; OOP's grows much less and stays below IOP's.
Memory is the engine's deterministic state accounting (bytes, the largest
simultaneous sum over the plan's operators; the WID ring's bytes are its
allocated capacity, so they move in steps) and, as a second view, items
(tuples held + live partial aggregates). Both plans must produce the same
window counts.
"""

from __future__ import annotations

from oop.datasets import Link, MultiSource
from oop.experiments.base import Experiment, Outcome, RunContext
from oop.experiments.common import UnionFigure, pick, union_memory_outcome, union_sweep

FIGURE = UnionFigure(
    x_key="delay_ms", filename="memory_vs_delay.png",
    labels={"iop": "IOP (Merge + in-order count)", "oop": "OOP (Meld + WID)"},
    unit="KiB", xlabel="arrival delay of control link C (s)",
    title="fig8-11: sliding count over M1 ∪ M2 ∪ C (004 Fig. 8-11)",
    what="delay", grows="IOP memory grows as the control link's delay grows",
    flat="OOP memory stays relatively stable: it grows far less than IOP's",
    less="OOP uses less memory than IOP when the control link is delayed",
    same="OOP and IOP compute the same window counts",
    same_expected="identical (window_end, count) for every delay")


def run(ctx: RunContext) -> Outcome:
    from oop.window import aggregates as agg
    from oop.window.kinds import Sliding

    rate = pick(ctx, tiny=500, quick=2000, full=4000)
    duration = pick(ctx, tiny=12_000, quick=40_000, full=90_000)
    range_, slide = pick(ctx, tiny=(4000, 1000), quick=(20_000, 4000), full=(30_000, 6000))
    delays = pick(ctx, tiny=[0, 1000, 2000], quick=[0, 2500, 5000, 7500, 10_000],
                  full=[0, 2000, 4000, 6000, 8000, 10_000])
    tick = 100
    rows, agree = union_sweep(
        ctx, delays, "delay_ms",
        lambda d: MultiSource(
            (Link("M1", rate), Link("M2", rate), Link("C", 0.2, skew=d, heartbeat=True)),
            duration=duration, tick=tick, seed=ctx.seed),
        Sliding(range=range_, slide=slide), agg.count(), compare=("window_end", "count"),
        size_key="windows", desc="fig8-11 delay")
    params = {"rate_per_main_link": rate, "control_rate": 0.2, "duration_ms": duration,
              "range_ms": range_, "slide_ms": slide, "tick_ms": tick, "delays_ms": delays,
              "memory": "largest simultaneous state bytes over the plan's operators",
              "iop_plan": "Merge -> window count (same operator, ordered input)",
              "oop_plan": "Meld -> WID window count"}
    return union_memory_outcome(ctx, FIGURE, rows, agree, params)


EXPERIMENT = Experiment(
    name="fig8-11",
    reproduces="004 Fig. 8-11",
    summary="Sliding count over two main links and a delayed near-empty control link: "
            "IOP Merge buffers the main links, OOP Meld + WID does not.",
    run=run,
)
