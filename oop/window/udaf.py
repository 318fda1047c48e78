"""User-defined aggregates over the multiset store (see :func:`oop.window.aggregates.udaf`).

Python functions: for each emitted window and group, the values of each
pane (or of the window, under WID) are folded with ``update`` into a pane
state, the pane states are combined with ``merge``, and ``finalize`` gives
the output. Cost: one Python call of ``update`` per stored value (a value
repeated ``n`` times in a pane is fed ``n`` times), one ``merge`` per pane.

numba functions (``init``, ``update``, ``finalize`` all ``@numba.njit``):
the whole fold runs compiled (:func:`_fold_compiled`, the user's functions
are first-class arguments): each group's window values are folded with
``update`` directly -- ``merge`` is not needed because the window's values
are all at hand (by the algebra, folding A ∪ B equals merging the folds).

Either way values are visited in sorted order, so the result does not
depend on arrival order. Null values are skipped; a group whose values in a
window are all null gets ``finalize(init())``.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa
from numba.core.registry import CPUDispatcher as Dispatcher

from oop.window.aggregates import Agg
from oop.window.store import Multiset

__all__ = ["udaf_window"]


@nb.njit
def _fold_compiled(init, update, finalize, vals, counts, starts, ends, out):  # pragma: no cover
    for g in range(starts.shape[0]):
        st = init()
        for j in range(starts[g], ends[g]):
            for _ in range(counts[j]):
                st = update(st, vals[j])
        out[g] = finalize(st)


def _is_numba(f: Any) -> bool:
    return isinstance(f, Dispatcher)


def udaf_window(a: Agg, codes: np.ndarray, w: int, ms: Multiset, units: Any) -> pa.Array:
    """The UDAF's values for window ``w`` and the (sorted) group ``codes``."""
    fns = a.fns
    assert fns is not None
    if all(_is_numba(f) for f in (fns.init, fns.update, fns.finalize)):
        lo, hi = (w, w + 1) if units is None else units.window_panes(w)
        c, v, n = ms.select(lo, hi)
        keep = np.isin(c, codes)
        c, v, n = c[keep], v[keep], n[keep]
        b = np.flatnonzero(np.r_[True, c[1:] != c[:-1], True]) if c.shape[0] else np.zeros(1, np.int64)
        gcodes = c[b[:-1]]
        res = np.full(gcodes.shape[0], np.nan)
        if gcodes.shape[0]:
            _fold_compiled(fns.init, fns.update, fns.finalize, v, n, b[:-1], b[1:], res)
        pos = np.searchsorted(codes, gcodes)
        if pos.shape[0] == codes.shape[0]:
            return pa.array(res)
        out = np.full(codes.shape[0], float(fns.finalize(fns.init())))  # groups with no values
        out[pos] = res
        return pa.array(out)
    if units is None:
        pane_ranges = [(w, w + 1)]
    else:
        plo, phi = units.window_panes(w)
        pane_ranges = [(p, p + 1) for p in range(plo, phi)]
    states: dict[int, Any] = {}
    for lo, hi in pane_ranges:
        c, v, n = ms.select(lo, hi)
        if c.shape[0] == 0:
            continue
        starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        ends = np.r_[starts[1:], c.shape[0]]
        for s, e in zip(starts, ends):
            st = fns.init()
            for j in range(s, e):
                for _ in range(int(n[j])):
                    st = fns.update(st, float(v[j]))
            code = int(c[s])
            states[code] = fns.merge(states[code], st) if code in states else st
    out = [fns.finalize(states[int(c)]) if int(c) in states
           else fns.finalize(fns.init())  # a group whose values in the window are all null
           for c in codes]
    return pa.array(out, pa.float64())
