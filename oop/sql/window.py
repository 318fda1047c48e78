"""Window TVFs and their aggregation: ``TABLE(TUMBLE|HOP|CUMULATE(...))`` + ``GROUP BY``.

=======================================================  =====================================
``TUMBLE(TABLE t, DESCRIPTOR(ts), size [, offset])``       ``Tumbling(size, origin=offset)``
``HOP(TABLE t, DESCRIPTOR(ts), slide, size [, offset])``   ``Sliding(size, slide, offset)``
``CUMULATE(TABLE t, DESCRIPTOR(ts), step, max [, off])``   ``Cumulate(step, max, offset)``
``SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(ts), gap)``  ``Session(gap)``, keys: GROUP BY
=======================================================  =====================================

``SESSION`` keys its sessions by the ``GROUP BY`` keys; ``PARTITION BY``
(Flink's form, one column or ``(a, b)``) may be given and must name the same
columns. Its aggregates are those of :mod:`oop.window.session`.

Without ``GROUP BY``, ``TUMBLE`` gives each row with its ``window_start``,
``window_end`` and ``window_time`` (:func:`assign_windows`; the input of a
window join). ``GROUP BY window_start, window_end [, window_time] [, keys]`` (both window
columns are required, as in Flink; ``window_time`` is ``window_end`` minus one
unit of the time column, an event-time attribute for cascading windows) plans one window operator
(:meth:`oop.Stream.window`, WID or Paned-WID by ``method="auto"``) on the
DESCRIPTOR column, which must be an event-time attribute of the input.
Aggregates:

==========================================  =====================================
``COUNT(*)``, ``COUNT(1)``                    ``agg.count()``
``COUNT(x)``                                  ``agg.sum`` of ``x IS NOT NULL`` as 0/1
``COUNT(DISTINCT x)``                         ``agg.distinct(x)``
``SUM``, ``AVG``, ``MIN``, ``MAX``            ``agg.sum / mean / min / max``
``STDDEV_SAMP``/``STDDEV``, ``VAR_SAMP``      ``agg.std / agg.var`` (sample, n - 1)
``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)``  ``agg.quantile(x, q)`` (linear)
``MEDIAN(x)``                                 ``agg.median(x)``
``FIRST_VALUE(x)``, ``LAST_VALUE(x)``         ``agg.first / agg.last`` (by event time)
==========================================  =====================================

``STDDEV_POP`` / ``VAR_POP`` / ``PERCENTILE_DISC`` are refused (the engine
has no population variance or discrete percentile; nothing else is
substituted). ``AVG`` of integers is a DOUBLE (Flink would truncate to the
integer type). Aggregate arguments and group keys may be expressions
(computed by an Apply before the window). Select items and ``HAVING`` may
combine keys, window columns and aggregates (computed after the window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from oop.sql.ddl import interval_spec
from oop.sql.expr import Col, Scope, to_arrow
from oop.sql.parallel import Parallelism
from oop.sql.parse import SESSION_ALIAS, Script
from oop.sql.relation import Rel, output_name, project
from oop.stream.timecol import parse_duration
from oop.window import Cumulate, Session, Sliding, Tumbling, agg
from oop.window.aggregates import Agg

__all__ = ["WindowSpec", "window_spec", "plan_window_aggregate", "assign_windows",
           "WINDOW_COLUMNS"]

WINDOW_COLUMNS = ("window_start", "window_end")
_SIMPLE = {exp.Sum: "sum", exp.Avg: "mean", exp.Min: "min", exp.Max: "max",
           exp.Stddev: "std", exp.StddevSamp: "std", exp.Variance: "var",
           exp.Median: "median", exp.FirstValue: "first", exp.LastValue: "last"}
_REFUSED = {exp.StddevPop: "STDDEV_POP (the engine's std is the sample deviation; use "
                           "STDDEV_SAMP)",
            exp.VariancePop: "VAR_POP (the engine's var is the sample variance; use VAR_SAMP)",
            exp.ApproxDistinct: "APPROX_COUNT_DISTINCT (use COUNT(DISTINCT x), exact)"}


@dataclass
class WindowSpec:
    """A window TVF: the kind, the DESCRIPTOR time column (physical) and the call."""

    kind: Any
    time: str
    fn: str
    node: exp.Expression
    #: SESSION ... PARTITION BY: the partition columns (physical), else None
    partition: list[str] | None = None


def window_spec(call: exp.Anonymous, rel: Rel) -> WindowSpec:
    """The window of a ``TUMBLE/HOP/CUMULATE`` call over ``rel`` (its first argument)."""
    script = rel.script
    fn = tvf_name(call)
    args = call.expressions[1:]
    partition = None
    if fn == "SESSION" and args and isinstance(args[0], exp.EQ) and \
            isinstance(args[0].this, exp.Column) and args[0].this.name.upper() == "PARTITIO":
        part = args[0].expression
        cols = part.expressions if isinstance(part, exp.Tuple) else [part.unnest()]
        if not all(isinstance(c, exp.Column) for c in cols):
            raise script.error("SESSION: PARTITION BY takes column names, e.g. PARTITION BY k "
                               "or PARTITION BY (a, b)", part)
        partition = [rel.scope.resolve(c, script) for c in cols]
        args = args[1:]
    want = {"TUMBLE": (2, 3), "HOP": (3, 4), "CUMULATE": (3, 4), "SESSION": (2, 2)}[fn]
    if not want[0] <= len(args) <= want[1]:
        raise script.error(f"{fn} takes TABLE t, DESCRIPTOR(col) and {want[0] - 1} interval(s)"
                           f"{' (+ an offset)'}", call)
    d = args[0]
    if not (isinstance(d, exp.Anonymous) and str(d.this).upper() == "DESCRIPTOR"
            and len(d.expressions) == 1 and isinstance(d.expressions[0], exp.Column)):
        raise script.error(f"{fn}: the second argument must be DESCRIPTOR(time_column)", d)
    time = rel.scope.resolve(d.expressions[0], script)
    if time not in rel.info.times:
        raise script.error(f"{fn}: DESCRIPTOR({d.expressions[0].name}) is not an event-time "
                           f"attribute; the input's are {sorted(rel.info.times)} (declare "
                           "WATERMARK FOR it)", d)
    iv = [interval_spec(a, script) for a in args[1:]]
    ns = [parse_duration(v, "ns") for v in iv]
    if any(n <= 0 for n in ns[:2]):
        raise script.error(f"{fn}: window sizes must be positive", call)
    off = iv[want[0] - 1] if len(iv) == want[0] else 0
    if fn == "SESSION":
        kind: Any = Session(iv[0])
    elif fn == "TUMBLE":
        kind = Tumbling(iv[0], off)
    elif fn == "HOP":
        if ns[0] > ns[1]:
            raise script.error("HOP: the slide (3rd argument) can't exceed the size (4th)", call)
        kind = Sliding(iv[1], iv[0], off)
    else:
        if ns[1] % ns[0]:
            raise script.error("CUMULATE: the max size must be a whole multiple of the step",
                               call)
        kind = Cumulate(iv[0], iv[1], off)
    return WindowSpec(kind, time, fn, call, partition)


def tvf_name(call: exp.Anonymous) -> str:
    """The window TVF's name, upper case (``SESSION`` arrives renamed by the parser)."""
    fn = str(call.this).upper()
    return "SESSION" if fn == SESSION_ALIAS else fn


