"""Pluggable disorder handling: write a query once, plan it OOP or IOP (DESIGN §4).

A logical query -- sources -> union -> window aggregate -> sink -- is a
:class:`WindowQuery`. :meth:`WindowQuery.plan` turns it into a physical plan
(an :class:`oop.Stream`) for a :class:`Strategy`:

==========================  ==============================================================
``oop``                     Meld (min of punctuations) -> WID window (order-agnostic,
                            punctuation-driven; 004 ch. 6, §8.2)
``iop-sort``                per source a heartbeat SortBuffer (release on punctuation)
                            -> order-preserving Merge -> BufferingWindow (004 §3.1)
``iop-bsort:N``             per source a BSort buffer of N tuples -> Merge -> BufferingWindow
``iop-slack:D[,consistent]``  union -> BufferingWindow with time slack D, *consistent*
                            semantics (a late tuple leaves every extent; 004 §6.1.5)
``iop-slack:D,generous``    the same with *generous* slack (a late tuple still counts in
                            the extents that are open)
==========================  ==============================================================

Slack plans ignore punctuation (slack *replaces* it, as in Fig. 6-11); the
sort plans use it as heartbeats. When the slack covers the actual disorder
all plans give the batch oracle's rows; when it does not, the IOP plan drops
tuples and :func:`dropped` / :func:`accuracy` report how many and how much
the results are off.

>>> parse_strategy("iop-slack:2s,generous")
Strategy(kind='iop-slack', amount='2s', semantics='generous')
>>> parse_strategy("oop").spec, parse_strategy("iop-bsort:100").spec
('oop', 'iop-bsort:100')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.strategy import STRATEGY_HELP, Strategy, parse_strategy

__all__ = ["Strategy", "parse_strategy", "WindowQuery", "JoinQuery", "dropped", "partially_dropped", "accuracy",
           "Accuracy", "STRATEGY_HELP"]

#: operator names whose late counts are tuples an IOP plan dropped
_IOP_OPS = ("sort", "merge", "buffering_window", "reorder")


class WindowQuery:
    """sources -> union -> window aggregate, planned per :class:`Strategy`.

    ``sources`` are :class:`oop.Stream` objects with the same schema and
    progressing attribute; ``kind``/``aggs``/``by`` as in
    :meth:`oop.Stream.window`. ``method`` is the OOP window method.
    """

    def __init__(self, sources: Sequence[Any], kind: Any, aggs: Any, by: Sequence[str] | str = (),
                 *, method: str = "auto", differential: bool = False, name: str = "window") -> None:
        if not sources:
            raise ConfigError("WindowQuery: give at least one source stream")
        self.sources = list(sources)
        self.kind = kind
        self.aggs = aggs
        self.by = (by,) if isinstance(by, str) else tuple(by)
        self.method = method
        self.differential = differential
        self.name = name

    def plan(self, strategy: Strategy | str = "oop") -> Any:
        """The physical plan (an ``oop.Stream``) for ``strategy``."""
        from oop.iop_baseline.buffering_window import BufferingWindow, Slack
        from oop.iop_baseline.merge import Merge
        from oop.iop_baseline.sort_buffer import SortBuffer

        st = parse_strategy(strategy)
        srcs = self.sources
        if st.kind == "oop":
            u = srcs[0].meld(*srcs[1:], name="meld") if len(srcs) > 1 else srcs[0]
            return u.window(self.kind, self.aggs, by=self.by, method=self.method, name=self.name)
        if st.kind in ("iop-sort", "iop-bsort"):
            mode = "punctuation" if st.kind == "iop-sort" else "tuples"
            sorted_ = [s.via(SortBuffer(mode=mode, slack=st.amount or 0, name=f"sort[{mode}]"))
                       for s in srcs]
            u = sorted_[0].via(Merge(len(srcs)), *sorted_[1:]) if len(srcs) > 1 else sorted_[0]
            return u.via(BufferingWindow(self.kind, self.aggs, self.by,
                                         differential=self.differential,
                                         name="buffering_window"))
        assert st.amount is not None
        u = srcs[0].meld(*srcs[1:], name="union") if len(srcs) > 1 else srcs[0]
        return u.via(BufferingWindow(self.kind, self.aggs, self.by, differential=self.differential,
                                     slack=Slack(st.amount, st.semantics), heartbeat=False,
                                     name="buffering_window"))


class JoinQuery:
    """Two sources -> window join, planned OOP (OA-Join) or IOP (OPOB/OPIB when available).

    ``**join_args`` are passed to :meth:`oop.Stream.join` (``on``, ``band``,
    ``tumbling``, ...). IOP plans sort each input (heartbeat) and use the
    order-preserving join ``iop_join`` ("opob" or "opib") of
    :mod:`oop.iop_baseline` -- present only once those modules exist.
    """

    def __init__(self, left: Any, right: Any, *, iop_join: str = "opob", **join_args: Any) -> None:
        self.left, self.right = left, right
        self.iop_join = iop_join
        self.join_args = join_args

    def plan(self, strategy: Strategy | str = "oop") -> Any:
        st = parse_strategy(strategy)
        if st.kind == "oop":
            return self.left.join(self.right, **self.join_args)
        import oop.iop_baseline as iop

        factory = getattr(iop, "plan_" + self.iop_join, None)
        if factory is None:
            raise ConfigError(f"JoinQuery: no IOP join {self.iop_join!r} in oop.iop_baseline "
                              "(expects a plan_opob / plan_opib factory); use strategy 'oop'")
        return factory(self.left, self.right, strategy=st, **self.join_args)


# ---- reporting -------------------------------------------------------------
def dropped(result: Any) -> int:
    """Tuples the IOP operators of a run dropped as late (sources' own late counts excluded)."""
    total = 0
    for name, m in result.metrics.items():
        if name.split("#")[0].startswith(_IOP_OPS):
            total += m.late_total
    return total


def partially_dropped(result: Any) -> int:
    """Tuples generous slack kept for open extents but missed in closed ones."""
    return sum(m.counters.get("partially_late", 0) for name, m in result.metrics.items()
               if name.split("#")[0].startswith(_IOP_OPS))


@dataclass(frozen=True)
class Accuracy:
    """How a plan's window rows compare with the oracle's (004 §6.1.5 metrics).

    ``mean_error_pct``: per (group, window) of the oracle, ``|got - true| / |true|``
    in percent (a missing row counts 100%), averaged; ``exact_fraction``: share of
    oracle rows reproduced exactly; ``missing``/``extra``: rows absent / not in the oracle.
    """

    rows_expected: int
    rows_got: int
    exact_fraction: float
    mean_error_pct: float
    missing: int
    extra: int


def accuracy(got: pa.Table, expected: pa.Table, keys: Sequence[str], value: str) -> Accuracy:
    """Compare column ``value`` of ``got`` with ``expected`` joined on ``keys`` (e.g. by + window_start)."""
    def as_map(t: pa.Table) -> dict[tuple[Any, ...], Any]:
        cols = [t.column(k).to_pylist() for k in keys]
        vals = t.column(value).to_pylist()
        return {tuple(c[i] for c in cols): vals[i] for i in range(t.num_rows)}

    g, e = as_map(got), as_map(expected)
    errs = []
    exact = 0
    for k, v in e.items():
        w = g.get(k)
        if w is not None and v is not None and w == v:
            exact += 1
        if w is None or v is None:
            errs.append(0.0 if w == v else 100.0)
        elif v == 0:
            errs.append(0.0 if w == 0 else 100.0)
        else:
            errs.append(abs(float(w) - float(v)) / abs(float(v)) * 100.0)
    n = len(e)
    return Accuracy(n, len(g), exact / n if n else 1.0, float(np.mean(errs)) if errs else 0.0,
                    sum(1 for k in e if k not in g), sum(1 for k in g if k not in e))
