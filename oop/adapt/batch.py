"""AdaptWID's Aggregate on a batch: the Bucket, monitoring, routing and the fold (004 §6.3.4.2,
"Processing Tuples"; the lazy -> eager switch of 004 §6.3.3).

On a batch (columns of numpy arrays): compute each tuple's window-id range ``[lo, hi)``
(the Bucket, 004 Eq. 5.2), then one fused kernel (:func:`~oop.adapt.kernels.route_batch`)
clips ``lo`` to the first open window, adds to ``winVol`` and the per-source
high-watermarks, switches the touched lazy groups over the upper threshold to eager
(:mod:`oop.adapt.modes`) and routes every row eager, lazy or late. ``wed`` starts for new
extents (an O(1) check when every window of the batch is open already); the switching
groups' tuples are pulled from their bins of ``B`` and folded into partials; the eager
rows are folded into partials in place (dense store: one slot+presence kernel and one
kernel per aggregate over the whole batch, lazy rows skipped -- no gather; block store:
one vectorized group-by, :meth:`BatchPath._blocks`) and the lazy rows appended to ``B``.

Punctuation rule: nothing is emitted, purged or forwarded on a batch. A tuple behind the
punctuation still joins its windows that are open (004: update extents from
``max{punctuatedWid + 1, i}``); only a tuple whose windows are all complete is late
(counted and dropped here; the operator routes it by its lateness policy).

Cost: per batch O(n x windows-per-tuple) compiled, O(1) Python calls, plus, when groups
switch, O(rows of ``B`` in their bins + rows staged since ``B`` was last binned: each row
is binned once). No per-tuple Python.
"""

from __future__ import annotations

import numpy as np

from oop.adapt.algebra import Rows
from oop.adapt.bucket import expand
from oop.adapt.buffer import Chunk
from oop.adapt.config import AdaptConfig
from oop.adapt.groups import GID, GID_MAX, MODE_BIT, VOL_MASK
from oop.adapt.kernels.groupby import group_pairs, segment_tupcnt
from oop.adapt.kernels.route import ROW_EAGER, route_batch
from oop.adapt.modes import GroupModes
from oop.adapt.store import Block
from oop.errors import ConfigError
from oop.stream.elements import INT64_MIN

__all__ = ["BatchPath"]


def _valid(ch: Chunk, col: str) -> np.ndarray:
    """Validity of ``col`` in a chunk (no validity column: the column has shown no null)."""
    m = ch.get(col + "?")
    return np.ones(len(ch["gid"]), bool) if m is None else m


class BatchPath(GroupModes):
    """What a batch does to the state (see the module docstring)."""

    def __init__(self, cfg: AdaptConfig, value_dtypes: dict[str, np.dtype]) -> None:
        super().__init__(cfg, value_dtypes)
        self._zeros8 = np.zeros(0, np.int8)  # source 0 of one-source batches (not state)
        self._route_out = np.zeros(9, np.int64)  # route_batch's counters (not state)
        self._geom = np.array([self._range, self._slide, self._origin], np.int64)
        self._lo = np.empty(0, np.int64)  # window-id ranges of the current batch (not state)
        self._idx = np.empty(0, np.int64)  # its lazy rows (not state)
        self._hi = np.empty(0, np.int64)

    # ---- the Bucket ----------------------------------------------------------------------------
    def _wids(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.kind.wids(ts)
        if self.first_open != INT64_MIN:
            lo = np.maximum(lo, self.first_open)
        return lo, hi

    # ---- tuples --------------------------------------------------------------------------------
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
        if self.monitor:  # the kernels index the scratch by group code
            self._ensure_scratch()
        hwm = self._load_hwms()
        cls = np.empty(n, np.int8)
        out = self._route_out
        sw = route_batch(gids, src, ts, self._geom, lo, hi, self.first_open, self._wv, self._scratch,
                         VOL_MASK, MODE_BIT, self.monitor, self.mode_name == "eager",
                         self._theta_base(), self._range_f, self._skew_on,
                         float(self.cfg.thresholds.up), cls, hwm, out, self._idx)
        n_late, n_lazy, n_eager, n_born, n_born_e, elo, ehi, wlo, whi = out.tolist()
        if self._validity_after:  # given: the validity columns one thread adds now
            self._add_validity(self._validity_after)
            self._validity_after = []
        if n_late:
            self.late += n_late
            if n_late == n:
                return n_late
        for k, h in enumerate(self.offsets.hwms):  # the kernel advanced them
            h.value = int(hwm[k])
        if self.monitor:
            self.n_live += n_born
            self.n_eager_live += n_born_e
            self.volume.add(n - n_late)
            if self.volume.active >= VOL_MASK:  # no group's winVol reaches the flag bit
                raise ConfigError(
                    f"adaptive_window: {self.volume.active} tuples in open windows exceed "
                    "AdaptWID's 30-bit winVol; use shorter windows or Stream.window")
        self.extents.start(lo, hi, self.lwm.value, cls, n_late, wlo, whi)
        cols = self._carried(values, n)
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

    def _carried(self, values: dict[str, tuple[np.ndarray, np.ndarray | None]],
                 n: int) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """The batch's value columns as they are carried into state: a validity array only
        for a column that has shown a null (its first null adds a validity column to B). O(n)."""
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
        return cols

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
        self._ensure_scratch()  # the kernels index it by group code
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
