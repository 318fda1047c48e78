"""Meld: order-agnostic n-ary union (004 §8.2, Fig. 8-2).

What it computes: the bag union of its n inputs (all with the same schema and
the same primary progressing attribute).

On a batch (any input): forwarded at once, untouched -- Meld never waits for
order and never buffers a tuple, so a lull on one input holds no tuples (its
state is n watermarks, never data).

On a linear punctuation ``P(a, v)`` on input i: remember it as input i's
latest bound on ``a``; emit ``P(a, min_j lwm_j(a))`` only if that min grew
(no duplicate punctuation, never backwards). An input that has not
punctuated ``a`` yet holds the min at -inf; an ended input counts as +inf.
Each attribute has its own :class:`~oop.progress.frontier.MinFrontier`.

On a joint punctuation (004 §7.2): the union promises the intersection of the
inputs' latest boxes -- the component-wise min -- emitted when some
component grew (:class:`~oop.progress.frontier.JointFrontier`).

On a group-wise punctuation: refused with a clear error -- combine per group
upstream, or punctuate the inputs linearly. (Melding group-wise bounds needs
the group key space of every input; no operator of the engine emits them
into a union yet.)

A quiet input stalls the *punctuation* of the union (never its tuples) until
it punctuates or ends; give its source an ``Idle`` generator (lull rule,
004 §8.1) so it advances on the data-time clock.

Purges: nothing. Cost: O(1) per batch, O(n) per punctuation.

Timeline (two inputs, linear punctuation on ts)::

    in0:  P5 .......... P9 ...... P12
    in1:  ...... P7 .......... P8 ......   (end)
    out:  ...... P5 ...... P7 ... P8 ...   P12

>>> import pyarrow as pa, oop
>>> a = oop.from_batches([pa.record_batch({"ts": [5]}), oop.Punctuation("ts", 5)], time="ts",
...                      punctuation=oop.External(), name="a")
>>> b = oop.from_batches([pa.record_batch({"ts": [7]}), oop.Punctuation("ts", 7)], time="ts",
...                      punctuation=oop.External(), name="b")
>>> [p.value for _, p in a.meld(b).run().punctuations]
[5, 7]
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from oop.errors import OopError, SchemaMismatchError
from oop.operators.base import Operator, StreamInfo
from oop.progress.frontier import JointFrontier, MinFrontier
from oop.stream.elements import Element, GroupPunctuation, JointPunctuation, Punctuation

__all__ = ["Meld", "UnsupportedPunctuationError", "meld_reference"]


class UnsupportedPunctuationError(OopError, TypeError):
    """An operator received a punctuation kind it cannot combine."""


class Meld(Operator):
    """Union of n inputs; punctuation = min of the inputs' last punctuation."""

    def __init__(self, n_inputs: int, name: str = "meld") -> None:
        super().__init__(name)
        if n_inputs < 1:
            raise ValueError(f"{name}: a union needs at least one input, got {n_inputs}")
        self.n_inputs = n_inputs
        self.frontier = MinFrontier(n_inputs)  # the primary attribute's frontier
        self.frontiers: dict[str, MinFrontier] = {}
        self.joint: JointFrontier | None = None

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
        if first.time is not None:
            self.frontiers[first.time] = self.frontier
        return first.with_schema(first.schema, name=self.name)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return [batch]

    def _frontier(self, attr: str) -> MinFrontier:
        f = self.frontiers.get(attr)
        if f is None:
            f = self.frontiers[attr] = MinFrontier(self.n_inputs)
            for port, ended in enumerate(self._ended):
                if ended:
                    f.end(port)
        return f

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        p = punctuation
        if isinstance(p, Punctuation):
            v = self._frontier(p.attr).update(port, p.value)
            return [] if v is None else [Punctuation(p.attr, v)]
        if isinstance(p, JointPunctuation):
            if self.joint is None:
                self.joint = JointFrontier(self.n_inputs, p.attrs)
                for q, ended in enumerate(self._ended):
                    if ended:
                        self.joint.end(q)
            try:
                b = self.joint.update(port, p.bounds)
            except ValueError as e:
                raise UnsupportedPunctuationError(
                    f"{self.name}: input {port} (stream {self.inputs[port].name!r}): {e}"
                ) from None
            return [] if b is None else [JointPunctuation(b)]
        if isinstance(p, GroupPunctuation):
            raise UnsupportedPunctuationError(
                f"{self.name}: input {port} (stream {self.inputs[port].name!r}) sent group-wise "
                f"punctuation on {p.attr!r}; Meld combines linear and joint punctuation only -- "
                "punctuate the inputs linearly (e.g. the min over groups) before the union"
            )
        raise UnsupportedPunctuationError(f"{self.name}: unknown punctuation {p!r}")

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        if all(self._ended):
            return []
        out: list[Element] = []
        for attr, f in self.frontiers.items():
            v = f.end(port)
            if v is not None:
                out.append(Punctuation(attr, v))
        if self.joint is not None:
            b = self.joint.end(port)
            if b is not None:
                out.append(JointPunctuation(b))
        return out

    def snapshot(self) -> Any:
        return {
            **super().snapshot(),
            "frontiers": {a: (list(f.values), f.emitted) for a, f in self.frontiers.items()},
            "joint": None if self.joint is None else
            (self.joint.attrs, list(self.joint.latest), self.joint.emitted),
        }

    def restore(self, state: Any) -> None:
        super().restore(state)
        for a, (values, emitted) in state["frontiers"].items():
            f = self._frontier(a)
            f.values = list(values)
            f.emitted = emitted
        if state["joint"] is not None:
            attrs, latest, emitted = state["joint"]
            self.joint = JointFrontier(self.n_inputs, attrs)
            self.joint.latest = list(latest)
            self.joint.emitted = emitted

    def _check(self) -> None:
        for f in self.frontiers.values():
            f._check()
        if self.joint is not None:
            self.joint._check()


def meld_reference(events: Sequence[tuple[int, Any]], n: int, attr: str = "ts") -> list[Any]:
    """Tuple-at-a-time reference of Meld over an interleaving of ``(port, item)`` events.

    ``item`` is a row (dict), a :class:`Punctuation` or ``None`` for end of
    that input. Returns the output: rows and punctuation values, in order.
    """
    last = [None] * n  # type: list[int | None]
    ended = [False] * n
    emitted: int | None = None
    out: list[Any] = []
    for port, item in events:
        if isinstance(item, Punctuation):
            last[port] = item.value if last[port] is None else max(last[port], item.value)
        elif item is None:
            ended[port] = True
        else:
            out.append(item)
            continue
        if all(ended):
            continue
        known = [v for v, e in zip(last, ended) if not e]
        if any(v is None for v in known):
            continue
        m = min(known)  # type: ignore[type-var]
        if emitted is None or m > emitted:
            emitted = m
            out.append(m)
    return out
