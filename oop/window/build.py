"""The window operator of one query on one thread: which class computes which window kind.

:func:`oop.window.plan.window_operator` is the public entry (it also spreads a query over
key partitions on threads, :mod:`oop.window.threaded`, whose partitions are built here).
"""

from __future__ import annotations

from typing import Sequence

from oop.operators.base import Operator
from oop.stream.late import LatePolicy
from oop.window.aggregates import Agg
from oop.window.kinds import PartitionedRows, SlideByTuple, WindowKind
from oop.window.session import Session

__all__ = ["one_window_operator"]


def one_window_operator(
    kind: WindowKind,
    aggs: Agg | Sequence[Agg],
    *,
    by: str | Sequence[str] = (),
    method: str = "auto",
    late: LatePolicy | str | None = None,
    allowed_lateness: int | str = 0,
    emit_wid: bool = False,
    name: str = "window",
    layout: str = "auto",
    time: str | None = None,
) -> Operator:
    """The one-thread operator for ``kind`` (arguments as :func:`~oop.window.plan.window_operator`):
    partitioned rows, session, slide-by-tuple, else :class:`~oop.window.aggregate.WindowAggregate`
    (WID or Paned-WID by ``method``)."""
    kw = dict(by=by, late=late, allowed_lateness=allowed_lateness, emit_wid=emit_wid, name=name,
              time=time)
    if isinstance(kind, PartitionedRows):
        from oop.window.partitioned import PartitionedRowsAggregate

        return PartitionedRowsAggregate(kind, aggs, method=method, **kw)  # type: ignore[arg-type]
    if isinstance(kind, Session):
        from oop.window.session import SessionAggregate

        return SessionAggregate(kind, aggs, method=method, **kw)  # type: ignore[arg-type]
    if isinstance(kind, SlideByTuple):
        from oop.window.slide_by_tuple import SlideByTupleAggregate

        return SlideByTupleAggregate(kind, aggs, method=method, **kw)  # type: ignore[arg-type]
    from oop.window.aggregate import WindowAggregate

    return WindowAggregate(kind, aggs, method=method, layout=layout, **kw)  # type: ignore[arg-type]
