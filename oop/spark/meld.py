"""The melded input of one shard: its producers' physical rows as one progressing feed.

Meld rule (001 Quill; DESIGN §7): data rows are forwarded at once, in arrival order; after
each chunk the punctuation ``min_j`` (latest punctuation of producer ``j``) is applied if it
grew (:class:`~oop.progress.frontier.MinFrontier`); a producer that ended sends ``P(+inf)``.
:class:`Side` does this for one input of a shard's plan (and for the driver's re-combination
of a sharded stream); the melded value reaches the plan's source through the
:class:`Carried` punctuation generator.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.progress.frontier import MinFrontier
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.spark import arrowio
from oop.spark.physical import DATA, K, P, PUNCT, SEQ, SRC
from oop.stream.timecol import TimeSpec

__all__ = ["Side", "Carried", "CarriedLogic"]


class CarriedLogic(PunctuationGenerator):
    """Punctuation handed over by the feed with each batch (the melded value)."""

    def __init__(self) -> None:
        self.pending: int | None = None

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        v, self.pending = self.pending, None
        return v


@dataclass(frozen=True)
class Carried(GeneratorConfig):
    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return CarriedLogic()


class Side:
    """One input of a shard's plan: its producers melded into one feed (Meld rule).

    Each chunk of physical rows becomes ONE feed item: the chunk's data rows
    (arrival order) carrying, as pending punctuation, the min over producers
    if it grew. ``stats`` accumulates the (tuples_in, late) rows seen.
    """

    def __init__(self, producers: int, user: pa.Schema) -> None:
        self.frontier = MinFrontier(max(1, producers))
        self.producers = producers
        self.ports: dict[int, int] = {}
        self.user = user
        self.queue: deque[tuple[pa.RecordBatch, int | None]] = deque()
        self.tuples_in = 0
        self.late = 0
        self.gen: CarriedLogic | None = None
        self._empty = (pa.RecordBatch.from_arrays([pa.array([], f.type) for f in user], schema=user))

    def _port(self, src: int) -> int:
        # producer ids are labels (a Spark task's partition id depends on the plan around
        # it, e.g. a union offsets them): ports are assigned in order of first appearance
        port = self.ports.get(src)
        if port is None:
            port = len(self.ports)
            if port >= len(self.frontier.values):
                raise ConfigError(
                    f"sharded input expected {self.producers} producer(s) but saw more "
                    f"(ids {sorted(self.ports)} and {src}); the Spark partitioning changed "
                    "between planning and running (disable adaptive query execution)"
                )
            self.ports[src] = port
        return port

    def absorb(self, rows: pa.RecordBatch) -> None:
        """Split one chunk of this side's physical rows into data + melded punctuation."""
        k = rows.column(K).to_numpy(zero_copy_only=False)
        data_mask = k == DATA
        if data_mask.all():
            data = rows
        else:
            data = rows.filter(pa.array(data_mask))
        grown: int | None = None
        meta = np.flatnonzero(~data_mask)
        if len(meta):
            srcs = rows.column(SRC).to_numpy(zero_copy_only=False)
            ps = pc.fill_null(rows.column(P), 0).to_numpy(zero_copy_only=False)
            seqs = rows.column(SEQ).to_numpy(zero_copy_only=False)
            for i in meta:
                if k[i] == PUNCT:
                    v = self.frontier.update(self._port(int(srcs[i])), int(ps[i]))
                    if v is not None:
                        grown = v
                else:
                    self.tuples_in += int(seqs[i])
                    self.late += int(ps[i])
        batch = arrowio.conform(data, self.user) if data.num_rows else self._empty
        if data.num_rows or grown is not None:
            self.queue.append((batch, grown))

    def feed(self, pump: Callable[["Side"], bool]) -> Iterator[pa.RecordBatch]:
        """The Source feed: queued chunks; when empty ask ``pump`` for one more chunk."""
        while True:
            if not self.queue and not pump(self):
                return
            if not self.queue:  # the chunk read had nothing for this side: idle this round
                yield self._empty
                continue
            batch, v = self.queue.popleft()
            assert self.gen is not None
            self.gen.pending = v
            yield batch
