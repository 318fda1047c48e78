"""From-scratch references for the window joins: a nested-loop join over whole inputs.

:func:`nested_loop_join` is the oracle the tests compare OA-Join, SplitJoin,
OPOB and OPIB with: it sees both inputs completely (no streaming, no state,
no punctuation) and applies the definition of each join variant literally,
tuple pair by tuple pair. Results are returned as a ``collections.Counter``
of row tuples (output column order, ``None`` for nulls), so comparisons are
bag comparisons independent of output order.

>>> import pyarrow as pa
>>> from oop.join.spec import WindowPredicate
>>> L = pa.table({"ts": [0, 10], "k": [1, 1]}); R = pa.table({"ts": [2, 30], "k": [1, 1]})
>>> sorted(nested_loop_join(L, R, WindowPredicate.band(3, 3), [("k", "k")], "ts", "ts", "left"))
[(0, 1, 2, 1), (10, 1, None, None)]
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Sequence

import pyarrow as pa

from oop.join.spec import WindowPredicate

__all__ = ["nested_loop_join", "rows_counter", "drive"]


def rows_counter(table: pa.Table | pa.RecordBatch, columns: Sequence[str] | None = None) -> Counter:
    """The rows of ``table`` as a Counter of tuples (bag semantics)."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    cols = columns or table.column_names
    data = [table.column(c).to_pylist() for c in cols]
    return Counter(zip(*data)) if data else Counter()


def nested_loop_join(
    left: pa.Table,
    right: pa.Table,
    predicate: WindowPredicate,
    on: Sequence[tuple[str, str]],
    left_time: str,
    right_time: str,
    how: str = "inner",
    residual_row: Callable[[dict[str, Any]], bool] | None = None,
    suffix: str = "_right",
) -> Counter:
    """The join of ``left`` and ``right`` by definition (O(|left| x |right|) Python)."""
    L = left.to_pylist()
    R = right.to_pylist()
    lnames = left.column_names
    rnames = [c + suffix if c in lnames else c for c in right.column_names]

    def joined(l: dict | None, r: dict | None) -> dict:
        d = {c: (l[c] if l is not None else None) for c in lnames}
        for c, rc in zip(right.column_names, rnames):
            d[rc] = r[c] if r is not None else None
        return d

    def match(l: dict, r: dict) -> bool:
        for a, b in on:
            if l[a] is None or r[b] is None or l[a] != r[b]:
                return False
        if not predicate.matches(l[left_time], r[right_time]):
            return False
        return residual_row is None or bool(residual_row(joined(l, r)))

    out: Counter = Counter()
    lmatched = [False] * len(L)
    rmatched = [False] * len(R)
    for i, l in enumerate(L):
        for j, r in enumerate(R):
            if match(l, r):
                lmatched[i] = rmatched[j] = True
                if how not in ("semi", "anti"):
                    d = joined(l, r)
                    out[tuple(d[c] for c in lnames + rnames)] += 1
    if how in ("semi", "anti"):
        want = how == "semi"
        for i, l in enumerate(L):
            if lmatched[i] == want:
                out[tuple(l[c] for c in lnames)] += 1
        return out
    if how in ("left", "full"):
        for i, l in enumerate(L):
            if not lmatched[i]:
                d = joined(l, None)
                out[tuple(d[c] for c in lnames + rnames)] += 1
    if how in ("right", "full"):
        for j, r in enumerate(R):
            if not rmatched[j]:
                d = joined(None, r)
                out[tuple(d[c] for c in lnames + rnames)] += 1
    return out


def drive(
    op: Any,
    inputs: Sequence[Any],
    feed: Sequence[tuple[int, Any]],
    *,
    check: bool = False,
    end_order: Sequence[int] = (0, 1),
) -> list[Any]:
    """Push ``feed`` -- ``(port, batch | punctuation)`` in arrival order -- through a
    two-input operator opened on ``inputs`` (StreamInfos), end both ports, and
    return every element it emitted, in order. ``check`` calls ``op._check()``
    after every step. A small harness for tests and experiments that need
    per-element control (the executor interleaves sources round-robin).
    """
    from oop.stream.elements import END_OF_STREAM

    op.open(list(inputs))
    out: list[Any] = []
    for port, el in feed:
        if isinstance(el, pa.RecordBatch):
            out.extend(op.on_batch(el, port))
        else:
            out.extend(op.on_punctuation(el, port))
        if check:
            op._check()
    for port in end_order:
        out.extend(op.on_end(port))
        if check:
            op._check()
    out.append(END_OF_STREAM)
    return out
