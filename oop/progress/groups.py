"""Group-wise watermarks: low- and high-watermark per group (004 §4, group-wise punctuation).

With group-wise linear punctuation (``GroupPunctuation``) a stream's progress
is known per group: group ``g`` has progressed to ``lwm_g`` -- every later
tuple of ``g`` has ``attr >= lwm_g``. A linear punctuation ``P(attr, v)``
bounds *every* group, so a group's low-watermark is
``max(linear lwm, group lwm_g)``. The high-watermark of a group is the largest
``attr`` of its tuples seen so far.

Groups are dense non-negative integer ids (``0 .. n_groups-1``) assigned by
the caller (e.g. by dictionary-encoding the key columns); the tracker grows
its arrays as new ids appear.

Costs: :meth:`GroupWatermarks.observe` is O(batch) in a numba kernel;
:meth:`GroupWatermarks.advance_group` O(1); :meth:`GroupWatermarks.advance_all`
O(1) (the linear bound is kept once, not copied into every group);
:meth:`GroupWatermarks.lwm` O(1).

>>> import numpy as np
>>> gw = GroupWatermarks("ts")
>>> gw.observe(np.array([0, 1, 0]), np.array([5, 9, 7]))
>>> gw.hwm(0), gw.hwm(1)
(7, 9)
>>> gw.advance_group(1, 8)
True
>>> gw.advance_all(6)
True
>>> gw.lwm(0), gw.lwm(1), gw.min_lwm()
(6, 8, 6)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from oop.errors import PunctuationOrderError
from oop.stream.elements import INT64_MIN

__all__ = ["GroupWatermarks", "group_max_kernel", "group_max_reference"]


@njit(cache=True)
def group_max_kernel(hwm: np.ndarray, groups: np.ndarray, times: np.ndarray) -> None:
    """In place: ``hwm[g] = max(hwm[g], t)`` for every (g, t) pair. O(n)."""
    for i in range(groups.shape[0]):
        g = groups[i]
        if times[i] > hwm[g]:
            hwm[g] = times[i]


def group_max_reference(hwm: list[int], groups: list[int], times: list[int]) -> list[int]:
    """Tuple-at-a-time reference of :func:`group_max_kernel` (returns a new list)."""
    out = list(hwm)
    for g, t in zip(groups, times):
        out[g] = max(out[g], t)
    return out


class GroupWatermarks:
    """Per-group low-watermarks (from punctuation) and high-watermarks (from data)."""

    def __init__(self, attr: str, stream: str = "?") -> None:
        self.attr = attr
        self.stream = stream
        self.linear = INT64_MIN  # the linear bound shared by all groups
        self._lwm = np.full(0, INT64_MIN, dtype=np.int64)  # group bounds
        self._hwm = np.full(0, INT64_MIN, dtype=np.int64)

    @property
    def n_groups(self) -> int:
        return len(self._lwm)

    def _grow(self, n: int) -> None:
        if n > len(self._lwm):
            cap = max(n, 2 * len(self._lwm), 16)
            extra = cap - len(self._lwm)
            self._lwm = np.concatenate([self._lwm, np.full(extra, INT64_MIN, np.int64)])
            self._hwm = np.concatenate([self._hwm, np.full(extra, INT64_MIN, np.int64)])

    def observe(self, groups: np.ndarray, times: np.ndarray) -> None:
        """Fold a batch's (group id, time) pairs into the high-watermarks. O(batch)."""
        if not len(groups):
            return
        groups = np.asarray(groups, dtype=np.int64)
        if groups.min() < 0:
            raise ValueError(f"GroupWatermarks on {self.attr!r}: group ids must be >= 0")
        self._grow(int(groups.max()) + 1)
        group_max_kernel(self._hwm, groups, np.asarray(times, dtype=np.int64))

    def advance_group(self, group: int, v: int) -> bool:
        """Group punctuation: later tuples of ``group`` have ``attr >= v``.

        Raises :class:`PunctuationOrderError` when ``v`` is below the group's
        current low-watermark; returns True when it grew.
        """
        self._grow(group + 1)
        cur = self.lwm(group)
        if v < cur:
            raise PunctuationOrderError(
                f"stream {self.stream!r}: group punctuation on {self.attr!r} for group {group} "
                f"went backwards from {cur} to {v}; group punctuation must never decrease"
            )
        self._lwm[group] = v
        return v > cur

    def advance_all(self, v: int) -> bool:
        """Linear punctuation: every group's later tuples have ``attr >= v``. O(1)."""
        if v < self.linear:
            raise PunctuationOrderError(
                f"stream {self.stream!r}: punctuation on {self.attr!r} went backwards from "
                f"{self.linear} to {v}"
            )
        grew = v > self.linear
        self.linear = int(v)
        return grew

    def lwm(self, group: int) -> int:
        """The group's low-watermark: ``max(linear, group bound)``. O(1)."""
        g = int(self._lwm[group]) if group < len(self._lwm) else INT64_MIN
        return max(self.linear, g)

    def hwm(self, group: int) -> int:
        """The largest time seen for ``group`` (INT64_MIN if none). O(1)."""
        return int(self._hwm[group]) if group < len(self._hwm) else INT64_MIN

    def lwms(self) -> np.ndarray:
        """Every known group's low-watermark (a new array). O(groups)."""
        return np.maximum(self._lwm, self.linear)

    def min_lwm(self) -> int:
        """The stream-wide bound implied by the groups known so far. O(groups).

        Only valid as a *linear* bound if no unseen group can appear; without
        that knowledge the linear bound is :attr:`linear`.
        """
        return int(self.lwms().min()) if len(self._lwm) else self.linear

    def open_groups(self) -> np.ndarray:
        """Ids of groups with data above their low-watermark (``hwm >= lwm``). O(groups)."""
        return np.nonzero(self._hwm >= self.lwms())[0]

    def _check(self) -> None:
        assert len(self._lwm) == len(self._hwm)
        assert self._lwm.dtype == np.int64 and self._hwm.dtype == np.int64
