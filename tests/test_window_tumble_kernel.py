"""The fused tumbling update kernel (WIDs computed inside the fold, 004 §6.1) against its
slow reference, and the replay-path result against a from-scratch group-by."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from oop.window import kernels as K

_TIMES = st.lists(st.integers(-10_000, 10_000), min_size=0, max_size=200)


def _fold(fn, times, codes, vals, origin, size, R, C, nn, nf):  # type: ignore[no-untyped-def]
    rows = np.zeros(R * C, np.int64)
    nacc = tuple(np.zeros(R * C, np.int64) for _ in range(max(nn, 1)))
    facc = tuple(np.zeros(R * C, np.float64) for _ in range(max(nf, 1)))
    fvals = tuple(vals * (f + 1) for f in range(max(nf, 1)))
    new = fn(rows, nacc, nn, facc, fvals, nf, codes, times, origin, size, C, R - 1)
    return int(new), rows, nacc, facc


@settings(max_examples=150, deadline=None)
@given(ts=_TIMES, origin=st.integers(-50, 50), size=st.integers(1, 700),
       C=st.integers(1, 9), R_bits=st.integers(0, 6), nn=st.integers(0, 2),
       nf=st.integers(0, 2), seed=st.integers(0, 2**32 - 1))
def test_kernel_equals_reference(ts: list[int], origin: int, size: int, C: int, R_bits: int,
                                 nn: int, nf: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    times = np.array(ts, np.int64)
    codes = rng.integers(0, C, times.size).astype(np.int64)
    vals = rng.random(times.size)
    R = 1 << R_bits
    fast = _fold(K.upd_rows_sums_tumble, times, codes, vals, origin, size, R, C, nn, nf)
    slow = _fold(K.upd_rows_sums_tumble_reference, times, codes, vals, origin, size, R, C,
                 nn, nf)
    assert fast[0] == slow[0]
    np.testing.assert_array_equal(fast[1], slow[1])
    for a, b in zip(fast[2], slow[2]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(fast[3], slow[3]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # every row folded exactly once; the reference's units are floor((t - origin) / size)
    assert int(fast[1].sum()) == times.size
    if times.size and R > (times.max() - origin) // size - (times.min() - origin) // size:
        units = [(t - origin) // size for t in ts]
        cells = {(u & (R - 1)) * C + int(c) for u, c in zip(units, codes)}
        assert set(np.flatnonzero(fast[1]).tolist()) == cells
