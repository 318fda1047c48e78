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


class JointFrontier:
    """Combination of *joint* punctuation (004 §7.2) over ``n`` inputs.

    A joint punctuation ``J(a_1 < v_1, ..., a_k < v_k)`` on an input says no
    later tuple lies in the box ``{x : x.a_i < v_i for all i}``. The union of
    the inputs can only promise what every input promises: the intersection
    of their boxes, i.e. the *component-wise min* of their latest bounds (the
    latest box of an input is still valid, so using it is sound). An ended
    input counts as the unbounded box (+inf everywhere); an input without a
    joint punctuation yet makes the union know nothing.

    :meth:`update` returns the combined bounds only when the combined box is
    not contained in the one emitted before (some component grew): no
    duplicates. Cost: O(n * k) per update.

    >>> f = JointFrontier(2, ("a", "b"))
    >>> f.update(0, (("a", 5), ("b", 9))) is None
    True
    >>> f.update(1, (("a", 7), ("b", 4)))
    (('a', 5), ('b', 4))
    >>> f.update(1, (("a", 6), ("b", 4))) is None   # min unchanged
    True
    >>> f.end(1)
    (('a', 5), ('b', 9))
    """

    __slots__ = ("attrs", "latest", "emitted")

    def __init__(self, n: int, attrs: tuple[str, ...]) -> None:
        if n < 1:
            raise ValueError(f"JointFrontier needs at least one input, got {n}")
        self.attrs = tuple(attrs)
        self.latest: list[tuple[int, ...] | None] = [None] * n
        self.emitted: tuple[int, ...] | None = None

    def update(
        self, port: int, bounds: tuple[tuple[str, int], ...]
    ) -> tuple[tuple[str, int], ...] | None:
        """Record input ``port``'s joint bounds; return the combined bounds if they grew."""
        attrs = tuple(a for a, _ in bounds)
        if attrs != self.attrs:
            raise ValueError(
                f"joint punctuation on {attrs} but this union combines joint punctuation on "
                f"{self.attrs}; every input must punctuate the same attributes in the same order"
            )
        self.latest[port] = tuple(int(v) for _, v in bounds)
        return self._grown()

    def end(self, port: int) -> tuple[tuple[str, int], ...] | None:
        """Input ``port`` ended (the unbounded box); return the combined bounds if they grew."""
        self.latest[port] = tuple(INT64_MAX for _ in self.attrs)
        return self._grown()

    def combined(self) -> tuple[int, ...] | None:
        """Component-wise min of the latest bounds, or None while some input knows nothing."""
        if any(b is None for b in self.latest):
            return None
        known = [b for b in self.latest if b is not None]
        return tuple(min(b[i] for b in known) for i in range(len(self.attrs)))

    def _grown(self) -> tuple[tuple[str, int], ...] | None:
        c = self.combined()
        if c is None or all(v == INT64_MAX for v in c):
            return None
        if self.emitted is not None and all(x <= y for x, y in zip(c, self.emitted)):
            return None
        self.emitted = c
        return tuple(zip(self.attrs, c))

    def _check(self) -> None:
        for b in self.latest:
            assert b is None or len(b) == len(self.attrs)
