"""From-scratch references for window aggregation (the test oracles).

* :func:`window_oracle` -- a batch group-by over ``extent()``: for every
  window of ``kind.windows(values)`` take the rows inside ``extent(w)``,
  group them by key and fold each aggregate's scalar algebra. No pipeline,
  no punctuation, no kernels: obviously correct and slow (O(windows x rows)).
  Usable by anyone who needs the expected answer of a window query
  (the Spark and experiment code compare against it).
* :class:`TupleAtATimeWindow` -- the operator semantics, one tuple at a
  time: ``wids()`` per tuple, a dict of scalar states keyed by
  ``(group, wid)``, emission when punctuation covers ``extent(w)``.

>>> import pyarrow as pa
>>> from oop.window import Tumbling, agg
>>> t = pa.table({"ts": [1, 12, 5, 14], "k": ["a", "a", "b", "a"]})
>>> window_oracle(t, Tumbling(10), [agg.count()], by=["k"], time="ts").to_pylist()[:2]
[{'k': 'a', 'window_start': 0, 'window_end': 10, 'count': 1}, {'k': 'b', 'window_start': 0, 'window_end': 10, 'count': 1}]
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from oop.window.aggregates import Agg, as_aggs, output_type
from oop.window.kinds import SlideByTuple, WindowKind

__all__ = ["window_oracle", "TupleAtATimeWindow", "output_schema", "canonical"]


def output_schema(schema: pa.Schema, kind: WindowKind, aggs: Sequence[Agg], by: Sequence[str],
                  time: str, emit_wid: bool = False) -> pa.Schema:
    """The schema the window operators produce for this query."""
    from oop.stream.timecol import time_arrow_type

    tt = pa.int64() if kind.row_based else time_arrow_type(schema, time)
    fields = [schema.field(c) for c in by]
    fields += [pa.field("window_start", tt), pa.field("window_end", tt)]
    for a in aggs:
        ct = schema.field(a.column).type if a.column else None
        fields.append(pa.field(a.name, output_type(a, ct)))
    if emit_wid:
        fields.append(pa.field("wid", pa.int64()))
    return pa.schema(fields)


def _ints(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    t = col.type
    if pa.types.is_timestamp(t):
        col = col.cast(pa.int64()) if isinstance(col, pa.Array) else col.cast(pa.int64())
    return np.asarray(col.to_numpy(), np.int64)


def window_oracle(
    table: pa.Table,
    kind: WindowKind,
    aggs: Agg | Sequence[Agg],
    by: str | Sequence[str] = (),
    time: str = "ts",
    unit: str = "ms",
    emit_wid: bool = False,
) -> pa.Table:
    """The window query over ``table`` computed from scratch (rows in table order = arrival order).

    Output rows are sorted by (window id, keys in first-appearance order).
    Cost: O(windows x rows) Python -- for tests and small inputs.
    """
    aggs = as_aggs(aggs)
    by = [by] if isinstance(by, str) else list(by)
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if pa.types.is_timestamp(table.schema.field(time).type):
        unit = table.schema.field(time).type.unit
    k = kind if kind.row_based else kind.resolve(unit)
    times = _ints(table.column(time))
    keys = list(zip(*(table.column(c).to_pylist() for c in by))) if by else [()] * table.num_rows
    cols = {a.column: table.column(a.column).to_pylist() for a in aggs if a.column}
    floats = {c: [None if x is None else float(x) for x in v] for c, v in cols.items()
              if pa.types.is_decimal(table.schema.field(c).type)}  # for the float-valued aggregates
    n = table.num_rows
    if k.partitioned:
        ranks = np.zeros(n, np.int64)
        seen: dict[Any, int] = {}
        for i, key in enumerate(keys):
            ranks[i] = seen.get(key, 0)
            seen[key] = ranks[i] + 1
        part_windows = []
        for key in dict.fromkeys(keys):
            idx = [i for i in range(n) if keys[i] == key]
            for w in k.windows(ranks[idx]):
                s, e = k.extent(int(w))
                part_windows.append((int(w), key, s, e, [i for i in idx if s <= ranks[i] < e]))
        part_windows.sort(key=lambda x: x[0])
        groups = [(w, s, e, {key: rows}) for w, key, s, e, rows in part_windows]
    else:
        if k.row_based:
            values = np.arange(n, dtype=np.int64)
        else:
            values = times
        wins = k.windows(values) if not isinstance(k, SlideByTuple) else k.windows(times)
        groups = []
        for w in wins:
            s, e = k.extent(int(w))
            inside = np.flatnonzero((values >= s) & (values < e))
            g: dict[Any, list[int]] = {}
            for i in inside.tolist():
                g.setdefault(keys[i], []).append(i)
            groups.append((int(w), s, e, g))
    folds = [_fold(a, cols, floats) for a in aggs]
    at = times.tolist()
    rows: list[dict[str, Any]] = []
    for w, s, e, g in groups:
        for key, idx in g.items():
            r: dict[str, Any] = dict(zip(by, key))
            r["window_start"], r["window_end"] = s, e
            for name, fold in folds:
                r[name] = fold(idx, at)
            if emit_wid:
                r["wid"] = w
            rows.append(r)
    schema = output_schema(table.schema, k, aggs, by, time, emit_wid)
    return _table(rows, schema)


def _fold(a: Agg, cols: dict[str, list], floats: dict[str, list]) -> tuple[str, Any]:
    """``(output name, fold)`` of one aggregate: ``fold(rows, times)`` is its output value over
    those rows (row numbers in arrival order) -- init, one update per row, finalize."""
    spec = a.spec
    vals = cols.get(a.column)  # type: ignore[arg-type]
    # var/std/quantiles/UDAFs compute in float64; sums and selections stay exact
    if a.column in floats and spec.arithmetic and not spec.from_sum:
        vals = floats[a.column]

    def fold(idx: list[int], times: list[int]) -> Any:
        st = spec.init(a)
        for i in idx:
            st = spec.update(a, st, vals[i] if vals is not None else None, times[i])
        return spec.to_output(spec.finalize(a, st))

    return a.name, fold


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    arrays = []
    for f in schema:
        vals = [r[f.name] for r in rows]
        if f.name in ("window_start", "window_end") and pa.types.is_timestamp(f.type):
            arrays.append(pa.array(vals, pa.int64()).view(f.type))
        else:
            arrays.append(pa.array(vals, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def canonical(table: pa.Table, by: Sequence[str] = ()) -> list[tuple]:
    """Rows as sorted tuples (floats rounded to 9 significant digits) for order-free comparison."""
    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.9g}")
        if isinstance(v, list):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return v

    cols = [c for c in table.column_names]
    data = [table.column(c).to_pylist() for c in cols]
    out = [tuple(norm(x) for x in row) for row in zip(*data)]
    return sorted(out, key=lambda r: tuple((x is None, str(type(x)), x if x is not None else 0) for x in r))


class TupleAtATimeWindow:
    """The WID operator semantics one tuple at a time (the slow reference of the kernels).

    Feed it with :meth:`on_tuple` and :meth:`on_punctuation`; it returns
    emitted rows as dicts. Time-based kinds only.
    """

    def __init__(self, kind: WindowKind, aggs: Sequence[Agg], by: Sequence[str]) -> None:
        self.kind, self.aggs, self.by = kind, list(aggs), list(by)
        self.cells: dict[tuple[int, tuple], list[Any]] = {}
        self.lwm: int | None = None
        self.late = 0

    def on_tuple(self, row: dict[str, Any], t: int) -> None:
        if self.lwm is not None and t < self.lwm:
            self.late += 1
            return
        lo, hi = self.kind.wids(np.array([t]))
        key = tuple(row[c] for c in self.by)
        for w in range(int(lo[0]), int(hi[0])):
            st = self.cells.setdefault((w, key), [a.init() for a in self.aggs])
            for j, a in enumerate(self.aggs):
                st[j] = a.update(st[j], row.get(a.column) if a.column else None, t)

    def on_punctuation(self, v: int) -> list[dict[str, Any]]:
        self.lwm = v
        out = []
        for (w, key) in sorted(self.cells, key=lambda x: x[0]):
            s, e = self.kind.extent(w)
            if e <= v:
                st = self.cells.pop((w, key))
                r = dict(zip(self.by, key))
                r.update(window_start=s, window_end=e)
                r.update({a.name: a.finalize(x) for a, x in zip(self.aggs, st)})
                out.append(r)
        return out

    def flush(self) -> list[dict[str, Any]]:
        return self.on_punctuation(np.iinfo(np.int64).max)

    def run(self, rows: Iterable[tuple[dict[str, Any], int] | int]) -> list[dict[str, Any]]:
        """Feed ``(row, t)`` tuples and int punctuations; return every emitted row."""
        out: list[dict[str, Any]] = []
        for item in rows:
            if isinstance(item, (int, np.integer)):
                out.extend(self.on_punctuation(int(item)))
            else:
                self.on_tuple(*item)
        return out + self.flush()
