"""``var`` and ``std``: sample variance / deviation (``n - 1``), null below two values.

The one variance algorithm of the engine. A cell's state is ``(n, mean, M2)`` -- the count of
finite values, their mean and ``M2 = sum((x - mean)**2)`` -- and the helpers below are its
whole algebra; every operator calls them, none writes the formulas again:

* :func:`mom_update` -- add one value (Welford 1962, "Note on a method for calculating
  corrected sums of squares and products", Technometrics 4(3));
* :func:`mom_merge` -- merge two partials (Chan, Golub, LeVeque, "Algorithms for computing
  the sample variance: analysis and recommendations", The American Statistician 37(3), 1983:
  their pairwise update); :func:`mom_merge_arrays` applies it elementwise (AdaptWID's
  blocks), :func:`mom_merge_segments` folds it over runs of partials (session windows);
* :func:`mom_reduce` -- the partial of a run of values: the two-pass algorithm (mean, then
  the sum of squared deviations), which Chan et al. recommend when the data are at hand;
* :func:`variance` -- finalize: ``M2 / (n - ddof)`` (the registry's ``var``/``std`` are the
  sample statistics, ``ddof = 1``; ``std`` is its square root, :meth:`Moment.from_variance`).

Every operator feeds these helpers *shifted data*, ``x - K`` (:func:`shift_values`), with one
shift ``K`` per column: its first valid finite value, then fixed
(:func:`oop.window.values.pick_shift`; kept in the operator's snapshot). Chan et al.
recommend shifting by a data value (a rough estimate of the mean) before computing.

Why this algorithm. The centred state's rounding error grows with the condition number
``kappa = |mean - K| / spread`` (Chan et al.: ``~ n * eps * kappa`` for the updating and
pairwise algorithms; ``kappa**2`` for sums of squares), and merges of partials are O(1), which
panes, sessions and AdaptWID's eager/lazy blocks need. The shift is what keeps ``kappa``
small: a float64 mean near ``1e9`` carries ``ulp(1e9) ~ 1e-7``, so Welford on the raw
values of ``1e9 + N(0, 1e-3)`` loses 4 of its digits (measured over 200 random windows of 2..50 values: relative error up to 2e-4), while
``x - K`` is exact there (Sterbenz) and the result is good to ~1e-15. Equal values give
exactly 0: every delta is 0, so ``M2`` never leaves 0.

Shifted sums. The window ring and the in-order buffering window *subtract* tuples (004
Eq. 6.4, differential panes), which the centred state does not do exactly; their lanes hold
``S = sum(x - K)`` and ``SS = sum((x - K)**2)`` (the textbook algorithm on shifted data,
accurate while ``K`` lies near the cell's data: ``kappa**2``). They enter the algebra through
:func:`m2_from_sums` -- ``M2 = SS - S*S/n``, with a cancellation guard -- and finalize with
the same :func:`variance` (:func:`variance_from_sums`). The ring's ``S`` of a float column
is a lane of its own (``oop.window.values.LaneInfo.shifted``), apart from the unshifted sum
lane ``sum``/``mean`` read. NaN / inf values make the variance NaN.

The scalar reference (:class:`Moment`) computes in exact arithmetic (ints and the Fractions
floats are), rounded once.

>>> import numpy as np
>>> x = 1e9 + np.array([1e-3, -2e-3, 4e-3, 0.0])
>>> n, mean, m2 = mom_reduce(x, np.ones(4, bool), np.array([0]))
>>> bool(np.isclose(variance(n, m2)[0], np.var(x - 1e9, ddof=1), rtol=1e-6))
True
>>> variance(*mom_reduce(np.full(3, 1e9 + 0.1), np.ones(3, bool), np.array([0]))[::2]).tolist()
[0.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numba
import numpy as np

from oop.aggregates.base import AggregateFunction, isnan

__all__ = ["Moment", "VAR", "STD", "mom_update", "mom_merge", "mom_merge_arrays",
           "mom_merge_segments", "mom_reduce", "shift_values", "variance", "m2_from_sums",
           "variance_from_sums"]


# ---- the algebra of (n, mean, M2) ----------------------------------------------------------
@numba.njit(cache=True)
def mom_update(n, mean, m2, x):  # type: ignore[no-untyped-def]
    """``(n, mean, M2)`` with the value ``x`` added (Welford). O(1); numba-callable."""
    n1 = n + 1
    d = x - mean
    mean1 = mean + d / n1
    return n1, mean1, m2 + d * (x - mean1)


def _merge(na, ma, m2a, nb, mb, m2b):  # type: ignore[no-untyped-def]
    """Chan et al.'s pairwise merge; scalars (compiled below) or numpy arrays elementwise.
    Two empty partials give ``(0, ma, m2a)``: the weight ``nb / n`` is 0 there, not NaN."""
    n = na + nb
    w = nb / (n + (n == 0))
    d = mb - ma
    return n, ma + d * w, m2a + m2b + d * d * na * w


#: the merge compiled for kernels; the same function applies to numpy arrays elementwise
mom_merge = numba.njit(cache=True)(_merge)
mom_merge.__doc__ = """``(n, mean, M2)`` of the union of two partials (Chan, Golub, LeVeque).
O(1); numba-callable (for numpy arrays elementwise: :func:`mom_merge_arrays`)."""


def mom_merge_arrays(na: np.ndarray, ma: np.ndarray, m2a: np.ndarray, nb: np.ndarray,
                     mb: np.ndarray, m2b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`mom_merge` elementwise over arrays of partials. O(len)."""
    with np.errstate(invalid="ignore"):
        return _merge(na, ma, m2a, nb, mb, m2b)  # type: ignore[no-any-return]


