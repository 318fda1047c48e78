"""Pane-enhanced AdaptWID: eager/lazy per pane, lazy super-aggregation over panes (004 §6.3.3-6.3.4).

What it computes: the same rows as :class:`~oop.adapt.operator.AdaptWID`
(and WID) for a sliding window ``RANGE r, SLIDE s``.

How (004 "Leveraging panes" and Discussion): the window is split into panes
of ``p = gcd(r, s)`` (004 §6.2.1). The *sub-aggregation* is AdaptWID over the
tumbling pane window ``Tumbling(p)``: each (group, pane) item is either a
partial aggregate (eager) or the pane's buffered tuples (lazy), chosen by
Cond. 6.9, which for a tumbling window (``wed / SLIDE`` ~ 1) says "eager when
the pane's tuples are larger than a pane aggregate". Switching a tumbling
sub-aggregate eager -> lazy has a short transition (one open pane, not
``r / s`` windows). The *super-aggregation* is lazy: closed pane partials
(at most ``r / p`` per group) are kept, and window ``w`` is the merge of its
panes' partials when the punctuation completes it.

On a batch: as AdaptWID over panes. On a punctuation ``v``: close the panes
with ``end <= v``, keep their partials, emit every window with
``end <= v`` from its panes, purge panes that no open window needs, forward
``P(window_end, v)``.

State: the pane AdaptWID's state + the kept pane partials; key compaction
(:meth:`AdaptWID._compact_keys`) keeps the keys of the kept panes too and
renumbers their blocks. Cost per
punctuation: O(panes per window x groups in them) merges.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.adapt.operator import AdaptWID
from oop.adapt.store import Block, merge_blocks
from oop.errors import ConfigError
from oop.metrics import StateSize
from oop.operators.base import StreamInfo
from oop.stream.elements import INT64_MIN, Element
from oop.window.kinds import Sliding, Tumbling

__all__ = ["PanedAdaptWID"]


class PanedAdaptWID(AdaptWID):
    """AdaptWID over panes plus a lazy super-aggregation (see the module docstring)."""

    def infer_output(self, inputs: Any) -> StreamInfo:
        info = super().infer_output(inputs)
        assert self.cfg is not None and self.logic is not None
        k = self.cfg.kind
        if not isinstance(k, Sliding):  # pragma: no cover - AdaptConfig already checked
            raise ConfigError(f"{self.name}: panes need a Sliding or Tumbling window")
        self.window_kind = k
        self.pane = math.gcd(k.r, k.s)
        pane_cfg = AdaptConfig(Tumbling(self.pane, k.o), self.cfg.aggs,
                               n_sources=self.cfg.n_sources, thresholds=self.cfg.thresholds,
                               n_bins=self.cfg.n_bins)
        self.logic = AdaptLogic(pane_cfg, dict(self.logic.value_dtypes))
        self.panes: dict[int, Block] = {}
        self.pane_bytes = 0
        self.peak_pane_bytes = 0
        self.next_w = INT64_MIN  # windows below this were emitted
        return info

    # ---- punctuation: close panes, then windows ------------------------------------
    def flush(self) -> list[Element]:
        assert self.logic is not None
        closed = self.logic.flush()
        self._keep(closed)
        if not self.panes:
            return []
        last = max(self.panes)
        end = self.window_kind.o + (last + 1) * self.pane
        wk = self.window_kind
        top = int(wk.wids(np.array([end - 1]))[1][0])  # every window holding the last pane
        batch = self._emit(self._windows_upto(top))
        return [batch] if batch is not None else []

    def _keep(self, closed: list[tuple[int, Block]]) -> None:
        for q, blk in closed:  # a pane may come as several blocks (disjoint groups)
            g = blk.gids
            if len(g) > 1 and not (g[1:] > g[:-1]).all():  # merge_blocks needs group order
                o = np.argsort(g, kind="stable")
                blk = Block(g[o], blk.tupcnt[o], [[x[o] for x in st] for st in blk.states])
            had = self.panes.get(q)
            if had is not None:
                self.pane_bytes -= had.nbytes
                blk = merge_blocks(self.logic.aggs, had, blk)[0]  # type: ignore[union-attr]
            self.panes[q] = blk
            self.pane_bytes += blk.nbytes
        self.peak_pane_bytes = max(self.peak_pane_bytes, self.pane_bytes)

    def _closing(self, v: int) -> list[tuple[int, Block]]:
        """Close the panes ``v`` completes (kept), then the windows made of closed panes."""
        assert self.logic is not None
        self._keep(self.logic.on_punctuation(v))
        return self._windows_upto(int(self.window_kind.first_open(v)))

    def _windows_upto(self, fo: int) -> list[tuple[int, Block]]:
        """Emit windows ``next_w <= w < fo`` from their panes; purge panes no longer needed."""
        wk, p = self.window_kind, self.pane
        out: list[tuple[int, Block]] = []
        if self.panes:
            qs = np.fromiter(self.panes, np.int64, len(self.panes))
            lo, hi = wk.wids(wk.o + qs * p)
            cand = set()
            for a, b in zip(lo.tolist(), hi.tolist()):
                cand.update(range(max(a, self.next_w), min(b, fo)))
            for w in sorted(cand):
                start, end = wk.extent(w)
                q0, q1 = (start - wk.o) // p, (end - wk.o) // p
                merged: Block | None = None
                for q in range(q0, q1):
                    blk = self.panes.get(q)
                    if blk is None:
                        continue
                    merged = blk.copy() if merged is None else merge_blocks(
                        self.logic.aggs, merged, blk)[0]  # type: ignore[union-attr]
                if merged is not None and len(merged):
                    out.append((w, merged))
        if fo > self.next_w:
            self.next_w = fo
            keep_from = (wk.extent(fo)[0] - wk.o) // p  # first pane of the first open window
            for q in [q for q in self.panes if q < keep_from]:
                self.pane_bytes -= self.panes.pop(q).nbytes
        return out

    # ---- key compaction: the kept pane partials hold group codes too ---------------
    def _live_codes(self, n: int) -> np.ndarray:
        live = super()._live_codes(n)
        for b in self.panes.values():
            live[b.gids] = True
        return live

    def _remap_codes(self, keep: np.ndarray, remap: np.ndarray) -> None:
        super()._remap_codes(keep, remap)
        for b in self.panes.values():  # increasing on held codes: blocks stay sorted
            b.remap_gids(remap)

    # ---- state ---------------------------------------------------------------------
    def state_size(self) -> StateSize:
        base = super().state_size()
        return StateSize(base.items + sum(len(b) for b in self.panes.values()),
                         base.bytes + self.pane_bytes)

    def adapt_metrics(self) -> dict[str, Any]:
        m = super().adapt_metrics()
        m.update(pane=self.pane, pane_partial_bytes=self.pane_bytes,
                 peak_pane_partial_bytes=self.peak_pane_bytes)
        return m

    def snapshot(self) -> Any:
        return {**super().snapshot(), "panes": {q: b.copy() for q, b in self.panes.items()},
                "next_w": self.next_w, "pane_bytes": (self.pane_bytes, self.peak_pane_bytes)}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.panes = {q: b.copy() for q, b in state["panes"].items()}
        self.next_w = state["next_w"]
        self.pane_bytes, self.peak_pane_bytes = state["pane_bytes"]

    def _check(self) -> None:
        super()._check()
        assert self.pane_bytes == sum(b.nbytes for b in self.panes.values())
