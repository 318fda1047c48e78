"""``CREATE TABLE`` / ``CREATE VIEW``: table definitions and the source streams they give.

A table::

    CREATE TABLE clicks (
      ts   TIMESTAMP(3),            -- or BIGINT with 'time-unit' = 'ms'
      user STRING,
      len  BIGINT,
      WATERMARK FOR ts AS ts - INTERVAL '5' SECOND     -- BoundedDelay('5s'); `AS ts`: Ordered()
    ) WITH ('path' = 'clicks/', 'format' = 'parquet')

``WITH`` options: ``path`` (a file or folder, read by
:class:`~oop.io.files.FileSource`; or give the data in ``tables=``),
``format`` (``parquet``, ``csv``, ``ndjson``/``json``, ``arrow``; default by
extension), ``time-unit`` (``s``/``ms``/``us``/``ns``, for an integer time
column), ``punctuation`` (a :func:`~oop.punctuation.spec.parse_punctuation`
spec such as ``bounded:5s+idle:1min``; overrides the watermark clause),
``time`` (the event-time column when there is no watermark clause),
``late`` (``drop``, ``side``/``side_output``, ``raise``, ``update``), ``batch-size``
(rows per batch, default 65536; results do not depend on it: the watermark
clause and a ``punctuation`` that names no ``+cadence:Nrows`` punctuate after
every 65536 rows read, :func:`~oop.punctuation.cadence.with_cadence`, as
``oop replay`` does), ``connector`` (``filesystem`` only), and the
per-input settings of ``oop replay``: ``arrival`` (replay the rows in this
column's order; out of core for a file), ``arrival-bound`` (reorder within N
rows; needed for live inputs), ``follow`` (``true``: keep watching the
``path`` folder for new files) and ``max-ahead`` (a duration: a tuple further
ahead of the punctuation is not let advance it and follows ``late``). A
``path`` may also be ``-`` (standard input, CSV unless ``format`` says) or
``redis://HOST:PORT/STREAM``. The ``oop sql`` flags ``--late``, ``--max-ahead``
and ``--follow`` give these options to every table that does not set them.

Columns are read as declared (cast when the file's type differs); computed
columns (``ts AS TO_TIMESTAMP_LTZ(epoch, 3)``, any expression of
:mod:`oop.sql.expr`) are evaluated as the rows are read, so one can be the
event time. Types:
``TIMESTAMP(p)`` (p = 0, 3, 6, 9), ``TIMESTAMP_LTZ(p)``, ``BIGINT``, ``INT``,
``SMALLINT``, ``TINYINT``, ``DOUBLE``, ``FLOAT``, ``STRING``/``VARCHAR``,
``BOOLEAN``, ``DECIMAL(p, s)``, ``DATE``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from sqlglot import exp

from oop.errors import OopError
from oop.punctuation import BoundedDelay, Ordered, parse_punctuation, with_cadence
from oop.punctuation.base import GeneratorConfig
from oop.sql.parse import Script
from oop.sql.types import arrow_type

__all__ = ["TableDef", "TableFeed", "read_ddl", "interval_spec", "source_stream", "arrow_type"]

_OPTIONS = ("path", "format", "time-unit", "punctuation", "time", "late", "batch-size",
            "connector", "arrival", "arrival-bound", "follow", "max-ahead")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")
_UNITS = {"MILLISECOND": "ms", "SECOND": "s", "MINUTE": "min", "HOUR": "h", "DAY": "d",
          "MICROSECOND": "us", "NANOSECOND": "ns"}
_FORMATS = {"parquet": "parquet", "csv": "csv", "ndjson": "ndjson", "json": "ndjson",
            "arrow": "arrow"}


@dataclass
class TableDef:
    """One ``CREATE TABLE``: columns, event time, punctuation and options."""

    name: str
    schema: pa.Schema
    time: str | None
    punctuation: GeneratorConfig | None
    options: dict[str, str] = field(default_factory=dict)
    node: exp.Expression | None = None
    #: computed columns (``ts AS TO_TIMESTAMP_LTZ(epoch, 3)``), evaluated as rows are read
    computed: dict[str, Any] = field(default_factory=dict)

    @property
    def physical(self) -> pa.Schema:
        """The declared columns read from the data (all but the computed ones)."""
        return pa.schema([f for f in self.schema if f.name not in self.computed])

    def complete(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (physical columns) with the computed columns, in declared order."""
        if not self.computed:
            return batch
        from oop.operators.apply import evaluate_expressions

        names = list(self.computed)
        vals = dict(zip(names, evaluate_expressions(batch, list(self.computed.values()), names)))
        cols = [vals[f.name].cast(f.type) if f.name in vals else batch.column(f.name)
                for f in self.schema]
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)

    @property
    def unit(self) -> str | None:
        """The event-time unit: the timestamp type's, else the ``time-unit`` option."""
        if self.time is None:
            return None
        t = self.schema.field(self.time).type
        return t.unit if pa.types.is_timestamp(t) else self.options.get("time-unit")


