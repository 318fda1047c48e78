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

__all__ = ["open_input", "open_connector", "is_live", "needed_columns", "open_output",
           "is_folder_target"]


def is_live(args: argparse.Namespace) -> bool:
    """True for inputs that may wait for data: stdin, Redis, a followed folder."""
    return args.input == "-" or str(args.input).startswith("redis://") or bool(args.follow)


def needed_columns(args: argparse.Namespace) -> list[str] | None:
    """The input columns the query reads (None: all; late rows keep every column)."""
    if args.late == "side" or args.input == "-" or str(args.input).startswith("redis://"):
        return None
    from oop.replay.specs import parse_aggs

    cols = [args.time, *args.key, *(a.column for a in parse_aggs(args.agg) if a.column)]
    if args.arrival:
        cols.append(args.arrival)
    return list(dict.fromkeys(cols))


def _base(path: str, fmt: str | None, follow: bool, columns: list[str] | None,
          name: str) -> Any:
    from oop.io.files import FileSource

    if path == "-":
        if follow:
            raise ConfigError("--follow watches a folder; standard input is read as it comes")
        from oop.io.live import from_stdin

        return from_stdin(fmt or "csv")
    if str(path).startswith("redis://"):
        if follow:
            raise ConfigError("--follow watches a folder; a Redis stream is followed anyway")
        from oop.io.redis_source import RedisStreamSource

        return RedisStreamSource(path, name=name)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no file or folder at {path!r}")
    if follow and not p.is_dir():
        raise ConfigError(f"--follow watches a folder for new files; {path!r} is a file")
    return FileSource(p, format=fmt, follow=follow, columns=columns, name=name)


def open_connector(path: str, *, fmt: str | None = None, follow: bool = False,
                   columns: list[str] | None = None, arrival: str | None = None,
                   arrival_bound: int | None = None, name: str = "input") -> Any:
    """A connector over a file or folder, ``-`` (stdin) or ``redis://HOST:PORT/STREAM``,
    replayed in ``arrival`` column order when one is named (within ``arrival_bound`` rows,
    or out of core for a finite file input)."""
    conn = _base(path, fmt, follow, columns, name)
    if arrival_bound is not None and not arrival:
        raise ConfigError("--arrival-bound reorders by --arrival COL; give the column too")
    if not arrival:
        return conn
    from oop.io.reorder import BoundedReorder, ExternalSort

    if arrival_bound is not None:
        return BoundedReorder(conn, arrival, int(arrival_bound), name=name)
    if path == "-" or str(path).startswith("redis://") or follow:
        raise ConfigError("--arrival on a live input needs --arrival-bound N (rows held to "
                          "reorder; a row outside the bound is an error)")
    return ExternalSort(conn, arrival, name=name)


def open_input(args: argparse.Namespace) -> Any:
    """The connector ``oop replay`` reads, with arrival reordering when asked."""
    return open_connector(args.input, fmt=args.format, follow=bool(args.follow),
                          columns=needed_columns(args), arrival=args.arrival,
                          arrival_bound=args.arrival_bound)


def is_folder_target(target: str) -> bool:
    """``DIR/`` or an existing folder: rolling part files."""
    return target.endswith(("/", "\\")) or Path(target).is_dir()


def open_output(target: str, fmt: str | None, name: str) -> Any:
    """A sink for ``--out`` / ``--late-out`` (checks the folder before any work)."""
    from oop.io.sinks import open_sink

    return open_sink(target, fmt, name)
