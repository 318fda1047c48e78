"""``var`` and ``std``: sample variance / deviation (``n - 1``), null below two values.

The one variance algorithm: sums of ``x - shift`` and of ``(x - shift)**2`` per window, where
``shift`` is a per-column constant (the first value seen) that keeps the subtraction
well-conditioned, and :func:`variance_from_sums` -- ``(SS - S*S/n) / (n - 1)``, clamped at 0 --
turns them into the variance. The window operator (all methods) and the in-order baseline use
it on their lanes; the scalar reference below is the same formula in exact arithmetic (ints
and the Fractions floats are), rounded once. NaN / inf values make the variance NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from oop.aggregates.base import AggregateFunction, isnan

__all__ = ["Moment", "VAR", "STD", "variance_from_sums"]


#: rounding error of ``SS - S*S/n`` in ulps of ``SS`` per summed value (see variance_from_sums)
_CANCEL_ULPS = 4.0


def variance_from_sums(n: np.ndarray, s: np.ndarray, ss: np.ndarray) -> np.ndarray:
    """Sample variance per window from the count ``n``, the shifted sum ``s`` and the shifted
    sum of squares ``ss`` (float64; NaN/inf where ``n < 2`` -- the caller masks those).

    ``SS - S*S/n`` cancels when the shift lies far from the window's values: both terms
    carry rounding errors up to about ``n`` ulps of ``SS``. A difference inside that error
    is not a variance the sums can resolve, so it is 0 (a window of equal values gives
    exactly 0, not the square root of the rounding residue), and never negative.
    """
    nf = n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = ss - s * s / nf
        d = np.where(d <= _CANCEL_ULPS * nf * np.finfo(np.float64).eps * np.abs(ss), 0.0, d)
        return d / (nf - 1)


def _exact(value: Any) -> int | Fraction:
    """A value as an exact number (ints stay ints, floats become the Fraction they are)."""
    return int(value) if isinstance(value, (bool, int)) else Fraction(value)


@dataclass(frozen=True)
class Moment(AggregateFunction):
    """var (``root=False``) or std (``root=True``); state (n, sum, sum of squares), exact."""

    root: bool = False

    def from_variance(self, v: np.ndarray) -> np.ndarray:
        """The result from the sample variance: itself (var) or its square root (std)."""
        return np.sqrt(v) if self.root else v

    def init(self, a: Any) -> Any:
        return (0, 0, 0)

    def update(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        n, s, ss = state
        if isinstance(value, float) and not math.isfinite(value):
            return (n + 1, math.nan, math.nan)  # NaN / inf: the variance is NaN
        x = _exact(value)
        return (n + 1, s + x, ss + x * x)

    def merge(self, a: Any, x: Any, y: Any) -> Any:
        return (x[0] + y[0], x[1] + y[1], x[2] + y[2])

    def revert(self, a: Any, state: Any, value: Any, time: int = 0) -> Any:
        if value is None:
            return state
        n, s, ss = state
        if isinstance(value, float) and not math.isfinite(value):
            return (n - 1, s, ss)  # cannot undo a NaN: the state stays NaN
        x = _exact(value)
        return (n - 1, s - x, ss - x * x)

    def finalize(self, a: Any, state: Any) -> Any:
        n, s, ss = state
        if n < 2:
            return None
        if isnan(s):
            return math.nan
        v = max(float((ss - Fraction(s) * s / n) / (n - 1)), 0.0)  # rounded once
        return math.sqrt(v) if self.root else v


VAR = Moment("var", differential="full", arithmetic=True, lane_ops=("nn", "sum", "sumsq"),
             spark="var_samp({c})")
STD = Moment("std", differential="full", arithmetic=True, lane_ops=("nn", "sum", "sumsq"),
             spark="stddev_samp({c})", root=True)
