"""Sharded execution on one machine: the Spark ShardedStream's API over threads (001, 003).

:class:`ShardedStream` mirrors :class:`oop.spark.sharded.ShardedStream`
(same method names and meaning: :meth:`~ShardedStream.rekey`,
:meth:`~ShardedStream.redistribute`, :meth:`~ShardedStream.reshard`,
:meth:`~ShardedStream.broadcast`, :meth:`~ShardedStream.multicast`,
:meth:`~ShardedStream.query`, :meth:`~ShardedStream.to_stream`,
:meth:`~ShardedStream.collect`), but its shards are key partitions of one
process, each run on its own thread -- Quill's data movement (001) and
Trill's GroupApply (003: ``redistribute(n, key).query(plan)`` runs ``plan``
per key partition). Create one with :func:`shard` (``shard(stream, shards=n)``,
as ``oop.spark.sharded.shard(df, shards=n)``).

>>> import pyarrow as pa, pyarrow.compute as pc, oop
>>> from oop.window import Tumbling, agg
>>> t = pa.table({"ts": [3, 1, 2, 6, 5, 9], "k": [1, 2, 1, 2, 1, 1], "v": [1, 2, 3, 4, 5, 6]})
>>> s = shard(oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(2), batch_size=2),
...           shards=2)
>>> per_key = s.redistribute(2, "k").query(
...     lambda st: st.select(pc.field("v") > 1).window(Tumbling(5), [agg.sum("v")], by="k"))
>>> sorted(per_key.collect().table.select(["k", "window_end", "sum_v"]).to_pylist(),
...        key=lambda r: (r["window_end"], r["k"]))[:2]
[{'k': 1, 'window_end': 5, 'sum_v': 3}, {'k': 2, 'window_end': 5, 'sum_v': 2}]

Model. A ShardedStream is *lazy*: its rows are one or more one-thread
streams (the inputs), each with a *route* (how its data rows are placed on
the shards), and an optional per-shard plan. Movements set the route; a
:meth:`~ShardedStream.query` without movement in between fuses into the
pending plan (the rows stay in their shard, as the Spark aligned query).
The plan runs when the stream moves again or leaves (:meth:`to_stream`,
:meth:`collect`, :meth:`run`): then one :class:`ShardedQuery` operator

* scatters each input batch to the shards by its route -- a stable scatter
  (:func:`oop.window.threaded.partition_rows`, rows keep arrival order) by
  ``hash(key) mod n`` (:meth:`redistribute`; the join's key hash, so equal keys
  of two inputs meet in one shard), by arrival position mod n
  (:meth:`reshard`), to every shard (:meth:`broadcast`) or to the shards
  ``shards_of(batch)`` marks (:meth:`multicast`);
* **sends every punctuation to every shard** (a punctuation is a promise
  about all later rows, so every shard needs it), at the same place in each
  shard's sequence as in the input, so each shard decides lateness as the
  one-thread plan would;
* runs, per shard, one copy of the plan on one worker thread (elements are
  applied in order; the numba kernels release the GIL);
* combines the shards' outputs with the **Meld rule**: at every input
  punctuation (and at the end) it waits for the shards, emits their batches
  (shard 0 first) and then, per punctuated attribute, the minimum over the
  shards' latest punctuation when it grew (:class:`~oop.progress.frontier.MinFrontier`).
  A shard's rows that followed its own punctuation ``p_j >= min`` respect the
  melded one, so the output is a valid progressing stream.

Row order: the multiset of rows equals the one-thread plan's; the order is
deterministic (shard by shard per punctuation) but not the one-thread order,
except for :meth:`window`, which delegates to
:class:`~oop.window.threaded.ThreadedWindow` (global key codes, stable scatter,
Meld of punctuation, merge into the one-thread row order): row for row.

What does not run on threads: windows ThreadedWindow cannot partition
(:func:`~oop.window.threaded.threadable`: no ``by`` key, row-based, landmark,
forward-context-aware, user-defined aggregates) and ``shards=1`` run as the
one-thread window operator; the routing, the Meld of the outputs and the
one-thread streams feeding the inputs run on the calling thread. Group and
joint punctuation from the shards is not forwarded (only linear punctuation
on an attribute, as the Spark runner); late rows inside shards are counted in
this operator's metrics (``late_dropped`` etc.) but side outputs stay inside.
Checkpoints refuse in one line.
"""

