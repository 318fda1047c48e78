"""The flags ``oop replay`` and ``oop sql`` share, registered and read in one place.

Both commands run a plan through the same job loop (:class:`oop.plan.job.Job`);
what they differ in is only how the plan is built (flags naming a window and
aggregates, or a SQL script). Everything after that -- where the results go
(``--out``, ``--out-format``), what happens to late tuples (``--late``,
``--late-out``, ``--allowed-lateness``), the plan family (``--strategy``),
metrics, checkpoints, the state budget, the bad-clock guard, idle stop and the
progress line -- is registered by :func:`add_output_flags` and
:func:`add_runtime_flags` and turned into sinks, a late policy, job options and
a run by the functions below. ``oop replay --spark`` reads the same flags
(:mod:`oop.spark.cli`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time as _time
from pathlib import Path
from typing import Any, Callable

from oop.errors import ConfigError
from oop.io.amount import AMOUNT_HELP

__all__ = ["FORMATS", "command_parser", "add_output_flags", "add_runtime_flags",
           "resolve_late", "engine_late", "check_runtime", "parse_bytes", "max_state",
           "job_options", "open_writers", "run_job", "summary", "report"]

FORMATS = ["parquet", "csv", "ndjson", "arrow"]
JIT_NOTE_S = 0.5  # report numba compile time on stderr from this many seconds
LATE_WARN_FRACTION = 0.01  # warn when more than this fraction of the input was late
STRATEGY_HELP = "oop | iop-sort | iop-bsort:N | iop-slack:DUR[,consistent|generous]"


# ---- registering -----------------------------------------------------------
def command_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", name: str,
                   help: str, doc: str | None, epilog: str) -> argparse.ArgumentParser:
    """A subcommand's parser: its module doc's second paragraph as description, ``epilog``
    (the examples) kept as written."""
    return sub.add_parser(name, help=help, description=doc.split("\n\n")[1] if doc else None,
                          formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog)


def add_output_flags(p: argparse.ArgumentParser, *, out_default: str | None = "-",
                     out_help: str = "or '-' for stdout (default)",
                     out_format_aliases: tuple[str, ...] = ()) -> None:
    """``--out``, ``--out-format`` and the late-tuple flags."""
    p.add_argument("--late", default=None,
                   choices=["drop", "side", "side_output", "raise", "update"],
                   help="late-tuple policy (default: drop, counted); 'side' writes them to "
                        "--late-out; 'update' re-emits revised windows (column is_revision) "
                        "for tuples up to --allowed-lateness late")
    p.add_argument("--late-out", help="where --late side writes the late tuples (same forms "
                                      "as --out); implies --late side")
    p.add_argument("--allowed-lateness", default=None,
                   help="with --late update: how late (DUR) a tuple may be and still revise")
    p.add_argument("--out", default=out_default,
                   help="results: FILE.parquet|.csv|.ndjson|.arrow, a folder DIR/ of rolling "
                        f"part files, {out_help}")
    p.add_argument("--out-format", *out_format_aliases, dest="out_format", choices=FORMATS,
                   help="output format when the target's extension cannot say (stdout: csv)")


def add_runtime_flags(p: argparse.ArgumentParser, *, batch_size: int | None,
                      batch_help: str) -> None:
    """Plan family, batch size, metrics, checkpoints, state budget, guards, idle stop, progress."""
    p.add_argument("--strategy", default="oop",
                   help=f"{STRATEGY_HELP} (default: oop)")
    p.add_argument("--batch-size", type=int, default=batch_size, help=batch_help)
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
    p.add_argument("--stop-after-idle", metavar="DUR",
                   help="end the feed after this much wall time without new data (e.g. 30s)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


# ---- reading ---------------------------------------------------------------
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
    if late == "side" and getattr(args, "spark", False) and getattr(args, "shards", None):
        raise ConfigError("--late side / --late-out is not supported with --shards yet (the "
                          "late tuples stay in the Spark tasks); drop --shards, or use --late "
                          "drop (the late count is in the summary)")
    return late


def engine_late(args: argparse.Namespace) -> str:
    """The sources' late policy for the resolved ``--late`` (``side`` is ``side_output``)."""
    return "side_output" if args.late == "side" else str(args.late)


