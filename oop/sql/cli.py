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
one-line error. The output, late-tuple and runtime flags are ``oop replay``'s
(:mod:`oop.command.flags`): ``--late``/``--late-out``/``--allowed-lateness``,
``--metrics*``, ``--checkpoint-dir`` (rerun the same command to continue),
``--max-state``, ``--max-ahead``, ``--stop-after-idle``, ``--quiet``;
``--follow`` follows every table whose path is a folder. ``--threads N``
means what it means for ``oop replay`` (:mod:`oop.command.threads`): N > 1
decodes finite tables and encodes the results on threads of their own and
runs window aggregates and joins on N - 1 key partitions (a join without
keys on N - 1 SplitJoin workers) where that keeps every row and its order
(:mod:`oop.sql.parallel`;
EXPLAIN and ``--metrics`` say which ran on threads, and why the others did
not). The results are written as windows close, through the same job loop as
``oop replay``.

Exit codes: 0 success; 2 bad SQL or bad input (``oop: error: line:col: ...``).
"""

from __future__ import annotations

import argparse
import sys
import time as _time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine loads when a command runs, not for ``--help``
    import pyarrow as pa

from oop.command.flags import (add_output_flags, add_runtime_flags, check_runtime, command_parser,
                           engine_late, open_writers, resolve_late, run_job)
from oop.command.threads import (add_threads_flag, check_threads, compile_on_threads,
                                 partitions, pipelined, run_threads)

__all__ = ["register", "run_sql"]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = command_parser(
        sub, "sql", "run a Flink SQL query (window TVFs, interval joins) out of order",
        __doc__, (
            "examples:\n"
            "  oop sql -f query.sql\n"
            "  oop sql -e \"CREATE TABLE t (ts TIMESTAMP(3), k STRING, \\\n"
            "      WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('path'='t.parquet'); \\\n"
            "      SELECT k, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, \\\n"
            "      DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k\"\n"
            "  oop sql -f query.sql --strategy iop-slack:2s,generous --out out.parquet"
        ))
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("-e", "--execute", metavar="SQL", help="the script text")
    src.add_argument("-f", "--file", metavar="FILE", help="a file holding the script")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="data of a declared table (repeatable); overrides its 'path' option")
    p.add_argument("--follow", action="store_true",
                   help="keep watching every table whose path is a folder for new files "
                        "(a table's WITH ('follow' = ...) wins)")
    add_output_flags(p, out_default=None,
                     out_help="or '-' for stdout (default: the INSERT INTO table's path, "
                              "else CSV on stdout)",
                     out_format_aliases=("--format",))
    add_runtime_flags(p, batch_size=None,
                      batch_help="rows per source batch (default: the table's 'batch-size', "
                                 "else 65536); results do not depend on it: a WATERMARK "
                                 "punctuates after every 65536 rows read unless the table's "
                                 "'punctuation' names another +cadence:Nrows")
    add_threads_flag(p, splits="window aggregates and joins (key partitions; a join "
                               "without keys: SplitJoin workers)")
    p.set_defaults(func=run_sql)


class _CastSink:
    """A sink writing every batch cast to ``schema`` (the INSERT target's declared columns).

    Everything else (``prepare``/``resume`` of a part folder under ``--checkpoint-dir``,
    ``folder``) is the ``inner`` sink's."""

    def __init__(self, inner: Any, schema: pa.Schema) -> None:
        self.inner, self.schema, self.name = inner, schema, inner.name

    def __getattr__(self, attr: str) -> Any:  # prepare, resume, folder: the inner sink's
        return getattr(self.inner, attr)

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
    from oop.sql import plan_sql
    from oop.sql.parallel import Parallelism

    try:
        import sqlglot  # noqa: F401
    except ModuleNotFoundError:
        print("oop: error: oop sql needs the sqlglot package (pip install sqlglot)",
              file=sys.stderr)
        return 2

    args.late = resolve_late(args)
    check_runtime(args)  # the flags alone, before any SQL is read
    check_threads(args)
    from oop.command.numba_probes import skip_probes_at_compile

    skip_probes_at_compile()  # a first compile without the BLAS and cffi probes
    compile_on_threads(args)
    t0 = _time.perf_counter()
    text = args.execute if args.execute is not None else _read(args.file)
    tables: dict[str, Any] = {}
    for spec in args.table:
        name, eq, path = spec.partition("=")
        if not eq or not name or not path:
            raise ConfigError(f"--table {spec!r}: write NAME=PATH")
        tables[name] = path
    par = Parallelism(partitions=partitions(args), read_ahead=pipelined(args))
    plan = plan_sql(text, tables=tables, strategy=args.strategy, batch_size=args.batch_size,
                    options=table_options(args), parallel=par)
    if plan.explain_mode is not None:
        sys.stdout.write(plan.explain() + "\n")
        return 0
    target, fmt, label = _target(args, plan)
    check_runtime(args, out=target)  # again with the INSERT table's path as the target
    sink: Any = target
    if plan.sink_def is not None and args.out is None and len(plan.sink_def.schema):
        from oop.command.inputs import open_output

        sink = _CastSink(open_output(target, fmt, plan.sink_name or "out"),
                         plan.sink_def.schema)
    stages = _pipeline(plan, sink, fmt) if pipelined(args) else {}
    if stages:
        sink = stages["writer"]
    writer, late = open_writers(args, sink, fmt)

    def threads() -> dict[str, Any]:
        cpu = {f"{k}_cpu_s": round(float(v.cpu_s), 3) for k, v in stages.items()}
        ahead = [k.removeprefix("reader_") for k in stages if k.startswith("reader_")]
        return {"threads": {**par.summary(run_threads(args)), "read_ahead": ahead, **cpu}}

    return run_job(plan.stream, writer, late, args, "oop sql", out_label=label,
                   late_hint="the tables' WATERMARK / 'punctuation'", t0=t0, extra=threads)


def _pipeline(plan: Any, sink: Any, fmt: str | None) -> dict[str, Any]:
    """The threads of a pipelined run beside the plan's: the results written by a thread of
    their own (:class:`~oop.plan.background.BackgroundSink`); when no table is live, every
    window on key partitions collects a punctuation's results at the next one (``lag=1``:
    the same rows in the same order, one punctuation later), so its partitions aggregate
    while this thread merges and writes. Returns the stages by name (``writer``, and
    ``reader_TABLE`` for each table read ahead), objects with ``cpu_s``."""
    from oop.command.inputs import open_output
    from oop.plan.background import BackgroundSink
    from oop.plan.executor import topological
    from oop.window.threaded import ThreadedWindow

    inner = open_output(sink, fmt, "out") if isinstance(sink, str) else sink
    stages: dict[str, Any] = {"writer": BackgroundSink(inner)}
    nodes = topological([plan.stream.node])
    conns = [getattr(n.op, "connector", None) for n in nodes if not n.parents]
    for c in conns:
        if hasattr(getattr(c, "inner", None), "cpu_s"):
            stages[f"reader_{c.name}"] = c.inner
    if not any(getattr(c, "live", False) for c in conns):
        for n in nodes:
            if isinstance(n.op, ThreadedWindow):
                n.op.lag = 1
    return stages


def table_options(args: argparse.Namespace) -> dict[str, str]:
    """The table options the flags give every table that does not set them itself."""
    out: dict[str, str] = {}
    if args.late != "drop":
        out["late"] = engine_late(args)
    if args.allowed_lateness is not None:
        out["allowed-lateness"] = args.allowed_lateness
    if args.max_ahead is not None:
        out["max-ahead"] = args.max_ahead
    if args.follow:
        out["follow"] = "true"
    return out


def _target(args: argparse.Namespace, plan: Any) -> tuple[str, str | None, str]:
    """(target, format, label) of the results: --out, the INSERT table's path, or stdout."""
    from oop.errors import ConfigError

    fmt = args.out_format
    if args.out is not None:
        return args.out, fmt, args.out
    if plan.sink_name is not None:
        t = plan.sink_target()
        if t is None:
            raise ConfigError(f"INSERT INTO {plan.sink_name}: declare the table with "
                              "WITH ('path' = ...) or give --out")
        return t[0], fmt or t[1], t[0]
    return "-", fmt or "csv", "-"


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no SQL file at {path!r}")
    return p.read_text()
