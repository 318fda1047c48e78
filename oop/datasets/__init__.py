"""Built-in datasets: NetFlow-like packet streams with controllable disorder.

Deterministic by seed, generated in bounded chunks (10M+ rows stream through
O(chunk) memory), usable from the Python API, the experiments and Spark.

API
---
Ordered data (:mod:`oop.datasets.packets`)
    ``Packets(n, rate=4000.0, groups=1000, skew=Uniform(), seed=0, start=0,
    dests=None)`` --
    schema :data:`PACKET_SCHEMA` ``(srcIP int64 [= group id], destIP int64,
    srcPort int32, destPort int32, len int32, ts int64 ms)``; ``ts_i = start +
    floor(i * 1000 / rate)``. ``.chunks()``, ``.batches(batch_size)``,
    ``.table()``, ``.duration_ms``. Skews: ``Uniform()``, ``Zipf(s)``,
    ``DSMix(small=.., medium=.20, medium_size=15, large_size=300, period=None)``
    and ``DSMix.ds(i)`` / ``DS_MIXES["DS1".."DS5"]`` (004 Table 6-2).
    ``rebatch(batches, n)``, ``concat_batches(parts, schema)``.
Disorder (:mod:`oop.datasets.disorder`)
    ``Disordered(packets, disorder, seed=0)`` with ``disorder`` one of
    ``InOrder()``, ``Band(delay, late_fraction=0, late_delay=0)`` (004 Fig. 6-8;
    late tuples beyond the bound), ``BlockSorted(block, marker=False)``
    (Fig. 6-9, end-of-block punctuation). Methods: ``.batches(batch_size)``
    (arrival order, data only), ``.feed(batch_size, punctuate=True)``
    (batches + implied ``Punctuation("ts", v)`` items), ``.punctuation()``
    (generator config for a source reading ``.batches``: ``BoundedDelay``,
    ``Ordered`` or ``External()`` = feed punctuation only), ``.stream(batch_size,
    name, late, punctuation=None)`` (an ``oop.Stream``), ``.table()``,
    ``.schema``.
Several links (:mod:`oop.datasets.multisource`)
    ``MultiSource((Link(name, rate, skew=0, lulls=((a, b), ...), groups=1000,
    group_skew=Uniform(), heartbeat=False, dests=None), ...), duration, tick=100, seed=0)``
    -- near-empty control links, arrival-time skew and lulls (Q1-2, Q8-5).
    ``.feeds()`` -> ``{name: () -> iterator}`` with one item per arrival tick
    per link (so the executor's rounds replay the arrival clock),
    ``.streams()`` -> one ``oop.Stream`` per link, ``.table()`` (union in
    arrival order with a ``link`` column), ``.n_ticks``.
Files / Spark (:mod:`oop.datasets.io`)
    ``write_parquet(batches, path, arrival_col="arrival")`` streams any batch
    iterator to one Parquet file, adding the arrival position so Spark (or
    DuckDB) can restore the arrival order: ``spark.read.parquet(path)
    .orderBy("arrival")``.

>>> ds = Disordered(Packets(n=5000, rate=1000, skew=Zipf(1.0), seed=7), Band(delay=100), seed=7)
>>> sum(b.num_rows for b in ds.batches(1024))
5000
>>> ds.punctuation()
BoundedDelay(delay=100)
"""

from oop.datasets.disorder import (
    Band,
    BlockSorted,
    Disorder,
    Disordered,
    InOrder,
)
from oop.datasets.io import write_parquet
from oop.datasets.multisource import Link, MultiSource
from oop.datasets.packets import (
    CHUNK,
    DS_MIXES,
    PACKET_SCHEMA,
    DSMix,
    Packets,
    Skew,
    Uniform,
    Zipf,
    concat_batches,
    rebatch,
)

__all__ = [
    "Packets",
    "PACKET_SCHEMA",
    "CHUNK",
    "Uniform",
    "Zipf",
    "DSMix",
    "DS_MIXES",
    "Skew",
    "rebatch",
    "concat_batches",
    "InOrder",
    "Band",
    "BlockSorted",
    "Disorder",
    "Disordered",
    "Link",
    "MultiSource",
    "write_parquet",
]
