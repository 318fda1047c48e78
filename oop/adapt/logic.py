"""AdaptWID's Aggregate logic: the per-group eager/lazy state machine (004 §6.3.3-6.3.4).

:class:`AdaptLogic` is the runtime the operator (:class:`~oop.adapt.operator.AdaptWID`)
builds from an :class:`~oop.adapt.config.AdaptConfig`; it has narrow hooks --
:meth:`~oop.adapt.batch.BatchPath.on_batch`,
:meth:`~oop.adapt.close.ClosePath.on_punctuation`, :meth:`~oop.adapt.close.ClosePath.flush`,
:meth:`AdaptLogic.snapshot` / :meth:`AdaptLogic.restore` -- so it is testable without a
plan. Its parts, one module each, each a subclass of the one before (read them in this
order):

1. :mod:`oop.adapt.core` -- what is held (004 Fig. 6-17: the eager store ``H``, the lazy
   buffer ``B``, ``winVol`` with the flag, ``tupcnt``, the measures of Cond. 6.9) and
   what it costs (state bytes, peak);
2. :mod:`oop.adapt.modes` -- the per-group mode switch: the state machine, ``theta``
   (Cond. 6.9), the eager -> lazy bookkeeping of a punctuation, key compaction of the
   per-group arrays, the timeline;
3. :mod:`oop.adapt.batch` -- a batch (004 "Processing Tuples"): Bucket, monitoring,
   lazy -> eager, routing, the fold into partials and ``B``; nothing is emitted;
4. :mod:`oop.adapt.close` -- a punctuation (004 "Processing Punctuation"): close the
   complete windows, emit ``(wid, block)`` in window-id order, purge their partials and
   expired buffered tuples, settle the groups;
5. this module -- snapshot / restore at a punctuation boundary and the invariant
   checker :meth:`AdaptLogic._check`.

The compiled kernels are in :mod:`oop.adapt.kernels` (by family), each beside a
tuple-at-a-time reference.

Punctuation rule (the whole): on a batch nothing is emitted; a tuple whose windows are
all complete is late (counted). On a punctuation ``v`` every window ``w <
kind.first_open(v)`` closes: emitted once, its partials and the buffered tuples whose
last window closed purged, ``winVol`` reduced, eager groups under the lower threshold
turned lazy, groups with ``winVol == 0`` removed; the operator forwards ``v``.

Cost: per batch O(n x windows-per-tuple) compiled and O(1) Python calls; per punctuation
O(|B| x closing windows + partials emitted) vectorized and O(closing windows) Python
calls; no per-tuple Python (details in :mod:`oop.adapt.batch`, :mod:`oop.adapt.close`).
Key compaction (the operator's ``_compact_keys``) renumbers the group codes to the live
groups (:meth:`~oop.adapt.modes.GroupModes.live_codes`,
:meth:`~oop.adapt.modes.GroupModes.remap_groups`).
"""

from __future__ import annotations

import copy

import numpy as np

from oop.adapt.close import ClosePath
from oop.adapt.groups import EAGER, GID, LAZY, MODE_BIT
from oop.adapt.state import LogicState
from oop.stream.elements import INT64_MIN

__all__ = ["AdaptLogic"]