def interval_spec(node: exp.Expression, script: Script) -> str:
    """``INTERVAL '5' SECOND`` -> ``"5s"`` (a duration spec of :func:`parse_duration`)."""
    if not isinstance(node, exp.Interval):
        raise script.error(f"expected an INTERVAL like INTERVAL '5' SECOND, got {node.sql()!r}",
                           node)
    value = node.this.name if isinstance(node.this, exp.Literal) else node.this.sql()
    unit = node.args.get("unit")
    text = unit.name if unit is not None else ""
    if not text and " " in value.strip():
        value, text = value.strip().split(None, 1)
    u = text.upper().rstrip("S") if text.upper() not in ("S", "MS") else text.upper()
    if u not in _UNITS:
        raise script.error(f"unsupported interval unit {text or '(none)'!r}; use MILLISECOND, "
                           "SECOND, MINUTE, HOUR or DAY", node)
    try:
        float(value)
    except ValueError:
        raise script.error(f"interval value {value!r} is not a number", node) from None
    return f"{value.strip()}{_UNITS[u]}"


def _options(node: exp.Create, script: Script) -> dict[str, str]:
    props = node.args.get("properties")
    out: dict[str, str] = {}
    for p in (props.expressions if props is not None else []):
        if not isinstance(p, exp.Property) or not isinstance(p.this, exp.Literal):
            raise script.error(f"unsupported table property {p.sql()!r}; write WITH "
                               "('key' = 'value', ...)", p)
        key = p.this.name.lower()
        if key not in _OPTIONS:
            raise script.error(f"unknown table option {key!r}; the options are "
                               f"{', '.join(_OPTIONS)}", p)
        out[key] = p.args["value"].name if isinstance(p.args.get("value"), exp.Literal) \
            else p.args["value"].sql()
    if out.get("connector", "filesystem").lower() != "filesystem":
        raise script.error(f"connector {out['connector']!r} is not available; use 'path' (files)",
                           node)
    if "format" in out:
        fmt = out["format"].lower()
        if fmt not in _FORMATS:
            raise script.error(f"format {fmt!r}: use parquet, csv, ndjson or arrow", node)
        out["format"] = _FORMATS[fmt]
    _check_values(out, script, node)
    return out


def _check_values(opts: dict[str, str], script: Script, node: exp.Expression) -> None:
    """One-line errors for option values that cannot work (late policy, counts, booleans)."""
    from oop.stream.late import LatePolicy

    if "late" in opts:
        try:
            LatePolicy.parse(opts["late"])
        except OopError as e:
            raise script.error(f"option 'late': {e}", node) from None
    for key in ("batch-size", "arrival-bound"):
        if key in opts and (not opts[key].strip().isdigit() or int(opts[key]) < 1):
            raise script.error(f"option {key!r} = {opts[key]!r}: give a row count of at least 1",
                               node)
    if opts.get("follow", "false").lower() not in _TRUE + _FALSE:
        raise script.error(f"option 'follow' = {opts['follow']!r}: write 'true' or 'false'", node)


