"""OPIB-Join: order-preserving, input-buffered band / tumbling join (004 §7.3, Fig. 7-7).

What it computes: the same inner window join as OA-Join, emitted in
non-decreasing order of S0's time, by *performing* the join in that order:
inputs must be ordered (see :mod:`oop.join.inorder`; out-of-order tuples are
late and dropped with a count).

On an S1 tuple: store it in the S1 hash state if a pending or future S0 tuple
can match it (``ts >= keep_from(1, lowest)``, ``lowest`` = the oldest pending
S0 time, or ``f_0``). On an S0 tuple: append it to the *input buffer*
(pending S0 tuples, ordered). Release: a pending S0 tuple at ``t`` is joined
once every S1 partner has arrived, i.e. ``t < keep_from(0, f_1)`` (band:
``t + range1 < f_1``); released tuples probe the S1 state in order, so results
leave in S0.ts order with no output buffer. Then S1 tuples below
``keep_from(1, lowest)`` are purged and ``P(S0.ts, lowest)`` is emitted.

State: pending S0 tuples (about ``range1`` time units of S0) plus S1 tuples
back to ``lowest - range0`` -- a little more than OA-Join's two bands, but no
result buffer (cheaper than OPOB when the join's output exceeds its input).
Latency: an S0 tuple's results wait for S1 to pass ``t + range1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from oop.join.inorder import InOrderJoin
from oop.join.spec import JoinConfig
from oop.metrics import StateSize
from oop.stream.elements import INT64_MAX, Element

__all__ = ["OPIBJoin", "plan_opib"]


class OPIBJoin(InOrderJoin):
    """Order-preserving input-buffered join (see the module docstring)."""

    def __init__(self, config: JoinConfig) -> None:
        super().__init__(config)
        self.pending: list[pa.RecordBatch] = []
        self.pending_ts: list[np.ndarray] = []
        self.pending_rows = 0
        self.pending_bytes = 0

    def _lowest(self) -> int:
        return int(self.pending_ts[0][0]) if self.pending_rows else self.f[0]

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        batch, ts = self._ordered(batch, port)
        if batch.num_rows == 0:
            return []
        if port == 0:
            self.pending.append(batch)
            self.pending_ts.append(ts)
            self.pending_rows += batch.num_rows
            self.pending_bytes += batch.nbytes
        else:
            self._store_rows(1, batch, ts, self.pred.keep_from(1, self._lowest()))
        return self._progress()

    def _progress(self) -> list[Element]:
        out: list[Element] = []
        if self.pending_rows:
            limit = self.pred.keep_from(0, self.f[1])
            if int(self.pending_ts[0][0]) < limit:
                t = pa.Table.from_batches(self.pending).combine_chunks()
                ts = np.concatenate(self.pending_ts)
                n = len(ts) if limit >= INT64_MAX else int(np.searchsorted(ts, limit, side="left"))
                rel = t.slice(0, n).combine_chunks().to_batches()
                if rel:
                    block = pa.concat_batches(rel)
                    joined = self._probe_block(block, ts[:n], 0, keep_probe_order=True)
                    if joined is not None:
                        out.append(joined)
                rest = t.slice(n)
                self.pending = rest.combine_chunks().to_batches() if rest.num_rows else []
                self.pending_ts = [ts[n:]] if rest.num_rows else []
                self.pending_rows = rest.num_rows
                self.pending_bytes = sum(b.nbytes for b in self.pending)
        low = self._lowest()
        self.states[0][1].purge(self.pred.keep_from(1, low), False)
        self._track_peaks()
        out.extend(self._punct(low))
        return out

    def flush(self) -> list[Element]:
        return []

    def state_size(self) -> StateSize:
        return super().state_size() + StateSize(self.pending_rows, self.pending_bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "pending": list(self.pending),
                "pending_ts": [a.copy() for a in self.pending_ts]}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.pending = list(state["pending"])
        self.pending_ts = list(state["pending_ts"])
        self.pending_rows = sum(b.num_rows for b in self.pending)
        self.pending_bytes = sum(b.nbytes for b in self.pending)

    def _check(self) -> None:
        self.states[0][1]._check(self.pred.keep_from(1, self._lowest()))
        assert self.pending_rows == sum(len(a) for a in self.pending_ts)
        if self.pending_rows:
            ts = np.concatenate(self.pending_ts)
            assert (np.diff(ts) >= 0).all(), "pending S0 tuples out of order"
            assert ts[0] >= self._p_out


def plan_opib(left: Any, right: Any, *, strategy: Any = "iop-sort", **join_args: Any) -> Any:
    """IOP plan: a sort buffer per input (``strategy``) then :class:`OPIBJoin`."""
    from oop.iop_baseline.opob_join import _plan

    return _plan(OPIBJoin, left, right, strategy, join_args)
