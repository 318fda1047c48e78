"""SQL scalar expressions -> ``pyarrow.compute`` expressions, over a scope of named columns.

A :class:`Scope` maps what SQL can name (``k``, ``a.k``) to the physical
column of the stream (after a join, ``b.k`` may be ``k_right``).
:func:`to_arrow` translates WHERE predicates and projected expressions; the
results run vectorized in :class:`~oop.operators.select.Select` and
:class:`~oop.operators.apply.Apply`.

Supported: column references, numeric / string / boolean / NULL literals,
``+ - * /`` and unary minus, comparisons, ``AND OR NOT``, ``IS [NOT] NULL``,
``[NOT] IN (literals)``, ``[NOT] BETWEEN``, ``[NOT] LIKE`` / ``ILIKE``,
``CAST(x AS type)``, ``CASE WHEN``, ``IF``, ``COALESCE``, ``UPPER``,
``LOWER``, ``ABS``, ``CHAR_LENGTH``, ``||`` and ``TO_TIMESTAMP_LTZ(epoch, 0|3)``. SQL's three-valued logic
holds: a predicate that is NULL drops the row, as FALSE does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from oop.sql.parse import Script
from oop.sql.types import arrow_type

__all__ = ["Col", "Scope", "to_arrow"]


@dataclass(frozen=True)
class Col:
    """A column SQL can name: ``qual.name`` (qualifier may be None) is stream column ``phys``."""

    qual: str | None
    name: str
    phys: str


@dataclass
class Scope:
    """The columns visible to an expression (see module doc)."""

    cols: list[Col] = field(default_factory=list)

    def find(self, name: str, qual: str | None) -> list[Col]:
        n = name.lower()
        return [c for c in self.cols if c.name.lower() == n
                and (qual is None or (c.qual or "").lower() == qual.lower())]

    def resolve(self, col: exp.Column, script: Script) -> str:
        """The physical column of a SQL column reference (errors name the position)."""
        qual = col.table or None
        hits = self.find(col.name, qual)
        if not hits:
            if qual is not None and not any((c.qual or "").lower() == qual.lower()
                                            for c in self.cols):
                raise script.error(f"unknown table or alias {qual!r} in {col.sql()!r}", col)
            names = sorted({(f"{c.qual}." if c.qual else "") + c.name for c in self.cols})
            raise script.error(f"unknown column {col.sql()!r}; the columns here are {names}", col)
        if len({c.phys for c in hits}) > 1:
            raise script.error(f"column {col.name!r} is ambiguous; qualify it "
                               f"({', '.join(sorted(str(c.qual) for c in hits))})", col)
        return hits[0].phys


_CMP: dict[type, Callable[..., pc.Expression]] = {
    exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater, exp.GTE: pc.greater_equal,
    exp.LT: pc.less, exp.LTE: pc.less_equal, exp.Add: pc.add, exp.Sub: pc.subtract,
    exp.Mul: pc.multiply, exp.Div: pc.divide, exp.And: pc.and_kleene, exp.Or: pc.or_kleene,
}
_UNARY: dict[type, Callable[..., pc.Expression]] = {
    exp.Upper: pc.utf8_upper, exp.Lower: pc.utf8_lower, exp.Abs: pc.abs,
    exp.Length: pc.utf8_length, exp.Neg: pc.negate, exp.Not: pc.invert,
}


def _literal(node: exp.Literal) -> object:
    if node.is_string:
        return node.name
    text = node.name
    try:
        return int(text)
    except ValueError:
        return float(text)


def to_arrow(node: exp.Expression, scope: Scope, script: Script) -> pc.Expression:
    """Translate a scalar SQL expression (module doc); :class:`SqlError` for anything else."""
    def go(n: exp.Expression) -> pc.Expression:
        e = one(n)
        return pc.invert(e) if n.args.get("negate") else e  # x NOT LIKE / NOT IN / NOT BETWEEN

    def one(n: exp.Expression) -> pc.Expression:
        if isinstance(n, exp.Paren):
            return go(n.this)
        if isinstance(n, exp.Column):
            if isinstance(n.this, exp.Star):
                raise script.error("`*` is only allowed as a whole select item or in COUNT(*)", n)
            return pc.field(scope.resolve(n, script))
        if isinstance(n, exp.Literal):
            return pc.scalar(_literal(n))
        if isinstance(n, exp.Boolean):
            return pc.scalar(bool(n.this))
        if isinstance(n, exp.Null):
            return pc.scalar(None)
        if type(n) in _CMP:
            if isinstance(n.expression, exp.Interval) or isinstance(n.this, exp.Interval):
                raise script.error("INTERVAL arithmetic is only supported in WATERMARK clauses, "
                                   "window TVFs and interval-join conditions", n)
            return _CMP[type(n)](go(n.this), go(n.expression))
        if type(n) in _UNARY:
            return _UNARY[type(n)](go(n.this))
        if isinstance(n, exp.Is):
            if not isinstance(n.expression, exp.Null):
                raise script.error(f"unsupported IS form {n.sql()!r}; use IS [NOT] NULL", n)
            return pc.is_null(go(n.this))
        if isinstance(n, exp.Between):
            x = go(n.this)
            return pc.and_kleene(pc.greater_equal(x, go(n.args["low"])),
                                 pc.less_equal(x, go(n.args["high"])))
        if isinstance(n, exp.In):
            if n.args.get("query") is not None or not all(isinstance(v, (exp.Literal, exp.Neg))
                                                          for v in n.expressions):
                raise script.error("IN takes a list of literals here (no subqueries)", n)
            vals = [(-_literal(v.this) if isinstance(v, exp.Neg) else _literal(v))  # type: ignore
                    for v in n.expressions]
            return pc.is_in(go(n.this), value_set=pa.array(vals))
        if isinstance(n, (exp.Like, exp.ILike)):
            pat = n.expression
            if not (isinstance(pat, exp.Literal) and pat.is_string):
                raise script.error("LIKE needs a string literal pattern", n)
            return pc.match_like(go(n.this), pat.name, ignore_case=isinstance(n, exp.ILike))
        if isinstance(n, exp.Cast):
            return go(n.this).cast(arrow_type(n.args["to"], script))
        if isinstance(n, exp.Case):
            if n.this is not None:
                raise script.error("use the searched form CASE WHEN cond THEN ... END", n)
            conds = [go(i.this) for i in n.args["ifs"]]
            vals = [go(i.args["true"]) for i in n.args["ifs"]]
            default = go(n.args["default"]) if n.args.get("default") is not None \
                else pc.scalar(None)
            return pc.case_when(pc.make_struct(*conds), *vals, default)
        if isinstance(n, exp.If):
            f = n.args.get("false")
            return pc.if_else(go(n.this), go(n.args["true"]),
                              go(f) if f is not None else pc.scalar(None))
        if isinstance(n, exp.Coalesce):
            return pc.coalesce(go(n.this), *(go(e) for e in n.expressions))
        if isinstance(n, exp.DPipe):
            return pc.binary_join_element_wise(go(n.this), go(n.expression), pc.scalar(""))
        if isinstance(n, exp.Anonymous) and str(n.this).upper() in ("TO_TIMESTAMP_LTZ",
                                                                    "TO_TIMESTAMP"):
            args = n.expressions
            p = args[1] if len(args) == 2 else None
            if (p is None and str(n.this).upper() == "TO_TIMESTAMP_LTZ") or (
                    p is not None and not (isinstance(p, exp.Literal) and p.name in ("0", "3"))):
                raise script.error("TO_TIMESTAMP_LTZ(epoch, 0|3) takes seconds (0) or "
                                   "milliseconds (3)", n)
            if p is None:
                raise script.error("TO_TIMESTAMP(string) is not supported; declare the column "
                                   "TIMESTAMP(3)", n)
            return go(args[0]).cast(pa.timestamp("s" if p.name == "0" else "ms", "UTC"))
        name = n.sql_name() if hasattr(n, "sql_name") else type(n).__name__
        if isinstance(n, exp.Anonymous):
            name = str(n.this).upper()
        kind = "function" if isinstance(n, exp.Func) else "expression"
        raise script.error(f"unsupported {kind} {name} in {n.sql()!r}", n, None)

    return go(node)
