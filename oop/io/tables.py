"""Write a whole result table at once: to a file or folder through the sinks, or to stdout as CSV.

The command lines (``oop replay``, ``oop replay --spark``) finish with these; a running
plan writes batch by batch through :class:`oop.plan.writer.SinkWriter` instead.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

__all__ = ["write_table", "print_csv", "write_late"]


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


def write_late(res: Any, path: str, schema: pa.Schema) -> int:
    """Write the rows every side-output policy routed (``res.late``, the source's late
    tuples, of a :class:`oop.plan.result.Result`) to ``path``; returns their number."""
    tables = [t for t in res.late.values() if t.num_rows]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    write_table(table, path)
    return table.num_rows