def check_runtime(args: argparse.Namespace, out: str | None = None) -> None:
    """Refuse, in one line, output and runtime flags that cannot work together.

    ``out``: the results target when it is not ``--out`` (``oop sql``'s INSERT table).
    """
    if args.batch_size is not None and args.batch_size < 1:
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
        from oop.command.inputs import is_folder_target

        for flag, target in (("--out", out if out is not None else args.out),
                             ("--late-out", args.late_out)):
            if target is not None and not is_folder_target(target):
                raise ConfigError(
                    f"with --checkpoint-dir, {flag} must be a folder (e.g. {flag} results/): "
                    "part files are committed with each checkpoint, so a restart neither "
                    f"repeats nor loses rows; {target!r} is not a folder")
    if args.strategy != "oop" and args.late == "update":
        raise ConfigError("--late update works with --strategy oop only")


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10,
               "m": 2**20, "g": 2**30}


def parse_bytes(text: str, flag: str) -> int:
    """``2GiB``, ``500MB``, ``1048576`` -> bytes; a one-line error otherwise."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _BYTE_UNITS or float(m.group(1)) <= 0:
        raise ConfigError(f"{flag} {text!r}: give a size such as 2GiB, 500MB or 1048576")
    return int(float(m.group(1)) * _BYTE_UNITS[unit])


def max_state(args: argparse.Namespace) -> int | None:
    """``--max-state`` in bytes (None: the default budget)."""
    if args.max_state is None:
        from oop.limits import default_state_limit

        return default_state_limit()
    return parse_bytes(args.max_state, "--max-state")


def job_options(args: argparse.Namespace, command: str) -> Any:
    """The job loop's options from the runtime flags (``command`` prefixes stderr lines)."""
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
        manifest={"command": command},
        prefix=command,
    )


def open_writers(args: argparse.Namespace, out: Any, fmt: str | None,
                 name: str = "sink") -> tuple[Any, Any]:
    """The results writer over ``out`` (a target or a Sink) and the ``--late-out`` writer."""
    from oop.plan.writer import LateWriter, SinkWriter
    from oop.command.inputs import open_output

    sink = open_output(out, fmt, "out") if isinstance(out, str) else out
    writer = SinkWriter(sink, name=name)
    late = LateWriter(open_output(args.late_out, None, "late-out")) if args.late_out else None
    return writer, late


# ---- running ---------------------------------------------------------------
def run_job(stream: Any, writer: Any, late: Any, args: argparse.Namespace, command: str, *,
            out_label: str, late_hint: str, t0: float | None = None,
            extra: Callable[[], dict[str, Any]] | None = None) -> int:
    """Run ``stream`` into ``writer`` as a job; report on stderr; return the exit code.

    ``out_label``: where the results went (for the summary line; '-' says nothing);
    ``late_hint``: what decided lateness (the punctuation flag or the tables' watermarks);
    ``t0``: when the run started (``perf_counter``; default now), for the wall time;
    ``extra``: called after the run, its entries added to the ``--metrics`` JSON.
    """
    from oop import compile_ahead
    from oop.limits import state_budget
    from oop.metrics import compile_timer
    from oop.plan.job import Job
    from oop.command.startup_gc import settle

    t0 = _time.perf_counter() if t0 is None else t0
    ex, _ = stream.executor(terminal=writer)
    _check_plan(ex, writer, late, args)
    job = Job(ex, writer, late, job_options(args, command))
    waited = compile_ahead.waited_s()  # this run's waits only (a process may run several)
    with compile_timer() as jit, state_budget(max_state(args)):
        job.open()
        settle()  # start-up is over: collect garbage again, skipping what start-up built
        outcome = job.run()
    wall = _time.perf_counter() - t0
    s = summary(ex, writer, late, wall, _plan_of(stream), jit.seconds, outcome,
                compile_ahead.waited_s() - waited)
    if extra is not None:
        s.update(extra())
    _note_adopted(s)
    if outcome.stopped_by in ("SIGINT", "SIGTERM"):  # the job said it in one line
        if args.metrics:
            Path(args.metrics).write_text(json.dumps(s, indent=2, default=str))
        return int(outcome.code)
    report(args, s, command, out_label=out_label, late_hint=late_hint)
    return int(outcome.code)


def _check_plan(ex: Any, writer: Any, late: Any, args: argparse.Namespace) -> None:
    """One-line errors for a built plan: a source routing late tuples with nowhere to put
    them; with ``--checkpoint-dir``, a source or target a restart could not resume."""
    from oop.stream.late import LatePolicy

    if late is None:
        for s in ex.sources:
            if s.op.late_policy is LatePolicy.SIDE_OUTPUT:
                raise ConfigError(f"source {s.op.name!r} routes its late tuples (late = "
                                  "side_output): give --late-out PATH for them")
    if args.checkpoint_dir is not None:
        from oop.plan.output import check_restartable

        check_restartable(ex, writer, late)