def _table(node: exp.Create, script: Script) -> TableDef:
    schema_node = node.this
    name = schema_node.this.name if isinstance(schema_node, exp.Schema) else schema_node.name
    fields: list[pa.Field] = []
    wm: exp.WatermarkColumnConstraint | None = None
    order: list[str] = []
    computed_sql: dict[str, exp.Expression] = {}
    for col in (schema_node.expressions if isinstance(schema_node, exp.Schema) else []):
        cons = [c.args.get("kind") for c in col.args.get("constraints") or []] \
            if isinstance(col, exp.ColumnDef) else []
        if isinstance(col, exp.WatermarkColumnConstraint):
            wm = col
        elif isinstance(col, exp.ColumnDef) and col.args.get("kind") is not None and not cons:
            fields.append(pa.field(col.name, arrow_type(col.args["kind"], script, col)))
            order.append(col.name)
        elif (isinstance(col, exp.ColumnDef) and len(cons) == 1
              and isinstance(cons[0], exp.ComputedColumnConstraint)):
            computed_sql[col.name] = cons[0].this
            order.append(col.name)
        else:
            raise script.error(f"unsupported column definition {col.sql()!r} (constraints "
                               "are not supported)", col)
    computed = _computed(computed_sql, pa.schema(fields), script)
    types = {f.name: f.type for f in fields} | {n: t for n, (_, t) in computed.items()}
    schema = pa.schema([pa.field(n, types[n]) for n in order])
    opts = _options(node, script)
    time: str | None = opts.get("time")
    punct: GeneratorConfig | None = None
    if wm is not None:
        time = wm.this.name
        e = wm.expression
        if isinstance(e, exp.Column) and e.name == time:
            punct = Ordered()
        elif (isinstance(e, exp.Sub) and isinstance(e.this, exp.Column) and e.this.name == time
              and isinstance(e.expression, exp.Interval)):
            punct = BoundedDelay(interval_spec(e.expression, script))
        else:
            raise script.error(f"unsupported WATERMARK expression {e.sql()!r}; write "
                               f"`{time} - INTERVAL 'n' SECOND` or `{time}`", wm)
    if "punctuation" in opts:
        try:
            punct = parse_punctuation(opts["punctuation"])
        except OopError as err:
            raise script.error(str(err), node) from None
    if punct is not None:  # punctuate on the rows read, not on the batches: as `oop replay`
        punct = with_cadence(punct)
    if time is not None and fields and time not in schema.names:
        raise script.error(f"table {name!r}: event-time column {time!r} is not declared", wm)
    if time is not None and fields:
        t = schema.field(time).type
        if not pa.types.is_timestamp(t):
            if not pa.types.is_integer(t):
                raise script.error(f"table {name!r}: event-time column {time!r} is {t}; use "
                                   "TIMESTAMP(3) or BIGINT with 'time-unit'", wm)
            if opts.get("time-unit") not in ("s", "ms", "us", "ns"):
                raise script.error(f"table {name!r}: the BIGINT event-time column {time!r} "
                                   "needs the option 'time-unit' = 's'|'ms'|'us'|'ns'", node)
    return TableDef(name, schema, time, punct, opts, node,
                    {n: e for n, (e, _) in computed.items()})


