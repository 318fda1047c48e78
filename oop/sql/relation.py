"""Relations while planning: a stream (or union branches), its SQL scope, and its StreamInfo.

A :class:`Rel` holds the oop plan built so far as a list of *branches*
(one per ``UNION ALL`` input; one for everything else). Row-wise steps --
WHERE (:class:`~oop.operators.select.Select`), computed columns
(:class:`~oop.operators.apply.Apply`), projection and renaming -- are
applied to every branch, so a union is melded (:class:`~oop.operators.meld.Meld`)
only where something needs the whole stream (a window, a join, the end), and
an in-order plan can still sort each input on its own (:mod:`oop.query`).

:func:`info_of` opens a throw-away copy of a stream's DAG to learn its
output schema and progressing attributes while planning (the user's
operators stay unopened).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import pyarrow.compute as pc
from sqlglot import exp

from oop.errors import OopError
from oop.operators.base import StreamInfo
from oop.plan.executor import Node, topological
from oop.sql.expr import Col, Scope, to_arrow
from oop.sql.parse import Script

__all__ = ["Rel", "info_of", "project", "union_all", "output_name"]


def info_of(stream: Any) -> StreamInfo:
    """The StreamInfo ``stream`` would have, from opening a fresh copy of its DAG."""
    memo: dict[int, Node] = {}

    def copy(n: Node) -> Node:
        if n.id not in memo:
            memo[n.id] = Node(n.op.fresh(), [copy(p) for p in n.parents])
        return memo[n.id]

    top = copy(stream.node)
    for n in topological([top]):
        n.op.open([p.op.output for p in n.parents])
    assert top.op.output is not None
    return top.op.output


@dataclass
class Rel:
    """Branches of an oop plan + the SQL names of their columns (module doc)."""

    branches: list[Any]
    scope: Scope
    script: Script
    node: exp.Expression | None = None
    #: rows carrying their TUMBLE window (a window TVF without GROUP BY): the window kind and
    #: the physical names of the time, window_start and window_end columns
    window: dict[str, Any] | None = None
    _info: StreamInfo | None = field(default=None, repr=False)
    _melded: Any = field(default=None, repr=False)

    @property
    def stream(self) -> Any:
        """The whole relation as one stream (branches melded)."""
        if self._melded is None:
            b = self.branches
            self._melded = b[0] if len(b) == 1 else b[0].meld(*b[1:], name="union_all")
        return self._melded

    @property
    def info(self) -> StreamInfo:
        if self._info is None:
            try:
                self._info = info_of(self.branches[0])
            except OopError as e:
                raise self.script.error(str(e), self.node) from None
        return self._info

    def map(self, fn: Callable[[Any], Any], scope: Scope | None = None,
            node: exp.Expression | None = None) -> "Rel":
        """The relation with ``fn`` applied to every branch (and a new scope)."""
        out = Rel([fn(b) for b in self.branches], scope or self.scope, self.script,
                  node or self.node, self.window if scope is None else None)
        out.info  # validate now: errors point at this step's SQL
        return out

    def where(self, cond: exp.Expression) -> "Rel":
        """``WHERE cond`` as a Select on every branch."""
        pred = to_arrow(cond, self.scope, self.script)
        return self.map(lambda s: s.select(pred, name="where"), node=cond)

    def times(self) -> dict[str, str]:
        return dict(self.info.times)

    def requalified(self, qual: str | None, node: exp.Expression | None = None) -> "Rel":
        """The same relation with every column qualified by ``qual`` (an alias or view name)."""
        return Rel(self.branches, Scope([Col(qual, c.name, c.phys) for c in self.scope.cols]),
                   self.script, node or self.node, self.window)


def output_name(item: exp.Expression, i: int) -> str:
    """The output column name of select item ``i``: its alias, its column name, else ``EXPR$i``."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item.name
    return f"EXPR${i}"


