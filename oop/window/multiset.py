"""Multiset state of holistic window aggregates: :class:`Multiset`, and its group queries.

Holistic aggregates (median, quantiles, count-distinct, heavy hitters, UDAFs) keep a
compacted table of ``(unit, code, value, count)`` rows. Appends are vectorized;
:meth:`Multiset.compact` merges duplicates; queries select a unit range and group by code
(:func:`group_bounds`, :func:`quantiles_from_counts`).

Invariants, once compacted (``Multiset._check`` asserts the first two and the unit order):

- the four columns have one length; every ``count`` is positive;
- rows are sorted by ``(unit, code, value)`` with no duplicate key (each unit is a
  ``(code, value)``-sorted run, which :meth:`Multiset.select` merges);
- units below ``floor`` may have been purged: state built from them is stale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oop.window import kernels as K

__all__ = ["Multiset", "group_bounds", "quantiles_from_counts"]

_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min


class Multiset:
    """Compacted ``(unit, code, value) -> count`` table for holistic aggregates.

    ``value`` is float64 (median/quantile/UDAF) or int64 value codes
    (distinct/heavy hitters). :meth:`add` appends (O(n)); :meth:`compact`
    sorts and merges duplicates (O(m log m)), called once per punctuation.
    """

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.unit = np.zeros(0, np.int64)
        self.code = np.zeros(0, np.int64)
        self.value = np.zeros(0, dtype)
        self.count = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_rows = 0
        #: units below ``floor`` may have been purged (state built from them is stale)
        self.floor = _I64MIN

    def __len__(self) -> int:
        return self.unit.shape[0] + self._pending_rows

    def add(self, units: np.ndarray, codes: np.ndarray, values: np.ndarray) -> None:
        if units.shape[0]:
            self._pending.append((units.astype(np.int64, copy=False), codes.astype(np.int64, copy=False),
                                  values.astype(self.dtype, copy=False)))
            self._pending_rows += units.shape[0]

    def compact(self) -> None:
        """Merge pending rows and duplicates; rows end sorted by (unit, code, value).

        Only the pending rows are sorted (O(p log p)); they are then merged
        into the already sorted table by :func:`~oop.window.kernels.merge_counted`
        (O(table + p)), not re-sorted with it.
        """
        if not self._pending:
            return
        u = np.concatenate([p[0] for p in self._pending])
        c = np.concatenate([p[1] for p in self._pending])
        v = np.concatenate([p[2] for p in self._pending])
        self._pending, self._pending_rows = [], 0
        order = np.lexsort((v, c, u))
        u, c, v = u[order], c[order], v[order]
        n = np.ones(u.shape[0], np.int64)
        if u.shape[0]:
            new = np.ones(u.shape[0], bool)
            new[1:] = (u[1:] != u[:-1]) | (c[1:] != c[:-1]) | (v[1:] != v[:-1])
            idx = np.flatnonzero(new)
            n = np.add.reduceat(n, idx)
            u, c, v = u[idx], c[idx], v[idx]
        if self.unit.shape[0]:
            u, c, v, n = K.merge_counted(self.unit, self.code, self.value, self.count, u, c, v, n)
        self.unit, self.code, self.value, self.count = u, c, v, n

    def select(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(code, value, count) of units in ``[lo, hi)``, merged over units, sorted by (code, value).

        The table is sorted by (unit, code, value), so the rows of each unit
        are a (code, value)-sorted run: the runs are merged pairwise
        (:func:`~oop.window.kernels.merge_counted`, log2(units) rounds of
        O(rows)) instead of re-sorting their concatenation -- Paned-WID's
        window-level combine of holistic aggregates (004 §6.2.1: a window
        is the merge of its panes' sorted value tables).
        """
        self.compact()
        a, b = np.searchsorted(self.unit, [lo, hi])
        c, v, n = self.code[a:b], self.value[a:b], self.count[a:b]
        if hi - lo > 1 and c.shape[0]:
            cuts = np.flatnonzero(self.unit[a + 1:b] != self.unit[a:b - 1]) + 1
            bounds = [0, *cuts.tolist(), c.shape[0]]
            runs = [(c[x:y], c[x:y], v[x:y], n[x:y]) for x, y in zip(bounds[:-1], bounds[1:])]
            while len(runs) > 1:
                nxt = [K.merge_counted(*runs[q], *runs[q + 1]) for q in range(0, len(runs) - 1, 2)]
                if len(runs) % 2:
                    nxt.append(runs[-1])
                runs = nxt
            c, _, v, n = runs[0]
        return c, v, n

    def keep_rows(self, keep_fn: Any) -> None:
        """Keep only rows where ``keep_fn(unit, code)`` (vectorized) is true."""
        self.compact()
        self.floor = _I64MAX  # arbitrary rows went: no state built from the table stays valid
        m = keep_fn(self.unit, self.code)
        self.unit, self.code, self.value, self.count = (
            self.unit[m], self.code[m], self.value[m], self.count[m])

    def remap_codes(self, remap: np.ndarray) -> None:
        """Renumber group codes (``remap[old]``, increasing on the codes held: the table stays
        sorted by (unit, code, value)); every held code must map to ``>= 0``."""
        self.compact()
        if self.code.shape[0]:
            self.code = remap[self.code]
            assert self.code.min() >= 0

    def remap_values(self, remap: np.ndarray) -> None:
        """Renumber value codes (count-distinct / heavy hitters: ``remap[old]``, increasing on
        the values held, so the table stays sorted); every held value must map to ``>= 0``."""
        self.compact()
        if self.value.shape[0]:
            self.value = remap[self.value]
            assert self.value.min() >= 0

    def purge_below(self, unit: int) -> None:
        self.compact()
        self.floor = max(self.floor, int(unit))
        a = int(np.searchsorted(self.unit, unit))
        self.unit, self.code, self.value, self.count = (
            self.unit[a:], self.code[a:], self.value[a:], self.count[a:])

    def nbytes(self) -> int:
        return 32 * len(self)

    def snapshot(self) -> dict[str, Any]:
        self.compact()
        return {"u": self.unit.copy(), "c": self.code.copy(), "v": self.value.copy(),
                "n": self.count.copy()}

    def restore(self, s: dict[str, Any]) -> None:
        self.unit, self.code, self.value, self.count = s["u"].copy(), s["c"].copy(), s["v"].copy(), s["n"].copy()
        self._pending, self._pending_rows = [], 0
        self.floor = int(self.unit[0]) if self.unit.shape[0] else _I64MAX

    def _check(self) -> None:
        assert self.unit.shape == self.code.shape == self.value.shape == self.count.shape
        assert (self.count > 0).all()
        if self.unit.shape[0] > 1:
            assert (np.diff(self.unit) >= 0).all()


