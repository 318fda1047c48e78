"""AdaptWID's Aggregate on a punctuation: close, emit, purge (004 §6.3.4.2, "Processing
Punctuation"; the eager -> lazy switch of 004 §6.3.3).

Punctuation rule: on a punctuation ``v`` every window ``w < kind.first_open(v)`` is
complete. Each closing window is emitted once, as ``(wid, block)`` pairs in window-id
order (a window may come as several blocks with disjoint groups, :meth:`ClosePath._union`;
the rows of a window come in no particular group order); the state behind it is purged
-- its partials, the buffered tuples whose last window closed; the low-watermark
advances to ``v`` (the operator forwards the punctuation). At the end of the stream
(:meth:`ClosePath.flush`) every open window closes.

How: the eager block of each closing window is popped (one slot kernel per window,
:func:`~oop.adapt.kernels.dense_pop_slots`). Bounded aggregates: one kernel pass over
``B`` (:func:`~oop.adapt.kernels.close_fold`) computes each tuple's closing windows,
purges those whose last window closed (``winVol`` drops by them), gives each group with a
closing tuple a transient slot and counts the (closing window, group) tuples -- a
``count`` aggregate's lane and every other one's presence -- and returns the kept tuples
in bin order with their ``gid``/``ts`` gathered (``B`` is rebuilt from them, the value
columns by one gather each); the other aggregates are folded into transient lanes
(closing window x slot) by the dense store's kernels, and each window's row is its
block. Holistic aggregates: :func:`~oop.adapt.kernels.close_scan` and one group-by of
the (tuple, window) pairs. Transitional groups (in both: 004 Fig. 6-18) are merged into
the eager block in place (groups matched through a scratch array), the other lazy groups
are emitted as a block of their own. Then one kernel
(:func:`~oop.adapt.kernels.settle_close`) does the group bookkeeping: ``winVol`` drops by
the popped partials' ``tupcnt``, eager groups under the lower threshold become lazy
(transitional while they have partials, :mod:`oop.adapt.modes`) and groups with ``winVol
== 0`` are removed (counted out of the live groups). Slots with no partial left are
released by one kernel (:func:`~oop.adapt.kernels.dense_release`).

A row far ahead of (or behind) the rest leaves millions of empty window ids between the
windows one punctuation closes: such a punctuation is closed run by run
(:meth:`ClosePath._close_run`), so the transient lanes span one run's windows; the groups
are settled once per punctuation, after its last run.

Cost: per punctuation O(|B| x closing windows + partials emitted) vectorized, and
O(closing windows) Python calls (about a dozen numpy / kernel calls for one closing
window, most of them per aggregate lane): only groups whose tuples expire are
re-evaluated. No per-tuple Python.
"""

from __future__ import annotations

import numpy as np

from oop.adapt.algebra import state_take
from oop.adapt.batch import BatchPath
from oop.adapt.buffer import Chunk
from oop.adapt.config import AdaptConfig
from oop.adapt.dense import fold_aggs, lane_dtypes
from oop.adapt.groups import GID
from oop.adapt.kernels.buffer import close_fold, close_scan
from oop.adapt.kernels.groupby import match_groups
from oop.adapt.store import Block

__all__ = ["ClosePath"]

#: a punctuation closes windows run by run where this many empty window ids separate two
#: closing windows (see ClosePath._close_run)
_SPARSE_GAP = 64


def _run_ends(closing: list[int]) -> np.ndarray:
    """The closing windows (ascending) after which more than ``_SPARSE_GAP`` window ids are
    empty: the ends of all runs but the last. O(len)."""
    ws = np.asarray(closing, np.int64)
    return ws[np.flatnonzero(np.diff(ws) > _SPARSE_GAP)]


