"""Pieces of oop.spark that need no JVM: re-chunking, IPC round trip, the in-task Meld of
producers (Side), the partition reader, the Spark-free parts of verify.

Marked ``spark`` (they live with the Spark layer) but start no SparkSession.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oop.spark import arrowio
from oop.spark.meld import Side
from oop.spark.physical import Emitter, PartitionReader
from oop.spark.verify import compare_windows

pytestmark = pytest.mark.spark

USER = pa.schema([("ts", pa.int64()), ("v", pa.int64())])
PHYS = pa.schema([("ts", pa.int64()), ("v", pa.int64()), ("__k", pa.int32()),
                  ("__src", pa.int32()), ("__seq", pa.int64()), ("__p", pa.int64()),
                  ("__shard", pa.int32())])


@settings(max_examples=60)
@given(st.lists(st.integers(0, 40), min_size=0, max_size=12), st.integers(1, 50))
def test_rechunk_exact_sizes_and_content(sizes, size) -> None:  # type: ignore[no-untyped-def]
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch({"x": np.arange(start, start + n)}))
        start += n
    out = list(arrowio.rechunk(iter(batches), size))
    assert all(b.num_rows == size for b in out[:-1])
    assert not out or 0 < out[-1].num_rows <= size
    got = np.concatenate([b.column("x").to_numpy() for b in out]) if out else np.empty(0)
    assert got.tolist() == list(range(start))
    for b in out[:2]:
        assert arrowio.loads(arrowio.dumps(b)).equals(b)


@settings(max_examples=60)
@given(st.data())
def test_side_melds_producers_with_min(d) -> None:  # type: ignore[no-untyped-def]
    """Interleaved producers with valid punctuation: the melded feed keeps every row, its
    punctuation never decreases, and never exceeds any producer's latest bound (Meld rule)."""
    n_prod = d.draw(st.integers(1, 4))
    ems = [Emitter(PHYS, USER, src) for src in range(n_prod)]
    stream: list[pa.RecordBatch] = []
    latest = [None] * n_prod
    expected_rows = 0
    bound = [0] * n_prod
    for _ in range(d.draw(st.integers(1, 25))):
        j = d.draw(st.integers(0, n_prod - 1))
        if d.draw(st.booleans()):
            n = d.draw(st.integers(1, 5))
            ts = np.array([bound[j] + d.draw(st.integers(0, 20)) for _ in range(n)], np.int64)
            stream.append(ems[j].data(pa.record_batch({"ts": ts, "v": ts}), 0))
            expected_rows += n
        else:
            bound[j] += d.draw(st.integers(0, 10))
            stream.append(ems[j].punct(bound[j], 0))
            latest[j] = bound[j]
    if d.draw(st.booleans()):
        stream.append(ems[0].stats(7, 2, 0))
    side = Side(n_prod, USER)
    cut = d.draw(st.integers(1, 4))  # chunking of the physical rows
    rows = pa.Table.from_batches(stream).combine_chunks().to_batches()[0] if stream else None
    emitted: list[int] = []
    got_rows = 0
    if rows is not None:
        for i in range(0, rows.num_rows, cut):
            side.absorb(rows.slice(i, cut))
            while side.queue:
                b, v = side.queue.popleft()
                got_rows += b.num_rows
                if v is not None:
                    emitted.append(v)
    assert got_rows == expected_rows
    assert emitted == sorted(set(emitted))  # never backwards, never a duplicate
    if any(x is None for x in latest):  # a producer that never promised holds the min at -inf
        assert emitted == []
    else:  # the melded bound ends at the min of the producers' last promises, never above
        assert emitted and emitted[-1] == min(latest)
    assert side.tuples_in in (0, 7) and side.late in (0, 2)


def test_partition_reader_hands_out_shard_runs() -> None:
    em = Emitter(PHYS, USER, 0)
    parts = [em.data(pa.record_batch({"ts": [1, 2], "v": [1, 2]}), 0),
             em.data(pa.record_batch({"ts": [3], "v": [3]}), 1),
             em.data(pa.record_batch({"ts": [4, 5], "v": [4, 5]}), 1)]
    t = pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
    r = PartitionReader(iter([t.slice(0, 3), t.slice(3)]))
    assert r.peek_shard() == 0
    assert r.chunk(0).column("ts").to_pylist() == [1, 2]
    assert r.chunk(0) is None and r.peek_shard() == 1
    assert r.chunk(1).column("ts").to_pylist() == [3]
    assert r.chunk(1).column("ts").to_pylist() == [4, 5]
    assert r.chunk(1) is None and r.peek_shard() is None


def test_compare_windows_counts_each_case() -> None:
    truth = pa.table({"k": [1, 1, 2, 3], "window_start": [0, 10, 0, 0],
                      "window_end": [10, 20, 10, 10], "count": [5, 6, 7, 8]})
    eng = pa.table({"k": [1, 1, 2, 4], "window_start": [0, 10, 0, 0],
                    "window_end": [10, 20, 10, 10], "count": [5, 6, 9, 1]})
    rep = compare_windows(eng, truth, by=["k"], values=["count"], late=3)
    assert rep.as_dict() == {"windows": 4, "matched": 2, "mismatched": 1, "missing": 1,
                             "extra": 1, "late": 3}
    assert not rep.ok and rep.accuracy == 0.5
    assert compare_windows(truth, truth, by=["k"], values=["count"]).ok


def test_last_revisions_keeps_each_windows_last_row_in_emission_order() -> None:
    from oop.spark.verify import last_revisions

    t = pa.table({"k": [1, 2, 1, 1, 2], "window_start": [0, 0, 0, 10, 0],
                  "window_end": [10, 10, 10, 20, 10], "count": [3, 1, 4, 2, 5],
                  "is_revision": [False, False, True, False, True]})
    got = last_revisions(t, ["k"]).to_pylist()
    assert [(r["k"], r["window_start"], r["count"]) for r in got] == [(1, 0, 4), (1, 10, 2),
                                                                      (2, 0, 5)]
    assert last_revisions(t.slice(0, 0), ["k"]).num_rows == 0
