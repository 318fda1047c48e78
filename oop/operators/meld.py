"""Meld: order-agnostic n-ary union (004 §8.2, Fig. 8-2).

What it computes: the bag union of its n inputs (all with the same schema).

On a batch (any input): forwarded at once, untouched -- Meld never waits for
order and never buffers a tuple, so a lull on one input holds no tuples.

On a punctuation ``P(a, v)`` on input i: remember it as input i's latest
bound; emit ``P(a, min_j lwm_j)`` only if that min grew (no duplicate
punctuation). An input that has not punctuated yet holds the min at -inf;
an ended input counts as +inf.

Purges: nothing (stateless apart from n watermarks). Cost: O(1) per batch,
O(n) per punctuation.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from oop.errors import SchemaMismatchError
from oop.operators.base import Operator, StreamInfo
from oop.progress.frontier import MinFrontier
from oop.stream.elements import Element, Punctuation

__all__ = ["Meld"]


class Meld(Operator):
    """Union of n inputs; punctuation = min of the inputs' last punctuation."""

    def __init__(self, n_inputs: int, name: str = "meld") -> None:
        super().__init__(name)
        self.n_inputs = n_inputs
        self.frontier = MinFrontier(n_inputs)

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        first = inputs[0]
        for i, info in enumerate(inputs[1:], start=1):
            if not info.schema.equals(first.schema, check_metadata=False):
                raise SchemaMismatchError(
                    f"{self.name}: input {i} (stream {info.name!r}) has schema {info.schema} but "
                    f"input 0 (stream {first.name!r}) has {first.schema}; project/cast the inputs "
                    "to one schema before the union"
                )
            if info.time != first.time:
                raise SchemaMismatchError(
                    f"{self.name}: input {i} (stream {info.name!r}) progresses on {info.time!r} "
                    f"but input 0 on {first.time!r}; a union needs one progressing attribute"
                )
        return first.with_schema(first.schema, name=self.name)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return [batch]

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation):
            raise TypeError(f"{self.name}: only linear punctuation can be melded, got {punctuation!r}")
        v = self.frontier.update(port, punctuation.value)
        return [] if v is None else [Punctuation(punctuation.attr, v)]

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        v = self.frontier.end(port)
        if v is None or all(self._ended):
            return []
        assert self.output is not None and self.output.time is not None
        return [Punctuation(self.output.time, v)]

    def snapshot(self) -> Any:
        return {**super().snapshot(), "values": list(self.frontier.values),
                "emitted": self.frontier.emitted}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.frontier.values = list(state["values"])
        self.frontier.emitted = state["emitted"]
