"""The window operator of one query on one thread: which class computes which window kind.

:func:`oop.window.plan.window_operator` is the public entry (it also spreads a query over
key partitions on threads, :mod:`oop.window.threaded`, whose partitions are built here).
"""

from __future__ import annotations

from typing import Sequence, Unpack

from oop.operators.base import Operator
from oop.window.aggregates import Agg
from oop.window.kinds import PartitionedRows, SlideByTuple, WindowKind
from oop.window.params import WindowOptions, WindowParams
from oop.window.session import Session

__all__ = ["one_window_operator", "operator_for"]


def one_window_operator(kind: WindowKind, aggs: Agg | Sequence[Agg],
                        **options: Unpack[WindowOptions]) -> Operator:
    """The one-thread operator for ``kind`` (options: :class:`~oop.window.params.WindowParams`,
    as :func:`~oop.window.plan.window_operator`): see :func:`operator_for`."""
    return operator_for(WindowParams.of(kind, aggs, **options))


def operator_for(p: WindowParams) -> Operator:
    """The one-thread operator of query ``p``: partitioned rows, session, slide-by-tuple,
    else :class:`~oop.window.aggregate.WindowAggregate` (WID or Paned-WID by ``p.method``)."""
    kind = p.kind
    # layout and the state bound are WindowAggregate's options only
    kw = p.options(drop=("layout", "max_state_bytes") if p.max_state_bytes is None else ("layout",))
    if isinstance(kind, PartitionedRows):
        from oop.window.partitioned import PartitionedRowsAggregate

        return PartitionedRowsAggregate(kind, p.aggs, **kw)
    if isinstance(kind, Session):
        from oop.window.session import SessionAggregate

        return SessionAggregate(kind, p.aggs, **kw)
    if isinstance(kind, SlideByTuple):
        from oop.window.slide_by_tuple import SlideByTupleAggregate

        return SlideByTupleAggregate(kind, p.aggs, **kw)
    from oop.window.aggregate import WindowAggregate

    return WindowAggregate(kind, p.aggs, **p.options())