from __future__ import annotations

import time as _time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from oop.api import Stream
from oop.errors import ConfigError, UnknownColumnError
from oop.join.keys import key_hashes
from oop.operators.base import Operator, StreamInfo
from oop.plan.executor import Executor, Node
from oop.plan.result import Result
from oop.progress.frontier import MinFrontier
from oop.stream.elements import END_OF_STREAM, Element, Punctuation
from oop.window.threaded import partition_rows, threadable

__all__ = ["ShardedStream", "ShardedQuery", "ShardedResult", "Route", "shard", "shard_of_keys"]

Plan = Callable[..., Stream]
_IN_FLIGHT = 4  # batch pieces per shard queued before the routing thread waits


# ---- routes -------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """How the data rows of one input are placed on ``shards`` shards.

    ``kind``: ``"key"`` (``keys``), ``"round_robin"``, ``"broadcast"`` or
    ``"multicast"`` (``shards_of(batch)`` -> bool array ``(rows, shards)``).
    """

    kind: str
    shards: int
    keys: tuple[str, ...] = ()
    shards_of: Callable[[pa.RecordBatch], np.ndarray] | None = None


def shard_of_keys(batch: pa.RecordBatch, keys: Sequence[str], n: int) -> np.ndarray:
    """Shard ``hash(key) mod n`` of every row (rows with a null key: shard 0). O(rows).

    The hash is the join's key hash (:func:`oop.join.keys.key_hashes`), so
    equal keys of two inputs with the same key types go to the same shard;
    a Fibonacci multiply spreads sequential integer keys.
    """
    kh, valid, _ = key_hashes(batch, list(keys))
    h = (kh.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
    out = (h % np.uint64(n)).astype(np.int64)
    out[~valid] = 0
    return out


class _Router:
    """One input's scatter: ``split(batch)`` -> per shard the row numbers (arrival order)."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.seq = 0  # arrival position of the next data row (round robin)

    def split(self, batch: pa.RecordBatch) -> list[np.ndarray | None]:
        """Row numbers per shard; None = the whole batch."""
        r, n = self.route, self.route.shards
        rows = batch.num_rows
        if r.kind == "broadcast":
            return [None] * n
        if r.kind == "multicast":
            assert r.shards_of is not None
            mask = np.asarray(r.shards_of(batch), dtype=bool)
            if mask.shape != (rows, n):
                raise ConfigError(f"multicast: shards_of returned shape {mask.shape}, expected "
                                  f"({rows}, {n}): one bool per row and shard")
            return [np.flatnonzero(mask[:, i]) for i in range(n)]
        if r.kind == "round_robin":
            sid = (self.seq + np.arange(rows, dtype=np.int64)) % n
        else:
            sid = shard_of_keys(batch, r.keys, n)
        self.seq += rows
        order, bounds = partition_rows(sid, n)
        return [order[bounds[i]:bounds[i + 1]] for i in range(n)]


# ---- the threaded operator ------------------------------------------------------
class _Inlet(Operator):
    """The entry of one input of a shard's plan (fed by :meth:`Executor.push`)."""

    n_inputs = 0

    def __init__(self, info: StreamInfo, name: str) -> None:
        super().__init__(name)
        self.info = info

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        return self.info

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return [batch]


class _Outbox(Operator):
    """End of a shard's plan: keeps its batches and linear punctuations in order."""

    def __init__(self) -> None:
        super().__init__("outbox")
        self.items: list[Element] = []

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows:
            self.items.append(batch)
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if isinstance(punctuation, Punctuation):
            self.items.append(punctuation)
        return []


