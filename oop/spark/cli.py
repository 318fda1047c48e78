"""``oop replay --spark``: read and replay through PySpark, optionally sharded and verified.

Called by the ``oop replay`` parser (:mod:`oop.replay.cli`) when ``--spark``
is given. Spark reads the input (Parquet file/folder or CSV); the rows are
replayed in arrival order (``--arrival COL`` or file order) into the window
aggregation -- on the driver (:func:`oop.spark.replay`), or with ``--shards
N`` sharded over Spark tasks (:mod:`oop.spark.plans`; Parquet input takes the
file path, where each task reads its own fragments with pyarrow; CSV input
and ``--punctuation ideal`` take the ``mapInArrow`` path). ``--verify`` runs the
same query as Spark SQL and prints ONE JSON line to stdout::

    {"windows": n, "matched": n, "mismatched": n, "missing": n, "extra": n, "late": n}

Exit codes: 0 success (and, with ``--verify``, every window matched); 1
``--verify`` found a difference; 2 bad input -- missing or misspelled column,
non-time ``--time`` column, empty dataset, corrupt/unreadable file, no Java
-- reported in one line (an :class:`oop.errors.OopError`). Works under
``spark-submit`` (the active session and its master win over ``--master``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time as _time
from pathlib import Path
from typing import Any

import pyarrow as pa


from oop.command.flags import engine_late
from oop.errors import ConfigError, EmptyInputError, UnknownColumnError

__all__ = ["run_replay", "read_spark_input", "main"]


def _did_you_mean(name: str, columns: list[str]) -> str:
    close = difflib.get_close_matches(name, columns, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _require(df: Any, col: str, flag: str, path: str) -> None:
    if col not in df.columns:
        raise UnknownColumnError(
            f"{flag} column {col!r} is not in {path!r}{_did_you_mean(col, df.columns)}; "
            f"its columns are {df.columns}"
        )


def read_spark_input(spark: Any, path: str) -> Any:
    """A DataFrame over a Parquet file/folder or a CSV/TSV file; one-line errors."""
    from oop.spark.session import spark_errors

    p = Path(path)
    if "://" not in path and not p.exists():
        raise FileNotFoundError(f"no file or folder at {path!r}")
    with spark_errors(f"cannot read {path!r}"):
        if p.suffix.lower() in (".csv", ".tsv"):
            df = (spark.read.option("header", "true").option("inferSchema", "true")
                  .option("mode", "FAILFAST")
                  .option("sep", "\t" if p.suffix.lower() == ".tsv" else ",").csv(path))
        else:
            df = spark.read.parquet(path)
        empty = df.limit(1).count() == 0
    if empty:
        raise EmptyInputError(f"input {path!r} has no rows; nothing to replay")
    return df


def _without(spark: Any, df: Any, late: pa.Table | None) -> Any:
    """``df`` minus the rows the engine declared late (a multiset difference)."""
    if late is None or late.num_rows == 0:
        return df
    from pyspark.sql import functions as F

    late_df = spark.createDataFrame(late.select(df.columns).to_pandas())
    late_df = late_df.select([F.col(c).cast(df.schema[c].dataType) for c in df.columns])
    return df.exceptAll(late_df)


def run_replay(args: argparse.Namespace) -> int:
    """Run ``oop replay --spark``; returns the exit code (see the module docstring)."""
    from oop.window.specs import parse_aggs, parse_window
    from oop.spark.plans import sharded_window
    from oop.spark.common import IDEAL, check_time, parse_punctuation_arg
    from oop.spark.replay import replay_stream
    from oop.spark.session import get_spark, spark_errors
    from oop.spark.verify import compare_windows, last_revisions, spark_windows

    t_jvm = _time.perf_counter()
    spark = get_spark(getattr(args, "master", None) or "local[*]", app_name="oop replay")
    jvm_s = _time.perf_counter() - t_jvm
    t0 = _time.perf_counter()
    df = read_spark_input(spark, args.input)
    _require(df, args.time, "--time", args.input)
    is_ts, unit = check_time(df, args.time, args.time_unit, what=f"--time in {args.input!r}")
    for k in args.key or []:
        _require(df, k, "--key", args.input)
    if args.arrival:
        _require(df, args.arrival, "--arrival", args.input)
    kind = parse_window(args.window, unit)
    if type(kind).__name__ == "Session":
        raise ConfigError(f"--window {args.window}: session windows are not supported with "
                          "--spark yet; drop --spark to replay them with oop")
    aggs = parse_aggs(args.agg)
    for a in aggs:
        if a.column is not None:
            _require(df, a.column, "--agg", args.input)
    punct = parse_punctuation_arg(args.punctuation)
    late = engine_late(args)
    keys = tuple(args.key or ())
    batch_size = int(getattr(args, "batch_size", 65_536) or 65_536)
    strategy = getattr(args, "strategy", "oop") or "oop"
    if strategy != "oop":
        raise ConfigError(f"--spark runs the oop plan; --strategy {strategy!r} is not supported "
                          "with --spark (drop --spark to run IOP baselines)")
    method = getattr(args, "method", "auto") or "auto"
    if late == "update" and args.shards:
        raise ConfigError("--late update is not supported with --shards yet (revisions would "
                          "have to be merged across shards); drop --shards")
    summary_late = 0
    # --verify compares over the rows the engine did not declare late: keep them (side output)
    keep_late = args.verify and not args.shards and late == "drop"
    # --threads: key partitions inside each task (or the driver's plan); by default 1, since
    # Spark already runs one task per core
    threads = int(getattr(args, "threads", None) or 1)
    late_rows: pa.Table | None = None
    with spark_errors(f"replay of {args.input!r}"):
        if args.shards:
            # Parquet input: the file path (each Spark task reads its own fragments with
            # pyarrow, only partial windows cross into Spark); CSV and the ideal: mapInArrow
            files = (Path(args.input).suffix.lower() not in (".csv", ".tsv")
                     and not (isinstance(punct, str) and punct == IDEAL))
            out = sharded_window(args.input if files else df, time=args.time, unit=unit, kind=kind, aggs=aggs, by=keys,
                                 shards=int(args.shards), punctuation=punct, arrival=args.arrival,
                                 late=late, batch_size=batch_size, method=method,
                                 threads=threads)
            table, late_total, tuples_in = out.table, out.late_total, out.tuples_in
            print(f"oop replay --spark: sharded over {args.shards} shards, path {out.path}",
                  file=sys.stderr)
        else:
            src = replay_stream(df, time=args.time, unit=unit, arrival=args.arrival,
                                punctuation=punct,
                                late="side_output" if keep_late else late,
                                batch_size=batch_size, name="input")
            extra: dict[str, Any] = {}
            if late == "update":  # the window re-emits revised rows (column is_revision)
                from oop.stream.timecol import parse_duration

                extra = {"late": "update", "allowed_lateness": parse_duration(
                    getattr(args, "allowed_lateness", "0") or "0", unit)}
            res = src.window(kind, aggs, by=keys, method=method, name="window", threads=threads,
                             **extra).run()
            table, late_total, tuples_in = res.table, res.late_total, res.tuples_in
            if late in ("drop", "side_output") and res.late:
                late_rows = pa.concat_tables(list(res.late.values()))
            if getattr(args, "late_out", None):  # --late side: the source's late tuples
                from oop.io.tables import write_late

                summary_late = write_late(res, args.late_out, src.node.op.output.schema)
    wall = _time.perf_counter() - t0
    summary: dict[str, Any] = {"tuples_in": tuples_in, "late": late_total,
                               "windows_out": table.num_rows, "wall_s": wall, "jvm_s": jvm_s,
                               "shards": args.shards, "master": spark.sparkContext.master}
    if getattr(args, "late_out", None):
        summary["late_out_rows"] = summary_late
        print(f"oop replay --spark: {summary_late} late tuples -> {args.late_out}",
              file=sys.stderr)
    if args.out and args.out != "-":
        from oop.io.tables import write_table

        write_table(table, args.out, getattr(args, "out_format", None))
        print(f"oop replay --spark: {table.num_rows} rows -> {args.out}", file=sys.stderr)
    elif not args.verify:
        from oop.io.tables import print_csv

        print_csv(table)
    code = 0
    if args.verify:
        with spark_errors("Spark SQL ground truth"):
            on_time = _without(spark, df, late_rows)
            truth = spark_windows(on_time, time=args.time, unit=unit, kind=kind, aggs=aggs,
                                  by=keys).toArrow()
        final = last_revisions(table, keys) if late == "update" else table  # revisions folded
        rep = compare_windows(final, truth, by=keys, values=[a.name for a in aggs],
                              late=late_total)
        summary["verify"] = rep.as_dict()
        print(rep.json())
        sys.stdout.flush()
        code = 0 if rep.ok else 1
    if args.metrics:
        Path(args.metrics).write_text(json.dumps(summary, indent=2, default=str))
    print(f"oop replay --spark: {tuples_in} tuples in {wall:.2f}s (JVM start {jvm_s:.1f}s), "
          f"{late_total} late, {table.num_rows} windows", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - spark-submit entry
    """Entry point for ``spark-submit oop/spark/cli.py replay ... --spark``."""
    from oop.cli import main as oop_main

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] != "replay":
        argv = ["replay", *argv]
    if "--spark" not in argv:
        argv.append("--spark")
    return oop_main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