class ClosePath(BatchPath):
    """What a punctuation does to the state (see the module docstring)."""

    def __init__(self, cfg: AdaptConfig, value_dtypes: dict[str, np.dtype]) -> None:
        super().__init__(cfg, value_dtypes)
        self._ones = np.ones(0, np.bool_)  # all-valid scratch (not state)
        #: lane dtypes of each aggregate (dense: the transient fold at a close)
        self._lane_dts = ([lane_dtypes(a, self.value_dtypes.get(a.column or "")) for a in self.aggs]
                          if self.dense else [])
        self._count_at = next((j for j, a in enumerate(self.aggs) if a.spec.counts_rows), None)
        #: the aggregates a close folds besides the counted one (close_fold counts)
        self._rest_at = [j for j in range(len(self.aggs)) if j != self._count_at]
        self._rest_aggs = [self.aggs[j] for j in self._rest_at]
        self._flushing = False  # closing at the end of the stream (not a wed measurement)

    def on_punctuation(self, v: int) -> list[tuple[int, Block]]:
        """Close every window complete under ``v``; return ``(wid, block)`` in wid order (a
        window may come as several blocks with disjoint groups, see :meth:`_union`).

        The windows close (run by run where they are sparse, :meth:`_close_run`), then the
        groups are settled once for the whole punctuation with ``wed`` after all its closes
        -- so the decisions do not depend on how the closes were cut into runs (a partition
        of :class:`~oop.adapt.threaded.ThreadedAdapt` holds fewer windows, so other runs)."""
        fo = (int(v) - self._origin) // self._slide  # kind.first_open(v)
        if fo <= self.first_open:  # no window completes
            self.lwm.advance(v)
            return []
        closing = self.extents.closing(fo, self.first_open)
        ends: list[int] = []
        if len(closing) > 1 and closing[-1] - closing[0] >= len(closing) + _SPARSE_GAP:
            ends = _run_ends(closing).tolist()  # a wide span of many small gaps: by runs
        tcs: list[tuple[np.ndarray, np.ndarray]] = []
        expired: list[np.ndarray] = []
        out: list[tuple[int, Block]] = []
        for e in ends:  # each run is closed by the punctuation at its end (v bounds it)
            out.extend(self._close_run(self._origin + (e + 1) * self._slide, tcs, expired))
        out.extend(self._close_run(v, tcs, expired))
        if self.given_wed is not None:  # the one-thread wed after this punctuation
            self.wed.value = self.given_wed
        if self.monitor and (tcs or expired):
            if len(expired) > 1:
                expired = [np.concatenate(expired)]  # settle_close dedups the groups
            self._settle(tcs, expired)  # winVol, eager -> lazy, groups leaving H
        self._sample(v)
        self._track_peak()
        return out

    def _close_run(self, v: int, tcs: list[tuple[np.ndarray, np.ndarray]],
                   expired: list[np.ndarray]) -> list[tuple[int, Block]]:
        """Close the held windows below ``kind.first_open(v)``: emit them, purge their state,
        advance the low-watermark; appends the popped partials' groups and ``tupcnt`` to
        ``tcs`` and the groups of the purged buffered tuples to ``expired`` (the settle is
        the caller's).

        Run by run: a row far ahead of (or behind) the rest -- a bad clock -- leaves a span
        of millions of empty window ids between the windows a punctuation closes; the close
        of the buffered tuples folds into transient lanes over the closing span, so one
        close over the whole span would allocate (span x groups) cells. Each run closed by
        the punctuation at its end, the lanes span only the windows of one run. Cost: one
        pass over the buffer per run."""
        fo = (int(v) - self._origin) // self._slide  # kind.first_open(v)
        closing = self.extents.closing(fo, self.first_open)
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
        if self.monitor:
            tcs.extend((b.gids, b.tupcnt if b.tupcnt.shape[1] else self.counts(b).copy())
                       for b in popped.values() if b is not None and len(b))
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
            # the end of stream is not a measurement of arrival order
            self.extents.close(w, hw, measure=not self._flushing)
        assert not lazy_blocks, f"lazy tuples in windows that were not open: {sorted(lazy_blocks)}"
        if self.dense:
            self.eager.release(fo)  # type: ignore[union-attr]  # slots with no partial left
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
        self._ensure_scratch()
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
        self._ensure_scratch()
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