def group_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique codes, start offsets + final end) of a code-sorted array."""
    if codes.shape[0] == 0:
        return codes, np.zeros(1, np.int64)
    new = np.ones(codes.shape[0], bool)
    new[1:] = codes[1:] != codes[:-1]
    starts = np.flatnonzero(new)
    return codes[starts], np.append(starts, codes.shape[0])


def quantiles_from_counts(values: np.ndarray, counts: np.ndarray, bounds: np.ndarray,
                          q: float) -> np.ndarray:
    """Linear-interpolated q-quantile per group of (value-sorted, counted) rows."""
    cum = np.cumsum(counts)
    start_cum = np.concatenate(([0], cum))[bounds[:-1]]
    n = cum[bounds[1:] - 1] - start_cum
    pos = q * (n - 1)
    lo_r = np.floor(pos).astype(np.int64)
    frac = pos - lo_r
    hi_r = np.minimum(lo_r + 1, n - 1)
    # value at global rank g: first row whose cum > g
    lo_v = values[np.searchsorted(cum, start_cum + lo_r, side="right")].astype(np.float64)
    hi_v = values[np.searchsorted(cum, start_cum + hi_r, side="right")].astype(np.float64)
    with np.errstate(invalid="ignore"):  # NaN / inf neighbours (docs/semantics.md)
        return np.where(frac == 0, lo_v, lo_v + (hi_v - lo_v) * frac)
