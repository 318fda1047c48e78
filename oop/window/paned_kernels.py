"""Compiled kernels of Paned-WID (004 §6.2), each beside its tuple-at-a-time reference.

Two hot paths of :class:`~oop.window.paned.PaneCombiner`:

* PLQ (per batch): :func:`pane_ids` -- the pane id ``floor((t - origin) /
  g)`` of every tuple and their min/max in one pass (a float multiply by
  ``1/g`` corrected to the exact integer floor: no integer division); the
  ring's fold kernels (:func:`~oop.window.kernels.upd_rows_sums1`) then add
  each tuple to its one ``(pane, code)`` cell. Measured: computing the pane
  inside the fold loop is slower than this separate pass (the fold is
  bound by random cell accesses, and the extra arithmetic shrinks how many
  of them are in flight).
* WLQ (per punctuation): :func:`paned_emit` -- every window of the
  punctuation in one pass: the running per-code sums move from window
  ``w - 1`` to ``w`` by adding the entering panes and subtracting the
  leaving ones (004 Eq. 6.2; recomputed from the window's panes every ``P``
  windows against float drift, every window when it has at most two panes),
  and one branch-free sweep over the codes writes the live cells straight into
  the output columns (codes, ``window_start``, ``window_end``, every lane).
  Leaving panes are reset in the same pass when asked (``zero``), so purging
  them costs no extra sweep.
  Cost: O(windows x codes x lanes) sequential, O(1) per output row.
* WLQ with select lanes (min, max, first, last): :func:`paned_emit_sel` --
  the same, plus prefix/suffix blocks of ``P`` panes aligned to pane ids
  whose state survives the punctuation (each closed pane is folded twice
  over the whole stream, instead of the ``nw + P - 1`` panes of a
  punctuation's span twice per punctuation), and the reset of the leaving
  panes in every lane (the purge has nothing left to sweep).
* WLQ, holistic: :func:`paned_quantiles` (median, quantiles: per-pane
  cursors and a merge walk that stops at the rank) and :func:`paned_distinct`
  (count-distinct) and :func:`paned_heavy` (heavy hitters): a running
  (code, value) -> multiplicity table moved by the entering and leaving
  panes, every window of a punctuation in one call.

The references (``*_ref``) do the same with Python loops over dicts; tests
assert kernel == reference on random inputs (``tests/test_window_paned_kernels.py``).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numba as nb
import numpy as np

from oop.hashing import mix64
from oop.window.kernels import _sel_better, nan_max, nan_min

__all__ = ["pane_ids", "pane_ids_ref", "paned_emit", "paned_emit_ref", "paned_emit_hash",
           "paned_emit_rows",
           "paned_emit_sel", "paned_emit_sel_ref", "paned_quantiles", "paned_quantiles_ref",
           "paned_distinct", "paned_distinct_ref", "paned_heavy", "paned_heavy_ref"]


@nb.njit(cache=True, inline="always")
def _pane(t, o, g, inv):
    """floor((t - o) / g) exactly: a float estimate, corrected by the integer remainder.

    The estimate is off by at most one while ``|t - o| / g < 2**52``; the
    remainder check catches every other case (then one integer floor division).
    """
    d = t - o
    p = np.int64(np.floor(d * inv))
    rem = d - p * g
    if rem < 0 or rem >= g:
        p += rem // g
    return p


@nb.njit(cache=True, nogil=True)
def pane_ids(times, o, g):
    """Pane id of every time, (min, max) of them, and the smallest time. ``times`` non-empty.

    Pane ids are monotone in ``t``, so min/max come from the times' extremes
    (the smallest time is the operator's late check, without another pass).
    One branch-free (SIMD) pass computes the ids and the extremes; when every
    ``|t - o| / g < 2**50`` its float estimate was off by at most one and the
    correction exact, otherwise (checked after the pass) every id is redone
    through the exact :func:`_pane`.
    """
    inv = 1.0 / g
    n = times.shape[0]
    out = np.empty(n, np.int64)
    tlo = times[0]
    thi = tlo
    for i in range(n):  # optimistic single pass: valid when the bound below holds
        t = times[i]
        tlo = min(tlo, t)
        thi = max(thi, t)
        d = t - o
        p = np.int64(np.floor(d * inv))  # within one of the true floor (error < 3/8)
        rem = d - p * g
        out[i] = p - (rem < 0) + (rem >= g)
    lo = _pane(tlo, o, g, inv)
    hi = _pane(thi, o, g, inv)
    if not (max(abs(lo), abs(hi)) < (1 << 50) and abs(tlo - o) < (1 << 62)
            and abs(thi - o) < (1 << 62)):
        for i in range(n):
            out[i] = _pane(times[i], o, g, inv)
    return out, lo, hi, tlo


def pane_ids_ref(times: Sequence[int], o: int, g: int) -> list[int]:
    """Reference of :func:`pane_ids`: Python's exact floor division, tuple by tuple."""
    return [(int(t) - o) // g for t in times]


def _make_paned_emit(fuse: bool, floats: bool = True) -> Any:
    """:func:`paned_emit` (``fuse`` false), :func:`paned_emit_fused` (true) or, with ``floats``
    false, :func:`paned_emit_ints`: one source, three kernels. ``fuse`` is a closure constant,
    so numba prunes the fused step's branch (and does not compile it) in the general kernel:
    a query with two or more int lanes (count + an int sum: the README's) compiles ~1 s less.
    ``floats`` false makes the float lane count the constant 0, so LLVM drops every float
    lane loop early: ~0.45 s less again for a query without float lanes (measured on the
    README's types, median of 4 fresh caches). The caller picks by the lane counts
    (:func:`emit_kernel`)."""

    def paned_emit(ilanes, n_i, flanes, n_f_in, irun, frun, C, mask, base, top, n, w0, nw, s, r,
                   g, o, prev_plo, prev_phi, inc0, since, steps, zero, lut, nf_hi=-(1 << 62)):
        """Window-level query of every window ``w0 .. w0 + nw - 1`` for sum-type lanes, fused.

        Window ``w`` holds panes ``[((w+1)s - r)/g, (w+1)s/g)`` and spans
        ``[o + (w+1)s - r, o + (w+1)s)``. Lane 0 of ``ilanes``/``irun`` is the
        row count; every lane's identity is 0. ``irun``/``frun`` hold the
        running sums of the window whose panes were ``[prev_plo, prev_phi)``;
        window ``k`` moves them by the entering panes ``[phi(w-1), phi(w))`` and
        the leaving ones ``[plo(w-1), plo(w))`` (Eq. 6.2), or recomputes them
        from its panes (``inc0`` false for the first window; after ``steps``
        steps since the last recompute, ``since``: every window when ``steps`` is
        0, :attr:`~oop.window.paned.PaneCombiner.steps`). With ``zero`` every pane
        in ``[base, plo(last window))`` is reset to 0 in the same pass (the leaving panes: below every later window;
        the caller then moves the ring's base there) and its live cells counted.

        Returns (codes, window_start, window_end, int lane values (n_i x m),
        float lane values (n_f x m), since, live cells reset); the m output cells
        are ordered by (window, code), only those with a row count > 0. With a
        non-empty ``lut`` (the key value of every code: one int64 key column) the
        first array holds ``lut[code]`` instead -- the key column itself, written
        in the same pass instead of decoded afterwards.

        ``nf_hi``: the last pane that may hold a NaN / infinite float sum (the
        ring's :attr:`~oop.window.ring.Ring.nf_hi`). Subtracting such a pane
        cannot remove it (``inf - inf`` is NaN), so a window whose predecessor
        starts at or before ``nf_hi`` is recomputed from its panes instead of
        stepped: the NaN stays in the windows that hold it and no other
        (docs/semantics.md). All-finite streams never take that branch.
        """
        n_f = n_f_in if floats else 0
        cap = nw * n
        codes = np.empty(cap, np.int64)
        start = np.empty(cap, np.int64)
        end = np.empty(cap, np.int64)
        iv = np.empty((n_i, cap), np.int64)
        fv = np.empty((max(n_f, 1), cap), np.float64)
        m = 0
        dead = 0
        p_lo, p_hi = prev_plo, prev_phi
        for k in range(nw):
            w = w0 + k
            e = (w + 1) * s
            plo = (e - r) // g
            phi = e // g
            if (inc0 or k > 0) and since < steps and p_lo > nf_hi:
                a_lo, a_hi = max(p_hi, base), min(phi, top)  # entering panes
                d_lo, d_hi = max(p_lo, base), min(plo, top)  # leaving panes
                if (fuse and zero and n_i == 1 and n_f <= 2 and a_hi - a_lo == 1
                        and d_hi - d_lo == 1
                        and (k > 0 or base >= p_lo)):
                    # slide = pane, count + up to two float lanes (count, sum, mean, var):
                    # step, reset of the leaving pane and output in one pass over the codes
                    ra, rd = (a_lo & mask) * C, (d_lo & mask) * C
                    f0 = flanes[0]
                    f1 = flanes[1 if n_f == 2 else 0]
                    r0 = frun[0]
                    r1 = frun[1 if n_f == 2 else 0]
                    o1 = fv[1 if n_f == 2 else 0]
                    we = o + e
                    m, dd = _fused_step(ilanes[0], irun[0], f0, f1, r0, r1, n_f, ra, rd, n, lut,
                                        codes, start, end, iv[0], fv[0], o1, m, we - r, we)
                    dead += dd
                    since += 1
                    p_lo, p_hi = plo, phi
                    continue
                _step_sums(irun, ilanes, n_i, frun, flanes, n_f, a_lo, a_hi, d_lo, d_hi, mask, C,
                           n)
                since += 1
            else:
                _recompute(irun, ilanes, n_i, frun, flanes, n_f, max(plo, base), min(phi, top),
                           mask, C, n)
                since = 0
            if zero:  # panes below plo: the first window resets everything below it
                for p in range(base if k == 0 else max(p_lo, base), min(plo, top)):
                    rr = (p & mask) * C
                    dead += _nonzero(ilanes[0], rr, n)
                    for q in range(n_i):
                        _fill(ilanes[q], rr, rr + n, 0)
                    for q in range(n_f):
                        _fill(flanes[q], rr, rr + n, 0.0)
            p_lo, p_hi = plo, phi
            # branch-free compaction of the live codes, then one gather per lane
            m0 = m
            cnt = irun[0]
            for c in range(n):
                codes[m] = c
                m += cnt[c] > 0
            we = o + e
            _fill(start, m0, m, we - r)
            _fill(end, m0, m, we)
            for q in range(n_i):
                _gather(iv[q], irun[q], codes, m0, m)
            for q in range(n_f):
                _gather(fv[q], frun[q], codes, m0, m)
            if lut.shape[0]:
                for t in range(m0, m):
                    codes[t] = lut[codes[t]]
        return codes[:m], start[:m], end[:m], iv[:, :m], fv[:, :m], since, dead

    paned_emit.__name__ = paned_emit.__qualname__ = (
        "paned_emit_fused" if fuse else "paned_emit" if floats else "paned_emit_ints")
    return nb.njit(cache=True, nogil=True)(paned_emit)


#: the general emission kernel (every lane count)
paned_emit = _make_paned_emit(False)
#: the same with the fused one-pass step for one int lane (the row count) and <= 2 float lanes
#: (count, sum, mean, var over floats); pick with :func:`emit_kernel`
paned_emit_fused = _make_paned_emit(True)
#: the general kernel without float lanes (count and integer sums: the README's query)
paned_emit_ints = _make_paned_emit(False, floats=False)


def emit_kernel(n_i: int, n_f: int, fuse: bool = True) -> Any:
    """The emission kernel for ``n_i`` int and ``n_f`` float lanes: the fused one where its
    step can apply and ``fuse`` asks for it, else the general one (which does not compile the
    fused step). A query with holistic aggregates passes ``fuse`` false: its sum lanes'
    emission is a small part of a punctuation's work, and the fused step would add ~0.3 s to
    its first run's compilation (with the row count as its only lane it uses
    :func:`paned_emit_rows` instead)."""
    if fuse and n_i == 1 and n_f <= 2:
        return paned_emit_fused
    return paned_emit if n_f else paned_emit_ints


@nb.njit(cache=True, nogil=True)
def paned_emit_rows(rows, run, C, mask, base, top, n, w0, nw, s, r, g, o, prev_plo, prev_phi,
                    inc0, zero):
    """:func:`paned_emit` for the row count alone: the emission of a query whose only lanes
    ride along with holistic aggregates (their cells are the codes with rows > 0).

    Same windows, running state and reset of the leaving panes (``zero``) as
    :func:`paned_emit` with one int lane and no float lane; integer sums do not
    drift, so the window steps differentially whenever it continues the previous
    one (``inc0`` or ``k > 0``) and is recomputed from its panes only otherwise. A
    small kernel of its own: its first-run compilation is a fraction of the
    general one's (lane tuples, float lanes, key lookup, NaN bound), which a
    holistic query would otherwise pay for one count. Returns (codes,
    window_start, window_end, counts, live cells reset); cells ordered by
    (window, code), only those with a count > 0. Cost: O(windows x codes).
    """
    cap = nw * n
    codes = np.empty(cap, np.int64)
    start = np.empty(cap, np.int64)
    end = np.empty(cap, np.int64)
    cnt = np.empty(cap, np.int64)
    m = 0
    dead = 0
    p_lo, p_hi = prev_plo, prev_phi
    for k in range(nw):
        e = (w0 + k + 1) * s
        plo = (e - r) // g
        phi = e // g
        if inc0 or k > 0:  # entering panes [p_hi, phi), leaving panes [p_lo, plo)
            a_lo, a_hi, d_lo = max(p_hi, base), min(phi, top), max(p_lo, base)
        else:  # from scratch: the window's panes enter an empty state
            _fill(run, 0, n, 0)
            a_lo, a_hi, d_lo = max(plo, base), min(phi, top), plo
        for p in range(a_lo, a_hi):
            rr = (p & mask) * C
            for c in range(n):
                run[c] += rows[rr + c]
        for p in range(d_lo, min(plo, top)):
            rr = (p & mask) * C
            for c in range(n):
                run[c] -= rows[rr + c]
        if zero:  # panes below plo: the first window resets everything below it
            for p in range(base if k == 0 else max(p_lo, base), min(plo, top)):
                rr = (p & mask) * C
                for c in range(n):
                    dead += rows[rr + c] != 0
                    rows[rr + c] = 0
        p_lo, p_hi = plo, phi
        we = o + e
        m0 = m
        for c in range(n):  # branch-free compaction of the live codes
            codes[m] = c
            cnt[m] = run[c]
            m += run[c] > 0
        _fill(start, m0, m, we - r)
        _fill(end, m0, m, we)
    return codes[:m], start[:m], end[:m], cnt[:m], dead


@nb.njit(cache=True, inline="always")
def _fused_step(rows, rrun, f0, f1, r0, r1, nf, ra, rd, n, lut, codes, start, end, orow, o0, o1, m,
                ws, we):
    """One window of :func:`paned_emit` when one pane enters and one leaves: per code, move
    the running count and ``nf`` (<= 2) float sums, reset the leaving cell, write the output
    row and keep it when the count is > 0 (branch-free). Returns (m, live cells reset)."""
    dead = 0
    m0 = m
    keys = lut.shape[0] > 0
    for c in range(n):
        xd = rows[rd + c]
        cr = rrun[c] + (rows[ra + c] - xd)
        rrun[c] = cr
        dead += xd != 0
        rows[rd + c] = 0
        codes[m] = lut[c] if keys else c
        orow[m] = cr
        if nf >= 1:
            v0 = r0[c] + (f0[ra + c] - f0[rd + c])
            r0[c] = v0
            f0[rd + c] = 0.0
            o0[m] = v0
        if nf >= 2:
            v1 = r1[c] + (f1[ra + c] - f1[rd + c])
            r1[c] = v1
            f1[rd + c] = 0.0
            o1[m] = v1
        m += cr > 0
    _fill(start, m0, m, ws)
    _fill(end, m0, m, we)
    return m, dead


@nb.njit(cache=True, nogil=True)
def _add_sub_panes(irun, ilanes, n_i, frun, flanes, n_f, a_lo, a_hi, d_lo, d_hi, mask, C, n):
    """Differential window step (004 Eq. 6.2): running += panes [a_lo, a_hi), -= panes [d_lo, d_hi).

    Every int lane of ``ilanes`` into ``irun``, every float lane of ``flanes``
    into ``frun`` (the first ``n_i`` / ``n_f`` entries are real), over codes
    ``[0, n)``. Compiled once per lane-tuple type, shared by
    :func:`paned_emit` and :func:`paned_emit_sel` (called once per window).
    """
    for p in range(a_lo, a_hi):
        rr = (p & mask) * C
        for q in range(n_i):
            _add(irun[q], ilanes[q], rr, n)
        for q in range(n_f):
            _add(frun[q], flanes[q], rr, n)
    for p in range(d_lo, d_hi):
        rr = (p & mask) * C
        for q in range(n_i):
            _sub(irun[q], ilanes[q], rr, n)
        for q in range(n_f):
            _sub(frun[q], flanes[q], rr, n)


@nb.njit(cache=True, inline="always")
def _step_sums(irun, ilanes, n_i, frun, flanes, n_f, a_lo, a_hi, d_lo, d_hi, mask, C, n):
    """One differential window step of the sum lanes (004 Eq. 6.2), shared by
    :func:`paned_emit` and :func:`paned_emit_sel`: one pass per lane when one pane enters
    (``a_lo``) and one leaves (``d_lo``) -- a slide of one pane --, else
    :func:`_add_sub_panes` over the entering ``[a_lo, a_hi)`` and leaving ``[d_lo, d_hi)``."""
    if a_hi - a_lo == 1 and d_hi - d_lo == 1:
        ra, rd = (a_lo & mask) * C, (d_lo & mask) * C
        for q in range(n_i):
            _step(irun[q], ilanes[q], ra, rd, n)
        for q in range(n_f):
            _step(frun[q], flanes[q], ra, rd, n)
    else:
        _add_sub_panes(irun, ilanes, n_i, frun, flanes, n_f, a_lo, a_hi, d_lo, d_hi, mask, C, n)


@nb.njit(cache=True, inline="always")
def _recompute(irun, ilanes, n_i, frun, flanes, n_f, lo, hi, mask, C, n):
    """Running sums from scratch: the panes ``[lo, hi)`` summed (the periodic drift reset)."""
    for q in range(n_i):
        _fill(irun[q], 0, n, 0)
    for q in range(n_f):
        _fill(frun[q], 0, n, 0.0)
    # no leaving panes: the empty range [hi, hi) (not literal zeros, which numba would
    # compile as a second specialization of _add_sub_panes)
    _add_sub_panes(irun, ilanes, n_i, frun, flanes, n_f, lo, hi, hi, hi, mask, C, n)


@nb.njit(cache=True, inline="always")
def _step(acc, lane, ra, rd, n):
    for c in range(n):
        acc[c] += lane[ra + c] - lane[rd + c]


@nb.njit(cache=True, inline="always")
def _add(acc, lane, rr, n):
    for c in range(n):
        acc[c] += lane[rr + c]


@nb.njit(cache=True, inline="always")
def _sub(acc, lane, rr, n):
    for c in range(n):
        acc[c] -= lane[rr + c]


@nb.njit(cache=True, inline="always")
def _nonzero(lane, rr, n):
    k = 0
    for c in range(n):
        k += lane[rr + c] != 0
    return k


@nb.njit(cache=True, inline="always")
def _fill(a, lo, hi, v):
    """``a[lo:hi] = v`` for ``0 <= lo``, without compiling a slice assignment (6358094). The
    index is unsigned: numba then drops its negative-index wraparound, and the loop vectorizes
    like the slice's (a signed index cost the fused emission ~4% on 10k keys)."""
    for t in range(lo, hi):
        a[np.uint64(t)] = v


@nb.njit(cache=True, inline="always")
def _copy(dst, d0, src, s0, n):
    """``dst[d0:d0 + n] = src[s0:s0 + n]`` for non-overlapping ranges, ``0 <= d0, s0``, as a
    loop: numba compiles a slice assignment between arrays for ~1.4 s of a first run each
    (broadcasting and overlap checks); this loop vectorizes like :func:`_fill`."""
    for t in range(n):
        dst[np.uint64(d0 + t)] = src[np.uint64(s0 + t)]


@nb.njit(cache=True, inline="always")
def _gather(out, src, idx, a, b):
    for t in range(a, b):
        out[t] = src[idx[t]]


def paned_emit_ref(panes: dict[tuple[int, int], list], w0: int, nw: int, s: int, r: int, g: int,
                   o: int) -> list[tuple[int, int, int, list]]:
    """Reference of :func:`paned_emit`: each window recombined from its panes, tuple by tuple.

    ``panes[(pane, code)]`` is the list of lane values of that cell (lane 0
    = row count). Returns ``(code, window_start, window_end, lane sums)`` for
    every window ``w0 .. w0 + nw - 1`` and code with a positive row count,
    ordered by (window, code).
    """
    out: list[tuple[int, int, int, list]] = []
    for w in range(w0, w0 + nw):
        e = (w + 1) * s
        plo, phi = (e - r) // g, e // g
        acc: dict[int, list[Any]] = {}
        for (p, c), vals in panes.items():
            if plo <= p < phi:
                cur = acc.setdefault(c, [0] * len(vals))
                for q, v in enumerate(vals):
                    cur[q] += v
        for c in sorted(acc):
            if acc[c][0] > 0:
                out.append((c, o + e - r, o + e, acc[c]))
    return out


@nb.njit(cache=True, nogil=True)
def paned_emit_hash(order, offs, pa0, cell_c, ilanes, n_i, flanes, n_f, irun, frun, n, w0, nw, s,
                    r, g, o, prev_plo, prev_phi, inc0, since, steps, sort_codes, nf_hi=-(1 << 62)):
    """:func:`paned_emit` over the sparse (hash) layout: panes are lists of live cells.

    ``order[offs[p - pa0]:offs[p - pa0 + 1]]`` are the cells of pane ``p``
    (``pa0 <= p < pa0 + len(offs) - 1``; other panes are empty); cell ``x``
    has code ``cell_c[x]`` and lane values ``ilanes[q][x]``/``flanes[q][x]``.
    The running sums ``irun``/``frun`` are dense over codes, but only the
    codes of touched cells are visited: per window O(cells entering +
    leaving + live codes), never O(all codes). Same returns as
    :func:`paned_emit` (nothing is reset: the caller purges the cells),
    except that a window's codes are in code order only with ``sort_codes``
    (O(live codes x log) more; holistic aggregates need it), otherwise in
    the order they entered the window.
    """
    npane = offs.shape[0] - 1
    flag = np.zeros(n, np.uint8)
    act = np.empty(n, np.int64)
    na = 0
    for c in range(n):  # codes live in the window the running state holds
        if irun[0][c] > 0:
            flag[c] = 1
            act[na] = c
            na += 1
    cap = 16
    codes = np.empty(cap, np.int64)
    start = np.empty(cap, np.int64)
    end = np.empty(cap, np.int64)
    m = 0
    p_lo, p_hi = prev_plo, prev_phi
    outi = np.empty((n_i, cap), np.int64)
    outf = np.empty((max(n_f, 1), cap), np.float64)
    for k in range(nw):
        w = w0 + k
        e = (w + 1) * s
        plo = (e - r) // g
        phi = e // g
        if (inc0 or k > 0) and since < steps and p_lo > nf_hi:
            lo1, hi1 = p_hi, phi
            lo2, hi2 = p_lo, plo
            since += 1
        else:
            for t in range(na):
                c = act[t]
                for q in range(n_i):
                    irun[q][c] = 0
                for q in range(n_f):
                    frun[q][c] = 0.0
            lo1, hi1 = plo, phi
            lo2, hi2 = 0, 0
            since = 0
        for p in range(max(lo1, pa0), min(hi1, pa0 + npane)):
            for t in range(offs[p - pa0], offs[p - pa0 + 1]):
                x = order[t]
                c = cell_c[x]
                for q in range(n_i):
                    irun[q][c] += ilanes[q][x]
                for q in range(n_f):
                    frun[q][c] += flanes[q][x]
                if flag[c] == 0:
                    flag[c] = 1
                    act[na] = c
                    na += 1
        for p in range(max(lo2, pa0), min(hi2, pa0 + npane)):
            for t in range(offs[p - pa0], offs[p - pa0 + 1]):
                x = order[t]
                c = cell_c[x]
                for q in range(n_i):
                    irun[q][c] -= ilanes[q][x]
                for q in range(n_f):
                    frun[q][c] -= flanes[q][x]
        p_lo, p_hi = plo, phi
        # keep the live codes, in code order
        j = 0
        for t in range(na):
            c = act[t]
            if irun[0][c] > 0:
                act[j] = c
                j += 1
            else:  # the group left the window: its sums are exactly 0 (no float residue)
                flag[c] = 0
                for q in range(n_i):
                    irun[q][c] = 0
                for q in range(n_f):
                    frun[q][c] = 0.0
        na = j
        if sort_codes:  # na as int64: typed first as its literal 0, it would compile twice
            _sort_head(act, np.int64(na))
        if m + na > cap:
            while m + na > cap:
                cap *= 2
            codes2 = np.empty(cap, np.int64)
            _copy(codes2, 0, codes, 0, m)
            codes = codes2
            start2 = np.empty(cap, np.int64)
            _copy(start2, 0, start, 0, m)
            start = start2
            end2 = np.empty(cap, np.int64)
            _copy(end2, 0, end, 0, m)
            end = end2
            oi = np.empty((n_i, cap), np.int64)
            for q in range(n_i):
                _copy(oi[q], 0, outi[q], 0, m)
            outi = oi
            of = np.empty((max(n_f, 1), cap), np.float64)
            for q in range(n_f):
                _copy(of[q], 0, outf[q], 0, m)
            outf = of
        we = o + e
        for t in range(na):
            c = act[t]
            codes[m + t] = c
            start[m + t] = we - r
            end[m + t] = we
            for q in range(n_i):
                outi[q, m + t] = irun[q][c]
            for q in range(n_f):
                outf[q, m + t] = frun[q][c]
        m += na
    return codes[:m], start[:m], end[:m], outi[:, :m], outf[:, :m], since


@nb.njit(cache=True, nogil=True)
def _sort_head(a, n):
    """Sort ``a[:n]`` in place. Compiled apart from :func:`paned_emit_hash`: numba's
    quicksort is ~1 s of a first compile, which a first run does in its own process while
    its compile-ahead helper starts (:func:`oop.compile_ahead.request`)."""
    a[:n].sort()


# ---- select lanes (min, max, first, last): persistent prefix/suffix blocks ----------------
# _fold and _answer are compiled functions, not inlined: compiled once per array type and
# shared by every specialization of paned_emit_sel (one per combination of lane tuple lengths),
# which keeps each specialization's compile time short (they run once per pane or window and
# lane, over all codes: the call costs nothing measurable)
@nb.njit(cache=True, nogil=True)
def _fold(lane, tl, op, ident, tident, dst, dstt, q0, src, live, rr, n):
    """dst[q0 + c] = pane cell (ring row ``rr``; identities when not ``live``) combined with
    dst[src + c] (``src`` < 0: no partner), for every code. min/max loops are branch-free."""
    if op < 2:
        if not live:
            if src < 0:
                _fill(dst, q0, q0 + n, ident)
            else:
                _copy(dst, q0, dst, src, n)  # rows q0 and src of the block: apart
        elif src < 0:
            _copy(dst, q0, lane, rr, n)
        elif op == 0:
            for c in range(n):
                dst[q0 + c] = nan_min(lane[rr + c], dst[src + c])
        else:
            for c in range(n):
                dst[q0 + c] = nan_max(lane[rr + c], dst[src + c])
        return
    for c in range(n):
        if live:
            v = lane[rr + c]
            t = tl[rr + c]
        else:
            v = ident
            t = tident
        if src >= 0:
            pv = dst[src + c]
            pt = dstt[src + c]
            if not _sel_better(op, t, v, pt, pv):
                v = pv
                t = pt
        dst[q0 + c] = v
        dstt[q0 + c] = t


@nb.njit(cache=True, nogil=True)
def _answer(out, outt, op, suf, suft, pre, pret, sa, pb, two, idx, m0, m):
    """Select value (and time) of the cells ``m0 .. m - 1`` (codes ``idx``): ``suf[sa + c]``,
    combined with ``pre[pb + c]`` when the window straddles two blocks."""
    if op < 2:
        if not two:
            for t in range(m0, m):
                out[t] = suf[sa + idx[t]]
        elif op == 0:
            for t in range(m0, m):
                c = idx[t]
                out[t] = nan_min(suf[sa + c], pre[pb + c])
        else:
            for t in range(m0, m):
                c = idx[t]
                out[t] = nan_max(suf[sa + c], pre[pb + c])
        return
    for t in range(m0, m):
        c = idx[t]
        v = suf[sa + c]
        tt = suft[sa + c]
        if two:
            v2 = pre[pb + c]
            t2 = pret[pb + c]
            if _sel_better(op, t2, v2, tt, v):
                v = v2
                tt = t2
        out[t] = v
        outt[t] = tt


@nb.njit(cache=True, inline="always")
def _fused_minmax_step(rows, rrun, lane, is_max, ident, pre, pcur, pprev, suf, sa, two, ra, rd,
                       n, lut, codes, orow, oval, m):
    """One window of :func:`paned_emit_sel` in one pass over the codes, for the common shape:
    count + one min/max lane, one pane entering (``ra``, pane ``phi - 1``) and one leaving
    (``rd``). Per code: step the count, fold the entering pane into the prefix row ``pcur``
    (``pprev`` < 0: it starts a block), answer ``suf[sa] (+) pre`` (``two``), reset the
    leaving cell in both lanes, write the output row (kept when the count is > 0).
    Returns (m, live cells reset)."""
    dead = 0
    keys = lut.shape[0] > 0
    for c in range(n):
        xd = rows[rd + c]
        cr = rrun[c] + (rows[ra + c] - xd)
        rrun[c] = cr
        dead += xd != 0
        rows[rd + c] = 0
        x = lane[ra + c]
        if pprev >= 0:
            y = pre[pprev + c]
            x = nan_max(x, y) if is_max else nan_min(x, y)
        pre[pcur + c] = x
        a = suf[sa + c]
        if two:
            a = nan_max(a, x) if is_max else nan_min(a, x)
        lane[rd + c] = ident
        codes[m] = lut[c] if keys else c
        orow[m] = cr
        oval[m] = a
        m += cr > 0
    return m, dead


@nb.njit(cache=True, nogil=True)
def paned_emit_sel(ilanes, n_i, flanes, n_f, irun, frun,
                   sil, n_si, sfl, n_sf, stl, ops, idi, idf, tid,
                   prei, sufi, pref, suff, pret, suft, C2, pre_hi, suf_b,
                   C, mask, base, top, n, w0, nw, s, r, g, o, prev_plo, prev_phi, inc0, since, P,
                   steps, lut, nf_hi=-(1 << 62)):
    """:func:`paned_emit` with select lanes (min, max, first, last); resets the leaving panes.

    Sum-type lanes (``ilanes``/``flanes``, lane 0 = row count) move
    differentially as in :func:`paned_emit` (004 Eq. 6.2). Select lanes --
    ``n_si`` int64 lanes ``sil`` then ``n_sf`` float64 lanes ``sfl``; select
    lane ``q`` (ints first) has op ``ops[q]`` (0 min, 1 max, 2 first, 3 last),
    identity ``idi[q]`` / ``idf[q - n_si]`` and, for first/last, the time lane
    ``stl[q]`` with identity ``tid[q]`` -- are answered by prefix/suffix blocks
    (van Herk / Gil-Werman) over blocks of ``P`` panes aligned to pane ids
    (block ``b`` = panes ``[bP, (b+1)P)``): window ``[plo, plo + P)`` is
    ``suf[plo]`` when ``plo`` starts a block, else ``suf[plo] (+) pre[plo+P-1]``.

    The block state persists across calls (arrays ``(lanes, P x C2)`` indexed
    by a pane's offset in its block, one block each): ``pre`` holds the
    prefixes of the block of pane ``pre_hi - 1`` up to ``pre_hi``, ``suf`` the
    suffixes of block ``suf_b``. A pane is folded into ``pre`` once, when the
    first window holding it is emitted (it is closed then: later tuples of
    it are late), and into ``suf`` once, when the first window starting in
    its block is emitted (the whole block is closed then). So every pane costs
    two O(codes) folds over the whole stream, not two per punctuation over
    the ``nw + P - 1`` panes of its span. The caller passes ``pre_hi`` and
    ``suf_b`` as very small numbers to start afresh (the ring's panes from
    ``plo(w0)`` up are all it reads then).

    Per window, sequential lane-by-lane passes over the codes (each a tight,
    vectorizable loop): the sums step, the branch-free compaction of the live
    codes with their output rows, each select lane's answer at those cells,
    and the reset of the leaving panes in every lane. Every pane below
    ``plo`` of the last window ends reset (the first window resets ``[base,
    plo)``), so the caller moves the ring's base there.

    Returns (codes (or ``lut[code]``), window_start, window_end, int sum
    lanes (n_i x m), float sum lanes (n_f x m), int select values
    (n_si x m), float select values (n_sf x m), select times (lanes x m; rows
    of min/max lanes unset), since, live cells reset, pre_hi, suf_b).
    Cost: O(windows x codes x lanes) sequential + two O(codes) folds per pane.
    """
    cap = nw * n
    nsel = n_si + n_sf
    keys = lut.shape[0] > 0
    codes = np.empty(cap, np.int64)
    start = np.empty(cap, np.int64)
    end = np.empty(cap, np.int64)
    iv = np.empty((n_i, cap), np.int64)
    fv = np.empty((max(n_f, 1), cap), np.float64)
    svi = np.empty((max(n_si, 1), cap), np.int64)
    svf = np.empty((max(n_sf, 1), cap), np.float64)
    has_t = False
    for q in range(nsel):
        has_t = has_t or ops[q] >= 2
    sto = np.empty((nsel, cap if has_t else 0), np.int64)
    m = np.int64(0)  # not the literal 0: _answer (a callee) would compile for it too
    dead = 0
    p_lo, p_hi = prev_plo, prev_phi
    # count + one min/max lane: windows of one pane in / one out go through one fused pass
    one_sel = n_i == 1 and n_f == 0 and nsel == 1 and ops[0] < 2
    for k in range(nw):
        w = w0 + k
        e = (w + 1) * s
        plo = (e - r) // g
        phi = e // g
        bs = (plo // P) * P  # block of plo (suffixes) and of phi - 1 (prefixes)
        bh = ((phi - 1) // P) * P
        if pre_hi < bh:
            pre_hi = bh
        rlo = base if k == 0 else max(p_lo, base)  # panes to reset: [rlo, rhi)
        rhi = min(plo, top)
        # -- sum-type lanes: differential step (004 Eq. 6.2) or recompute after ``steps``
        ra = -1
        rd = -1
        fused = False
        if (inc0 or k > 0) and since < steps and p_lo > nf_hi:
            a_lo, a_hi = max(p_hi, base), min(phi, top)
            d_lo, d_hi = max(p_lo, base), min(plo, top)
            # count + one min/max lane, one pane entering (phi - 1, the next prefix) and one
            # leaving (all there is to reset): one pass (_fused_minmax_step) does it all
            fused = (one_sel and a_hi - a_lo == 1 and d_hi - d_lo == 1 and a_lo == phi - 1
                     and pre_hi == phi - 1 and rhi - rlo == 1 and d_lo == rlo)
            if fused:
                ra, rd = (a_lo & mask) * C, (d_lo & mask) * C
            else:
                _step_sums(irun, ilanes, n_i, frun, flanes, n_f, a_lo, a_hi, d_lo, d_hi, mask, C,
                           n)
            since += 1
        else:
            _recompute(irun, ilanes, n_i, frun, flanes, n_f, max(plo, base), min(phi, top),
                       mask, C, n)
            since = 0
        # -- select blocks: prefixes up to phi - 1, suffixes of plo's block (closed panes only)
        for j in range(pre_hi, phi - 1 if fused else phi):
            off = j - (j // P) * P
            live = base <= j and j < top
            rr = (j & mask) * C
            src = (off - 1) * C2 if off > 0 else -1
            for q in range(n_si):
                _fold(sil[q], stl[q], ops[q], idi[q], tid[q], prei[q], pret[q], off * C2, src,
                      live, rr, n)
            for q in range(n_sf):
                x = n_si + q
                _fold(sfl[q], stl[x], ops[x], idf[q], tid[x], pref[q], pret[x], off * C2, src,
                      live, rr, n)
        pre_hi = max(pre_hi, phi)
        if suf_b != plo // P:
            suf_b = plo // P
            for j in range(bs + P - 1, plo - 1, -1):
                off = j - bs
                live = base <= j and j < top
                rr = (j & mask) * C
                src = (off + 1) * C2 if off < P - 1 else -1
                for q in range(n_si):
                    _fold(sil[q], stl[q], ops[q], idi[q], tid[q], sufi[q], suft[q], off * C2,
                          src, live, rr, n)
                for q in range(n_sf):
                    x = n_si + q
                    _fold(sfl[q], stl[x], ops[x], idf[q], tid[x], suff[q], suft[x], off * C2,
                          src, live, rr, n)
        sa = (plo - bs) * C2  # suffix row of plo
        pb = (phi - 1 - bh) * C2  # prefix row of phi - 1
        two = plo != bs  # the window straddles two blocks
        we = o + e
        if fused:
            m0 = m
            off = phi - 1 - bh
            pprev = (off - 1) * C2 if off > 0 else -1
            if n_si:
                m, dd = _fused_minmax_step(ilanes[0], irun[0], sil[0], ops[0] == 1, idi[0],
                                           prei[0], off * C2, pprev, sufi[0], sa, two, ra, rd,
                                           n, lut, codes, iv[0], svi[0], m)
            else:
                m, dd = _fused_minmax_step(ilanes[0], irun[0], sfl[0], ops[0] == 1, idf[0],
                                           pref[0], off * C2, pprev, suff[0], sa, two, ra, rd,
                                           n, lut, codes, iv[0], svf[0], m)
            dead += dd
            _fill(start, m0, m, we - r)
            _fill(end, m0, m, we)
            p_lo, p_hi = plo, phi
            continue
        # -- output: branch-free compaction of the live codes, then one pass per lane
        m0 = m
        cnt = irun[0]
        for c in range(n):
            codes[m] = c
            m += cnt[c] > 0
        _fill(start, m0, m, we - r)
        _fill(end, m0, m, we)
        for q in range(n_i):
            _gather(iv[q], irun[q], codes, m0, m)
        for q in range(n_f):
            _gather(fv[q], frun[q], codes, m0, m)
        for q in range(n_si):
            _answer(svi[q], sto[q], ops[q], sufi[q], suft[q], prei[q], pret[q], sa, pb, two,
                    codes, m0, m)
        for q in range(n_sf):
            x = n_si + q
            _answer(svf[q], sto[x], ops[x], suff[q], suft[x], pref[q], pret[x], sa, pb, two,
                    codes, m0, m)
        if keys:
            for t in range(m0, m):
                codes[t] = lut[codes[t]]
        # -- reset the panes below plo (the first window: everything below it)
        for p in range(rlo, rhi):
            rr = (p & mask) * C
            dead += _nonzero(ilanes[0], rr, n)
            for q in range(n_i):
                _fill(ilanes[q], rr, rr + n, 0)
            for q in range(n_f):
                _fill(flanes[q], rr, rr + n, 0.0)
            for q in range(n_si):
                _fill(sil[q], rr, rr + n, idi[q])
                if ops[q] >= 2:
                    _fill(stl[q], rr, rr + n, tid[q])
            for q in range(n_sf):
                _fill(sfl[q], rr, rr + n, idf[q])
                if ops[n_si + q] >= 2:
                    _fill(stl[n_si + q], rr, rr + n, tid[n_si + q])
        p_lo, p_hi = plo, phi
    mt = m if has_t else 0
    return (codes[:m], start[:m], end[:m], iv[:, :m], fv[:, :m], svi[:, :m], svf[:, :m],
            sto[:, :mt], since, dead, pre_hi, suf_b)


def paned_emit_sel_ref(cells: dict[tuple[int, int], tuple], ops: Sequence[str], w0: int, nw: int,
                       s: int, r: int, g: int, o: int) -> list[tuple]:
    """Reference of :func:`paned_emit_sel`: each window folded from its panes, cell by cell.

    ``cells[(pane, code)] = (rows, [sum-type lane values], [select partials])``;
    a select partial is the value (min/max), a ``(time, value)`` pair
    (first/last), or None (no non-null value in that cell). Returns
    ``(code, window_start, window_end, rows, sums, partials)`` for every window
    ``w0 .. w0 + nw - 1`` and code with rows > 0, ordered by (window, code);
    a partial is None when every pane of the window lacks it.
    """
    out: list[tuple] = []
    for w in range(w0, w0 + nw):
        e = (w + 1) * s
        plo, phi = (e - r) // g, e // g
        acc: dict[int, list] = {}
        for (p, c), (rows, sums, sels) in cells.items():
            if not plo <= p < phi:
                continue
            cur = acc.setdefault(c, [0, [0] * len(sums), [None] * len(ops)])
            cur[0] += rows
            for q, v in enumerate(sums):
                cur[1][q] += v
            for q, x in enumerate(sels):
                if x is None:
                    continue
                y = cur[2][q]
                if y is None:
                    cur[2][q] = x
                elif ops[q] in ("min", "first"):
                    cur[2][q] = min(y, x)
                else:
                    cur[2][q] = max(y, x)
        for c in sorted(acc):
            if acc[c][0] > 0:
                out.append((c, o + e - r, o + e, acc[c][0], acc[c][1], acc[c][2]))
    return out


# ---- holistic quantiles (median, quantile): every window of a punctuation in one call -------
@nb.njit(cache=True, inline="always")
def merge_buffers(plo, phi):
    """(cur, end, pos, seg): cursor and run arrays for the widest window ``phi - plo``."""
    maxp = 0
    for k in range(plo.shape[0]):
        maxp = max(maxp, phi[k] - plo[k])
    return (np.empty(maxp, np.int64), np.empty(maxp, np.int64), np.empty(maxp, np.int64),
            np.empty(maxp, np.int64))


@nb.njit(cache=True, inline="always")
def pane_cursors(offs, pa0, lo, P, cur, end):
    """Point ``cur[j]``/``end[j]`` at the rows of pane ``lo + j`` (``j < P``) of a Multiset
    table whose pane ``p`` is ``offs[p - pa0]:offs[p - pa0 + 1]`` (outside the span: empty)."""
    npane = offs.shape[0] - 1
    for j in range(P):
        p = lo + j - pa0
        if 0 <= p < npane:
            cur[j] = offs[p]
            end[j] = offs[p + 1]
        else:
            cur[j] = 0
            end[j] = 0


@nb.njit(cache=True, inline="always")
def cell_runs(code, count, c, P, cur, end, pos, seg):
    """Advance the ``P`` pane cursors (codes ascending) to code ``c``; its value run in each
    pane that holds it goes to ``[pos[i], seg[i])``. Returns (runs, total count of c)."""
    n = 0
    na = 0
    for j in range(P):
        x = cur[j]
        while x < end[j] and code[x] < c:
            x += 1
        y = x
        while y < end[j] and code[y] == c:
            n += count[y]
            y += 1
        cur[j] = y
        if y > x:
            pos[na] = x
            seg[na] = y
            na += 1
    return na, n


@nb.njit(cache=True, inline="always")
def smallest_run(value, pos, na):
    """The run whose next value is the smallest (NaN last) and that value: the merge walk."""
    b = 0
    vb = value[pos[0]]
    for j in range(1, na):
        vj = value[pos[j]]
        if vj < vb or (vb != vb and vj == vj):  # NaN last
            b = j
            vb = vj
    return b, vb


@nb.njit(cache=True, nogil=True)
def paned_quantiles(code, value, count, pa0, offs, plo, phi, cb, cells, q):
    """q-quantile of every cell ``(window k, cells[cb[k]:cb[k+1]])`` from the pane tables.

    ``code``/``value``/``count``: a :class:`~oop.window.multiset.Multiset` table
    sorted by (unit, code, value); the rows of pane ``p`` are
    ``offs[p - pa0]:offs[p - pa0 + 1]`` (panes outside the span are empty).
    Window ``k`` is panes ``[plo[k], phi[k])``; its cells' codes ascend.
    Per window, one cursor per pane walks its (code-sorted) rows as the codes
    ascend -- O(rows of the window) to find every cell's P value runs -- and
    the ranks ``floor(q (n-1))`` and the next one are found by a P-way merge
    walk over the runs that stops there (no merged table is built). Same
    formula as :func:`~oop.window.multiset.quantiles_from_counts` (linear
    interpolation; NaN sorts last). Returns (values, present) per cell;
    ``present`` is 0 where the cell has no value (all null).
    Cost: O(window rows + cells x P x merge steps) per window, one call per
    punctuation instead of a Python step and log2(P) merge rounds per window.
    """
    m = cells.shape[0]
    out = np.zeros(m, np.float64)
    present = np.zeros(m, np.uint8)
    cur, end, pos, seg = merge_buffers(plo, phi)
    for k in range(plo.shape[0]):
        P = phi[k] - plo[k]
        pane_cursors(offs, pa0, plo[k], P, cur, end)
        for t in range(cb[k], cb[k + 1]):
            # the panes holding code cells[t]: runs [pos, seg) of the merge walk
            na, n = cell_runs(code, count, cells[t], P, cur, end, pos, seg)
            if n == 0:
                continue
            r = q * (n - 1)
            lo_r = np.int64(np.floor(r))
            frac = r - lo_r
            hi_r = min(lo_r + 1, n - 1)
            cum = 0
            lo_v = 0.0
            hi_v = 0.0
            found_lo = False
            while True:  # merge walk over the live runs up to rank hi_r
                b, vb = smallest_run(value, pos, na)
                cum += count[pos[b]]
                pos[b] += 1
                if not found_lo and cum > lo_r:
                    lo_v = vb
                    found_lo = True
                if cum > hi_r:
                    hi_v = vb
                    break
                if pos[b] == seg[b]:  # run exhausted: drop it
                    na -= 1
                    pos[b] = pos[na]
                    seg[b] = seg[na]
            out[t] = lo_v if frac == 0 else lo_v + (hi_v - lo_v) * frac  # NaN-safe order stat
            present[t] = 1
    return out, present


def paned_quantiles_ref(rows: Sequence[tuple], windows: Sequence[tuple[int, int, Sequence[int]]],
                        q: float) -> list:
    """Reference of :func:`paned_quantiles`: rows ``(unit, code, value, count)``; per window
    ``(plo, phi, codes)`` each cell's values expanded by count, sorted (NaN last), and the
    interpolated q-quantile; None for a cell without values."""
    out: list = []
    for plo, phi, codes in windows:
        for c in codes:
            vals: list = []
            for u, cc, v, n in rows:
                if plo <= u < phi and cc == c:
                    vals += [v] * int(n)
            if not vals:
                out.append(None)
                continue
            vals.sort(key=lambda x: (x != x, x))
            pos = q * (len(vals) - 1)
            lo = math.floor(pos)
            hi = min(lo + 1, len(vals) - 1)
            # an exact order statistic is that value (NaN neighbours do not leak into it)
            out.append(vals[lo] if pos == lo else vals[lo] + (vals[hi] - vals[lo]) * (pos - lo))
    return out


# ---- holistic count-distinct and heavy hitters: every window of a punctuation, differentially --
#
# The running state of the window whose panes were [a0, a1): an open-addressing table
# (code, value) -> multiplicity (``tc``/``tv``/``tm``, ``used`` slots taken) and
# ``dcount[code]``, the number of the code's values with multiplicity > 0. Slots whose
# multiplicity fell to 0 stay (probe chains stay valid) until a rehash drops them.
_D_EMPTY = np.int64(-1)  # free slot of the (code, value) table (codes are >= 0)


@nb.njit(cache=True, inline="always")
def _d_slot(tc, tv, c, v, mask):
    """Slot of ``(c, v)`` in the open-addressing table, or the free slot where it would go."""
    h = mix64(np.uint64(c) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(v)) & mask
    while tc[h] != _D_EMPTY and (tc[h] != c or tv[h] != v):
        h = (h + np.uint64(1)) & mask
    return h


@nb.njit(cache=True, nogil=True)
def _d_rehash(tc, tv, tm, need):
    """A table of power-of-two size >= 4 x (live entries + ``need``) holding only the live
    (multiplicity > 0) entries.

    A compiled function of its own, not inlined: the cold path of :func:`_d_fold` (once per
    doubling), so :func:`_d_move` does not compile a second copy of the probe loop."""
    live = 0
    for h in range(tc.shape[0]):
        live += tc[h] != _D_EMPTY and tm[h] > 0
    size = 16
    while size < 4 * (live + need):
        size *= 2
    nc = np.full(size, _D_EMPTY, np.int64)
    nv = np.zeros(size, np.int64)
    nm = np.zeros(size, np.int64)
    mask = np.uint64(size - 1)
    for h in range(tc.shape[0]):
        if tc[h] != _D_EMPTY and tm[h] > 0:
            q = _d_slot(nc, nv, tc[h], tv[h], mask)
            nc[q] = tc[h]
            nv[q] = tv[h]
            nm[q] = tm[h]
    return nc, nv, nm, live


@nb.njit(cache=True, inline="always")
def _d_fold(code, value, count, a, b, sign, tc, tv, tm, used, dcount):
    """Add (``sign`` 1) or remove (-1) the pane-table rows ``[a, b)`` to the running state.
    Returns the (maybe regrown) table and its used slots."""
    if sign > 0 and 2 * (used + b - a) > tc.shape[0]:
        tc, tv, tm, used = _d_rehash(tc, tv, tm, b - a)
    mask = np.uint64(tc.shape[0] - 1)
    for x in range(a, b):
        c = code[x]
        v = value[x]
        h = _d_slot(tc, tv, c, v, mask)
        if tc[h] == _D_EMPTY:
            if sign < 0:
                continue  # removing what was never added: cannot happen (the caller's contract)
            tc[h] = c
            tv[h] = v
            tm[h] = 0
            used += 1
        before = tm[h]
        tm[h] = before + sign * count[x]
        if before == 0 and tm[h] > 0:
            dcount[c] += 1
        elif before > 0 and tm[h] <= 0:
            dcount[c] -= 1
    return tc, tv, tm, used


@nb.njit(cache=True, nogil=True)
def _d_move(code, value, count, pa0, offs, a0, a1, b0, b1, tc, tv, tm, used, dcount):
    """Move the state from the window of panes ``[a0, a1)`` to ``[b0, b1)`` (``b0 >= a0``,
    ``b1 >= a1``): remove the leaving panes ``[a0, min(b0, a1))``, add the entering ones
    ``[max(a1, b0), b1)``; pane ``p``'s rows are ``offs[p - pa0]:offs[p - pa0 + 1]``."""
    npane = offs.shape[0] - 1
    # one call site of the inlined _d_fold (two would compile its body twice): pass 0 removes
    # the leaving panes, pass 1 adds the entering ones
    for j in range(2):
        lo, hi, sign = (a0, min(b0, a1), np.int64(-1)) if j == 0 else (max(a1, b0), b1, np.int64(1))
        for p in range(lo, hi):
            if 0 <= p - pa0 < npane:
                tc, tv, tm, used = _d_fold(code, value, count, offs[p - pa0],
                                           offs[p - pa0 + 1], sign, tc, tv, tm, used, dcount)
    return tc, tv, tm, used


@nb.njit(cache=True, nogil=True)
def paned_distinct(code, value, count, pa0, offs, plo, phi, prev_lo, prev_hi, cont,
                   tc, tv, tm, used, dcount, cb, cells):
    """Exact count-distinct of every cell ``(window k, cells[cb[k]:cb[k+1]])``, differentially.

    ``code``/``value``/``count``: a :class:`~oop.window.multiset.Multiset` table
    of value codes sorted by (unit, code, value); pane ``p``'s rows are
    ``offs[p - pa0]:offs[p - pa0 + 1]`` (panes outside the span are empty).
    The running state (see above) is that of the window whose panes were
    ``[prev_lo, prev_hi)`` when ``cont``; without it the first window starts
    from an empty state. Window ``k`` = panes ``[plo[k], phi[k])`` (ascending
    windows) moves it by removing the leaving panes and adding the entering
    ones (the counting form of 004 Eq. 6.2: a value leaves the distinct set
    only when its last copy does). Cost: O(rows of the entering and leaving
    panes) per window, expected O(1) per row, instead of merging all ``P``
    panes of every window. Returns (distinct count per cell, tc, tv, tm, used).
    """
    out = np.zeros(cells.shape[0], np.int64)
    a0, a1 = prev_lo, prev_hi
    if not cont:
        _fill(tc, 0, tc.shape[0], _D_EMPTY)
        used = 0
        _fill(dcount, 0, dcount.shape[0], 0)
        a0, a1 = plo[0], plo[0]  # empty window: every pane of window 0 enters
    for k in range(plo.shape[0]):
        tc, tv, tm, used = _d_move(code, value, count, pa0, offs, a0, a1, plo[k], phi[k],
                                   tc, tv, tm, used, dcount)
        for t in range(cb[k], cb[k + 1]):
            out[t] = dcount[cells[t]]
        a0, a1 = plo[k], phi[k]
    return out, tc, tv, tm, used


@nb.njit(cache=True, inline="always")
def _top_insert(bv, bn, base, nb_, topk, v, n, rank):
    """Offer (value ``v``, count ``n``) to the best-first buffer ``bv/bn[base : base + topk]``
    holding ``nb_`` entries (larger count first, then smaller ``rank``); returns the new size."""
    j = nb_ if nb_ < topk else topk - 1
    if nb_ == topk and not (n > bn[base + j] or (n == bn[base + j] and rank[v] < rank[bv[base + j]])):
        return nb_  # not better than the worst of a full buffer
    while j > 0 and (n > bn[base + j - 1]
                     or (n == bn[base + j - 1] and rank[v] < rank[bv[base + j - 1]])):
        bv[base + j] = bv[base + j - 1]
        bn[base + j] = bn[base + j - 1]
        j -= 1
    bv[base + j] = v
    bn[base + j] = n
    return nb_ + 1 if nb_ < topk else nb_


@nb.njit(cache=True, nogil=True)
def paned_heavy(code, value, count, pa0, offs, plo, phi, prev_lo, prev_hi, cont,
                tc, tv, tm, used, dcount, rank, topk, cb, cells):
    """Heavy hitters (004 §6.2.4) of every cell: its ``topk`` most frequent values.

    The same running state and window steps as :func:`paned_distinct`; after
    window ``k``'s step one sequential sweep over the table offers every live
    ``(code, value, multiplicity)`` to its code's best-first buffer of
    ``topk`` (multiplicity desc, then ``rank[value]`` asc -- the order of the
    values themselves, so ties do not depend on arrival), and each cell copies
    its code's buffer out. Cost per window: the step plus O(table slots +
    live entries x topk). Returns (offsets per cell (``len(cells) + 1``),
    value codes, counts, tc, tv, tm, used); cell ``t``'s hitters are
    ``[offsets[t], offsets[t + 1])``, most frequent first.
    """
    m = cells.shape[0]
    nc = dcount.shape[0]
    off = np.zeros(m + 1, np.int64)
    ov = np.empty(m * topk, np.int64)
    on = np.empty(m * topk, np.int64)
    bv = np.empty(nc * topk, np.int64)
    bn = np.empty(nc * topk, np.int64)
    fill = np.zeros(nc, np.int64)
    a0, a1 = prev_lo, prev_hi
    if not cont:
        _fill(tc, 0, tc.shape[0], _D_EMPTY)
        used = 0
        _fill(dcount, 0, dcount.shape[0], 0)
        a0, a1 = plo[0], plo[0]
    w = 0
    for k in range(plo.shape[0]):
        tc, tv, tm, used = _d_move(code, value, count, pa0, offs, a0, a1, plo[k], phi[k],
                                   tc, tv, tm, used, dcount)
        a0, a1 = plo[k], phi[k]
        _fill(fill, 0, nc, 0)
        for h in range(tc.shape[0]):
            c = tc[h]
            if c != _D_EMPTY and tm[h] > 0:
                fill[c] = _top_insert(bv, bn, c * topk, fill[c], topk, tv[h], tm[h], rank)
        for t in range(cb[k], cb[k + 1]):
            c = cells[t]
            for q in range(fill[c]):
                ov[w] = bv[c * topk + q]
                on[w] = bn[c * topk + q]
                w += 1
            off[t + 1] = w
    return off, ov[:w], on[:w], tc, tv, tm, used


def paned_distinct_ref(rows: Sequence[tuple], windows: Sequence[tuple[int, int, Sequence[int]]]
                       ) -> list[int]:
    """Reference of :func:`paned_distinct`: rows ``(unit, code, value, count)``; per window
    ``(plo, phi, codes)`` the number of different values of each code in the window's panes,
    from scratch."""
    out: list[int] = []
    for plo, phi, codes in windows:
        for c in codes:
            out.append(len({v for u, cc, v, n in rows if plo <= u < phi and cc == c and n > 0}))
    return out


def paned_heavy_ref(rows: Sequence[tuple], windows: Sequence[tuple[int, int, Sequence[int]]],
                    rank: Sequence[int], k: int) -> list[list[tuple[int, int]]]:
    """Reference of :func:`paned_heavy`: per cell, from scratch, the ``k`` (value, count)
    pairs with the largest counts over the window's panes, ties by ``rank[value]``."""
    out: list[list[tuple[int, int]]] = []
    for plo, phi, codes in windows:
        for c in codes:
            cnt: dict[int, int] = {}
            for u, cc, v, n in rows:
                if plo <= u < phi and cc == c:
                    cnt[v] = cnt.get(v, 0) + int(n)
            top = sorted((x for x in cnt.items() if x[1] > 0), key=lambda x: (-x[1], rank[x[0]]))
            out.append(top[:k])
    return out
