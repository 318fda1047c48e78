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
import json
import sys
import time as _time
from pathlib import Path
from typing import Any

import pyarrow as pa

from oop.errors import ConfigError
from oop.io.amount import AMOUNT_HELP
from oop.metrics import compile_timer
from oop.punctuation.spec import SPEC_HELP
from oop.replay.specs import AGG_FORMS
from oop.stream.api import DEFAULT_BATCH_SIZE

__all__ = ["register", "run_replay", "build_plan", "check_args", "print_csv"]

_JIT_NOTE_S = 0.5  # report numba compile time on stderr from this many seconds
LATE_WARN_FRACTION = 0.01  # warn when more than this fraction of the input was late


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "replay",
        help="run a window aggregation over a disordered feed (files, stdin, Redis)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  oop replay --input flows.parquet --time ts --time-unit ms --key srcIP \\\n"
            "      --window tumbling:1s --agg count --agg sum:len --punctuation bounded:5s\n"
            "  tail -f log.ndjson | oop replay --input - --format ndjson --time ts \\\n"
            "      --window tumbling:10s --agg count --punctuation bounded:2s+idle-wall:5s\n"
            "  oop replay --input feed/ --follow --time ts --window sliding:10s,1s --agg count \\\n"
            "      --punctuation bounded:5s --out results/ --checkpoint-dir ck/ "
            "--checkpoint-every 1min"
        ),
    )
    p.add_argument("--input", required=True,
                   help="file or folder (.parquet .csv .ndjson/.jsonl .arrow), '-' for stdin, "
                        "or redis://HOST:PORT/STREAM")
    p.add_argument("--format", choices=["parquet", "csv", "ndjson", "arrow"],
                   help="input format when the extension cannot say (stdin: default csv)")
    p.add_argument("--follow", action="store_true",
                   help="keep watching the input folder for new files (renamed into place)")
    p.add_argument("--stop-after-idle", metavar="DUR",
                   help="end the feed after this much wall time without new data (e.g. 30s)")
    p.add_argument("--time", required=True, help="event-time column (integer or timestamp)")
    p.add_argument("--time-unit", default="ms", choices=["s", "ms", "us", "ns"],
                   help="unit of an integer time column (default: ms)")
    p.add_argument("--arrival", help="replay rows ordered by this column (default: input order)")
    p.add_argument("--arrival-bound", type=int, metavar="N",
                   help="reorder by --arrival within N rows (required for live inputs)")
    p.add_argument("--key", action="append", default=[], help="group-by column (repeatable)")
    p.add_argument("--window", required=True,
                   help="tumbling:DUR | sliding:RANGE,SLIDE | landmark:SLIDE | rows:RANGE,SLIDE")
    p.add_argument("--agg", action="append", default=[], required=True,
                   help=f"{AGG_FORMS} (repeatable)")
    p.add_argument("--punctuation", metavar="SPEC",
                   help=f"{SPEC_HELP} (required: it decides which tuples count as late)")
    p.add_argument("--late", default=None,
                   choices=["drop", "side", "side_output", "raise", "update"],
                   help="late-tuple policy (default: drop, counted); 'side' writes them to "
                        "--late-out; 'update' re-emits revised windows (column is_revision) "
                        "for tuples up to --allowed-lateness late")
    p.add_argument("--late-out", help="where --late side writes the late tuples (same forms "
                                      "as --out); implies --late side")
    p.add_argument("--allowed-lateness", default=None,
                   help="with --late update: how late (DUR) a tuple may be and still revise")
    p.add_argument("--method", default="auto", choices=["auto", "wid", "paned"],
                   help="window evaluation: WID, Paned-WID, or chosen by cost model (default)")
    p.add_argument("--strategy", default="oop",
                   help="oop | iop-sort | iop-slack:DUR[,consistent|generous] (default: oop)")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                   help=f"rows per batch read (default {DEFAULT_BATCH_SIZE}); results do not "
                        "depend on it")
    p.add_argument("--out", default="-",
                   help="results: FILE.parquet|.csv|.ndjson|.arrow, a folder DIR/ of rolling "
                        "part files, or '-' for stdout (default)")
    p.add_argument("--out-format", choices=["parquet", "csv", "ndjson", "arrow"],
                   help="output format when the target's extension cannot say (stdout: csv)")
    p.add_argument("--metrics", help="write a JSON metrics summary to this file at the end")
    p.add_argument("--metrics-every", metavar="AMOUNT",
                   help=f"append a metrics line to --metrics-log every {AMOUNT_HELP}")
    p.add_argument("--metrics-log", help="JSON-lines file for --metrics-every")
    p.add_argument("--checkpoint-dir", help="write durable checkpoints here; rerunning the same "
                                            "command continues from the newest one")
    p.add_argument("--checkpoint-every", metavar="AMOUNT", default="1min",
                   help=f"checkpoint interval: {AMOUNT_HELP} (default 1min)")
    p.add_argument("--keep-checkpoints", type=int, default=3,
                   help="checkpoints kept in --checkpoint-dir (default 3)")
    p.add_argument("--max-ahead", metavar="DUR",
                   help="a tuple further ahead of the punctuation than DUR (a bad clock) does "
                        "not advance it and follows --late, counted as 'ahead' (default: no "
                        "guard: one row a year ahead makes every later row late)")
    p.add_argument("--max-state", metavar="BYTES",
                   help="stop with a one-line error before the operators' state would exceed "
                        "this (e.g. 2GiB; default: half the memory this process may use, "
                        "cgroup limits included)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="run the window on N key partitions, one thread each (same rows in "
                        "the same order); default: all cores this process may use (1 with "
                        "--checkpoint-dir, --strategy other than oop, or no --key); with "
                        "--spark it applies inside each task")
    p.add_argument("--quiet", action="store_true", help="no progress line")
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
    if args.batch_size is None or args.batch_size < 1:
        raise ConfigError(f"--batch-size {args.batch_size}: give a row count of at least 1")
    if args.allowed_lateness is not None and args.late != "update":
        raise ConfigError("--allowed-lateness says how late a tuple may be to revise a result; "
                          "it works with --late update only")
    if (args.metrics_every is None) != (args.metrics_log is None):
        raise ConfigError("--metrics-every and --metrics-log go together (how often, and the "
                          "JSON-lines file to append to)")
    if args.keep_checkpoints < 1:
        raise ConfigError(f"--keep-checkpoints {args.keep_checkpoints}: keep at least 1")
    if args.checkpoint_dir is not None:
        from oop.replay.inputs import is_folder_target

        for flag, target in (("--out", args.out), ("--late-out", args.late_out)):
            if target is not None and not is_folder_target(target):
                raise ConfigError(
                    f"with --checkpoint-dir, {flag} must be a folder (e.g. {flag} results/): "
                    "part files are committed with each checkpoint, so a restart neither "
                    f"repeats nor loses rows; {target!r} is not a folder")
        if args.input == "-":
            raise ConfigError("standard input cannot be re-read after a crash: --checkpoint-dir "
                              "needs a file, folder or Redis input")
        if args.arrival and args.arrival_bound is not None:
            raise ConfigError("--arrival-bound reorders in memory and cannot resume; with "
                              "--checkpoint-dir use --arrival on a finite file input")
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads {args.threads}: give at least 1")
    if args.threads is not None and args.threads > 1 and args.checkpoint_dir is not None:
        raise ConfigError(f"--threads {args.threads} cannot be checkpointed yet: drop "
                          "--checkpoint-dir, or use --threads 1")
    if args.threads is not None and args.threads > 1 and args.strategy != "oop":
        raise ConfigError(f"--threads {args.threads} runs the oop window; --strategy "
                          f"{args.strategy} runs on one thread: drop --threads")
    if args.strategy != "oop" and args.late == "update":
        raise ConfigError("--late update works with --strategy oop only")


def punctuation_spec(args: argparse.Namespace) -> Any:
    """The source's generator config: the spec, with the default cadence unless it names one."""
    from oop.punctuation import DEFAULT_CADENCE_ROWS, Cadence, parse_punctuation

    cfg = parse_punctuation(args.punctuation)
    return cfg if isinstance(cfg, Cadence) else Cadence(cfg, DEFAULT_CADENCE_ROWS)


# ---- the plan ----------------------------------------------------------
def build_plan(src: Any, args: argparse.Namespace, unit: str) -> Any:
    """The `oop` plan after the source: a window aggregation (or an IOP plan)."""
    from oop.replay.specs import parse_aggs, parse_window
    from oop.stream.timecol import parse_duration

    kind = parse_window(args.window, unit)
    aggs = parse_aggs(args.agg)
    if args.strategy == "oop":
        threads = replay_threads(args)
        if args.late == "update":
            return src.window(kind, aggs, by=tuple(args.key), method=args.method, late="update",
                              allowed_lateness=parse_duration(args.allowed_lateness or "0",
                                                              unit),
                              name="window", threads=threads)
        return src.window(kind, aggs, by=tuple(args.key), method=args.method, name="window",
                          threads=threads)
    from oop.query import WindowQuery, parse_strategy

    strategy = parse_strategy(args.strategy)
    return WindowQuery([src], kind, aggs, by=tuple(args.key)).plan(strategy)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, at most ``os.cpu_count()``)."""
    import os

    n = os.cpu_count() or 1
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        pass
    return max(1, n)


def replay_threads(args: argparse.Namespace) -> int:
    """``--threads``, or by default every usable core (one with ``--checkpoint-dir``)."""
    threads = getattr(args, "threads", None)
    if threads is not None:
        return int(threads)
    return 1 if getattr(args, "checkpoint_dir", None) is not None else usable_cores()


def pipelined(args: argparse.Namespace) -> bool:
    """Whether the run uses several threads: then the input is read ahead and the output
    written on threads of their own (:mod:`oop.plan.background`)."""
    return args.strategy == "oop" and not args.spark and replay_threads(args) > 1


def _source(args: argparse.Namespace) -> tuple[Any, str]:
    import oop
    from oop.replay.inputs import is_live, open_input
    from oop.stream.timecol import check_time_column

    conn = open_input(args)
    if pipelined(args) and not is_live(args):
        from oop.plan.background import ReadAhead

        conn = ReadAhead(conn)  # a finite input is decoded ahead, on its own thread
    late = "side_output" if args.late == "side" else args.late
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


def _plan_of(stream: Any) -> dict[str, Any]:
    """What the window operator chose (method, layout, layout switches, cost-model terms), if any."""
    info = getattr(getattr(getattr(stream, "node", None), "op", None), "plan_info", None)
    return dict(info) if isinstance(info, dict) else {}


def resolve_late(args: argparse.Namespace) -> str:
    """The late policy from ``--late`` and ``--late-out`` (side output needs a target)."""
    late = args.late or ("side" if args.late_out else "drop")
    if late == "side_output":
        late = "side"
    if args.late_out and late != "side":
        raise ConfigError(f"--late-out takes the tuples that --late side routes; it cannot go "
                          f"with --late {late}")
    if late == "side" and not args.late_out:
        raise ConfigError("--late side writes the late tuples somewhere: add --late-out PATH "
                          "(or use --late drop to count them only)")
    if late == "side" and args.spark and getattr(args, "shards", None):
        raise ConfigError("--late side / --late-out is not supported with --shards yet (the "
                          "late tuples stay in the Spark tasks); drop --shards, or use --late "
                          "drop (the late count is in the summary)")
    return late


def write_late(res: Any, path: str, schema: pa.Schema) -> int:
    """Write the rows every side-output policy routed (the source's late tuples) to ``path``."""
    tables = [t for t in res.late.values() if t.num_rows]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    write_table(table, path)
    return table.num_rows


# ---- running -----------------------------------------------------------
def run_replay(args: argparse.Namespace) -> int:
    args.late = resolve_late(args)
    if not args.punctuation:
        check_args(args)
    if args.spark:
        try:
            from oop.spark.cli import run_replay as spark_replay
        except ImportError as e:
            raise ConfigError(
                f"--spark needs PySpark: install the spark extra (pip install -e '.[spark]') ({e})"
            ) from e
        args.punctuation = _with_cadence(args.punctuation)
        return int(spark_replay(args))
    if args.verify or args.shards:
        raise ConfigError("--verify and --shards need --spark")
    check_args(args)
    options = _job_options(args)
    t0 = _time.perf_counter()
    src, unit = _source(args)
    stream = build_plan(src, args, unit)
    from oop.replay.inputs import is_live
    from oop.window.threaded import ThreadedWindow

    if isinstance(stream.node.op, ThreadedWindow) and not is_live(args):
        stream.node.op.lag = 1  # a finite input: results of punctuation k leave at k+1
    from oop.plan.writer import LateWriter, SinkWriter
    from oop.replay.inputs import open_output
    from oop.plan.job import Job

    out = open_output(args.out, args.out_format, "out")
    if pipelined(args):
        from oop.plan.background import BackgroundSink

        out = BackgroundSink(out)  # the results are encoded and written on their own thread
    writer = SinkWriter(out, name="sink")
    late = LateWriter(open_output(args.late_out, None, "late-out")) if args.late_out else None
    ex, _ = stream.executor(terminal=writer)
    job = Job(ex, writer, late, options)
    from oop.limits import state_budget

    with compile_timer() as jit, state_budget(_max_state(args)):
        job.open()
        outcome = job.run()
    wall = _time.perf_counter() - t0
    plan = _plan_of(stream)
    for what, part in (("reader_cpu_s", getattr(src.node.op, "connector", None)),
                       ("writer_cpu_s", out)):
        if hasattr(part, "cpu_s"):  # the threads of a pipelined run (oop.plan.background)
            plan[what] = round(part.cpu_s, 3)
    summary = _summary(ex, writer, late, wall, plan, jit.seconds, outcome)
    if outcome.stopped_by in ("SIGINT", "SIGTERM"):  # the job said it in one line
        if args.metrics:
            Path(args.metrics).write_text(json.dumps(summary, indent=2, default=str))
        return outcome.code
    _report(args, summary, jit.seconds)
    return outcome.code


def _max_state(args: argparse.Namespace) -> int | None:
    """``--max-state`` in bytes (None: the default budget)."""
    if args.max_state is None:
        from oop.limits import default_state_limit

        return default_state_limit()
    return parse_bytes(args.max_state, "--max-state")


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10,
               "m": 2**20, "g": 2**30}


