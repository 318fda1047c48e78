"""Latency vs accuracy of disorder handling: punctuation (OOP) vs consistent / generous slack (IOP).

Shared by fig6-11 (band disorder) and fig6-12 (block-sorted disorder), 004 §6.1.5.
One window query ``agg [RANGE r, SLIDE s]`` over one arrival-ordered packet
feed, answered four ways on the same rows:

* **punctuation** (OOP) -- WID fed the feed's own punctuation (exact for the
  data set: the true low-watermark for band disorder, end-of-block for
  block-sorted), nothing is late;
* **consistent slack k** (IOP) -- the buffering window aggregate
  (:class:`~oop.iop_baseline.buffering_window.BufferingWindow`) completing
  extents at ``hwm - k``: a tuple below that bound is dropped from *every*
  extent it belongs to;
* **generous slack k** (IOP) -- the same buffering aggregate, but a late tuple
  is dropped only from the extents already closed and still counts in the
  open ones. Slack plans ignore punctuation (slack replaces it).

**Accuracy**: against a from-scratch oracle over all rows -- mean error % of
the average (|got - true| / true, a missing window counts 100 %) or the
percentage of wrong answers. **Latency**, in event-time ms of the *data
clock* (the largest event time the source has delivered; deterministic, the
same on every machine): ``latency_ms`` = clock when the result is emitted
minus the window's end (how far the input has moved past the window when
its result comes out). Also reported: the *completion delay* -- clock at
emission minus clock when the window's last tuple arrived
(:meth:`~oop.experiments.harness.Traced.completion_delay`), 0 = "at once";
a result emitted *before* its window was complete (slack too small: its
last tuples are dropped) counts 0 there and how early it came is
``early_ms``. Windows ending after the last event time (completed only by
end-of-stream) are not timed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from oop.experiments.harness import Traced, exact_lwm_feed, run_traced, sliding_oracle
from oop.experiments import plans

__all__ = ["Measured", "measure", "punctuation_run", "slack_run", "score", "latency_error_plot"]


@dataclass
class Measured:
    mechanism: str
    slack_ms: int | None
    error: float  # mean error % (metric="mean") or % wrong answers (metric="count")
    latency_ms: float  # mean (data clock at emission - window end)
    latency_p95_ms: float
    completion_delay_ms: float  # mean delay after the window's last tuple arrived (>= 0)
    early_ms: float  # mean of how early premature results (negative delay) came out
    windows: int
    late_drops: int  # tuples dropped as late (generous: tuple-extent pairs, summed over phases)


def _agg(metric: str) -> Any:
    from oop.window import aggregates as agg

    return agg.mean("len") if metric == "mean" else agg.count()


def _col(metric: str) -> str:
    return "mean_len" if metric == "mean" else "count"


def score(got: dict[int, float], truth: dict[str, np.ndarray], metric: str) -> float:
    """Mean error % (``mean``) or % of wrong answers (``count``) over the oracle's windows."""
    ends = truth["window_end"]
    true = truth["mean"] if metric == "mean" else truth["count"]
    errs = []
    for e, t in zip(ends.tolist(), true.tolist()):
        g = got.get(int(e))
        if metric == "mean":
            errs.append(100.0 if g is None else abs(g - t) / abs(t) * 100.0)
        else:
            errs.append(0.0 if g is not None and int(g) == int(t) else 100.0)
    return float(np.mean(errs)) if errs else 0.0


def _source(items: list[Any], schema: pa.Schema, punctuation: Any, name: str = "packets") -> Any:
    import oop
    from oop.punctuation.external import External

    return oop.from_batches(items, time="ts", unit="ms", punctuation=punctuation or External(),
                            schema=schema, name=name)


def _dropped(tr: Traced) -> int:
    return int(sum(m.late_total for m in tr.result.metrics.values()))