class AdaptLogic(ClosePath):
    """The runtime state machine (see the module docstring). Not thread-safe."""

    # ---- snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> LogicState:
        """The state as a :class:`~oop.adapt.state.LogicState` (a deep copy). O(state)."""
        return copy.deepcopy(LogicState(
            eager=self.eager.snapshot(), buffer=self.buffer.snapshot(), wed=self.wed.snapshot(),
            offsets=self.offsets.snapshot(), lwm=self.lwm.value, first_open=self.first_open,
            active=self.volume.active, open_wids=list(self.open_wids), n_groups=self.n_groups,
            wv=self._wv[:self.cap], tupcnt_from=self.tupcnt_from,
            shifts=[a.shift for a in self.aggs], tuples_in=self.tuples_in, late=self.late,
            switches_to_eager=self.switches_to_eager, switches_to_lazy=self.switches_to_lazy,
            timeline=self.timeline, peak=self.peak))

    def restore(self, s: LogicState) -> None:
        """Continue from ``s`` (taken by :meth:`snapshot` of the same configuration). O(state)."""
        s = copy.deepcopy(s)
        self.eager.restore(s.eager)
        for a, k in zip(self.aggs, s.shifts):
            a.shift = k
        self.buffer.restore(s.buffer)
        self.offsets.restore(s.offsets)
        self.lwm.value = s.lwm
        self.volume.active = s.active
        self.first_open = s.first_open
        self.extents.restore(s.wed, s.open_wids)
        self._wv, self.tupcnt_from = s.wv, s.tupcnt_from
        self.cap = len(self._wv) if self.monitor else s.n_groups
        self.n_groups = s.n_groups
        self.tuples_in, self.late = s.tuples_in, s.late
        self.switches_to_eager, self.switches_to_lazy = s.switches_to_eager, s.switches_to_lazy
        self.timeline, self.peak = s.timeline, s.peak
        self._recount_live()

    # ---- invariants ----------------------------------------------------------------------------
    def _check(self) -> None:
        """Invariants: stores consistent; winVol == tuples held per group; modes agree with state."""
        self.eager._check()
        self.buffer._check()
        g = self.n_groups
        assert (self._wv[:g] >= 0).all(), "negative winVol"
        assert not (self._wv[:g, 1:] & MODE_BIT).any(), "flag bit outside column 0"
        if not self.monitor:
            assert not self._wv.any() and self.volume.active == 0, "forced mode monitors"
            for b in self.eager.blocks.values():
                assert b.tupcnt.shape[1] == 0, "forced mode holds tupcnt"
            if self.mode_name == "eager":
                assert self.buffer.n_rows == 0
            else:
                assert self.eager.n_partials == 0
            return
        live = self.wv.any(axis=1)
        assert int(np.count_nonzero(live)) == self.n_live, "live-group count disagrees"
        assert int(np.count_nonzero(live & (self.mode == EAGER))) == self.n_eager_live, \
            "eager live-group count disagrees"
        # winVol[g, k] == buffered tuples of (g, k) + tupcnt of g's partials
        expect = np.zeros((max(g, 1), self.S), np.int64)
        npart = np.zeros(max(g, 1), np.int64)
        for b in self.buffer.bins:
            for ch in b:
                src = ch["src"] if self.S > 1 else np.zeros(len(ch["gid"]), np.int64)
                np.add.at(expect, (ch["gid"], src), 1)
        for w, blk in self.eager.blocks.items():
            assert w >= self.first_open or self.first_open == INT64_MIN, f"closed window {w} held"
            assert w in self.open_wids, f"partials of window {w} which is not open"
            tc = self.counts(blk)
            assert tc.shape == (len(blk), self.S), "tupcnt neither stored nor derivable"
            assert blk.gids.dtype == GID and blk.tupcnt.dtype == np.int32, "state layout widened"
            expect[blk.gids] += tc
            npart[blk.gids] += 1
            if self.tupcnt_from is not None and not self.aggs[self.tupcnt_from].spec.counts_rows:
                assert blk.tupcnt.shape[1] == 0
        wv = self.wv
        assert (expect[:g] == wv).all(), "winVol disagrees with the held tuples"
        assert self.volume.active == int(wv.sum()), "stream volume != sum of winVol"
        assert (wv[npart[:g] > 0].sum(axis=1) > 0).all(), "partials of a dead group"
        # eager groups never have tuples in B
        for b in self.buffer.bins:
            for ch in b:
                assert (self._mode(ch["gid"]) == LAZY).all(), "an eager group has tuples in B"
        if self.mode_name == "lazy":
            assert self.eager.n_partials == 0
        tl = self.timeline.transitional
        if (not tl or tl[-1] == 0) and self.eager.n_partials:  # _union's shortcut is sound
            with_p = (self.eager.held_gids() if self.dense  # type: ignore[union-attr]
                      else np.unique(np.concatenate([b.gids for b in self.eager.blocks.values()])))
            assert (self._mode(with_p) == EAGER).all(), \
                "a transitional group that the last punctuation did not count"
        for w in self.open_wids:
            assert w >= self.first_open or self.first_open == INT64_MIN
        self.wed._check()
        self.offsets._check()
