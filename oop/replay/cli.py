"""``oop replay``: run a window aggregation over a disordered feed, writing results as they close.

The input is a file or folder (Parquet, CSV, NDJSON, Arrow IPC), standard input
(``-``) or a Redis stream (``redis://HOST:PORT/STREAM``), read in batches and
never whole; ``--follow`` keeps watching a folder for new files. Rows are
replayed in arrival order (or ordered by ``--arrival COL``). The source
punctuates with the chosen generator after every cadence of rows and applies
the late policy; the window aggregation emits each window as soon as
punctuation covers it, and the result leaves at once (``--out`` file, part
folder or stdout). ``--checkpoint-dir`` makes the run restartable with
exactly-once output. Logs and the progress line go to stderr.

Exit codes: 0 success; 1 ``--verify`` found differences (Spark); 2 bad input
(missing column, unparsable spec, non-time column, unreadable file, failed
write); 130 / 143 stopped by SIGINT / SIGTERM (after a checkpoint, if a
directory is set).
"""

from __future__ import annotations

import argparse
import sys
import time as _time
from typing import TYPE_CHECKING, Any

from oop.command.flags import (add_output_flags, add_runtime_flags, check_runtime, command_parser,
                           engine_late, open_writers, parse_bytes, resolve_late, run_job)
from oop.command.threads import (add_threads_flag, check_threads, compile_on_threads,
                                 partitions, pipelined)
from oop.errors import ConfigError
from oop.punctuation.spec import SPEC_HELP
from oop.window.specs import AGG_FORMS
from oop.stream import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:  # the engine loads when a command runs, not for ``--help``
    import pyarrow as pa

__all__ = ["register", "run_replay", "build_plan", "check_args", "resolve_late",
           "parse_bytes"]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = command_parser(
        sub, "replay", "run a window aggregation over a disordered feed (files, stdin, Redis)",
        __doc__, (
            "examples:\n"
            "  oop replay --input flows.parquet --time ts --time-unit ms --key srcIP \\\n"
            "      --window tumbling:1s --agg count --agg sum:len --punctuation bounded:5s\n"
            "  tail -f log.ndjson | oop replay --input - --format ndjson --time ts \\\n"
            "      --window tumbling:10s --agg count --punctuation bounded:2s+idle-wall:5s\n"
            "  oop replay --input feed/ --follow --time ts --window sliding:10s,1s --agg count \\\n"
            "      --punctuation bounded:5s --out results/ --checkpoint-dir ck/ "
            "--checkpoint-every 1min"
        ))
    p.add_argument("--input", required=True,
                   help="file or folder (.parquet .csv .ndjson/.jsonl .arrow), '-' for stdin, "
                        "or redis://HOST:PORT/STREAM")
    p.add_argument("--format", choices=["parquet", "csv", "ndjson", "arrow"],
                   help="input format when the extension cannot say (stdin: default csv)")
    p.add_argument("--follow", action="store_true",
                   help="keep watching the input folder for new files (renamed into place)")
    p.add_argument("--time", required=True, help="event-time column (integer or timestamp)")
    p.add_argument("--time-unit", default="ms", choices=["s", "ms", "us", "ns"],
                   help="unit of an integer time column (default: ms)")
    p.add_argument("--arrival", help="replay rows ordered by this column (default: input order)")
    p.add_argument("--arrival-bound", type=int, metavar="N",
                   help="reorder by --arrival within N rows (required for live inputs)")
    p.add_argument("--key", action="append", default=[], help="group-by column (repeatable)")
    p.add_argument("--window", required=True,
                   help="tumbling:DUR | sliding:RANGE,SLIDE | landmark:SLIDE | rows:RANGE,SLIDE | "
                        "session:GAP")
    p.add_argument("--agg", action="append", default=[], required=True,
                   help=f"{AGG_FORMS} (repeatable)")
    p.add_argument("--punctuation", metavar="SPEC",
                   help=f"{SPEC_HELP} (required: it decides which tuples count as late)")
    add_output_flags(p)
    p.add_argument("--method", default="auto", choices=["auto", "wid", "paned", "adapt"],
                   help="window evaluation: WID, Paned-WID, AdaptWID (eager/lazy per key, "
                        "tumbling and sliding windows), or chosen by cost model (default)")
    add_runtime_flags(p, batch_size=DEFAULT_BATCH_SIZE,
                      batch_help=f"rows per batch read (default {DEFAULT_BATCH_SIZE}); results "
                                 "do not depend on it")
    add_threads_flag(p, splits="the window (key partitions)", spark=True)
    g = p.add_argument_group("Spark (needs the 'spark' extra and Java)")
    g.add_argument("--spark", action="store_true", help="read and replay through PySpark")
    g.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    g.add_argument("--shards", type=int, default=None, help="run the plan sharded by key")
    g.add_argument("--verify", action="store_true",
                   help="compare with Spark SQL; print one JSON line; exit 1 on any difference")
    p.set_defaults(func=run_replay)


