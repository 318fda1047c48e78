"""Partitioned row windows (PA, 004 §6.1.3.2) cut a batch only where a partition needs it.

The ring of the PA operator holds ``range/slide + 34`` window rows per
partition, so a chunk of a batch may give one partition at most
``32 * slide`` rows. Before, every batch was cut into chunks of ``32 *
slide`` rows whatever the partitions (1M rows over 10k keys: ~320 chunks,
4.5 M rows/s); now :func:`~oop.window.kernels.cut_chunks` cuts only before
the row that would give some partition one row too many (the same 1M rows:
a few chunks per batch, ~17 M rows/s).
"""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from oop.window import PartitionedRows, agg
from oop.window.kernels import cut_chunks
from oop.window.reference import window_oracle
from test_window import assert_same_rows, run


def cut_chunks_ref(codes, limit):
    """Greedy reference: a chunk ends before the row whose code would occur limit + 1 times."""
    bounds, seen = [0], {}
    for i, c in enumerate(codes):
        if seen.get(c, 0) == limit:
            bounds.append(i)
            seen = {}
        seen[c] = seen.get(c, 0) + 1
    bounds.append(len(codes))
    return bounds


@settings(max_examples=60)
@given(st.lists(st.integers(0, 6), max_size=80), st.integers(1, 5))
def test_cut_chunks_equals_the_reference_and_keeps_the_scratch_zeroed(codes, limit):
    scratch = np.zeros(8, np.int64)
    got = cut_chunks(np.asarray(codes, np.int64), limit, scratch).tolist()
    assert got == cut_chunks_ref(codes, limit)
    assert not scratch.any()
    for a, b in zip(got[:-1], got[1:]):  # no code more than ``limit`` times in a chunk
        assert a < b or not codes
        assert not codes or max(np.bincount(codes[a:b])) <= limit


@settings(max_examples=20)
@given(n=st.integers(1, 900), keys=st.integers(1, 4), batch=st.integers(50, 1000),
       seed=st.integers(0, 2**16))
def test_batches_cut_inside_a_partition_equal_the_oracle(n, keys, batch, seed):
    """Large batches over few partitions: many cuts per batch (limit 32 x slide = 64 rows)."""
    rng = np.random.default_rng(seed)
    t = pa.table({"ts": pa.array(np.arange(n), pa.int64()),
                  "key": pa.array(rng.integers(0, keys, n), pa.int64()),
                  "val": pa.array(rng.integers(-9, 9, n), pa.int64())})
    kind, aggs = PartitionedRows(4, 2), [agg.count(), agg.sum("val"), agg.max("val")]
    res = run(t.to_batches(max_chunksize=batch), t.schema, kind, aggs)
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@settings(max_examples=40)
@given(st.lists(st.integers(0, 9), max_size=60))
def test_distinct_codes_is_unique_in_first_appearance_order(codes):
    from oop.window.kernels import distinct_codes

    seen = np.zeros(10, np.uint8)
    got = distinct_codes(np.asarray(codes, np.int64), seen).tolist()
    assert got == list(dict.fromkeys(codes)) and not seen.any()
