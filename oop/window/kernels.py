"""Compiled kernels of window aggregation, each beside its tuple-at-a-time reference.

Layout: a lane is a flat array viewed as ``(R, C)`` -- ``R`` ring rows (one
per open window or pane id, row ``unit & (R - 1)``), ``C`` code columns.
Every kernel takes, per input row ``i``, the key code ``codes[i]`` and the
half-open unit range ``[lo[i], hi[i])`` to update (one unit for tumbling
windows and panes, ``range/slide`` for sliding WID). ``valid`` is a uint8
mask of non-null values, or an empty array when every value is valid.

Cost: O(sum of (hi - lo)) per batch, random access into the lanes.
The references (``*_ref``) do the same with Python loops and dicts; tests
assert kernel == reference on random inputs.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = [
    "all_abs_below", "all_abs_below_ref", "upd_rows", "upd_nn", "upd_sum", "upd_sumsq", "upd_min", "upd_max", "upd_first",
    "upd_last", "upd_rows_sums", "upd_rows_sums1", "rank_in_partition", "distinct_codes",
    "cut_chunks",
    "update_ref", "take_rows", "take_rows_ref",
    "SELECT_OPS", "merge_counted", "merge_counted_ref",
]

#: op codes of the select lanes (:func:`~oop.window.paned_kernels.paned_emit_sel`)
SELECT_OPS = {"min": 0, "max": 1, "first": 2, "last": 3}


@nb.njit(cache=True, inline="always")
def _lt(a, b):
    """a < b with NaN greater than every number (docs/semantics.md); False for NaN, NaN."""
    return a < b or (b != b and a == a)


@nb.njit(cache=True, inline="always")
def nan_min(a, b):
    """min under the NaN rule: NaN only when both are NaN (NaN is the float identity of min)."""
    return a if (a < b or b != b) else b


@nb.njit(cache=True, inline="always")
def nan_max(a, b):
    """max under the NaN rule: NaN when either is NaN."""
    return a if (a > b or a != a) else b


@nb.njit(cache=True, nogil=True)
def all_abs_below(v, bound):
    """Whether every ``|v[i]| < bound`` (False at a NaN): one branch-free (SIMD) pass over a
    float column -- the all-finite check of :func:`~oop.window.values.note_nonfinite` on
    every batch, where numpy's ``min`` and ``max`` read the column twice. Cost: O(n)."""
    ok = True
    for i in range(v.shape[0]):
        ok &= abs(v[i]) < bound
    return ok


def all_abs_below_ref(v: "np.ndarray", bound: float) -> bool:
    """Reference of :func:`all_abs_below`, value by value."""
    return all(abs(float(x)) < bound for x in v)


@nb.njit(cache=True, nogil=True)
def upd_rows(rows, codes, lo, hi, C, mask):
    """rows[u, c] += 1 for every unit u of every row; returns the number of cells that became live."""
    new = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        for u in range(lo[i], hi[i]):
            j = (u & mask) * C + c
            if rows[j] == 0:
                new += 1
            rows[j] += 1
    return new


@nb.njit(cache=True, nogil=True)
def upd_rows_sums(rows, nacc, nn, facc, fvals, nf, codes, lo, hi, C, mask):
    """Fused pass: rows += 1, ``nn`` count lanes += 1, and ``nf`` float sums (no nulls).

    ``nacc``/``facc``/``fvals`` are tuples of arrays; ``nn``/``nf`` say how
    many entries are real (the tuples hold a dummy when empty). Returns the
    number of cells that became live.
    """
    new = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        for u in range(lo[i], hi[i]):
            j = (u & mask) * C + c
            if rows[j] == 0:
                new += 1
            rows[j] += 1
            for f in range(nn):
                nacc[f][j] += 1
            for f in range(nf):
                facc[f][j] += fvals[f][i]
    return new


@nb.njit(cache=True, nogil=True)
def upd_rows_sums1(rows, nacc, nn, facc, fvals, nf, codes, units, C, mask, bound):
    """:func:`upd_rows_sums` when every row updates exactly one unit (tumbling WID, panes).

    Returns ``(new, below)``: the number of cells that became live, and whether every folded
    float value has ``|v| < bound`` (False at a NaN) -- :func:`all_abs_below` over the ``nf``
    value arrays, fused into the pass that reads them anyway (Paned-WID's all-finite check,
    :func:`~oop.window.values.note_nonfinite`, then reads no column a second time). It keeps
    two running values that cost about one select and one add per value: ``hi``, the largest
    ``|v|`` (exact unless a NaN came by: ``a <= hi`` is false with a NaN on either side, so
    a NaN can replace ``hi`` and a later number replace the NaN), and ``z``, the values' plain
    sum, NaN iff a NaN (or ``+inf`` and ``-inf``) was folded; ``hi < bound and z == z`` is
    exactly ``all(|v| < bound)``. A flag per value (``below &= |v| < bound``) cost ~15 %
    of the pass (10k keys, 64K rows). Reference: :func:`update_ref` per lane and
    :func:`all_abs_below_ref` per value array.
    """
    new = 0
    hi = 0.0
    z = 0.0
    for i in range(codes.shape[0]):
        j = (units[i] & mask) * C + codes[i]
        new += rows[j] == 0  # branch-free: about a third of the rows open a cell
        rows[j] += 1
        for f in range(nn):
            nacc[f][j] += 1
        for f in range(nf):
            v = fvals[f][i]
            facc[f][j] += v
            a = abs(v)
            hi = hi if a <= hi else a
            z += v
    return new, hi < bound and z == z


