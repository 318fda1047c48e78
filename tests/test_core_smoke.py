"""Scenario tests of the core: a source, Meld and the executor's accounting.

Timeline (unit s), two sources melded, bounded delay 2 / 1:

    a: [3 1] [2 6] [5]        punct a: 1, 4
    b: [3 1] [2 6] [5]        punct b: 2, 5
    meld punct = min:         1, 2, 4, 5 (no duplicates, never backwards)
"""

import pyarrow as pa
import pytest

import oop


def _t():
    return pa.table({"ts": [3, 1, 2, 6, 5], "v": [30, 10, 20, 60, 50]})


def test_meld_min_punctuation_and_accounting():
    a = oop.from_arrow(_t(), time="ts", unit="s", punctuation=oop.BoundedDelay(2), batch_size=2, name="a")
    b = oop.from_arrow(_t(), time="ts", unit="s", punctuation=oop.BoundedDelay(1), batch_size=2, name="b")
    res = a.meld(b).run()
    assert res.table.num_rows == 10
    values = [p.value for _, p in res.punctuations]
    assert values == [1, 2, 4, 5]
    assert res.tuples_in == 10 and res.late_total == 0
    # no output row after a punctuation excludes it
    ts = res.table.column("ts").to_pylist()
    for rows_before, p in res.punctuations:
        assert all(t >= p.value for t in ts[rows_before:])


def test_late_tuple_raise_names_stream_and_bound():
    t = pa.table({"ts": [10, 0], "v": [1, 2]})
    s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.Ordered(), batch_size=1,
                       late="raise", name="feed")
    with pytest.raises(oop.LateTupleError, match=r"feed.*ts=0.*ts >= 10"):
        s.run()


def test_late_tuple_side_output_keeps_every_tuple():
    t = pa.table({"ts": [10, 0, 11], "v": [1, 2, 3]})
    res = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.Ordered(), batch_size=1,
                         late="side", name="feed").run()
    assert res.table.column("v").to_pylist() == [1, 3]
    assert res.late["feed"].column("v").to_pylist() == [2]
    assert res.metrics["feed"].late == {"side_output": 1}
