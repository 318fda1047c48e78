"""Parquet inputs stream: the Arrow memory held while a file's batches are read does not
grow with the file (``oop.io.formats.parquet_file``; pyarrow's default pre-buffering kept
every fetched column chunk until the file closed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oop.io.formats import parquet_file


def arrow_bytes() -> int:
    """Bytes allocated in every Arrow pool. Not only ``pa.default_memory_pool()``: an
    in-process ``oop replay`` earlier in the same worker switches pyarrow's pool to jemalloc
    (oop.io.memory_pool), while the Parquet reader keeps allocating from Arrow C++'s own
    default (mimalloc), which that pool then does not see."""
    total = 0
    for name in ("mimalloc_memory_pool", "jemalloc_memory_pool", "system_memory_pool"):
        try:
            total += getattr(pa, name)().bytes_allocated()
        except (NotImplementedError, AttributeError, pa.ArrowException):
            continue  # a pool this build of pyarrow does not have
    return total


def held_while_reading(path: Path, open_file=parquet_file) -> int:  # type: ignore[no-untyped-def]
    """Most Arrow bytes allocated at any batch boundary of one pass over ``path``."""
    base, most, rows = arrow_bytes(), 0, 0
    pf = open_file(path)
    for b in pf.iter_batches(batch_size=65_536, use_threads=False):
        rows += b.num_rows
        most = max(most, arrow_bytes() - base)
        del b
    pf.close()
    assert rows == pq.read_metadata(path).num_rows  # every row read
    return most


def test_reading_a_file_holds_memory_independent_of_its_length(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    held = []
    for n in (200_000, 2_000_000):
        path = tmp_path / f"in{n}.parquet"
        pq.write_table(pa.table({"ts": np.arange(n), "k": rng.integers(0, 500, n),
                                 "v": rng.random(n)}), path, row_group_size=100_000)
        held.append(held_while_reading(path))
    assert held[1] <= 1.5 * held[0] + (4 << 20), held
    # the trap it avoids: pre-buffering holds the whole file (~40 MB here) by its end
    pre = held_while_reading(tmp_path / "in2000000.parquet",
                             lambda p: pq.ParquetFile(p, pre_buffer=True))
    assert pre > 4 * held[1], (pre, held)
