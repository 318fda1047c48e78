"""Helpers shared by experiment modules: sizes, timing, plots and shape checks.

Shapes, not constants: :func:`rank_trend` (Spearman rank correlation of a
series against its x), :func:`growth` (last / first), and
:func:`wins_everywhere` compare the measured series the way the sources
describe them ("grows with SLIDE", "stays flat", "OOP below IOP at every
point").

>>> rank_trend([1, 2, 3, 4], [1.0, 2.0, 2.5, 9.0])
1.0
>>> rank_trend([1, 2, 3], [3, 2, 1])
-1.0
>>> growth([2.0, 3.0, 8.0])
4.0
>>> pick(RunContext(quick=True, seed=0, out_dir=Path(".")), tiny=1, quick=2, full=3)
2

Row tables (``Outcome.rows`` is a list of dicts) and result tables:

>>> rows = [{"g": 1, "p": "a", "v": 5}, {"g": 2, "p": "a", "v": 7}, {"g": 2, "p": "b", "v": 9}]
>>> col(rows, "v"), lookup(rows, "v", g=2, p="b")
([5, 7, 9], 9)
>>> import pyarrow as pa
>>> sorted_rows(pa.table({"k": [2, 1, 2], "c": [5, 6, 4]}), ["k", "c"])
[(1, 6), (2, 4), (2, 5)]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from oop.experiments.base import RunContext

__all__ = ["pick", "timed", "time_runs", "rank_trend", "growth", "wins_everywhere", "line_plot",
           "plt", "state_peak", "panel_plot", "col", "lookup", "sorted_rows", "mean_latency_ms",
           "OopIop", "oop_iop_window", "memory_row", "meld_vs_merge", "union_memory_checks",
           "memory_plot", "band_packets", "count_by_srcip", "latency_memory_row", "union_sweep",
           "UnionFigure", "union_memory_outcome"]

T = TypeVar("T")


def pick(ctx: RunContext, *, tiny: T, quick: T, full: T) -> T:
    """The parameter for this run's size."""
    return tiny if ctx.tiny else quick if ctx.quick else full


def timed(fn: Callable[[], T], repeats: int = 1) -> tuple[float, T]:
    """``(min wall seconds over repeats, last result)``; repeats >= 1."""
    best, res = float("inf"), None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        res = fn()
        best = min(best, time.perf_counter() - t0)
    return best, res  # type: ignore[return-value]


def time_runs(build: Callable[[], Any], repeats: int,
              budget_s: float = float("inf")) -> tuple[float, Any]:
    """``(min wall seconds, last Result)`` of up to ``repeats`` runs of a freshly built plan.

    ``build()`` returns a stream (building is not timed, ``.run()`` is);
    repeating stops once ``budget_s`` seconds have been spent. Cost: the runs.
    """
    times: list[float] = []
    res = None
    for _ in range(max(1, repeats)):
        if times and sum(times) > budget_s:
            break
        s = build()
        t0 = time.perf_counter()
        res = s.run()
        times.append(time.perf_counter() - t0)
    return min(times), res


def col(rows: Sequence[dict[str, Any]], key: str) -> list[Any]:
    """The ``key`` column of a list of row dicts."""
    return [r[key] for r in rows]


def lookup(rows: Sequence[dict[str, Any]], key: str, **where: Any) -> Any:
    """``key`` of the first row whose fields equal ``where`` (StopIteration if none). O(rows)."""
    return next(r[key] for r in rows if all(r[k] == v for k, v in where.items()))


def sorted_rows(table: Any, columns: Sequence[str]) -> list[tuple]:
    """The ``columns`` of an Arrow table as a sorted list of tuples: results compared as bags."""
    return sorted(zip(*(table.column(c).to_pylist() for c in columns)))


def mean_latency_ms(traced: Any, max_ts: int) -> float:
    """Mean logical latency (ms of event time) of the windows ending by ``max_ts``.

    Windows ending after the last event time are completed only by end of
    stream and are not timed.
    """
    inner = traced.table.column("window_end").to_numpy() <= max_ts
    return round(float(traced.logical_latency()[inner].mean()), 2)


