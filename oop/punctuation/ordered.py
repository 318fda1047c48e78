"""Ordered source: the feed is sorted on its progressing attribute.

Guarantee: if the feed is non-decreasing in ``time``, every later tuple has
``time >= last value seen``, so after each batch the generator punctuates
``max(times)`` (004 §8.1, "ordered"). A tuple that breaks the order is late
and follows the source's late policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.stream.timecol import TimeSpec

__all__ = ["Ordered", "OrderedLogic"]


class OrderedLogic(PunctuationGenerator):
    reads_times = False  # on_batch_stats reads the max only

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        return int(times.max()) if len(times) else None

    def on_batch_stats(
        self, batch: pa.RecordBatch, times: np.ndarray, lo: int, hi: int
    ) -> int | None:
        return hi


@dataclass(frozen=True)
class Ordered(GeneratorConfig):
    """Punctuate the last value seen, after each batch."""

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return OrderedLogic()
