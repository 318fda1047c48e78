"""Where the window operator keeps its cells: the dense ring or hash cells (layout="auto").

What it decides, for :class:`~oop.window.aggregate.WindowAggregate`: the
layout of the partial aggregates per ``(unit, group code)`` -- the dense
ring of :class:`~oop.window.ring.Ring` (units x codes) or the hash table of
live cells of :class:`~oop.window.hashstore.HashCells` -- by the density
rule: on the first batch, hash where there are >= 1024 keys and a window
(Paned-WID: a pane) holds < 5 % of them (``TO_HASH``); re-checked after every
punctuation, dense -> hash below 5 %, hash -> dense above 20 %
(:mod:`oop.window.ring`'s ``TO_DENSE``); and, for hostile feeds
(:mod:`oop.limits`), hash cells before a dense ring grows over a mostly
empty span of units (a row stamped far ahead of the rest), back to dense
once the span is small again. Hash cells are refused where the late rule
revises windows the evaluator cannot re-read from them
(:meth:`~oop.window.late.LateRule.may_hash`).

Punctuation rule: none of its own -- the operator calls :meth:`LayoutChoice._relayout`
and :meth:`LayoutChoice._span_back` after each punctuation's purge. Cost O(1) per
check except the first-batch density (O(rows)) and a switch (one pass over
the open state, counted in ``plan_info["layout_switches"]``).

:class:`LayoutChoice` is a mixin of the operator: it reads ``units``,
``lanes``, ``rule``, ``layout_config``, ``enc``, ``kind``, ``name``,
``plan_info``, ``ring`` and ``_span_hash``, and sets the ring through the
operator's ``_set_ring``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from oop.errors import ConfigError
from oop.window.hashstore import HashCells
from oop.window.kinds import Sliding
from oop.window.ring import TO_HASH

if TYPE_CHECKING:
    from oop.window.cells import CellStore
    from oop.window.evaluator import Evaluator
    from oop.window.keys import KeyEncoder
    from oop.window.kinds import WindowKind
    from oop.window.late import LateRule

__all__ = ["LayoutChoice"]

#: layout="auto": hash cells need this many keys, and switch at these densities
#: (live cells / (open units x keys)); the gap between the two avoids flapping
_HASH_MIN_KEYS = 1024
_LAYOUT_NAMES = {"hash": "hash (unit, code) cells", "dense": "dense ring x codes"}
#: a dense ring that would grow beyond this many bytes for a span of open units holding
#: < TO_HASH of its cells (a row far ahead of the rest: a bad clock) goes to hash cells
#: first; it returns to dense once its span is below a quarter of this
_SPAN_HASH_BYTES = 64 << 20


class LayoutChoice:
    """The layout rules of the window operator's cell store (see the module docstring)."""

    # the operator's state this mixin reads (set at the operator's open)
    name: str
    kind: "WindowKind"
    units: "Evaluator"
    lanes: list[Any]
    rule: "LateRule"
    layout_config: str
    enc: "KeyEncoder"
    plan_info: dict[str, Any]
    ring: "CellStore | None"
    _span_hash: bool

    if TYPE_CHECKING:
        def _set_ring(self, ring: "CellStore") -> None: ...  # the operator's (state bounds)

    def _can_hash(self) -> bool:
        """Whether the hash layout can hold this operator's state.

        Not with late='update' (revisions read per-window rows); for
        Paned-WID only on sliding/tumbling windows with sum-type aggregates
        (count, sum, mean, var, std, and holistic ones: the hash emission walks
        each pane's live cells; min/max/first/last and landmark windows read
        dense pane rows).
        """
        return self.units.hash_lanes_ok() and self.rule.may_hash()

    def _auto_may_hash(self) -> bool:
        """Whether ``layout="auto"`` may pick hash cells: where each tuple updates one unit.

        Panes and tumbling windows. Sliding WID updates ``range/slide`` cells
        per tuple, and the hash layout then holds that many more live cells,
        each probed and compacted at every punctuation: measured slower than
        the dense ring (1M sparse keys, 10 s / 1 s: 0.33 vs 0.71 M tuples/s,
        ``experiments/bench_window.py``), so auto keeps it dense (``layout="hash"``
        still forces it, at about half the memory).
        """
        return self.units.one_unit_per_row() and self._can_hash()

    def _choose_layout(self, codes: np.ndarray, units: np.ndarray) -> str:
        """Dense (ring x codes) where keys are dense, hash cells where they are sparse.

        Auto rule, on the first batch: hash when there are >= 1024 keys and a
        window (Paned-WID: a pane) holds on average < 5 % of them (the dense
        layout would be > 95 % empty cells). The first batch only shows the
        keys seen so far, so :meth:`_relayout` re-checks after every
        punctuation. Auto picks hash only where :meth:`_auto_may_hash`.
        """
        can_hash = self._can_hash()
        if self.layout_config == "hash":
            if not can_hash:
                raise ConfigError(f"{self.name}: layout='hash' needs a late policy other than "
                                  "'update', and with panes a sliding window and no "
                                  "min/max/first/last aggregate")
            layout = "hash"
        elif (self.layout_config == "dense" or not self._auto_may_hash()
              or self.enc.n_codes < _HASH_MIN_KEYS):
            layout = "dense"
        else:
            u = units - units.min()
            span = int(u.max()) + 1
            if span * self.enc.n_codes <= 1 << 26:  # mark (unit, code) pairs in a bitmap: no sort
                seen = np.zeros(span * self.enc.n_codes, bool)
                seen[u * self.enc.n_codes + codes] = True
                pairs = int(np.count_nonzero(seen))
                n_units = int(np.count_nonzero(seen.reshape(span, -1).any(axis=1)))
            else:
                pairs = np.unique(u * (self.enc.n_codes + 1) + codes).shape[0]
                n_units = np.unique(u).shape[0]
            density = pairs / (n_units * self.enc.n_codes)
            layout = "hash" if density < TO_HASH else "dense"
            self.plan_info["key_density"] = float(density)
        self.plan_info["layout"] = _LAYOUT_NAMES[layout]
        return layout

    def _relayout(self) -> None:
        """Re-check ``layout="auto"`` after a punctuation, and move the state if it went stale.

        Keys keep arriving after the first batch (a stream over 1M ids shows
        ~60K of them in its first 64K rows), so the first batch's choice can
        be wrong later. Density = live cells / (open units x keys seen), O(1)
        from the store's exact live count. Dense -> hash below 5 %
        (:meth:`HashCells.from_ring`); hash -> dense above 20 %
        (:meth:`HashCells.to_ring`); the gap keeps a stream near one
        threshold from switching back and forth. A switch costs one pass over
        the open state; it is counted in ``plan_info["layout_switches"]``.
        """
        ring = self.ring
        if self.layout_config != "auto" or ring is None or not self._auto_may_hash():
            return
        n = self.enc.n_codes
        units = ring.top - ring.base
        if n < _HASH_MIN_KEYS or units <= 0:
            return
        density = ring.live / (units * n)
        moved = ring.relayout(density, n, HashCells)
        if moved is None:
            return
        self.ring = moved
        self._span_hash = False  # the density rule now owns the layout (see _span_back)
        self.plan_info["layout"] = _LAYOUT_NAMES[moved.layout]
        self.plan_info["key_density"] = float(density)
        self.plan_info["layout_switches"] = self.plan_info.get("layout_switches", 0) + 1

    def _units_per_row(self) -> int:
        """Most window ids one tuple updates (WID, overlapping windows)."""
        k = self.kind
        r, sl = (k.r, k.s) if isinstance(k, Sliding) else (getattr(k, "range", 1), getattr(k, "slide", 1))
        return max(1, -(-int(r) // max(int(sl), 1)))

    def _span_may_hash(self) -> bool:
        """Whether hash cells can hold the state when the span of open units is sparse: WID
        (any aggregates and late policy), and Paned-WID where :meth:`_can_hash`."""
        u = self.units
        return (self.layout_config == "auto" and u.hash_lanes_ok()
                and self.rule.may_hash(u.hash_revisions_ok()))

    def _sparse_span(self, low: int, top: int, new_cells: int) -> bool:
        """Whether the dense ring, grown to units ``[min(base, low), max(top, ring top))``,
        would take more than ``_SPAN_HASH_BYTES`` for fewer than ``TO_HASH`` live cells:
        a row stamped far ahead of (or behind) the rest. Then the state goes to hash cells
        (O(live cells)) before anything is allocated. O(1)."""
        ring = self.ring
        if ring is None:
            live, span = 0, top - low
            R = 1 << max(int(span - 1).bit_length(), 1)
        else:
            growth = ring.dense_growth(low, top)  # None: no growth (or no dense rows at all)
            if growth is None:  # most batches: asked first, it is the cheaper answer
                return False
            live, (span, R) = ring.live, growth
        if not self._span_may_hash():
            return False
        C = max(self.enc.n_codes, 64, ring.C if ring is not None else 0)
        nbytes = R * C * 8 * len(self.lanes)
        if nbytes <= _SPAN_HASH_BYTES or span <= max(4096, 64 * self._units_per_row()):
            return False
        density = (live + new_cells) / (span * max(self.enc.n_codes, 1))
        if density >= TO_HASH:
            return False
        self._span_hash = True
        self.plan_info["layout"] = _LAYOUT_NAMES["hash"]
        self.plan_info["sparse_span_units"] = int(span)
        if ring is not None:
            self.plan_info["layout_switches"] = self.plan_info.get("layout_switches", 0) + 1
        return True

    def _span_back(self) -> bool:
        """Hash cells chosen for a sparse span go back to the dense ring once the span is
        small again (the far row was emitted), unless the auto rule would keep them."""
        ring = self.ring
        if not self._span_hash or ring is None:  # _span_hash: hash cells (_sparse_span)
            return False
        span = ring.top - ring.base
        C = max(self.enc.n_codes, 64)
        if (2 * span + 2) * C * 8 * len(self.lanes) > _SPAN_HASH_BYTES // 4:
            return False
        self._span_hash = False
        if self._auto_may_hash() and self.enc.n_codes >= _HASH_MIN_KEYS:
            return False  # the density rule of _relayout decides
        self._set_ring(ring.to_dense(self.enc.n_codes))
        self.plan_info["layout"] = _LAYOUT_NAMES["dense"]
        self.plan_info["layout_switches"] = self.plan_info.get("layout_switches", 0) + 1
        return True
