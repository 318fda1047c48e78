"""Where ``oop replay`` reads from and writes to: connectors and sinks from the flags.

``--input`` names a file or folder (Parquet, CSV, NDJSON, Arrow IPC; ``--format``
when the extension cannot say), ``-`` for standard input, or
``redis://HOST:PORT/STREAM`` for a Redis stream. ``--arrival COL`` replays rows
in the order of an arrival column: out of core for finite files, within
``--arrival-bound N`` rows for any input (and required for live ones).

``--out`` is a file by extension, a folder (``DIR/`` or an existing folder) of
rolling part files, or ``-`` for standard output (CSV unless ``--out-format``
says otherwise); ``--late-out`` takes the same forms.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oop.errors import ConfigError

__all__ = ["open_input", "is_live", "needed_columns", "open_output", "is_folder_target"]


def is_live(args: argparse.Namespace) -> bool:
    """True for inputs that may wait for data: stdin, Redis, a followed folder."""
    return args.input == "-" or str(args.input).startswith("redis://") or bool(args.follow)


def needed_columns(args: argparse.Namespace) -> list[str] | None:
    """The input columns the query reads (None: all; late rows keep every column)."""
    if args.late == "side" or args.input == "-" or str(args.input).startswith("redis://"):
        return None
    from oop.window.specs import parse_aggs

    cols = [args.time, *args.key, *(a.column for a in parse_aggs(args.agg) if a.column)]
    if args.arrival:
        cols.append(args.arrival)
    return list(dict.fromkeys(cols))


def _base(args: argparse.Namespace) -> Any:
    from oop.io.files import FileSource

    if args.input == "-":
        if args.follow:
            raise ConfigError("--follow watches a folder; standard input is read as it comes")
        from oop.io.live import from_stdin

        return from_stdin(args.format or "csv")
    if str(args.input).startswith("redis://"):
        if args.follow:
            raise ConfigError("--follow watches a folder; a Redis stream is followed anyway")
        from oop.io.redis_source import RedisStreamSource

        return RedisStreamSource(args.input, name="input")
    p = Path(args.input)
    if not p.exists():
        raise FileNotFoundError(f"no file or folder at {args.input!r}")
    if args.follow and not p.is_dir():
        raise ConfigError(f"--follow watches a folder for new files; {args.input!r} is a file")
    cols = needed_columns(args)
    return FileSource(p, format=args.format, follow=bool(args.follow), columns=cols,
                      name="input")


def open_input(args: argparse.Namespace) -> Any:
    """The connector ``oop replay`` reads, with arrival reordering when asked."""
    conn = _base(args)
    if args.arrival_bound is not None and not args.arrival:
        raise ConfigError("--arrival-bound reorders by --arrival COL; give the column too")
    if not args.arrival:
        return conn
    from oop.io.reorder import BoundedReorder, ExternalSort

    if args.arrival_bound is not None:
        return BoundedReorder(conn, args.arrival, int(args.arrival_bound), name="input")
    if is_live(args):
        raise ConfigError("--arrival on a live input needs --arrival-bound N (rows held to "
                          "reorder; a row outside the bound is an error)")
    return ExternalSort(conn, args.arrival, name="input")


def is_folder_target(target: str) -> bool:
    """``DIR/`` or an existing folder: rolling part files."""
    return target.endswith(("/", "\\")) or Path(target).is_dir()


def open_output(target: str, fmt: str | None, name: str) -> Any:
    """A sink for ``--out`` / ``--late-out`` (checks the folder before any work)."""
    from oop.io.sinks import open_sink

    return open_sink(target, fmt, name)