@dataclass
class OopIop:
    """One window query run both ways on the same source: OOP WID and IOP sort + buffering."""

    oop: Any  # harness.Traced
    iop: Any  # harness.Traced
    same: bool  # identical result bags


def oop_iop_window(src: Callable[[], Any], kind: Any, aggs: Any, by: Sequence[str],
                   compare: Sequence[str]) -> OopIop:
    """Trace the OOP plan (WID on the disordered stream) and the IOP plan (heartbeat
    ``SortBuffer`` releasing on punctuation -> ``BufferingWindow``) over ``src()``,
    and compare their outputs on the ``compare`` columns."""
    from oop.experiments import plans
    from oop.experiments.harness import run_traced
    from oop.iop_baseline.buffering_window import BufferingWindow

    o = run_traced(plans.oop_window(src(), kind, aggs, by=list(by)))
    i = run_traced(plans.sort_buffer(src(), "punctuation").via(
        BufferingWindow(kind, aggs, by=tuple(by))))
    return OopIop(o, i, sorted_rows(o.table, compare) == sorted_rows(i.table, compare))


def band_packets(ctx: RunContext, *, n: int, rate: int, groups: int,
                 delay: int) -> tuple[Any, int]:
    """``n`` packets at ``rate``/s over ``groups`` source IPs, band-disordered (delay <=
    ``delay`` ms), as an Arrow table with its greatest ``ts`` (for :func:`mean_latency_ms`)."""
    from oop.datasets import Band, Disordered, Packets

    table = Disordered(Packets(n=n, rate=rate, groups=groups, seed=ctx.seed), Band(delay=delay),
                       seed=ctx.seed).table()
    return table, int(table["ts"].to_numpy().max())


def count_by_srcip(src: Callable[[], Any], kind: Any) -> OopIop:
    """:func:`oop_iop_window` of ``count(*) GROUP BY srcIP`` over ``kind``'s windows,
    compared on (srcIP, window_end, count)."""
    from oop.window import aggregates as agg

    return oop_iop_window(src, kind, agg.count(), ["srcIP"], ("srcIP", "window_end", "count"))


def latency_memory_row(r: OopIop, max_ts: int) -> dict[str, Any]:
    """Mean latency (:func:`mean_latency_ms`) and peak bytes of both plans of ``r``, and
    whether their results agree, as row fields."""
    return {"oop_latency_ms": mean_latency_ms(r.oop, max_ts),
            "iop_latency_ms": mean_latency_ms(r.iop, max_ts),
            "oop_peak_bytes": r.oop.peak_bytes, "iop_peak_bytes": r.iop.peak_bytes,
            "same_results": r.same}


def memory_row(oop_run: Any, iop_run: Any) -> dict[str, Any]:
    """Peak state (bytes, items) and wall time of an OOP and an IOP traced run, as row fields."""
    return {"oop_peak_bytes": oop_run.peak_bytes, "iop_peak_bytes": iop_run.peak_bytes,
            "oop_peak_items": oop_run.peak_items, "iop_peak_items": iop_run.peak_items,
            "oop_wall_s": round(oop_run.wall_s, 4), "iop_wall_s": round(iop_run.wall_s, 4)}


def meld_vs_merge(ms: Any, kind: Any, aggs: Any,
                  by: Sequence[str] | None = None) -> tuple[Any, Any]:
    """Trace one window query over the links of ``ms`` (a ``MultiSource``) both ways:
    OOP = ``Meld`` -> WID, IOP = order-preserving ``Merge`` -> the same window operator
    (named ``inorder_agg``), so the plans differ only in how order is handled."""
    from oop.experiments import plans
    from oop.experiments.harness import run_traced

    o = run_traced(plans.oop_window(plans.meld(ms.streams()), kind, aggs, by=by))
    i = run_traced(plans.oop_window(plans.merge(ms.streams()), kind, aggs, by=by,
                                    name="inorder_agg"))
    return o, i


