"""Window kinds: ``windows()``, ``extent()`` and ``wids()`` (004 ch. 5, DESIGN §3).

Each kind is a frozen dataclass. Sizes are duration specs (``"10s"``,
``"500ms"``) or integers in the stream's time unit; :meth:`resolve` turns
them into integers once the unit is known (the operators do this at
``open()``). Integer-sized kinds work without resolving.

The three functions of the WID framework (004 §5.1.1):

* ``extent(wid) -> (start, end)`` -- the *reference definition*: window
  ``wid`` holds the tuples with ``start <= t.a < end`` (half-open).
* ``wids(values) -> (lo, hi)`` -- vectorized: the windows containing value
  ``v`` are exactly ``lo <= wid < hi``. It is the exact inverse of
  ``extent()`` (a property test proves it at the boundaries too).
* ``windows(values)`` -- the sorted non-empty window ids of a finite set of
  values (the windows a query over those values reports).

Sliding windows are aligned like Spark's ``window(ts, range, slide)`` and
Flink's: window *starts* are ``origin + k*slide`` and each window is
``[start, start + range)`` (docs/semantics.md, "Window alignment"). Window
ids follow 004 Eq. 5.2 on the grid of window *ends*, whose origin is
``o = origin + range mod slide`` (the same as ``origin`` when ``range`` is a
multiple of ``slide``): sliding window ``w`` is
``[o + (w+1)*slide - range, o + (w+1)*slide)``, and its start
``origin + (w + 1 - range div slide)*slide`` lies on the start grid.
Solving ``start <= t < end`` for ``w`` gives ``lo = floor((t-o)/slide)``
and ``hi = floor((t-o+range)/slide)`` (exclusive) -- the printed ceil
formulas of Eq. 5.3 are off by one when ``t - o`` is a multiple of
``slide``. Ids may be negative for times before ``origin``: the origin only
aligns the grid (like Flink's window offset).

>>> k = Sliding(range=10, slide=4)
>>> k.extent(0), k.extent(1)
((-4, 6), (0, 10))
>>> lo, hi = k.wids(np.array([0, 3, 4]))
>>> lo.tolist(), hi.tolist()
([-1, 0, 0], [2, 2, 3])
>>> k = Sliding(10, 3)  # Spark's window(ts, '10 seconds', '3 seconds'): starts at 3k
>>> [k.extent(int(w)) for w in k.windows(np.array([5]))]
[(-3, 7), (0, 10), (3, 13)]
>>> Tumbling("1s").resolve("ms").extent(2)
(2000, 3000)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Union

import numpy as np

from oop.errors import ConfigError, ValueRangeError
from oop.stream.elements import INT64_MAX

INT64_MIN = -INT64_MAX - 1
from oop.stream.timecol import parse_duration

__all__ = [
    "WindowKind",
    "Tumbling",
    "Sliding",
    "Landmark",
    "RowSliding",
    "PartitionedRows",
    "SlideByTuple",
    "OPEN_END",
    "Size",
]

Size = Union[int, str]
#: ``hi`` of a landmark tuple: it belongs to every later window.
OPEN_END = INT64_MAX


def _int(v: Size, what: str, kind: str) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    raise ConfigError(
        f"{kind}: {what}={v!r} is a duration spec; call .resolve(unit) with the stream's time "
        "unit first (the window operator does this when it opens)"
    )


def _minmax(v: np.ndarray) -> tuple[int, int]:
    return int(v.min()), int(v.max())  # numpy's SIMD reductions: cheaper than one scalar pass


def _fdiv(a: np.ndarray, b: int) -> np.ndarray:
    return np.floor_divide(a, b)


class WindowKind:
    """Base of the window kinds (see the module docstring)."""

    #: True when window ids are computed from arrival position, not event time.
    row_based: bool = False
    #: True when each partition (group) numbers its own rows (PA).
    partitioned: bool = False
    #: True for forward-context-aware kinds (004 §6.1.2): wids() is a candidate range.
    fca: bool = False

    def resolve(self, unit: str) -> "WindowKind":
        """A copy with every duration spec converted to an integer count of ``unit``."""
        changes = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, str):
                changes[f.name] = parse_duration(v, unit)
        return replace(self, **changes) if changes else self  # type: ignore[type-var]

    # the three WID functions --------------------------------------------
    def extent(self, wid: int) -> tuple[int, int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`extent` over an int64 array of window ids."""
        raise NotImplementedError  # pragma: no cover

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    def windows(self, values: np.ndarray) -> np.ndarray:
        """Sorted ids of the windows holding at least one of ``values``."""
        values = np.asarray(values, dtype=np.int64)
        if values.size == 0:
            return np.zeros(0, np.int64)
        lo, hi = self.wids(values)
        span = hi - lo
        k = int(span.max()) if span.size else 0
        parts = [lo[span > j] + j for j in range(k)]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def first_open(self, bound: int) -> int:
        """The smallest window id whose extent is not complete under punctuation ``bound``.

        Every window ``w < first_open(bound)`` has ``end <= bound``.
        """
        raise NotImplementedError  # pragma: no cover

    @property
    def spec(self) -> str:
        return repr(self)