def parse_bytes(text: str, flag: str) -> int:
    """``2GiB``, ``500MB``, ``1048576`` -> bytes; a one-line error otherwise."""
    import re

    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _BYTE_UNITS or float(m.group(1)) <= 0:
        raise ConfigError(f"{flag} {text!r}: give a size such as 2GiB, 500MB or 1048576")
    return int(float(m.group(1)) * _BYTE_UNITS[unit])


def _with_cadence(spec: str) -> str:
    return spec if "cadence:" in spec.lower() else f"{spec}+cadence:{_default_cadence()}rows"


def _default_cadence() -> int:
    from oop.punctuation import DEFAULT_CADENCE_ROWS

    return DEFAULT_CADENCE_ROWS


def _job_options(args: argparse.Namespace) -> Any:
    from oop.io.amount import parse_amount
    from oop.plan.job import JobOptions

    idle = None
    if args.stop_after_idle is not None:
        idle = parse_amount(args.stop_after_idle, what="--stop-after-idle",
                            allow_rows=False).seconds
    return JobOptions(
        progress=not args.quiet,
        progress_every=1.0 if sys.stderr.isatty() else 5.0,
        metrics_every=None if args.metrics_every is None else parse_amount(
            args.metrics_every, what="--metrics-every"),
        metrics_log=args.metrics_log,
        stop_after_idle=idle,
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=parse_amount(args.checkpoint_every, what="--checkpoint-every"),
        keep_checkpoints=args.keep_checkpoints,
        manifest={"command": "oop replay"},
    )


