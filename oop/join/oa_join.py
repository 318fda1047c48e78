"""OA-Join: the order-agnostic band / tumbling window join (004 §7.1-7.2, Figs. 7-1..7-4).

What it computes: the equi-join of S0 (input 0, "left") and S1 (input 1,
"right") restricted by a window predicate (:mod:`oop.join.spec`)::

    band:      S0.ts - range0 <= S1.ts <= S0.ts + range1   (and S0.k == S1.k ...)
    tumbling:  floor(S0.ts / size) == floor(S1.ts / size)   (and S0.k == S1.k ...)

plus an optional vectorized residual predicate over the joined columns, as an
inner, left/right/full outer, semi or anti join. Arrival order is irrelevant.

On a batch of input i (Fig. 7-1 *ProcessTuple*): probe it at once against the
stored tuples ``M_{1-i}`` of the other input (numba hash probe) and release the
results at once, in any order. Store a tuple in ``M_i`` only if a future tuple
of the other input could still match it: ``ts >= keep_from(i, b_{1-i})`` -- the
``b_{1-i}`` rule; otherwise it is processed on the fly and discarded (an outer
or anti join emits it at once if it found no partner). Tuples below the
input's own punctuation are late (policy ``late``: drop with a count,
side_output, raise).

On a punctuation ``P(ts_i, v)`` (*ProcessPunctuation*): ``b_i = v``; purge every
tuple of ``M_{1-i}`` with ``ts < keep_from(1-i, b_i)`` -- no future tuple of
input i can match it. An outer/anti join emits the purged tuples that never
matched, null-padded, right then. Then *ProducePunctuation*:

* individual: ``P(S0.ts, min(b0, keep_from(0, b1)))`` and
  ``P(S1.ts, min(b1, keep_from(1, b0)))`` -- for the band that is
  ``min(b0, b1 - range1)`` and ``min(b1, b0 - range0)``;
* joint (§7.2): ``JointPunctuation((S0.ts, b0), (S1.ts, b1))`` -- every later
  result pairs at least one not-yet-arrived tuple, so no later result has
  ``S0.ts < b0`` and ``S1.ts < b1``. (The thesis emits it only while b0, b1 are
  within each other's band; we emit it on every advance -- it is always valid
  and a box outside the band is simply empty.)

The engine's window aggregate (``Stream.window``) closes windows from linear
punctuation on the attribute it windows on (``time=``, default S0.ts): keep
``individual`` or ``both`` when a window on ``ts`` or ``ts_right`` follows. For
windows on max/min of the two times, ``Stream.derive_time`` translates
individual (and, for max, joint) punctuation into punctuation on the derived
attribute (:mod:`oop.operators.derive_time`).

A null time (the missing side of a null-padded outer row) satisfies no
``attr < v``: punctuation on that attribute does not constrain such rows.
Semi/anti outputs carry only S0's columns and only the individual punctuation
on S0.ts.

Output columns: S0's columns as they are, then S1's columns, an S1 name that
clashes with an S0 name suffixed with ``suffix`` (default ``_right``). Both
progressing attributes stay in ``StreamInfo.times``; the primary one is S0's.

End of input i acts as ``P(ts_i, +inf)``: the other side's state is emptied.
When both inputs have ended no state remains.

Cost: per input tuple O(1 + matching chain length); per punctuation O(|M|)
when something expires (one compaction), O(1) otherwise. State: per input
the tuples within one band (plus disorder) of the other input's punctuation;
charged to the plan's state budget (:mod:`oop.limits`, ``--max-state``,
summed over both sides and all workers): an insert that would pass it raises
``StateLimitError`` naming the join before storing; a purge reports the
smaller figure.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.join.keys import key_family, key_hashes
from oop.join.spec import JoinConfig, WindowPredicate
from oop.join.state import SideState
from oop.limits import current_budget, guard_for
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import (
    INT64_MAX,
    INT64_MIN,
    Element,
    JointPunctuation,
    Punctuation,
)
from oop.stream.late import split_late
from oop.stream.timecol import parse_duration, time_values

__all__ = ["OAJoin"]


class OAJoin(Operator):
    """Order-agnostic window join of two inputs (see the module docstring).

    ``workers > 1`` splits the state round-robin over several hash states
    (:class:`oop.join.split_join.SplitJoin` probes them on threads); the
    results are identical.
    """

    n_inputs = 2

    def __init__(self, config: JoinConfig, workers: int = 1) -> None:
        super().__init__(config.name)
        if workers < 1:
            raise ConfigError(f"join {config.name!r}: workers must be >= 1, got {workers}")
        self.config = config
        self.pred = config.predicate
        self.workers = int(workers)
        self.states: list[list[SideState]] = [[SideState(), SideState()] for _ in range(workers)]
        self.b = [INT64_MIN, INT64_MIN]
        self.seq = [0, 0]
        self._emitted_p = [INT64_MIN, INT64_MIN]
        self._emitted_joint: tuple[int, int] | None = None
        self.peak_side_items = [0, 0]
        self.peak_side_bytes = [0, 0]
        self.exact = True

    # ---- opening -----------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        cfg = self.config
        left, right = inputs
        for k, info in enumerate(inputs):
            if info.time is None:
                raise ConfigError(
                    f"{self.name}: input {k} (stream {info.name!r}) has no progressing "
                    "attribute; a window join needs event time on both inputs"
                )
        if left.unit() != right.unit():
            raise ConfigError(
                f"{self.name}: S0 {left.name!r} times are in {left.unit()} but S1 "
                f"{right.name!r} times are in {right.unit()}; convert one so the band compares "
                "like with like"
            )
        spec = cfg.extra.get("durations")
        if spec is not None:  # durations given as text: resolve in the inputs' unit
            u = left.unit()
            if spec[0] == "band":
                self.pred = WindowPredicate.band(parse_duration(spec[1], u),
                                                 parse_duration(spec[2], u))
            else:
                self.pred = WindowPredicate.tumbling(parse_duration(spec[1], u))
        tsize = self.pred.size if self.pred.kind == "tumbling" else 0
        self.states = [[SideState(tumbling_size=tsize), SideState(tumbling_size=tsize)]
                       for _ in range(self.workers)]
        self.budget = current_budget()  # shared by the plan's operators (oop.limits)
        self._guard_states()
        require_columns(left, [a for a, _ in cfg.on], self.name)
        require_columns(right, [b for _, b in cfg.on], self.name)
        for a, b in cfg.on:
            fa = key_family(left.schema.field(a).type)
            fb = key_family(right.schema.field(b).type)
            if fa != fb or fa == "other":
                raise ConfigError(
                    f"{self.name}: key {a!r} of {left.name!r} is {left.schema.field(a).type} but "
                    f"key {b!r} of {right.name!r} is {right.schema.field(b).type}; cast them to "
                    "one comparable type (integer, string, binary or float)"
                )
        self.keys = ([a for a, _ in cfg.on], [b for _, b in cfg.on])
        self.exact = len(cfg.on) == 0 or (
            len(cfg.on) == 1 and key_family(left.schema.field(cfg.on[0][0]).type) == "int")
        self.time_attrs = (left.time, right.time)
        lnames = set(left.schema.names)
        rfields = []
        self.right_names: list[str] = []
        for f in right.schema:
            name = f.name
            if name in lnames:
                name = f.name + cfg.suffix
                if name in lnames or name in right.schema.names:
                    raise ConfigError(
                        f"{self.name}: S1 column {f.name!r} clashes with S0 and so does "
                        f"{name!r}; rename it or pass another suffix"
                    )
            self.right_names.append(name)
            rfields.append(pa.field(name, f.type, True))
        self.out_time = (left.time, self.right_names[right.schema.names.index(right.time)])
        self.left_only = cfg.how in ("semi", "anti")
        self.joined_schema = pa.schema([pa.field(f.name, f.type, True) for f in left.schema]
                                       + rfields)
        self.key_out = [(a, self.right_names[right.schema.names.index(b)]) for a, b in cfg.on]
        if self.left_only:
            return StreamInfo(self.name, left.schema, {left.time: left.unit()}, left.time)
        return StreamInfo(self.name, self.joined_schema,
                          {left.time: left.unit(), self.out_time[1]: right.unit()}, left.time)

    # ---- assembling output ---------------------------------------------
    def _joined(self, lrows: pa.RecordBatch, rrows: pa.RecordBatch) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(list(lrows.columns) + list(rrows.columns),
                                          schema=self.joined_schema)

    def _padded(self, rows: pa.RecordBatch, side: int) -> pa.RecordBatch:
        """Unmatched ``rows`` of input ``side``: null-padded (outer) or as they are (anti)."""
        if self.left_only:
            return rows
        n = rows.num_rows
        other = self.inputs[1 - side].schema
        nulls = [pa.nulls(n, f.type) for f in other]
        cols = list(rows.columns) + nulls if side == 0 else nulls + list(rows.columns)
        return pa.RecordBatch.from_arrays(cols, schema=self.joined_schema)

    def _verify(self, joined: pa.RecordBatch) -> np.ndarray | None:
        """Mask of candidate pairs that really match (exact keys, residual), or None = all."""
        mask = None
        if not self.exact:
            for a, b in self.key_out:
                eq = pc.fill_null(pc.equal(joined.column(a), joined.column(b)), False)
                m = np.asarray(eq.to_numpy(zero_copy_only=False), dtype=bool)
                mask = m if mask is None else mask & m
        res = self.config.residual
        if res is not None:
            if isinstance(res, pc.Expression):
                idx = pa.array(np.arange(joined.num_rows, dtype=np.int64))
                t = pa.Table.from_batches([joined.append_column("__oop_pair", idx)]).filter(res)
                m = np.zeros(joined.num_rows, dtype=bool)
                m[t.column("__oop_pair").to_numpy()] = True
            else:
                r = res(joined)
                if isinstance(r, (pa.Array, pa.ChunkedArray)):
                    r = pc.fill_null(r, False).to_numpy(zero_copy_only=False)
                m = np.asarray(r, dtype=bool)
                if m.shape != (joined.num_rows,):
                    raise ConfigError(
                        f"{self.name}: the residual predicate returned shape {m.shape} for "
                        f"{joined.num_rows} candidate rows; return one boolean per row"
                    )
            mask = m if mask is None else mask & m
        return mask

    # ---- the batch path ------------------------------------------------
    def _probe_all(self, o: int, lo: np.ndarray, hi: np.ndarray, kh: np.ndarray,
                   bk: np.ndarray, valid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(probe rows, entries) from every worker's state of input ``o``."""
        return [w[o].probe(lo, hi, kh, bk, valid) for w in self.states]

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        self.check_schema(batch, port)
        i, o = port, 1 - port
        cfg = self.config
        pres = cfg.preserves
        times = time_values(batch, self.time_attrs[i], self.inputs[i].name)
        batch, late, times = split_late(batch, times, self.b[i], cfg.late,
                                        self.inputs[i].name, self.time_attrs[i])
        if late is not None:
            self.route_late(late, cfg.late)
        n = batch.num_rows
        if n == 0:
            return []
        times = np.ascontiguousarray(times, dtype=np.int64)
        kh, valid, _ = key_hashes(batch, self.keys[i])
        bk = self.pred.bucket_keys(kh, times)
        lo, hi = self.pred.intervals(i, times)
        out: list[Element] = []
        matched = np.zeros(n, dtype=bool)
        mark_other = pres[o] or (self.left_only and o == 0)
        dead = self.left_only and o == 0
        for w, (pi, ei) in enumerate(self._probe_all(o, lo, hi, kh, bk, valid)):
            if len(pi) == 0:
                continue
            st = self.states[w][o]
            need_joined = not self.left_only or not self.exact or cfg.residual is not None
            if need_joined:
                order, orows = st.take(ei)
                pi, ei = pi[order], ei[order]
                prows = batch.take(pa.array(pi))
                joined = self._joined(prows, orows) if i == 0 else self._joined(orows, prows)
                mask = self._verify(joined)
                if mask is not None:
                    pi, ei = pi[mask], ei[mask]
                    joined = joined.filter(pa.array(mask))
                if not self.left_only and joined.num_rows:
                    out.append(joined)
            matched[pi] = True
            if mark_other:
                new = st.mark(ei, dead=dead)
                if cfg.how == "semi" and len(new):
                    out.append(st.take(new)[1])
        if cfg.how == "semi" and i == 0 and matched.any():
            out.append(batch.filter(pa.array(matched)))
        # store (the b_{1-i} rule) ...
        store = valid & (times >= self.pred.keep_from(i, self.b[o]))
        if self.left_only and i == 0:
            store &= ~matched
        self._store(i, batch, store, times, kh, matched)
        # ... and release unmatched tuples that can never match
        if pres[i] and cfg.how != "semi":
            gone = ~matched & ~store
            if gone.any():
                out.append(self._padded(batch.filter(pa.array(gone)), i))
        self.seq[i] += n
        self._track_peaks()
        return out

    def _store(self, i: int, batch: pa.RecordBatch, store: np.ndarray, times: np.ndarray,
               kh: np.ndarray, matched: np.ndarray) -> None:
        if not store.any():
            return
        flags = matched.astype(np.uint8)
        k = self.workers
        if k == 1:
            idx = np.flatnonzero(store)
            rows = batch if len(idx) == batch.num_rows else batch.take(pa.array(idx))
            self.states[0][i].insert(rows, times[idx], kh[idx], flags[idx])
            return
        wid = (self.seq[i] + np.arange(batch.num_rows)) % k   # round-robin by sequence number
        for w in range(k):
            idx = np.flatnonzero(store & (wid == w))
            if len(idx):
                self.states[w][i].insert(batch.take(pa.array(idx)), times[idx], kh[idx],
                                         flags[idx])

    # ---- punctuation -----------------------------------------------------
    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self.time_attrs[port]:
            return []  # punctuation on other attributes says nothing about the band
        return self._advance(port, int(punctuation.value))

    def _advance(self, i: int, v: int) -> list[Element]:
        if v <= self.b[i]:
            return []
        self.b[i] = v
        o = 1 - i
        out: list[Element] = []
        thr = self.pred.keep_from(o, v)
        want = self.config.preserves[o]
        for w in self.states:
            rows = w[o].purge(thr, want)
            if rows is not None and rows.num_rows:
                out.append(self._padded(rows, o))
        out.extend(self._produce_punctuation())
        self._track_peaks()
        self.budget.report(self, self.state_size().bytes)  # purged: frees budget for others
        return out

    def output_bounds(self) -> tuple[int, int]:
        """Lower bounds on S0.ts and S1.ts of every later result (individual punctuation)."""
        b0, b1 = self.b
        return (min(b0, self.pred.keep_from(0, b1)), min(b1, self.pred.keep_from(1, b0)))

    def _produce_punctuation(self) -> list[Element]:
        out: list[Element] = []
        mode = self.config.punctuation
        bounds = self.output_bounds()
        sides = (0,) if self.left_only else (0, 1)
        if mode in ("individual", "both") or self.left_only:
            for j in sides:
                v = bounds[j]
                if INT64_MIN < v < INT64_MAX and v > self._emitted_p[j]:
                    self._emitted_p[j] = v
                    out.append(Punctuation(self.out_time[j], v))
        if mode in ("joint", "both") and not self.left_only:
            b0, b1 = self.b
            if b0 > INT64_MIN and b1 > INT64_MIN and (b0, b1) != self._emitted_joint \
                    and not (b0 == INT64_MAX and b1 == INT64_MAX):
                self._emitted_joint = (b0, b1)
                out.append(JointPunctuation(((self.out_time[0], b0), (self.out_time[1], b1))))
        return out

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        out = self._advance(port, INT64_MAX)
        if all(self._ended):
            out.extend(self.flush())
        return out

    def flush(self) -> list[Element]:
        out: list[Element] = []
        for w in self.states:
            for s in (0, 1):
                rows = w[s].purge(INT64_MAX, self.config.preserves[s])
                if rows is not None and rows.num_rows:
                    out.append(self._padded(rows, s))
        return out

    # ---- state -----------------------------------------------------------
    def _guard_states(self) -> None:
        """Charge every stored tuple to the plan's state budget (:mod:`oop.limits`): an insert
        that would take the join's state (both sides, all workers) over it raises
        StateLimitError naming this operator, before storing."""
        for w in self.states:
            for st in w:
                st.guard = guard_for(self, self.name, self.budget, None,
                                     lambda st=st: self.state_size().bytes - st.nbytes)

    def side_state(self, side: int) -> StateSize:
        """Items and bytes stored for input ``side`` (over all workers). O(workers)."""
        return StateSize(sum(w[side].alive for w in self.states),
                         sum(w[side].nbytes for w in self.states))

    def _track_peaks(self) -> None:
        for s in (0, 1):
            sz = self.side_state(s)
            self.peak_side_items[s] = max(self.peak_side_items[s], sz.items)
            self.peak_side_bytes[s] = max(self.peak_side_bytes[s], sz.bytes)

    def state_size(self) -> StateSize:
        return self.side_state(0) + self.side_state(1)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "b": list(self.b), "seq": list(self.seq),
                "emitted_p": list(self._emitted_p), "emitted_joint": self._emitted_joint,
                "states": [[s.snapshot() for s in w] for w in self.states],
                "peaks": (list(self.peak_side_items), list(self.peak_side_bytes))}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.b = list(state["b"])
        self.seq = list(state["seq"])
        self._emitted_p = list(state["emitted_p"])
        self._emitted_joint = state["emitted_joint"]
        self.states = [[SideState.from_snapshot(s) for s in w] for w in state["states"]]
        self._guard_states()
        self.peak_side_items, self.peak_side_bytes = (list(x) for x in state["peaks"])

    def _check(self) -> None:
        """Assert: hash chains sound; no live stored tuple is below its keep_from bound."""
        for w in self.states:
            for s in (0, 1):
                w[s]._check(self.pred.keep_from(s, self.b[1 - s]))
        assert self._emitted_p[0] <= max(self.output_bounds()[0], INT64_MIN)