@nb.njit(cache=True, nogil=True)
def upd_nn(acc, codes, lo, hi, C, mask, valid):
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            for u in range(lo[i], hi[i]):
                acc[(u & mask) * C + c] += 1


@nb.njit(cache=True, nogil=True)
def upd_sum(acc, codes, lo, hi, C, mask, vals, valid):
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            v = vals[i]
            for u in range(lo[i], hi[i]):
                acc[(u & mask) * C + c] += v


@nb.njit(cache=True, nogil=True)
def upd_sumsq(acc, codes, lo, hi, C, mask, vals, shift, valid):
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            d = vals[i] - shift
            d2 = d * d
            for u in range(lo[i], hi[i]):
                acc[(u & mask) * C + c] += d2


@nb.njit(cache=True, nogil=True)
def upd_min(acc, codes, lo, hi, C, mask, vals, valid):
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            v = vals[i]
            for u in range(lo[i], hi[i]):
                j = (u & mask) * C + c
                a = acc[j]
                # NaN is the greatest value (and min's float identity); a select, no branch
                acc[j] = v if (v < a) | (a != a) else a


@nb.njit(cache=True, nogil=True)
def upd_max(acc, codes, lo, hi, C, mask, vals, valid):
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            v = vals[i]
            for u in range(lo[i], hi[i]):
                j = (u & mask) * C + c
                a = acc[j]
                acc[j] = v if (v > a) | (v != v) else a  # NaN is the greatest value


@nb.njit(cache=True, nogil=True)
def upd_first(acct, accv, codes, lo, hi, C, mask, times, vals, valid):
    """Keep (time, value) with the smallest time; ties: smallest value."""
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            t = times[i]
            v = vals[i]
            for u in range(lo[i], hi[i]):
                j = (u & mask) * C + c
                if t < acct[j] or (t == acct[j] and _lt(v, accv[j])):
                    acct[j] = t
                    accv[j] = v


@nb.njit(cache=True, nogil=True)
def upd_last(acct, accv, codes, lo, hi, C, mask, times, vals, valid):
    """Keep (time, value) with the largest time; ties: largest value."""
    allv = valid.shape[0] == 0
    for i in range(codes.shape[0]):
        if allv or valid[i]:
            c = codes[i]
            t = times[i]
            v = vals[i]
            for u in range(lo[i], hi[i]):
                j = (u & mask) * C + c
                if t > acct[j] or (t == acct[j] and _lt(accv[j], v)):
                    acct[j] = t
                    accv[j] = v


@nb.njit(cache=True, nogil=True)
def rank_in_partition(codes, counters):
    """Per-partition arrival rank (004 §6.1.3, PA): rank[i] = counters[codes[i]]++ ."""
    out = np.empty(codes.shape[0], np.int64)
    for i in range(codes.shape[0]):
        c = codes[i]
        out[i] = counters[c]
        counters[c] += 1
    return out


@nb.njit(cache=True, nogil=True)
def distinct_codes(codes, seen):
    """The distinct values of ``codes`` in first-appearance order (a linear-time
    ``np.unique`` for dense codes). ``seen``: a zeroed uint8 scratch of size > max code,
    left zeroed."""
    out = np.empty(codes.shape[0], np.int64)
    k = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        if seen[c] == 0:
            seen[c] = 1
            out[k] = c
            k += 1
    for j in range(k):
        seen[out[j]] = 0
    return out[:k]


@nb.njit(cache=True, nogil=True)
def cut_chunks(codes, limit, count):
    """Chunk boundaries ``[0, ..., len(codes)]`` such that no code occurs more than ``limit``
    times in a chunk (greedy: a chunk ends before the row that would make it ``limit + 1``).
    ``count``: a zeroed int64 scratch of size > max code, left zeroed."""
    n = codes.shape[0]
    bounds = np.empty(n + 2, np.int64)
    nb_ = 1
    bounds[0] = 0
    start = 0
    for i in range(n):
        c = codes[i]
        if count[c] == limit:
            for j in range(start, i):
                count[codes[j]] = 0
            bounds[nb_] = i
            nb_ += 1
            start = i
        count[c] += 1
    for j in range(start, n):
        count[codes[j]] = 0
    bounds[nb_] = n
    return bounds[: nb_ + 1]


