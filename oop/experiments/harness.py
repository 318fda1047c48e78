"""Measuring a plan run: output rows traced to the data clock, from-scratch window oracles.

* :func:`run_traced` runs a plan and records, after every executor round
  (one feed item per source), how many rows the sink holds, the *data
  clock* (largest event time any source has seen) and the wall clock. Each
  output row is then attributed to the round that produced it, which gives
  its **logical latency**: ``data clock when emitted - window end`` (event
  time the result lags the newest input; deterministic, unlike wall time)
  and its wall-clock emission time.
* :func:`sliding_oracle` computes a time-based sliding/tumbling window
  count / sum / mean over a complete table from scratch (sorted times,
  prefix sums), independent of the engine: the ground truth that accuracy
  is measured against (004 §6.1.5, Fig. 6-11 / 6-12).
* :func:`exact_lwm_feed` -- the *exact* punctuation of an arrival-ordered
  table: after each batch, the smallest event time still to come (what an
  external source that knows its progress would punctuate).

>>> import pyarrow as pa
>>> t = pa.table({"ts": [0, 1, 5, 6, 12], "len": [1, 2, 3, 4, 5]})
>>> o = sliding_oracle(t, range_=10, slide=5, value="len")
>>> o["window_end"].tolist(), o["count"].tolist(), o["sum"].tolist()
([5, 10, 15, 20], [2, 4, 3, 1], [3.0, 10.0, 12.0, 5.0])
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from oop.stream.elements import Punctuation

__all__ = ["Traced", "run_traced", "sliding_oracle", "exact_lwm_feed"]


@dataclass
class Traced:
    """A finished run: the result plus, per output row, the round that produced it."""

    result: Any
    table: pa.Table
    clock_at_row: np.ndarray  # data clock (event time) when each output row was emitted
    wall_at_row: np.ndarray  # seconds since the run started
    wall_s: float
    rounds: int
    peak_items: int = 0  # largest simultaneous state (sum over operators) after any round
    peak_bytes: int = 0
    round_of_row: np.ndarray | None = None  # round that emitted each output row
    clock_at_round: np.ndarray | None = None  # data clock after each round (+ end pseudo-round)
    src_rows_at_round: np.ndarray | None = None  # input rows the sources had read after each round

    def completion_delay(self, arrival_ts: np.ndarray, *, range_: int, slide: int,
                         origin: int = 0, end_col: str = "window_end") -> np.ndarray:
        """Per output row: data clock at emission - data clock when its window's last tuple arrived.

        ``arrival_ts`` is the event time of every input row in feed order (one
        source). A result emitted in the round that delivered its window's last
        tuple has delay 0; waiting for slack or coarse punctuation adds to it.
        Time-based sliding/tumbling windows ``[end - range_, end)`` on the grid
        ``origin + k * slide``. Cost: O(n * range_/slide).
        """
        assert self.round_of_row is not None and self.clock_at_round is not None
        assert self.src_rows_at_round is not None
        if self.table.num_rows == 0:
            return np.empty(0, np.int64)
        ts = np.asarray(arrival_ts, np.int64)
        rnd = np.searchsorted(self.src_rows_at_round, np.arange(len(ts)), side="right")
        lo = (ts - origin) // slide
        hi = (ts - origin + range_) // slide  # exclusive
        base = int(lo.min())
        last = np.full(int(hi.max()) - base + 1, -1, np.int64)
        span = int((hi - lo).max())
        for k in range(span):
            w = lo + k
            m = w < hi
            np.maximum.at(last, w[m] - base, rnd[m])
        ends = self.table.column(end_col).to_numpy().astype(np.int64)
        w_out = (ends - origin) // slide - 1 - base
        lr = last[np.clip(w_out, 0, len(last) - 1)]
        lr = np.where((w_out >= 0) & (w_out < len(last)) & (lr >= 0), lr, self.round_of_row)
        lr = np.minimum(lr, len(self.clock_at_round) - 1)
        return self.clock_at_round[self.round_of_row] - self.clock_at_round[lr]

    def logical_latency(self, end_col: str = "window_end") -> np.ndarray:
        """``clock when emitted - window end`` per output row (event-time units)."""
        if self.table.num_rows == 0:
            return np.empty(0, np.int64)
        ends = self.table.column(end_col).to_numpy().astype(np.int64)
        return self.clock_at_row - ends


def run_traced(stream: Any) -> Traced:
    """Run ``stream``'s plan to the end, attributing each output row to its round."""
    from oop.plan.result import Result

    ex, sink = stream.executor()
    rows_after: list[int] = []
    src_rows: list[int] = []
    clock: list[int] = []
    wall: list[float] = []
    peak = [0, 0]
    t0 = time.perf_counter()

    def on_round(_: int) -> None:
        it = by = 0
        for n in ex.nodes:
            it += n.op.metrics.state_items
            by += n.op.metrics.state_bytes
        peak[0] = max(peak[0], it)
        peak[1] = max(peak[1], by)
        rows_after.append(sink.rows)
        src_rows.append(sum(s.op.metrics.tuples_in for s in ex.sources))
        clock.append(max(s.op.hwm.value for s in ex.sources))
        wall.append(time.perf_counter() - t0)

    ex.run(on_round=on_round)
    total = time.perf_counter() - t0
    # rows emitted at end of stream (flush) are attributed to a final pseudo-round
    rows_after.append(sink.rows)
    src_rows.append(sum(s.op.metrics.tuples_in for s in ex.sources))
    clock.append(max(s.op.hwm.value for s in ex.sources))
    wall.append(total)
    ra = np.asarray(rows_after, np.int64)
    idx = np.arange(sink.rows, dtype=np.int64)
    r = np.searchsorted(ra, idx, side="right")  # first round whose count exceeds i
    r = np.minimum(r, len(ra) - 1)
    table = sink.table()
    res = Result(table=table, punctuations=list(sink.punctuations),
                 metrics={n.op.name: n.op.metrics for n in ex.nodes}, late={}, wall_s=total,
                 checkpoint=None, sources=tuple(s.op.name for s in ex.sources))
    return Traced(res, table, np.asarray(clock, np.int64)[r], np.asarray(wall)[r], total,
                  len(ra) - 1, peak[0], peak[1], r, np.asarray(clock, np.int64),
                  np.asarray(src_rows, np.int64))


