"""Streaming SQL: a Flink SQL subset compiled into oop plans, run out of order.

>>> import pyarrow as pa, oop
>>> t = pa.table({"ts": [1000, 3000, 2000, 12000, 11000], "k": ["a", "b", "a", "a", None],
...               "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
>>> q = '''
... CREATE TABLE t (ts BIGINT, k STRING, v DOUBLE,
...                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH ('time-unit' = 'ms');
... SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total
... FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
... GROUP BY window_start, window_end, k'''
>>> sorted(oop.sql(q, tables={"t": t}).collect().to_pylist(), key=lambda r: (r["window_start"], str(r["k"])))[0]
{'k': 'a', 'window_start': 0, 'n': 2, 'total': 4.0}

A script is DDL (``CREATE TABLE`` with a ``WATERMARK`` clause and
``WITH`` options, ``CREATE VIEW``; :mod:`oop.sql.ddl`) followed by exactly
one query: ``SELECT ...`` or ``INSERT INTO sink SELECT ...``, optionally
prefixed by ``EXPLAIN`` (``EXPLAIN ANALYZE`` runs it). Supported: window
TVFs ``TUMBLE`` / ``HOP`` / ``CUMULATE`` / ``SESSION`` with ``GROUP BY window_start,
window_end, keys`` and the aggregates of :mod:`oop.sql.window`; ``WHERE``;
projections with expressions (:mod:`oop.sql.expr`); ``UNION ALL``; interval
joins and tumbling window joins (:mod:`oop.sql.join`); views and ``WITH``. Anything else is a
one-line :class:`SqlError` with the construct's ``line:col``.

Entry points: :func:`sql` (``oop.sql``) returns a :class:`~oop.Stream`;
:func:`plan_sql` returns a :class:`SqlPlan` (stream, sink, EXPLAIN text)
for the ``oop sql`` command (:mod:`oop.sql.cli`).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from oop.sql.error import SqlError

if TYPE_CHECKING:
    from oop.sql.parallel import Parallelism

__all__ = ["sql", "plan_sql", "SqlPlan", "SqlError"]


@dataclass
class SqlPlan:
    """A planned script: the output ``stream``, the ``INSERT INTO`` target, EXPLAIN mode."""

    stream: Any
    strategy: str
    explain_mode: str | None = None
    sink_name: str | None = None
    sink_def: Any = None
    #: threads: partitions of windows and joins, and why an operator has none
    parallel: "Parallelism | None" = None

    def explain(self) -> str:
        """The plan as text (:mod:`oop.sql.explain`); ``EXPLAIN ANALYZE`` runs the query first."""
        from oop.sql.explain import explain

        notes = list(self.parallel.notes) if self.parallel is not None else []
        if self.explain_mode == "analyze":
            self.stream.run()
            return explain(self.stream, strategy=self.strategy, analyzed=True, threads=notes)
        return explain(self.stream, strategy=self.strategy, threads=notes)

    def sink_target(self) -> tuple[str, str | None] | None:
        """(path, format) of the ``INSERT INTO`` table, when it declares a ``path``."""
        if self.sink_def is None or "path" not in self.sink_def.options:
            return None
        return self.sink_def.options["path"], self.sink_def.options.get("format")


def plan_sql(script: str, *, tables: Mapping[str, Any] | None = None, strategy: Any = "oop",
             batch_size: int | None = None,
             options: Mapping[str, str] | None = None,
             parallel: "Parallelism | None" = None) -> SqlPlan:
    """Parse and plan ``script`` (DDL + one query) into a :class:`SqlPlan`.

    ``tables``: name -> an ``oop.Stream`` (used as is), a ``pa.Table`` or a
    path (both need a ``CREATE TABLE`` for the event time and punctuation).
    ``strategy``: ``"oop"`` or an in-order strategy of :func:`oop.query.parse_strategy`
    (``iop-sort``, ``iop-slack:2s``...), for window queries and inner joins.
    ``batch_size``: rows per source batch (default: the table's
    ``batch-size`` option, else 65536). ``options``: table options (``late``,
    ``max-ahead``, ``follow``, ...; see :mod:`oop.sql.ddl`) for every declared table
    that does not set them itself, plus ``allowed-lateness`` with ``late = update``
    (window aggregates then re-emit revised rows). ``parallel``: an
    :class:`oop.sql.parallel.Parallelism` (``oop sql --threads``; default: one thread).
    Raises :class:`SqlError` (line:col).
    """
    from sqlglot import exp

    from oop.errors import OopError
    from oop.query import parse_strategy
    from oop.sql.ddl import read_ddl
    from oop.sql.parse import parse_script
    from oop.sql.planner import Planner

    parsed = parse_script(script)
    try:
        st = parse_strategy(strategy)
    except OopError as e:
        raise SqlError(str(e)) from None
    defs, views = read_ddl(parsed)
    query = parsed.query
    sink_name = None
    cols: list[str] = []
    if isinstance(query, exp.Insert):
        target = query.this
        if isinstance(target, exp.Schema):
            cols = [c.name for c in target.expressions]
            target = target.this
        sink_name = target.name
        query = query.expression
    assert query is not None
    planner = Planner(parsed, defs, views, dict(tables or {}), st, batch_size, options, parallel)
    try:
        rel = planner.query(query)
    except (OopError, FileNotFoundError):
        raise
    except Exception as e:  # a form the planner does not expect: still one line, no traceback
        raise parsed.error(f"cannot plan this query ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''})", query) from e
    sink_def = defs.get(sink_name) if sink_name else None
    if sink_name and sink_name.lower() in planner.sources:
        raise parsed.error(f"INSERT INTO {sink_name}: the sink is also read by the query",
                           parsed.query, "INSERT")
    names = rel.info.schema.names
    if sink_def is not None and len(sink_def.schema) and not cols:
        cols = sink_def.schema.names
    stream = rel.stream
    if cols:
        if len(cols) != len(names):
            raise parsed.error(f"INSERT INTO {sink_name}: the query gives {len(names)} columns "
                               f"but the sink takes {len(cols)}", parsed.query, "INSERT")
        ren = {a: b for a, b in zip(names, cols) if a != b}
        if ren:
            from oop.operators.rename import Rename

            stream = stream.via(Rename(ren, name="into_" + sink_name))
    return SqlPlan(stream, st.spec, parsed.explain, sink_name, sink_def, planner.parallel)


def sql(script: str, tables: Mapping[str, Any] | None = None, *, strategy: Any = "oop",
        batch_size: int | None = None) -> Any:
    """Compile a Flink SQL script into an ``oop.Stream`` (``.run()`` / ``.collect()`` it).

    For ``EXPLAIN`` scripts the plan text (a ``str``) is returned instead.
    See :func:`plan_sql` for the arguments.
    """
    plan = plan_sql(script, tables=tables, strategy=strategy, batch_size=batch_size)
    if plan.explain_mode is not None:
        return plan.explain()
    return plan.stream


class _CallableModule(types.ModuleType):
    """``oop.sql`` is this package *and* the :func:`sql` function: calling the module calls it."""

    def __call__(self, script: str, tables: Mapping[str, Any] | None = None,
                 **kw: Any) -> Any:
        return sql(script, tables, **kw)


sys.modules[__name__].__class__ = _CallableModule
