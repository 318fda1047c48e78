"""Small pieces the AdaptWID kernels share, inlined into them (004 §6.3.4).

* the Bucket of one tuple (004 Eq. 5.2): :func:`_wid_span` -- window ids ``[lo, hi)`` with
  ``lo = floor((t - origin) / SLIDE)``, ``hi = floor((t - origin + RANGE) / SLIDE)``, by
  a float multiply and one exact correction (:func:`_fdiv`) -- and the windows of it a
  punctuation closing ``[old, fo)`` completes (:func:`_closing_span`);
* Cond. 6.9's terms read from ``winVol`` (004 §6.3.2): the per-source offsets
  (:func:`_source_offsets`), a group's volume and skew term (:func:`_volume_skew`) and
  whether it is still in ``H`` (:func:`_is_alive`);
* distinct groups through a scratch array over group codes (all -1 between calls):
  :func:`_first_seen`, :func:`_clear`, :func:`_expired_groups`;
* the lazy buffer's bins (004 §6.3.4.2, "Discussion": ``B`` partitioned into bins by group
  code): :func:`_bin_of`, the stable counting sort :func:`_bin_sort_kept`.

No punctuation rule of its own: these compute one tuple's or one group's part of the
kernels' rules. Every helper is ``inline="always"`` (numba copies it into each caller);
the references keep their own Python counterparts here (``_*_reference``), so no
reference shares code with a kernel. numba invalidates a cached caller only when the
caller's own module changes: after editing a helper here, clear the numba cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _fdiv(d, s, inv):  # type: ignore[no-untyped-def]
    """``floor(d / s)`` for int64 ``d`` and ``s > 0`` (``inv = 1.0 / s``): a float multiply
    and one exact correction step instead of an integer division (for ``|d| < 2**52`` the
    float quotient is off by less than one; larger ``|d|`` take the integer division)."""
    if d >= 4503599627370496 or d <= -4503599627370496:
        return d // s
    q = np.int64(np.floor(d * inv))
    r = d - q * s
    if r < 0:
        q -= 1
    elif r >= s:
        q += 1
    return q


@njit(cache=True, inline="always")
def _wid_span(t, origin, range_, slide, per, inv):  # type: ignore[no-untyped-def]
    """The Bucket of one tuple at time ``t``: window ids ``[lo, hi)`` with ``lo = floor((t -
    origin) / slide)``, ``hi = floor((t - origin + range) / slide)`` (004 Eq. 5.2). ``per``
    = ``range // slide`` when RANGE is a multiple of SLIDE (then ``hi = lo + per``, one
    division), else -1; ``inv = 1.0 / slide`` (:func:`_fdiv`)."""
    d = t - origin
    a = _fdiv(d, slide, inv)
    b = a + per if per > 0 else _fdiv(d + range_, slide, inv)
    return a, b


@njit(cache=True, inline="always")
def _span_consts(range_, slide):  # type: ignore[no-untyped-def]
    """:func:`_wid_span`'s ``per`` (windows per tuple when RANGE is k x SLIDE, else -1) and
    ``inv`` (``1.0 / slide``)."""
    return (range_ // slide if range_ % slide == 0 else -1), 1.0 / slide


@njit(cache=True, inline="always")
def _closing_span(t, origin, range_, slide, per, inv, old, fo):  # type: ignore[no-untyped-def]
    """A buffered tuple's windows ``[lo, hi)`` (:func:`_wid_span`) and those a punctuation
    closing ``[old, fo)`` completes: ``[max(lo, old), min(hi, fo))`` (empty if ``>=``)."""
    a, b = _wid_span(t, origin, range_, slide, per, inv)
    return a, b, (a if a > old else old), (b if b < fo else fo)


@njit(cache=True, inline="always")
def _source_offsets(hwm, skew_on):  # type: ignore[no-untyped-def]
    """Cond. 6.9's per-source offsets (``SourceOffsets.offsets()``): ``max(hwm) - hwm[K]``
    for every source seen (``hwm[K]`` > int64 min), 0 for the others; all 0 unless
    ``skew_on``. O(sources)."""
    S = hwm.shape[0]
    off = np.zeros(S, np.float64)
    top = np.int64(-9223372036854775807 - 1)
    for j in range(S):
        if hwm[j] > top:
            top = hwm[j]
    if skew_on:
        for j in range(S):
            if hwm[j] != np.int64(-9223372036854775807 - 1):
                off[j] = top - hwm[j]
    return off


@njit(cache=True, inline="always")
def _volume_skew(wv, g, vmask, range_f, off):  # type: ignore[no-untyped-def]
    """Group ``g``'s winVol summed over the sources and Cond. 6.9's skew term ``sum_K
    winVol[g, K] / range_f * off[K]`` (``theta = base + skew``). O(sources)."""
    vol = 0
    skew = 0.0
    for k in range(wv.shape[1]):
        c = wv[g, k] & vmask
        vol += c
        skew += c / range_f * off[k]
    return vol, skew


@njit(cache=True, inline="always")
def _is_alive(wv, g, vmask):  # type: ignore[no-untyped-def]
    """Whether group ``g`` has a tuple in some source's winVol (else it is not in ``H``)."""
    for k in range(wv.shape[1]):
        if wv[g, k] & vmask != 0:
            return True
    return False