# ---- checks ------------------------------------------------------------
def check_args(args: argparse.Namespace) -> None:
    """Refuse, in one line, flags that cannot work or would do nothing in this combination."""
    if not args.punctuation:
        raise ConfigError(f"--punctuation is required: it decides which tuples count as late "
                          f"(e.g. bounded:5s); choose {SPEC_HELP}")
    base = args.punctuation.split("+")[0].strip().lower()
    if base == "external":
        raise ConfigError("--punctuation external needs the marker column (external:COLUMN): "
                          "files, stdin and Redis carry no punctuation records of their own")
    if args.batch_size is None:
        raise ConfigError(f"--batch-size {args.batch_size}: give a row count of at least 1")
    check_runtime(args)
    if args.checkpoint_dir is not None:
        if args.input == "-":
            raise ConfigError("standard input cannot be re-read after a crash: --checkpoint-dir "
                              "needs a file, folder or Redis input")
        if args.arrival and args.arrival_bound is not None:
            raise ConfigError("--arrival-bound reorders in memory and cannot resume; with "
                              "--checkpoint-dir use --arrival on a finite file input")
    if args.method == "adapt" and args.late == "update":
        raise ConfigError("--method adapt (AdaptWID) counts late tuples and emits no "
                          "revisions: drop --late update, or use --method auto")
    check_threads(args)


def punctuation_spec(args: argparse.Namespace) -> Any:
    """The source's generator config: the spec, with the default cadence unless it names one."""
    from oop.punctuation import parse_punctuation, with_cadence

    return with_cadence(parse_punctuation(args.punctuation))


# ---- the plan ----------------------------------------------------------
def build_plan(src: Any, args: argparse.Namespace, unit: str) -> Any:
    """The `oop` plan after the source: a window aggregation (or an IOP plan)."""
    from oop.window.specs import parse_aggs, parse_window
    from oop.stream.timecol import parse_duration

    kind = parse_window(args.window, unit)
    aggs = parse_aggs(args.agg)
    if args.strategy == "oop":
        threads = partitions(args)
        if args.late == "update":
            return src.window(kind, aggs, by=tuple(args.key), method=args.method, late="update",
                              allowed_lateness=parse_duration(args.allowed_lateness or "0",
                                                              unit),
                              name="window", threads=threads)
        return src.window(kind, aggs, by=tuple(args.key), method=args.method, name="window",
                          threads=threads)
    if type(kind).__name__ == "Session":
        raise ConfigError(f"--window {args.window}: session windows run with --strategy oop only")
    from oop.query import WindowQuery, parse_strategy

    strategy = parse_strategy(args.strategy)
    return WindowQuery([src], kind, aggs, by=tuple(args.key)).plan(strategy)