def project(rel: Rel, items: Sequence[exp.Expression], scope: Scope | None = None) -> Rel:
    """``SELECT items``: Apply (computed items) -> Project -> Rename, on every branch.

    A plain column keeps being a progressing attribute under its new name
    (:class:`~oop.operators.rename.Rename`); a computed one is an ordinary
    column. ``*`` and ``t.*`` expand to the scope's columns under their
    physical names (a join's ``k_right``). Output names must be unique.
    """
    from oop.operators.rename import Rename

    scope = scope or rel.scope
    script = rel.script
    outs: list[tuple[str, str]] = []  # (output name, physical column)
    exprs: dict[str, pc.Expression] = {}
    used: set[str] = set()
    for i, item in enumerate(items):
        inner = item.this if isinstance(item, exp.Alias) else item
        star_q = None
        if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column)
                                           and isinstance(inner.this, exp.Star)):
            star_q = inner.table if isinstance(inner, exp.Column) else None
            cols = [c for c in scope.cols if not c.name.startswith("__")
                    and (not star_q or (c.qual or "").lower() == star_q.lower())]
            if not cols:
                raise script.error(f"{inner.sql()!r} matches no columns", item)
            pairs = [(c.phys, c.phys) for c in cols]
        elif isinstance(inner, exp.Column):
            pairs = [(output_name(item, i), scope.resolve(inner, script))]
        else:
            tmp = f"__e{i}"
            exprs[tmp] = to_arrow(inner, scope, script)
            pairs = [(output_name(item, i), tmp)]
        for name, phys in pairs:
            if phys in used:  # the same column twice: a computed copy
                tmp = f"__e{i}_{phys}"
                exprs[tmp] = pc.field(phys)
                phys = tmp
            used.add(phys)
            outs.append((name, phys))
    names = [n for n, _ in outs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise script.error(f"the result has two columns named {dup}; give them different "
                           "aliases (AS name)", items[0])
    phys = [p for _, p in outs]
    cur = rel.info.schema.names
    new_scope = Scope([Col(None, n, n) for n in names])
    window = None
    if rel.window is not None:  # the window columns and the time survive: keep the marker
        new_of = {p: n for n, p in outs}
        w = rel.window
        if all(w[c] in new_of for c in ("time", "start", "end")):
            window = dict(w, **{c: new_of[w[c]] for c in ("time", "start", "end")})
    if not exprs and phys == list(cur) and names == phys:
        return Rel(rel.branches, new_scope, script, rel.node, window)

    def step(s: Any) -> Any:
        if exprs:
            s = s.apply(name="select_exprs", **exprs)
        if phys != list(cur) or exprs:
            s = s.project(phys, name="select")
        ren = {p: n for n, p in outs if p != n}
        return s.via(Rename(ren, name="as")) if ren else s

    out = rel.map(step, new_scope)
    out.window = window
    return out


def union_all(parts: list[Rel], node: exp.Expression) -> Rel:
    """``UNION ALL``: each part renamed to the first part's column names (by position)."""
    from oop.operators.rename import Rename

    first = parts[0]
    script = first.script
    names = first.info.schema.names
    branches = list(first.branches)
    for p in parts[1:]:
        s = p.info.schema
        if len(s) != len(names):
            raise script.error(f"UNION ALL inputs have {len(names)} and {len(s)} columns; give "
                               "each the same select list", p.node or node)
        for f, g in zip(first.info.schema, s):
            if f.type != g.type:
                raise script.error(f"UNION ALL column {f.name!r} is {f.type} in the first input "
                                   f"but {g.type} in another; CAST one of them", p.node or node)
        pos = [None if i.time is None else i.schema.names.index(i.time)
               for i in (first.info, p.info)]
        if pos[0] != pos[1]:
            raise script.error("UNION ALL inputs must all keep (or all drop) their event-time "
                               "column, in the same position", p.node or node)
        ren = {a: b for a, b in zip(s.names, names) if a != b}
        branches += [b.via(Rename(ren, name="as")) if ren else b for b in p.branches]
    out = Rel(branches, Scope([Col(None, n, n) for n in names]), script, node)
    out.info  # noqa: B018 - validates the union
    return out