@nb.njit(cache=True, nogil=True)
def scan_rows(rows, C, rr, n):
    """(row index into ``rr``, code) of every non-zero cell of ring rows ``rr`` (first ``n`` codes)."""
    total = 0
    for k in range(rr.shape[0]):
        base = rr[k] * C
        for c in range(n):
            if rows[base + c] != 0:
                total += 1
    wi = np.empty(total, np.int64)
    codes = np.empty(total, np.int64)
    m = 0
    for k in range(rr.shape[0]):
        base = rr[k] * C
        for c in range(n):
            if rows[base + c] != 0:
                wi[m] = k
                codes[m] = c
                m += 1
    return wi, codes


@nb.njit(cache=True, nogil=True)
def take_rows(rows, C, rr, n, ilanes, n_i, iident, flanes, n_f, fident):
    """:func:`scan_rows` + gather every lane at the live cells + reset those cells, in one pass.

    ``ilanes``/``flanes``: tuples of int64 / float64 lanes (``n_i``/``n_f``
    real entries) with identities ``iident``/``fident``. Returns
    (row index into ``rr``, codes, rows values, int lane values (n_i x k),
    float lane values (n_f x k)); the cells are left at their identities.

    Branch-free: every cell of a taken row is written to the output at the next free
    index, which advances only past a live cell, and the whole row ``[0, n)`` is then
    reset. That is the same as resetting the live cells, because a dead cell holds its
    lanes' identities (every lane update also counts its row). About half the time of
    the branchy gather (7 rows of 10k codes, 37 % live: 152 against 293 us), whose live
    test the branch predictor could not learn. Reference: :func:`take_rows_ref`.
    """
    total = 0
    for k in range(rr.shape[0]):
        base = rr[k] * C
        for c in range(n):
            total += rows[base + c] != 0
    wi = np.empty(total + 1, np.int64)  # + 1: the dead cells after the last live one
    codes = np.empty(total + 1, np.int64)
    rv = np.empty(total + 1, np.int64)
    iv = np.empty((max(n_i, 1), total + 1), np.int64)
    fv = np.empty((max(n_f, 1), total + 1), np.float64)
    m = 0
    for k in range(rr.shape[0]):
        base = rr[k] * C
        for c in range(n):
            j = base + c
            r = rows[j]
            wi[m] = k
            codes[m] = c
            rv[m] = r
            for q in range(n_i):
                iv[q, m] = ilanes[q][j]
            for q in range(n_f):
                fv[q, m] = flanes[q][j]
            m += r != 0
        for c in range(n):
            j = base + c
            rows[j] = 0
            for q in range(n_i):
                ilanes[q][j] = iident[q]
            for q in range(n_f):
                flanes[q][j] = fident[q]
    return wi[:total], codes[:total], rv[:total], iv[:, :total], fv[:, :total]


def take_rows_ref(rows: "np.ndarray", C: int, rr: "np.ndarray", n: int, ilanes: tuple,
                  iident: "np.ndarray", flanes: tuple, fident: "np.ndarray") -> tuple:
    """Reference of :func:`take_rows` (its real lanes only), cell by cell in (row, code)
    order: the live cells' values, then those cells set back to the identities."""
    wi, codes, rv, iv, fv = [], [], [], [[] for _ in ilanes], [[] for _ in flanes]
    for k, r in enumerate(rr):
        for c in range(n):
            j = int(r) * C + c
            if rows[j] != 0:
                wi.append(k)
                codes.append(c)
                rv.append(int(rows[j]))
                rows[j] = 0
                for q, lane in enumerate(ilanes):
                    iv[q].append(int(lane[j]))
                    lane[j] = iident[q]
                for q, lane in enumerate(flanes):
                    fv[q].append(float(lane[j]))
                    lane[j] = fident[q]
    return wi, codes, rv, iv, fv


@nb.njit(cache=True, inline="always")
def _sel_better(op, t1, v1, t2, v2):
    """True when partial (t1, v1) replaces (t2, v2) under select op ``op`` (see SELECT_OPS)."""
    if op == 0:
        return _lt(v1, v2)
    if op == 1:
        return _lt(v2, v1)
    if op == 2:
        return t1 < t2 or (t1 == t2 and _lt(v1, v2))
    return t1 > t2 or (t1 == t2 and _lt(v2, v1))


@nb.njit(cache=True, nogil=True)
def minmax(a):
    """(min, max) of a non-empty int64 array in one pass."""
    lo = a[0]
    hi = a[0]
    for i in range(1, a.shape[0]):
        x = a[i]
        if x < lo:
            lo = x
        elif x > hi:
            hi = x
    return lo, hi


