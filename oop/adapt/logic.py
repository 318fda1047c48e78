"""AdaptWID's Aggregate logic: per-group eager/lazy state machine (004 §6.3.3-6.3.4).

State (004 Fig. 6-17): the eager store ``H`` -- for bounded aggregates dense
lanes over (open-window ring x eager-group slot), :mod:`oop.adapt.dense`, with
``tupcnt`` a lane (or the presence lane: tumbling, one source); for holistic
ones one sorted block of partials per open window id, :mod:`oop.adapt.store`
-- the shared lazy buffer ``B`` split into
bins (:mod:`oop.adapt.buffer`) and, per group ``g``: ``mode[g]`` (the flag
``alt``: lazy 0 / eager 1), ``winVol[g, source]`` (tuples of ``g`` still in an
open window, per source; the flag is bit 30 of ``winVol[g, 0]``) -- 4 bytes
per source and live group, nothing else: a group with partials always has
``winVol > 0`` (the tuple behind a partial is counted in its last, still
open, window), so liveness and the partial count come from ``winVol`` and
the store. A lazy group that still
has partials is *transitional*. ``tupcnt`` per partial is a column of the
store except for tumbling windows over one source, where it equals the
partial's row count and is read from a ``count`` state or an ``nn`` lane
(materialized at the first null of that column).

Group state machine (every group starts lazy)::

              winVol > up*theta (tuple arrival: build partials from B)
      LAZY  ---------------------------------------------------------> EAGER
       ^  \\                                                            |
       |   \\ last old partial emitted                                   | winVol < down*theta
       |    \\                                                          | (punctuation)
       |     +-------------- TRANSITIONAL (lazy + old partials) <------+
       |                         | winVol > up*theta: back to EAGER (B merged into partials)
       +-- winVol == 0 (decide_on="remaining"): entry removed (it starts lazy again)

The eager -> lazy test uses the volume of the extents that just closed
(``Thresholds.decide_on="closed_extent"``, default) or, as 004 §6.3.4.2 words
it, the tuples remaining after the punctuation (``"remaining"``), which flips
dense tumbling-window groups at every boundary (see :class:`Thresholds`).

``theta`` is Cond. 6.9 (:class:`~oop.adapt.cost.MemoryCostModel`) with
``aggr`` = measured bytes per partial, ``tup`` = bytes per buffered tuple
(the buffer's layout), ``wed`` from :class:`~oop.progress.WindowExtentDuration`,
per-source offsets from :class:`~oop.progress.SourceOffsets` and per-group
per-source volume ``winVol[g, K] / RANGE``. ``wed`` is measured once for the
union (``hwm`` = the earliest-arriving source's high-watermark, so it is
the *duration* of 004 Fig. 6-16), not per source.

Late tuples: a tuple behind the punctuation still joins its windows that are
open (004: update extents from ``max{punctuatedWid + 1, i}``); only a tuple
whose windows are all complete is late (counted, dropped).

On a batch (columns of numpy arrays): compute each tuple's window-id range
``[lo, hi)`` (the Bucket), then one fused kernel
(:func:`~oop.adapt.kernels.route_batch`) clips ``lo`` to the first open window
(a tuple whose windows all closed is late), adds to ``winVol`` and the
per-source high-watermarks, switches the touched lazy groups over the upper
threshold to eager and routes every row eager or lazy. ``wed`` starts for new
extents (an O(1) check when every window of the batch is open already); the
switching groups' tuples are pulled from their bins of B; the eager rows are
folded into partials in place (dense store: one slot+presence kernel and one
kernel per aggregate over the whole batch, lazy rows skipped -- no gather;
block store: one vectorized group-by) and the lazy rows appended to B.
Nothing is emitted on a batch.

On a punctuation ``v``: every window ``w < kind.first_open(v)`` is complete.
The eager block of each closing window is popped (one slot kernel per window,
:func:`~oop.adapt.kernels.dense_pop_slots`). Bounded aggregates: one kernel pass
over B (:func:`~oop.adapt.kernels.close_fold`) computes each tuple's closing
windows, purges those whose last window closed (``winVol`` drops by them), gives
each group with a closing tuple a transient slot and counts the (closing window,
group) tuples -- a ``count`` aggregate's lane and every other one's presence --
and returns the kept tuples in bin order with their ``gid``/``ts`` gathered (B
is rebuilt from them, the value columns by one gather each); the other
aggregates are folded into transient lanes (closing window x slot) by the
dense store's kernels, and each window's row is its block. Holistic
aggregates: :func:`~oop.adapt.kernels.close_scan` and one group-by of the
(tuple, window) pairs. Transitional groups (in both: 004 Fig. 6-18) are
merged into the eager block in place (groups matched through a scratch
array), the other lazy groups are emitted as a block of their own. Then one
kernel (:func:`~oop.adapt.kernels.settle_close`) does the group bookkeeping:
``winVol`` drops by the popped partials' ``tupcnt``, eager groups under the
lower threshold become lazy (transitional while they have partials) and
groups with ``winVol == 0`` are removed (counted out of the live groups).
Slots with no partial left are released by one kernel
(:func:`~oop.adapt.kernels.dense_release`). Output rows of a window come in no
particular group order. A punctuation costs O(closing windows) Python calls
(about a dozen numpy / kernel calls for one closing window, most of them per
aggregate lane) plus the compiled passes.

Cost: per batch O(n * windows-per-tuple) compiled, O(1) Python calls, plus, when
groups switch, O(rows of B in their bins + rows staged since B was last binned:
each row is binned once); per punctuation O(|B| * closing windows + partials
emitted) vectorized: only groups whose tuples expire are re-evaluated. No
per-tuple Python. Per-group arrays are indexed by the engine's dense group
code, so they span every group code held, like the key dictionary that every
window implementation shares (not counted for any); the entries of live
groups -- what 004's hash table ``H`` holds -- are counted as state. Key
compaction (the operator's ``_compact_keys``) renumbers the codes to the
live groups (:meth:`AdaptLogic.live_codes`, :meth:`AdaptLogic.remap_groups`).
"""

