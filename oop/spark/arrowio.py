"""Arrow plumbing shared by replay and sharded execution (runs on the driver and in tasks).

* :func:`dumps` / :func:`loads` -- one RecordBatch <-> Arrow IPC stream bytes
  (how a whole batch travels through Spark as one binary cell).
* :func:`rechunk` -- re-cut a stream of batches into batches of exactly
  ``size`` rows (the last one shorter); holds at most one output batch.
* :func:`spark_to_arrow` / :func:`arrow_to_spark` -- schema conversion with the
  conventions of ``mapInArrow`` (timestamps are ``timestamp[us, tz=UTC]``).
* :func:`conform` -- cast a batch to an exact Arrow schema (column order,
  types, nullability) so it matches what the receiving side declared.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import pyarrow as pa

__all__ = ["dumps", "loads", "rechunk", "spark_to_arrow", "arrow_to_spark", "conform"]


def dumps(batch: pa.RecordBatch) -> bytes:
    """Serialise one batch as an Arrow IPC stream. O(batch bytes)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def loads(data: bytes) -> pa.RecordBatch:
    """Inverse of :func:`dumps`."""
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    batches = list(reader)
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, schema=reader.schema).combine_chunks().to_batches()[0]


def rechunk(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``size`` rows (last shorter), in order. Memory: < 2 batches."""
    pending: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        if b.num_rows == 0:
            continue
        pending.append(b)
        n += b.num_rows
        while n >= size:
            t = pa.Table.from_batches(pending)
            head = t.slice(0, size).combine_chunks()
            yield head.to_batches()[0] if head.num_rows else pa.RecordBatch.from_pylist([])
            rest = t.slice(size)
            pending = rest.to_batches() if rest.num_rows else []
            n -= size
    if n:
        t = pa.Table.from_batches(pending).combine_chunks()
        yield t.to_batches()[0]


def spark_to_arrow(schema: Any) -> pa.Schema:
    """The Arrow schema ``mapInArrow`` uses for a Spark StructType (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def arrow_to_spark(schema: pa.Schema) -> Any:
    """A Spark StructType for an Arrow schema (int64 event times stay LongType)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly ``schema`` (columns picked by name, cast where types differ)."""
    cols = []
    for f in schema:
        a = batch.column(f.name)
        if not a.type.equals(f.type):
            a = a.cast(f.type)
        cols.append(a)
    return pa.RecordBatch.from_arrays(cols, schema=schema)
