"""Physical rows of a sharded stream on Spark: the helper columns, and building / reading them.

A :class:`~oop.spark.sharded.ShardedStream` is one Spark DataFrame whose rows are the user's
columns plus

====================  =====================================================
``__k``               0 data row, 1 punctuation row, 2 stats row
``__src``             the producer (upstream shard / input partition) of the row
``__seq``             the row's arrival position within its producer
``__p``               punctuation value (``__k = 1``) / late count (``__k = 2``)
``__shard``           the shard the row goes to next
====================  =====================================================

Punctuation travels *in band* as rows, so Spark's shuffles carry it. ``__side`` (``SIDE``)
tells the two inputs of a two-input query apart inside its shuffle.

:class:`Emitter` turns one producer's batches, punctuations and counts into such rows;
:class:`PartitionReader` hands a sorted partition out shard by shard; :func:`pack_phys`
serialises physical batches for the trip to the driver.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from oop.spark import arrowio

__all__ = ["K", "SRC", "SEQ", "P", "SHARD", "SIDE", "HELPERS", "DATA", "PUNCT", "STATS",
           "phys_spark_schema", "Emitter", "PartitionReader", "pack_phys"]

K, SRC, SEQ, P, SHARD, SIDE = "__k", "__src", "__seq", "__p", "__shard", "__side"
HELPERS = (K, SRC, SEQ, P, SHARD)
DATA, PUNCT, STATS = 0, 1, 2


# ---- physical rows ------------------------------------------------------
def phys_spark_schema(user: pa.Schema) -> Any:
    from pyspark.sql import types as T

    st = arrowio.arrow_to_spark(user)
    fields = [T.StructField(f.name, f.dataType, True) for f in st.fields]
    fields += [T.StructField(K, T.IntegerType(), False), T.StructField(SRC, T.IntegerType(), False),
               T.StructField(SEQ, T.LongType(), False), T.StructField(P, T.LongType(), True),
               T.StructField(SHARD, T.IntegerType(), False)]
    return T.StructType(fields)


class Emitter:
    """Builds physical batches for one producer (``src``): data, punctuation, stats rows."""

    def __init__(self, phys: pa.Schema, user: pa.Schema, src: int) -> None:
        self.phys = phys
        self.user = user
        self.src = src
        self.seq = 0  # next data row position

    def _helpers(self, n: int, k: int, seq: pa.Array, p: pa.Array, shard: int) -> list[pa.Array]:
        return [pa.array(np.full(n, k, np.int32)), pa.array(np.full(n, self.src, np.int32)),
                seq, p, pa.array(np.full(n, shard, np.int32))]

    def data(self, batch: pa.RecordBatch, shard: int) -> pa.RecordBatch:
        n = batch.num_rows
        seq = pa.array(np.arange(self.seq, self.seq + n, dtype=np.int64))
        self.seq += n
        cols = [batch.column(f.name) for f in self.user]
        cols += self._helpers(n, DATA, seq, pa.nulls(n, pa.int64()), shard)
        return arrowio.conform(pa.RecordBatch.from_arrays(cols, names=self.phys.names), self.phys)

    def _meta(self, k: int, seq: int, v: int, shard: int) -> pa.RecordBatch:
        cols = [pa.nulls(1, f.type) for f in self.user]
        cols += self._helpers(1, k, pa.array([seq], pa.int64()), pa.array([v], pa.int64()), shard)
        return arrowio.conform(pa.RecordBatch.from_arrays(cols, names=self.phys.names), self.phys)

    def punct(self, v: int, shard: int) -> pa.RecordBatch:
        return self._meta(PUNCT, self.seq - 1, v, shard)

    def stats(self, tuples_in: int, late: int, shard: int) -> pa.RecordBatch:
        # stats rows: __seq carries tuples_in, __p the late count (summed at collection)
        return self._meta(STATS, tuples_in, late, shard)


class PartitionReader:
    """Rows of one sorted partition, handed out as chunks of one shard at a time."""

    def __init__(self, it: Iterator[pa.RecordBatch]) -> None:
        self.it = it
        self.buf: pa.RecordBatch | None = None
        self.shards: np.ndarray | None = None
        self.off = 0

    def _fill(self) -> bool:
        while self.buf is None or self.off >= self.buf.num_rows:
            nxt = next(self.it, None)
            if nxt is None:
                self.buf = None
                return False
            self.buf, self.off = nxt, 0
            self.shards = nxt.column(SHARD).to_numpy(zero_copy_only=False)
        return True

    def peek_shard(self) -> int | None:
        if not self._fill():
            return None
        assert self.shards is not None
        return int(self.shards[self.off])

    def chunk(self, shard: int) -> pa.RecordBatch | None:
        """The next run of rows of ``shard`` (within one Spark batch), or None when it ended."""
        if self.peek_shard() != shard:
            return None
        assert self.buf is not None and self.shards is not None
        rest = self.shards[self.off:]
        stop = np.flatnonzero(rest != shard)
        end = self.off + (int(stop[0]) if len(stop) else len(rest))
        out = self.buf.slice(self.off, end - self.off)
        self.off = end
        return out


def pack_phys(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in it:
        if b.num_rows:
            yield pa.record_batch({"__payload": pa.array([arrowio.dumps(b)], pa.binary())})