@njit(cache=True, inline="always")
def _first_seen(scratch, g, out, n):  # type: ignore[no-untyped-def]
    """Distinct groups in first-occurrence order: the first time group ``g`` is seen
    (``scratch[g] < 0``) it gets position ``n`` (``scratch[g] = n``, ``out[n] = g``).
    Returns the new count of distinct groups."""
    if scratch[g] < 0:
        scratch[g] = n
        out[n] = g
        return n + 1
    return n


@njit(cache=True, inline="always")
def _clear(scratch, groups, n):  # type: ignore[no-untyped-def]
    """Leave ``scratch`` all -1 again after :func:`_first_seen` noted ``groups[:n]``."""
    for j in range(n):
        scratch[groups[j]] = -1


@njit(cache=True, inline="always")
def _expired_groups(gid, keep, scratch):  # type: ignore[no-untyped-def]
    """The distinct groups of the rows with ``keep[i]`` False, in first-occurrence order;
    ``scratch`` (int64 over group codes, all -1) is left all -1. O(n)."""
    gone = np.empty(gid.shape[0], np.int64)
    n = 0
    for i in range(gid.shape[0]):
        if not keep[i]:
            n = _first_seen(scratch, gid[i], gone, n)
    _clear(scratch, gone, n)
    return gone[:n].copy()


@njit(cache=True, inline="always")
def _bin_of(g, n_bins, pow2):  # type: ignore[no-untyped-def]
    """Bin ``g % n_bins`` of group code ``g`` (a mask when ``pow2``: ``n_bins`` a power of
    two, where ``g & (n_bins - 1) == g % n_bins`` for every int, negative ones too)."""
    return g & (n_bins - 1) if pow2 else g % n_bins


@njit(cache=True, inline="always")
def _bin_sort_kept(gid, keep, n_bins):  # type: ignore[no-untyped-def]
    """Stable counting sort of the rows with ``keep[i]`` by bin ``gid % n_bins``: returns
    ``(order, cuts)`` (``cuts``: ``n_bins + 1`` bin starts in ``order``). O(n + bins)."""
    pow2 = n_bins & (n_bins - 1) == 0
    cuts = np.zeros(n_bins + 1, np.int64)
    for i in range(gid.shape[0]):
        if keep[i]:
            cuts[_bin_of(gid[i], n_bins, pow2) + 1] += 1
    for b in range(n_bins):
        cuts[b + 1] += cuts[b]
    order = np.empty(cuts[n_bins], np.int64)
    pos = cuts[:n_bins].copy()
    for i in range(gid.shape[0]):
        if keep[i]:
            b = _bin_of(gid[i], n_bins, pow2)
            order[pos[b]] = i
            pos[b] += 1
    return order, cuts


def _bins_reference(bins: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows listed per bin -> ``(rows in bin order, bin cuts)`` (the references' sort)."""
    cuts = np.cumsum([0] + [len(b) for b in bins]).astype(np.int64)
    return np.asarray([i for b in bins for i in b], np.int64), cuts


def _source_offsets_reference(hwm: np.ndarray, skew_on: bool) -> list[int]:
    """Reference of :func:`_source_offsets`: newest seen high-watermark minus each seen one."""
    i64min = int(np.iinfo(np.int64).min)
    seen = [int(h) for h in hwm if int(h) != i64min]
    return [(max(seen) - int(h)) if (skew_on and int(h) != i64min) else 0 for h in hwm]


def _theta_reference(counts: list[int], off: list[int], base: float, range_f: float) -> float:
    """Cond. 6.9's ``theta = base + sum_K counts[K] / range_f * off[K]``."""
    return base + sum(c / range_f * float(o) for c, o in zip(counts, off))
