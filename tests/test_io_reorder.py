"""Arrival reordering: ExternalSort and BoundedReorder against a stable sort of the whole feed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop.io
from oop.errors import SourceError
from oop.io.files import FileSource
from oop.io.protocol import END, IDLE
from oop.io.reorder import BoundedReorder, ExternalSort


def drain(src, max_rows: int) -> list[pa.RecordBatch]:
    out = []
    while (b := src.poll(max_rows, 0.0)) is not END:
        assert b is not IDLE  # finite feeds only here
        out.append(b)
    return out


def table_of(batches: list[pa.RecordBatch], schema: pa.Schema | None = None) -> pa.Table:
    return pa.Table.from_batches(batches, schema=schema)


class TableFeed:
    """A finite in-memory connector over ``table`` in batches of ``chunk`` rows."""

    live, resumable = False, True

    def __init__(self, table: pa.Table, chunk: int = 7) -> None:
        self.table, self.chunk, self.row, self.name = table, chunk, 0, "table"

    def open(self):
        return self.table.schema

    def poll(self, max_rows, timeout=0.1):
        if self.row >= self.table.num_rows:
            return END
        n = min(max_rows, self.chunk, self.table.num_rows - self.row)
        b = self.table.slice(self.row, n).combine_chunks().to_batches()[0]
        self.row += n
        return b

    def offset(self):
        return self.row

    def seek(self, offset):
        self.row = offset

    def close(self):
        pass


def stable_sort(table: pa.Table, col: str = "arr") -> pa.Table:
    return table.take(pc.sort_indices(table, [(col, "ascending")]))


def arrival_table(values: list[int]) -> pa.Table:
    return pa.table({"arr": pa.array(values, pa.int64()), "pos": pa.array(range(len(values)))})


@given(st.lists(st.integers(0, 6), max_size=80), st.integers(1, 20), st.integers(1, 20),
       st.integers(1, 15), st.integers(1, 9))
def test_external_sort_equals_a_stable_sort(tmp_path_factory, values, run_rows, block_rows,
                                            max_rows, chunk):
    table = arrival_table(values)
    src = ExternalSort(TableFeed(table, chunk), "arr", run_rows=run_rows,
                       block_rows=block_rows, tmpdir=tmp_path_factory.getbasetemp())
    assert src.open() == table.schema
    batches = drain(src, max_rows)
    assert all(b.num_rows <= max_rows for b in batches)
    assert table_of(batches, table.schema).equals(stable_sort(table))


@settings(max_examples=10)
@given(st.lists(st.integers(-3, 50), min_size=1, max_size=60), st.integers(0, 60),
       st.integers(1, 9))
def test_external_sort_resumes_at_any_cut(values, cut, max_rows):
    table = arrival_table(values)
    cut = min(cut, len(values))
    src = ExternalSort(TableFeed(table), "arr", run_rows=8, block_rows=3)
    src.open()
    head = []
    while sum(b.num_rows for b in head) < cut:
        head.append(src.poll(min(max_rows, cut - sum(b.num_rows for b in head))))
    assert src.offset() == cut
    src.seek(cut)
    tail = drain(src, max_rows)
    assert table_of(head + tail, table.schema).equals(stable_sort(table))


def test_external_sort_spills_only_beyond_one_run(tmp_path):
    table = arrival_table([5, 3, 9, 1, 1, 0, 7, 2] * 5)
    src = ExternalSort(TableFeed(table), "arr", run_rows=100, tmpdir=tmp_path)
    src.open()
    first = src.poll(4)
    assert first.num_rows == 4 and list(tmp_path.iterdir()) == []
    spilled = ExternalSort(TableFeed(table), "arr", run_rows=9, tmpdir=tmp_path)
    spilled.open()
    spilled.poll(4)
    (sort_dir,) = tmp_path.iterdir()
    assert len(list(sort_dir.iterdir())) == 5  # ceil(40 / 9) runs
    drain(spilled, 100)
    assert list(tmp_path.iterdir()) == []  # removed at the end


@given(st.lists(st.integers(0, 100), max_size=80), st.integers(1, 10), st.integers(1, 12),
       st.integers(1, 9))
def test_bounded_reorder_equals_a_stable_sort_within_the_bound(values, bound, max_rows, chunk):
    values = sorted(values)  # then disorder only inside blocks of `bound` rows
    blocks = [values[i:i + bound] for i in range(0, len(values), bound)]
    shuffled = [v for b in blocks for v in (b[::-1] if len(b) % 2 else b[1:] + b[:1])]
    table = arrival_table(shuffled)
    src = BoundedReorder(TableFeed(table, chunk), "arr", bound)
    assert src.open() == table.schema and src.offset() is None
    batches = drain(src, max_rows)
    assert all(b.num_rows <= max_rows for b in batches)
    assert table_of(batches, table.schema).equals(stable_sort(table))


@given(st.lists(st.integers(0, 30), max_size=60), st.integers(0, 8), st.integers(1, 9))
def test_bounded_reorder_sorts_or_says_the_bound_is_too_small(values, bound, chunk):
    table = arrival_table(values)
    src = BoundedReorder(TableFeed(table, chunk), "arr", bound)
    src.open()
    try:
        out = table_of(drain(src, 5), table.schema)
    except SourceError as e:
        assert f"outside the reorder bound of {bound} rows" in str(e)
        assert "--arrival-bound" in str(e)
    else:
        assert out.equals(stable_sort(table))


def test_bounded_reorder_row_outside_the_bound():
    table = arrival_table(list(range(1, 21)) + [0])
    src = BoundedReorder(TableFeed(table, 5), "arr", 3)
    src.open()
    with pytest.raises(SourceError, match=r"'arr' value 0 comes after 1[0-9] was released"):
        drain(src, 4)
    ok = BoundedReorder(TableFeed(table, 5), "arr", 25)
    ok.open()
    assert table_of(drain(ok, 4)).equals(stable_sort(table))


def test_arrival_column_with_nulls_is_an_error():
    table = pa.table({"arr": pa.array([1, None, 3])})
    with pytest.raises(SourceError, match="null or NaN"):
        src = ExternalSort(TableFeed(table), "arr")
        src.open()
        drain(src, 10)


def test_external_sort_over_a_folder_resumes(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    table = pa.table({"name": [f"n{(i * 7) % 5}" for i in range(23)], "pos": range(23)})
    pq.write_table(table.slice(0, 10), folder / "a.parquet", row_group_size=4)
    pq.write_table(table.slice(10), folder / "b.parquet", row_group_size=4)
    want = stable_sort(table, "name")
    src = ExternalSort(FileSource(folder), "name", run_rows=6, tmpdir=tmp_path)
    src.open()
    head = [src.poll(5), src.poll(5)]
    src.close()
    again = ExternalSort(FileSource(folder), "name", run_rows=6, tmpdir=tmp_path)
    again.open()
    again.seek(10)
    assert table_of(head + drain(again, 7)).equals(want)


def test_exported_from_oop_io():
    assert oop.io.ExternalSort is ExternalSort and oop.io.BoundedReorder is BoundedReorder
