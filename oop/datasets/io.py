"""Writing generated streams to Parquet, for Spark, DuckDB or replay.

>>> import tempfile, os, pyarrow.parquet as pq
>>> from oop.datasets.packets import Packets
>>> d = tempfile.mkdtemp()
>>> write_parquet(Packets(n=100).batches(30), os.path.join(d, "p.parquet"))
100
>>> pq.read_table(os.path.join(d, "p.parquet")).column("arrival").to_pylist()[:3]
[0, 1, 2]
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["write_parquet"]


def write_parquet(batches: Iterable[pa.RecordBatch], path: str | Path,
                  arrival_col: str | None = "arrival") -> int:
    """Stream ``batches`` to one Parquet file; return the number of rows written.

    With ``arrival_col`` each row gets its arrival position (int64, 0-based),
    so a reader that does not keep file order can restore it. Memory: one batch.
    """
    writer: pq.ParquetWriter | None = None
    n = 0
    try:
        for b in batches:
            if arrival_col is not None:
                b = pa.RecordBatch.from_arrays(
                    [*b.columns, pa.array(np.arange(n, n + b.num_rows, dtype=np.int64))],
                    schema=b.schema.append(pa.field(arrival_col, pa.int64())),
                )
            if writer is None:
                writer = pq.ParquetWriter(str(path), b.schema)
            writer.write_batch(b)
            n += b.num_rows
    finally:
        if writer is not None:
            writer.close()
    return n