@numba.njit(cache=True)
def mom_merge_segments(cnt, mean, m2, bounds):  # type: ignore[no-untyped-def]
    """One partial per segment ``[bounds[j], bounds[j+1])`` of partials: :func:`mom_merge`
    folded left to right (empty partials are skipped). O(len)."""
    m = bounds.shape[0] - 1
    oc = np.zeros(m, np.int64)
    om = np.zeros(m, np.float64)
    o2 = np.zeros(m, np.float64)
    for j in range(m):
        n, mu, s2 = np.int64(0), 0.0, 0.0  # not the literal 0: mom_merge would compile twice
        for i in range(bounds[j], bounds[j + 1]):
            if cnt[i] != 0:
                n, mu, s2 = mom_merge(n, mu, s2, cnt[i], mean[i], m2[i])
        oc[j], om[j], o2[j] = n, mu, s2
    return oc, om, o2


@numba.njit(cache=True)
def _reduce_runs(x, valid, bounds, shift):  # type: ignore[no-untyped-def]
    """:func:`mom_reduce`'s kernel: per run, two passes over ``x[i] - shift`` of its valid rows,
    the second centred on the first pass's mean taken relative to the run's first value."""
    m = bounds.shape[0] - 1
    on = np.zeros(m, np.int64)
    om = np.zeros(m, np.float64)
    o2 = np.zeros(m, np.float64)
    for j in range(m):
        n, k, s = 0, 0.0, 0.0
        for i in range(bounds[j], bounds[j + 1]):
            if valid[i]:
                v = np.float64(x[i] - shift)
                if n == 0:
                    k = v
                s += v - k
                n += 1
        dm = s / n if n else 0.0
        s2 = 0.0
        for i in range(bounds[j], bounds[j + 1]):
            if valid[i]:
                d = (np.float64(x[i] - shift) - k) - dm
                s2 += d * d
        on[j], om[j], o2[j] = n, k + dm, s2
    return on, om, o2


def mom_reduce(x: np.ndarray, valid: np.ndarray, starts: np.ndarray,
               shift: float | int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n, mean, M2)`` of the valid values ``x - shift`` of each run ``x[starts[j]:
    starts[j+1]]`` (the last run ends at ``len(x)``), by two passes over the run's values
    minus its first valid value (a run of equal values has ``M2 == 0`` exactly). ``x``
    int64 with an int ``shift`` subtracts in int64 (see :func:`shift_values`); other dtypes
    than int64 / float64 are converted first. O(len), compiled."""
    if x.dtype != np.int64 and x.dtype != np.float64:
        x = x.astype(np.float64)
    if x.dtype == np.float64 or not isinstance(shift, int):
        shift = float(shift)
    bounds = np.append(starts, len(x)).astype(np.int64)
    return _reduce_runs(x, valid.astype(np.bool_, copy=False), bounds, shift)  # type: ignore[no-any-return]


def shift_values(x: np.ndarray, shift: float | int | None) -> np.ndarray:
    """``x - shift`` as float64, the difference taken in int64 for integers and an int shift
    (exact for a spread below ``2**53``); ``None`` (no finite value seen yet) shifts by 0. O(len)."""
    if shift is None:
        return x.astype(np.float64, copy=False)
    if isinstance(shift, int) and np.issubdtype(x.dtype, np.integer):
        return (x.astype(np.int64, copy=False) - np.int64(shift)).astype(np.float64)
    return x.astype(np.float64, copy=False) - float(shift)


def variance(n: np.ndarray, m2: np.ndarray, ddof: int = 1) -> np.ndarray:
    """``M2 / (n - ddof)`` per cell, never negative (NaN ``M2`` stays NaN); cells with
    ``n <= ddof`` get a finite placeholder -- the caller masks them as null. O(len)."""
    return np.maximum(m2, 0.0) / np.maximum(n - ddof, 1)


#: rounding error of ``SS - S*S/n`` in ulps of ``SS`` per summed value (see m2_from_sums)
_CANCEL_ULPS = 4.0


def m2_from_sums(n: np.ndarray, s: np.ndarray, ss: np.ndarray) -> np.ndarray:
    """``M2`` per cell from the count ``n``, the shifted sum ``s`` and the shifted sum of
    squares ``ss`` (float64; meaningless where ``n < 2`` -- the caller masks those). O(len).

    ``SS - S*S/n`` cancels when the shift lies far from the window's values: both terms
    carry rounding errors up to about ``n`` ulps of ``SS``. A difference inside that error
    is not a spread the sums can resolve, so it is 0 (a window of equal values gives
    exactly 0, not the square root of the rounding residue), and never negative.
    """
    nf = n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = ss - s * s / nf
        return np.where(d <= _CANCEL_ULPS * nf * np.finfo(np.float64).eps * np.abs(ss), 0.0, d)


def variance_from_sums(n: np.ndarray, s: np.ndarray, ss: np.ndarray) -> np.ndarray:
    """Sample variance per cell from shifted sums: :func:`variance` of :func:`m2_from_sums`
    (NaN where the sums are; the caller masks ``n < 2``). O(len)."""
    with np.errstate(invalid="ignore"):
        return variance(n, m2_from_sums(n, s, ss))


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
