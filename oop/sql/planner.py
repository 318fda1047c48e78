"""From the parsed query to an oop plan: FROM, JOIN, WHERE, GROUP BY, SELECT, UNION ALL.

=====================================  ==============================================
SQL                                    plan
=====================================  ==============================================
table / view / ``WITH`` name           its source stream (one per table, shared)
``TABLE(TUMBLE|HOP|CUMULATE(...))``    window aggregation (:mod:`oop.sql.window`)
``TABLE(TUMBLE(...))`` without GROUP   each row + its window (an Apply)
``a JOIN b ON ... BETWEEN ...``        OA-Join, band (:mod:`oop.sql.join`)
``L JOIN R ON L.window_start = ...``   OA-Join, tumbling (window join)
``WHERE``                              :class:`~oop.operators.select.Select`
select items                           Apply + Project + Rename
``UNION ALL``                          :class:`~oop.operators.meld.Meld`
=====================================  ==============================================

Everything else -- ORDER BY, LIMIT, DISTINCT, UNION (distinct), subqueries
in expressions, OVER windows, non-windowed GROUP BY, more than one JOIN per
SELECT, HOP / CUMULATE rows without GROUP BY --
is a :class:`~oop.sql.parse.SqlError` naming the construct and its
position.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
from sqlglot import exp

from oop.errors import OopError
from oop.sql.ddl import TableDef, source_stream
from oop.sql.expr import Col, Scope
from oop.sql.parallel import Parallelism
from oop.sql.parse import Script
from oop.sql.relation import Rel, info_of, project, union_all
from oop.sql.window import assign_windows, plan_window_aggregate, tvf_name, window_spec

__all__ = ["Planner"]

_UNSUPPORTED = [("order", "ORDER BY", "ORDER"), ("limit", "LIMIT", "LIMIT"),
                ("offset", "OFFSET", "OFFSET"), ("distinct", "SELECT DISTINCT", "DISTINCT"),
                ("qualify", "QUALIFY", "QUALIFY"), ("laterals", "LATERAL", "LATERAL"),
                ("pivots", "PIVOT", "PIVOT"), ("windows", "WINDOW clause", "WINDOW")]


class Planner:
    """Plans one query of a script over declared tables, views and given streams."""

    def __init__(self, script: Script, tables: Mapping[str, TableDef],
                 views: Mapping[str, exp.Expression], data: Mapping[str, Any],
                 strategy: Any, batch_size: int | None = None,
                 options: Mapping[str, str] | None = None,
                 parallel: Parallelism | None = None) -> None:
        self.script = script
        self.tables = {k.lower(): v for k, v in tables.items()}
        self.views = {k.lower(): v for k, v in views.items()}
        self.data = {k.lower(): v for k, v in data.items()}
        self.strategy = strategy
        self.batch_size = batch_size
        #: table options for every table that does not set them (the oop sql flags)
        self.options = dict(options or {})
        #: with late = update: how late (a duration) a tuple may be and still revise a window
        self.update = (self.options.get("allowed-lateness", "0")
                       if self.options.get("late") == "update" else None)
        #: threads: partitions of windows and joins, read-ahead of tables (oop.sql.parallel)
        self.parallel = parallel if parallel is not None else Parallelism()
        self.sources: dict[str, Any] = {}
        self.ctes: dict[str, exp.Expression] = {}
        self._expanding: list[str] = []

    # ---- names ------------------------------------------------------------
    def source(self, name: str, node: exp.Expression) -> Any:
        """The (shared) source stream of table ``name``."""
        key = name.lower()
        if key in self.sources:
            return self.sources[key]
        from oop.api import Stream

        given = self.data.get(key)
        t = self.tables.get(key)
        if isinstance(given, Stream):
            if t is not None:
                raise self.script.error(f"table {name!r} is both declared by CREATE TABLE and "
                                        "given as a Stream; drop one", t.node, "CREATE")
            s = given
        elif t is not None:
            defaults = {k: v for k, v in self.options.items() if k != "allowed-lateness"}
            s = source_stream(t, given, self.batch_size, self.script, defaults,
                              read_ahead=self.parallel.read_ahead)
        elif given is not None:
            kind = "a pa.Table" if isinstance(given, (pa.Table, pa.RecordBatch)) else "a path"
            raise self.script.error(f"table {name!r} is given as {kind}; declare its event time "
                                    f"with CREATE TABLE {name} (..., WATERMARK FOR ts AS ts - "
                                    "INTERVAL 'n' SECOND)", node)
        else:
            known = sorted(set(self.tables) | set(self.data) | set(self.views) | set(self.ctes))
            raise self.script.error(f"unknown table {name!r}; the tables are {known}", node)
        self.sources[key] = s
        return s

    def named(self, name: str, alias: str | None, node: exp.Expression) -> Rel:
        """A table, view or CTE by name, its columns qualified by ``alias`` (or the name)."""
        key = name.lower()
        q = alias or name
        body = self.ctes.get(key) if key in self.ctes else self.views.get(key)
        if body is not None:
            if key in self._expanding:
                raise self.script.error(f"view {name!r} refers to itself", node)
            self._expanding.append(key)
            try:
                rel = self.query(body)
            finally:
                self._expanding.pop()
            return rel.requalified(q, node)
        s = self.source(name, node)
        try:
            info = info_of(s)
        except OopError as e:
            raise self.script.error(str(e), node) from None
        return Rel([s], Scope([Col(q, c, c) for c in info.schema.names]), self.script, node)

    # ---- queries -----------------------------------------------------------
    def query(self, node: exp.Expression) -> Rel:
        """Plan a SELECT / UNION ALL / subquery."""
        s = self.script
        if isinstance(node, exp.Subquery):
            return self.query(node.this)
        if isinstance(node, exp.Union):
            if node.args.get("distinct"):
                raise s.error("UNION (distinct) is not supported; use UNION ALL", node, "UNION")
            for arg, what in (("order", "ORDER BY"), ("limit", "LIMIT")):
                if node.args.get(arg) is not None:
                    raise s.error(f"{what} is not supported", node.args[arg], what.split()[0])
            return union_all([self.query(node.this), self.query(node.expression)], node)
        if isinstance(node, (exp.Intersect, exp.Except)):
            what = type(node).__name__.upper()
            raise s.error(f"{what} is not supported", node, what)
        if not isinstance(node, exp.Select):
            what = type(node).__name__.upper()
            raise s.error(f"unsupported statement {what}; the query must be a SELECT (or "
                          "INSERT INTO ... SELECT)", node, what)
        return self.select(node)

    def _check(self, sel: exp.Select) -> None:
        s = self.script
        for arg, what, kw in _UNSUPPORTED:
            v = sel.args.get(arg)
            if v:
                node = v if isinstance(v, exp.Expression) else sel
                raise s.error(f"{what} is not supported (a stream has no end to sort or "
                              "limit at)" if arg in ("order", "limit", "offset")
                              else f"{what} is not supported", node, kw)
        for n in sel.walk():
            if isinstance(n, exp.Window):
                raise s.error("OVER windows are not supported (use a window TVF)", n, "OVER")
            if n is not sel and isinstance(n, exp.Subquery) and not isinstance(
                    n.parent, (exp.From, exp.Join)) and not (
                    isinstance(n.parent, exp.Anonymous)):
                raise s.error("subqueries in expressions are not supported", n, "SELECT")
        if sel.args.get("having") is not None and sel.args.get("group") is None:
            raise s.error("HAVING needs GROUP BY", sel.args["having"], "HAVING")

    def from_item(self, item: exp.Expression) -> tuple[Rel, Any]:
        """A FROM / JOIN item: (relation, window spec or None)."""
        s = self.script
        alias = item.alias_or_name if isinstance(item, exp.Subquery) else (
            item.alias or None)
        if isinstance(item, exp.Subquery):
            rel = self.query(item.this)
            return rel.requalified(item.alias or None, item), None
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Anonymous):
            call = item.this
            if str(call.this).upper() == "TABLE" and len(call.expressions) == 1 and isinstance(
                    call.expressions[0], exp.Anonymous):
                tvf = call.expressions[0]
                fn = tvf_name(tvf)
                if fn not in ("TUMBLE", "HOP", "CUMULATE", "SESSION"):
                    raise s.error(f"unsupported table function {fn}; use TUMBLE, HOP, "
                                  "CUMULATE or SESSION", tvf)
                if not tvf.expressions:
                    raise s.error(f"{fn} needs TABLE t as its first argument", tvf)
                src = tvf.expressions[0]
                if isinstance(src, exp.Column) and not src.table:
                    rel = self.named(src.name, alias, src)
                elif isinstance(src, (exp.Subquery, exp.Select)):
                    rel = self.query(src).requalified(alias, src)
                else:
                    raise s.error(f"{fn}: the first argument must be TABLE name", src)
                return rel, window_spec(tvf, rel)
            raise s.error(f"unsupported table function {call.sql()!r}", call)
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
            if item.args.get("db") or item.args.get("catalog"):
                raise s.error("qualified table names (db.table) are not supported", item)
            return self.named(item.name, alias, item), None
        raise s.error(f"unsupported FROM item {item.sql()!r}", item)

    def select(self, sel: exp.Select) -> Rel:
        s = self.script
        self._check(sel)
        with_ = sel.args.get("with_") or sel.args.get("with")
        if with_ is not None:
            for cte in with_.expressions:
                self.ctes[cte.alias.lower()] = cte.this
        frm = sel.args.get("from_") or sel.args.get("from")
        if frm is None:
            raise s.error("a query needs FROM", sel, "SELECT")
        rel, win = self.from_item(frm.this)
        joins = sel.args.get("joins") or []
        if len(joins) > 1:
            raise s.error("only one JOIN per SELECT is supported; join the result of a view "
                          "instead", joins[1], "JOIN")
        if joins:
            if win is not None:
                raise s.error("a window TVF on the left of a JOIN: write it as a subquery "
                              "(SELECT * FROM TABLE(TUMBLE(...))) L", joins[0], "JOIN")
            from oop.sql.join import plan_join

            right, rwin = self.from_item(joins[0].this)
            if rwin is not None:
                raise s.error("a window TVF on the right of a JOIN: write it as a subquery "
                              "(SELECT * FROM TABLE(TUMBLE(...))) R", joins[0], "JOIN")
            if self.update is not None:
                raise s.error("--late update revises window aggregates; a join cannot take "
                              "back a joined row (use --late drop or side)", joins[0], "JOIN")
            lq = frm.this.alias_or_name
            rq = joins[0].this.alias_or_name
            rel = plan_join(rel, right, joins[0], lq, rq, self.strategy, self.parallel)
        where = sel.args.get("where")
        if where is not None:
            rel = rel.where(where.this)
        if win is not None and sel.args.get("group") is not None:
            return plan_window_aggregate(rel, win, sel, self.strategy, update=self.update,
                                         parallel=self.parallel)
        if win is not None:
            rel = assign_windows(rel, win, sel)
        if sel.args.get("group") is not None:
            raise s.error("GROUP BY needs a window TVF in FROM (TUMBLE, HOP, CUMULATE, SESSION) and "
                          "window_start, window_end among its keys; unbounded aggregation is "
                          "not supported", sel.args["group"], "GROUP")
        for n in sel.expressions:
            for a in n.find_all(exp.AggFunc):
                raise s.error(f"aggregate {a.sql_name()} needs a window TVF and GROUP BY "
                              "window_start, window_end", a)
        return project(rel, sel.expressions)
