"""AdaptWID's per-group mode switch: eager / lazy / transitional (004 §6.3.2-6.3.4).

Group state machine (every group starts lazy; the flag ``alt`` is bit 30 of
``winVol[g, 0]``, :mod:`oop.adapt.core`)::

              winVol > up*theta (tuple arrival: build partials from B)
      LAZY  ---------------------------------------------------------> EAGER
       ^  \\                                                            |
       |   \\ last old partial emitted                                   | winVol < down*theta
       |    \\                                                          | (punctuation)
       |     +-------------- TRANSITIONAL (lazy + old partials) <------+
       |                         | winVol > up*theta: back to EAGER (B merged into partials)
       +-- winVol == 0 (decide_on="remaining"): entry removed (it starts lazy again)

``theta`` is Cond. 6.9 (:class:`~oop.adapt.cost.MemoryCostModel`, 004 §6.3.2) with
``aggr`` = measured bytes per partial, ``tup`` = bytes per buffered tuple (the buffer's
layout), ``wed`` from :class:`~oop.progress.WindowExtentDuration`, per-source offsets from
:class:`~oop.progress.SourceOffsets` and per-group per-source volume ``winVol[g, K] /
RANGE``: ``theta = base + sum_K winVol[g, K] / RANGE * offset[K]`` with ``base = aggr *
wed / (tup * SLIDE)`` (:meth:`GroupModes._theta_base`). ``wed`` is measured once for the
union (``hwm`` = the earliest-arriving source's high-watermark, so it is the *duration*
of 004 Fig. 6-16), not per source (:class:`~oop.adapt.extents.OpenExtents`); a partition
of a run on key partitions is given the one-thread ``wed`` and ``tup``
(:meth:`~oop.adapt.core.LogicCore.given_terms`) and computes ``theta`` by this same code.
Two thresholds ``up > down`` keep a group whose volume
hovers near ``theta`` from thrashing (004 §6.3.4.2).

Where the switches happen (compiled, :mod:`oop.adapt.kernels`):

* lazy -> eager on a batch (004 §6.3.3): :func:`~oop.adapt.kernels.route_batch` flags
  every touched lazy group over ``up * theta``; :mod:`oop.adapt.batch` then pulls its
  tuples out of ``B`` into partials;
* eager -> lazy on a punctuation (004 §6.3.4.2): :func:`~oop.adapt.kernels.settle_close`
  clears the flag of eager groups under ``down * theta`` -- they keep their partials until
  emitted (*transitional*, 004 Fig. 6-18) -- and removes groups whose ``winVol`` reached 0
  (:mod:`oop.adapt.close`). The test uses the volume of the extents that just closed
  (``Thresholds.decide_on="closed_extent"``, default) or, as 004 §6.3.4.2 words it, the
  tuples remaining after the punctuation (``"remaining"``), which flips dense
  tumbling-window groups at every boundary (see :class:`~oop.adapt.cost.Thresholds`).
  Once per punctuation, after all its windows closed (also when they close run by run).

This module holds the Python side: the per-group arrays (growth, key compaction), the
flag and volume readers, ``theta``'s inputs for the kernels, the live-group counts and
the timeline of eager / transitional / lazy groups sampled at every punctuation. Only
groups whose tuples expire at a punctuation are re-evaluated (004 §6.3.4.2: "if input
tuples expire and winVol decreases below the threshold").
"""

from __future__ import annotations

import numpy as np

from oop.adapt.config import AdaptConfig
from oop.adapt.core import LogicCore
from oop.adapt.groups import EAGER, GID, LAZY, MODE_BIT, VOL_MASK
from oop.adapt.kernels.settle import count_transitional, settle_close

__all__ = ["GroupModes"]

_NO_GROUPS = np.zeros(0, GID)  # settle_close's inputs when no partial closes
_NO_TC = np.zeros((0, 1), np.int32)
_NO_GONE = np.zeros(0, np.int64)


