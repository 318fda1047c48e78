"""``oop replay``: replay a file's rows as a disordered stream into a window aggregation.

Rows are replayed in file order (Parquet file or folder, or CSV), or in the
order of ``--arrival COL`` when given. The source punctuates with the chosen
generator and applies the late policy; the window aggregation emits each
window as soon as punctuation covers it. Results go to ``--out`` (Parquet)
or, without it, to stdout as CSV; ``--metrics`` writes a JSON summary; logs
and the progress bar go to stderr.

Exit codes: 0 success; 1 ``--verify`` found differences (Spark); 2 bad input
(missing column, unparsable spec, non-time column, unreadable file).
"""

from __future__ import annotations

import argparse
import json
import sys
import time as _time
from pathlib import Path
from typing import Any

import pyarrow as pa

from oop.errors import ConfigError, EmptyInputError
from oop.metrics import compile_timer
from oop.replay.specs import AGG_FORMS

__all__ = ["register", "run_replay", "read_input", "build_stream"]

_PROGRESS_MIN_ROWS = 500_000
_JIT_NOTE_S = 0.5  # report numba compile time on stderr from this many seconds


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "replay",
        help="replay a file as a disordered stream into a window aggregation",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  oop replay --input flows.parquet --time ts --time-unit ms --key srcIP \\\n"
            "      --window tumbling:1s --agg count --agg sum:len --punctuation bounded:5s\n"
            "  oop replay --input flows.parquet --time ts --window sliding:10s,1s --agg count \\\n"
            "      --strategy iop-slack:2s,consistent --metrics m.json --out out.parquet"
        ),
    )
    p.add_argument("--input", required=True, help="Parquet file or folder, or a .csv file")
    p.add_argument("--time", required=True, help="event-time column (integer or timestamp)")
    p.add_argument("--time-unit", default="ms", choices=["s", "ms", "us", "ns"],
                   help="unit of an integer time column (default: ms)")
    p.add_argument("--arrival", help="replay rows ordered by this column (default: file order)")
    p.add_argument("--key", action="append", default=[], help="group-by column (repeatable)")
    p.add_argument("--window", required=True,
                   help="tumbling:DUR | sliding:RANGE,SLIDE | landmark:SLIDE | rows:RANGE,SLIDE")
    p.add_argument("--agg", action="append", default=[], required=True,
                   help=f"{AGG_FORMS} (repeatable)")
    p.add_argument("--punctuation", default="bounded:0",
                   help="ordered | bounded:DUR | tuples:N | adaptive:FRACTION (default bounded:0)")
    p.add_argument("--late", default=None,
                   choices=["drop", "side", "side_output", "raise", "update"],
                   help="late-tuple policy (default: drop, counted); 'side' writes them to "
                        "--late-out; 'update' re-emits revised windows (column is_revision) "
                        "for tuples up to --allowed-lateness late")
    p.add_argument("--late-out", help="write the late tuples (input columns) to this Parquet "
                                      "file; implies --late side")
    p.add_argument("--allowed-lateness", default="0",
                   help="with --late update: how late (DUR) a tuple may be and still revise")
    p.add_argument("--method", default="auto", choices=["auto", "wid", "paned"],
                   help="window evaluation: WID, Paned-WID, or chosen by cost model (default)")
    p.add_argument("--strategy", default="oop",
                   help="oop | iop-sort | iop-slack:DUR[,consistent|generous] (default: oop)")
    p.add_argument("--batch-size", type=int, default=65_536, help="rows per batch (default 65536)")
    p.add_argument("--out", help="write results to this Parquet file (default: CSV on stdout)")
    p.add_argument("--metrics", help="write a JSON metrics summary to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    g = p.add_argument_group("Spark (needs the 'spark' extra and Java)")
    g.add_argument("--spark", action="store_true", help="read and replay through PySpark")
    g.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    g.add_argument("--shards", type=int, default=None, help="run the plan sharded by key")
    g.add_argument("--verify", action="store_true",
                   help="compare with Spark SQL; print one JSON line; exit 1 on any difference")
    p.set_defaults(func=run_replay)


# ---- input -------------------------------------------------------------
def read_input(path: str, arrival: str | None) -> pa.Table:
    """Read a Parquet file/folder or a CSV file; order rows by ``arrival`` if given."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no file or folder at {path!r}")
    try:
        if p.is_file() and p.suffix.lower() in (".csv", ".tsv"):
            opts = pacsv.ParseOptions(delimiter="\t" if p.suffix.lower() == ".tsv" else ",")
            table = pacsv.read_csv(p, parse_options=opts)
        elif p.is_dir():
            files = sorted(p.rglob("*.parquet"))
            if not files:
                raise FileNotFoundError(f"folder {path!r} holds no *.parquet files")
            table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
        else:
            table = pq.read_table(p)
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ConfigError(f"cannot read {path!r}: {e}") from e
    if table.num_rows == 0:
        raise EmptyInputError(f"input {path!r} has no rows; nothing to replay")
    if arrival is not None:
        if arrival not in table.column_names:
            raise ConfigError(
                f"--arrival column {arrival!r} is not in {path!r}; its columns are "
                f"{table.column_names}"
            )
        table = table.take(pa.compute.sort_indices(table, [(arrival, "ascending")]))
    return table


def build_stream(table: pa.Table, args: argparse.Namespace) -> Any:
    """The `oop` plan for the replay: source -> window aggregation (or an IOP plan)."""
    import oop
    from oop.punctuation import parse_punctuation
    from oop.replay.specs import parse_aggs, parse_window
    from oop.stream.timecol import check_time_column, parse_duration

    spec = check_time_column(table.schema, args.time, "input")
    unit = spec.unit if spec is not None else args.time_unit
    for k in args.key:
        if k not in table.column_names:
            raise ConfigError(f"--key column {k!r} is not in the input; its columns are "
                              f"{table.column_names}")
    kind = parse_window(args.window, unit)
    aggs = parse_aggs(args.agg)
    punct = parse_punctuation(args.punctuation)
    late = "side_output" if args.late == "side" else args.late
    src = oop.from_arrow(table, time=args.time, unit=unit, punctuation=punct, late=late,
                         batch_size=args.batch_size, name="input")
    if args.strategy == "oop":
        if late == "update":
            return src.window(kind, aggs, by=tuple(args.key), method=args.method, late="update",
                              allowed_lateness=parse_duration(args.allowed_lateness, unit),
                              name="window")
        return src.window(kind, aggs, by=tuple(args.key), method=args.method, name="window")
    if late == "update":
        raise ConfigError("--late update works with --strategy oop only")
    from oop.query import WindowQuery, parse_strategy

    strategy = parse_strategy(args.strategy)
    return WindowQuery([src], kind, aggs, by=tuple(args.key)).plan(strategy)


def _plan_of(stream: Any) -> dict[str, Any]:
    """What the window operator chose (method, layout, layout switches, cost-model terms), if any."""
    info = getattr(getattr(getattr(stream, "node", None), "op", None), "plan_info", None)
    return dict(info) if isinstance(info, dict) else {}


def _summary(res: Any, wall: float, plan: dict[str, Any] | None = None,
             jit_s: float = 0.0) -> dict[str, Any]:
    ops = res.metrics
    peak_items = sum(m.peak_state_items for m in ops.values())
    peak_bytes = sum(m.peak_state_bytes for m in ops.values())
    tuples_in = res.tuples_in
    lat: dict[str, float] = {}
    for m in ops.values():
        if m.latency_ns:
            lat = m.latency_summary()
    return {
        "tuples_in": tuples_in,
        "late": res.late_total,
        "windows_out": res.table.num_rows,
        "peak_state_items": peak_items,
        "peak_state_bytes": peak_bytes,
        "wall_s": wall,
        "tuples_per_s": tuples_in / wall if wall > 0 else None,
        "jit_compile_s": jit_s,  # part of wall_s: numba compiling kernels (first run only)
        **lat,
        "plan": plan or {},
        "operators": res.metrics_dict(),
    }


def resolve_late(args: argparse.Namespace) -> str:
    """The late policy from ``--late`` and ``--late-out`` (side output needs a file to go to)."""
    late = args.late or ("side" if args.late_out else "drop")
    if late == "side_output":
        late = "side"
    if args.late_out and late != "side":
        raise ConfigError(f"--late-out takes the tuples that --late side routes; it cannot go "
                          f"with --late {late}")
    if late == "side" and not args.late_out:
        raise ConfigError("--late side writes the late tuples to a file: add --late-out "
                          "PATH.parquet (or use --late drop to count them only)")
    if late == "side" and args.spark and getattr(args, "shards", None):
        raise ConfigError("--late side / --late-out is not supported with --shards yet (the "
                          "late tuples stay in the Spark tasks); drop --shards, or use --late "
                          "drop (the late count is in the summary)")
    return late


def write_late(res: Any, path: str, schema: pa.Schema) -> int:
    """Write the rows every side-output policy routed (the source's late tuples) to ``path``."""
    import pyarrow.parquet as pq

    tables = [t for t in res.late.values() if t.num_rows]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    pq.write_table(table, path)
    return table.num_rows


def run_replay(args: argparse.Namespace) -> int:
    args.late = resolve_late(args)
    if args.spark:
        try:
            from oop.spark.cli import run_replay as spark_replay
        except ImportError as e:
            raise ConfigError(
                f"--spark needs PySpark: install the spark extra (pip install -e '.[spark]') ({e})"
            ) from e
        return int(spark_replay(args))
    if args.verify or args.shards:
        raise ConfigError("--verify and --shards need --spark")
    t0 = _time.perf_counter()
    table = read_input(args.input, args.arrival)
    stream = build_stream(table, args)
    n_batches = -(-table.num_rows // args.batch_size)
    bar = None
    if not args.quiet and table.num_rows >= _PROGRESS_MIN_ROWS:
        from tqdm import tqdm

        bar = tqdm(total=n_batches, unit="batch", file=sys.stderr, desc="replay")
    try:
        with compile_timer() as jit:
            res = stream.run(on_round=(lambda _r: bar.update(1)) if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    wall = _time.perf_counter() - t0
    summary = _summary(res, wall, _plan_of(stream), jit.seconds)
    if args.out:
        res.to_parquet(args.out)
        print(f"oop replay: {summary['windows_out']} rows -> {args.out}", file=sys.stderr)
    else:
        print_csv(res.table)
    if args.late_out:
        summary["late_out_rows"] = write_late(res, args.late_out, table.schema)
        print(f"oop replay: {summary['late_out_rows']} late tuples -> {args.late_out}",
              file=sys.stderr)
    if args.metrics:
        Path(args.metrics).write_text(json.dumps(summary, indent=2, default=str))
    print(
        f"oop replay: {summary['tuples_in']} tuples in {wall:.2f}s "
        f"({(summary['tuples_per_s'] or 0) / 1e6:.2f} M/s), {summary['late']} late, "
        f"{summary['windows_out']} windows, peak state {summary['peak_state_bytes']} B",
        file=sys.stderr,
    )
    if jit.seconds >= _JIT_NOTE_S:
        print(f"oop replay: {jit.seconds:.2f}s of that compiled numba kernels (a first run; "
              "they are cached, later runs skip it)", file=sys.stderr)
    plan = summary["plan"]
    if plan.get("method"):
        switches = plan.get("layout_switches", 0)
        print(f"oop replay: window method {plan['method']}, layout {plan.get('layout', '?')}"
              + (f" ({switches} layout switch{'es' if switches > 1 else ''})" if switches else ""),
              file=sys.stderr)
    return 0


def print_csv(table: pa.Table) -> None:
    """Write ``table`` to stdout as CSV (nested columns as JSON text)."""
    import pyarrow.csv as pacsv

    sink = pa.BufferOutputStream()
    pacsv.write_csv(_csv_ready(table), sink)
    sys.stdout.write(sink.getvalue().to_pybytes().decode())


def _csv_ready(table: pa.Table) -> pa.Table:
    """``table`` with nested columns (heavy hitters' lists) as JSON text, which CSV can hold."""
    for i, f in enumerate(table.schema):
        if pa.types.is_nested(f.type):
            text = [None if v is None else json.dumps(v, default=str)
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(text, pa.string()))
    return table