def _measure(name: str, slack: int | None, traces: list[tuple[Traced, int, int, int]],
             arrival_ts: np.ndarray, truth: dict[str, np.ndarray], metric: str) -> Measured:
    got: dict[int, float] = {}
    delays, lags = [], []
    dropped = 0
    max_ts = int(arrival_ts.max())
    for tr, rng, sl, origin in traces:
        if tr.table.num_rows:
            ends_a = tr.table.column("window_end").to_numpy()
            vals = tr.table.column(_col(metric)).to_pylist()
            got.update({int(e): v for e, v in zip(ends_a.tolist(), vals) if v is not None})
            # windows ending after the data are completed only by end-of-stream: not timed
            inner = ends_a <= max_ts
            delays.append(tr.completion_delay(arrival_ts, range_=rng, slide=sl,
                                              origin=origin)[inner])
            lags.append(tr.logical_latency()[inner])
        dropped += _dropped(tr)
    d = np.concatenate(delays) if delays else np.zeros(0)
    d = d if len(d) else np.zeros(1)
    lg = np.concatenate(lags) if lags else np.zeros(0)
    lg = lg if len(lg) else np.zeros(1)
    pos = np.maximum(d, 0)
    early = -d[d < 0]
    return Measured(name, slack, round(score(got, truth, metric), 4), round(float(lg.mean()), 2),
                    round(float(np.percentile(lg, 95)), 2), round(float(pos.mean()), 2),
                    round(float(early.mean()), 2) if len(early) else 0.0, len(got), dropped)


def punctuation_run(items: list[Any], schema: pa.Schema, kind: Any, metric: str) -> Traced:
    return run_traced(plans.oop_window(_source(items, schema, None), kind, _agg(metric)))


def slack_run(batches: list[pa.RecordBatch], schema: pa.Schema, kind: Any, metric: str,
              slack: int, semantics: str) -> Traced:
    """IOP: the buffering window aggregate behind a time slack (no punctuation used)."""
    from oop.iop_baseline.buffering_window import BufferingWindow, Slack

    op = BufferingWindow(kind, _agg(metric), slack=Slack(int(slack), semantics), heartbeat=False,
                         name="buffering_window")
    return run_traced(_source(batches, schema, None).via(op))


def measure(batches: list[pa.RecordBatch], punct_items: list[Any], *, range_: int, slide: int,
            slacks: list[int], metric: str, generous: bool,
            progress: Callable[..., Any]) -> list[Measured]:
    """Run the punctuation plan and every slack plan; return one :class:`Measured` each."""
    from oop.window.kinds import Sliding

    table = pa.Table.from_batches(batches)
    schema = table.schema
    arrival_ts = table.column("ts").to_numpy()
    truth = sliding_oracle(table, range_=range_, slide=slide, value="len")
    kind = Sliding(range=range_, slide=slide)
    out = [_measure("punctuation", None, [(punctuation_run(punct_items, schema, kind, metric),
                                             range_, slide, 0)], arrival_ts, truth, metric)]
    for k in progress(slacks, desc="slack"):
        for sem in ("consistent", "generous") if generous else ("consistent",):
            tr = slack_run(batches, schema, kind, metric, k, sem)
            out.append(_measure(f"{sem} slack", k, [(tr, range_, slide, 0)], arrival_ts, truth,
                                metric))
    return out


def exact_items(batches: list[pa.RecordBatch]) -> list[Any]:
    """The feed with its exact low-watermark punctuation after each batch."""
    return exact_lwm_feed(batches)


def latency_error_plot(out_dir: Any, filename: str, curves: list[tuple[list[Measured], str]],
                       punct: Measured, punct_label: str, *, ylabel: str, title: str) -> str:
    """Error vs latency: one line per slack mechanism (points labelled with their slack, ms)
    and the punctuation plan as a star. Saved as ``out_dir/filename``; returns ``filename``."""
    from pathlib import Path

    from oop.experiments.common import plt

    pyplot = plt()
    fig, ax = pyplot.subplots(figsize=(6.4, 4.2), dpi=100)
    for ms, mk in curves:
        ax.plot([m.latency_ms for m in ms], [m.error for m in ms], mk, label=ms[0].mechanism)
        for m in ms:
            ax.annotate(f"{m.slack_ms}", (m.latency_ms, m.error), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax.plot([punct.latency_ms], [punct.error], "*", markersize=14, label=punct_label)
    ax.set_xlabel("mean latency: data clock at result - window end (ms of event time)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(out_dir) / filename)
    pyplot.close(fig)
    return filename