class _Shard:
    """One shard: a copy of the plan, its inlets and the one thread that pushes into it."""

    def __init__(self, plan: Plan, infos: Sequence[StreamInfo], i: int, name: str) -> None:
        self.inlets = [Node(_Inlet(info, f"{name}[{i}].in{j}")) for j, info in enumerate(infos)]
        out = plan(*[Stream(n) for n in self.inlets])
        if not isinstance(out, Stream):
            raise ConfigError(f"{name}: a sharded plan must return an oop Stream, "
                              f"got {type(out).__name__}")
        self.box = _Outbox()
        self.ex = Executor([Node(self.box, [out.node])])
        self.ex.open()
        self.pool = ThreadPoolExecutor(1, f"oop-{name}-{i}")

    def push(self, port: int, el: Element) -> "Future[None]":
        return self.pool.submit(self.ex.push, self.inlets[port], [el])

    def take(self) -> list[Element]:
        items, self.box.items = self.box.items, []
        return items


class ShardedQuery(Operator):
    """``plan`` run on ``routes[0].shards`` shards, one thread each (see the module docstring)."""

    def __init__(self, plan: Plan, routes: Sequence[Route], name: str = "sharded") -> None:
        super().__init__(name)
        if len({r.shards for r in routes}) != 1:
            raise ConfigError(f"{name}: the inputs go to {[r.shards for r in routes]} shards; "
                              "move them to the same number of shards first")
        self.plan = plan
        self.routes = list(routes)
        self.n_inputs = len(routes)
        self.n = routes[0].shards

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        self.routers = [_Router(r) for r in self.routes]
        for r, info in zip(self.routes, inputs):
            missing = [k for k in r.keys if k not in info.schema.names]
            if missing:
                raise UnknownColumnError(f"{self.name}: input {info.name!r} has no key column(s) "
                                         f"{missing}; its columns are {info.schema.names}")
        self.shards = [_Shard(self.plan, inputs, i, self.name) for i in range(self.n)]
        self.pending: list[Future[None]] = []
        self.frontiers: dict[str, MinFrontier] = {}
        out = self.shards[0].box.inputs[0]
        return StreamInfo(self.name, out.schema, dict(out.times), out.time)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        for sh, rows in zip(self.shards, self.routers[port].split(batch)):
            if rows is None:
                self.pending.append(sh.push(port, batch))
            elif rows.shape[0]:
                part = batch if rows.shape[0] == batch.num_rows else batch.take(pa.array(rows))
                self.pending.append(sh.push(port, part))
        # bound the batches in flight (memory): wait for the oldest; their results stay in
        # the shards' outboxes until the next punctuation, so the output is unchanged
        while len(self.pending) > _IN_FLIGHT * self.n:
            self.pending.pop(0).result()
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        for sh in self.shards:
            self.pending.append(sh.push(port, punctuation))
        return self._combine()

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        for sh in self.shards:
            self.pending.append(sh.push(port, END_OF_STREAM))
        out = self._combine()
        if all(self._ended):
            self._count_late()
            self.close()
        return out

    def _combine(self) -> list[Element]:
        """Wait for the shards; their batches (shard by shard), then the melded punctuation."""
        pending, self.pending = self.pending, []
        for f in pending:
            f.result()  # a shard's error surfaces here
        batches: list[Element] = []
        puncts: list[Element] = []
        for i, sh in enumerate(self.shards):
            for el in sh.take():
                if isinstance(el, pa.RecordBatch):
                    batches.append(el)
                elif isinstance(el, Punctuation):
                    fr = self.frontiers.setdefault(el.attr, MinFrontier(self.n))
                    v = fr.update(i, el.value)
                    if v is not None:
                        puncts.append(Punctuation(el.attr, v))
        # one melded punctuation per attribute per round: the latest (largest) growth
        last: dict[str, Element] = {}
        for p in puncts:
            assert isinstance(p, Punctuation)
            last[p.attr] = p
        return batches + list(last.values())

    def _count_late(self) -> None:
        for sh in self.shards:
            for node in sh.ex.nodes:
                for policy, k in node.op.metrics.late.items():
                    self.metrics.count_late(policy, k)

    def close(self) -> None:
        """Stop the shards' threads (at the end, or to abandon a run)."""
        for sh in getattr(self, "shards", ()):
            sh.pool.shutdown(wait=True)

    not_checkpointable = "a sharded query cannot be checkpointed; run it on one thread"

    def snapshot(self) -> Any:
        raise ConfigError(f"{self.name}: {self.not_checkpointable}")

    def restore(self, state: Any) -> None:
        self.snapshot()


