"""Order-agnostic window aggregation: WID and Paned-WID (004 ch. 5-6, DESIGN §3).

API
---
Window kinds (frozen dataclasses, sizes as ``"10s"`` or ints in the time unit)::

    Tumbling(size, origin=0)              Sliding(range, slide, origin=0)
    Landmark(slide, origin=0)             RowSliding(range, slide)        # arrival rows
    Cumulate(step, size, origin=0)        # Flink CUMULATE: [k*size, k*size + j*step)
    PartitionedRows(range, slide)         SlideByTuple(range, slide_rows=1)
    Session(gap)                          # per key, split where tuples are >= gap apart

each with ``extent(wid) -> (start, end)`` (half-open, the reference),
``wids(values) -> (lo, hi)`` (vectorized exact inverse) and ``windows(values)``.

Aggregates (``oop.window.agg``)::

    agg.count() agg.sum(c) agg.mean(c) agg.min(c) agg.max(c) agg.var(c) agg.std(c)
    agg.first(c) agg.last(c) agg.median(c) agg.quantile(c, q) agg.distinct(c)
    agg.heavy_hitters(c, k) agg.udaf(name, init, update, merge, finalize, column=c)

output columns ``count``, ``sum_c``, ``mean_c``, ..., ``q90_c``, ``distinct_c``,
``heavy_hitters_c``; each has ``holistic``, ``differential`` and the scalar
algebra ``init/update/merge/revert/finalize``.

Fluent::

    oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay("5s")) \\
       .window(Sliding("10s", "1s"), [agg.count(), agg.sum("v")], by="k",
               method="auto", late=None, allowed_lateness=0, emit_wid=False)

Output: key columns, ``window_start``, ``window_end`` (the time column's Arrow
type), aggregate columns (+ ``wid``; + ``is_revision`` with ``late="update"``),
punctuated on ``window_end``. Operator: :class:`WindowAggregate` (Bucket +
Aggregate, 004 §6.1; with ``method="paned"`` Paned-WID, 004 §6.2);
:func:`window_operator` plans one (``layout="auto"|"dense"|"hash"``: dense
ring x key codes, or a hash table of live (window, key) cells for sparse keys;
the choice is in ``op.plan_info``). ``method="auto"`` applies the cost model of
004 Eqs. 6.1-6.4 (:func:`choose_method`). Oracle without a pipeline:
``oop.window.reference.window_oracle(table, kind, aggs, by, time, unit)``.

>>> import pyarrow as pa, oop
>>> from oop.window import Tumbling, agg
>>> t = pa.table({"ts": [1, 12, 5, 3, 14], "k": ["a", "a", "b", "a", "a"], "v": [1, 2, 3, 5, 4]})
>>> s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(10), batch_size=2)
>>> s.window(Tumbling(10), [agg.count(), agg.sum("v")], by="k").collect().to_pylist()[0]
{'k': 'a', 'window_start': 0, 'window_end': 10, 'count': 2, 'sum_v': 6}

The names load on first use (PEP 562), so ``oop.window.specs`` (the CLI's spec
parser) does not import the kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oop.lazy import lazy_names

if TYPE_CHECKING:  # the eager imports, for type checkers and IDEs
    from oop.window import aggregates as agg
    from oop.window.aggregate import WindowAggregate, choose_method
    from oop.window.aggregates import Agg
    from oop.window.cumulate import Cumulate
    from oop.window.kinds import (
        Landmark,
        PartitionedRows,
        RowSliding,
        SlideByTuple,
        Sliding,
        Tumbling,
        WindowKind,
    )
    from oop.window.plan import window_operator
    from oop.window.session import Session, SessionAggregate

#: public name -> (defining module, attribute; ``None``: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "agg": ("oop.window.aggregates", None),
    "Agg": ("oop.window.aggregates", "Agg"),
    "WindowKind": ("oop.window.kinds", "WindowKind"),
    "Tumbling": ("oop.window.kinds", "Tumbling"),
    "Sliding": ("oop.window.kinds", "Sliding"),
    "Landmark": ("oop.window.kinds", "Landmark"),
    "RowSliding": ("oop.window.kinds", "RowSliding"),
    "PartitionedRows": ("oop.window.kinds", "PartitionedRows"),
    "SlideByTuple": ("oop.window.kinds", "SlideByTuple"),
    "Cumulate": ("oop.window.cumulate", "Cumulate"),
    "Session": ("oop.window.session", "Session"),
    "SessionAggregate": ("oop.window.session", "SessionAggregate"),
    "WindowAggregate": ("oop.window.aggregate", "WindowAggregate"),
    "window_operator": ("oop.window.plan", "window_operator"),
    "choose_method": ("oop.window.aggregate", "choose_method"),
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_names("oop.window", _LAZY, globals())
