"""Window kinds: wids() is the exact inverse of extent() (boundaries included), windows(), validation.

Timeline of Sliding(range=10, slide=5, origin=0), ids on the left (004 Eq. 5.2):

    w=-1  [-10, 0)   |=========|
    w= 0  [ -5, 5)        |=========|
    w= 1  [  0,10)             |=========|
    t:          -5    0    5    10
    t=5 is in w=1 and w=2 (not w=0: extents are half-open) -> wids(5) = [1, 3).
    The printed ceil form of Eq. 5.3 gives w=1..2 for t=3 as well, but t=3 is in w=0.
"""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oop.errors import ConfigError
from oop.window import Landmark, PartitionedRows, RowSliding, SlideByTuple, Sliding, Tumbling
from oop.window.kinds import OPEN_END


def test_boundary_example_from_the_timeline():
    k = Sliding(10, 5)
    lo, hi = k.wids(np.array([5, 3, 0, -1]))
    assert lo.tolist() == [1, 0, 0, -1] and hi.tolist() == [3, 2, 2, 1]
    assert k.extent(0) == (-5, 5) and k.extent(1) == (0, 10)


def test_spark_alignment_when_range_is_not_a_multiple_of_slide():
    """Spark's window(ts, '10 seconds', '3 seconds'): windows [3k s, 3k s + 10 s) holding t.
    (Before: windows were aligned on their ends, [-1000, 9000) for sliding:10s,3s.)"""
    k = Sliding("10s", "3s").resolve("ms")
    got = [k.extent(int(w)) for w in k.windows(np.array([5000]))]
    assert got == [(-3000, 7000), (0, 10000), (3000, 13000)]
    assert Sliding(10, 3, origin=1).extent(int(Sliding(10, 3, origin=1).wids(np.array([1]))[0][0])
                                           )[0] % 3 == 1


@given(st.integers(1, 20), st.integers(1, 20), st.integers(-20, 20),
       st.lists(st.integers(-60, 60), min_size=1, max_size=20))
def test_sliding_windows_are_sparks(r, s, o, values):
    """Every window start is origin + k*slide and the windows holding t are exactly Spark's
    {k : origin + k*slide <= t < origin + k*slide + range}."""
    r = max(r, s)
    kind = Sliding(r, s, o)
    lo, hi = kind.wids(np.array(values, np.int64))
    for t, a, b in zip(values, lo.tolist(), hi.tolist()):
        got = sorted(kind.extent(w) for w in range(a, b))
        spark = sorted((o + k * s, o + k * s + r) for k in range(-100, 100)
                       if o + k * s <= t < o + k * s + r)
        assert got == spark, (kind, t)


kinds = st.one_of(
    st.builds(lambda s, o: Tumbling(s, o), st.integers(1, 12), st.integers(-20, 20)),
    st.builds(lambda s, k, o: Sliding(s * k, s, o), st.integers(1, 6), st.integers(1, 5),
              st.integers(-20, 20)),
    st.builds(lambda r, s, o: Sliding(max(r, s), s, o), st.integers(1, 20), st.integers(1, 20),
              st.integers(-20, 20)),
    st.builds(lambda r, s: RowSliding(max(r, s), s), st.integers(1, 15), st.integers(1, 15)),
    st.builds(lambda r, s: PartitionedRows(max(r, s), s), st.integers(1, 15), st.integers(1, 15)),
)


@given(kinds, st.lists(st.integers(-60, 60), min_size=1, max_size=40))
def test_wids_is_the_exact_inverse_of_extent(kind, values):
    v = np.array(values, np.int64)
    lo, hi = kind.wids(v)
    for x, a, b in zip(values, lo.tolist(), hi.tolist()):
        assert a < b, "every value lies in at least one window"
        for w in range(a - 4, b + 4):
            s, e = kind.extent(w)
            assert (s <= x < e) == (a <= w < b), (kind, x, w, (s, e), (a, b))


