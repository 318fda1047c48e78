"""User-defined aggregates over the multiset store (see :func:`oop.window.aggregates.udaf`).

Python functions: for each emitted window and group, the values of each
pane (or of the window, under WID) are folded with ``update`` into a pane
state, the pane states are combined with ``merge``, and ``finalize`` gives
the output. Under Paned-WID each pane's states are folded once and kept
until no later window needs them (:func:`pane_cache`). Cost: one Python
call of ``update`` per stored value (a value repeated ``n`` times in a pane
is fed ``n`` times) -- per value and window under WID -- and one ``merge``
per pane and window.

numba functions (``init``, ``update``, ``finalize`` all ``@numba.njit``):
the whole fold runs compiled (:func:`_fold_compiled`, the user's functions
are first-class arguments): each group's window values are folded with
``update`` directly -- ``merge`` is not needed because the window's values
are all at hand (by the algebra, folding A ∪ B equals merging the folds).
Under Paned-WID every window of a punctuation goes through one call
(:func:`udaf_windows`: per-pane cursors and an on-the-fly merge of the
panes' sorted value runs, no merged table built).

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
from oop.window.paned_kernels import cell_runs, merge_buffers, pane_cursors, smallest_run
from oop.window.multiset import Multiset

__all__ = ["udaf_window", "udaf_windows", "is_compiled"]


@nb.njit
def _fold_compiled(init, update, finalize, vals, counts, starts, ends, out):  # pragma: no cover
    for g in range(starts.shape[0]):
        st = init()
        for j in range(starts[g], ends[g]):
            for _ in range(counts[j]):
                st = update(st, vals[j])
        out[g] = finalize(st)


@nb.njit
def _paned_fold_compiled(init, update, finalize, code, value, count, pa0, offs, plo, phi, cb,
                         cells, out):  # pragma: no cover - compiled; tested through udaf_windows
    """Every window of a punctuation in one call: window ``k`` is panes ``[plo[k], phi[k])``
    and cells ``cells[cb[k]:cb[k+1]]`` (ascending codes); pane ``p``'s (code, value)-sorted
    rows of the Multiset table are ``offs[p - pa0]:offs[p - pa0 + 1]``.

    Per window one cursor per pane walks its rows as the codes ascend (as
    :func:`~oop.window.paned_kernels.paned_quantiles` does); a cell's value
    runs in the ``P`` panes are merged on the fly (smallest value first, NaN
    last) and each value is fed to ``update`` ``count`` times -- the same
    sequence of calls as folding the merged table of :meth:`Multiset.select`,
    so the results are identical, without building it. Cells without values
    get ``finalize(init())``.
    """
    cur, end, pos, seg = merge_buffers(plo, phi)
    for k in range(plo.shape[0]):
        P = phi[k] - plo[k]
        pane_cursors(offs, pa0, plo[k], P, cur, end)
        for t in range(cb[k], cb[k + 1]):
            na, _ = cell_runs(code, count, cells[t], P, cur, end, pos, seg)
            st = init()
            while na > 0:  # merge walk: the smallest value of the live runs next
                b, vb = smallest_run(value, pos, na)
                for _ in range(count[pos[b]]):
                    st = update(st, vb)
                pos[b] += 1
                if pos[b] == seg[b]:  # run exhausted: drop it
                    na -= 1
                    pos[b] = pos[na]
                    seg[b] = seg[na]
            out[t] = finalize(st)


def _fold_pane(fns: Any, c: np.ndarray, v: np.ndarray, n: np.ndarray) -> dict[int, Any]:
    """The state of every code of one pane: its values folded with ``update`` in sorted order."""
    out: dict[int, Any] = {}
    if c.shape[0] == 0:
        return out
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    ends = np.r_[starts[1:], c.shape[0]]
    for s, e in zip(starts, ends):
        st = fns.init()
        for j in range(s, e):
            for _ in range(int(n[j])):
                st = fns.update(st, float(v[j]))
        out[int(c[s])] = st
    return out


def pane_cache(a: Agg, units: Any) -> dict[int, dict[int, Any]] | None:
    """Paned-WID's per-pane UDAF states of ``a`` (pane -> code -> state), kept on the pane
    combiner while it allows (not with ``late="update"``: revised panes would be stale).

    A pane is complete once a window containing it is emitted (later tuples
    are late), so its state is folded once and merged into each of its
    ``range/slide`` windows: one ``update`` call per value instead of one per
    value and window (004 §6.2.1's pane-level query for a UDAF).
    """
    if units is None or not units.cache_pane_states:
        return None
    return units.pane_states.setdefault(a.name, {})


def _is_numba(f: Any) -> bool:
    return isinstance(f, Dispatcher)


def is_compiled(a: Agg) -> bool:
    """Whether the UDAF's ``init``, ``update`` and ``finalize`` are numba functions."""
    fns = a.fns
    return fns is not None and all(_is_numba(f) for f in (fns.init, fns.update, fns.finalize))


def udaf_windows(a: Agg, parts: Any, ms: Multiset, units: Any) -> pa.Array | None:
    """A compiled UDAF for every window of ``parts`` ``[(wid, codes, _), ...]`` of Paned-WID in
    one call (:func:`_paned_fold_compiled`); None when some window's codes do not ascend (the
    caller then goes window by window through :func:`udaf_window`)."""
    fns = a.fns
    assert fns is not None
    lay = units.flatten(parts, ms, ascending=True)
    if lay is None:
        return None
    cells, cb, plo, phi, pa0, offs = lay
    out = np.empty(cells.shape[0], np.float64)
    _paned_fold_compiled(fns.init, fns.update, fns.finalize, ms.code,
                         ms.value.astype(np.float64, copy=False), ms.count, pa0, offs, plo, phi,
                         cb, cells, out)
    return pa.array(out)


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
    cache = pane_cache(a, units)
    if units is None:
        panes = [w]
    else:
        plo, phi = units.window_panes(w)
        panes = list(range(plo, phi))
        if cache is not None:  # windows ascend: panes before this one's are never needed again
            for p in [p for p in cache if p < plo]:
                del cache[p]
    states: dict[int, Any] = {}
    for p in panes:
        pane = cache.get(p) if cache is not None else None
        if pane is None:
            pane = _fold_pane(fns, *ms.select(p, p + 1))
            if cache is not None:
                cache[p] = pane
        for code, st in pane.items():
            states[code] = fns.merge(states[code], st) if code in states else st
    out = [fns.finalize(states[int(c)]) if int(c) in states
           else fns.finalize(fns.init())  # a group whose values in the window are all null
           for c in codes]
    return pa.array(out, pa.float64())
