"""Select: keep the tuples that satisfy a predicate (004 §8.2).

What it computes: ``{t in S | pred(t)}``. ``pred`` is a vectorized
``pyarrow.compute.Expression`` (``pc.field("len") > 100``) or a callable
``RecordBatch -> boolean array``.

On a batch: filter it (one Arrow kernel call) and emit what passes at once.
On a punctuation: forward it unchanged -- removing tuples can never make a
promise about later tuples false. Purges: nothing (stateless). Cost: O(batch).
"""

from __future__ import annotations

from typing import Callable, Union

import pyarrow as pa
import pyarrow.compute as pc

from oop.operators.base import Operator
from oop.stream.elements import Element

__all__ = ["Select", "Predicate"]

Predicate = Union[pc.Expression, Callable[[pa.RecordBatch], "pa.Array | object"]]


class Select(Operator):
    """Filter batches by a vectorized predicate; punctuation passes through."""

    def __init__(self, predicate: Predicate, name: str = "select") -> None:
        super().__init__(name)
        self.predicate = predicate

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if isinstance(self.predicate, pc.Expression):
            out = batch.filter(self.predicate)
        else:
            mask = self.predicate(batch)
            out = batch.filter(mask if isinstance(mask, (pa.Array, pa.ChunkedArray)) else pa.array(mask))
        return [out] if out.num_rows else []