from __future__ import annotations

import copy

import numpy as np
from sortedcontainers import SortedSet

from oop.adapt.algebra import BlockAgg, Rows, block_agg, state_take
from oop.adapt.bucket import covered_windows, expand
from oop.adapt.buffer import Chunk, LazyBuffer
from oop.adapt.config import AdaptConfig, Timeline
from oop.adapt.cost import MemoryCostModel
from oop.adapt.kernels import (ROW_EAGER, ROW_LATE, close_fold, close_scan, count_transitional,
                               group_pairs, match_groups, route_batch, segment_tupcnt,
                               settle_close)
from oop.adapt.dense import DenseEagerStore, fold_aggs, lane_dtypes
from oop.adapt.groups import EAGER, GID, GID_MAX, LAZY, MODE_BIT, VOL_MASK
from oop.adapt.state import LogicState, PeakBytes
from oop.adapt.store import Block, EagerStore
from oop.errors import ConfigError
from oop.progress.measures import SourceOffsets, StreamVolume, WindowExtentDuration
from oop.progress.watermark import LowWatermark
from oop.stream.elements import INT64_MIN

__all__ = ["AdaptLogic"]

_NO_GROUPS = np.zeros(0, GID)  # settle_close's inputs when no partial closes
_NO_TC = np.zeros((0, 1), np.int32)
_NO_GONE = np.zeros(0, np.int64)

#: a punctuation closes windows run by run where this many empty window ids separate two
#: closing windows (see AdaptLogic._close_in_runs)
_SPARSE_GAP = 64


def _run_ends(closing: list[int]) -> np.ndarray:
    """The closing windows (ascending) after which more than ``_SPARSE_GAP`` window ids are
    empty: the ends of all runs but the last. O(len)."""
    ws = np.asarray(closing, np.int64)
    return ws[np.flatnonzero(np.diff(ws) > _SPARSE_GAP)]


def _valid(ch: Chunk, col: str) -> np.ndarray:
    """Validity of ``col`` in a chunk (no validity column: the column has shown no null)."""
    m = ch.get(col + "?")
    return np.ones(len(ch["gid"]), bool) if m is None else m