class _WindowColumn:
    """``batch -> window_start | window_end | window_time`` of each row's tumbling window."""

    def __init__(self, kind: Any, time: str, which: str, arrow_type: pa.DataType) -> None:
        self.kind, self.time, self.which, self.type = kind, time, which, arrow_type

    def __call__(self, batch: pa.RecordBatch) -> pa.Array:
        from oop.stream.timecol import time_values

        lo, _ = self.kind.wids(time_values(batch, self.time))
        start, end = self.kind.extents(lo)
        v = start if self.which == "start" else end if self.which == "end" else end - 1
        return pa.array(v, pa.int64()).cast(self.type)


def assign_windows(rel: Rel, spec: WindowSpec, sel: exp.Expression) -> Rel:
    """A window TVF without GROUP BY: every row with its ``window_start``, ``window_end`` and
    ``window_time`` (TUMBLE only: HOP and CUMULATE would repeat each row). The relation is
    marked (:attr:`Rel.window`) so that a JOIN on equal windows plans a tumbling window join."""
    script = rel.script
    if spec.fn != "TUMBLE":
        raise script.error(f"{spec.fn} without GROUP BY is not supported (each row would be "
                           "repeated per window); aggregate with GROUP BY window_start, "
                           "window_end", spec.node)
    taken = [c for c in ("window_start", "window_end", "window_time")
             if c in rel.info.schema.names]
    if taken:
        raise script.error(f"the input already has column(s) {taken}", spec.node)
    unit = rel.info.times[spec.time]
    kind = spec.kind.resolve(unit)
    ttype = rel.info.schema.field(spec.time).type
    cols = {f"window_{w}": _WindowColumn(kind, spec.time, w, ttype)
            for w in ("start", "end", "time")}
    qual = rel.scope.cols[0].qual if rel.scope.cols else None
    scope = Scope(rel.scope.cols + [Col(qual, c, c) for c in cols])
    out = rel.map(lambda s: s.apply(name="window_assign", **cols), scope, sel)
    out.window = {"kind": kind, "time": spec.time, "start": "window_start",
                  "end": "window_end"}
    return out