def _computed(sql: dict[str, exp.Expression], physical: pa.Schema,
              script: Script) -> dict[str, tuple[Any, pa.DataType]]:
    """Computed columns: name -> (Arrow expression over the physical columns, result type)."""
    if not sql:
        return {}
    from oop.operators.apply import evaluate_expressions
    from oop.sql.expr import Col, Scope, to_arrow

    scope = Scope([Col(None, f.name, f.name) for f in physical])
    exprs = {n: to_arrow(e, scope, script) for n, e in sql.items()}
    try:
        empty = pa.RecordBatch.from_pylist([], schema=physical)
        arrays = evaluate_expressions(empty, list(exprs.values()), list(exprs))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        first = next(iter(sql.values()))
        raise script.error(f"cannot compute the computed columns: {str(e).splitlines()[0]}",
                           first) from None
    return {n: (exprs[n], a.type) for n, a in zip(exprs, arrays)}


def read_ddl(script: Script) -> tuple[dict[str, TableDef], dict[str, exp.Expression]]:
    """The tables and views (name -> SELECT) declared by the script's DDL statements."""
    tables: dict[str, TableDef] = {}
    views: dict[str, exp.Expression] = {}
    for node in script.ddl:
        kind = str(node.args.get("kind") or "").upper()
        if kind == "TABLE":
            if node.expression is not None:
                raise script.error("CREATE TABLE ... AS SELECT is not supported; use "
                                   "CREATE VIEW", node, "CREATE")
            t = _table(node, script)  # type: ignore[arg-type]
            name = t.name
            tables[name] = t
        elif kind == "VIEW":
            name = node.this.name
            views[name] = node.expression
        else:
            raise script.error(f"unsupported statement CREATE {kind}; use CREATE TABLE or "
                               "CREATE VIEW", node, "CREATE")
        if list(tables).count(name) + list(views).count(name) > 1 or (
                name in tables and name in views):
            raise script.error(f"{name!r} is declared twice", node, "CREATE")
    return tables, views


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    cols = [batch.column(f.name).cast(f.type) for f in schema]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def source_stream(t: TableDef, data: Any, batch_size: int | None, script: Script,
                  defaults: dict[str, str] | None = None, *, read_ahead: bool = False) -> Any:
    """The oop source Stream of table ``t`` over ``data`` (a pa.Table, a path, or None:
    the ``path`` option); ``defaults``: options for every table that does not set them;
    ``read_ahead``: a finite file input is decoded on a thread of its own (``--threads``)."""
    from oop.plan.executor import Node
    from oop.plan.source import Source
    from oop.api import Stream

    if t.time is None or t.punctuation is None:
        raise script.error(f"table {t.name!r} has no event time: add WATERMARK FOR col AS "
                           "col - INTERVAL 'n' SECOND (or the options 'time' and "
                           "'punctuation')", t.node, "CREATE")
    opts = {**(defaults or {}), **t.options}
    rows = int(opts.get("batch-size", batch_size or 65_536))
    late = opts.get("late", "drop")
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
        missing = [c for c in t.physical.names if c not in table.column_names]
        if missing:
            raise script.error(f"table {t.name!r}: the data has no column(s) {missing}; it has "
                               f"{table.column_names}", t.node, "CREATE")
        phys = t.physical if len(t.schema) else table.schema
        try:
            table = table.select(phys.names).cast(phys)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise script.error(f"table {t.name!r}: the data does not cast to the declared "
                               f"columns ({str(e).splitlines()[0]})", t.node, "CREATE") from None
        schema = t.schema if len(t.schema) else table.schema
        return Stream(Node(Source(
            lambda: (t.complete(b) for b in table.to_batches(max_chunksize=rows)),
            time=t.time, unit=t.unit or "ms", punctuation=t.punctuation, late=late,
            schema=schema, name=t.name, max_ahead=opts.get("max-ahead"))))
    path = data if data is not None else t.options.get("path")
    if path is None:
        raise script.error(f"table {t.name!r} has no data: give the option 'path' or pass "
                           f"tables={{{t.name!r}: ...}}", t.node, "CREATE")
    conn = TableFeed(t, str(path), opts, read_ahead=read_ahead)
    schema = conn.open()

    def feed() -> Iterator[Any]:
        conn.rewind()
        return conn.items(rows)

    # the plan may be rebuilt on fresh operators (planning, a second run): TableFeed re-opens
    # its input for that; whether a crashed run can resume is the connector's `resumable`
    return Stream(Node(Source(feed, time=t.time, unit=t.unit or "ms", punctuation=t.punctuation,
                              late=late, schema=schema, name=t.name, connector=conn,
                              max_ahead=opts.get("max-ahead"))))


