"""Several links with arrival-time skew and lulls, replayed on a common arrival clock.

The scenario of Q1-2 / Q8-5 (004 §1.2, §8.4): two high-rate *Main* links and
a near-empty *Control* link, each ordered on ``ts``, whose arrivals are not
synchronised. Link ``j`` produces a packet stream over ``[0, duration)`` ms of
event time at ``rate_j`` tuples/s, with no tuples inside its ``lulls``
(event-time intervals ``[a, b)``); its tuple with event time ``t`` *arrives*
at wall time ``t + skew_j``.

:meth:`MultiSource.feeds` cuts every link's arrivals on one arrival clock of
``tick`` ms: each link's feed yields exactly one item per tick -- the batch of
tuples that arrived in ``[k * tick, (k + 1) * tick)`` (possibly empty: a lull),
or, with ``heartbeat=True`` on an empty tick, the punctuation
``P(ts, (k + 1) * tick - skew)`` (the link's clock, what Gigascope inserts
during lulls, 004 §2). The executor reads one item per source per round, so
its rounds replay the arrival clock and the skew reaches the operators as it
would on the wire. Each link is ordered: the ``Ordered`` generator is valid.

>>> ms = MultiSource((Link("main", 1000), Link("ctl", 1, skew=300)), duration=2000, tick=100)
>>> fs = ms.feeds()
>>> [sum(b.num_rows for b in fs[n]()) for n in ("main", "ctl")]
[2000, 2]
>>> len(list(fs["main"]())) == len(list(fs["ctl"]()))
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.datasets.packets import PACKET_SCHEMA, Packets, Skew, Uniform, concat_batches
from oop.stream.elements import Punctuation

__all__ = ["Link", "MultiSource"]


@dataclass(frozen=True)
class Link:
    """One ordered link: ``rate`` tuples/s, arrivals lag event time by ``skew`` ms."""

    name: str
    rate: float
    skew: int = 0
    lulls: tuple[tuple[int, int], ...] = ()
    groups: int = 1000
    group_skew: Skew = field(default_factory=Uniform)
    heartbeat: bool = False
    dests: int | None = None

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ConfigError(f"Link {self.name!r}: rate must be > 0 tuples/s, got {self.rate}")
        if self.skew < 0:
            raise ConfigError(
                f"Link {self.name!r}: skew is how late arrivals are, >= 0 ms, got {self.skew}"
            )
        for a, b in self.lulls:
            if not a < b:
                raise ConfigError(f"Link {self.name!r}: lull [{a}, {b}) is empty or reversed")


@dataclass(frozen=True)
class MultiSource:
    """Links over ``[0, duration)`` ms of event time, on an arrival clock of ``tick`` ms."""

    links: tuple[Link, ...]
    duration: int
    tick: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        if self.duration < 1 or self.tick < 1:
            raise ConfigError("MultiSource: duration and tick must be >= 1 ms")
        names = [ln.name for ln in self.links]
        if len(set(names)) != len(names):
            raise ConfigError(f"MultiSource: link names must be unique, got {names}")

    @property
    def n_ticks(self) -> int:
        """Ticks until every link has delivered everything."""
        last = self.duration - 1 + max((ln.skew for ln in self.links), default=0)
        return last // self.tick + 1

    def packets(self, j: int) -> Packets:
        ln = self.links[j]
        n = int(np.floor(self.duration * ln.rate / 1000.0))
        return Packets(n=n, rate=ln.rate, groups=ln.groups, skew=ln.group_skew,
                       seed=self.seed * 1000 + j, dests=ln.dests)

    def _link_items(self, j: int) -> Iterator[pa.RecordBatch | Punctuation]:
        ln = self.links[j]
        chunks = self.packets(j).chunks()
        pend: list[pa.RecordBatch] = []
        last_p = -(2**62)
        buf: pa.RecordBatch | None = None
        for k in range(self.n_ticks):
            end = (k + 1) * self.tick - ln.skew  # arrival < (k+1)*tick  <=>  ts < end
            while True:
                if buf is None:
                    buf = next(chunks, None)
                    if buf is None:
                        break
                    if ln.lulls:
                        ts = buf.column("ts").to_numpy()
                        keep = np.ones(len(ts), bool)
                        for a, b in ln.lulls:
                            keep &= ~((ts >= a) & (ts < b))
                        buf = buf.filter(pa.array(keep))
                ts = buf.column("ts").to_numpy()
                cut = int(np.searchsorted(ts, end, side="left"))
                pend.append(buf.slice(0, cut))
                if cut < buf.num_rows:
                    buf = buf.slice(cut)
                    break
                buf = None
            rows = concat_batches([p for p in pend if p.num_rows], PACKET_SCHEMA)
            pend = []
            if rows.num_rows == 0 and ln.heartbeat and end > last_p:
                last_p = end
                yield Punctuation("ts", end)
            else:
                yield rows

    def feeds(self) -> dict[str, Callable[[], Iterator[Any]]]:
        """Per link, a callable returning a fresh iterator of one item per tick."""
        return {ln.name: (lambda j=j: self._link_items(j)) for j, ln in enumerate(self.links)}

    def streams(self, punctuation: Any = None, late: Any = "drop") -> list[Any]:
        """One ``oop`` Stream per link (``Ordered`` punctuation unless given)."""
        from oop.plan.executor import Node
        from oop.plan.source import Source
        from oop.punctuation.ordered import Ordered
        from oop.api import Stream

        return [
            Stream(Node(Source(f, time="ts", unit="ms", punctuation=punctuation or Ordered(),
                               late=late, schema=PACKET_SCHEMA, name=name)))
            for name, f in self.feeds().items()
        ]

    def table(self) -> pa.Table:
        """The union of all links in arrival order, with a ``link`` column (materialised)."""
        parts = []
        for j, ln in enumerate(self.links):
            for k, item in enumerate(self._link_items(j)):
                if isinstance(item, pa.RecordBatch) and item.num_rows:
                    t = pa.Table.from_batches([item])
                    t = t.append_column("link", pa.array([ln.name] * item.num_rows))
                    t = t.append_column("tick", pa.array(np.full(item.num_rows, k, np.int64)))
                    parts.append(t)
        if not parts:
            return PACKET_SCHEMA.empty_table()
        t = pa.concat_tables(parts)
        order = np.argsort(t.column("tick").to_numpy(), kind="stable")
        return t.take(pa.array(order)).drop(["tick"])