def _is_agg(n: exp.Expression) -> bool:
    return isinstance(n, (exp.AggFunc, exp.WithinGroup, exp.Filter))


class _Aggs:
    """The distinct aggregates of a query, each with an internal output name."""

    def __init__(self, scope: Scope, script: Script) -> None:
        self.scope, self.script = scope, script
        self.aggs: list[Agg] = []
        self.keys: dict[tuple, str] = {}
        self.pre: dict[str, pc.Expression] = {}  # computed argument columns
        self.nodes: dict[str, exp.Expression] = {}  # output name -> the SQL call

    def _arg(self, e: exp.Expression) -> str:
        if isinstance(e, exp.Column):
            return self.scope.resolve(e, self.script)
        name = f"__v{len(self.pre)}"
        self.pre[name] = to_arrow(e, self.scope, self.script)
        return name

    def add(self, n: exp.Expression) -> str:
        """The internal column name holding aggregate ``n``."""
        s = self.script
        if isinstance(n, exp.Filter):
            raise s.error("aggregate FILTER (WHERE ...) is not supported; filter in WHERE", n)
        if isinstance(n, exp.WithinGroup):
            f, order = n.this, n.expression
            if not isinstance(f, exp.PercentileCont):
                raise s.error(f"{f.sql_name()} WITHIN GROUP is not supported (use "
                              "PERCENTILE_CONT)", n)
            ords = order.expressions if order is not None else []
            if len(ords) != 1 or ords[0].args.get("desc"):
                raise s.error("PERCENTILE_CONT needs WITHIN GROUP (ORDER BY x) (ascending)", n)
            if not isinstance(f.this, exp.Literal) or f.this.is_string:
                raise s.error("PERCENTILE_CONT takes a constant fraction like 0.5", n)
            key: tuple = ("quantile", self._arg(ords[0].this), float(f.this.name))
        elif type(n) in _REFUSED:
            raise s.error(f"unsupported aggregate {_REFUSED[type(n)]}", n)
        elif isinstance(n, exp.Count):
            a = n.this
            if isinstance(a, exp.Star) or (isinstance(a, exp.Literal) and not a.is_string):
                key = ("count",)
            elif isinstance(a, exp.Distinct):
                if len(a.expressions) != 1:
                    raise s.error("COUNT(DISTINCT ...) takes one column", n)
                key = ("distinct", self._arg(a.expressions[0]))
            else:
                col = self._arg(a)
                name = f"__n_{col}"
                self.pre[name] = pc.if_else(pc.is_valid(pc.field(col)), pa.scalar(1, pa.int64()),
                                            pa.scalar(0, pa.int64()))
                key = ("sum", name)
        elif type(n) in _SIMPLE:
            if isinstance(n.this, exp.Distinct):
                raise s.error(f"{n.sql_name()}(DISTINCT ...) is not supported", n)
            key = (_SIMPLE[type(n)], self._arg(n.this))
        else:
            raise s.error(f"unsupported aggregate {n.sql_name() if hasattr(n, 'sql_name') else n}"
                          f" in {n.sql()!r}", n)
        if key not in self.keys:
            out = f"__a{len(self.aggs)}"
            fn = key[0]
            a = agg.Agg(fn, *key[1:])  # (kind, column[, q]): checked by oop.aggregates
            self.aggs.append(a.alias_as(out))
            self.keys[key] = out
            self.nodes[out] = n
        return self.keys[key]


