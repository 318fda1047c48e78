"""Stream elements: data batches, punctuations and the end-of-stream marker.

A progressing stream (004 ch. 4) is a sequence of elements. Data travels as
columnar ``pyarrow.RecordBatch`` objects; progress travels as punctuation:

* :class:`Punctuation` -- *linear* punctuation ``P(attr, v)``: every tuple
  that follows on this stream has ``attr >= v``. It is a lower bound on the
  stream's low-watermark ``lwm(n, S, A) = min{t.A | t after position n}``
  (004 Eq. 4.1). Along one stream its values never decrease.
* :class:`GroupPunctuation` -- *group-wise linear* punctuation: for each listed
  group ``g`` every later tuple of ``g`` has ``attr >= v_g``.
* :class:`JointPunctuation` -- punctuation on several attributes at once
  (004 §7.2, OA-Join output): no later tuple has ``attr_i < v_i`` for *all*
  ``i`` together (it covers a "box", not a "slab").
* :data:`END_OF_STREAM` -- nothing follows; equivalent to ``P(attr, +inf)`` on
  every attribute.

A window extent ``[start, end)`` on ``attr`` is complete once a punctuation
``P(attr, v)`` with ``v >= end`` has been seen.

>>> p = Punctuation("ts", 10)
>>> p.covers(9), p.covers(10)
(True, False)
>>> JointPunctuation((("ts0", 5), ("ts1", 7))).covers_point({"ts0": 4, "ts1": 6})
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Union

import numpy as np
import pyarrow as pa

__all__ = [
    "Punctuation",
    "GroupPunctuation",
    "JointPunctuation",
    "EndOfStream",
    "END_OF_STREAM",
    "Element",
    "is_punctuation",
    "INT64_MAX",
    "INT64_MIN",
]

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


@dataclass(frozen=True, slots=True)
class Punctuation:
    """Linear punctuation ``P(attr, value)``: every later tuple has ``attr >= value``.

    ``value`` is an int64 in the stream's declared time unit. Cost: O(1).
    """

    attr: str
    value: int

    def covers(self, t: int) -> bool:
        """True when a tuple with ``attr == t`` can no longer arrive (``t < value``)."""
        return t < self.value


@dataclass(frozen=True, slots=True)
class GroupPunctuation:
    """Group-wise linear punctuation: later tuples of group ``keys[i]`` have ``attr >= values[i]``.

    ``keys`` is a RecordBatch holding the group-key columns (one row per
    group); ``values`` is an int64 array of the same length.
    """

    attr: str
    keys: pa.RecordBatch
    values: np.ndarray = field(compare=False)

    def __post_init__(self) -> None:
        if len(self.values) != self.keys.num_rows:
            raise ValueError(
                f"GroupPunctuation on {self.attr!r}: {self.keys.num_rows} group keys but "
                f"{len(self.values)} values; give one value per group"
            )


@dataclass(frozen=True, slots=True)
class JointPunctuation:
    """Joint punctuation (004 §7.2): no later tuple has ``attr_i < v_i`` for every ``i``.

    ``bounds`` is a tuple of ``(attr, value)`` pairs. With a single pair it is
    a linear punctuation.
    """

    bounds: tuple[tuple[str, int], ...]

    def covers_point(self, point: Mapping[str, int]) -> bool:
        """True when a tuple at ``point`` (attr -> value) can no longer arrive."""
        return all(point[a] < v for a, v in self.bounds)

    @property
    def attrs(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.bounds)


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """Nothing follows on this stream."""


END_OF_STREAM = EndOfStream()

Element = Union[pa.RecordBatch, Punctuation, GroupPunctuation, JointPunctuation, EndOfStream]


def is_punctuation(element: object) -> bool:
    """True for any of the three punctuation kinds."""
    return isinstance(element, (Punctuation, GroupPunctuation, JointPunctuation))