def _plan_of(stream: Any) -> dict[str, Any]:
    """What the window operator chose (method, layout, layout switches, cost terms), if any."""
    info = getattr(getattr(getattr(stream, "node", None), "op", None), "plan_info", None)
    return dict(info) if isinstance(info, dict) else {}


def summary(ex: Any, writer: Any, late: Any, wall: float, plan: dict[str, Any],
            jit_s: float, outcome: Any, wait_s: float) -> dict[str, Any]:
    """The ``--metrics`` JSON: counts, peaks, throughput, checkpoints, per-operator metrics."""
    from oop.metrics import peak_rss_bytes

    ops = {n.op.name: n.op.metrics for n in ex.nodes}
    sources = [s.op.name for s in ex.sources]
    tuples_in = sum(ops[name].tuples_in for name in sources)
    lat: dict[str, float] = {}
    for m in ops.values():
        if m.latency_ns:
            lat = m.latency_summary()
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
        "compile_wait_s": wait_s,  # part of wall_s: waiting for the compile-ahead helper
        "checkpoints": outcome.checkpoints,
        "checkpoint_s": outcome.checkpoint_s,
        "resumed": outcome.resumed_from is not None,
        "stopped_by": outcome.stopped_by,
        **lat,
        "plan": plan or {},
        "operators": {name: m.as_dict() for name, m in ops.items()},
        "partitions_from_checkpoint": _adopted_partitions(ex),
    }


def _adopted_partitions(ex: Any) -> dict[str, dict[str, int]]:
    """Operators on key partitions that resumed on their checkpoint's partition count rather
    than the one this run's ``--threads`` asked for: ``{name: {"partitions", "asked"}}``."""
    out: dict[str, dict[str, int]] = {}
    for n in ex.nodes:
        asked = getattr(n.op, "threads_asked", None)  # KeyedJoin, ThreadedWindow / Adapt
        if asked is not None:
            out[n.op.name] = {"partitions": int(n.op.n), "asked": int(asked)}
    return out


def _note_adopted(s: dict[str, Any]) -> None:
    """Under ``threads.operators`` (the plan's notes, ``oop sql``), one more note per
    operator that resumed on its checkpoint's partition count: the plan's note names the
    count this run's ``--threads`` asked for, not the one the run used."""
    notes = s.get("threads", {}).get("operators")
    if notes is None:
        return
    for name, p in s["partitions_from_checkpoint"].items():
        notes.append(f"{name}: resumed on the checkpoint's {p['partitions']} key partitions "
                     f"(this run asked for {p['asked']}; the rows do not depend on it)")


def report(args: argparse.Namespace, s: dict[str, Any], command: str, *,
           out_label: str, late_hint: str) -> None:
    """The end-of-run lines on stderr (and the ``--metrics`` file)."""
    err = sys.stderr
    if out_label != "-":
        print(f"{command}: {s['windows_out']} rows -> {out_label}", file=err)
    if args.late_out:
        print(f"{command}: {s['late_out_rows']} late tuples -> {args.late_out}", file=err)
    if args.metrics:
        Path(args.metrics).write_text(json.dumps(s, indent=2, default=str))
    wall = s["wall_s"]
    print(
        f"{command}: {s['tuples_in']} tuples in {wall:.2f}s "
        f"({(s['tuples_per_s'] or 0) / 1e6:.2f} M/s), {s['late']} late, "
        f"{s['windows_out']} windows, peak state {s['peak_state_bytes']} B, "
        f"peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB",
        file=err,
    )
    n = s["tuples_in"]
    if n and s["late"] > LATE_WARN_FRACTION * n:
        print(f"{command}: warning: {s['late']} of {n} tuples "
              f"({100 * s['late'] / n:.1f}%) were late under {late_hint} and were "
              f"{'dropped' if args.late == 'drop' else 'routed'}; "
              "a larger bound (bounded:DUR) or adaptive punctuation keeps more", file=err)
    jit_s, wait_s = s["jit_compile_s"], s["compile_wait_s"]
    if jit_s + wait_s >= JIT_NOTE_S:
        helper = f", {wait_s:.2f}s waited for kernels compiled on another core" if wait_s else ""
        print(f"{command}: {jit_s:.2f}s of that compiled numba kernels{helper} (a first run; "
              "they are cached, later runs skip it)", file=err)
    plan = s["plan"]
    if plan.get("method"):
        switches = plan.get("layout_switches", 0)
        print(f"{command}: window method {plan['method']}, layout {plan.get('layout', '?')}"
              + (f" ({switches} layout switch{'es' if switches > 1 else ''})" if switches else ""),
              file=err)