def union_sweep(ctx: RunContext, values: Sequence[int], x_key: str,
                source: Callable[[int], Any], kind: Any, aggs: Any, *,
                by: Sequence[str] | None = None, compare: Sequence[str], size_key: str,
                desc: str) -> tuple[list[dict[str, Any]], bool]:
    """:func:`meld_vs_merge` over ``source(v)`` (a ``MultiSource``) for each ``v`` of
    ``values``: rows ``{x_key: v, **memory_row, size_key: OOP output rows, same_results}``
    (results compared by :func:`sorted_rows` on ``compare``) and whether all agreed;
    ``desc`` labels the progress bar."""
    rows = []
    for v in ctx.progress(values, desc=desc):
        o, i = meld_vs_merge(source(v), kind, aggs, by=by)
        same = sorted_rows(o.table, compare) == sorted_rows(i.table, compare)
        rows.append({x_key: v, **memory_row(o, i), size_key: o.table.num_rows,
                     "same_results": same})
    return rows, all(col(rows, "same_results"))


def memory_plot(ctx: RunContext, filename: str, x: Sequence[float],
                rows: Sequence[dict[str, Any]], labels: dict[str, str], *, unit: str,
                xlabel: str, title: str) -> str:
    """Two panels of :func:`memory_row` fields against ``x``: peak bytes (in ``unit``,
    ``"KiB"`` or ``"MiB"``) and peak items; ``labels`` maps ``"iop"``/``"oop"`` to legends
    (IOP drawn first)."""
    scale = {"KiB": 1024, "MiB": 2**20}[unit]
    return panel_plot(ctx, filename, x, [
        (f"peak state ({unit})", {labels[w]: [b / scale for b in col(rows, f"{w}_peak_bytes")]
                                  for w in ("iop", "oop")}),
        ("peak state (items: tuples / partial aggregates)",
         {labels[w]: col(rows, f"{w}_peak_items") for w in ("iop", "oop")})],
        xlabel=xlabel, title=title)


def union_memory_checks(x: Sequence[float], rows: Sequence[dict[str, Any]], *, what: str,
                        grows: str, flat: str, less: str) -> list[Any]:
    """The memory shape of a union under arrival skew (004 Fig. 8-8, 8-11) as checks.

    ``rows`` hold :func:`memory_row` fields, ``x`` the skew; ``what`` names it
    in the expectations; ``grows`` / ``flat`` / ``less`` are the source's
    claims: IOP's peak bytes rise with ``x``; OOP's grow less (ratio and
    bytes); OOP below IOP wherever ``x > 0``; and the same in items.
    """
    from oop.experiments.base import Check

    ob, ib = col(rows, "oop_peak_bytes"), col(rows, "iop_peak_bytes")
    oi, ii = col(rows, "oop_peak_items"), col(rows, "iop_peak_items")
    return [
        Check(grows, rank_trend(x, ib) > 0.8 and growth(ib) > 1,
              {"rank_trend": rank_trend(x, ib), "growth": growth(ib)},
              f"rank trend of IOP peak bytes vs {what} > 0.8 and last > first"),
        Check(flat, growth(ob) < growth(ib) and (max(ob) - min(ob)) < (max(ib) - min(ib)),
              {"oop_growth": growth(ob), "iop_growth": growth(ib),
               "oop_range_bytes": max(ob) - min(ob), "iop_range_bytes": max(ib) - min(ib)},
              "OOP growth (last/first) and increase (bytes) < IOP's"),
        Check(less, all(o < i for o, i, d in zip(ob, ib, x) if d > 0),
              {"oop_bytes": ob, "iop_bytes": ib}, f"oop < iop at every {what} > 0"),
        Check("in items too (tuples held vs partial aggregates), OOP grows less than IOP",
              (max(oi) - min(oi)) < (max(ii) - min(ii)) and growth(oi) < growth(ii),
              {"oop_items": oi, "iop_items": ii}, "OOP items increase and growth < IOP's"),
    ]


@dataclass(frozen=True)
class UnionFigure:
    """The words of one union-memory figure (004 Fig. 8-8, 8-11): its swept x, plot and claims.

    ``x_key`` is the row field swept (ms, plotted in s); ``filename``, ``labels``,
    ``unit``, ``xlabel``, ``title`` go to :func:`memory_plot`; ``what``, ``grows``,
    ``flat``, ``less`` to :func:`union_memory_checks`; ``same`` / ``same_expected``
    state that both plans computed the same results.
    """

    x_key: str
    filename: str
    labels: dict[str, str]
    unit: str
    xlabel: str
    title: str
    what: str
    grows: str
    flat: str
    less: str
    same: str
    same_expected: str


