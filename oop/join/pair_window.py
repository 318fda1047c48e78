"""PairWindow: aggregate a join's output per cell of its two times, closed by joint punctuation.

What it computes (004 §7.2, query Q7-1 and Fig. 7-5): OA-Join results carry two
progressing attributes, ``t0`` (S0.ts) and ``t1`` (S1.ts). A *pair window*
groups each result by the cell of the 2-D grid it falls in,

    cell(t0, t1) = (floor((t0 - o0) / s0), floor((t1 - o1) / s1)),
    extent(c0, c1) = [o0 + c0*s0, o0 + (c0+1)*s0) x [o1 + c1*s1, o1 + (c1+1)*s1),

plus optional group keys, and aggregates each group (count, sum, mean, min,
max). With ``s0 = s1 = 1`` it is Q7-1's count per pair of timestamps.

On a tuple (batch): the batch is reduced per (cell, key) with one Arrow
group-by and merged into the state of open cells (another group-by over
state + batch partials). Nothing is emitted on a batch.

On a punctuation: a cell is complete when no later tuple can fall in it. The
later tuples obey every punctuation seen so far:

* individual ``P(t0, L0)`` -- later tuples have ``t0 >= L0`` (a "slab");
* individual ``P(t1, L1)``;
* joint ``J(t0 < u, t1 < v)`` -- no later tuple has ``t0 < u`` and ``t1 < v``
  (a "box"); the boxes seen are kept as a Pareto staircase.

The covered region is a lower set, so a cell is complete iff its top corner
``(e0 - 1, e1 - 1)`` is covered: ``e0 <= L0`` or ``e1 <= L1`` or some box
has ``e0 <= u`` and ``e1 <= v``. Complete cells are emitted (sorted by cell,
then key) and purged. Joint punctuation closes a box of cells that neither
individual punctuation alone covers: that is why it lowers latency (Fig. 7-5).

Punctuation out: ``P(t0_end, L0 + 1)`` and ``P(t1_end, L1 + 1)`` when they
grow, and ``J(t0_end < u + 1, t1_end < v + 1)`` for each new box: every
later output cell is one that was not complete, so its end lies outside.

Keys whose cells have all been emitted are forgotten (key compaction,
:meth:`PairWindow._compact_keys`, the rule of
``WindowAggregate._compact_keys``): after an emission, once the key
dictionary holds ``KEYS_COMPACT_MIN`` keys and then each time it doubled,
when more than half of its keys are held by no open cell the dictionary is
rebuilt from the live keys and the state's key codes renumbered (one remap
array). A key that comes back gets a new code, so "then key" above is the
order of first appearance among the keys held since the last compaction.

Cost: O((state + batch) log) Arrow work per batch; O(state x boxes)
vectorized work per punctuation. State: one row per open (cell, key).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.limits import current_budget
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import Element, JointPunctuation, Punctuation
from oop.stream.timecol import parse_duration, time_arrow_type, time_values
from oop.aggregates import REGISTRY
from oop.window.aggregates import Agg
from oop.window.keys import KeyEncoder, compaction_remap

__all__ = ["PairWindow", "pair_window_reference"]

#: the lane ops a pair window's Acero merge implements, and the aggregates built on them
_OPS = ("rows", "sum", "min", "max")
_SUPPORTED = tuple(n for n, s in REGISTRY.items() if s.value_op in _OPS)
_CELL = ("__c0", "__c1", "__code")


#: key compaction (:meth:`PairWindow._compact_keys`) is first checked when the key
#: dictionary holds this many keys, then each time it doubled since the last check
KEYS_COMPACT_MIN = 4096


class PairWindow(Operator):
    """Aggregate per 2-D cell of two progressing attributes (see the module docstring)."""

    def __init__(
        self,
        aggs: Agg | Sequence[Agg],
        *,
        times: tuple[str, str] = ("ts", "ts_right"),
        sizes: tuple[int | str, int | str] = (1, 1),
        origins: tuple[int, int] = (0, 0),
        by: str | Sequence[str] = (),
        name: str = "pair_window",
    ) -> None:
        super().__init__(name)
        self.aggs = [aggs] if isinstance(aggs, Agg) else list(aggs)
        if not self.aggs:
            raise ConfigError(f"{name}: give at least one aggregate, e.g. agg.count()")
        for a in self.aggs:
            if a.spec.value_op not in _OPS:
                raise ConfigError(
                    f"{name}: aggregate {a.name!r} is not supported by pair windows; "
                    f"use one of {_SUPPORTED}"
                )
        if len(times) != 2 or times[0] == times[1]:
            raise ConfigError(f"{name}: times must name two different attributes, got {times!r}")
        self.times = tuple(times)
        self.size_config = tuple(sizes)
        self.origins = (int(origins[0]), int(origins[1]))
        self.by = [by] if isinstance(by, str) else list(by)
        self.sizes = (1, 1)
        self.enc = KeyEncoder(self.by) if self.by else None
        self.L = [np.iinfo(np.int64).min, np.iinfo(np.int64).min]
        self.boxes: list[tuple[int, int]] = []
        self.state: pa.Table | None = None
        self._state_bytes = 0
        self._keys_compact_at = KEYS_COMPACT_MIN  # see _compact_keys
        self.key_compactions = 0

    # ---- opening -----------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        for t in self.times:
            if t not in info.times:
                raise ConfigError(
                    f"{self.name}: {t!r} is not a progressing attribute of stream "
                    f"{info.name!r}; its progressing attributes are {sorted(info.times)}"
                )
        cols = [a.column for a in self.aggs if a.column]
        require_columns(info, [*self.by, *cols], self.name)
        self.sizes = tuple(parse_duration(s, info.times[t])  # type: ignore[assignment]
                           for s, t in zip(self.size_config, self.times))
        if min(self.sizes) <= 0:
            raise ConfigError(f"{self.name}: cell sizes must be > 0, got {self.size_config!r}")
        self._value_types = {a.column: info.schema.field(a.column).type
                             for a in self.aggs if a.column}
        fields = [info.schema.field(k) for k in self.by]
        out_times = {}
        for t in self.times:
            ty = time_arrow_type(info.schema, t)
            fields += [pa.field(f"{t}_start", ty), pa.field(f"{t}_end", ty)]
            out_times[f"{t}_end"] = info.times[t]
        fields += [pa.field(a.name, self._out_type(a)) for a in self.aggs]
        schema = pa.schema(fields)
        self.state = self._empty_state()
        self.budget = current_budget()  # cells charged to the plan's state budget (oop.limits)
        return StreamInfo(self.name, schema, out_times, f"{self.times[0]}_end")

    def _out_type(self, a: Agg) -> pa.DataType:
        return a.spec.output_type(self._value_types[a.column] if a.column else None)

    def _lanes(self) -> list[tuple[str, str, str]]:
        """(state column, source column or '', merge op) of every partial-aggregate lane."""
        lanes = [("__rows", "", "sum")]
        for i, a in enumerate(self.aggs):
            op = a.spec.value_op
            if op == "sum":
                lanes += [(f"__s{i}", a.column, "sum"), (f"__n{i}", a.column, "count")]
            elif op in ("min", "max"):
                lanes.append((f"__m{i}", a.column, op))
                if op == "max" and pa.types.is_floating(self._value_types[a.column]):
                    # Arrow's max skips NaN; the NaN rule makes it the greatest value
                    lanes.append((f"__x{i}", a.column, "nan_count"))
        return lanes

    def _empty_state(self) -> pa.Table:
        fields = [pa.field(c, pa.int64()) for c in _CELL] + [pa.field("__rows", pa.int64())]
        for i, a in enumerate(self.aggs):
            op = a.spec.value_op
            if op == "sum":
                fields += [pa.field(f"__s{i}", self._out_type(agg_sum(a))),
                           pa.field(f"__n{i}", pa.int64())]
            elif op in ("min", "max"):
                fields.append(pa.field(f"__m{i}", self._value_types[a.column]))
                if op == "max" and pa.types.is_floating(self._value_types[a.column]):
                    fields.append(pa.field(f"__x{i}", pa.int64()))
        return pa.schema(fields).empty_table()

    # ---- the batch path -----------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.state is not None
        cells = []
        for t, s, o in zip(self.times, self.sizes, self.origins):
            cells.append(np.floor_divide(time_values(batch, t, self.inputs[0].name) - o, s))
        code = self.enc.encode(batch) if self.enc is not None else np.zeros(batch.num_rows, np.int64)
        cols: dict[str, Any] = {"__c0": cells[0], "__c1": cells[1],
                                "__code": np.asarray(code, dtype=np.int64),
                                "__rows": np.ones(batch.num_rows, np.int64)}
        for name, src, op in self._lanes()[1:]:
            cols[name] = batch.column(src)
            if op == "nan_count":
                cols[name] = pc.fill_null(pc.cast(pc.is_nan(cols[name]), pa.int64()), 0)
        part = pa.table(cols)
        aggs = [(c, "sum" if op in ("count", "nan_count") else op) for c, _, op in self._lanes()]
        # count non-null values of the batch
        first = [(c, "sum" if op == "nan_count" else op) for c, _, op in self._lanes()]
        part = _group(part, first)
        self.budget.grow(self, self.name, self.state.nbytes + part.nbytes + (
            self.enc.nbytes() if self.enc is not None else 0), "pair-window cells")
        merged = pa.concat_tables([self.state, part.cast(self.state.schema)])
        self.state = _group(merged, aggs).cast(self.state.schema)
        self._state_bytes = self.state.nbytes
        return []

    # ---- the punctuation path -------------------------------------------
    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        out_p: list[Element] = []
        t0, t1 = self.times
        if isinstance(punctuation, Punctuation) and punctuation.attr in self.times:
            i = self.times.index(punctuation.attr)
            if punctuation.value > self.L[i]:
                self.L[i] = punctuation.value
                out_p.append(Punctuation(f"{punctuation.attr}_end", self.L[i] + 1))
        elif isinstance(punctuation, JointPunctuation) and set(punctuation.attrs) == {t0, t1}:
            b = dict(punctuation.bounds)
            if self._add_box(b[t0], b[t1]):
                out_p.append(JointPunctuation(((f"{t0}_end", b[t0] + 1),
                                               (f"{t1}_end", b[t1] + 1))))
        if not out_p:
            return []
        return [*self._emit(self._covered()), *out_p]

    def _add_box(self, u: int, v: int) -> bool:
        """Add box (u, v) to the Pareto staircase; False when an existing box dominates it."""
        if any(u <= bu and v <= bv for bu, bv in self.boxes):
            return False
        self.boxes = [(bu, bv) for bu, bv in self.boxes if not (bu <= u and bv <= v)]
        self.boxes.append((int(u), int(v)))
        return True

    def _ends(self) -> tuple[np.ndarray, np.ndarray]:
        assert self.state is not None
        c0 = self.state.column("__c0").to_numpy()
        c1 = self.state.column("__c1").to_numpy()
        return (self.origins[0] + (c0 + 1) * self.sizes[0],
                self.origins[1] + (c1 + 1) * self.sizes[1])

    def _covered(self) -> np.ndarray:
        e0, e1 = self._ends()
        mask = (e0 <= self.L[0]) | (e1 <= self.L[1])
        for u, v in self.boxes:
            mask |= (e0 <= u) & (e1 <= v)
        return mask

    def _emit(self, mask: np.ndarray) -> list[Element]:
        assert self.state is not None
        if not mask.any():
            return []
        done = self.state.filter(pa.array(mask))
        self.state = self.state.filter(pa.array(~mask))
        self._state_bytes = self.state.nbytes
        self.budget.report(self, self._state_bytes)
        done = done.sort_by([(c, "ascending") for c in _CELL])
        out = [self._finalize(done)]  # decoded before the codes may be renumbered
        if self.enc is not None and self.enc.n_codes >= self._keys_compact_at:
            self._compact_keys()
        return out

    def _compact_keys(self) -> None:
        """Forget the keys no open cell holds: when more than half of the dictionary is
        dead, rebuild it from the live keys (:meth:`KeyEncoder.compact`, first-appearance
        order kept) and renumber the state's ``__code`` column through one remap array.
        Checked once the dictionary holds ``KEYS_COMPACT_MIN`` keys and then each time it
        doubled since the last check. O(state + keys), amortized over the keys added."""
        assert self.enc is not None and self.state is not None
        n = self.enc.n_codes
        codes = self.state.column("__code").to_numpy()
        keep = np.unique(codes)
        remap, self._keys_compact_at = compaction_remap(keep, n, KEYS_COMPACT_MIN)
        if remap is None:
            return
        self.enc.compact(keep)
        i = self.state.schema.get_field_index("__code")
        self.state = self.state.set_column(i, "__code", pa.array(remap[codes], pa.int64()))
        self.key_compactions += 1

    def _finalize(self, done: pa.Table) -> pa.RecordBatch:
        assert self.output is not None
        cols: list[Any] = []
        if self.enc is not None:
            cols += list(self.enc.keys(done.column("__code").to_numpy()))
        for j, (s, o) in enumerate(zip(self.sizes, self.origins)):
            start = o + done.column(f"__c{j}").to_numpy() * s
            cols += [start, start + s]
        for i, a in enumerate(self.aggs):
            if a.spec.counts_rows:
                cols.append(done.column("__rows"))
            elif a.spec.exact_sum:
                cols.append(done.column(f"__s{i}"))
            elif a.spec.from_sum:  # mean
                cols.append(pc.divide(pc.cast(done.column(f"__s{i}"), pa.float64()),
                                      pc.cast(done.column(f"__n{i}"), pa.float64())))
            elif f"__x{i}" in done.column_names:  # a float max: NaN when the cell holds one
                m = done.column(f"__m{i}")
                cols.append(pc.if_else(pc.greater(done.column(f"__x{i}"), 0),
                                       pa.scalar(float("nan"), m.type), m))
            else:
                cols.append(done.column(f"__m{i}"))
        arrays = [pa.array(c) if isinstance(c, np.ndarray) else c for c in cols]
        arrays = [pa.concat_arrays(c.chunks) if isinstance(c, pa.ChunkedArray) else c
                  for c in arrays]
        arrays = [a.cast(f.type) for a, f in zip(arrays, self.output.schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.output.schema)

    def flush(self) -> list[Element]:
        assert self.state is not None
        return self._emit(np.ones(self.state.num_rows, dtype=bool))

    # ---- state ----------------------------------------------------------
    def state_size(self) -> StateSize:
        return StateSize(self.state.num_rows if self.state is not None else 0, self._state_bytes)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "state": self.state, "L": list(self.L),
                "boxes": list(self.boxes), "enc": None if self.enc is None else self.enc.snapshot(),
                "keys_compact": (self._keys_compact_at, self.key_compactions)}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.state = state["state"]
        self._state_bytes = self.state.nbytes
        self.L = list(state["L"])
        self.boxes = list(state["boxes"])
        self._keys_compact_at, self.key_compactions = state.get(
            "keys_compact", (KEYS_COMPACT_MIN, 0))
        if state["enc"] is not None:  # plain data (no pickle): durable checkpoints load it safely
            self.enc = KeyEncoder(self.by)
            self.enc.restore(state["enc"])

    def _check(self) -> None:
        assert self.state is not None
        keys = self.state.select(list(_CELL)).group_by(list(_CELL)).aggregate([])
        assert keys.num_rows == self.state.num_rows, "a (cell, key) is held twice"
        assert not self._covered().any(), "a complete cell is still held"
        for a, b in self.boxes:
            assert sum(1 for u, v in self.boxes if a <= u and b <= v) == 1, "staircase not Pareto"


def agg_sum(a: Agg) -> Agg:
    """The sum aggregate over ``a``'s column (the partial of sum and mean)."""
    from oop.window import aggregates as agg

    return agg.sum(a.column)


