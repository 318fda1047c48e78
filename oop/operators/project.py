"""Project: keep a subset of columns (004 §8.2).

What it computes: ``pi_C(S)`` -- every tuple restricted to the columns ``C``
(bag semantics: duplicates are kept; use DupElim to remove them).

On a batch: ``batch.select(C)`` (zero-copy) emitted at once.

On a punctuation: a punctuation survives only if everything it talks about
survives -- ``P(a, v)`` is forwarded iff ``a`` in ``C``; group-wise
punctuation iff its attribute and every key column are kept; joint
punctuation iff all its attributes are kept (dropping one attribute of a box
leaves no valid bound on the others). Dropped punctuations are counted in
``metrics.counters["punctuations_dropped"]``. A projection that removes the
stream's progressing attribute yields a stream without one (operators that
need progress downstream will refuse it at plan time).

Purges: nothing (stateless). Cost: O(columns) per batch, O(1) per punctuation.

>>> import pyarrow as pa, oop
>>> t = pa.table({"ts": [2, 1, 3], "k": ["a", "b", "c"], "v": [1, 2, 3]})
>>> oop.from_arrow(t, time="ts", unit="s").project(["ts", "v"]).collect().column_names
['ts', 'v']
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from oop.errors import ConfigError
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import Element, GroupPunctuation, JointPunctuation, Punctuation

__all__ = ["Project", "project_reference"]


class Project(Operator):
    """Keep ``columns`` (in the given order); drop punctuation on removed attributes."""

    def __init__(self, columns: Sequence[str], name: str = "project") -> None:
        super().__init__(name)
        if isinstance(columns, str):
            columns = [columns]
        cols = list(columns)
        if not cols:
            raise ConfigError(f"{self.name}: project needs at least one column to keep")
        dup = sorted({c for c in cols if cols.count(c) > 1})
        if dup:
            raise ConfigError(f"{self.name}: column(s) {dup} listed twice; list each column once")
        self.columns = cols
        self._keep = set(cols)

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        require_columns(info, self.columns, self.name)
        schema = pa.schema([info.schema.field(c) for c in self.columns])
        return info.with_schema(schema, name=self.name)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return [batch.select(self.columns)]

    def keeps(self, p: Element) -> bool:
        """True when punctuation ``p`` is still meaningful after the projection."""
        if isinstance(p, Punctuation):
            return p.attr in self._keep
        if isinstance(p, GroupPunctuation):
            return p.attr in self._keep and all(c in self._keep for c in p.keys.schema.names)
        if isinstance(p, JointPunctuation):
            return all(a in self._keep for a in p.attrs)
        return True

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if self.keeps(punctuation):
            return [punctuation]
        self.metrics.count("punctuations_dropped", 1)
        return []


def project_reference(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Tuple-at-a-time reference: each row restricted to ``columns``."""
    return [{c: r[c] for c in columns} for r in rows]