class AdaptLogic:
    """The runtime state machine (see the module docstring). Not thread-safe."""

    def __init__(self, cfg: AdaptConfig, value_dtypes: dict[str, np.dtype]) -> None:
        self.cfg = cfg
        self.kind = cfg.kind
        # the Bucket's window geometry as plain ints (kind.r / .s / .o validate on each read)
        self._range, self._slide, self._origin = cfg.kind.r, cfg.kind.s, cfg.kind.o
        self._tumbling = self._range == self._slide
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
        self.wed = WindowExtentDuration(self.kind.r)
        self.offsets = SourceOffsets(self.S)
        self.volume = StreamVolume(self.kind.r)  # the whole stream's active tuples / RANGE
        self.lwm = LowWatermark("wid-time", stream="adaptwid")
        self.first_open = INT64_MIN  # every window w < first_open is complete
        self.open_wids: SortedSet = SortedSet()
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
        self._scratch = np.zeros(0, np.int64)  # all -1: group_pairs' slots (not state)
        self._zeros8 = np.zeros(0, np.int8)  # source 0 of one-source batches (not state)
        self._route_out = np.zeros(9, np.int64)  # route_batch's counters (not state)
        self._hwm = np.zeros(self.S, np.int64)  # route_batch's view of the hwms (not state)
        self._geom = np.array([self._range, self._slide, self._origin], np.int64)
        self._ones = np.ones(0, np.bool_)  # all-valid scratch (not state)
        #: lane dtypes of each aggregate (dense: the transient fold at a close)
        self._lane_dts = ([lane_dtypes(a, self.value_dtypes.get(a.column or "")) for a in self.aggs]
                          if self.dense else [])
        self._count_at = next((j for j, a in enumerate(self.aggs) if a.spec.counts_rows), None)
        #: the aggregates a close folds besides the counted one (close_fold counts)
        self._rest_at = [j for j in range(len(self.aggs)) if j != self._count_at]
        self._rest_aggs = [self.aggs[j] for j in self._rest_at]
        self._lo = np.empty(0, np.int64)  # window-id ranges of the current batch (not state)
        self._idx = np.empty(0, np.int64)  # its lazy rows (not state)
        self._hi = np.empty(0, np.int64)
        #: [a, b]: every window id in it that is >= first_open is open (0, -1: none known)
        self._open_span = (0, -1)
        #: Cond. 6.9's skew term: only over several sources, and not for absolute thresholds
        self._skew_on = self.S > 1 and not cfg.thresholds.absolute
        # counters
        self.tuples_in = 0
        self.late = 0
        self.switches_to_eager = 0
        self.switches_to_lazy = 0
        self.timeline = Timeline()
        self._flushing = False
        self.peak = PeakBytes()

    # ---- sizes ------------------------------------------------------------------
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

    # ---- per-group arrays ---------------------------------------------------------
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
        :meth:`_check`) -- for key compaction. O(n + partial slots + |B|)."""
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

    def _theta(self, gs: np.ndarray) -> np.ndarray:
        th = self.cfg.thresholds
        if th.absolute:
            return np.ones(len(gs))
        vol_src = self.volume.of(self._vol(gs))  # per group and source: winVol[g, K] / RANGE
        return self.model.threshold(self.aggr, self.tup, self.wed.value, vol_src,
                                    self.offsets.offsets())

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

    def _recount_live(self) -> None:
        if not self.monitor:
            self._count_held_groups()
            return
        live = self.wv.any(axis=1)
        self.n_live = int(np.count_nonzero(live))
        self.n_eager_live = int(np.count_nonzero(live & (self.mode == EAGER)))

    # ---- tupcnt ---------------------------------------------------------------------
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

    # ---- the Bucket --------------------------------------------------------------
    def _wids(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.kind.wids(ts)
        if self.first_open != INT64_MIN:
            lo = np.maximum(lo, self.first_open)
        return lo, hi

    # ---- tuples ---------------------------------------------------------------------
    def on_batch(self, gids: np.ndarray, ts: np.ndarray, src: np.ndarray | None,
                 values: dict[str, tuple[np.ndarray, np.ndarray | None]],
                 top: int | None = None) -> int:
        """Fold a batch in; returns the tuples found late. O(n x windows per tuple).

        ``values``: column -> (values, validity; None: no null); ``top``: a bound on the
        group codes (every code ``< top``; e.g. the key dictionary's size), else computed. One fused kernel
        (:func:`~oop.adapt.kernels.route_batch`) clips the rows' window ranges, updates
        winVol and the per-source high-watermarks, switches lazy groups over the upper
        threshold and classifies each row eager / lazy / late; the eager rows are folded
        in place (dense store: no gather), the lazy rows appended to B (one gather per
        column), the switching groups' buffered tuples pulled from their bins and folded.
        """
        n = len(gids)
        if n == 0:
            return 0
        self.tuples_in += n
        ts = np.asarray(ts, np.int64)
        gids = np.asarray(gids, np.int64)
        if self.S == 1 or src is None:
            src = self._src0(n)
        else:
            src = np.asarray(src, np.int8)
        if len(self._lo) < n:  # the Bucket's output (route_batch writes it): reused scratch
            self._lo = np.empty(max(n, 2 * len(self._lo)), np.int64)
            self._hi = np.empty(max(n, 2 * len(self._hi)), np.int64)
            self._idx = np.empty(max(n, 2 * len(self._idx)), np.int64)
        lo, hi = self._lo[:n], self._hi[:n]
        if top is None:
            top = int(gids.max()) + 1
        if top > GID_MAX:
            raise ConfigError(f"adaptive_window: {top} groups exceed the int32 group codes of "
                              "AdaptWID's state; aggregate on fewer groups or use Stream.window")
        self._grow(top)
        if self.monitor and len(self._scratch) < self.n_groups:  # kernels index it by group code
            self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)
        th = self.cfg.thresholds
        base = 1.0
        if self.monitor and not th.absolute:  # Cond. 6.9: aggr * wed / (tup * SLIDE)
            base = float(self.aggr) * float(self.wed.value) / (float(self.tup) * self._slide)
        hws = self.offsets.hwms
        hwm = self._hwm
        for k, h in enumerate(hws):  # the SourceOffsets' high-watermarks, as an array
            hwm[k] = h.value
        cls = np.empty(n, np.int8)
        out = self._route_out
        sw = route_batch(gids, src, ts, self._geom, lo, hi, self.first_open, self._wv, self._scratch,
                         VOL_MASK, MODE_BIT, self.monitor, self.mode_name == "eager", base,
                         self._range_f, self._skew_on, float(th.up), cls, hwm, out, self._idx)
        n_late, n_lazy, n_eager, n_born, n_born_e, elo, ehi, wlo, whi = out.tolist()
        if n_late:
            self.late += n_late
            if n_late == n:
                return n_late
        for k, h in enumerate(hws):
            h.value = int(hwm[k])
        if self.monitor:
            self.n_live += n_born
            self.n_eager_live += n_born_e
            self.volume.add(n - n_late)
            if self.volume.active >= VOL_MASK:  # no group's winVol reaches the flag bit
                raise ConfigError(
                    f"adaptive_window: {self.volume.active} tuples in open windows exceed "
                    "AdaptWID's 30-bit winVol; use shorter windows or Stream.window")
        self._start_extents(lo, hi, cls, n_late, wlo, whi)
        cols: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        for col, (v, m) in values.items():
            if m is not None and col + "?" not in self.buffer.dtypes and not m.all():
                self.buffer.add_column(col + "?", np.dtype(np.bool_), True)  # first null
            if col + "?" in self.buffer.dtypes:
                if m is None:
                    m = np.ones(n, np.bool_)
            else:
                m = None  # no null in this column yet: nothing to carry
            cols[col] = (v, m)
        pulled = None
        if len(sw):
            self.switches_to_eager += len(sw)
            self.n_eager_live += len(sw)
            if self.buffer.n_rows:
                pulled = self.buffer.take_groups(sw)
        if n_lazy:
            self.buffer.append(self._chunk(gids, ts, src, cols, self._idx[:n_lazy]))
        if n_eager:
            if self.dense:
                self.eager.fold_sel(gids, ts, src if self.S > 1 else None, lo, hi, cols,  # type: ignore[union-attr]
                                    cls, ROW_EAGER, elo, ehi, self.n_groups)
            else:
                sel = np.flatnonzero(cls == ROW_EAGER)
                self._to_eager(self._chunk(gids, ts, src, cols, sel), lo[sel], hi[sel])
        if pulled is not None and len(pulled["gid"]):
            self._to_eager(pulled, *self._wids(pulled["ts"]))
        self._track_peak()
        return n_late

    def _chunk(self, gids: np.ndarray, ts: np.ndarray, src: np.ndarray,
               cols: dict[str, tuple[np.ndarray, np.ndarray | None]], idx: np.ndarray) -> Chunk:
        """The rows ``idx`` of a batch as a buffer chunk (one gather per column)."""
        ch: Chunk = {"gid": gids.take(idx).astype(GID), "ts": ts.take(idx)}
        if self.S > 1:
            ch["src"] = src.take(idx)
        for col, (v, m) in cols.items():
            ch[col] = v.take(idx)
            if m is not None:
                ch[col + "?"] = m.take(idx)
        return ch

    def _src0(self, n: int) -> np.ndarray:
        """Source 0 for ``n`` rows (a reused all-zero scratch: read only)."""
        if len(self._zeros8) < n:
            self._zeros8 = np.zeros(max(n, 2 * len(self._zeros8)), np.int8)
        return self._zeros8[:n]

    def _start_extents(self, lo: np.ndarray, hi: np.ndarray, cls: np.ndarray | None = None,
                       n_late: int = 0, wlo: int | None = None, whi: int | None = None) -> None:
        """Start ``wed`` for the windows the rows in time open (``cls > 0``).

        Fast path: every window in ``[wlo, whi]`` is open already (O(log) in the open set).
        """
        opened = self.open_wids
        if wlo is not None and whi is not None:
            a, b = self._open_span  # closing windows only removes ids below first_open <= wlo
            if a <= wlo and whi <= b:
                return
            if a <= wlo <= b + 1 and 0 < whi - b <= self._range // self._slide:
                # only windows above the open span are new, and the row whose last window is
                # whi covers every one of (b, whi] (a tuple is in >= RANGE // SLIDE
                # consecutive windows, clipped to first_open <= wlo <= b + 1): no scan
                self._open_new([w for w in range(b + 1, whi + 1) if w not in opened])
                self._open_span = (a, whi)
                return
            if opened and wlo >= opened[0] and whi <= opened[-1] \
                    and opened.bisect_right(whi) - opened.bisect_left(wlo) == whi - wlo + 1:
                self._open_span = (wlo, whi)
                return
        if n_late and cls is not None:
            ok = cls != ROW_LATE
            lo, hi = lo[ok], hi[ok]
        ws = covered_windows(lo, hi)
        if ws is None:  # the batch spans far more windows than it has tuples
            ulo, inv = np.unique(lo, return_inverse=True)
            top = np.full(len(ulo), INT64_MIN, np.int64)
            np.maximum.at(top, inv, hi)
            ws = np.unique(expand(ulo, top)[1])
        if wlo is not None and whi is not None and len(ws) == whi - wlo + 1:
            self._open_span = (wlo, whi)  # no gap: every window of [wlo, whi] is open below
        self._open_new([w for w in ws.tolist() if w not in opened])  # per window, not tuple

    def _open_new(self, fresh: list[int]) -> None:
        """Windows ``fresh`` (ascending, not open yet) open: their extents start ``wed``."""
        if not fresh:
            return
        lwm = self.lwm.value
        for w in fresh:  # extent start = origin + (w + 1) * SLIDE - RANGE (kind.extents)
            self.wed.start(w, lwm, fallback=self._origin + (w + 1) * self._slide - self._range)
        self.open_wids.update(fresh)

    def _to_eager(self, ch: Chunk, lo: np.ndarray, hi: np.ndarray) -> None:
        """Fold rows into partials; ``[lo, hi)``: their open window ids (``_wids``)."""
        if self.dense:
            self.eager.fold(ch, lo, hi)  # type: ignore[union-attr]
            return
        rows, ws = expand(lo, hi)
        is_last = ws == hi[rows] - 1
        for w, blk in self._blocks(ch, rows, ws, is_last).items():
            self.eager.add(w, blk)  # type: ignore[union-attr]

    def _blocks(self, ch: Chunk, rows: np.ndarray, ws: np.ndarray,
                is_last: np.ndarray) -> dict[int, Block]:
        """Group (row, wid) pairs by (wid, group) into one block of partials per wid."""
        if len(rows) == 0:
            return {}
        g = ch["gid"][rows].astype(np.int64)
        if len(self._scratch) < self.n_groups:  # kernels index it by group code
            self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)
        order, starts = group_pairs(ws, g, self._scratch)  # counting sort, no argsort
        rows, ws, g, is_last = rows[order], ws[order], g[order], is_last[order]
        ts = ch["ts"][rows]
        states = []
        for a in self.aggs:
            if a.spec.counts_rows:
                r = Rows(g, np.ones(len(g), bool), ts)
            else:
                r = Rows(ch[a.column][rows], _valid(ch, a.column)[rows], ts)
            states.append(a.reduce(r, starts))
        j = self.tupcnt_from
        if j is not None and not self.aggs[j].spec.counts_rows and not _valid(ch, self.aggs[j].column).all():
            self._materialize_tupcnt()  # nn no longer equals rows
        if self.tupcnt_from is not None or not self.monitor:
            tupcnt = np.zeros((len(starts), 0), np.int32)  # derived, or nothing monitors
        elif self.S == 1:
            tupcnt = np.add.reduceat(is_last.astype(np.int32), starts,
                                     dtype=np.int32).reshape(-1, 1)
        else:
            tupcnt = segment_tupcnt(starts, ch["src"][rows], is_last, self.S)
        seg_w, seg_g = ws[starts], g[starts]
        wb = np.flatnonzero(np.diff(seg_w)) + 1
        bounds = np.concatenate([[0], wb, [len(starts)]]).tolist()
        out: dict[int, Block] = {}
        for a_, b_ in zip(bounds[:-1], bounds[1:]):
            out[int(seg_w[a_])] = Block(seg_g[a_:b_].astype(GID), tupcnt[a_:b_].copy(),
                                        [[x[a_:b_].copy() for x in s] for s in states])
        return out

    # ---- punctuation -------------------------------------------------------------------
    def on_punctuation(self, v: int) -> list[tuple[int, Block]]:
        """Close every window complete under ``v``; return ``(wid, block)`` in wid order (a
        window may come as several blocks with disjoint groups, see :meth:`_union`)."""
        fo = (int(v) - self._origin) // self._slide  # kind.first_open(v)
        opened = self.open_wids
        closing = opened[:opened.bisect_left(fo)] if fo > self.first_open else []
        if len(closing) > 1 and closing[-1] - closing[0] >= len(closing) + _SPARSE_GAP:
            ends = _run_ends(closing)  # a list (cheaper than an irange iterator)
            if ends.size:  # a wide span of many small gaps is closed at once
                return self._close_in_runs(v, ends)
        self.lwm.advance(v)
        if fo <= self.first_open:
            return []
        old, self.first_open = self.first_open, fo
        # only groups whose tuples expire now are looked at (004 §6.3.4.2: "if input tuples
        # expire and winVol decreases below the threshold"): groups with a closing partial
        # (eager or transitional) and groups with expiring buffered tuples (lazy)
        # dense partials leave in slot order (no sort): outputs are sets of rows, and
        # _union matches groups through the scratch, not by order
        popped = ({w: self.eager.pop(w, False) for w in closing} if self.dense  # type: ignore[call-arg]
                  else {w: self.eager.pop(w) for w in closing})
        # tupcnt of the closing partials, read now: aggregating B below may materialize a
        # derived tupcnt (first null), which converts the store's blocks, not popped ones;
        # a derived one is copied (merging transitional groups below adds to its lane)
        tcs = [(b.gids, b.tupcnt if b.tupcnt.shape[1] else self.counts(b).copy())
               for b in popped.values() if b is not None and len(b)] if self.monitor else []
        expired: list[np.ndarray] = []
        lazy_blocks: dict[int, Block] = {}
        if self.buffer.n_rows and closing:
            lazy_blocks = self._close_buffer(old, fo, expired, closing[0], closing[-1])
        out: list[tuple[int, Block]] = []
        hw = self.offsets.hwm
        for w in closing:
            eb = popped[w]
            lb = lazy_blocks.pop(w, None)
            # a closed window's tupcnt is spent (winVol drops below): blocks leave without
            # it, so eager, lazy and merged blocks share one layout
            if eb is not None and eb.tupcnt.shape[1]:
                eb = Block(eb.gids, eb.tupcnt[:, :0], eb.states)
            if lb is not None and lb.tupcnt.shape[1]:
                lb = Block(lb.gids, lb.tupcnt[:, :0], lb.states)
            for blk in self._union(eb, lb):
                out.append((w, blk))
            if not self._flushing:  # end of stream is not a measurement of arrival order
                self.wed.complete(w, hw)
            self.open_wids.discard(w)
        assert not lazy_blocks, f"lazy tuples in windows that were not open: {sorted(lazy_blocks)}"
        if self.dense:
            self.eager.release(fo)  # type: ignore[union-attr]  # slots with no partial left
        if self.monitor and (tcs or expired):
            # only groups whose tuples expire now are looked at (004 §6.3.4.2: "if input
            # tuples expire and winVol decreases below the threshold"): groups with a closing
            # partial (eager or transitional) and groups with expiring buffered tuples (lazy).
            # One kernel: winVol -= the partials' tupcnt, eager -> lazy (eager groups hold no
            # buffered tuples), groups with winVol 0 leave H
            th_cfg = self.cfg.thresholds
            base = 1.0
            if not th_cfg.absolute:  # Cond. 6.9: aggr * wed / (tup * SLIDE)
                base = float(self.aggr) * float(self.wed.value) / (float(self.tup) * self._slide)
            hwm = self._hwm
            for k, h in enumerate(self.offsets.hwms):
                hwm[k] = h.value
            if len(self._scratch) < self.n_groups:
                self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)
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
                base, self._range_f, self._skew_on, hwm, float(th_cfg.down), VOL_MASK,
                MODE_BIT, th_cfg.decide_on == "remaining")
            if n_tc:
                self.volume.expire(int(n_tc))
            self.switches_to_lazy += n_sw
            self.n_eager_live -= n_sw
            self.n_live -= n_dead
            self.n_eager_live -= n_dead_e
        self._sample(v)
        self._track_peak()
        return out

    def _close_in_runs(self, v: int, ends: np.ndarray) -> list[tuple[int, Block]]:
        """Close the held windows run by run: ``ends`` (:func:`_run_ends`) are the last windows
        of the runs before ``v``'s, and each run is closed by the punctuation at its end (valid:
        ``v`` bounds every smaller value); the last run by ``v`` itself.

        A row far ahead of (or behind) the rest -- a bad clock -- leaves a span of millions
        of empty window ids between the windows a punctuation closes; the close of the
        buffered tuples folds into transient lanes over the closing span, so one close over
        the whole span would allocate (span x groups) cells. Run by run, the lanes span only
        the windows of one run. Cost: one pass over the buffer per run."""
        out: list[tuple[int, Block]] = []
        for e in ends.tolist():
            out.extend(self.on_punctuation(self._origin + (e + 1) * self._slide))
        out.extend(self.on_punctuation(v))
        return out

    def _union(self, eb: Block | None, lb: Block | None) -> list[Block]:
        """A closing window's partials ``eb`` (+) its buffered tuples' block ``lb``, as
        disjoint blocks: the groups in both -- transitional ones -- are merged into ``eb``
        in place, ``lb``'s other groups stay a block of their own (no re-interleaving; the
        groups are matched through the scratch, so neither block needs an order).
        O(|eb| + |lb|)."""
        if eb is None or not len(eb):
            return [lb] if lb is not None and len(lb) else []
        if lb is None or not len(lb):
            return [eb]
        tl = self.timeline.transitional
        if not tl or tl[-1] == 0:
            # no transitional group: only a punctuation's eager -> lazy switch makes one,
            # and the last punctuation counted none (a batch's lazy -> eager switches only
            # remove them), so eb and lb share no group
            return [eb, lb]
        if len(self._scratch) < self.n_groups:
            self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)
        pos, found = match_groups(eb.gids, lb.gids, self._scratch)
        if not found:
            return [eb, lb]
        both = pos >= 0
        if found == len(lb):
            for agg, sa, sb in zip(self.aggs, eb.states, lb.states):
                agg.merge_at(sa, pos, sb)
            return [eb]
        sel = np.flatnonzero(both)
        for agg, sa, sb in zip(self.aggs, eb.states, lb.states):
            agg.merge_at(sa, pos[sel], state_take(sb, sel))
        rest = np.flatnonzero(~both)
        return [eb, Block(lb.gids[rest], lb.tupcnt[rest],
                          [state_take(sb, rest) for sb in lb.states])]

    def _close_buffer(self, old: int, fo: int, expired_gids: list[np.ndarray],
                      wlo: int, whi: int) -> dict[int, Block]:
        """Aggregate the buffered tuples of the closing windows ``[wlo, whi]``; purge the
        expired ones. Appends the group codes of purged tuples to ``expired_gids``.

        Bounded aggregates: a dense transient fold -- lanes of :mod:`oop.adapt.dense`'s
        layout over (closing window x slot of each group with a closing tuple): one slot
        kernel, one presence kernel and one kernel per aggregate, then each window's row is
        its block (no sort, no pair arrays); holistic ones: one
        group-by of the (tuple, window) pairs. The lanes live only during the punctuation
        (like the pair arrays), so they are not state.
        """
        ch = self.buffer.scan_rows()  # one pass over B
        pc = self.buffer.scan_cuts()  # its binned part's bins (the rest is staged)
        if len(self._scratch) < self.n_groups:
            self._scratch = np.full(max(self.n_groups, 2 * len(self._scratch)), -1, np.int64)
        src = ch["src"] if self.S > 1 else self._src0(len(ch["gid"]))
        if not self.dense:
            rows, ws, is_last, order, cuts, gone, _, _, _ = close_scan(
                ch["gid"], src, ch["ts"], self._range, self._slide, self._origin, old, fo,
                self._wv, self.monitor, self._scratch, self.buffer.n_bins, True)
            self._expire_buffer(ch, order, cuts, gone, expired_gids)
            if len(rows) == 0:
                return {}
            return self._blocks(ch, rows, ws, is_last)
        # dense transient fold: lanes over (closing window x slot of a group with a closing
        # tuple), slots in first-occurrence order; each window's row is its block. One
        # kernel scans B, purges, assigns the slots and counts (window, group) tuples --
        # the presence lane, and a count aggregate's lane
        R = 1 << max(whi - wlo, 0).bit_length()  # >= closing windows, a power of two
        mask = np.int64(R - 1)
        order, cuts, gone, slot, groups, clo, chi, pres, kg, kt, ks = close_fold(
            ch["gid"], src, ch["ts"], self._range, self._slide, self._origin, old, fo,
            self._wv, self.monitor, self._scratch, self.buffer.n_bins, mask, pc)
        kept = {"gid": kg, "ts": kt, "src": ks} if self.S > 1 else {"gid": kg, "ts": kt}
        self._expire_buffer(ch, order, cuts, gone, expired_gids, kept)
        k = len(groups)
        j = self._count_at  # a count lane is the presence lane
        lanes = [[pres] if i == j else [np.zeros((R, k), dt) for dt in dts]
                 for i, dts in enumerate(self._lane_dts)]
        if self._rest_aggs:  # the other aggregates: one fold kernel each
            cols = {c: (ch[c], ch.get(c + "?")) for c in self.value_cols}
            n = len(slot)
            if len(self._ones) < n:
                self._ones = np.ones(max(n, 2 * len(self._ones)), np.bool_)
            fold_aggs(self._rest_aggs, [lanes[i] for i in self._rest_at], slot, clo, chi,
                      ch["ts"], cols, mask, False, self._ones[:n])
        out: dict[int, Block] = {}
        gids = groups.astype(GID)
        no_tc = np.zeros((k, 0), np.int32)
        for w in range(wlo, whi + 1):
            r = w & (R - 1)
            row = pres[r]
            if k and row.all():  # every group has tuples in this window (tumbling: always)
                out[w] = Block(gids, no_tc, [[x[r] for x in ln] for ln in lanes])
                continue
            at = np.flatnonzero(row)
            if len(at):
                out[w] = Block(gids[at], no_tc[at], [[x[r, at] for x in ln] for ln in lanes])
        return out

    def _expire_buffer(self, ch: Chunk, order: np.ndarray, cuts: np.ndarray, gone: np.ndarray,
                       expired_gids: list[np.ndarray], kept: Chunk | None = None) -> None:
        """After a close scan: count the purged rows out, keep ``ch[order]`` binned
        (``kept``: columns of it gathered already)."""
        n_gone = len(ch["gid"]) - len(order)
        if n_gone and self.monitor:
            expired_gids.append(gone)
            self.volume.expire(n_gone)
        if n_gone or self.buffer.staged:  # kept rows back into their bins
            self.buffer.rebuild(ch, order, cuts, kept)

    def flush(self) -> list[tuple[int, Block]]:
        """End of stream: close every open window."""
        if not self.open_wids:
            return []
        last = int(self.open_wids[-1])
        _, end = self.kind.extent(last)
        self._flushing = True
        try:
            return self.on_punctuation(max(int(end), self.lwm.value))
        finally:
            self._flushing = False

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

    # ---- snapshot ------------------------------------------------------------------------
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
        self.wed.restore(s.wed)
        self.offsets.restore(s.offsets)
        self.lwm.value = s.lwm
        self.volume.active = s.active
        self.first_open = s.first_open
        self.open_wids = SortedSet(s.open_wids)
        self._open_span = (0, -1)
        self._wv, self.tupcnt_from = s.wv, s.tupcnt_from
        self.cap = len(self._wv) if self.monitor else s.n_groups
        self.n_groups = s.n_groups
        self.tuples_in, self.late = s.tuples_in, s.late
        self.switches_to_eager, self.switches_to_lazy = s.switches_to_eager, s.switches_to_lazy
        self.timeline, self.peak = s.timeline, s.peak
        self._recount_live()

    # ---- invariants -------------------------------------------------------------------------
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
