"""Planning a window query: pick the operator for the window kind and method.

:func:`window_operator` is what ``Stream.window`` calls:

* :class:`~oop.window.kinds.PartitionedRows` ->
  :class:`~oop.window.partitioned.PartitionedRowsAggregate`;
* :class:`~oop.window.kinds.SlideByTuple` ->
  :class:`~oop.window.slide_by_tuple.SlideByTupleAggregate` (bins, 004 §6.1.4);
* :class:`~oop.window.session.Session` ->
  :class:`~oop.window.session.SessionAggregate` (event-time sessions);
* otherwise :class:`~oop.window.aggregate.WindowAggregate` with ``method``
  ``"wid"``, ``"paned"`` (Paned-WID, :mod:`oop.window.paned`) or ``"auto"``
  (the cost model of 004 Eqs. 6.1-6.4 decides on the first batch).
"""

from __future__ import annotations

from typing import Sequence

from oop.operators.base import Operator
from oop.stream.late import LatePolicy
from oop.window.aggregates import Agg
from oop.window.build import one_window_operator
from oop.window.kinds import WindowKind

__all__ = ["window_operator"]


def window_operator(
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
    threads: int = 1,
) -> Operator:
    """The operator computing the window query (see the module docstring).

    ``layout`` (time and row windows): ``"dense"`` ring x codes, ``"hash"``
    cells (WID only), or ``"auto"`` (decided on the first batch from the key
    density, :meth:`WindowAggregate._choose_layout`). ``time``: the progressing
    attribute to window on (default: the stream's primary one); punctuation on
    other attributes does not close windows. ``threads > 1``: the query runs on that many
    key partitions (:class:`~oop.window.threaded.ThreadedWindow`, same output in the same
    order) where :func:`~oop.window.threaded.threadable` allows, else on one thread.
    """
    if threads > 1:
        from oop.window.threaded import ThreadedWindow, threadable

        if threadable(kind, aggs, [by] if isinstance(by, str) else list(by)) is None:
            return ThreadedWindow(kind, aggs, threads=threads, by=by, method=method, late=late,
                                  allowed_lateness=allowed_lateness, emit_wid=emit_wid,
                                  name=name, layout=layout, time=time)
    return one_window_operator(kind, aggs, by=by, method=method, late=late,
                               allowed_lateness=allowed_lateness, emit_wid=emit_wid, name=name,
                               layout=layout, time=time)
