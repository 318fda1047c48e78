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

On a group-wise punctuation ``(g, v)`` on input i (004 §8.2: "group-wise
punctuation may require maintaining such state for each group"): input i's
bound for group g is ``max(its linear lwm, its group bound for g)``; the
union's bound for g is the min of that over the inputs. It is emitted (as a
GroupPunctuation) when it exceeds both what was emitted for g and the
union's linear punctuation. Linear punctuation and input ends can raise group
bounds too, so they re-check the known groups (O(groups)). Every input must
use the same group key columns. State: one int per (group, input).

A quiet input stalls the *punctuation* of the union (never its tuples) until
it punctuates or ends; give its source an ``Idle`` generator (lull rule,
004 §8.1) so it advances on the data-time clock.

Purges: nothing. Cost: O(1) per batch, O(n) per linear punctuation (plus
O(groups * n) once group-wise punctuation was seen), O(k * n) per group-wise
punctuation of k groups.

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

import numpy as np
import pyarrow as pa

from oop.errors import OopError
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_union_compatible
from oop.progress.frontier import JointFrontier, MinFrontier
from oop.stream.elements import (
    INT64_MAX,
    INT64_MIN,
    Element,
    GroupPunctuation,
    JointPunctuation,
    Punctuation,
)

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
        # group-wise punctuation: attr -> group key -> bound per input; attr -> key -> emitted
        self.group_bounds: dict[str, dict[tuple[Any, ...], list[int]]] = {}
        self.group_emitted: dict[str, dict[tuple[Any, ...], int]] = {}
        self.group_schema: pa.Schema | None = None

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        first = inputs[0]
        require_union_compatible(inputs, self.name)
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
            out: list[Element] = [] if v is None else [Punctuation(p.attr, v)]
            if self.group_bounds.get(p.attr):
                out.extend(self._emit_groups(p.attr, list(self.group_bounds[p.attr])))
            return out
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
            return self._on_group(p, port)
        raise UnsupportedPunctuationError(f"{self.name}: unknown punctuation {p!r}")

    # ---- group-wise punctuation -------------------------------------------------
    def _on_group(self, p: GroupPunctuation, port: int) -> list[Element]:
        if self.group_schema is None:
            self.group_schema = p.keys.schema
        elif not p.keys.schema.equals(self.group_schema, check_metadata=False):
            raise UnsupportedPunctuationError(
                f"{self.name}: input {port} (stream {self.inputs[port].name!r}) sent group-wise "
                f"punctuation keyed by {p.keys.schema.names} but earlier group punctuation was "
                f"keyed by {self.group_schema.names}; every input must use the same group key"
            )
        bounds = self.group_bounds.setdefault(p.attr, {})
        cols = [p.keys.column(i).to_pylist() for i in range(p.keys.num_columns)]
        touched = []
        for key, v in zip(zip(*cols), p.values.tolist()):
            per_input = bounds.setdefault(key, [INT64_MIN] * self.n_inputs)
            if v > per_input[port]:
                per_input[port] = int(v)
            touched.append(key)
        return self._emit_groups(p.attr, touched)

    def _emit_groups(self, attr: str, keys: Any) -> list[Element]:
        bounds = self.group_bounds.get(attr)
        if not bounds:
            return []
        linear = self._frontier(attr)
        emitted = self.group_emitted.setdefault(attr, {})
        out_keys: list[tuple[Any, ...]] = []
        out_vals: list[int] = []
        for key in keys:
            per_input = bounds[key]
            v = min(max(b, lin) for b, lin in zip(per_input, linear.values))
            if v > emitted.get(key, INT64_MIN) and v > linear.emitted and v != INT64_MAX:
                emitted[key] = v
                out_keys.append(key)
                out_vals.append(v)
        if not out_keys:
            return []
        assert self.group_schema is not None
        cols = list(zip(*out_keys))
        kb = pa.RecordBatch.from_arrays(
            [pa.array(list(c), type=f.type) for c, f in zip(cols, self.group_schema)],
            schema=self.group_schema)
        return [GroupPunctuation(attr, kb, np.asarray(out_vals, dtype=np.int64))]

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        if all(self._ended):
            return []
        out: list[Element] = []
        for attr, f in self.frontiers.items():
            v = f.end(port)
            if v is not None:
                out.append(Punctuation(attr, v))
        for attr, bounds in self.group_bounds.items():
            self._frontier(attr)  # make sure the linear frontier knows the end
            out.extend(self._emit_groups(attr, list(bounds)))
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
            "group_bounds": {a: {k: list(v) for k, v in d.items()}
                             for a, d in self.group_bounds.items()},
            "group_emitted": {a: dict(d) for a, d in self.group_emitted.items()},
            "group_schema": self.group_schema,
        }

    def restore(self, state: Any) -> None:
        super().restore(state)
        for a, (values, emitted) in state["frontiers"].items():
            f = self._frontier(a)
            f.values = list(values)
            f.emitted = emitted
        self.group_bounds = {a: {k: list(v) for k, v in d.items()}
                             for a, d in state.get("group_bounds", {}).items()}
        self.group_emitted = {a: dict(d) for a, d in state.get("group_emitted", {}).items()}
        self.group_schema = state.get("group_schema")
        if state["joint"] is not None:
            attrs, latest, emitted = state["joint"]
            self.joint = JointFrontier(self.n_inputs, attrs)
            self.joint.latest = list(latest)
            self.joint.emitted = emitted

    def state_size(self) -> StateSize:
        """Group bounds held (never tuples). O(attributes)."""
        items = sum(len(d) for d in self.group_bounds.values())
        return StateSize(items, items * 8 * self.n_inputs)

    def _check(self) -> None:
        for f in self.frontiers.values():
            f._check()
        for attr, bounds in self.group_bounds.items():
            lin = self._frontier(attr).values
            for key, v in self.group_emitted.get(attr, {}).items():
                combined = min(max(b, x) for b, x in zip(bounds[key], lin))
                assert v <= combined, (attr, key, v, combined)
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
