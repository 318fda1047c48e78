"""AdaptWID's open window extents and their duration ``wed`` (004 §6.3.4.1), and the
stream-wide terms of Cond. 6.9 that a run on key partitions measures once.

:class:`OpenExtents` -- the window ids that hold a tuple and are not closed yet, and
:class:`~oop.progress.WindowExtentDuration` over them: an extent *starts* when the first
tuple of its window arrives (``wed.start`` with the low-watermark of that moment) and
*completes* when the punctuation that closes it arrives (``wed.complete`` with the
high-watermark of that moment). :class:`~oop.adapt.logic.AdaptLogic` holds one (its
windows to close are these).

:class:`StreamTerms` -- what one AdaptWID thread measures of the *whole* stream for
Cond. 6.9 (one source: ``theta = aggr * wed / (tup * SLIDE)``, 004 §6.3.2): ``wed``
(through an :class:`OpenExtents` of every tuple's windows, the high-watermark of every
tuple in time) and the value columns that have shown a null (each adds a validity column
to the lazy buffer, so ``tup`` grows). :class:`~oop.adapt.threaded.ThreadedAdapt`
keeps one on its driving thread, which sees every tuple, and gives its values to every
partition before each batch and punctuation (:meth:`AdaptWID.stream_terms
<oop.adapt.operator.AdaptWID.stream_terms>`), so each partition decides eager / lazy
with the one-thread ``theta``; a group's own volume ``winVol`` stays its partition's.
The per-row window ids come from the one-thread kernel
(:func:`~oop.adapt.kernels.route_batch`, unmonitored), the starts and completions from
the one :class:`OpenExtents`: the same code as one thread.

No punctuation rule here: nothing is emitted, purged or forwarded.

Cost: :meth:`OpenExtents.start` O(log open) when the batch's windows are open already,
else O(rows + windows); :class:`StreamTerms` per batch one compiled pass over the time
column, per punctuation O(closing windows).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
from sortedcontainers import SortedSet

from oop.adapt.bucket import covered_windows, expand
from oop.adapt.kernels.route import ROW_LATE, route_batch
from oop.progress.measures import WindowExtentDuration
from oop.stream.elements import INT64_MIN

__all__ = ["OpenExtents", "StreamTerms"]


class OpenExtents:
    """The open window ids (those holding a tuple, not closed) and ``wed`` over them.

    ``geom``: the windows' ``(RANGE, SLIDE, origin)`` as ints. Not thread-safe.
    """

    def __init__(self, geom: tuple[int, int, int]) -> None:
        self._range, self._slide, self._origin = geom
        self.wed = WindowExtentDuration(self._range)
        self.open_wids: SortedSet = SortedSet()
        #: [a, b]: every window id in it that is >= first_open is open (0, -1: none known)
        self._open_span = (0, -1)

    def start(self, lo: np.ndarray, hi: np.ndarray, lwm: int, cls: np.ndarray | None = None,
              n_late: int = 0, wlo: int | None = None, whi: int | None = None) -> None:
        """Open the windows the rows in time cover (``cls != ROW_LATE``; ``[lo, hi)``: each
        row's window ids, clipped to the first open one) and start their extents' ``wed``
        at ``lwm``; ``wlo`` / ``whi``: the smallest / greatest of those ids.

        Fast path: every window in ``[wlo, whi]`` is open already (O(log) in the open set).
        """
        opened = self.open_wids
        if wlo is not None and whi is not None:
            a, b = self._open_span  # closing windows only removes ids below first_open <= wlo
            if a <= wlo and whi <= b:
                return
            if a <= wlo <= b + 1 and 0 < whi - b <= self._range // self._slide:
                # only windows above the open span are new, and the row whose last window is
                # whi covers every one of (b, whi] (a tuple is in >= RANGE // SLIDE
                # consecutive windows, clipped to first_open <= wlo <= b + 1): no scan
                self._open_new([w for w in range(b + 1, whi + 1) if w not in opened], lwm)
                self._open_span = (a, whi)
                return
            if opened and wlo >= opened[0] and whi <= opened[-1] \
                    and opened.bisect_right(whi) - opened.bisect_left(wlo) == whi - wlo + 1:
                self._open_span = (wlo, whi)
                return
        if n_late and cls is not None:
            ok = cls != ROW_LATE
            lo, hi = lo[ok], hi[ok]
        ws = covered_windows(lo, hi)
        if ws is None:  # the batch spans far more windows than it has tuples
            ulo, inv = np.unique(lo, return_inverse=True)
            top = np.full(len(ulo), INT64_MIN, np.int64)
            np.maximum.at(top, inv, hi)
            ws = np.unique(expand(ulo, top)[1])
        if wlo is not None and whi is not None and len(ws) == whi - wlo + 1:
            self._open_span = (wlo, whi)  # no gap: every window of [wlo, whi] is open below
        self._open_new([w for w in ws.tolist() if w not in opened], lwm)  # per window, not tuple

    def _open_new(self, fresh: list[int], lwm: int) -> None:
        """Windows ``fresh`` (ascending, not open yet) open: their extents start ``wed``."""
        if not fresh:
            return
        for w in fresh:  # extent start = origin + (w + 1) * SLIDE - RANGE (kind.extents)
            self.wed.start(w, lwm, fallback=self._origin + (w + 1) * self._slide - self._range)
        self.open_wids.update(fresh)

    def closing(self, fo: int, first_open: int) -> list[int]:
        """The open windows a punctuation whose first open window is ``fo`` closes (every
        one below ``fo``; none unless ``fo`` passes ``first_open``), ascending. O(log open
        + closing)."""
        opened = self.open_wids
        return list(opened[:opened.bisect_left(fo)]) if fo > first_open else []

    def close(self, w: int, hw: int, measure: bool = True) -> None:
        """Window ``w`` closed while the high-watermark was ``hw``: its extent completes
        (``wed``, unless not ``measure``: the end of the stream is no measurement). O(log)."""
        if measure:
            self.wed.complete(w, hw)
        self.open_wids.discard(w)

    def restore(self, wed: Any, open_wids: Sequence[int]) -> None:
        self.wed.restore(wed)
        self.open_wids = SortedSet(open_wids)
        self._open_span = (0, -1)


class StreamTerms:
    """Cond. 6.9's stream-wide terms as one AdaptWID thread measures them (see the module
    docstring), fed with every batch and punctuation of the stream, in order.

    ``geom``: the windows' ``(RANGE, SLIDE, origin)``; ``value_columns``: the columns
    AdaptWID buffers.
    Not thread-safe (the driving thread's).
    """

    def __init__(self, geom: tuple[int, int, int], value_columns: Sequence[str]) -> None:
        self._geom = np.asarray(geom, np.int64)
        self._origin, self._slide = int(geom[2]), int(geom[1])
        self.extents = OpenExtents(geom)
        self.value_columns = list(value_columns)
        self.lwm = INT64_MIN
        self.first_open = INT64_MIN
        self._hwm = np.full(1, INT64_MIN, np.int64)
        self._out = np.zeros(9, np.int64)
        # route_batch's arguments and outputs (scratch, not state)
        self._lo = self._hi = np.empty(0, np.int64)
        self._cls = self._src0 = np.empty(0, np.int8)
        self._no_wv, self._none = np.zeros((0, 1), np.int32), np.zeros(0, np.int64)
        #: value columns that showed a null in a batch with a row in time (validity in B)
        self.nulls: list[str] = []

    def terms(self) -> dict[str, Any]:
        """What one thread decides with now: ``wed`` and the value columns whose validity
        its buffer holds (``tup``). O(columns)."""
        return {"wed": int(self.extents.wed.value), "validity": list(self.nulls)}

    def on_batch(self, batch: pa.RecordBatch, ts: np.ndarray) -> dict[str, Any]:
        """Measure a batch (``ts``: its times, int64) as one thread does -- the windows its
        rows in time open (and the extents that start), the high-watermark, its null
        columns -- and return the terms one thread decides this batch with
        (:meth:`terms` before it; ``validity_after``: the validity columns one thread's
        buffer holds after it). O(rows), one compiled pass."""
        out = self.terms()
        n = ts.shape[0]
        if len(self._lo) < n:  # reused scratch (not state)
            self._lo, self._hi = np.empty(2 * n, np.int64), np.empty(2 * n, np.int64)
            self._cls, self._src0 = np.empty(2 * n, np.int8), np.zeros(2 * n, np.int8)
        lo, hi, cls = self._lo[:n], self._hi[:n], self._cls[:n]
        route_batch(ts, self._src0[:n], ts, self._geom, lo, hi, self.first_open,
                    self._no_wv, self._none, 0, 0, False, True, 1.0, 1.0, False, 1.0, cls,
                    self._hwm, self._out, self._none)
        n_late, _, _, _, _, _, _, wlo, whi = self._out.tolist()
        if n and n_late < n:  # an all-late batch: one thread returns before the values
            self.extents.start(lo, hi, self.lwm, cls, n_late, wlo, whi)
            for c in self.value_columns:
                if c not in self.nulls and batch.column(c).null_count:
                    self.nulls.append(c)
        out["validity_after"] = list(self.nulls)
        return out

    def on_punctuation(self, v: int) -> dict[str, Any]:
        """A punctuation ``v`` (greater than every one before): the extents it closes
        complete at the high-watermark; returns the :meth:`terms` after it. O(closing
        windows)."""
        fo = (int(v) - self._origin) // self._slide  # kind.first_open(v)
        self.lwm = int(v)
        hw = int(self._hwm[0])
        for w in self.extents.closing(fo, self.first_open):
            self.extents.close(w, hw)
        self.first_open = max(self.first_open, fo)
        return self.terms()

    def snapshot(self) -> dict[str, Any]:
        """What :meth:`restore` needs to measure on as before (a checkpoint of
        :class:`~oop.adapt.threaded.ThreadedAdapt`). O(open windows)."""
        return {"wed": self.extents.wed.snapshot(), "open": list(self.extents.open_wids),
                "lwm": self.lwm, "first_open": self.first_open, "hwm": int(self._hwm[0]),
                "nulls": list(self.nulls)}

    def restore(self, s: dict[str, Any]) -> None:
        """Continue from a :meth:`snapshot` of the same geometry. O(open windows)."""
        self.extents.restore(s["wed"], s["open"])
        self.lwm, self.first_open = int(s["lwm"]), int(s["first_open"])
        self._hwm[0] = int(s["hwm"])
        self.nulls = list(s["nulls"])