class GroupModes(LogicCore):
    """The per-group entries and their eager / lazy flags (see the module docstring)."""

    def __init__(self, cfg: AdaptConfig, value_dtypes: dict[str, np.dtype]) -> None:
        super().__init__(cfg, value_dtypes)
        #: Cond. 6.9's skew term: only over several sources, and not for absolute thresholds
        self._skew_on = self.S > 1 and not cfg.thresholds.absolute

    # ---- per-group arrays ----------------------------------------------------------------------
    def _grow(self, n: int) -> None:
        if not self.monitor:  # forced modes hold no per-group entries
            self.n_groups = max(self.n_groups, n)
            self.cap = max(self.cap, n)
            return
        if n <= self.cap:
            self.n_groups = max(self.n_groups, n)
            return
        cap = max(n, 2 * self.cap, 1024)
        wv = np.zeros((cap, self.S), np.int32)
        wv[: self.cap] = self._wv
        self._wv, self.cap = wv, cap
        self.n_groups = n

    def live_codes(self, n: int) -> np.ndarray:
        """A bool per group code ``< n``: does any state still hold it -- a partial (eager
        store), a buffered tuple (B) or, monitored, ``winVol > 0`` (which counts both,
        :meth:`~oop.adapt.logic.AdaptLogic._check`) -- for key compaction. O(n + partial
        slots + |B|)."""
        live = np.zeros(n, bool)
        if self.monitor:
            g = min(n, self.n_groups)
            live[:g] = (self._wv[:g] != 0).any(axis=1)  # the flag alone: an entry too
        live[self.eager.held_gids()] = True
        live[self.buffer.held_gids()] = True
        return live

    def remap_groups(self, keep: np.ndarray, remap: np.ndarray) -> None:
        """Key compaction: group codes ``keep`` (ascending, every code any state holds)
        become ``0..len(keep)-1`` (``remap``: old code -> new code, -1 for a forgotten one).
        Every held code is renumbered -- the eager store's slots or blocks, the lazy
        buffer's rows (re-binned) -- and the per-group arrays (``winVol`` with its flag,
        the kernels' scratch) shrink to the codes kept. O(n_groups + state), vectorized."""
        k = len(keep)
        self.eager.remap_gids(remap, k)
        self.buffer.remap_gids(remap)
        if self.monitor:
            cap = max(k, 1024)
            wv = np.zeros((cap, self.S), np.int32)
            wv[:k] = self._wv[keep]
            self._wv, self.cap = wv, cap
        else:
            self.cap = k
        self.n_groups = k
        self._scratch = np.full(k, -1, np.int64)

    # ---- flags, volumes and Cond. 6.9 ----------------------------------------------------------
    def _vol(self, gs: np.ndarray) -> np.ndarray:
        """winVol[gs, source] without the flag bit."""
        return self._wv[gs] & VOL_MASK

    def _mode(self, gs: np.ndarray) -> np.ndarray:
        """The flag ``alt`` of groups ``gs``: LAZY (0) or EAGER (1)."""
        return ((self._wv[gs, 0] & MODE_BIT) != 0).astype(np.int8)

    @property
    def mode(self) -> np.ndarray:
        """Flags of every group code (a copy; for reports and checks)."""
        if not self.monitor:
            return np.zeros(self.n_groups, np.int8)
        return self._mode(np.arange(self.n_groups))

    @property
    def wv(self) -> np.ndarray:
        """winVol of every group code and source (a copy without the flag bit)."""
        if not self.monitor:
            return np.zeros((self.n_groups, self.S), np.int32)
        return self._vol(np.arange(self.n_groups))

    def _theta(self, gs: np.ndarray) -> np.ndarray:
        th = self.cfg.thresholds
        if th.absolute:
            return np.ones(len(gs))
        vol_src = self.volume.of(self._vol(gs))  # per group and source: winVol[g, K] / RANGE
        return self.model.threshold(self.aggr, self.tup, self.wed.value, vol_src,
                                    self.offsets.offsets())

    def _theta_base(self) -> float:
        """Cond. 6.9's ``base = aggr * wed / (tup * SLIDE)`` (``theta`` without the skew
        term) for the switch kernels; 1.0 unmonitored or with absolute thresholds. O(1)."""
        if self.monitor and not self.cfg.thresholds.absolute:
            return float(self.aggr) * float(self.wed.value) / (float(self.tup) * self._slide)
        return 1.0

    def _load_hwms(self) -> np.ndarray:
        """The per-source high-watermarks as the kernels' array (``_hwm``, reused). O(S)."""
        hwm = self._hwm
        for k, h in enumerate(self.offsets.hwms):
            hwm[k] = h.value
        return hwm

    # ---- the eager -> lazy switch at a punctuation ---------------------------------------------
    def _settle(self, tcs: list[tuple[np.ndarray, np.ndarray]],
                expired: list[np.ndarray]) -> None:
        """A punctuation's group bookkeeping (004 §6.3.4.2), after its closing partials were
        popped (``tcs``: their groups and ``tupcnt``, per closing window) and the buffer's
        expired tuples purged (``expired``: their distinct groups, at most one array).

        Only groups whose tuples expire now are looked at (004 §6.3.4.2: "if input tuples
        expire and winVol decreases below the threshold"): groups with a closing partial
        (eager or transitional) and groups with expiring buffered tuples (lazy). One kernel
        (:func:`~oop.adapt.kernels.settle_close`): winVol -= the partials' tupcnt, eager ->
        lazy under ``down * theta`` (eager groups hold no buffered tuples), groups with
        winVol 0 leave H. O(partials x sources) compiled."""
        th_cfg = self.cfg.thresholds
        hwm = self._load_hwms()
        self._ensure_scratch()
        if len(tcs) == 1:
            pg, ptc = tcs[0]
        elif tcs:
            pg = np.concatenate([g for g, _ in tcs])
            ptc = np.concatenate([t.astype(np.int64, copy=False) for _, t in tcs])
        else:
            pg, ptc = _NO_GROUPS, _NO_TC
        gone = expired[0] if expired else _NO_GONE
        n_sw, n_dead, n_dead_e, n_tc = settle_close(
            self._wv, pg, ptc, gone, self._scratch, th_cfg.decide_on == "closed_extent",
            self._theta_base(), self._range_f, self._skew_on, hwm, float(th_cfg.down), VOL_MASK,
            MODE_BIT, th_cfg.decide_on == "remaining")
        if n_tc:
            self.volume.expire(int(n_tc))
        self.switches_to_lazy += n_sw
        self.n_eager_live -= n_sw
        self.n_live -= n_dead
        self.n_eager_live -= n_dead_e

    # ---- live groups and the timeline ----------------------------------------------------------
    def _recount_live(self) -> None:
        if not self.monitor:
            self._count_held_groups()
            return
        live = self.wv.any(axis=1)
        self.n_live = int(np.count_nonzero(live))
        self.n_eager_live = int(np.count_nonzero(live & (self.mode == EAGER)))

    def _count_held_groups(self) -> None:
        """Forced modes keep no winVol: count the groups holding partials / tuples. O(state)."""
        g = max(self.n_groups, 1)
        held = np.zeros(g, bool)
        if self.dense:
            held[self.eager.held_gids()] = True  # type: ignore[union-attr]
        else:
            for b in self.eager.blocks.values():
                held[b.gids] = True
        n_e = int(np.count_nonzero(held))
        for chs in self.buffer.bins:
            for ch in chs:
                held[ch["gid"]] = True
        self.n_live, self.n_eager_live = int(np.count_nonzero(held)), n_e

    def _sample(self, v: int) -> None:
        if not self.monitor:
            self._count_held_groups()
        eager = self.n_eager_live
        trans = 0
        if self.eager.n_partials and eager < self.n_live:  # lazy groups that still have partials
            if self.dense:  # slot holders whose flag is lazy: one pass over the slots
                trans = int(count_transitional(self.eager.gid_of, self._wv,  # type: ignore[union-attr]
                                               MODE_BIT))
            else:
                with_p = np.unique(np.concatenate([b.gids for b in self.eager.blocks.values()]))
                trans = int(np.count_nonzero(self._mode(with_p) == LAZY))
        t = self.timeline
        t.punct.append(int(v))
        t.eager.append(eager)
        t.transitional.append(trans)
        t.lazy.append(self.n_live - eager - trans)
        t.partial_bytes.append(self.eager.nbytes)
        t.buffer_bytes.append(self.buffer.n_rows * self.buffer.row_bytes)
        t.group_bytes.append(self.n_live * self.group_entry_bytes)
        t.wed.append(int(self.wed.value))
