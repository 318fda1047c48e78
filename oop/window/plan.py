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

from typing import Sequence, Unpack

from oop.operators.base import Operator
from oop.window.aggregates import Agg
from oop.window.build import operator_for
from oop.window.kinds import WindowKind
from oop.window.params import WindowOptions, WindowParams

__all__ = ["window_operator"]


def window_operator(kind: WindowKind, aggs: Agg | Sequence[Agg], *, threads: int = 1,
                    **options: Unpack[WindowOptions]) -> Operator:
    """The operator computing the window query (see the module docstring); ``options`` are
    the fields of :class:`~oop.window.params.WindowParams` (by, method, late,
    allowed_lateness, emit_wid, name, layout, time, max_state_bytes).

    ``layout`` (time and row windows): ``"dense"`` ring x codes, ``"hash"``
    cells (WID only), or ``"auto"`` (decided on the first batch from the key
    density, :meth:`WindowAggregate._choose_layout`). ``time``: the progressing
    attribute to window on (default: the stream's primary one); punctuation on
    other attributes does not close windows. ``threads > 1``: the query runs on that many
    key partitions (:class:`~oop.window.threaded.ThreadedWindow`, same output in the same
    order) where :func:`~oop.window.threaded.threadable` allows, else on one thread.
    """
    p = WindowParams.of(kind, aggs, **options)
    if threads > 1:
        from oop.window.threaded import ThreadedWindow, threadable

        if threadable(p.kind, p.aggs, list(p.by)) is None:
            kw = p.options(drop=("max_state_bytes",) if p.max_state_bytes is None else ())
            return ThreadedWindow(p.kind, p.aggs, threads=threads, **kw)
    return operator_for(p)
