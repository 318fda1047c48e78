"""Stream measures relative to a window specification (004 §6.3.1).

AdaptWID's memory-cost model (004 §6.3.2) is written in three measures of a
punctuated, possibly multi-source stream. They are built here on the
progress core (:class:`~oop.progress.watermark.LowWatermark`,
:class:`~oop.progress.watermark.HighWatermark`) so any operator can use them:

* :class:`WindowExtentDuration` -- *arrival order*, ``wed``: for one window
  extent, ``hwm(at completion) - lwm(at start)``, where the extent *starts*
  when its first tuple arrives and *completes* when the punctuation covering
  its end arrives. The high-watermark is the largest time seen, the
  low-watermark the largest punctuation seen (004 §6.3.4.1). ``wed`` starts
  at ``RANGE`` and is replaced by the ``wed`` of the most recently completed
  extent. ``wed / SLIDE`` estimates how many extents are open at a time.
* :class:`SourceOffsets` -- *arrival-time skew*: per source, the
  high-watermark, and ``offset_{K -> S1} = hwm(S1) - hwm(K)`` where ``S1`` is
  the earliest-arriving (most advanced) source. Offsets are ``>= 0``; a
  source that has sent nothing yet has offset 0 (it has no volume either).
* :class:`StreamVolume` -- *stream volume*, ``vol``: tuples per unit of the
  windowing attribute, estimated as ``(tuples active in a window extent) /
  RANGE`` (004 §6.3.4.1). It is independent of the arrival rate.

>>> wed = WindowExtentDuration(range_=10)
>>> wed.value                       # initialised to RANGE
10
>>> wed.start(3, lwm=20)            # first tuple of extent 3 seen when lwm = 20
True
>>> wed.start(3, lwm=25)            # already started: the first start counts
False
>>> wed.complete(3, hwm=34)         # punctuation closed it when hwm = 34
14
>>> off = SourceOffsets(3)
>>> off.observe(0, np.array([100, 120])); off.observe(1, np.array([90]))
>>> off.offsets().tolist()          # source 0 is S1; source 2 sent nothing
[0, 30, 0]
>>> vol = StreamVolume(range_=10)
>>> vol.add(25); vol.expire(5); vol.value
2.0

Cost: O(1) per extent start/completion, O(n) per batch for the
high-watermarks (vectorized), O(sources) to read the offsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oop.progress.watermark import HighWatermark, LowWatermark
from oop.stream.elements import INT64_MIN

__all__ = ["WindowExtentDuration", "SourceOffsets", "StreamVolume"]


class WindowExtentDuration:
    """``wed`` of the most recently completed window extent (004 §6.3.1).

    ``start(wid, lwm)`` records the low-watermark when the extent's first
    tuple arrived (only the first call per extent counts);
    ``complete(wid, hwm)`` closes it and sets ``value = hwm - lwm_start``.
    While the low-watermark is still unknown (no punctuation yet) the extent's
    own start time ``fallback`` is used, if given, else the extent is not
    measured. A measured duration is never below 0. Memory: one int per open
    extent.
    """

    __slots__ = ("range_", "value", "_starts")

    def __init__(self, range_: int) -> None:
        if range_ <= 0:
            raise ValueError(f"WindowExtentDuration: RANGE must be > 0, got {range_}")
        self.range_ = int(range_)
        self.value = int(range_)
        self._starts: dict[int, int] = {}

    def start(self, wid: int, lwm: "int | LowWatermark", fallback: int | None = None) -> bool:
        """Extent ``wid`` saw its first tuple while the low-watermark was ``lwm``. O(1)."""
        wid = int(wid)
        if isinstance(lwm, LowWatermark):
            lwm = lwm.value
        if wid in self._starts:
            return False
        if lwm == INT64_MIN:
            if fallback is None:
                return False
            lwm = fallback
        self._starts[wid] = int(lwm)
        return True

    def complete(self, wid: int, hwm: int) -> int:
        """Extent ``wid`` was closed while the high-watermark was ``hwm``; returns ``wed``. O(1)."""
        s = self._starts.pop(int(wid), None)
        if s is not None and hwm != INT64_MIN:
            self.value = max(0, int(hwm) - s)
        return self.value

    @property
    def open_extents(self) -> int:
        """Extents started and not completed."""
        return len(self._starts)

    def snapshot(self) -> Any:
        return {"value": self.value, "starts": dict(self._starts)}

    def restore(self, state: Any) -> None:
        self.value = int(state["value"])
        self._starts = dict(state["starts"])

    def _check(self) -> None:
        assert self.value >= 0, self.value


class SourceOffsets:
    """High-watermark per source and the offsets ``hwm(S1) - hwm(K)`` (004 Fig. 6-16)."""

    __slots__ = ("hwms",)

    def __init__(self, n_sources: int, attr: str = "ts") -> None:
        if n_sources < 1:
            raise ValueError(f"SourceOffsets needs at least one source, got {n_sources}")
        self.hwms = [HighWatermark(attr) for _ in range(n_sources)]

    @property
    def n_sources(self) -> int:
        return len(self.hwms)

    def observe(self, source: int, times: np.ndarray) -> None:
        """Fold a batch of source ``source``'s times in. O(len(times))."""
        self.hwms[source].observe(times)

    def observe_many(self, sources: np.ndarray, times: np.ndarray) -> None:
        """Fold a batch whose tuples carry their source id in ``sources``. O(n)."""
        if len(times) == 0:
            return
        if self.n_sources == 1:
            self.hwms[0].observe(times)
            return
        m = np.full(self.n_sources, INT64_MIN, dtype=np.int64)
        np.maximum.at(m, sources, times)
        for k, hw in enumerate(self.hwms):
            if m[k] > hw.value:
                hw.value = int(m[k])

    @property
    def hwm(self) -> int:
        """The high-watermark of the union (the largest time seen on any source)."""
        return max(h.value for h in self.hwms)

    def offsets(self) -> np.ndarray:
        """``offset_{K -> S1}`` per source (int64, >= 0); 0 for sources with no data yet."""
        v = np.array([h.value for h in self.hwms], dtype=np.int64)
        seen = v != INT64_MIN
        if not seen.any():
            return np.zeros(len(v), dtype=np.int64)
        top = v[seen].max()
        return np.where(seen, top - v, 0).astype(np.int64)

    def snapshot(self) -> Any:
        return [h.value for h in self.hwms]

    def restore(self, state: Any) -> None:
        for h, v in zip(self.hwms, state):
            h.value = int(v)

    def _check(self) -> None:
        assert (self.offsets() >= 0).all()


class StreamVolume:
    """Tuples per unit of the windowing attribute: ``active tuples / RANGE`` (004 §6.3.4.1).

    ``add(n)`` when tuples enter a window extent, ``expire(n)`` when they
    leave the last extent they belong to. :meth:`of` is the same estimate for
    an array of per-group (or per-source) active counts.
    """

    __slots__ = ("range_", "active")

    def __init__(self, range_: int) -> None:
        if range_ <= 0:
            raise ValueError(f"StreamVolume: RANGE must be > 0, got {range_}")
        self.range_ = int(range_)
        self.active = 0

    def add(self, n: int) -> None:
        self.active += int(n)

    def expire(self, n: int) -> None:
        if n > self.active:
            raise ValueError(
                f"StreamVolume: expiring {n} tuples but only {self.active} are active; "
                "every expired tuple must have been added first"
            )
        self.active -= int(n)

    @property
    def value(self) -> float:
        return self.active / self.range_

    def of(self, active_counts: np.ndarray) -> np.ndarray:
        """Vectorized: ``active_counts / RANGE`` as float64."""
        return np.asarray(active_counts, dtype=np.float64) / self.range_

    def _check(self) -> None:
        assert self.active >= 0, self.active

