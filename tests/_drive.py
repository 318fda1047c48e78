"""Push a script of batches and punctuations through one operator, for the threaded tests."""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation


def drive(op: Any, schema: pa.Schema, steps: Sequence[Any]) -> tuple[pa.Table, list[Punctuation]]:
    """Open ``op`` on stream ``s`` of ``schema`` (time ``ts`` in ms), apply ``steps`` in
    order, flush; returns (its non-empty rows as one table, its punctuations)."""
    op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    out = []
    for s in steps:
        out += op.on_punctuation(s) if isinstance(s, Punctuation) else op.on_batch(s)
    out += op.flush()
    rows = [b for b in out if isinstance(b, pa.RecordBatch) and b.num_rows]
    table = pa.Table.from_batches(rows, schema=op.output.schema).combine_chunks()
    return table, [p for p in out if isinstance(p, Punctuation)]
