"""What AdaptWID's Aggregate holds (004 §6.3.4.2, Fig. 6-17), and what it costs.

:class:`LogicCore` is the base of :class:`~oop.adapt.logic.AdaptLogic`: it builds the
state from an :class:`~oop.adapt.config.AdaptConfig` and measures it; the paths that
change it are its subclasses (:mod:`oop.adapt.modes`, :mod:`oop.adapt.batch`,
:mod:`oop.adapt.close`).

State (004 Fig. 6-17):

* the eager store ``H`` -- for bounded aggregates dense lanes over (open-window ring x
  eager-group slot), :mod:`oop.adapt.dense`, with ``tupcnt`` a lane (or the presence
  lane: tumbling, one source); for holistic ones one sorted block of partials per open
  window id, :mod:`oop.adapt.store`;
* the shared lazy buffer ``B`` split into bins (:mod:`oop.adapt.buffer`);
* per group ``g``: ``winVol[g, source]`` (tuples of ``g`` still in an open window, per
  source) with the flag ``alt`` (lazy 0 / eager 1) packed into bit 30 of ``winVol[g,
  0]`` -- 4 bytes per source and live group, nothing else: a group with partials always
  has ``winVol > 0`` (the tuple behind a partial is counted in its last, still open,
  window), so liveness and the partial count come from ``winVol`` and the store;
* ``tupcnt`` per partial (004's ``tupleCnt``: the tuples that expire when the partial is
  emitted) is a column of the store except for tumbling windows over one source, where it
  equals the partial's row count and is read from a ``count`` state or an ``nn`` lane
  (materialized at the first null of that column, :meth:`LogicCore._materialize_tupcnt`);
* the stream's measures for Cond. 6.9 (004 §6.3.4.1): ``wed``
  (:class:`~oop.progress.WindowExtentDuration`), per-source offsets
  (:class:`~oop.progress.SourceOffsets`), the stream volume
  (:class:`~oop.progress.StreamVolume`); the low-watermark, the first open window id and
  the set of open window ids.

Per-group arrays are indexed by the engine's dense group code, so they span every group
code held, like the key dictionary that every window implementation shares (not counted
for any); the entries of live groups -- what 004's hash table ``H`` holds -- are counted
as state. Forced eager (WID) and forced lazy (buffering) keep no monitoring state: no
winVol, no tupcnt.

No punctuation rule here: nothing in this module emits, purges or forwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sortedcontainers import SortedSet

from oop.adapt.algebra import BlockAgg, block_agg
from oop.adapt.buffer import LazyBuffer
from oop.adapt.config import AdaptConfig, Timeline
from oop.adapt.cost import MemoryCostModel
from oop.adapt.dense import DenseEagerStore
from oop.adapt.extents import OpenExtents
from oop.adapt.groups import GID
from oop.adapt.state import PeakBytes
from oop.adapt.store import Block, EagerStore
from oop.errors import ConfigError
from oop.progress.measures import SourceOffsets, StreamVolume, WindowExtentDuration
from oop.progress.watermark import LowWatermark
from oop.stream.elements import INT64_MIN

__all__ = ["LogicCore"]


class LogicCore:
    """AdaptWID's held state and its sizes (see the module docstring). Not thread-safe."""

    def __init__(self, cfg: AdaptConfig, value_dtypes: dict[str, np.dtype]) -> None:
        self.cfg = cfg
        self.kind = cfg.kind
        # the Bucket's window geometry as plain ints (kind.r / .s / .o validate on each read)
        self._range, self._slide, self._origin = cfg.kind.r, cfg.kind.s, cfg.kind.o
        self._range_f = float(self._range)
        self.mode_name = cfg.thresholds.mode
        self.S = cfg.n_sources
        self.aggs: list[BlockAgg] = [block_agg(a) for a in cfg.aggs]
        self.value_cols = cfg.value_columns
        for c in self.value_cols:
            dt = np.dtype(value_dtypes[c])
            if not (np.issubdtype(dt, np.number) or dt == np.bool_):
                raise ConfigError(
                    f"adaptive_window: column {c!r} has dtype {dt}; AdaptWID buffers numeric "
                    "value columns only -- aggregate a numeric column or use Stream.window"
                )
        self.value_dtypes = {c: np.dtype(value_dtypes[c]) for c in self.value_cols}
        cols: dict[str, np.dtype] = {"gid": np.dtype(GID), "ts": np.dtype(np.int64)}
        if self.S > 1:
            cols["src"] = np.dtype(np.int8)
        for c in self.value_cols:  # validity columns are added at a column's first null
            cols[c] = self.value_dtypes[c]
        self.buffer = LazyBuffer(cfg.n_bins, cols)
        #: forced eager (WID) / lazy (buffering) keep no monitoring state: no winVol, no tupcnt
        self.monitor = self.mode_name == "adaptive"
        #: bounded aggregates: dense (open-window ring x eager-group slot) lanes; holistic
        #: ones: sorted blocks of bags (oop.adapt.store)
        self.dense = not any(a.holistic for a in self.aggs)
        self.eager: EagerStore | DenseEagerStore
        if self.dense:
            tumbling_one = self.kind.r == self.kind.s and self.S == 1
            tc = "none" if not self.monitor else "derived" if tumbling_one else "stored"
            ring = -(-self.kind.r // self.kind.s) + 1  # windows of a tuple + one: grows on demand
            self.eager = DenseEagerStore(self.aggs, self.value_dtypes, self.S, tc, ring=ring)
        else:
            self.eager = EagerStore(self.aggs)
        self.model = MemoryCostModel(self.kind.r, self.kind.s)
        #: the open windows and their extents' duration ``wed`` (oop.adapt.extents)
        self.extents = OpenExtents((self._range, self._slide, self._origin))
        self.offsets = SourceOffsets(self.S)
        self.volume = StreamVolume(self.kind.r)  # the whole stream's active tuples / RANGE
        self.lwm = LowWatermark("wid-time", stream="adaptwid")
        self.first_open = INT64_MIN  # every window w < first_open is complete
        #: ``wed`` given from outside (a partition of ThreadedAdapt: the one-thread value,
        #: :meth:`given_terms`); None: this operator's own measurement
        self.given_wed: int | None = None
        #: validity columns one thread's buffer holds after the current batch (given)
        self._validity_after: list[str] = []
        # per group
        self.cap = 0
        self.n_groups = 0
        # winVol[g, source] (int32), with the eager flag packed into bit 30 of column 0
        self._wv = np.zeros((0, self.S), np.int32)
        # tupcnt derived from the partials (no column of its own): tumbling windows over one
        # source, where tupcnt == the partial's row count == a count() state or, while the
        # column has shown no null, an nn lane (materialized at the first null)
        self.tupcnt_from: int | None = (self._derivable_tupcnt()
                                        if self.monitor and not self.dense else None)
        self.n_live = 0  # groups with winVol > 0 (tuples or partials held): entries of H
        self.n_eager_live = 0  # live groups in mode EAGER
        self._scratch = np.zeros(0, np.int64)  # all -1: the kernels' group slots (not state)
        self._hwm = np.zeros(self.S, np.int64)  # the kernels' view of the hwms (not state)
        # counters
        self.tuples_in = 0
        self.late = 0
        self.switches_to_eager = 0
        self.switches_to_lazy = 0
        self.timeline = Timeline()
        self.peak = PeakBytes()

    @property
    def wed(self) -> WindowExtentDuration:
        """Cond. 6.9's ``wed`` (:class:`~oop.adapt.extents.OpenExtents`)."""
        return self.extents.wed

    @property
    def open_wids(self) -> SortedSet:
        """The open window ids, ascending (:class:`~oop.adapt.extents.OpenExtents`)."""
        return self.extents.open_wids

    def given_terms(self, terms: dict[str, Any]) -> None:
        """Take Cond. 6.9's stream-wide terms as one thread measured them
        (:meth:`StreamTerms.on_batch <oop.adapt.extents.StreamTerms.on_batch>`):
        ``wed`` (kept through the closes until the next call) and the validity columns
        one thread's buffer holds (``tup``) -- before this batch, and after its routing
        (``validity_after``: one thread adds a column at its first null, whichever
        partition that row is in). A partition of
        :class:`~oop.adapt.threaded.ThreadedAdapt` is given them before each element.
        O(columns)."""
        self.given_wed = self.wed.value = int(terms["wed"])
        self._add_validity(terms["validity"])
        self._validity_after = list(terms.get("validity_after", ()))

    def _add_validity(self, columns: list[str]) -> None:
        """Hold a validity column in B for each of ``columns`` (from now on). O(columns)."""
        for c in columns:
            self.buffer.add_column(c + "?", np.dtype(np.bool_), True)

    def _ensure_scratch(self) -> None:
        """Grow the kernels' scratch (all -1, indexed by group code) to cover every group
        code held (amortized O(1): it doubles)."""
        if len(self._scratch) < self.n_groups:
            self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)

    # ---- sizes ---------------------------------------------------------------------------------
    @property
    def group_entry_bytes(self) -> int:
        """Bytes of one live group's monitoring entry (0 when forced eager/lazy: no monitoring)."""
        if self.mode_name != "adaptive":
            return 0
        return self._wv.itemsize * self.S  # the flag is packed into winVol

    @property
    def aggr(self) -> float:
        """Bytes per partial aggregate: measured from the store, else from the layout."""
        if self.dense:  # bytes of one (window, slot) cell of the dense lanes
            return float(self.eager.cell_bytes)  # type: ignore[union-attr]
        if self.eager.n_partials:
            return self.eager.nbytes / self.eager.n_partials
        item = {c: t.itemsize for c, t in self.value_dtypes.items()}
        tc = 4 * self.S if self.monitor and self.tupcnt_from is None else 0
        return np.dtype(GID).itemsize + tc + sum(a.fixed_bytes(item.get(a.column or "", 8)) for a in self.aggs)

    @property
    def tup(self) -> int:
        """Bytes per buffered tuple (the buffer's row layout)."""
        return self.buffer.row_bytes

    def state_bytes(self) -> dict[str, int]:
        """Held state by kind: eager partials, lazy buffer, group entries. O(1)."""
        p, b, g = self.eager.nbytes, self.buffer.nbytes, self.n_live * self.group_entry_bytes
        return {"partials": p, "buffer": b, "groups": g, "total": p + b + g}

    def index_bytes(self) -> int:
        """Bytes of the per-group arrays indexed by group code -- ``winVol``, the kernels'
        scratch, the dense store's group -> slot map -- which span every group code held
        (not state of 004's ``H``; charged to the state budget by the operator; key
        compaction shrinks them). O(1)."""
        b = self._wv.nbytes + self._scratch.nbytes
        if self.dense:
            b += self.eager.slot_of.nbytes  # type: ignore[union-attr]
        return b

    def state_items(self) -> int:
        return self.eager.n_partials + self.buffer.n_rows

    def total_bytes(self) -> int:
        """``state_bytes()["total"]`` without building the dict. O(1)."""
        return (self.eager.nbytes + self.buffer.n_rows * self.buffer.row_bytes
                + self.n_live * self.group_entry_bytes)

    def _track_peak(self) -> None:
        self.peak.track(self.eager.nbytes, self.buffer.n_rows * self.buffer.row_bytes,
                        self.n_live * self.group_entry_bytes)

    # ---- tupcnt --------------------------------------------------------------------------------
    def _derivable_tupcnt(self) -> int | None:
        """Index of the aggregate whose first state column equals tupcnt, or None.

        Only for tumbling windows over one source (every tuple's last window is its
        only window, so tupcnt == rows of the partial).
        """
        if self.kind.r != self.kind.s or self.S != 1:
            return None
        for j, a in enumerate(self.aggs):
            if a.spec.counts_rows:
                return j
        for j, a in enumerate(self.aggs):
            if not a.holistic:
                return j  # nn == rows until the column shows a null
        return None

    def counts(self, blk: Block) -> np.ndarray:
        """tupcnt of a block, (n, sources) -- stored, or derived (see ``tupcnt_from``)."""
        if blk.tupcnt.shape[1]:
            return blk.tupcnt
        return blk.states[self.tupcnt_from][0].reshape(-1, 1)  # type: ignore[index]

    def _materialize_tupcnt(self) -> None:
        """A null appeared in the column whose nn stood for tupcnt: store tupcnt from now on."""
        j = self.tupcnt_from
        assert j is not None
        self.tupcnt_from = None
        store = self.eager
        for w, b in store.blocks.items():
            old = store._bytes(b)
            b.tupcnt = b.states[j][0].astype(np.int32).reshape(-1, 1)
            store.nbytes += store._bytes(b) - old

    def partial_counts(self) -> np.ndarray:
        """Eager partials per group (dense over group ids), from the store. O(partials)."""
        out = np.zeros(max(self.n_groups, 1), np.int64)
        for b in self.eager.blocks.values():
            out[b.gids] += 1
        return out