def key_cols_named(cols: list[Col], name: str) -> bool:
    return any(c.name.lower() == name for c in cols)


def _minus_one(v: int) -> int:
    return v - 1


def with_window_time(stream: Any, time_type: pa.DataType) -> Any:
    """Add ``window_time = window_end - 1`` (one unit of the time column: Flink's rowtime of
    a window result) as an event-time attribute: punctuation ``P(window_end, e)`` becomes
    ``P(window_time, e - 1)``, so a window over ``window_time`` (cascading windows) closes."""
    from oop.operators.apply import Apply

    one = (pa.scalar(1, pa.duration(time_type.unit)) if pa.types.is_timestamp(time_type)
           else pa.scalar(1, pa.int64()))
    from oop.operators.rename import Rename

    # the progressing attribute window_end moves to window_time (a rename keeps its
    # punctuation); window_end stays as a plain copy; then window_time - 1, declared monotone
    s = stream.apply(name="window_end_copy", __window_end=pc.field("window_end"))
    s = s.via(Rename({"window_end": "window_time", "__window_end": "window_end"},
                     name="window_time"))
    return s.via(Apply({"window_time": pc.subtract(pc.field("window_time"), one)},
                       name="window_time_minus_1", monotone={"window_time": _minus_one}))


def _name_aggs_directly(aggs: _Aggs, items: list[exp.Expression],
                        having: exp.Expression | None, taken: set[str]) -> None:
    """Give an aggregate its select alias as the window's output name when the item is just
    that aggregate (no Apply/Rename after the window for it); rewrites ``items`` in place."""
    refs: dict[str, int] = {}
    for e in items + ([having] if having is not None else []):
        for c in e.find_all(exp.Column):
            refs[c.name] = refs.get(c.name, 0) + 1
    internal = {a.name for a in aggs.aggs}
    for i, item in enumerate(items):
        inner, alias = item.this, item.alias
        if (isinstance(inner, exp.Column) and inner.name in internal and refs[inner.name] == 1
                and alias not in taken and alias not in internal and not alias.startswith("__")):
            j = [a.name for a in aggs.aggs].index(inner.name)
            aggs.aggs[j] = aggs.aggs[j].alias_as(alias)
            aggs.nodes[alias] = aggs.nodes.pop(inner.name)
            taken.add(alias)
            items[i] = exp.alias_(exp.column(alias), alias, quoted=False)