@given(st.integers(1, 10), st.integers(-10, 10), st.lists(st.integers(-40, 60), min_size=1, max_size=30))
def test_landmark_wids_and_extent(slide, origin, values):
    k = Landmark(slide, origin)
    lo, hi = k.wids(np.array(values, np.int64))
    for x, a, b in zip(values, lo.tolist(), hi.tolist()):
        for w in range(0, 40):
            s, e = k.extent(w)
            inside = s <= x < e
            if x < origin:
                assert not inside and a == b == 0
            else:
                assert b == OPEN_END
                assert inside == (w >= a)


@given(st.integers(1, 15), st.lists(st.integers(-30, 30), min_size=1, max_size=30))
def test_slide_by_tuple_candidate_range_is_the_inverse_of_extent(r, values):
    k = SlideByTuple(r, 1)
    lo, hi = k.wids(np.array(values, np.int64))
    for x, a, b in zip(values, lo.tolist(), hi.tolist()):
        for w in range(-40, 50):
            s, e = k.extent(w)
            assert (s <= x < e) == (a <= w < b)


@given(kinds, st.lists(st.integers(-60, 60), min_size=0, max_size=30))
def test_windows_are_exactly_the_nonempty_windows(kind, values):
    v = np.array(values, np.int64)
    got = kind.windows(v).tolist()
    brute = [w for w in range(-200, 200)
             if any(kind.extent(w)[0] <= x < kind.extent(w)[1] for x in values)]
    assert got == brute


@given(kinds, st.integers(-100, 100))
def test_first_open(kind, bound):
    w = kind.first_open(bound)
    assert kind.extent(w - 1)[1] <= bound < kind.extent(w)[1]


def test_slide_by_tuple_windows_follow_eq_5_13():
    k = SlideByTuple(5, slide_rows=2)
    # arrival order: 10, 3, 7, 12, 9 -> the 2nd and 4th tuples define windows
    assert k.windows(np.array([10, 3, 7, 12, 9])).tolist() == [3, 12]


def test_duration_specs_resolve_with_the_stream_unit():
    assert Sliding("10s", "1s").resolve("ms").extent(0) == (-9000, 1000)
    assert Tumbling("1min", origin="30s").resolve("s").extent(0) == (30, 90)
    with pytest.raises(ConfigError, match="resolve"):
        Tumbling("1s").extent(0)


@pytest.mark.parametrize("make, msg", [
    (lambda: Sliding(5, 10), "slide can't exceed range: there would be gaps"),
    (lambda: Sliding("5s", 0), "must be positive"),
    (lambda: Tumbling(-3), "must be positive"),
    (lambda: Tumbling("5 parsecs"), "unknown unit"),
    (lambda: RowSliding(3, 4), "slide can't exceed range"),
    (lambda: RowSliding(3, 1.5), "positive number of rows"),
    (lambda: SlideByTuple(10, 0), "slide_rows must be a positive"),
    (lambda: Landmark(0), "must be positive"),
])
def test_validation_says_why(make, msg):
    with pytest.raises(ConfigError, match=msg):
        make()


def test_bucket_logic_tags_wids_and_the_first_open_window():
    import pyarrow as pa

    from oop.window.bucket import BucketLogic

    b = BucketLogic(Sliding("10s", "5s").resolve("s"))
    lo, hi = b.tag(pa.record_batch({"ts": [0, 4, 5, 12]}), np.array([0, 4, 5, 12]))
    assert lo.tolist() == [0, 0, 1, 2] and hi.tolist() == [2, 2, 3, 4]
    assert b.first_open(10) == 2  # windows 0 and 1 end by 10: the punctuation closes them
    r = BucketLogic(RowSliding(4, 2))
    lo, hi = r.tag(pa.record_batch({"ts": [9, 1, 5]}), np.array([9, 1, 5]))
    assert lo.tolist() == [0, 0, 1]  # numbered by arrival (rows 0, 1, 2), not by time
    assert r.first_open(r.rows_seen) == 1  # 3 rows seen: window 0 ([-2, 2)) is complete
