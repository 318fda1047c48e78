"""Disorder models: turn an ordered packet stream into an arrival-ordered feed.

Each model maps the ordered stream of :class:`~oop.datasets.packets.Packets`
to the order in which tuples *arrive*, and says what punctuation that order
implies (as a feed of ``RecordBatch`` and :class:`~oop.stream.elements.Punctuation`
items, and/or as a punctuation generator for the source):

* :class:`InOrder` -- arrival order = event-time order; punctuation
  ``P(ts, max seen)`` (the ``Ordered`` generator).
* :class:`Band` -- *band disorder* (004 §6.1.5, Fig. 6-8): tuple ``t`` arrives
  at ``t.ts + d_t`` with ``d_t`` uniform in ``[0, delay]``; tuples arrive in
  order of ``(arrival, position)``. Guarantee: every tuple that arrives after
  one with event time ``h`` has ``ts >= h - delay``, so ``P(ts, hwm - delay)``
  is valid (the ``BoundedDelay(delay)`` generator). With ``late_fraction > 0``
  that fraction of tuples is delayed by ``delay + U(1, late_delay)`` instead:
  *late tuples beyond the bound* that break the punctuation on purpose.
* :class:`BlockSorted` -- *block-sorted disorder* (004 Fig. 6-9): each block of
  ``block`` ms of event time is emitted at once, in random order (a router
  purging its NetFlow cache every minute); after block ``k`` the feed carries
  the end-of-block punctuation ``P(ts, (k + 1) * block)``. With ``marker=True``
  the batches also carry a boolean ``end_of_block`` column, true on the last
  row of each block. A slack-based generator cannot match this pattern; the
  feed punctuation can.

Streaming: band disorder holds a carry buffer of at most ``(delay +
late_delay) * rate`` rows; block-sorted disorder holds one block.

>>> from oop.datasets.packets import Packets
>>> ds = Disordered(Packets(n=1000, rate=1000), Band(delay=50), seed=2)
>>> t = ds.table()
>>> ts = t.column("ts").to_numpy()
>>> bool((np.maximum.accumulate(ts) - ts).max() <= 50)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Union

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.datasets.packets import CHUNK, PACKET_SCHEMA, Packets, concat_batches, rebatch
from oop.punctuation.base import GeneratorConfig
from oop.punctuation.external import External
from oop.punctuation.bounded_delay import BoundedDelay
from oop.punctuation.ordered import Ordered
from oop.stream.elements import INT64_MIN, Punctuation

__all__ = [
    "InOrder",
    "Band",
    "BlockSorted",
    "Disorder",
    "Disordered",
    "FeedItem",
]

FeedItem = Union[pa.RecordBatch, Punctuation]
_DELAY = 7


@dataclass(frozen=True)
class InOrder:
    """No disorder: tuples arrive in event-time order."""


@dataclass(frozen=True)
class Band:
    """Bounded random delay: ``arrival = ts + U[0, delay]`` ms (004 Fig. 6-8).

    ``late_fraction`` of the tuples get ``delay + U[1, late_delay]`` instead,
    i.e. arrive beyond any ``delay`` bound (late tuples).
    """

    delay: int
    late_fraction: float = 0.0
    late_delay: int = 0

    def __post_init__(self) -> None:
        if self.delay < 0:
            raise ConfigError(f"Band: delay must be >= 0 ms, got {self.delay}")
        if not 0 <= self.late_fraction <= 1:
            raise ConfigError(f"Band: late_fraction is a fraction in [0, 1], got {self.late_fraction}")
        if self.late_fraction > 0 and self.late_delay < 1:
            raise ConfigError(
                "Band: late tuples need late_delay >= 1 ms beyond the bound, "
                f"got late_delay={self.late_delay}"
            )

    @property
    def max_delay(self) -> int:
        return self.delay + (self.late_delay if self.late_fraction > 0 else 0)


@dataclass(frozen=True)
class BlockSorted:
    """Blocks of ``block`` ms emitted at once in random order, then ``P(ts, block end)``."""

    block: int
    marker: bool = False

    def __post_init__(self) -> None:
        if self.block < 1:
            raise ConfigError(f"BlockSorted: block must be >= 1 ms, got {self.block}")


Disorder = Union[InOrder, Band, BlockSorted]


@dataclass(frozen=True)
class Disordered:
    """A packet stream seen through a disorder model; deterministic by ``seed``.

    * :meth:`batches` -- the arrival-ordered data, in batches of ``batch_size``;
    * :meth:`feed` -- the same batches with the punctuation the model implies
      between them (never backwards, never duplicate);
    * :meth:`punctuation` -- the generator config to give a source reading
      :meth:`batches` (for 
      :class:`BlockSorted`: ``External()`` -- read :meth:`feed`, or
      ``External("end_of_block")`` with ``marker=True``);
    * :meth:`stream` -- an ``oop`` :class:`~oop.api.Stream` over it;
    * :meth:`table` -- everything materialised (small inputs, oracles).
    """

    packets: Packets
    disorder: Disorder = field(default_factory=InOrder)
    seed: int = 0

    @property
    def schema(self) -> pa.Schema:
        if isinstance(self.disorder, BlockSorted) and self.disorder.marker:
            return PACKET_SCHEMA.append(pa.field("end_of_block", pa.bool_()))
        return PACKET_SCHEMA

    # ---- arrival order ---------------------------------------------------
    def _band_units(self) -> Iterator[pa.RecordBatch]:
        """Arrival-ordered runs (each a batch) for band disorder."""
        d: Band = self.disorder  # type: ignore[assignment]
        carry: pa.RecordBatch | None = None
        carry_key = np.empty(0, np.int64)
        carry_pos = np.empty(0, np.int64)
        for k, ch in enumerate(self.packets.chunks()):
            m = ch.num_rows
            rng = np.random.default_rng([self.seed, k, _DELAY])
            delay = rng.integers(0, d.delay + 1, m, dtype=np.int64)
            if d.late_fraction > 0:
                late = rng.random(m) < d.late_fraction
                delay = np.where(late, d.delay + rng.integers(1, d.late_delay + 1, m), delay)
            ts = ch.column("ts").to_numpy()
            key = ts + delay
            pos = np.arange(k * CHUNK, k * CHUNK + m, dtype=np.int64)
            if carry is not None:
                ch = concat_batches([carry, ch], PACKET_SCHEMA)
                key = np.concatenate([carry_key, key])
                pos = np.concatenate([carry_pos, pos])
            order = np.lexsort((pos, key))
            # every later tuple has ts >= last ts here, hence arrival >= it; ties go to
            # the smaller position, i.e. to the tuples we hold now
            safe = int(np.searchsorted(key[order], int(ts[-1]) if m else INT64_MIN, side="right"))
            out, rest = order[:safe], order[safe:]
            if len(out):
                yield ch.take(pa.array(out))
            carry = ch.take(pa.array(rest)) if len(rest) else None
            carry_key, carry_pos = key[rest], pos[rest]
        if carry is not None:
            yield carry

    def _block_units(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        """(block rows in arrival order, block end) for block-sorted disorder."""
        d: BlockSorted = self.disorder  # type: ignore[assignment]
        pend: list[pa.RecordBatch] = []
        cur: int | None = None

        def emit(parts: list[pa.RecordBatch], blk: int) -> tuple[pa.RecordBatch, int]:
            b = concat_batches(parts, PACKET_SCHEMA)
            perm = np.random.default_rng([self.seed, blk, _DELAY]).permutation(b.num_rows)
            b = b.take(pa.array(perm))
            if d.marker:
                mark = np.zeros(b.num_rows, bool)
                mark[-1] = True
                b = pa.RecordBatch.from_arrays([*b.columns, pa.array(mark)], schema=self.schema)
            return b, (blk + 1) * d.block

        for ch in self.packets.chunks():
            blk = np.floor_divide(ch.column("ts").to_numpy(), d.block)
            cuts = np.flatnonzero(np.diff(blk)) + 1
            starts = np.concatenate([[0], cuts])
            ends = np.concatenate([cuts, [ch.num_rows]])
            for a, b in zip(starts, ends):
                k = int(blk[a])
                if cur is not None and k != cur:
                    yield emit(pend, cur)
                    pend = []
                cur = k
                pend.append(ch.slice(int(a), int(b - a)))
        if cur is not None and pend:
            yield emit(pend, cur)

    def batches(self, batch_size: int = CHUNK) -> Iterator[pa.RecordBatch]:
        """The arrival-ordered data in batches of ``batch_size`` rows (no punctuation)."""
        for item in self.feed(batch_size):
            if isinstance(item, pa.RecordBatch):
                yield item

    def feed(self, batch_size: int = CHUNK, punctuate: bool = True) -> Iterator[FeedItem]:
        """Arrival-ordered batches with the implied punctuation between them.

        Band / InOrder: ``P(ts, max seen - delay)`` after each batch when it grew.
        BlockSorted: batches never straddle a block; ``P(ts, block end)`` after
        each block. Memory: one chunk / carry buffer / block.
        """
        d = self.disorder
        if isinstance(d, BlockSorted):
            for b, end in self._block_units():
                yield from rebatch([b], batch_size)
                if punctuate:
                    yield Punctuation("ts", end)
            return
        if isinstance(d, Band):
            units, bound = self._band_units(), d.delay
        elif isinstance(d, InOrder):
            units, bound = self.packets.chunks(), 0
        else:
            raise ConfigError(f"Disordered: unknown disorder model {d!r}")
        hwm, last = INT64_MIN, INT64_MIN
        for b in rebatch(units, batch_size):
            yield b
            if punctuate:
                hwm = max(hwm, int(np.max(b.column("ts").to_numpy())))
                if hwm - bound > last:
                    last = hwm - bound
                    yield Punctuation("ts", last)

    def punctuation(self) -> GeneratorConfig:
        """The generator a source reading :meth:`batches` should use."""
        d = self.disorder
        if isinstance(d, Band):
            return BoundedDelay(d.delay)
        if isinstance(d, BlockSorted):
            return External()
        return Ordered()

    def table(self) -> pa.Table:
        """All rows in arrival order (materialised)."""
        return pa.Table.from_batches(list(self.batches()), schema=self.schema)

    def stream(self, batch_size: int = 4096, name: str = "source", late: Any = "drop",
               punctuation: GeneratorConfig | None = None) -> Any:
        """An ``oop`` Stream over this dataset (resumable: the feed is re-generated).

        Band / InOrder: data batches + the model's generator (or ``punctuation``).
        BlockSorted: the feed with end-of-block punctuation, no derived bound.
        """
        from oop.plan.executor import Node
        from oop.plan.source import Source
        from oop.api import Stream

        carried = isinstance(self.disorder, BlockSorted) and punctuation is None

        def feed() -> Iterator[FeedItem]:
            return self.feed(batch_size) if carried else self.batches(batch_size)

        src = Source(feed, time="ts", unit="ms", punctuation=punctuation or self.punctuation(),
                     late=late, schema=self.schema, name=name)
        return Stream(Node(src))
