"""The cell-store protocol: what the window operator and Paned-WID ask of their state.

A *cell* is the partial aggregate of one ``(unit, group code)``: units are window ids
(WID) or pane ids (Paned-WID, 004 §6.2), codes come from
:class:`~oop.window.keys.KeyEncoder`. Two layouts implement :class:`CellStore`:

* :class:`~oop.window.ring.Ring` -- dense ``(ring rows x codes)`` lanes, O(1) per update,
  memory ``R x C x lanes x 8`` bytes whatever the density;
* :class:`~oop.window.hashstore.HashCells` -- a hash table of the live cells only, memory
  O(live cells), one probe per (row, unit).

:class:`~oop.window.aggregate.WindowAggregate` and
:class:`~oop.window.paned.PaneCombiner` use a store only through the members named here
(no ``isinstance`` on the layout): where the layouts differ -- how one unit's cells are
read, which windows an emission must walk, whether a span of units costs memory, when
the state should change layout, how Paned-WID's compiled emission walks the panes --
the store answers (``emit_pane_sums`` dispatches back to the combiner's
``emit_dense`` / ``emit_hash``: :class:`PaneEmitter`).

:func:`store_for_snapshot` makes a store of the layout a snapshot was taken of.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from oop.window.hashstore import HashCells
from oop.window.ring import Ring
from oop.window.values import ColumnValues, LaneInfo

__all__ = ["CellStore", "PaneEmitter", "SparseFrom", "store_for_snapshot"]

LaneKey = tuple[str, "str | None"]


class CellStore(Protocol):
    """Partial aggregates per ``(unit, code)`` cell; see the module docstring.

    Attributes: open units are ``[base, top)``; ``live`` counts the non-empty cells (exact,
    O(1)); ``arr`` / ``tarr`` are the lanes (and first/last time lanes) the compiled kernels
    address with ``C`` / ``mask``; ``shift`` holds the variance shifts; ``guard`` is the
    growth check (oop.limits); ``track_nf`` / ``nf_hi`` the largest unit that may hold a
    NaN / infinite sum (Paned-WID cannot subtract it); ``fixed`` rows are per code (PA).
    """

    layout: str
    base: int
    top: int
    live: int
    C: int
    fixed: bool
    shift: dict[str, Any]
    guard: Any
    track_nf: bool
    nf_hi: int
    arr: dict[LaneKey, np.ndarray]
    tarr: dict[LaneKey, np.ndarray]

    @property
    def mask(self) -> int: ...

    # ---- updating ----
    def update(self, codes: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
               cols: dict[str, ColumnValues], times: np.ndarray, n_codes: int,
               single: bool = False, top: int | None = None,
               tumble: tuple[int, int] | None = None) -> None: ...

    def lower_base(self, low: int) -> None: ...

    # ---- reading ----
    def alias(self, key: LaneKey) -> LaneKey: ...

    def view(self, key: LaneKey, unit: int, time: bool = False) -> np.ndarray: ...

    def unit_cells(self, unit: int, n: int) -> tuple[np.ndarray, dict] | None: ...

    def block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]: ...

    def take_block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]: ...

    def live_runs(self, start: int, stop: int,
                  windows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                  ) -> list[range]: ...

    def emit_pane_sums(self, pc: PaneEmitter, **kw: Any) -> Any: ...

    # ---- purging ----
    def reset_cells(self, units: np.ndarray, codes: np.ndarray) -> None: ...

    def purge_below(self, unit: int, clean: bool = False) -> None: ...

    def forget_emitted(self, dead: int, below: int) -> None: ...

    # ---- layout ----
    def dense_growth(self, low: int, top: int) -> tuple[int, int] | None: ...

    def relayout(self, density: float, n_codes: int,
                 sparse: type[SparseFrom]) -> CellStore | None: ...

    def to_dense(self, n_codes: int) -> Ring: ...

    # ---- codes and values ----
    def live_codes(self, n: int) -> np.ndarray: ...

    def compact_codes(self, keep: np.ndarray) -> None: ...

    def remap_values(self, key: LaneKey, remap: np.ndarray) -> None: ...

    def held_values(self, key: LaneKey) -> np.ndarray: ...

    # ---- accounting and checkpoints ----
    def nbytes(self) -> int: ...

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, s: dict[str, Any]) -> None: ...

    def _check(self) -> None: ...


class SparseFrom(Protocol):
    """A sparse layout built from a dense ring (:meth:`HashCells.from_ring`)."""

    @classmethod
    def from_ring(cls, ring: Ring, n: int) -> CellStore: ...


class PaneEmitter(Protocol):
    """Paned-WID's compiled emission, one entry per layout (:meth:`CellStore.emit_pane_sums`)."""

    def emit_dense(self, ring: Ring, **kw: Any) -> Any: ...

    def emit_hash(self, ring: HashCells, **kw: Any) -> Any: ...


#: snapshot "layout" tag -> store class
_LAYOUTS: dict[str, Callable[[Sequence[LaneInfo]], CellStore]] = {
    Ring.layout: Ring, HashCells.layout: HashCells}


def store_for_snapshot(lanes: Sequence[LaneInfo], s: dict[str, Any]) -> CellStore:
    """An empty store of the layout snapshot ``s`` was taken of (its ``"layout"`` tag; older
    untagged snapshots: hash cells hold ``cell_u``), to ``restore(s)`` into. O(1)."""
    return _LAYOUTS[s.get("layout", HashCells.layout if "cell_u" in s else Ring.layout)](lanes)
