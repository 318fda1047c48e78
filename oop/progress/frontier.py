"""Combination of progress over several inputs: the Meld rule (004 Fig. 8-2).

The union of n progressing streams has progressed as far as its *slowest*
input: its low-watermark is ``min_i lwm_i``. :class:`MinFrontier` keeps the
last punctuation of each input and reports the min when (and only when) it
grows, so the combined stream never carries a duplicate punctuation.

An input that has ended counts as ``+inf``. An input that has not punctuated
yet counts as ``-inf`` (nothing is known about it).

Cost: O(1) to read, O(n) per update (n = number of inputs, small).

>>> f = MinFrontier(2)
>>> f.update(0, 10) is None        # input 1 knows nothing yet
True
>>> f.update(1, 7)
7
>>> f.update(1, 12)                 # min is now input 0's 10
10
>>> f.update(1, 13) is None         # min unchanged: no duplicate
True
"""

from __future__ import annotations

from oop.stream.elements import INT64_MAX, INT64_MIN

__all__ = ["MinFrontier"]


class MinFrontier:
    """``min`` over the latest punctuation of each of ``n`` inputs."""

    __slots__ = ("values", "emitted")

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"MinFrontier needs at least one input, got {n}")
        self.values: list[int] = [INT64_MIN] * n
        self.emitted: int = INT64_MIN

    @property
    def value(self) -> int:
        return min(self.values)

    def update(self, port: int, v: int) -> int | None:
        """Record punctuation ``v`` on input ``port``; return the new min if it grew."""
        if v > self.values[port]:
            self.values[port] = int(v)
        return self._grown()

    def end(self, port: int) -> int | None:
        """Input ``port`` ended (counts as +inf); return the new min if it grew."""
        self.values[port] = INT64_MAX
        return self._grown()

    def _grown(self) -> int | None:
        m = min(self.values)
        if m > self.emitted:
            self.emitted = m
            return m
        return None

    def _check(self) -> None:
        assert self.emitted <= min(self.values), (self.emitted, self.values)
