"""Select: keep the tuples that satisfy a predicate (004 §8.2).

What it computes: ``{t in S | pred(t)}``. ``pred`` is a vectorized
``pyarrow.compute.Expression`` (``pc.field("len") > 100``) or a callable
``RecordBatch -> boolean array`` (pyarrow or numpy). Rows where the predicate
is null are dropped (SQL ``WHERE``).

At plan time an Expression is evaluated once on an empty batch of the input
schema, so an unknown column or a type error is reported before data flows.

On a batch: filter it (one Arrow kernel call) and emit what passes at once.
On a punctuation: forward it unchanged -- removing tuples can never make a
promise about later tuples false. Purges: nothing (stateless). Cost: O(batch).

>>> import pyarrow as pa, pyarrow.compute as pc, oop
>>> t = pa.table({"ts": [2, 1, 3], "v": [5, 50, 500]})
>>> oop.from_arrow(t, time="ts", unit="s").select(pc.field("v") > 10).collect()["v"].to_pylist()
[50, 500]
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, SchemaMismatchError
from oop.operators.apply import raise_if_missing_column
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import Element

__all__ = ["Select", "Predicate", "select_reference"]

Predicate = Union["pc.Expression", Callable[[pa.RecordBatch], "pa.Array | object"]]


class Select(Operator):
    """Filter batches by a vectorized predicate; punctuation passes through."""

    def __init__(self, predicate: Predicate, name: str = "select") -> None:
        super().__init__(name)
        if not isinstance(predicate, pc.Expression) and not callable(predicate):
            raise ConfigError(
                f"{name}: the predicate must be a pyarrow.compute Expression "
                f"(e.g. pc.field('v') > 0) or a callable RecordBatch -> boolean array, "
                f"got {predicate!r}"
            )
        self.predicate = predicate

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        if isinstance(self.predicate, pc.Expression):
            probe = pa.RecordBatch.from_pylist([], schema=info.schema)
            try:
                probe.filter(self.predicate)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                raise_if_missing_column(e, self.name, "the predicate", info.name,
                                        info.schema.names)
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise ConfigError(
                    f"{self.name}: the predicate {self.predicate} cannot be evaluated on stream "
                    f"{info.name!r} ({first}); it must be a boolean expression over its columns"
                ) from e
        return info.with_schema(info.schema, name=self.name)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if isinstance(self.predicate, pc.Expression):
            out = batch.filter(self.predicate)
        else:
            out = batch.filter(self._mask(self.predicate(batch), batch.num_rows))
        return [out] if out.num_rows else []

    def _mask(self, mask: Any, n: int) -> pa.Array:
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        if not isinstance(mask, pa.Array):
            mask = pa.array(np.asarray(mask))
        if not pa.types.is_boolean(mask.type) or len(mask) != n:
            raise SchemaMismatchError(
                f"{self.name}: the predicate returned {len(mask)} values of type {mask.type} for "
                f"a batch of {n} rows on stream {self.inputs[0].name!r}; it must return one "
                "boolean per row"
            )
        return mask


def select_reference(
    rows: list[dict[str, Any]], pred: Callable[[dict[str, Any]], bool | None]
) -> list[dict[str, Any]]:
    """Tuple-at-a-time reference: the rows where ``pred(row)`` is true (null -> dropped)."""
    return [r for r in rows if pred(r)]
