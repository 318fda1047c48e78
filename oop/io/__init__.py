"""The runtime around the operators: connectors that read feeds and sinks that write results.

* :mod:`oop.io.protocol` -- the source-connector and sink contracts (DESIGN §5.1):
  a connector polls batches, reports its offset and seeks to one; a sink writes
  batches as they leave the plan and commits at a checkpoint.
* :mod:`oop.io.sinks` -- :func:`~oop.io.sinks.open_sink`: a file by extension
  (Parquet, CSV, NDJSON, Arrow IPC; encoders in :mod:`oop.io.writers`), a
  folder of part files committed by rename (:mod:`oop.io.parts`, with
  ``recover`` for crash restarts) or standard output; used by
  ``Stream.sink`` / ``Stream.to_parquet``.
* :mod:`oop.io.amount` -- one syntax for amounts (``500ms``, ``5s``, ``10000rows``)
  used by every flag that takes one.
* :mod:`oop.io.files` -- :class:`FileSource`, a Parquet/CSV/NDJSON/Arrow IPC file or
  folder in batches with row offsets, and a follow mode (:mod:`oop.io.formats` reads
  one file of each format in chunks and checks schemas).
* :mod:`oop.io.live` -- :class:`StreamSource` (standard input, pipes), :class:`SocketSource`
  and :func:`from_stdin`: live CSV/NDJSON lines or Arrow IPC streams.
* :mod:`oop.io.redis_source` -- :class:`RedisStreamSource`, a Redis stream via XREAD.
* :mod:`oop.io.reorder` -- :class:`BoundedReorder` and :class:`ExternalSort`: a feed
  replayed in the order of an arrival column.

The connector classes are imported lazily (``from oop.io import FileSource``), so
``import oop.io`` stays cheap and ``redis`` is needed only for the Redis source.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FileSource", "StreamSource", "SocketSource", "from_stdin", "RedisStreamSource",
           "BoundedReorder", "ExternalSort"]

_HOME = {"FileSource": "files", "StreamSource": "live", "SocketSource": "live",
         "from_stdin": "live", "RedisStreamSource": "redis_source",
         "BoundedReorder": "reorder", "ExternalSort": "reorder"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"oop.io.{_HOME[name]}"), name)
    raise AttributeError(f"module 'oop.io' has no attribute {name!r}")
