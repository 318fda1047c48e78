"""Punctuation cadence: the punctuation after a row depends on the rows before it and the
spec only, never on how the feed was chunked (batch sizes, a reader's own blocks)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.punctuation import Cadence, parse_punctuation
from oop.testing import batch_splits, disordered_tables
from oop.window import Sliding, Tumbling, agg
from oop.testing import resumed_output

SPECS = ["ordered", "bounded:3", "tuples:4", "adaptive:0.1", "bounded:2+every:5",
         "bounded:3+idle:4"]


def _run(batches: list[pa.RecordBatch], spec: str, cadence: int, kind, late: str = "side_output"):
    punct = Cadence(parse_punctuation(spec), cadence)
    s = oop.from_batches(batches, time="ts", unit="ms", punctuation=punct, late=late,
                         schema=batches[0].schema)
    return s.window(kind, [agg.count(), agg.sum("val")], by="key").run()


def _late_rows(res) -> list[tuple]:
    late = res.late.get("source")
    return [] if late is None else sorted(tuple(r.values()) for r in late.to_pylist())


@settings(max_examples=40)
@given(data=st.data(), spec=st.sampled_from(SPECS), cadence=st.integers(1, 12),
       kind=st.sampled_from([Tumbling(5), Sliding(8, 2)]))
def test_output_and_late_set_do_not_depend_on_chunking(data, spec, cadence, kind):
    table = data.draw(disordered_tables(min_rows=1, max_rows=60, max_delay=8))
    one = data.draw(batch_splits(table, max_batch=16))
    two = data.draw(batch_splits(table, max_batch=7))
    a, b = _run(one, spec, cadence, kind), _run(two, spec, cadence, kind)
    assert a.table.to_pylist() == b.table.to_pylist()  # same rows in the same order
    assert [p for _, p in a.punctuations] == [p for _, p in b.punctuations]
    assert _late_rows(a) == _late_rows(b)
    assert a.late_total == b.late_total
    m = a.metrics["source"]
    assert m.tuples_in == table.num_rows == m.tuples_out + m.late_total  # nothing lost


@settings(max_examples=25)
@given(data=st.data(), spec=st.sampled_from(SPECS), size=st.integers(1, 10))
def test_cadence_equal_to_batch_size_is_the_per_batch_rule(data, spec, size):
    """Batches of exactly ``cadence`` rows punctuate exactly as without a cadence (a final
    partial batch is not a cadence point, so the table is cut to whole batches)."""
    table = data.draw(disordered_tables(min_rows=size, max_rows=50, max_delay=8))
    table = table.slice(0, table.num_rows - table.num_rows % size)
    batches = table.to_batches(max_chunksize=size)
    per_batch = oop.from_batches(batches, time="ts", punctuation=parse_punctuation(spec),
                                 late="side_output").window(Tumbling(5), [agg.count()],
                                                            by="key").run()
    cad = _run(batches, spec, size, Tumbling(5))
    assert [p for _, p in cad.punctuations] == [p for _, p in per_batch.punctuations]
    assert _late_rows(cad) == _late_rows(per_batch)


def test_late_rows_follow_the_cadence_not_the_batch():
    """ASCII timeline, bounded:0 with a cadence of 3 rows:

        rows   10 20 30 | 5 40 1 | ...     punctuation after row 3: 30, after row 6: 40
        late             5 < 30     1 < 30
    """
    t = pa.table({"ts": [10, 20, 30, 5, 40, 1], "key": [0] * 6, "val": [1] * 6})
    for size in (1, 2, 4, 6):
        res = oop.from_batches(t.to_batches(max_chunksize=size), time="ts",
                               punctuation=Cadence(oop.BoundedDelay(0), 3),
                               late="side_output").run()
        assert _late_rows(res) == [(1, 0, 1), (5, 0, 1)]
        assert [p.value for _, p in res.punctuations] == [30, 40]


def test_resume_with_another_batch_size_counts_rows_not_batches():
    t = pa.table({"ts": list(range(0, 4000, 1)), "key": [i % 3 for i in range(4000)],
                  "val": [1] * 4000})
    punct = Cadence(oop.BoundedDelay(5), 100)
    full = oop.from_arrow(t, time="ts", punctuation=punct, batch_size=256).window(
        Tumbling(50), [agg.count()], by="key").run()
    first = oop.from_arrow(t, time="ts", punctuation=punct, batch_size=256).window(
        Tumbling(50), [agg.count()], by="key").run(stop_after_rounds=5)
    assert first.checkpoint is not None
    again = resumed_output(first, oop.from_arrow(t, time="ts", punctuation=punct, batch_size=97)
                           .window(Tumbling(50), [agg.count()], by="key")
                           .run(resume_from=first.checkpoint))
    assert again.table.to_pylist() == full.table.to_pylist()
    assert again.late_total == 0


@pytest.mark.parametrize("bad", ["bounded:1s+cadence:5s", "bounded:1s+cadence:0rows",
                                 "bounded:1s+cadence:10rows+cadence:5rows"])
def test_bad_cadence_is_one_line(bad):
    with pytest.raises(oop.errors.ConfigError, match="cadence"):
        parse_punctuation(bad)
