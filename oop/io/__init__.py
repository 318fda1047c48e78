"""The runtime around the operators: connectors that read feeds and sinks that write results.

* :mod:`oop.io.protocol` -- the source-connector and sink contracts (DESIGN §5.1):
  a connector polls batches, reports its offset and seeks to one; a sink writes
  batches as they leave the plan and commits at a checkpoint.
* :mod:`oop.io.sinks` -- :func:`~oop.io.sinks.open_sink`: a file by extension
  (Parquet, CSV, NDJSON, Arrow IPC; encoders in :mod:`oop.io.formats`), a
  folder of part files committed by rename (:mod:`oop.io.parts`, with
  ``recover`` for crash restarts) or standard output; used by
  ``Stream.sink`` / ``Stream.to_parquet``.
* :mod:`oop.io.amount` -- one syntax for amounts (``500ms``, ``5s``, ``10000rows``)
  used by every flag that takes one.
"""
