"""``oop sql``: run a Flink SQL script (DDL + one query) as an out-of-order stream plan.

The script comes from ``-e TEXT`` or ``-f FILE``. ``EXPLAIN`` queries print
the plan. ``INSERT INTO sink SELECT ...`` writes to the sink table's
``path`` (in its ``format``; the rows are cast to its declared columns);
a plain ``SELECT`` writes CSV to stdout, or to ``--out`` (a file by
extension, a folder of part files, ``-``). ``--table name=path`` gives a
declared table's data without a ``path`` option. ``--strategy iop-sort``
(or ``iop-slack:2s`` ...) plans window queries and inner joins in order
(sort buffers + buffering window / OPOB join); constructs an in-order plan
cannot run (outer joins, CUMULATE, holistic aggregates) are refused with a
one-line error.

Exit codes: 0 success; 2 bad SQL or bad input (``oop: error: line:col: ...``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine loads when a command runs, not for ``--help``
    import pyarrow as pa

__all__ = ["register", "run_sql"]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "sql",
        help="run a Flink SQL query (window TVFs, interval joins) out of order",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  oop sql -f query.sql\n"
            "  oop sql -e \"CREATE TABLE t (ts TIMESTAMP(3), k STRING, \\\n"
            "      WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('path'='t.parquet'); \\\n"
            "      SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, \\\n"
            "      DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k\"\n"
            "  oop sql -f query.sql --strategy iop-slack:2s,generous --out out.parquet"
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("-e", "--execute", metavar="SQL", help="the script text")
    src.add_argument("-f", "--file", metavar="FILE", help="a file holding the script")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="data of a declared table (repeatable); overrides its 'path' option")
    p.add_argument("--strategy", default="oop",
                   help="oop | iop-sort | iop-bsort:N | iop-slack:DUR[,consistent|generous]")
    p.add_argument("--out", help="write results here (file by extension, folder/, or -) "
                                 "instead of the INSERT target or stdout CSV")
    p.add_argument("--format", help="output format for --out (parquet, csv, ndjson, arrow)")
    p.add_argument("--batch-size", type=int, default=None, help="rows per source batch")
    p.set_defaults(func=run_sql)


class _CastSink:
    """A sink writing every batch cast to ``schema`` (the INSERT target's declared columns)."""

    def __init__(self, inner: Any, schema: pa.Schema) -> None:
        self.inner, self.schema, self.name = inner, schema, inner.name

    def open(self, schema: pa.Schema) -> None:
        self.inner.open(self.schema)

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        cols = [batch.column(i).cast(f.type) for i, f in enumerate(self.schema)]
        self.inner.write(pa.RecordBatch.from_arrays(cols, schema=self.schema))

    def commit(self) -> Any:
        return self.inner.commit()

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        self.inner.abort()


def run_sql(args: argparse.Namespace) -> int:
    """The ``oop sql`` command (see module doc); any failure is one line on stderr, exit 2."""
    from oop.errors import OopError

    try:
        return _run(args)
    except (OopError, FileNotFoundError, KeyboardInterrupt):
        raise  # oop.cli.main prints these on one line
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else ""
        print(f"oop: error: {type(e).__name__}: {msg}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from oop.errors import ConfigError
    from oop.io.sinks import open_sink
    from oop.sql import plan_sql

    try:
        import sqlglot  # noqa: F401
    except ModuleNotFoundError:
        print("oop: error: oop sql needs the sqlglot package (pip install sqlglot)",
              file=sys.stderr)
        return 2

    text = args.execute if args.execute is not None else _read(args.file)
    tables: dict[str, Any] = {}
    for spec in args.table:
        name, eq, path = spec.partition("=")
        if not eq or not name or not path:
            raise ConfigError(f"--table {spec!r}: write NAME=PATH")
        tables[name] = path
    plan = plan_sql(text, tables=tables, strategy=args.strategy, batch_size=args.batch_size)
    if plan.explain_mode is not None:
        sys.stdout.write(plan.explain() + "\n")
        return 0
    target: Any
    fmt = args.format
    if args.out is not None:
        target = args.out
    elif plan.sink_name is not None:
        t = plan.sink_target()
        if t is None:
            raise ConfigError(f"INSERT INTO {plan.sink_name}: declare the table with "
                              "WITH ('path' = ...) or give --out")
        target, fmt = t[0], fmt or t[1]
    else:
        target, fmt = "-", fmt or "csv"
    sink = open_sink(target, fmt, name="--out" if args.out else plan.sink_name or "stdout")
    if plan.sink_def is not None and args.out is None and len(plan.sink_def.schema):
        sink = _CastSink(sink, plan.sink_def.schema)
    res = plan.stream.sink(sink)
    late = sum(sum(m.late.values()) for m in res.metrics.values())
    if late:
        print(f"oop sql: {late} late tuple(s) dropped (see the punctuation / WATERMARK)",
              file=sys.stderr)
    return 0


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no SQL file at {path!r}")
    return p.read_text()