class TableFeed:
    """The connector of a declared table: its ``path`` opened as ``oop replay`` opens
    ``--input`` (:func:`oop.command.inputs.open_connector`: a file, a folder -- followed with
    ``follow`` --, ``-`` or Redis; ``arrival`` ordering), each batch cast to the declared
    columns and completed with the computed ones. Re-opened for every run of the plan, so a
    planned stream runs more than once; offsets and ``stop`` are the inner connector's.
    ``read_ahead``: a finite (not live) input is decoded by a thread of its own, a few
    batches ahead (:class:`oop.plan.background.ReadAhead`; same batches in the same order),
    for ``oop sql --threads N``; such a run is not resumed from a checkpoint."""

    def __init__(self, t: TableDef, path: str, opts: dict[str, str], *,
                 read_ahead: bool = False) -> None:
        self.t, self.path, self.opts, self.name = t, path, opts, t.name
        self.read_ahead = read_ahead
        self.inner: Any = None
        self.polled = False
        self.live = False
        self.resumable = True
        self.phys: pa.Schema | None = None

    def _follow(self) -> bool:
        flag = self.opts.get("follow", "false").lower() in _TRUE
        # the --follow default applies to folders only; a table's own option is checked
        return flag and ("follow" in self.t.options or Path(self.path).is_dir())

    def open(self) -> pa.Schema | None:
        """(Re)open the feed at its start; the declared schema (or the file's)."""
        from oop.command.inputs import open_connector

        self.close()
        bound = self.opts.get("arrival-bound")
        self.inner = open_connector(
            self.path, fmt=self.opts.get("format"), follow=self._follow(),
            columns=self.t.physical.names or None, arrival=self.opts.get("arrival"),
            arrival_bound=int(bound) if bound is not None else None, name=self.t.name)
        found = self.inner.open()
        self.live, self.resumable = bool(self.inner.live), bool(self.inner.resumable)
        if self.read_ahead and not self.live:
            from oop.plan.background import ReadAhead

            self.inner = ReadAhead(self.inner)  # opened already: its thread starts on poll
        self.polled = False
        if len(self.t.schema):
            self.phys = self.t.physical
            return self.t.schema
        self.phys = found
        return found

    def rewind(self) -> None:
        """Start a run at the beginning (re-open unless nothing was read since opening)."""
        if self.polled and not self.resumable:
            from oop.errors import ConfigError

            raise ConfigError(f"table {self.name!r} reads {self.path!r}, which cannot be read "
                              "a second time; plan the script again to run it again")
        if self.inner is None or self.polled:
            self.open()

    def items(self, rows: int, timeout: float = 0.2) -> Iterator[Any]:
        """The feed: completed batches and IDLE markers until the end."""
        from oop.io.protocol import END

        while (b := self.poll(rows, timeout)) is not END:
            yield b

    def poll(self, max_rows: int, timeout: float = 0.2) -> Any:
        if self.inner is None:
            self.open()
        self.polled = True
        b = self.inner.poll(max_rows, timeout)
        if not isinstance(b, pa.RecordBatch):
            return b
        phys = self.phys if self.phys is not None else b.schema
        return self.t.complete(_cast(b, phys))

    def offset(self) -> Any:
        return self.inner.offset()

    def seek(self, offset: Any) -> None:
        if self.inner is None:
            self.open()
        self.polled = True
        self.inner.seek(offset)

    def stop(self) -> None:
        if self.inner is not None and hasattr(self.inner, "stop"):
            self.inner.stop()

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
            self.inner = None
