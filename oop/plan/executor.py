"""The push executor (DESIGN §5).

A plan is a DAG of :class:`Node` objects, each holding one operator and the
nodes feeding its input ports. :class:`Executor` opens the operators in
topological order, then repeatedly pulls one feed item from each source
(round-robin, i.e. the sources' arrival interleaving) and pushes the
resulting elements depth-first through the DAG. Everything an element
causes happens before the next feed item is read, so after each round the
plan is at a consistent cut: the place where it can be checkpointed.

After each round the executor calls ``on_idle(clock)`` on every source whose
feed produced nothing new in that round (it has ended or is in a lull), with
``clock`` the largest event time seen on any source -- the data-time drift
rule for idle sources (004 §8.1) lives in the generators.

Metrics: the executor counts batches/tuples/punctuations in and out of every
operator, records its state size after each call, and measures latency as
wall time from the source punctuation that triggered an output batch to the
moment the batch left the operator.
"""

from __future__ import annotations

import itertools
import time as _time
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from oop.checkpoint.cut import Checkpoint
from oop.io.memory_pool import tune_malloc
from oop.kernel_cache import load_cached_kernels_lean
from oop.operators.base import Operator, StreamInfo
from oop.plan.source import Source
from oop.stream.elements import END_OF_STREAM, INT64_MIN, Element, EndOfStream, is_punctuation

__all__ = ["Node", "Executor", "Checkpoint"]

_ids = itertools.count()


class Node:
    """One operator in a plan and the nodes feeding its input ports."""

    __slots__ = ("op", "parents", "id")

    def __init__(self, op: Operator, parents: Sequence["Node"] = ()) -> None:
        self.op = op
        self.parents = list(parents)
        self.id = next(_ids)

    def __repr__(self) -> str:
        return f"Node({self.op.name})"


def topological(sinks: Sequence[Node]) -> list[Node]:
    """Every node reachable upstream of ``sinks``, parents before children."""
    order: list[Node] = []
    seen: set[int] = set()

    def visit(n: Node) -> None:
        if n.id in seen:
            return
        seen.add(n.id)
        for p in n.parents:
            visit(p)
        order.append(n)

    for s in sinks:
        visit(s)
    return order


