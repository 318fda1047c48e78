"""Window evaluators and cell stores as parts (oop/window/evaluator.py, oop/window/cells.py):
both evaluators answer the unit <-> window geometry consistently, and every store / evaluator
has every member its protocol names (so the operator never needs to test which it holds)."""

from __future__ import annotations

import inspect

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from oop.window import Sliding, agg
from oop.window.cells import CellStore
from oop.window.evaluator import Evaluator, WidEvaluator
from oop.window.hashstore import HashCells
from oop.window.paned import PaneCombiner
from oop.window.ring import Ring
from oop.window.values import lane_infos

SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("v", pa.float64())])
AGGS = [agg.count(), agg.sum("v"), agg.max("v")]


def _members(proto: type) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {n for n, _ in inspect.getmembers(proto) if not n.startswith("__")}
    return {n for n in names if not n.startswith("_abc") and n not in ("_is_protocol", "_is_runtime_protocol")}


def _evaluators(kind: Sliding) -> list:
    return [WidEvaluator(kind), PaneCombiner(kind, lane_infos(AGGS, SCHEMA), AGGS)]


def test_stores_and_evaluators_implement_their_protocols() -> None:
    lanes = lane_infos(AGGS, SCHEMA)
    for store in (Ring(lanes), HashCells(lanes)):
        missing = {m for m in _members(CellStore) if not hasattr(store, m)}
        assert not missing, (type(store).__name__, missing)
    for ev in _evaluators(Sliding(10, 5)):
        missing = {m for m in _members(Evaluator) if not hasattr(ev, m)}
        assert not missing, (type(ev).__name__, missing)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.integers(-3, 3))
def test_unit_window_geometry_agrees(slide_panes, extra, pane, origin) -> None:
    """Unit ``u`` is in window ``w`` iff ``window_panes(w)`` holds it iff ``unit_windows(u)``
    holds ``w``; first/last window of a unit are the ends of that range; the purge keeps every
    unit the next window needs."""
    s = slide_panes * pane
    r = s + extra * pane
    kind = Sliding(r, s, origin)
    for ev in _evaluators(kind):
        units = list(range(-8, 24))
        for u in units:
            lo, hi = (int(x[0]) for x in ev.unit_windows(np.array([u])))
            assert ev.first_window(u) == lo and ev.last_window(u) == hi - 1, (type(ev), u)
            for w in range(lo - 3, hi + 3):
                plo, phi = ev.window_panes(w)
                assert (plo <= u < phi) == (lo <= w < hi), (type(ev).__name__, u, w)
        for w in range(-4, 12):
            assert ev.first_unit_needed(w) <= ev.window_panes(w)[0]
            assert ev.holistic_unit_needed(w) <= ev.window_panes(w)[0]
