"""OPOB-Join: order-preserving, output-buffered band / tumbling join (004 §7.3, Fig. 7-6).

What it computes: the same inner window join as OA-Join
(:mod:`oop.join.oa_join`), emitted in non-decreasing order of S0's time --
the IOP way: inputs must be ordered (see :mod:`oop.join.inorder`; tuples
that break the order are late and dropped with a count).

On a tuple of input i (ordered): probe the other input's stored tuples at
once (the OA-Join hash state and numba kernel) but put the results into an
*output buffer* instead of releasing them; store the tuple if a future tuple
of the other input can match it (``ts >= keep_from(i, f_{1-i})``); advance
``f_i`` and purge the other input's tuples below ``keep_from(1-i, f_i)``.

Release: every later result has ``S0.ts >= bound = min(f_0, keep_from(0, f_1))``
(band: ``min(f_0, f_1 - range1)``), so buffered results with ``S0.ts < bound``
are emitted, sorted by S0.ts (stable), followed by ``P(S0.ts, bound)``. On a
punctuation: ``f_i = max(f_i, v)``, purge, release.

State: the two hash states (about one band of each input) **plus the output
buffer** (sorted runs, one per probed batch) -- the results of roughly ``range1`` time units, which grows with the
band and with the join's output rate; this is what OA-Join saves. Cost per
batch: the probe, a sort of the batch's results, and on release a binary search
per run plus a merge-sort of the released rows (never a copy of the whole buffer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from oop.join.inorder import InOrderJoin
from oop.join.spec import JoinConfig, config_from_args
from oop.metrics import StateSize
from oop.stream.elements import INT64_MAX, Element

__all__ = ["OPOBJoin", "plan_opob"]


class OPOBJoin(InOrderJoin):
    """Order-preserving output-buffered join (see the module docstring)."""

    def __init__(self, config: JoinConfig) -> None:
        super().__init__(config)
        # the output buffer: sorted runs (one per probed batch) of results and their S0 times
        self.runs: list[tuple[pa.RecordBatch, np.ndarray, float]] = []
        self.buffer_rows = 0
        self.buffer_bytes = 0
        self.peak_buffer_rows = 0

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        i, o = port, 1 - port
        f_before = self.f[o]
        batch, ts = self._ordered(batch, port)
        if batch.num_rows == 0:
            return []
        joined = self._probe_block(batch, ts, i, keep_probe_order=False)
        if joined is not None:
            t0 = joined.column(self.out_time[0]).to_numpy().astype(np.int64, copy=False)
            order = np.argsort(t0, kind="stable")
            run = joined.take(pa.array(order))
            self.runs.append((run, t0[order], run.nbytes / max(1, run.num_rows)))
            self.buffer_rows += run.num_rows
            self.peak_buffer_rows = max(self.peak_buffer_rows, self.buffer_rows)
            self._rebytes()
        self._store_rows(i, batch, ts, self.pred.keep_from(i, f_before))
        return self._progress()

    def _rebytes(self) -> None:
        self.buffer_bytes = int(sum(len(t) * bpr for _, t, bpr in self.runs))

    def _progress(self) -> list[Element]:
        for s in (0, 1):
            self.states[0][s].purge(self.pred.keep_from(s, self.f[1 - s]), False)
        bound = min(self.f[0], self.pred.keep_from(0, self.f[1]))
        out: list[Element] = []
        if self.buffer_rows:
            pieces: list[pa.RecordBatch] = []
            times: list[np.ndarray] = []
            runs = []
            for run, t0, bpr in self.runs:
                k = len(t0) if bound >= INT64_MAX else int(np.searchsorted(t0, bound, "left"))
                if k:
                    pieces.append(run.slice(0, k))
                    times.append(t0[:k])
                if k < len(t0):
                    runs.append((run.slice(k), t0[k:], bpr))
            if pieces:
                self.runs = runs
                rel = pa.concat_batches(pieces)
                order = np.argsort(np.concatenate(times), kind="stable")
                out.append(rel.take(pa.array(order)))
                self.buffer_rows -= rel.num_rows
                self._rebytes()
        self._track_peaks()
        out.extend(self._punct(bound))
        return out

    def flush(self) -> list[Element]:
        return []

    def state_size(self) -> StateSize:
        return super().state_size() + StateSize(self.buffer_rows, self.buffer_bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "runs": [(r, t.copy(), b) for r, t, b in self.runs],
                "buffer_rows": self.buffer_rows}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.runs = [(r, t.copy(), b) for r, t, b in state["runs"]]
        self.buffer_rows = state["buffer_rows"]
        self._rebytes()

    def _check(self) -> None:
        for s in (0, 1):
            self.states[0][s]._check(self.pred.keep_from(s, self.f[1 - s]))
        assert self.buffer_rows == sum(len(t) for _, t, _ in self.runs)
        for run, t0, _ in self.runs:
            assert run.num_rows == len(t0) and (np.diff(t0) >= 0).all()
            assert len(t0) == 0 or t0[0] >= self._p_out, "a buffered result is below the punctuation"


def plan_opob(left: Any, right: Any, *, strategy: Any = "iop-sort", **join_args: Any) -> Any:
    """IOP plan: a sort buffer per input (``strategy``) then :class:`OPOBJoin`."""
    return _plan(OPOBJoin, left, right, strategy, join_args)


def _plan(cls: type, left: Any, right: Any, strategy: Any, join_args: dict[str, Any]) -> Any:
    from oop.iop_baseline.sort_buffer import SortBuffer
    from oop.strategy import parse_strategy

    st = parse_strategy(strategy)
    if st.kind == "oop":
        return left.join(right, **join_args)
    if st.kind == "iop-sort":
        mode, slack = "punctuation", 0
    elif st.kind == "iop-bsort":
        mode, slack = "tuples", st.amount
    else:
        mode, slack = "time", st.amount
    join_args.pop("workers", None)
    cfg = config_from_args(**{"name": cls.__name__.lower().replace("join", "_join"), **join_args})
    ls = left.via(SortBuffer(mode=mode, slack=slack, name=f"sort[{mode}]"))
    rs = right.via(SortBuffer(mode=mode, slack=slack, name=f"sort[{mode}]"))
    return ls.via(cls(cfg), rs)