class Executor:
    """Runs a plan given by its sink nodes. Single-threaded, push-based."""

    def __init__(self, sinks: Sequence[Node]) -> None:
        self.nodes = topological(sinks)
        self._unique_names()
        self.children: dict[int, list[tuple[Node, int]]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for port, p in enumerate(n.parents):
                self.children[p.id].append((n, port))
        self.sources = [n for n in self.nodes if isinstance(n.op, Source)]
        self._punct_t0: int | None = None
        self.rounds = 0
        self.opened = False

    def _unique_names(self) -> None:
        counts: dict[str, int] = {}
        for n in self.nodes:
            base = n.op.name
            k = counts.get(base, 0)
            counts[base] = k + 1
            if k:
                n.op.name = f"{base}#{k + 1}"
                n.op.metrics.name = n.op.name

    def open(self) -> None:
        load_cached_kernels_lean()  # oop's cached kernels load without numba's registries
        tune_malloc()  # numpy's per-batch arrays from the heap, not mmap (oop.io.memory_pool)
        infos: dict[int, StreamInfo] = {}
        for n in self.nodes:
            infos[n.id] = n.op.open([infos[p.id] for p in n.parents])
        self.opened = True

    # ---- pushing -----------------------------------------------------
    def _emit(self, node: Node, elements: Iterable[Element]) -> None:
        m = node.op.metrics
        for el in elements:
            if isinstance(el, pa.RecordBatch):
                if el.num_rows == 0:
                    continue
                m.batches_out += 1
                m.tuples_out += el.num_rows
            elif is_punctuation(el):
                m.punctuations_out += 1
            for child, port in self.children[node.id]:
                self._deliver(child, el, port)

    def push(self, node: Node, elements: Iterable[Element]) -> None:
        """Deliver ``elements`` to the children of ``node`` as if it had emitted them: a
        plan fed from outside, one element at a time (a shard of :mod:`oop.sharded`)."""
        self._emit(node, elements)

    def _deliver(self, node: Node, el: Element, port: int) -> None:
        op = node.op
        m = op.metrics
        if isinstance(el, pa.RecordBatch):
            m.batches_in += 1
            m.tuples_in += el.num_rows
            out = op.on_batch(el, port)
        elif isinstance(el, EndOfStream):
            out = op.on_end(port)
            if all(op._ended):
                out = [*out, END_OF_STREAM]
        else:
            m.punctuations_in += 1
            out = op.on_punctuation(el, port)
        if out and self._punct_t0 is not None and not isinstance(el, pa.RecordBatch):
            now = _time.perf_counter_ns()
            for o in out:
                if isinstance(o, pa.RecordBatch) and o.num_rows:
                    m.record_latency(now - self._punct_t0)
        m.record_state(op.state_size())
        if out:
            self._emit(node, out)

    def _from_source(self, node: Node, elements: list[Element]) -> None:
        for el in elements:
            self._punct_t0 = _time.perf_counter_ns() if not isinstance(el, pa.RecordBatch) else None
            self._emit(node, [el])
        self._punct_t0 = None
        node.op.metrics.record_state(node.op.state_size())

    # ---- running -----------------------------------------------------
    def run(
        self,
        stop_after_rounds: int | None = None,
        on_round: Callable[[int], None] | None = None,
    ) -> Checkpoint | None:
        """Run to the end (returns None) or stop after ``stop_after_rounds`` rounds.

        Stopping returns a :class:`Checkpoint` from which :meth:`resume`
        continues in a freshly built plan.
        """
        if not self.opened:
            self.open()
        live = any(not s.op.exhausted for s in self.sources)
        if live and stop_after_rounds is not None and self.rounds >= stop_after_rounds:
            return self.checkpoint()
        for rounds in self.steps():
            if on_round is not None:
                on_round(rounds)
            if stop_after_rounds is not None and rounds >= stop_after_rounds:
                if any(not s.op.exhausted for s in self.sources):
                    return self.checkpoint()
        return None

    def steps(self) -> Iterator[int]:
        """Run round by round, yielding the round count after each round.

        A round pulls one feed item from every live source and pushes all it
        causes through the plan, then gives idle sources ``on_idle(clock)``.
        Between two yields the plan is at a consistent cut (checkpointable);
        callers that interleave plans (e.g. one per Spark shard) drive them
        with this generator.
        """
        if not self.opened:
            self.open()
        live = [s for s in self.sources if not s.op.exhausted]
        while live:
            idle: list[Node] = []
            for s in live:
                src: Source = s.op  # type: ignore[assignment]
                els = src.pull()
                if els is None:
                    self._from_source(s, [END_OF_STREAM])
                    idle.append(s)
                elif els:
                    self._from_source(s, els)
                else:
                    idle.append(s)
            self.rounds += 1
            self._idle_round(idle)
            live = [s for s in live if not s.op.exhausted]
            yield self.rounds

    def _idle_round(self, idle: list[Node]) -> None:
        clock = max((s.op.hwm.value for s in self.sources), default=INT64_MIN)
        if clock == INT64_MIN:
            return
        for s in idle:
            if not s.op.exhausted:
                self._from_source(s, s.op.on_idle(clock))

    def checkpoint(self) -> Checkpoint:
        """Snapshot every operator (call only between rounds)."""
        return Checkpoint(self.rounds, {n.op.name: n.op.snapshot() for n in self.nodes},
                          {n.op.name: n.op.metrics.snapshot() for n in self.nodes})

    def resume(self, cp: Checkpoint) -> None:
        """Restore a checkpoint into this freshly built (unopened) plan."""
        if not self.opened:
            self.open()
        for n in self.nodes:
            if n.op.name not in cp.states:
                raise ValueError(
                    f"checkpoint has no state for operator {n.op.name!r}; resume into a plan "
                    "built the same way as the one that was checkpointed"
                )
            n.op.restore(cp.states[n.op.name])
            m = getattr(cp, "metrics", None) or {}  # checkpoints from before metrics were kept
            if n.op.name in m:
                n.op.metrics.restore(m[n.op.name])
        self.rounds = cp.rounds
