"""Window-join predicates and the join configuration (004 §7.1).

A :class:`WindowPredicate` says, for a tuple of input ``i`` at time ``t``,
which times of the other input it joins with -- the *partner interval*
``[lo_i(t), hi_i(t)]`` -- and from it everything OA-Join needs:

* **band** (sliding-window join, Fig. 7-1): ``S0.ts - range0 <= S1.ts <= S0.ts + range1``::

      S0 tuple at t  -> S1 times in [t - range0, t + range1]
      S1 tuple at t  -> S0 times in [t - range1, t + range0]

* **tumbling** (Fig. 7-2): ``floor(S0.ts / size) == floor(S1.ts / size)``,
  windows ``[N*size, (N+1)*size)``; both inputs' partner interval is the
  tuple's own window.

``keep_from(i, b)``: the smallest time of input ``i`` that a future tuple of
the other input (time ``>= b``, its punctuation) can still match. OA-Join
stores a new tuple of input ``i`` only if its time ``>= keep_from(i, b_{1-i})``
(the ``b_{1-i}`` rule) and purges stored tuples of input ``i`` below it when
``b_{1-i}`` advances. The same bound gives the output punctuation on input
``i``'s attribute: ``min(b_i, keep_from(i, b_{1-i}))``.

>>> p = WindowPredicate.band(2, 3)
>>> p.interval(0, 10), p.interval(1, 10)
((8, 13), (7, 12))
>>> p.keep_from(0, 20), p.keep_from(1, 20)
(17, 18)
>>> t = WindowPredicate.tumbling(10)
>>> t.interval(0, 15), t.keep_from(1, 15), t.interval(1, -1)
((10, 19), 10, (-10, -1))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.stream.elements import INT64_MAX, INT64_MIN
from oop.stream.late import LatePolicy

__all__ = ["WindowPredicate", "JoinConfig", "Residual", "HOWS", "PUNCTUATION_MODES", "config_from_args"]

HOWS = ("inner", "left", "right", "full", "semi", "anti")
PUNCTUATION_MODES = ("individual", "joint", "both")
Residual = Union[pc.Expression, Callable[[pa.RecordBatch], "pa.Array | np.ndarray"]]


def _sat(v: int) -> int:
    return INT64_MIN if v < INT64_MIN else INT64_MAX if v > INT64_MAX else v


@dataclass(frozen=True)
class WindowPredicate:
    """A band (``range0``, ``range1``) or tumbling (``size``) window condition."""

    kind: Literal["band", "tumbling"]
    range0: int = 0
    range1: int = 0
    size: int = 0

    def __post_init__(self) -> None:
        if self.kind == "band":
            if self.range0 + self.range1 < 0:
                raise ConfigError(
                    f"band join: range0={self.range0} + range1={self.range1} < 0 gives an empty "
                    "band (no S1 time satisfies S0.ts - range0 <= S1.ts <= S0.ts + range1); "
                    "widen one of the ranges"
                )
        elif self.kind == "tumbling":
            if self.size <= 0:
                raise ConfigError(f"tumbling join: window size must be > 0, got {self.size}")
        else:
            raise ConfigError(f"unknown window predicate kind {self.kind!r}; use band or tumbling")

    @classmethod
    def band(cls, range0: int, range1: int) -> "WindowPredicate":
        return cls("band", int(range0), int(range1))

    @classmethod
    def tumbling(cls, size: int) -> "WindowPredicate":
        return cls("tumbling", size=int(size))

    def interval(self, side: int, t: int) -> tuple[int, int]:
        """Partner interval ``[lo, hi]`` on the other input of a side-``side`` tuple at ``t``."""
        if self.kind == "band":
            a, b = (self.range0, self.range1) if side == 0 else (self.range1, self.range0)
            return _sat(t - a), _sat(t + b)
        w = (t // self.size) * self.size
        return w, _sat(w + self.size - 1)

    def intervals(self, side: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`interval` (times assumed within +-2^62)."""
        if self.kind == "band":
            a, b = (self.range0, self.range1) if side == 0 else (self.range1, self.range0)
            return t - np.int64(a), t + np.int64(b)
        w = np.floor_divide(t, self.size) * self.size
        return w, w + (self.size - 1)

    def keep_from(self, side: int, b_other: int) -> int:
        """Smallest side-``side`` time a future other-side tuple (``>= b_other``) can match."""
        if b_other <= INT64_MIN:
            return INT64_MIN
        if b_other >= INT64_MAX:
            return INT64_MAX
        if self.kind == "band":
            r = self.range1 if side == 0 else self.range0
            return _sat(b_other - r)
        return (b_other // self.size) * self.size

    def bucket_keys(self, kh: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Hash-bucket keys: the key hash, plus the window id for tumbling joins."""
        if self.kind == "band":
            return kh
        return kh * np.int64(1_000_003) + np.floor_divide(t, self.size)

    def matches(self, t0: int, t1: int) -> bool:
        """Reference predicate on one pair (S0 time, S1 time)."""
        if self.kind == "band":
            return t0 - self.range0 <= t1 <= t0 + self.range1
        return t0 // self.size == t1 // self.size


@dataclass(frozen=True)
class JoinConfig:
    """Validated configuration of an OA-Join (see :class:`oop.join.oa_join.OAJoin`).

    ``on``: equality keys, each a column name present on both inputs or a
    ``(left_column, right_column)`` pair. ``how``: inner, left, right, full
    (outer joins), semi or anti (left rows with / without a partner).
    ``punctuation``: individual (one linear punctuation per progressing
    attribute), joint (004 §7.2) or both. ``residual``: an extra vectorized
    predicate over the joined columns (Arrow expression or callable). ``late``:
    policy for tuples that arrive below their input's punctuation.
    """

    predicate: WindowPredicate
    on: tuple[tuple[str, str], ...] = ()
    how: str = "inner"
    punctuation: str = "individual"
    residual: Residual | None = None
    late: LatePolicy = LatePolicy.DROP
    suffix: str = "_right"
    name: str = "join"
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise ConfigError(f"join {self.name!r}: how={self.how!r} is not one of {HOWS}")
        if self.punctuation not in PUNCTUATION_MODES:
            raise ConfigError(
                f"join {self.name!r}: punctuation={self.punctuation!r} is not one of "
                f"{PUNCTUATION_MODES}"
            )
        late = LatePolicy.parse(self.late)
        if late is LatePolicy.UPDATE:
            raise ConfigError(
                f"join {self.name!r}: late='update' is not supported by joins (results are "
                "released at once and never revised); use drop, side_output or raise"
            )
        object.__setattr__(self, "late", late)

    @staticmethod
    def normalize_on(on: Sequence[str | tuple[str, str]] | str) -> tuple[tuple[str, str], ...]:
        """``"k"`` / ``["k", ("a", "b")]`` -> ``(("k", "k"), ("a", "b"))``."""
        if isinstance(on, str):
            on = [on]
        out = []
        for item in on:
            if isinstance(item, str):
                out.append((item, item))
            else:
                a, b = item
                out.append((str(a), str(b)))
        return tuple(out)

    @property
    def preserves(self) -> tuple[bool, bool]:
        """Which inputs' unmatched tuples appear in the output (outer / anti)."""
        return (self.how in ("left", "full", "anti"), self.how in ("right", "full"))


def config_from_args(
    *,
    on: Sequence[str | tuple[str, str]] | str = (),
    band: tuple[int | str, int | str] | None = None,
    tumbling: int | str | None = None,
    how: str = "inner",
    punctuation: str = "individual",
    residual: Residual | None = None,
    late: LatePolicy | str = "drop",
    name: str = "join",
) -> JoinConfig:
    """A :class:`JoinConfig` from ``Stream.join``-style arguments.

    Durations (``"1s"``) are resolved when the operator opens, in its inputs'
    time unit (``extra["durations"]``).
    """
    if (band is None) == (tumbling is None):
        raise ConfigError(f"join {name!r}: give exactly one of band=(range0, range1) or tumbling=size")
    spec = ("band", *band) if band is not None else ("tumbling", tumbling)
    placeholder = WindowPredicate.band(0, 0) if band is not None else WindowPredicate.tumbling(1)
    return JoinConfig(placeholder, JoinConfig.normalize_on(on), how, punctuation, residual,
                      LatePolicy.parse(late), name=name, extra={"durations": spec})
