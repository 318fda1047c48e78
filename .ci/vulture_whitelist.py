"""Names vulture reports as unused in ``oop/`` that stay on purpose (read by .ci/deadcode).

Each entry says why. Never executed: vulture only parses it. Add a name here only when it
is used in a way vulture cannot see (a protocol, a doctest, a dataclass field read through
``asdict``/``repr``, a public method of the API); delete dead code instead otherwise.
"""
# ruff: noqa
_ = object()

# module-level __getattr__ (PEP 562): lazy attributes oop.sql, oop.io.<connector>
__getattr__  # oop/__init__.py, oop/io/__init__.py

# protocols and foreign objects
_.writable  # oop/io/sinks.py: the io.RawIOBase protocol of a text-stream adapter
_.is_open  # oop/io/writers.py: pyarrow ParquetWriter's own flag (an abort keeps the footer out)
typingctx  # oop/window/interner.py: numba @intrinsic signature (typingctx, ...)
_.__class__  # oop/sql/__init__.py: the module made callable (oop.sql(script, tables))

# dataclass fields that are results: read through repr / asdict / JSON reports
ROW_LAZY  # oop/adapt/kernels/route.py: the row class 1 of route_batch (written by the kernel)
wall_at_row  # oop/experiments/harness.py: a trace column
latency_p95_ms  # oop/experiments/latacc.py: the latency/accuracy report row
completion_delay_ms
early_ms
late_drops
batches_out  # oop/metrics.py OperatorMetrics, set by oop/plan/executor.py: a metrics field
_.batches_out
rows_expected  # oop/query.py Accuracy: report fields
rows_got
LaneOp  # oop/window/aggregates.py: the type of Lane.op (annotations only)

# diagnostics counters, read by people and tests through the object
_.ring_grows  # oop/iop_baseline/reorder.py: how often the reorder ring had to grow
_.commits  # oop/plan/writer.py: how many sink commits a run made
_.removed_late  # oop/window/aggregate.py: late tuples removed from open windows
_.method_config  # oop/window/aggregate.py: the method asked for (plan_info keeps the chosen)

# public API (documented; used in doctests, which vulture does not read)
_.interval  # oop/join/spec.py: the band of one tuple (module doctest)
_.rekey  # oop/spark/sharded.py: ShardedStream.rekey (module docstring, oop.spark docs)
_.covers  # oop/stream/elements.py: Punctuation.covers(t), the tuple-side reading of 004 Eq. 4.1

# protocols called by Python or by a library, never by name in oop/
__dir__  # oop/lazy.py: the PEP 562 module __dir__ of oop, oop.punctuation, oop.window (dir(oop))
_.on_start  # oop/cli.py compile_notice: numba.core.event.Listener hook
