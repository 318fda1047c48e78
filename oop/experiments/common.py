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
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from oop.experiments.base import RunContext

__all__ = ["pick", "timed", "rank_trend", "growth", "wins_everywhere", "line_plot", "plt",
           "state_peak", "panel_plot"]

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
