"""Interval joins: ``a [LEFT|RIGHT|FULL] JOIN b ON a.k = b.k AND b.ts BETWEEN ...`` -> OA-Join.

The ON condition is split at ``AND`` into

* equalities between a column of each side -> the join keys (``on=``);
* bounds on the two sides' event times -> the band: ``b.ts BETWEEN a.ts -
  INTERVAL 'x' SECOND AND a.ts + INTERVAL 'y' SECOND``, or the same as
  ``b.ts >= a.ts - ...`` / ``b.ts <= a.ts + ...`` (either side may be on the
  left of the comparison; ``a.ts = b.ts`` is a zero band). The times must be
  the inputs' event-time attributes; both a lower and an upper bound are
  needed (an unbounded join would keep its state forever);
* anything else -> the residual predicate over the joined columns.

Window joins: when both inputs are ``SELECT * FROM TABLE(TUMBLE(...))``
subqueries with the same window (no offset) and the ON condition has
``L.window_start = R.window_start AND L.window_end = R.window_end``, the join
is OA-Join's tumbling predicate (``tumbling=size``: same window
``[N*size, (N+1)*size)``) instead of a band, as in Flink's window join.

The band is ``(range0, range1)`` with ``a.ts - range0 <= b.ts <= a.ts +
range1`` (:meth:`oop.Stream.join`); durations go to the join as text and are
resolved in the inputs' time unit when the plan opens. Output columns: the
left input's, then the right's, a clashing name suffixed ``_right``; both
times stay progressing attributes.

In-order strategies (``iop-*``) plan inner joins as sort buffers + the
order-preserving OPOB join (:class:`oop.query.JoinQuery`); they have no outer
joins, so those are refused.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from oop.sql.ddl import interval_spec
from oop.sql.expr import Col, Scope, to_arrow
from oop.sql.parallel import Parallelism
from oop.sql.relation import Rel
from oop.stream.timecol import parse_duration

__all__ = ["plan_join"]

_HOW = {"": "inner", "INNER": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


class _Band:
    """Bounds on ``d = right.ts - left.ts`` in nanoseconds."""

    def __init__(self) -> None:
        self.lo: int | None = None
        self.hi: int | None = None

    def add_lo(self, v: int) -> None:
        self.lo = v if self.lo is None else max(self.lo, v)

    def add_hi(self, v: int) -> None:
        self.hi = v if self.hi is None else min(self.hi, v)


def _side_of(col: exp.Column, left: Rel, right: Rel) -> int | None:
    q = col.table or None
    in_l = bool(left.scope.find(col.name, q))
    in_r = bool(right.scope.find(col.name, q))
    if in_l and in_r:
        return None  # ambiguous: let the residual path report it
    return 0 if in_l else 1 if in_r else None


def _time_term(e: exp.Expression, left: Rel, right: Rel, times: tuple[str, str],
               script: Any) -> tuple[int, int] | None:
    """``side.ts [+|- INTERVAL]`` -> (side, offset in ns), else None."""
    off = 0
    if isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval):
        ns = parse_duration(interval_spec(e.expression, script), "ns")
        off = ns if isinstance(e, exp.Add) else -ns
        e = e.this
    while isinstance(e, exp.Paren):
        e = e.this
    if not isinstance(e, exp.Column):
        return None
    side = _side_of(e, left, right)
    if side is None:
        return None
    rel = left if side == 0 else right
    if rel.scope.resolve(e, script) != times[side]:
        return None
    return side, off


def _bound(op: type, a: exp.Expression, b: exp.Expression, band: _Band, left: Rel, right: Rel,
           times: tuple[str, str], script: Any, node: exp.Expression) -> bool:
    """Record ``a OP b`` as a bound on right.ts - left.ts; False if it is not a time bound."""
    ta = _time_term(a, left, right, times, script)
    tb = _time_term(b, left, right, times, script)
    if ta is None or tb is None or ta[0] == tb[0]:
        return False
    if op in (exp.GT, exp.LT):
        raise script.error("use >= / <= (or BETWEEN) between event times: interval-join "
                           "bounds are inclusive", node)
    # a_side.ts + oa OP b_side.ts + ob  ->  bound on d = right - left
    (sa, oa), (_, ob) = ta, tb
    c = ob - oa  # a.ts OP b.ts + c
    if op is exp.EQ:
        v = -c if sa == 0 else c  # right - left = v
        band.add_lo(v)
        band.add_hi(v)
        return True
    le = op is exp.LTE  # a <= b + c
    if sa == 0:  # left <= right + c  <=>  d >= -c ; left >= right + c <=> d <= -c
        (band.add_lo if le else band.add_hi)(-c)
    else:  # right <= left + c  <=>  d <= c
        (band.add_hi if le else band.add_lo)(c)
    return True


def _window_equality(c: exp.Expression, left: Rel, right: Rel) -> str | None:
    """``L.window_start = R.window_start`` (or ``window_end``) of two windowed inputs -> which."""
    if not (isinstance(c, exp.EQ) and isinstance(c.this, exp.Column)
            and isinstance(c.expression, exp.Column)):
        return None
    if left.window is None or right.window is None:
        return None
    sides = [_side_of(x, left, right) for x in (c.this, c.expression)]
    if set(sides) != {0, 1}:
        return None
    lc, rc = (c.this, c.expression) if sides[0] == 0 else (c.expression, c.this)
    lp, rp = left.scope.resolve(lc, left.script), right.scope.resolve(rc, right.script)
    for which in ("start", "end"):
        if lp == left.window[which] and rp == right.window[which]:
            return which
    return None


def _tumbling(same: set[str], left: Rel, right: Rel, times: tuple[str, str],
              on: exp.Expression) -> str:
    """The window size of a window join on equal TUMBLE windows (OA-Join ``tumbling=``)."""
    script = left.script
    lw, rw = left.window, right.window
    assert lw is not None and rw is not None
    if same != {"start", "end"}:
        raise script.error("a window join needs both L.window_start = R.window_start and "
                           "L.window_end = R.window_end", on)
    if lw["kind"] != rw["kind"]:
        raise script.error(f"a window join needs the same window on both sides, not "
                           f"{lw['kind']!r} and {rw['kind']!r}", on)
    if lw["kind"].o != 0:
        raise script.error("a window join needs TUMBLE windows without an offset", on)
    if (lw["time"], rw["time"]) != times:
        raise script.error("a window join's windows must be on each input's primary event time",
                           on)
    return f"{lw['kind'].r}{left.info.times[times[0]]}"


def plan_join(left: Rel, right: Rel, join: exp.Join, lq: str, rq: str,
              strategy: Any, parallel: Parallelism | None = None) -> Rel:
    """The OA-Join of ``left`` (alias ``lq``) and ``right`` (alias ``rq``) for ``join``;
    ``parallel`` says on how many SplitJoin workers (:mod:`oop.sql.parallel`)."""
    script = left.script
    side = str(join.args.get("side") or "").upper()
    kind = str(join.args.get("kind") or "").upper()
    if kind in ("CROSS", "SEMI", "ANTI", "NATURAL") or join.args.get("using"):
        raise script.error(f"{kind or 'USING'} joins are not supported; write an interval join "
                           "with ON", join, "JOIN")
    how = _HOW.get(side)
    if how is None:
        raise script.error(f"unsupported join type {side}", join, "JOIN")
    on = join.args.get("on")
    if on is None:
        raise script.error("a join needs ON with an event-time band (interval join)", join, "JOIN")
    li, ri = left.info, right.info
    if li.time is None or ri.time is None:
        raise script.error("both join inputs need an event-time attribute", join, "JOIN")
    times = (li.time, ri.time)
    band, keys, residual = _Band(), [], []
    same_window: set[str] = set()
    for c in _conjuncts(on):
        w = _window_equality(c, left, right)
        if w is not None:
            same_window.add(w)
            continue
        if isinstance(c, exp.Between):
            if (_bound(exp.GTE, c.this, c.args["low"], band, left, right, times, script, c)
                    and _bound(exp.LTE, c.this, c.args["high"], band, left, right, times,
                               script, c)):
                continue
        elif type(c) in (exp.GTE, exp.LTE, exp.GT, exp.LT, exp.EQ):
            if _bound(type(c), c.this, c.expression, band, left, right, times, script, c):
                continue
            if (isinstance(c, exp.EQ) and isinstance(c.this, exp.Column)
                    and isinstance(c.expression, exp.Column)):
                sa, sb = _side_of(c.this, left, right), _side_of(c.expression, left, right)
                if {sa, sb} == {0, 1}:
                    lc, rc = (c.this, c.expression) if sa == 0 else (c.expression, c.this)
                    keys.append((left.scope.resolve(lc, script), right.scope.resolve(rc, script)))
                    continue
        residual.append(c)
    tumbling = _tumbling(same_window, left, right, times, on) if same_window else None
    if tumbling is not None and (band.lo is not None or band.hi is not None):
        raise script.error("give either equal windows (window join) or a time band "
                           "(interval join), not both", on)
    if tumbling is None and (band.lo is None or band.hi is None):
        for c in _conjuncts(on):
            for col in c.find_all(exp.Column):
                side_ = _side_of(col, left, right)
                rel, info = (left, li) if side_ == 0 else (right, ri)
                if side_ is not None and rel.scope.resolve(col, script) in info.times and \
                        rel.scope.resolve(col, script) != info.time:
                    raise script.error(
                        f"the join's time band must be on each input's primary event time "
                        f"({lq}: {times[0]!r}, {rq}: {times[1]!r}); {col.sql()!r} is another "
                        "event-time attribute (select it first, as the view's time column, "
                        "after a join the left time is primary)", col)
        raise script.error(
            f"the join needs both a lower and an upper bound on the event times, e.g. "
            f"{rq}.{times[1]} BETWEEN {lq}.{times[0]} - INTERVAL '1' SECOND AND "
            f"{lq}.{times[0]} + INTERVAL '1' SECOND (unbounded joins are not supported)", on)
    if tumbling is None and band.lo > band.hi:  # type: ignore[operator]
        raise script.error("the join's time bounds are empty (lower bound above upper bound)", on)
    # output names: left's, then right's; a clashing right name is suffixed _right (_right2,
    # ... when that clashes too), renamed before the join so the engine sees no clash
    taken = set(li.schema.names)
    rphys = []
    for n in ri.schema.names:
        new, i = n, 1
        while new in taken:
            new, i = f"{n}_right{i if i > 1 else ''}", i + 1
        taken.add(new)
        rphys.append(new)
    ren = {a: b for a, b in zip(ri.schema.names, rphys) if a != b}
    right_stream = right.stream
    if ren:
        from oop.operators.rename import Rename

        right_stream = right_stream.via(Rename(ren, name="right_names"))
    args: dict[str, Any] = dict(on=[(a, ren.get(b, b)) for a, b in keys], how=how,
                                name="window_join" if tumbling else "interval_join")
    if tumbling is not None:
        args["tumbling"] = tumbling
    else:
        args["band"] = (f"{-band.lo}ns", f"{band.hi}ns")  # type: ignore[operator]
    scope = Scope([Col(c.qual if c.qual else lq, c.name, c.phys) for c in left.scope.cols]
                  + [Col(c.qual if c.qual else rq, c.name, rphys[ri.schema.names.index(c.phys)])
                     for c in right.scope.cols])
    if residual:
        cond = residual[0]
        for r in residual[1:]:
            cond = exp.And(this=cond, expression=r)
        args["residual"] = to_arrow(cond, scope, script)
    if strategy.is_iop:
        if how != "inner":
            raise script.error(f"the in-order strategy {strategy.spec} has no {how.upper()} "
                               "OUTER join (the order-preserving joins are inner); use "
                               "--strategy oop", join, "JOIN")
        from oop.query import JoinQuery

        stream = JoinQuery(left.stream, right_stream, iop_join="opob", **args).plan(strategy)
    else:
        workers = (parallel or Parallelism()).join(args["name"], [li.schema, ri.schema],
                                                   bool(keys))
        stream = left.stream.join(right_stream, workers=workers, ordered=True, keyed=True,
                                  **args)
    out = Rel([stream], scope, script, join)
    if out.info.schema.names != list(li.schema.names) + rphys:  # pragma: no cover - invariant
        raise script.error(f"internal: the join's output columns {out.info.schema.names} are "
                           "not the planned ones", join, "JOIN")
    return out