def _source(args: argparse.Namespace) -> tuple[Any, str]:
    import oop
    from oop.command.inputs import is_live, open_input
    from oop.stream.timecol import check_time_column

    conn = open_input(args)
    if pipelined(args) and not is_live(args):
        from oop.plan.background import ReadAhead

        conn = ReadAhead(conn)  # a finite input is decoded ahead, on its own thread
    late = engine_late(args)
    src = oop.from_connector(conn, time=args.time, unit=args.time_unit,
                             punctuation=punctuation_spec(args), late=late,
                             batch_size=args.batch_size, name="input",
                             max_ahead=args.max_ahead)
    schema = src.node.op.declared_schema
    unit = args.time_unit
    if schema is not None:
        spec = check_time_column(schema, args.time, "input")
        unit = spec.unit if spec is not None else unit
        for k in args.key:
            if k not in schema.names:
                raise ConfigError(f"--key column {k!r} is not in the input; its columns are "
                                  f"{schema.names}")
    return src, unit




# ---- running -----------------------------------------------------------
def run_replay(args: argparse.Namespace) -> int:
    from oop.io.memory_pool import prefer_lean_pool

    prefer_lean_pool()  # before pyarrow loads: the Parquet reader and writer use jemalloc too
    args.late = resolve_late(args)
    if not args.punctuation:
        check_args(args)
    if args.spark:
        from oop.command.startup_gc import settle

        settle()  # the Spark driver's start-up is its own
        try:
            from oop.spark.cli import run_replay as spark_replay
        except ImportError as e:
            raise ConfigError(
                f"--spark needs PySpark: install the spark extra (pip install -e '.[spark]') ({e})"
            ) from e
        from oop.punctuation import with_cadence_spec

        args.punctuation = with_cadence_spec(args.punctuation)
        return int(spark_replay(args))
    if args.verify or args.shards:
        raise ConfigError("--verify and --shards need --spark")
    check_args(args)
    from oop.io.compute_deferral import defer_arrow_compute
    from oop.io.pandas_probe import skip_pandas_probe

    defer_arrow_compute()  # pyarrow.compute's import (~0.03 s) waits for a first use
    skip_pandas_probe()  # pyarrow would import pandas (~75 MiB) for nothing
    from oop.io.memory_pool import use_lean_pool

    use_lean_pool()  # mimalloc's per-thread heaps hold ~60 MiB more in a threaded run
    from oop.command.numba_probes import skip_probes_at_compile

    # cached kernels load without numba's registries (the plan executor sets that up:
    # oop.kernel_cache); a first compile loads them, without scipy.linalg's BLAS probe
    # (~0.13 s) and cffi's (~20 ms)
    skip_probes_at_compile()
    compile_on_threads(args)
    t0 = _time.perf_counter()
    src, unit = _source(args)
    stream = build_plan(src, args, unit)
    out: Any = args.out
    if pipelined(args):
        from oop.plan.background import BackgroundSink
        from oop.command.inputs import open_output

        out = BackgroundSink(open_output(args.out, args.out_format, "out"))  # own thread
    _pipeline_stages(stream, src, out, args)
    writer, late = open_writers(args, out, args.out_format)
    return run_job(stream, writer, late, args, "oop replay", out_label=args.out,
                   late_hint=f"--punctuation {args.punctuation}", t0=t0)


def _pipeline_stages(stream: Any, src: Any, out: Any, args: argparse.Namespace) -> None:
    """A threaded window over a finite input pipelines (results of punctuation k leave at
    k+1); the plan summary reports the reading and writing threads' CPU time (and, for
    the one-thread window, the driving thread's from here to the end: the data work and
    the kernels' loading on first call)."""
    import time

    from oop.command.inputs import is_live
    from oop.window.threaded import ThreadedWindow

    op = stream.node.op
    stages = {what: part for what, part in (
        ("reader_cpu_s", getattr(src.node.op, "connector", None)), ("writer_cpu_s", out))
        if hasattr(part, "cpu_s")}
    if isinstance(op, ThreadedWindow):
        if not is_live(args):
            op.lag = 1
        op.stages.update(stages)
    elif stages and isinstance(getattr(op, "plan_info", None), dict) and hasattr(out, "on_close"):
        t0 = time.thread_time()

        def report() -> None:
            op.plan_info.update({k: round(float(v.cpu_s), 3) for k, v in stages.items()},
                                driver_cpu_s=round(time.thread_time() - t0, 3))

        out.on_close = report