def _check_positive(kind: str, **sizes: Size) -> None:
    for name, v in sizes.items():
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v <= 0:
            raise ConfigError(f"{kind}: {name} must be positive, got {v}; a window needs a length")
        if not isinstance(v, (int, np.integer, str)) or isinstance(v, bool):
            raise ConfigError(
                f"{kind}: {name}={v!r} must be an integer in the time unit or a duration "
                "spec like '10s'"
            )
        if isinstance(v, str):
            parse_duration(v, "ns")  # validate the syntax now, convert later


@dataclass(frozen=True)
class Sliding(WindowKind):
    """Sliding window by event time, Spark-aligned: ``[origin + k*slide, origin + k*slide + range)``.

    004 Eq. 5.1-5.3 with ``o = origin + range mod slide`` for ``min_a(T)``:
    window ``w`` is ``[o + (w+1)*slide - range, o + (w+1)*slide)``.
    ``slide <= range``. Each tuple belongs to ``range/slide`` windows (rounded).
    """

    range: Size
    slide: Size
    origin: Size = 0

    def __post_init__(self) -> None:
        _check_positive(type(self).__name__, range=self.range, slide=self.slide)
        r, s = self.range, self.slide
        if isinstance(r, (int, np.integer)) and isinstance(s, (int, np.integer)) and s > r:
            raise ConfigError(
                f"{type(self).__name__}(range={r}, slide={s}): slide can't exceed range: there "
                "would be gaps between windows whose tuples no window reports"
            )

    @cached_property
    def r(self) -> int:
        return _int(self.range, "range", type(self).__name__)

    @cached_property
    def s(self) -> int:
        return _int(self.slide, "slide", type(self).__name__)

    @cached_property
    def o(self) -> int:
        """Origin of the grid of window *ends*: ``origin + range mod slide``, so that window
        starts lie on ``origin + k*slide`` (Spark, Flink) even when ``range`` is not a
        multiple of ``slide``."""
        return _int(self.origin, "origin", type(self).__name__) + self.r % self.s

    def resolve(self, unit: str) -> "Sliding":
        k = super().resolve(unit)
        k.__post_init__()  # type: ignore[attr-defined]
        return k  # type: ignore[return-value]

    def extent(self, wid: int) -> tuple[int, int]:
        end = self.o + (int(wid) + 1) * self.s
        return end - self.r, end

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        end = self.o + (np.asarray(wids, np.int64) + 1) * self.s
        return end - self.r, end

    def check_range(self, tmin: int, tmax: int) -> None:
        """Raise :class:`ValueRangeError` when a window holding a time in ``[tmin, tmax]``
        starts or ends outside int64 (its ``window_end`` would wrap to year 1677)."""
        o, r, s = self.o, self.r, self.s
        tmin, tmax = int(tmin), int(tmax)
        end = o + ((tmax - o + r) // s) * s  # end of the last window holding tmax
        start = o + ((tmin - o) // s + 1) * s - r  # start of the first window holding tmin
        if end > INT64_MAX or tmax - o > INT64_MAX:
            raise ValueRangeError(
                f"{self!r}: time {tmax} lies in window [{end - r}, {end}) whose end is beyond "
                f"int64 max {INT64_MAX} (window_end would wrap to a date in 1677). Such a time "
                "is usually a placeholder (int64 max) or in the wrong unit: filter or fix those "
                f"rows; event times must stay below {INT64_MAX - r} with this window")
        if start < INT64_MIN or tmin - o < INT64_MIN:
            raise ValueRangeError(
                f"{self!r}: time {tmin} lies in window [{start}, {start + r}) whose start is "
                f"below int64 min {INT64_MIN} (window_start would wrap). Such a time is usually "
                "a placeholder (int64 min) or in the wrong unit: filter or fix those rows; "
                f"event times must stay above {INT64_MIN + r} with this window")

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(values, np.int64)
        if v.size:  # two SIMD reductions: refuse windows that would wrap around int64
            self.check_range(*_minmax(v))
        d = v - self.o if self.o else v
        lo = _fdiv(d, self.s)
        if self.r == self.s:  # tumbling: one window per value
            return lo, lo + 1
        # floor((d + r) / s) without forming d + r (it may not fit int64 near the top)
        return lo, lo + _fdiv(d - lo * self.s + self.r, self.s)

    def first_open(self, bound: int) -> int:
        # end(w) = o + (w+1)s <= bound  <=>  w <= floor((bound-o)/s) - 1
        return (int(bound) - self.o) // self.s

    @cached_property
    def pane(self) -> int:
        """Pane size for Paned-WID: gcd(range, slide) (004 §6.2.1)."""
        return math.gcd(self.r, self.s)


@dataclass(frozen=True)
class Tumbling(Sliding):
    """Tumbling window: ``[origin + w*size, origin + (w+1)*size)``; each tuple in one window.

    >>> Tumbling(5).wids(np.array([-1, 0, 4, 5]))[0].tolist()
    [-1, 0, 0, 1]
    """

    range: Size = 0
    slide: Size = 0
    origin: Size = 0

    def __init__(self, size: Size, origin: Size = 0) -> None:
        object.__setattr__(self, "range", size)
        object.__setattr__(self, "slide", size)
        object.__setattr__(self, "origin", origin)
        self.__post_init__()

    @property
    def size(self) -> Size:
        return self.range

    def resolve(self, unit: str) -> "Tumbling":
        size = parse_duration(self.range, unit) if isinstance(self.range, str) else self.range
        origin = parse_duration(self.origin, unit) if isinstance(self.origin, str) else self.origin
        return Tumbling(size, origin)

    def __repr__(self) -> str:
        return f"Tumbling(size={self.range!r}, origin={self.origin!r})"

    def __reduce__(self):  # pickling (snapshots) with the custom __init__
        return (Tumbling, (self.range, self.origin))


@dataclass(frozen=True)
class Landmark(WindowKind):
    """Landmark window (RANGE ALL, 004 Eq. 5.7-5.9): window ``w`` is ``[origin, origin + (w+1)*slide)``.

    Window ids start at 0. A tuple at ``t >= origin`` belongs to every window
    ``w >= floor((t-origin)/slide)`` (``hi`` = :data:`OPEN_END`); a tuple
    before ``origin`` belongs to none (the operator counts it as late,
    policy ``before_origin``).
    """

    slide: Size
    origin: Size = 0

    def __post_init__(self) -> None:
        _check_positive("Landmark", slide=self.slide)

    @cached_property
    def s(self) -> int:
        return _int(self.slide, "slide", "Landmark")

    @cached_property
    def o(self) -> int:
        return _int(self.origin, "origin", "Landmark")

    def extent(self, wid: int) -> tuple[int, int]:
        return self.o, self.o + (int(wid) + 1) * self.s

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.asarray(wids, np.int64)
        return np.full(w.shape, self.o, np.int64), self.o + (w + 1) * self.s

    def check_range(self, tmin: int, tmax: int) -> None:
        """Raise :class:`ValueRangeError` when the first window holding ``tmax`` ends beyond
        int64 max, or ``tmin - origin`` does not fit int64."""
        end = self.o + ((int(tmax) - self.o) // self.s + 1) * self.s
        if end > INT64_MAX or int(tmin) - self.o < INT64_MIN:
            raise ValueRangeError(
                f"{self!r}: time {int(tmax)} lies in landmark windows ending at {end} and later, "
                f"beyond int64 max {INT64_MAX} (window_end would wrap). Such a time is usually "
                "a placeholder (int64 max) or in the wrong unit: filter or fix those rows")

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(values, np.int64)
        if v.size:
            self.check_range(*_minmax(v))
        lo = _fdiv(v - self.o, self.s)
        before = v < self.o
        hi = np.where(before, 0, OPEN_END).astype(np.int64)
        return np.where(before, 0, lo), hi

    def windows(self, values: np.ndarray) -> np.ndarray:
        """Windows from the first non-empty one to the one holding the largest value."""
        v = np.asarray(values, np.int64)
        v = v[v >= self.o]
        if v.size == 0:
            return np.zeros(0, np.int64)
        lo = _fdiv(v - self.o, self.s)
        return np.arange(lo.min(), lo.max() + 1, dtype=np.int64)

    def first_open(self, bound: int) -> int:
        return max((int(bound) - self.o) // self.s, 0)


@dataclass(frozen=True)
class RowSliding(WindowKind):
    """Row-based sliding window over arrival position (004 §6.1.3): rows ``[(w+1)*slide - range, (w+1)*slide)``.

    The Bucket numbers rows 0, 1, 2, ... in the order they reach the
    operator; ``wids`` applies to those row numbers. Results do depend on
    arrival order (that is the definition). ``window_start``/``window_end``
    of the output are row numbers.
    """

    range: int
    slide: int

    row_based = True

    def __post_init__(self) -> None:
        name = type(self).__name__
        for what, v in (("range", self.range), ("slide", self.slide)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"{name}: {what} must be a positive number of rows, got {v!r}")
        if self.slide > self.range:
            raise ConfigError(
                f"{name}(range={self.range}, slide={self.slide}): slide can't exceed range: "
                "there would be gaps between windows"
            )

    def extent(self, wid: int) -> tuple[int, int]:
        end = (int(wid) + 1) * self.slide
        return end - self.range, end

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        end = (np.asarray(wids, np.int64) + 1) * self.slide
        return end - self.range, end

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(values, np.int64)
        return _fdiv(v, self.slide), _fdiv(v + self.range, self.slide)

    def first_open(self, bound: int) -> int:
        return int(bound) // self.slide


@dataclass(frozen=True)
class PartitionedRows(RowSliding):
    """Partitioned row-based window (PA, 004 Eq. 5.4-5.6): per group, rows ranked by arrival.

    Window ``(wid, group)`` holds the group's rows of rank
    ``[(w+1)*slide - range, (w+1)*slide)``; each group progresses on its own.
    """

    partitioned = True


@dataclass(frozen=True)
class SlideByTuple(WindowKind):
    """RANGE in time, SLIDE ``slide_rows`` rows (004 Eq. 5.10-5.15, FCA, bins of §6.1.4).

    Every ``slide_rows``-th tuple to arrive (the n-th, 2n-th, ...) defines a
    window whose id is its event time ``w`` and whose extent is
    ``(w - range, w]``, i.e. ``[w - range + 1, w + 1)`` half-open. ``wids()``
    gives the *candidate* range ``[t, t + range)``: the windows containing
    ``t`` are the defined ids inside it (forward context decides which exist).
    """

    range: Size
    slide_rows: int = 1

    fca = True

    def __post_init__(self) -> None:
        _check_positive("SlideByTuple", range=self.range)
        n = self.slide_rows
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n <= 0:
            raise ConfigError(f"SlideByTuple: slide_rows must be a positive row count, got {n!r}")

    @cached_property
    def r(self) -> int:
        return _int(self.range, "range", "SlideByTuple")

    def extent(self, wid: int) -> tuple[int, int]:
        return int(wid) - self.r + 1, int(wid) + 1

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.asarray(wids, np.int64)
        return w - self.r + 1, w + 1

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = np.asarray(values, np.int64)
        return v.copy(), v + self.r

    def windows(self, values: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        """Eq. 5.13: the event times of every n-th tuple in arrival order (``values`` in arrival order).

        ``rows`` (optional) are 0-based arrival positions; default ``0..len-1``.
        """
        v = np.asarray(values, np.int64)
        pos = np.arange(v.size) if rows is None else np.asarray(rows, np.int64)
        return np.unique(v[(pos + 1) % self.slide_rows == 0])

    def first_open(self, bound: int) -> int:
        # window w is complete when every tuple with t <= w arrived: bound > w
        return int(bound)