def _summary(ex: Any, writer: Any, late: Any, wall: float, plan: dict[str, Any],
             jit_s: float, outcome: Any) -> dict[str, Any]:
    ops = {n.op.name: n.op.metrics for n in ex.nodes}
    sources = [s.op.name for s in ex.sources]
    tuples_in = sum(ops[name].tuples_in for name in sources)
    lat: dict[str, float] = {}
    for m in ops.values():
        if m.latency_ns:
            lat = m.latency_summary()
    from oop.metrics import peak_rss_bytes

    return {
        "tuples_in": tuples_in,
        "late": sum(m.late_total for m in ops.values()),
        "windows_out": writer.rows,
        "late_out_rows": None if late is None else late.rows,
        "peak_state_items": sum(m.peak_state_items for m in ops.values()),
        "peak_state_bytes": sum(m.peak_state_bytes for m in ops.values()),
        "peak_rss_bytes": peak_rss_bytes(),
        "wall_s": wall,
        "tuples_per_s": tuples_in / wall if wall > 0 else None,
        "jit_compile_s": jit_s,  # part of wall_s: numba compiling kernels (first run only)
        "checkpoints": outcome.checkpoints,
        "checkpoint_s": outcome.checkpoint_s,
        "resumed": outcome.resumed_from is not None,
        "stopped_by": outcome.stopped_by,
        **lat,
        "plan": plan or {},
        "operators": {name: m.as_dict() for name, m in ops.items()},
    }


