"""Rename: give columns new names, progressing attributes and their punctuation included.

What it computes: every tuple unchanged, with columns renamed by ``mapping``
(old name -> new name; unlisted columns keep theirs). Unlike an
:class:`~oop.operators.apply.Apply` that copies a column under a new name,
a renamed progressing attribute stays one: ``P(old, v)`` leaves as
``P(new, v)``, group-wise punctuation has its attribute and key columns
renamed, joint punctuation its attributes. The SQL front end uses it for
``SELECT b.ts AS bts`` so that a later window can be built on ``bts``.

On a batch: the same buffers under the new schema (zero-copy).
Purges: nothing (stateless). Cost: O(columns) per batch and per punctuation.

>>> import pyarrow as pa, oop
>>> t = pa.table({"ts": [2, 1], "v": [10, 20]})
>>> s = oop.from_arrow(t, time="ts", unit="s").via(Rename({"ts": "t", "v": "w"}))
>>> res = s.run()
>>> res.table.column_names, res.punctuations[-1][1]
(['t', 'w'], Punctuation(attr='t', value=2))
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pyarrow as pa

from oop.errors import ConfigError
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import Element, GroupPunctuation, JointPunctuation, Punctuation

__all__ = ["Rename"]


class Rename(Operator):
    """Rename columns by ``mapping`` (old -> new); punctuation follows (module doc)."""

    def __init__(self, mapping: Mapping[str, str], name: str = "rename") -> None:
        super().__init__(name)
        self.mapping = dict(mapping)

    def _new(self, c: str) -> str:
        return self.mapping.get(c, c)

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        require_columns(info, list(self.mapping), self.name)
        names = [self._new(c) for c in info.schema.names]
        dup = sorted({c for c in names if names.count(c) > 1})
        if dup:
            raise ConfigError(f"{self.name}: renaming gives two columns named {dup}; "
                              "rename one of them too")
        self.schema = pa.schema([f.with_name(self._new(f.name)) for f in info.schema])
        times = {self._new(a): u for a, u in info.times.items()}
        time = self._new(info.time) if info.time is not None else None
        return StreamInfo(info.name, self.schema, times, time)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return [pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)]

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        p = punctuation
        if isinstance(p, Punctuation):
            return [Punctuation(self._new(p.attr), p.value)]
        if isinstance(p, GroupPunctuation):
            keys = p.keys.rename_columns([self._new(c) for c in p.keys.schema.names])
            return [GroupPunctuation(self._new(p.attr), keys, p.values)]
        if isinstance(p, JointPunctuation):
            return [JointPunctuation(tuple((self._new(a), v) for a, v in p.bounds))]
        return [p]
