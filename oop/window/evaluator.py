"""Window evaluators: what depends on the method (WID or Paned-WID) of a window operator.

:class:`~oop.window.aggregate.WindowAggregate` keeps what every method shares -- the late
policy, the low-watermark, which windows close and when state is purged, output
punctuation, layout choice -- and asks an *evaluator*, chosen when the method is known
(on the first batch with ``method="auto"``), everything that depends on what a *unit* of
state is:

* :class:`WidEvaluator` (004 §6.1.3.2, Fig. 6-4) -- units are window ids: a tuple updates
  the cells of every window it is in, a window is read from its own unit;
* :class:`~oop.window.paned.PaneCombiner` (004 §6.2) -- units are panes of
  ``gcd(range, slide)``: a tuple updates one pane, a window is combined from its panes.

Both implement :class:`Evaluator`; the operator never tests which one it holds. Cost of
each member: O(1) unless stated.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np
import pyarrow as pa

from oop.progress.watermark import time_bounds
from oop.window.bucket import BucketLogic
from oop.window.cells import CellStore
from oop.window.kinds import Sliding, WindowKind

__all__ = ["Emitted", "Evaluator", "UnitIds", "WidEvaluator"]


class Emitted(NamedTuple):
    """The cells of a block of emitted windows, ordered by (window, code).

    ``wid``: each cell's window id (None when ``extents`` are given and it was not
    needed); ``extents``: (window_start, window_end) when the evaluator computed them;
    ``key_values``: ``codes`` already holds the one int64 key column's values; ``clean``:
    the units ``[lo, hi)`` whose live cells the emission already reset (the purge then
    only moves the base)."""

    wid: np.ndarray | None
    codes: np.ndarray
    lanes: dict
    extents: tuple[np.ndarray, np.ndarray] | None = None
    key_values: bool = False
    clean: tuple[int, int] | None = None


class UnitIds(NamedTuple):
    """The units a batch updates: ``ulo``/``uhi`` per row (``uhi`` None: one unit each,
    or left to the store's tumbling WIDs with ``ulo`` None too), their least and greatest
    (``low``, ``high``), and the window ids ``lo``/``hi`` when they were computed anyway
    (WID: they are the units). Named tuples, like :class:`Emitted`: one is built per batch
    (a frozen dataclass's field-by-field ``__init__`` cost ~1 us more)."""

    ulo: np.ndarray | None
    uhi: np.ndarray | None
    low: int
    high: int
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None


class Evaluator(Protocol):
    """The method-dependent part of a window operator (see the module docstring)."""

    #: the method's name (``plan_info["method"]``)
    method: str
    #: landmark windows: every unit stays in all later windows (keys are never forgotten)
    landmark: bool
    #: the store must note where NaN / inf entered (the evaluator subtracts units)
    track_nf: bool
    #: Python UDAF states may be cached per unit (:func:`oop.window.udaf.pane_cache`)
    cache_pane_states: bool

    def one_unit_per_row(self) -> bool: ...

    def tumbles_in_store(self) -> bool: ...

    def hash_lanes_ok(self) -> bool: ...

    def hash_revisions_ok(self) -> bool: ...

    def early_ids(self, times: np.ndarray, update: bool) -> Any: ...

    def unit_ids(self, bucket: BucketLogic, batch: pa.RecordBatch, times: np.ndarray,
                 early: Any, need_hi: bool) -> UnitIds: ...

    def unit_windows(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def window_panes(self, w: int) -> tuple[int, int]: ...

    def first_window(self, unit: int) -> int: ...

    def last_window(self, unit: int) -> int: ...

    def first_unit_needed(self, w: int) -> int: ...

    def holistic_unit_needed(self, w: int) -> int: ...

    def emit_cells(self, ring: CellStore, wids: Sequence[int], n: int,
                   key_lut: Callable[[], np.ndarray | None], update: bool) -> Emitted | None: ...

    def window_cells(self, ring: CellStore, w: int, n: int,
                     differential_ok: bool = True) -> tuple[np.ndarray, dict] | None: ...

    def quantiles(self, ms: Any, parts: Sequence[tuple], q: float
                  ) -> tuple[np.ndarray, np.ndarray] | None: ...

    def distinct(self, ms: Any, parts: Sequence[tuple], col: str | None,
                 n_codes: int) -> np.ndarray | None: ...

    def heavy(self, ms: Any, parts: Sequence[tuple], col: str | None, n_codes: int,
              rank: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None: ...

    def flatten(self, parts: Sequence[tuple], ms: Any, ascending: bool = False,
                lo: int | None = None) -> tuple | None: ...

    def forget_codes(self) -> None: ...

    def forget_values(self) -> None: ...

    def remap_values(self, key: tuple[str, str | None], remap: np.ndarray) -> None: ...

    def held_values(self, key: tuple[str, str | None]) -> np.ndarray: ...

    def nbytes(self) -> int: ...

    def snapshot(self) -> Any: ...

    def restore(self, s: Any) -> None: ...


class WidEvaluator:
    """WID: units are window ids (004 §6.1.3.2). Tuple ``t`` updates the cells
    ``(code(t), w)`` for ``w in [wid_lo(t), wid_hi(t))``, O(range/slide) per tuple;
    window ``w`` is its own unit's cells; its state is purged once it is emitted (with
    ``late="update"``: once it is past the allowed lateness). Keeps no state of its own."""

    method = "wid"
    landmark = False
    track_nf = False  # never subtracts
    cache_pane_states = False

    def __init__(self, kind: WindowKind) -> None:
        self.kind = kind
        # fixed by the kind, asked on every batch
        self._single = isinstance(kind, Sliding) and kind.r == kind.s
        self._tumbles_in_store = not kind.row_based and self._single

    def one_unit_per_row(self) -> bool:
        """Tumbling windows: each tuple is in one window."""
        return self._single

    def tumbles_in_store(self) -> bool:
        """Tumbling time windows: the cell store can compute the WIDs itself."""
        return self._tumbles_in_store

    def hash_lanes_ok(self) -> bool:
        """Hash cells hold every lane of window cells."""
        return True

    def hash_revisions_ok(self) -> bool:
        """Revisions read window cells, which hash cells answer (:meth:`CellStore.unit_cells`)."""
        return True

    def early_ids(self, times: np.ndarray, update: bool) -> None:
        """Nothing to compute before the late check."""
        return None

    def unit_ids(self, bucket: BucketLogic, batch: pa.RecordBatch, times: np.ndarray,
                 early: Any, need_hi: bool) -> UnitIds:
        """The window ids of every row (:meth:`BucketLogic.tag`); they are the units. O(n)."""
        lo, hi = bucket.tag(batch, times)
        low, high = time_bounds(lo)
        return UnitIds(lo, hi, low, high, lo, hi)

    def unit_windows(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unit ``u`` is window ``u``. O(len(u))."""
        return u, u + 1

    def window_panes(self, w: int) -> tuple[int, int]:
        return w, w + 1

    def first_window(self, unit: int) -> int:
        return unit

    def last_window(self, unit: int) -> int:
        return unit

    def first_unit_needed(self, w: int) -> int:
        return w

    def holistic_unit_needed(self, w: int) -> int:
        return w

    def emit_cells(self, ring: CellStore, wids: Sequence[int], n: int,
                   key_lut: Callable[[], np.ndarray | None], update: bool) -> Emitted:
        """Every live cell of windows ``wids`` in one vectorized pass over the store; without
        ``update`` (emitted = purged) gathered and reset in one pass. O(cells x lanes)."""
        if not update:
            wid, codes, lanes = ring.take_block(wids, n)
            return Emitted(wid, codes, lanes, clean=(wids[0], wids[-1] + 1) if wids else None)
        wid, codes, lanes = ring.block(wids, n)
        return Emitted(wid, codes, lanes)

    def window_cells(self, ring: CellStore, w: int, n: int,
                     differential_ok: bool = True) -> tuple[np.ndarray, dict] | None:
        """(live codes, lane values) of window ``w``: its unit's cells. O(n)."""
        if not (ring.base <= w < ring.top):
            return None
        return ring.unit_cells(w, n)

    # the holistic shortcuts of Paned-WID: none (the operator goes window by window)
    def quantiles(self, ms: Any, parts: Sequence[tuple], q: float) -> None:
        return None

    def distinct(self, ms: Any, parts: Sequence[tuple], col: str | None, n_codes: int) -> None:
        return None

    def heavy(self, ms: Any, parts: Sequence[tuple], col: str | None, n_codes: int,
              rank: np.ndarray, k: int) -> None:
        return None

    def flatten(self, parts: Sequence[tuple], ms: Any, ascending: bool = False,
                lo: int | None = None) -> None:
        return None

    # no state of its own
    def forget_codes(self) -> None:
        return None

    def forget_values(self) -> None:
        return None

    def remap_values(self, key: tuple[str, str | None], remap: np.ndarray) -> None:
        return None

    def held_values(self, key: tuple[str, str | None]) -> np.ndarray:
        return np.zeros(0, np.int64)

    def nbytes(self) -> int:
        return 0

    def snapshot(self) -> None:
        return None

    def restore(self, s: Any) -> None:
        return None