def _report(args: argparse.Namespace, summary: dict[str, Any], jit_s: float) -> None:
    err = sys.stderr
    if args.out != "-":
        print(f"oop replay: {summary['windows_out']} rows -> {args.out}", file=err)
    if args.late_out:
        print(f"oop replay: {summary['late_out_rows']} late tuples -> {args.late_out}", file=err)
    if args.metrics:
        Path(args.metrics).write_text(json.dumps(summary, indent=2, default=str))
    wall = summary["wall_s"]
    print(
        f"oop replay: {summary['tuples_in']} tuples in {wall:.2f}s "
        f"({(summary['tuples_per_s'] or 0) / 1e6:.2f} M/s), {summary['late']} late, "
        f"{summary['windows_out']} windows, peak state {summary['peak_state_bytes']} B, "
        f"peak RSS {summary['peak_rss_bytes'] / 2**20:.0f} MiB",
        file=err,
    )
    n = summary["tuples_in"]
    if n and summary["late"] > LATE_WARN_FRACTION * n:
        print(f"oop replay: warning: {summary['late']} of {n} tuples "
              f"({100 * summary['late'] / n:.1f}%) were late under --punctuation "
              f"{args.punctuation} and were {'dropped' if args.late == 'drop' else 'routed'}; "
              "a larger bound (bounded:DUR) or adaptive punctuation keeps more", file=err)
    if jit_s >= _JIT_NOTE_S:
        print(f"oop replay: {jit_s:.2f}s of that compiled numba kernels (a first run; "
              "they are cached, later runs skip it)", file=err)
    plan = summary["plan"]
    if plan.get("method"):
        switches = plan.get("layout_switches", 0)
        print(f"oop replay: window method {plan['method']}, layout {plan.get('layout', '?')}"
              + (f" ({switches} layout switch{'es' if switches > 1 else ''})" if switches else ""),
              file=err)


def write_table(table: pa.Table, target: str, fmt: str | None = None) -> None:
    """Write a whole table to ``target`` through the sinks (format by extension or ``fmt``)."""
    from oop.io.sinks import open_sink

    sink = open_sink(target, fmt, "out")
    sink.open(table.schema)
    try:
        for b in table.to_batches():
            sink.write(b)
    except BaseException:
        sink.abort()
        raise
    sink.close()


def print_csv(table: pa.Table) -> None:
    """Write ``table`` to stdout as CSV (nested columns as JSON text)."""
    import pyarrow.csv as pacsv

    from oop.io.writers import csv_ready

    sink = pa.BufferOutputStream()
    pacsv.write_csv(csv_ready(table), sink)
    sys.stdout.write(sink.getvalue().to_pybytes().decode())