def sliding_oracle(table: pa.Table, *, range_: int, slide: int, value: str | None = None,
                   time_col: str = "ts", origin: int = 0) -> dict[str, np.ndarray]:
    """Ground truth of a (time-based) sliding window over all of ``table``, no grouping.

    Windows ``[origin + (w+1)*slide - range_, origin + (w+1)*slide)`` that hold at
    least one tuple; returns ``window_end``, ``count``, and with ``value``
    ``sum`` and ``mean``. Cost: O(n log n + windows).
    """
    ts = np.sort(table.column(time_col).to_numpy().astype(np.int64))
    order = np.argsort(table.column(time_col).to_numpy(), kind="stable")
    if not len(ts):
        return {"window_end": np.empty(0, np.int64), "count": np.empty(0, np.int64)}
    first = (ts[0] - origin) // slide
    last = (ts[-1] - origin + range_) // slide  # exclusive
    w = np.arange(first, last, dtype=np.int64)
    ends = origin + (w + 1) * slide
    starts = ends - range_
    lo = np.searchsorted(ts, starts, side="left")
    hi = np.searchsorted(ts, ends, side="left")
    cnt = hi - lo
    keep = cnt > 0
    out = {"window_end": ends[keep], "count": cnt[keep]}
    if value is not None:
        v = table.column(value).to_numpy().astype(np.float64)[order]
        ps = np.concatenate([[0.0], np.cumsum(v)])
        s = (ps[hi] - ps[lo])[keep]
        out["sum"] = s
        out["mean"] = s / out["count"]
    return out


def exact_lwm_feed(batches: list[pa.RecordBatch], time_col: str = "ts") -> list[Any]:
    """Batches with the exact low-watermark punctuation after each (strictly increasing)."""
    mins = np.array([b.column(time_col).to_numpy().min() if b.num_rows else np.iinfo(np.int64).max
                     for b in batches], dtype=np.int64)
    suffix = np.minimum.accumulate(mins[::-1])[::-1]
    out: list[Any] = []
    last = None
    for i, b in enumerate(batches):
        out.append(b)
        v = int(suffix[i + 1]) if i + 1 < len(batches) else int(
            b.column(time_col).to_numpy().max()) + 1 if b.num_rows else None
        if v is not None and (last is None or v > last) and v < np.iinfo(np.int64).max:
            out.append(Punctuation(time_col, v))
            last = v
    return out