# ---- the stream -------------------------------------------------------------------
@dataclass
class ShardedResult:
    """Output of :meth:`ShardedStream.collect` (the fields of the Spark ShardedResult)."""

    table: pa.Table
    punctuations: list[tuple[int, Element]]
    tuples_in: int
    late_total: int
    wall_s: float
    shards: int
    path: str = "threads"


def _identity(*streams: Stream) -> Stream:
    return streams[0]


@dataclass(frozen=True)
class ShardedStream:
    """Shards of a progressing stream on one machine (see the module docstring).

    ``inputs``: the one-thread streams feeding the shards and their routes;
    ``plan``: the per-shard plan pending over them (None: rows not yet
    processed, exactly one input); ``shards``: how many shards.
    """

    inputs: tuple[tuple[Stream, Route], ...]
    shards: int
    name: str = "sharded"
    plan: Plan | None = None

    # ---- movement -----------------------------------------------------
    def _placed(self, name: str | None = None) -> Stream:
        """The rows as one stream: the pending plan run on the shards (threads), melded."""
        if self.plan is None:
            return self.inputs[0][0]
        first, *others = self.inputs
        op = ShardedQuery(self.plan, [r for _, r in self.inputs], name=name or self.name)
        return first[0].via(op, *(s for s, _ in others))

    def _move(self, route: Route) -> "ShardedStream":
        if route.shards < 1:
            raise ConfigError(f"{self.name}: the number of shards must be >= 1, "
                              f"got {route.shards}")
        return ShardedStream(((self._placed(), route),), route.shards, self.name)

    def redistribute(self, m: int, key: str | Sequence[str]) -> "ShardedStream":
        """Send each data row to shard ``hash(key) mod m``; punctuation to all m shards."""
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not keys:
            raise ConfigError(f"{self.name}: redistribute needs at least one key column")
        return self._move(Route("key", m, keys))

    def reshard(self, m: int) -> "ShardedStream":
        """Round-robin the data rows over ``m`` shards by arrival position."""
        return self._move(Route("round_robin", m))

    def broadcast(self, m: int) -> "ShardedStream":
        """Every row (data and punctuation) to every one of ``m`` shards."""
        return self._move(Route("broadcast", m))

    def multicast(self, m: int, shards_of: Callable[[pa.RecordBatch], np.ndarray]
                  ) -> "ShardedStream":
        """Each data row to the shards ``shards_of(batch)`` marks (bool ``(rows, m)``)."""
        return self._move(Route("multicast", m, shards_of=shards_of))

    def rekey(self, column: str, expr: Any) -> "ShardedStream":
        """Materialise a key column ``column = expr`` (an Arrow expression or a batch
        callable, as :meth:`oop.Stream.apply`) on the data rows (no data movement)."""
        def step(s: Stream) -> Stream:
            return s.apply(name=f"rekey_{column}", **{column: expr})

        if self.plan is None:
            (s, route), = self.inputs
            return replace(self, inputs=((step(s), route),))
        return self.query(step, name=self.name)

    # ---- query ---------------------------------------------------------
    def query(self, plan: Plan, other: "ShardedStream | None" = None,
              name: str = "query") -> "ShardedStream":
        """Run ``plan(stream)`` (or ``plan(left, right)`` with ``other``) in every shard.

        Lazy: fuses with the pending plan (rows stay in their shard); both
        inputs must go to the same number of shards (shard i meets shard i).
        """
        mine = self.plan or _identity
        if other is None:
            return replace(self, plan=lambda *ss: plan(mine(*ss)), name=name)
        if other.shards != self.shards:
            raise ConfigError(
                f"{name}: the two inputs go to {self.shards} and {other.shards} shards; move both "
                "to the same number of shards (redistribute/broadcast) before a two-input query")
        theirs, k = other.plan or _identity, len(self.inputs)
        return ShardedStream(self.inputs + other.inputs, self.shards, name,
                             lambda *ss: plan(mine(*ss[:k]), theirs(*ss[k:])))

    def window(self, kind: Any, aggs: Any, *, by: str | Sequence[str] = (),
               **kw: Any) -> "ShardedStream":
        """The window aggregation over all shards' rows, on ``shards`` threads by key
        (:class:`~oop.window.threaded.ThreadedWindow`: the one-thread rows in the
        one-thread order); windows it cannot partition run on one thread.
        Keyword arguments as :meth:`oop.Stream.window`. Output routed by ``by``."""
        keys = [by] if isinstance(by, str) else list(by)
        threads = self.shards if self.shards > 1 and threadable(kind, aggs, keys) is None else 1
        out = self._placed().window(kind, aggs, by=keys, threads=threads, **kw)
        route = Route("key", self.shards, tuple(keys)) if keys else Route("round_robin",
                                                                         self.shards)
        return ShardedStream(((out, route),), self.shards, kw.get("name", "window"))

    def join(self, other: "ShardedStream", *, on: Sequence[str | tuple[str, str]] | str = (),
             how: str = "inner", name: str = "join", **kw: Any) -> "ShardedStream":
        """OA-Join per shard (as ``oop.spark.plans``): with ``on`` keys both sides are
        redistributed by them (shuffle join); without, this side goes round robin and
        ``other`` is broadcast (inner/left/semi/anti only). Keyword arguments as
        :meth:`oop.Stream.join` (``band``, ``tumbling``, ``punctuation``, ...)."""
        pairs = [on] if isinstance(on, str) else list(on)
        lk = [p if isinstance(p, str) else p[0] for p in pairs]
        rk = [p if isinstance(p, str) else p[1] for p in pairs]
        m = self.shards

        def plan(left: Stream, right: Stream) -> Stream:
            return left.join(right, on=on, how=how, name=name, **kw)

        if lk:
            return self.redistribute(m, lk).query(plan, other.redistribute(m, rk), name=name)
        if how in ("right", "full"):
            raise ConfigError(f"{name}: a {how} outer join without on= keys cannot be sharded "
                              "(the broadcast side would repeat its unmatched rows per shard); "
                              "give on= keys or join on one thread")
        return self.reshard(m).query(plan, other.broadcast(m), name=name)

    # ---- leaving ---------------------------------------------------------
    def to_stream(self, name: str | None = None) -> Stream:
        """The shard outputs re-combined into one stream (Meld: union, min of punctuations);
        ``name`` names the combining operator."""
        return self._placed(name)

    def run(self) -> Result:
        """Run to the end; the :class:`~oop.plan.result.Result` of the melded stream."""
        return self._placed().run()

    def collect(self) -> ShardedResult:
        """Run to the end; melded rows and punctuations, plus counts (as the Spark one)."""
        t0 = _time.perf_counter()
        res = self.run()
        return ShardedResult(res.table, res.punctuations, res.tuples_in, res.late_total,
                             _time.perf_counter() - t0, self.shards)


def shard(stream: Stream, *, shards: int, name: str = "input") -> ShardedStream:
    """A ShardedStream over ``stream`` on ``shards`` threads, rows round robin by arrival
    position (as ``oop.spark.sharded.shard(df, shards=n)`` spreads a DataFrame)."""
    if shards < 1:
        raise ConfigError(f"{name}: shards must be >= 1, got {shards}")
    return ShardedStream(((stream, Route("round_robin", shards)),), shards, name)
