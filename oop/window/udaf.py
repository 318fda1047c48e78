"""User-defined aggregates over the multiset store (see :func:`oop.window.aggregates.udaf`).

For each emitted window and group, the values of each pane (or of the
window, under WID) are folded with ``update`` into a pane state, the pane
states are combined with ``merge``, and ``finalize`` gives the output.
Values are visited in sorted order, so the result does not depend on
arrival order. Cost: one call of the user's ``update`` per stored value
(a value repeated ``n`` times in a pane is fed ``n`` times), one ``merge``
per pane -- Python speed for Python functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from oop.window.aggregates import Agg
from oop.window.store import Multiset

__all__ = ["udaf_window"]


def udaf_window(a: Agg, codes: np.ndarray, w: int, ms: Multiset, units: Any) -> pa.Array:
    """The UDAF's values for window ``w`` and the (sorted) group ``codes``."""
    fns = a.fns
    assert fns is not None
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
    out = [fns.finalize(states[int(c)]) if int(c) in states else None for c in codes]
    return pa.array(out, pa.float64())