def update_ref(op: str, cells: dict, codes, lo, hi, vals=None, times=None, valid=None) -> dict:
    """Tuple-at-a-time reference of every ``upd_*`` kernel over a dict {(unit, code): value}.

    ``first``/``last`` cells hold ``(time, value)`` pairs.
    """
    for i in range(len(codes)):
        if op != "rows" and valid is not None and len(valid) and not valid[i]:
            continue
        for u in range(int(lo[i]), int(hi[i])):
            key = (u, int(codes[i]))
            if op in ("rows", "nn"):
                cells[key] = cells.get(key, 0) + 1
            elif op == "sum":
                cells[key] = cells.get(key, 0) + vals[i]
            elif op == "min":
                cells[key] = min(cells.get(key, vals[i]), vals[i])
            elif op == "max":
                cells[key] = max(cells.get(key, vals[i]), vals[i])
            elif op == "first":
                cur = cells.get(key)
                cand = (int(times[i]), vals[i])
                cells[key] = cand if cur is None else min(cur, cand)
            elif op == "last":
                cur = cells.get(key)
                cand = (int(times[i]), vals[i])
                cells[key] = cand if cur is None else max(cur, cand)
            else:  # pragma: no cover
                raise ValueError(op)
    return cells


def merge_counted(a1: np.ndarray, b1: np.ndarray, x1: np.ndarray, n1: np.ndarray,
                  a2: np.ndarray, b2: np.ndarray, x2: np.ndarray, n2: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge two (a, b, x)-sorted counted runs; equal keys add their counts. O(len1 + len2).

    Used by :class:`~oop.window.store.Multiset`: keys are (unit, code, value)
    when compacting, (code, code, value) when merging the panes of a window.
    Each run must hold distinct keys (NaN values are never equal: they stay
    separate rows, as after ``np.lexsort``). ``x`` is int64 (value codes) or
    float64 (values): both go to one compiled kernel, as int64 bits and their
    float64 view (no copy), so a query with both kinds compiles it once.
    """
    isf = x1.dtype.kind == "f"
    dt = np.float64 if isf else np.int64
    x1 = np.ascontiguousarray(x1, dt)
    x2 = np.ascontiguousarray(x2, dt)
    a, b, x, n = _merge_counted_bits(a1, b1, x1.view(np.int64), x1.view(np.float64), n1,
                                     a2, b2, x2.view(np.int64), x2.view(np.float64), n2, isf)
    return a, b, x.view(dt), n


@nb.njit(cache=True, nogil=True)
def _merge_counted_bits(a1, b1, x1, f1, n1, a2, b2, x2, f2, n2, isf):
    """:func:`merge_counted` over ``x`` as int64 bits ``x1``/``x2``, with their float64 views
    ``f1``/``f2``: with ``isf`` the values are floats, compared as floats (NaN after every
    number and never equal), else the int64 codes themselves."""
    m1, m2 = a1.shape[0], a2.shape[0]
    cap = m1 + m2
    a = np.empty(cap, np.int64)
    b = np.empty(cap, np.int64)
    x = np.empty(cap, np.int64)
    n = np.empty(cap, np.int64)
    i = j = k = 0
    while i < m1 and j < m2:
        if isf:
            u, v = f1[i], f2[j]
            eq_x, lt_x = u == v, u < v or (v != v and u == u)
        else:
            eq_x, lt_x = x1[i] == x2[j], x1[i] < x2[j]
        if a1[i] == a2[j] and b1[i] == b2[j] and eq_x:
            a[k], b[k], x[k], n[k] = a1[i], b1[i], x1[i], n1[i] + n2[j]
            i += 1
            j += 1
        elif (a1[i] < a2[j] if a1[i] != a2[j] else (b1[i] < b2[j] if b1[i] != b2[j] else lt_x)):
            a[k], b[k], x[k], n[k] = a1[i], b1[i], x1[i], n1[i]
            i += 1
        else:
            a[k], b[k], x[k], n[k] = a2[j], b2[j], x2[j], n2[j]
            j += 1
        k += 1
    while i < m1:
        a[k], b[k], x[k], n[k] = a1[i], b1[i], x1[i], n1[i]
        i += 1
        k += 1
    while j < m2:
        a[k], b[k], x[k], n[k] = a2[j], b2[j], x2[j], n2[j]
        j += 1
        k += 1
    return a[:k], b[:k], x[:k], n[:k]


def merge_counted_ref(rows1: list, rows2: list) -> list:
    """Reference of :func:`merge_counted` over lists of ``(a, b, x, count)``: a dict, then sorted."""
    acc: dict = {}
    for a, b, x, n in list(rows1) + list(rows2):
        acc[(a, b, x)] = acc.get((a, b, x), 0) + n
    return [(*k, v) for k, v in sorted(acc.items())]
