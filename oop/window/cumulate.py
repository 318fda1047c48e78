"""Cumulative windows (Flink's ``CUMULATE`` window TVF): growing windows inside a fixed span.

``Cumulate(step, size, origin=0)`` has, for every span
``[origin + k*size, origin + (k+1)*size)``, the ``n = size / step`` windows
``[origin + k*size, origin + k*size + j*step)`` for ``j = 1..n`` -- the same
start, ends one step apart. ``size`` must be a whole multiple of ``step``.

Window ids number the windows in end order: ``w = k*n + (j - 1)``, so

* ``extent(w) = (origin + floor(w/n)*size, origin + (w+1)*step)`` -- the
  reference definition (half-open);
* ``wids(v) = (lo, hi)`` with ``lo = floor((v-origin)/step)`` (the first
  window whose end passes ``v``) and ``hi = (floor((v-origin)/size) + 1) * n``
  (the last window of ``v``'s span, exclusive): a tuple is in the windows of
  its own span whose end is after it, a contiguous id range;
* ``first_open(bound) = floor((bound-origin)/step)``: window ends are
  ``origin + (w+1)*step``, strictly increasing in ``w``, exactly as for a
  sliding window with slide ``step``.

Because ``wids`` is a contiguous range and ends grow with the id, the WID
operator (:class:`~oop.window.aggregate.WindowAggregate`) runs it without
changes: each tuple updates ``hi - lo <= n`` cells, and punctuation closes
windows in id order. It is not a :class:`~oop.window.kinds.Sliding`, so
``method="auto"`` plans WID (Paned-WID's pane algebra assumes windows of one
length); ``method="paned"`` is refused by the pane combiner.

>>> k = Cumulate(step=2, size=6)
>>> [k.extent(w) for w in range(4)]
[(0, 2), (0, 4), (0, 6), (6, 8)]
>>> lo, hi = k.wids(np.array([0, 3, 5, 6]))
>>> lo.tolist(), hi.tolist()
([0, 1, 2, 3], [3, 3, 3, 6])
>>> Cumulate("1s", "3s").resolve("ms").extent(4)
(3000, 5000)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from oop.errors import ConfigError
from oop.window.kinds import Size, WindowKind, _check_positive, _int

__all__ = ["Cumulate"]


@dataclass(frozen=True)
class Cumulate(WindowKind):
    """Cumulative windows ``[o + k*size, o + k*size + j*step)``, ``j = 1..size/step`` (module doc)."""

    step: Size
    size: Size
    origin: Size = 0

    def __post_init__(self) -> None:
        _check_positive("Cumulate", step=self.step, size=self.size)
        s, m = self.step, self.size
        if isinstance(s, (int, np.integer)) and isinstance(m, (int, np.integer)) and m % s:
            raise ConfigError(
                f"Cumulate(step={s}, size={m}): the max window size must be a whole multiple "
                "of the step"
            )

    def resolve(self, unit: str) -> "Cumulate":
        k = super().resolve(unit)
        k.__post_init__()  # type: ignore[attr-defined]
        return k  # type: ignore[return-value]

    @cached_property
    def s(self) -> int:
        return _int(self.step, "step", "Cumulate")

    @cached_property
    def m(self) -> int:
        return _int(self.size, "size", "Cumulate")

    @cached_property
    def o(self) -> int:
        return _int(self.origin, "origin", "Cumulate")

    @cached_property
    def n(self) -> int:
        """Windows per span: ``size / step``."""
        return self.m // self.s

    def extent(self, wid: int) -> tuple[int, int]:
        w = int(wid)
        return self.o + (w // self.n) * self.m, self.o + (w + 1) * self.s

    def extents(self, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.asarray(wids, np.int64)
        return self.o + np.floor_divide(w, self.n) * self.m, self.o + (w + 1) * self.s

    def wids(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = np.asarray(values, np.int64) - self.o
        return np.floor_divide(d, self.s), (np.floor_divide(d, self.m) + 1) * self.n

    def first_open(self, bound: int) -> int:
        return (int(bound) - self.o) // self.s