def plan_window_aggregate(rel: Rel, spec: WindowSpec, sel: exp.Select, strategy: Any,
                          update: str | None = None, parallel: Parallelism | None = None) -> Rel:
    """``SELECT ... FROM TABLE(<window TVF>) [WHERE] GROUP BY window_start, window_end, ...``.

    ``update``: the allowed lateness (a duration) when late tuples revise windows
    (``late="update"``: revised rows carry ``is_revision``); None drops them as the
    sources' late policy says. ``parallel``: on how many key partitions
    (:mod:`oop.sql.parallel`)."""
    script = rel.script
    group = sel.args.get("group")
    if group is None:
        raise script.error(f"a {spec.fn} window needs GROUP BY window_start, window_end "
                           "(window TVFs without aggregation are not supported)", sel, "SELECT")
    seen: set[str] = set()
    keys: list[str] = []
    key_cols: list[Col] = []
    pre: dict[str, pc.Expression] = {}
    expr_keys: dict[str, str] = {}  # sql text of a key expression -> its column
    for g in group.expressions:
        if isinstance(g, exp.Column) and g.name.lower() in WINDOW_COLUMNS + ("window_time",) \
                and not rel.scope.find(g.name, g.table or None):
            seen.add(g.name.lower())
        elif isinstance(g, exp.Column):
            phys = rel.scope.resolve(g, script)
            if phys not in keys:
                keys.append(phys)
            key_cols += [c for c in rel.scope.cols if c.phys == phys]
        elif isinstance(g, exp.Literal) and not g.is_string:
            raise script.error("GROUP BY by position is not supported; name the columns", g)
        else:
            name = f"__k{len(pre)}"
            pre[name] = to_arrow(g, rel.scope, script)
            keys.append(name)
            expr_keys[g.sql()] = name
    if not set(WINDOW_COLUMNS) <= seen:
        raise script.error(f"GROUP BY of a {spec.fn} window must list both window_start and "
                           "window_end", group, "GROUP")
    if spec.partition is not None and set(spec.partition) != set(keys):
        raise script.error(f"SESSION: PARTITION BY {', '.join(spec.partition)} must name the "
                           f"GROUP BY keys ({', '.join(keys) or 'none'}): sessions are keyed by "
                           "them", spec.node)
    aggs = _Aggs(rel.scope, script)
    having = sel.args.get("having")

    def rewrite(e: exp.Expression) -> exp.Expression:
        def fn(n: exp.Expression) -> exp.Expression:
            if n.sql() in expr_keys:
                return exp.column(expr_keys[n.sql()])
            if _is_agg(n):
                for inner in list(n.walk())[1:]:
                    if _is_agg(inner) and not isinstance(n, (exp.Filter, exp.WithinGroup)):
                        raise script.error("nested aggregates are not supported", inner)
                return exp.column(aggs.add(n))
            if isinstance(n, exp.Window):
                raise script.error("OVER windows are not supported", n, "OVER")
            return n

        return e.copy().transform(fn)

    items = []
    for i, item in enumerate(sel.expressions):
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Star):
            raise script.error("SELECT * is not allowed with GROUP BY; list keys and "
                               "aggregates", item)
        items.append(exp.alias_(rewrite(inner), output_name(item, i), quoted=False))
    having_e = rewrite(having.this) if having is not None else None
    _name_aggs_directly(aggs, items, having_e, set(keys) | set(WINDOW_COLUMNS))
    wt = any(c.name.lower() == "window_time" and not c.table and not key_cols_named(
        key_cols, "window_time") for e in items + ([having_e] if having_e is not None else [])
        for c in e.find_all(exp.Column))
    post = Scope([Col(None, w, w) for w in WINDOW_COLUMNS + (("window_time",) if wt else ())]
                 + key_cols
                 + [Col(None, k, k) for k in expr_keys.values()]
                 + [Col(None, a.name, a.name) for a in aggs.aggs])
    for e in items + ([having_e] if having_e is not None else []):
        for c in e.find_all(exp.Column):
            if not post.find(c.name, c.table or None):
                raise script.error(f"column {c.sql()!r} is neither in GROUP BY nor inside an "
                                   "aggregate", c)
    if not aggs.aggs:
        aggs.add(exp.Count(this=exp.Star()))  # the window operator needs one aggregate
    pre.update(aggs.pre)
    before = rel.map(lambda s: s.apply(name="window_args", **pre)) if pre else rel
    if strategy.is_iop:
        from oop.iop_baseline.buffering_window import SUPPORTED, supports
        from oop.query import WindowQuery

        if not isinstance(spec.kind, Sliding):
            raise script.error(f"the in-order strategy {strategy.spec} has no {spec.fn} windows "
                               "(the buffering window covers TUMBLE and HOP); use --strategy oop",
                               spec.node)
        bad = [a for a in aggs.aggs if not supports(a)]
        if bad:
            raise script.error(f"the in-order strategy {strategy.spec} cannot compute "
                               f"{bad[0].fn} (the buffering window implements "
                               f"{', '.join(SUPPORTED)}); use --strategy oop",
                               aggs.nodes.get(bad[0].name, sel))
        if spec.time != before.info.time:
            raise script.error(f"the in-order strategy windows on the primary event time "
                               f"{before.info.time!r}, not {spec.time!r}", spec.node)
        stream = WindowQuery(before.branches, spec.kind, aggs.aggs, by=keys).plan(strategy)
    else:
        extra: dict[str, Any] = {} if update is None else {"late": "update",
                                                           "allowed_lateness": update}
        threads = (parallel or Parallelism()).window(spec.fn, spec.kind, aggs.aggs, keys)
        stream = before.stream.window(spec.kind, aggs.aggs, by=keys, time=spec.time,
                                      name="window", threads=threads, **extra)
    if wt:
        stream = with_window_time(stream, before.info.schema.field(spec.time).type)
    out = Rel([stream], post, script, spec.node)
    if having_e is not None:
        out = out.where(having_e)
    if update is not None:  # revised rows must be told apart: is_revision is always kept
        post = Scope(post.cols + [Col(None, "is_revision", "is_revision")])
        items = [*items, exp.column("is_revision")]
    return project(out, items, post)
