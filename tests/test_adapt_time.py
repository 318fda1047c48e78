"""AdaptWID on another progressing attribute (``adaptive_window(time=...)``).

Plan under test::

    S0 --\\
          JOIN (band, individual punctuation) -> derive_time(t_max = max(ts, ts_right))
    S1 --/    -> adaptive_window(kind, aggs, by=key, time = ts_right | t_max)

Result == the window oracle over the nested-loop join on that attribute
(:func:`oop.window.reference.window_oracle`) == ``window(method="wid", time=...)``, for every
switching regime (forced frequent switching, Cond. 6.9, always eager, always lazy); windows
close on the attribute's punctuation (rows come out before the end of the input) and nothing
is late.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import oop
from oop.adapt.cost import Thresholds
from oop.errors import ConfigError
from oop.join import WindowPredicate, nested_loop_join
from oop.operators.derive_time import derive_reference
from oop.stream.elements import Punctuation
from oop.testing import band_disordered_pair
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling
from oop.window.reference import canonical, window_oracle

AGGS = (agg.count(), agg.sum("val"), agg.max("val_right"))
THRESHOLDS = {"forced": Thresholds(up=1, down=1, absolute=True), "adaptive": Thresholds(),
              "eager": Thresholds(mode="eager"), "lazy": Thresholds(mode="lazy")}


def _stage(L: pa.Table, R: pa.Table, band: tuple[int, int]) -> oop.Stream:
    s0 = oop.from_arrow(L, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25, name="S0")
    s1 = oop.from_arrow(R, time="ts", punctuation=oop.BoundedDelay(20), batch_size=25, name="S1")
    j = s0.join(s1, on="key", band=band, punctuation="individual")
    return j.derive_time("t_max", "max", ["ts", "ts_right"], name="dmax")


def _joined(L: pa.Table, R: pa.Table, band: tuple[int, int]) -> pa.Table:
    bag = nested_loop_join(L, R, WindowPredicate.band(*band), [("key", "key")], "ts", "ts")
    names = ["ts", "key", "val", "ts_right", "key_right", "val_right"]
    rows = [dict(zip(names, r)) for r, m in bag.items() for _ in range(m)]
    for r, v in zip(rows, derive_reference(rows, "max", ["ts", "ts_right"])):
        r["t_max"] = v
    return pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.int64())
                                                        for c in names + ["t_max"]]))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), time=st.sampled_from(["ts_right", "t_max"]),
       kind=st.sampled_from([Tumbling(50), Sliding(100, 25), Sliding(60, 60)]),
       th=st.sampled_from(sorted(THRESHOLDS)), band=st.sampled_from([(0, 0), (5, 10), (30, 0)]))
def test_adaptive_window_on_join_times_equals_oracle(seed, time, kind, th, band):
    L, R = band_disordered_pair(seed, n=120, span=800, keys=5)
    want = window_oracle(_joined(L, R, band), kind, AGGS, by="key", time=time)
    res = _stage(L, R, band).adaptive_window(kind, AGGS, by="key", time=time,
                                             thresholds=THRESHOLDS[th]).run()
    assert canonical(res.table) == canonical(want)
    wid = _stage(L, R, band).window(kind, AGGS, by="key", method="wid", time=time).run()
    assert canonical(res.table) == canonical(wid.table)
    assert res.late_total == 0  # the derived punctuation never contradicted a row


@pytest.mark.parametrize("th", sorted(THRESHOLDS))
def test_windows_on_ts_right_close_mid_stream(th):
    """Rows with ``window_end`` <= an earlier punctuation come out before the end of input."""
    L, R = band_disordered_pair(3, n=400, span=2000, keys=4)
    res = _stage(L, R, (5, 10)).adaptive_window(Tumbling(100), AGGS, by="key", time="ts_right",
                                                thresholds=THRESHOLDS[th]).run()
    first_p = [(n, p.value) for n, p in res.punctuations
               if isinstance(p, Punctuation) and p.attr == "window_end"]
    assert first_p and first_p[0][1] < 2000
    early = max(n for n, _ in first_p[:-1]) if len(first_p) > 1 else 0
    assert early > 0, "every window waited for the end of the input"
    ends = res.table.column("window_end").to_pylist()
    bound = first_p[-2][1] if len(first_p) > 1 else None
    if bound is not None:  # windows closed by that punctuation were emitted before it
        assert sum(1 for e in ends[:first_p[-2][0]] if e <= bound) == \
            sum(1 for e in ends if e <= bound)


def test_time_must_be_a_progressing_attribute():
    L, R = band_disordered_pair(1, n=20, span=100, keys=2)
    with pytest.raises(ConfigError, match="time='val' is not a progressing attribute"):
        _stage(L, R, (0, 0)).adaptive_window(Tumbling(10), [agg.count()], by="key",
                                             time="val").run()


def test_stream_without_progressing_attribute_is_refused():
    from oop.adapt import AdaptWID
    from oop.operators.base import StreamInfo

    info = StreamInfo("plain", pa.schema([("key", pa.int64()), ("val", pa.int64())]))
    with pytest.raises(ConfigError, match="'plain' has no progressing attribute to window on"):
        AdaptWID(Tumbling(10), [agg.count()], by="key").infer_output([info])
