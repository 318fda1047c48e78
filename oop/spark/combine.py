"""CombinePartials: the global half of local-then-global window aggregation (004 §6.2.2).

What it computes: partial window aggregates from several shards (rows of
``(*by, window_start, window_end, partials...)``) merged into one row per
``(*by, window_start, window_end)`` with each partial's *super-aggregate*:
``count -> sum``, ``sum -> sum``, ``min -> min``, ``max -> max``.

Formula: ``out[g] = merge_{rows r of g} r.partial``.

On a batch: appended to the pending rows (no output).
On a punctuation ``P(a, v)`` on the input's progressing attribute ``a``
(the partials' ``window_start`` or ``window_end``, whichever the window
operator punctuates): every pending row with ``a < v`` is complete -- no
shard will send another partial for its group -- so those rows are grouped,
merged and emitted, then purged; the punctuation is forwarded.
At the end: everything pending is emitted.

Cost: per punctuation one vectorized filter over the pending rows plus an
Arrow hash group-by over the completed ones; state = pending partial rows.
A tuple-at-a-time reference is :func:`combine_reference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.aggregates import REGISTRY
from oop.errors import ConfigError
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import Element, Punctuation
from oop.stream.timecol import time_values

__all__ = ["CombinePartials", "SUPER", "combine_reference"]

#: super-aggregate that merges partials of each aggregate function
#: aggregate -> the aggregate that merges its partial results (oop.aggregates ``combine_op``)
SUPER: dict[str, str] = {n: s.combine_op for n, s in REGISTRY.items() if s.combine_op}


@dataclass(frozen=True)
class _Col:
    name: str
    fn: str


class CombinePartials(Operator):
    """Merge partial window aggregates per ``(*by, window_start, window_end)``."""

    def __init__(self, by: Sequence[str], partials: Sequence[tuple[str, str]],
                 name: str = "combine") -> None:
        super().__init__(name)
        self.by = tuple(by)
        self.cols = tuple(_Col(n, f) for n, f in partials)
        for c in self.cols:
            if c.fn not in SUPER:
                raise ConfigError(
                    f"{name}: aggregate {c.fn!r} ({c.name}) has no super-aggregate here; "
                    f"local-then-global supports {sorted(SUPER)} (run it keyed instead)"
                )
        self.keys = (*self.by, "window_start", "window_end")
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        require_columns(info, [*self.keys, *(c.name for c in self.cols)], self.name)
        if info.time not in ("window_start", "window_end"):
            raise ConfigError(
                f"{self.name}: the partials must progress on window_start or window_end, "
                f"stream {info.name!r} progresses on {info.time!r}"
            )
        schema = pa.schema([info.schema.field(k) for k in self.keys]
                           + [info.schema.field(c.name) for c in self.cols])
        return info.with_schema(schema, name=self.name)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows:
            self.pending.append(batch.select(list(self.keys) + [c.name for c in self.cols]))
            self.rows += batch.num_rows
        return []

    def _merge(self, t: pa.Table) -> list[Element]:
        if t.num_rows == 0:
            return []
        g = t.group_by(list(self.keys), use_threads=False).aggregate(
            [(c.name, SUPER[c.fn]) for c in self.cols])
        assert self.output is not None
        out = pa.table({**{k: g.column(k) for k in self.keys},
                        **{c.name: g.column(f"{c.name}_{SUPER[c.fn]}") for c in self.cols}})
        out = out.cast(self.output.schema)
        return list(out.combine_chunks().to_batches())

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        assert self.output is not None
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self.output.time \
                or not self.pending:
            return [punctuation]
        t = pa.Table.from_batches(self.pending)
        tv = time_values(t.combine_chunks().to_batches()[0], self.output.time, self.name) \
            if t.num_rows else np.empty(0, np.int64)
        done = tv < punctuation.value
        out = self._merge(t.filter(pa.array(done)))
        rest = t.filter(pa.array(~done))
        self.pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self.rows = rest.num_rows
        return [*out, punctuation]

    def flush(self) -> list[Element]:
        if not self.pending:
            return []
        out = self._merge(pa.Table.from_batches(self.pending))
        self.pending, self.rows = [], 0
        return out

    def state_size(self) -> StateSize:
        return StateSize(self.rows, self.rows * 8 * (len(self.keys) + len(self.cols)))

    def snapshot(self) -> Any:
        return {**super().snapshot(), "pending": list(self.pending), "rows": self.rows}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.pending, self.rows = list(state["pending"]), state["rows"]

    def _check(self) -> None:
        assert self.rows == sum(b.num_rows for b in self.pending)


def combine_reference(rows: list[dict[str, Any]], by: Sequence[str],
                      partials: Sequence[tuple[str, str]]) -> dict[tuple, dict[str, Any]]:
    """Tuple-at-a-time reference: the merged partials per ``(*by, window_start, window_end)``."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (*(r[b] for b in by), r["window_start"], r["window_end"])
        acc = out.setdefault(key, {})
        for name, fn in partials:
            v = r[name]
            if name not in acc:
                acc[name] = v
            elif SUPER[fn] == "sum":
                acc[name] = acc[name] + v
            elif SUPER[fn] == "min":
                acc[name] = min(acc[name], v)
            else:
                acc[name] = max(acc[name], v)
    return out
