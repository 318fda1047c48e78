"""Sparse layout of WID partial aggregates: an open-addressing hash table of (unit, code) cells.

The dense ring (:class:`~oop.window.ring.Ring`) spends ``R x C`` cells per
lane whether or not a group is live in a window. When most groups are absent
from most windows (many keys, each rare), :class:`HashCells` keeps only the
live cells: a numba hash table (linear probing, power-of-two capacity, load
<= 1/2) maps ``(unit, code)`` to a dense cell index, and every lane is a
flat array indexed by cell. The lane kernels of :mod:`oop.window.kernels`
are reused unchanged: called with ``codes = cell indices``, ``lo = 0``,
``hi = 1`` and ``mask = 0`` they address ``acc[cell]``.

Per batch: one probe per (row, unit) pair (sliding WID expands rows to
their ``range/slide`` units first). Emission selects the cells of the
emitted units (vectorized over the live cells); purging compacts the live
cells and rebuilds the table (O(live cells) per punctuation, compiled).
Memory: O(live cells x lanes). Used by WID, and by Paned-WID for sum-type
aggregates (its emission walks the cells of each entering / leaving pane:
:func:`~oop.window.paned_kernels.paned_emit_hash`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numba as nb
import numpy as np

from oop.window import kernels as K
from oop.window.ring import TO_DENSE, Ring, tumble_units
from oop.window.values import ColumnValues, LaneInfo, note_nonfinite

if TYPE_CHECKING:
    from oop.window.cells import CellStore, PaneEmitter, SparseFrom

__all__ = ["HashCells"]

_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min


@nb.njit(cache=True, nogil=True)
def _h(u, c):
    h = np.uint64(u) * np.uint64(0x9E3779B97F4A7C15) ^ (np.uint64(c) + np.uint64(0x632BE59BD9B4E019))
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h


@nb.njit(cache=True, nogil=True)
def _probe(units, codes, table, cell_u, cell_c, n_cells, insert, out):
    """Cell index of every (units[i], codes[i]); inserts new cells when ``insert`` (else -1)."""
    mask = np.uint64(table.shape[0] - 1)
    for i in range(units.shape[0]):
        u = units[i]
        c = codes[i]
        h = _h(u, c) & mask
        while True:
            k = table[h]
            if k == -1:
                if insert:
                    table[h] = n_cells
                    cell_u[n_cells] = u
                    cell_c[n_cells] = c
                    out[i] = n_cells
                    n_cells += 1
                else:
                    out[i] = -1
                break
            if cell_u[k] == u and cell_c[k] == c:
                out[i] = k
                break
            h = (h + np.uint64(1)) & mask
    return n_cells


@nb.njit(cache=True, nogil=True)
def _rebuild(table, cell_u, cell_c, n_cells):
    mask = np.uint64(table.shape[0] - 1)
    for k in range(n_cells):
        h = _h(cell_u[k], cell_c[k]) & mask
        while table[h] != -1:
            h = (h + np.uint64(1)) & mask
        table[h] = k


def _table_size(cap: int) -> int:
    """Slots of the probe table for ``cap`` cells: a power of two >= 2 x cap (load <= 1/2).

    A power of two is required: probing wraps with ``& (size - 1)``, and any
    other size leaves slots unreachable, so a probe could loop forever.
    """
    return 1 << max(1, (2 * max(cap, 1) - 1).bit_length())


class HashCells(Ring):
    """Live (unit, code) cells in a hash table; implements :class:`~oop.window.cells.CellStore`
    (the interface the window operator and Paned-WID use) like the dense :class:`Ring`."""

    layout = "hash"

    def __init__(self, lanes: Sequence[LaneInfo], base: int = 0, cap: int = 1024) -> None:
        super().__init__(lanes, base=base, rows=2, codes=1)
        self.cap = cap
        self.n_cells = 0
        self.cell_u = np.empty(cap, np.int64)
        self.cell_c = np.empty(cap, np.int64)
        self.table = np.full(_table_size(cap), -1, np.int64)
        for li in self.lanes:
            self.arr[li.key] = np.full(cap, li.identity(), li.dtype)
            if li.key in self.tarr:
                self.tarr[li.key] = np.full(cap, _I64MAX if li.lane.op == "first" else _I64MIN,
                                            np.int64)

    @property
    def mask(self) -> int:  # kernels address acc[cell] with mask 0
        return 0

    def nbytes(self) -> int:
        return self.cap * 8 * (2 + len(self.arr) + len(self.tarr)) + self.table.nbytes

    def _grow(self, need: int) -> None:
        if need <= self.cap:
            return
        cap = max(need, 2 * self.cap)
        if self.guard is not None:
            self.guard(cap * 8 * (2 + len(self.arr) + len(self.tarr)) + 8 * _table_size(cap),
                       f"hash table of {cap} (unit, key) cells x {len(self.arr) + len(self.tarr)} lanes")
        for name in ("cell_u", "cell_c"):
            a = np.empty(cap, np.int64)
            a[: self.n_cells] = getattr(self, name)[: self.n_cells]
            setattr(self, name, a)
        for li in self.lanes:
            a = np.full(cap, li.identity(), li.dtype)
            a[: self.n_cells] = self.arr[li.key][: self.n_cells]
            self.arr[li.key] = a
            if li.key in self.tarr:
                t = np.full(cap, _I64MAX if li.lane.op == "first" else _I64MIN, np.int64)
                t[: self.n_cells] = self.tarr[li.key][: self.n_cells]
                self.tarr[li.key] = t
        self.cap = cap
        self.table = np.full(_table_size(cap), -1, np.int64)
        _rebuild(self.table, self.cell_u, self.cell_c, self.n_cells)

    @classmethod
    def from_ring(cls, ring: Ring, n: int) -> "HashCells":
        """The live cells of a dense :class:`Ring` (its first ``n`` codes) as hash cells.

        Same lane values at every live ``(unit, code)``; ``base``, ``top``,
        the variance shifts and the active non-null lanes carry over. Used
        when ``layout="auto"`` finds the ring mostly empty as keys keep
        arriving (:meth:`~oop.window.aggregate.WindowAggregate._relayout`).
        Cost: one compiled scan of the ring's open rows, O(rows x n + live).
        """
        h = cls(ring.lanes, base=ring.base, cap=max(1024, 2 * ring.live))
        h.guard = ring.guard
        h.shift, h.nn_active, h.n_used = dict(ring.shift), set(ring.nn_active), ring.n_used
        h.nf_hi = ring.nf_hi
        u = np.arange(ring.base, max(ring.top, ring.base), dtype=np.int64)
        rr = u & ring.mask
        wi, codes = K.scan_rows(ring.arr[("rows", None)], ring.C, rr, min(n, ring.C))
        units = u[wi]
        slots = np.empty(units.shape[0], np.int64)
        h.n_cells = _probe(units, codes, h.table, h.cell_u, h.cell_c, 0, True, slots)
        j = rr[wi] * ring.C + codes
        for key, a in ring.arr.items():
            h.arr[key][slots] = a[j]
        for key, a in ring.tarr.items():
            h.tarr[key][slots] = a[j]
        h.top, h.live = ring.top, int(units.shape[0])
        return h

    def to_ring(self, n_codes: int) -> Ring:
        """The live cells as a dense :class:`Ring` over ``n_codes`` codes (the reverse of :meth:`from_ring`).

        Cost: O(live cells + (top - base) x n_codes) for the new lanes.
        """
        if self.guard is not None:
            R = 1 << max(int(np.ceil(np.log2(max((self.top - self.base) * 2 + 2, 2)))), 1)
            self.guard(R * max(n_codes, 64) * 8 * (len(self.arr) + len(self.tarr)),
                       f"dense ring of {R} window/pane rows x {max(n_codes, 64)} key columns")
        r = Ring(self.lanes, base=self.base, rows=(self.top - self.base) * 2 + 2,
                 codes=max(n_codes, 64))
        r.shift, r.nn_active = dict(self.shift), set(self.nn_active)
        r.guard = self.guard
        r.nf_hi = self.nf_hi
        r.top, r.n_used = self.top, n_codes
        k = self.n_cells
        sel = np.flatnonzero((self.arr[("rows", None)][:k] > 0) & (self.cell_u[:k] >= self.base))
        j = (self.cell_u[sel] & r.mask) * r.C + self.cell_c[sel]
        for key, a in self.arr.items():
            r.arr[key][j] = a[sel]
        for key, a in self.tarr.items():
            r.tarr[key][j] = a[sel]
        r.live = int(sel.shape[0])
        return r

    def lower_base(self, low: int) -> None:
        self.base = min(self.base, low)

    def relayout(self, density: float, n_codes: int, sparse: type[SparseFrom]) -> CellStore | None:
        """This state as a dense ring when the live density rose above :data:`TO_DENSE`, else
        None (stay hash cells). O(live cells + open units x n_codes) when it moves."""
        return self.to_ring(n_codes) if density > TO_DENSE else None

    def to_dense(self, n_codes: int) -> Ring:
        """This state as a dense ring (:meth:`to_ring`)."""
        return self.to_ring(n_codes)

    def dense_growth(self, low: int, top: int) -> tuple[int, int] | None:
        """None: hash cells hold live cells only, a wide span of units costs nothing. O(1)."""
        return None

    def unit_cells(self, unit: int, n: int) -> tuple[np.ndarray, dict] | None:
        """(live codes ascending, lane values) of ``unit`` or None; O(live cells)."""
        _, codes, lanes = self.block([unit], n)
        return (codes, lanes) if codes.size else None

    def live_runs(self, start: int, stop: int,
                  windows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                  ) -> list[range]:
        """The windows of ``[start, stop)`` that hold a live cell, as runs of consecutive ids,
        when the span is much wider than the cells (a span of mostly empty windows is then
        skipped, not walked); else the whole span. ``windows_of(units)``: the windows
        ``[lo, hi)`` each unit is in. O(live cells log)."""
        if stop - start <= 4 * self.n_cells + 64:
            return [range(start, stop)]
        k = self.n_cells
        u = np.unique(self.cell_u[:k][self.arr[("rows", None)][:k] > 0])
        lo, hi = windows_of(u)
        lo, hi = np.maximum(lo, start), np.minimum(hi, stop)
        keep = lo < hi
        lo, hi = lo[keep], hi[keep]
        if lo.shape[0] == 0:
            return []
        hic = np.maximum.accumulate(hi)
        brk = np.flatnonzero(lo[1:] > hic[:-1]) + 1
        starts = np.r_[0, brk]
        ends = np.r_[brk - 1, lo.shape[0] - 1]
        return [range(int(lo[a]), int(hic[b])) for a, b in zip(starts, ends)]

    def emit_pane_sums(self, pc: PaneEmitter, **kw: Any) -> Any:
        """Paned-WID's emission over hash cells: walks the live cells of each entering and
        leaving pane (:meth:`~oop.window.paned.PaneCombiner.emit_hash`)."""
        return pc.emit_hash(self, **kw)

    def pane_cells(self, pa0: int, pa1: int) -> tuple[np.ndarray, np.ndarray]:
        """The live cells of panes ``[pa0, pa1)`` grouped by pane: ``(order, offs)``, cells
        ``order[offs[p - pa0]:offs[p - pa0 + 1]]`` are pane ``p``'s. O(cells log cells)."""
        kc = self.n_cells
        cu = self.cell_u[:kc]
        idx = np.flatnonzero(cu < pa1)
        order = idx[np.argsort(cu[idx], kind="stable")]
        offs = np.searchsorted(cu[order], np.arange(pa0, pa1 + 1, dtype=np.int64))
        return order, offs.astype(np.int64)

    def update(self, codes: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
               cols: dict[str, ColumnValues], times: np.ndarray, n_codes: int,
               single: bool = False, top: int | None = None,
               tumble: tuple[int, int] | None = None) -> None:
        """Fold a batch in: expand rows to (unit, code) pairs, probe cells, run the lane kernels.
        ``tumble=(origin, size)`` with ``lo`` None: the units are the tumbling WIDs of
        ``times`` (as :meth:`Ring.update`)."""
        n = codes.shape[0]
        if n == 0:
            return
        if lo is None:
            assert tumble is not None and single
            lo = tumble_units(times, *tumble)
        assert lo is not None
        if self.track_nf:
            self.nf_hi = note_nonfinite(self.nf_hi, self.lanes, cols, lo, None if single else hi)
        if single:
            units, idx = lo, None
        else:
            assert hi is not None
            span = hi - lo
            idx = np.repeat(np.arange(n), span)
            units = lo[idx] + (np.arange(idx.shape[0]) - np.repeat(np.cumsum(span) - span, span))
            codes = codes[idx]
            times = times[idx]
            cols = {c: ColumnValues(v.values[idx], v.valid[idx] if v.valid.shape[0] else v.valid)
                    for c, v in cols.items()}
        self.top = max(self.top, int(units.max()) + 1)
        self._grow(self.n_cells + units.shape[0])
        slots = np.empty(units.shape[0], np.int64)
        self.n_cells = _probe(units, codes, self.table, self.cell_u, self.cell_c, self.n_cells,
                              True, slots)
        zeros = np.zeros(slots.shape[0], np.int64)
        super().update(slots, zeros, zeros + 1, cols, times, n_codes=0, single=True)

    def reserve(self, top: int, n_codes: int) -> None:  # capacity is managed by _grow
        return

    def block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        k = self.n_cells
        cu, cc = self.cell_u[:k], self.cell_c[:k]
        sel = np.flatnonzero(np.isin(cu, np.asarray(list(units), np.int64))
                             & (self.arr[("rows", None)][:k] > 0))
        order = np.lexsort((cc[sel], cu[sel]))
        sel = sel[order]
        lanes = {key: self.arr[self.alias(key)][sel] for key in self.arr}
        for key, a in self.tarr.items():
            lanes[("t:" + key[0], key[1])] = a[sel]
        return cu[sel], cc[sel], lanes

    def take_block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """:meth:`block` then :meth:`~oop.window.ring.Ring.reset_cells` of the returned cells
        (the dense ring fuses the two in one compiled pass over its rows; its inherited
        version would address the hash cells as ring rows). O(live cells)."""
        u, codes, lanes = self.block(units, n)
        self.reset_cells(u, codes)
        return u, codes, lanes

    def slots(self, units: np.ndarray, codes: np.ndarray) -> np.ndarray:
        out = np.empty(units.shape[0], np.int64)
        _probe(np.asarray(units, np.int64), np.asarray(codes, np.int64), self.table, self.cell_u,
               self.cell_c, self.n_cells, False, out)
        return out

    def view(self, key: tuple[str, str | None], unit: int, time: bool = False) -> np.ndarray:
        raise NotImplementedError("HashCells has no per-unit rows; use block()")

    def reset(self, unit: int) -> None:
        self.purge_below(unit + 1) if unit < self.base + 1 else None

    def purge_below(self, unit: int, clean: bool = False) -> None:
        """Drop every cell of a unit ``< unit`` and compact the table. O(live cells)."""
        self.base = max(self.base, unit)
        self.top = max(self.top, self.base)
        k = self.n_cells
        keep = np.flatnonzero(self.cell_u[:k] >= unit)
        if keep.shape[0] == k:
            return
        m = keep.shape[0]
        self.live -= int(np.count_nonzero(self.arr[("rows", None)][:k])) - \
            int(np.count_nonzero(self.arr[("rows", None)][keep]))
        self.cell_u[:m] = self.cell_u[keep]
        self.cell_c[:m] = self.cell_c[keep]
        for li in self.lanes:
            a = self.arr[li.key]
            a[:m] = a[keep]
            a[m:k] = li.identity()
            if li.key in self.tarr:
                t = self.tarr[li.key]
                t[:m] = t[keep]
                t[m:k] = _I64MAX if li.lane.op == "first" else _I64MIN
        self.n_cells = m
        self.table[:] = -1
        _rebuild(self.table, self.cell_u, self.cell_c, self.n_cells)

    def live_codes(self, n: int) -> np.ndarray:
        k = self.n_cells
        out = np.zeros(n, bool)
        out[self.cell_c[:k][self.arr[("rows", None)][:k] > 0]] = True
        return out

    def compact_codes(self, keep: np.ndarray) -> None:
        """Renumber codes ``keep`` to ``0..len(keep)-1``; cells of other codes (empty ones,
        reset after emission) are dropped and the table rebuilt. O(cells)."""
        k = self.n_cells
        remap = np.full(max(int(self.cell_c[:k].max()) + 1 if k else 0, keep.max() + 1 if keep.shape[0] else 0), -1, np.int64)
        remap[keep] = np.arange(keep.shape[0])
        newc = remap[self.cell_c[:k]]
        idx = np.flatnonzero(newc >= 0)
        assert not self.arr[("rows", None)][:k][newc < 0].any(), "a dropped code holds a live cell"
        m = idx.shape[0]
        self.cell_u[:m] = self.cell_u[idx]
        self.cell_c[:m] = newc[idx]
        for li in self.lanes:
            a = self.arr[li.key]
            a[:m] = a[idx]
            a[m:k] = li.identity()
            if li.key in self.tarr:
                t = self.tarr[li.key]
                t[:m] = t[idx]
                t[m:k] = _I64MAX if li.lane.op == "first" else _I64MIN
        self.n_cells = m
        self.n_used = keep.shape[0]
        self.table[:] = -1
        _rebuild(self.table, self.cell_u, self.cell_c, self.n_cells)

    def snapshot(self) -> dict[str, Any]:
        s = super().snapshot()
        s.update(cap=self.cap, n_cells=self.n_cells, cell_u=self.cell_u.copy(),
                 cell_c=self.cell_c.copy(), table=self.table.copy())
        return s

    def restore(self, s: dict[str, Any]) -> None:
        super().restore(s)
        self.cap, self.n_cells = s["cap"], s["n_cells"]
        self.cell_u, self.cell_c, self.table = s["cell_u"].copy(), s["cell_c"].copy(), s["table"].copy()

    def _check(self) -> None:
        k = self.n_cells
        rows = self.arr[("rows", None)]
        assert int(np.count_nonzero(rows[:k])) == self.live
        assert not rows[k:].any(), "cells beyond n_cells hold data"
        assert int((self.table >= 0).sum()) == k
        if k:
            assert (self.slots(self.cell_u[:k], self.cell_c[:k]) == np.arange(k)).all()