def union_memory_outcome(ctx: RunContext, fig: UnionFigure, rows: list[dict[str, Any]],
                         agree: bool, params: dict[str, Any]) -> Any:
    """The ``Outcome`` of a :func:`union_sweep`: ``fig``'s memory plot, its shape checks and
    the check that OOP and IOP agreed (``agree``)."""
    from oop.experiments.base import Check, Outcome

    x = [r[fig.x_key] / 1000 for r in rows]
    plot = memory_plot(ctx, fig.filename, x, rows, fig.labels, unit=fig.unit,
                       xlabel=fig.xlabel, title=fig.title)
    checks = union_memory_checks(x, rows, what=fig.what, grows=fig.grows, flat=fig.flat,
                                 less=fig.less)
    checks.append(Check(fig.same, agree, agree, fig.same_expected))
    return Outcome(params, rows, checks, [plot])


def _ranks(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    r = np.empty(len(a), np.float64)
    r[order] = np.arange(len(a), dtype=np.float64)
    # average ties
    for v in np.unique(a):
        m = a == v
        if m.sum() > 1:
            r[m] = r[m].mean()
    return r


def rank_trend(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman rank correlation of ``ys`` against ``xs`` (+1 rises, -1 falls, ~0 flat/noisy)."""
    x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    if len(x) < 2 or np.all(y == y[0]) or np.all(x == x[0]):
        return 0.0
    rx, ry = _ranks(x), _ranks(y)
    c = np.corrcoef(rx, ry)[0, 1]
    return float(round(c, 4))


def growth(ys: Sequence[float]) -> float:
    """``ys[-1] / ys[0]`` (inf when the first is 0 and the last is not)."""
    a, b = float(ys[0]), float(ys[-1])
    if a == 0:
        return 1.0 if b == 0 else float("inf")
    return round(b / a, 4)


def wins_everywhere(better: Sequence[float], worse: Sequence[float]) -> bool:
    """True when ``better[i] < worse[i]`` at every point."""
    return bool(np.all(np.asarray(better, float) < np.asarray(worse, float)))


def plt() -> Any:
    """matplotlib.pyplot with the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as pyplot

    return pyplot


def line_plot(ctx: RunContext, filename: str, x: Sequence[float],
              series: dict[str, Sequence[float]], *, xlabel: str, ylabel: str, title: str,
              logx: bool = False, logy: bool = False, ax_fn: Callable[[Any], None] | None = None
              ) -> str:
    """One line chart of ``series`` (label -> ys) against ``x``, saved as ``filename``."""
    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", markersize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if ax_fn is not None:
        ax_fn(ax)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(ctx.out_dir) / filename)
    pyplot.close(fig)
    return filename


def panel_plot(ctx: RunContext, filename: str, x: Sequence[float],
               panels: list[tuple[str, dict[str, Sequence[float]]]], *, xlabel: str, title: str,
               logx: bool = False) -> str:
    """Side-by-side line charts sharing ``x``: one ``(ylabel, {label: ys})`` per panel."""
    pyplot = plt()
    fig, axes = pyplot.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), dpi=100,
                                squeeze=False)
    for ax, (ylabel, series) in zip(axes[0], panels):
        for label, ys in series.items():
            ax.plot(list(x), list(ys), marker="o", markersize=3, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logx:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(Path(ctx.out_dir) / filename)
    pyplot.close(fig)
    return filename


def state_peak(result: Any, names: Sequence[str] | None = None) -> tuple[int, int]:
    """``(peak items, peak bytes)`` summed over operators of a Result (optionally only ``names``).

    Sums each operator's own peak, an upper bound on the plan's simultaneous peak.
    """
    items = byts = 0
    for n, m in result.metrics.items():
        if names is not None and n not in names:
            continue
        items += int(getattr(m, "peak_state_items", 0) or 0)
        byts += int(getattr(m, "peak_state_bytes", 0) or 0)
    return items, byts