def _group(table: pa.Table, aggs: list[tuple[str, str]]) -> pa.Table:
    """Group ``table`` by (cell, key) and reduce each lane, keeping the lane names."""
    g = table.group_by(list(_CELL), use_threads=False).aggregate(
        [(c, op, pc.CountOptions(mode="only_valid")) if op == "count" else (c, op)
         for c, op in aggs])
    names = {f"{c}_{op}": c for c, op in aggs}
    g = g.rename_columns([names.get(n, n) for n in g.column_names])
    return g.select([*_CELL, *[c for c, _ in aggs]])


def pair_window_reference(
    rows: Sequence[dict[str, Any]],
    aggs: Sequence[Agg],
    *,
    times: tuple[str, str],
    sizes: tuple[int, int],
    origins: tuple[int, int] = (0, 0),
    by: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The pair-window result computed tuple at a time from all rows (the oracle)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        c = tuple((r[t] - o) // s for t, s, o in zip(times, sizes, origins))
        groups.setdefault((c, tuple(r[k] for k in by)), []).append(r)
    out = []
    for (c, key), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
        row: dict[str, Any] = dict(zip(by, key))
        for t, ci, s, o in zip(times, c, sizes, origins):
            row[f"{t}_start"], row[f"{t}_end"] = o + ci * s, o + (ci + 1) * s
        for a in aggs:
            st = a.init()  # the registry's scalar reference (NaN rule included)
            for r in rs:
                st = a.update(st, r[a.column] if a.column else None)
            row[a.name] = a.spec.to_output(a.finalize(st))
        out.append(row)
    return out
