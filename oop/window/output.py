"""Output rows of the WID / Paned-WID window operator: cells -> one Arrow batch (004 §6.1.3.2).

What it computes: from the emitted cells ``(window id, group code, lanes)``
ordered by ``(wid, code)``, the output batch of
:class:`~oop.window.aggregate.WindowAggregate`: the key columns (decoded from
the codes), ``window_start`` / ``window_end`` (``kind.extents(wid)``), one
column per aggregate finalized from its lanes (mean = shifted sum / count +
shift, var/std from the shifted sums (:func:`~oop.aggregates.moments.variance_from_sums`),
min/max/first/last decoded from value ranks, int64 sums checked exact), the
holistic aggregates from the value tables (quantiles, distinct counts, heavy
hitters, UDAFs), ``wid`` when asked, and the late rule's flag columns
(:meth:`~oop.window.late.LateRule.flag_columns`).

Punctuation rule: none here -- the operator decides which windows a
punctuation emits and purges (:mod:`oop.window.aggregate`); this mixin only
assembles their rows. Cost O(output rows) vectorized, plus for holistic
aggregates the table reads of :mod:`oop.window.multiset`.

:class:`WindowOutput` is a mixin of the operator: it reads the operator's
state (``aggs``, ``by``, ``enc``, ``schema_in``, ``out_schema``, ``kind``,
``time_type``, ``emit_wid``, ``rule``, ``ring``, ``units``, ``holistic``,
``value_enc``, ``value_ranks``, ``sum_max``, ``name``) and keeps two caches
of its own (the key-value table of Paned-WID's fused emission and the value
ranks of heavy-hitter columns), which the operator resets on restore.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.aggregates.moments import variance_from_sums
from oop.window.aggregates import Agg
from oop.window.keys import sortable
from oop.window.multiset import Multiset, group_bounds, quantiles_from_counts
from oop.window.values import (NO_NULLS, SHIFTED_SUM, check_exact_sum, int_valued, lane_array,
                               moment_sum_key, shifted_sum)
from oop.window.udaf import is_compiled as udaf_is_compiled, udaf_window, udaf_windows

if TYPE_CHECKING:
    from oop.window.cells import CellStore
    from oop.window.evaluator import Evaluator
    from oop.window.keys import KeyEncoder, ValueRanks
    from oop.window.kinds import WindowKind
    from oop.window.late import LateRule

__all__ = ["WindowOutput", "as_time_array", "lut_array"]


def lut_array(keys: pa.Array) -> np.ndarray:
    """The values of an int64 key array without nulls as the emission kernel gets them
    (read-only, like every zero-copy view of Arrow memory)."""
    return np.asarray(keys.to_numpy(), np.int64)


class WindowOutput:
    """Builds the window operator's output batches (see the module docstring)."""

    # the operator's state this mixin reads (set at the operator's open)
    name: str
    aggs: Sequence[Agg]
    by: list[str]
    enc: "KeyEncoder"
    schema_in: pa.Schema
    out_schema: pa.Schema
    kind: "WindowKind"
    time_type: pa.DataType
    emit_wid: bool
    rule: "LateRule"
    ring: "CellStore | None"
    units: "Evaluator"
    holistic: dict[tuple[str, str], Multiset]
    value_enc: dict[str, "KeyEncoder"]
    value_ranks: dict[str, "ValueRanks"]
    sum_max: dict[str, int]
    _rank_cache: dict[str | None, np.ndarray]
    _lut_n: Any
    _lut_ok: bool | None

    def _key_lut(self) -> np.ndarray | None:
        """Key value of every code when Paned-WID's fused emission can write the key column.

        Only for one int64 key column without nulls, a dense ring, and no
        holistic aggregates (those need the codes). Rebuilt (O(codes), through
        :meth:`KeyEncoder.keys`) only when new keys appeared.
        """
        if not self._lut_wanted():
            return None
        n = self.enc.n_codes
        if getattr(self, "_lut_n", None) != n:
            arr = self.enc.keys(np.arange(n, dtype=np.int64))[0]
            self._lut = None if arr.null_count else lut_array(arr)
            self._lut_n = n
        return self._lut

    def _lut_wanted(self) -> bool:
        """Whether the emission gets the key values (:meth:`_key_lut`): one int64 key column
        and no holistic aggregate. Fixed by the query."""
        ok = getattr(self, "_lut_ok", None)
        if ok is None:
            ok = self._lut_ok = (len(self.by) == 1 and not any(a.holistic for a in self.aggs)
                                 and pa.types.is_int64(self.schema_in.field(self.by[0]).type))
        return ok

    def _build(self, parts: list[tuple[int, np.ndarray, dict]], revision: bool) -> pa.RecordBatch:
        codes = np.concatenate([p[1] for p in parts])
        wid = np.concatenate([np.full(p[1].shape[0], p[0], np.int64) for p in parts])
        lanes = {k: np.concatenate([p[2][k] for p in parts]) for k in parts[0][2]}
        return self._build_arrays(wid, codes, lanes, revision, parts)

    def _build_arrays(self, wid: np.ndarray | None, codes: np.ndarray, lanes: dict, revision: bool,
                      parts: list | None = None,
                      extents: tuple[np.ndarray, np.ndarray] | None = None,
                      key_values: bool = False) -> pa.RecordBatch:
        """One output batch from cells ordered by (wid, code). Cost: O(rows) vectorized.

        ``extents``: the cells' (window_start, window_end) when the caller has
        them (Paned-WID's fused kernel); ``wid`` may then be None (derived from
        ``window_end`` only when holistic aggregates or ``emit_wid`` need it).
        ``key_values``: ``codes`` already holds the (single, int64) key column.
        """
        hol = self._any_holistic
        if extents is not None:
            start, end = extents
            if wid is None and (self.emit_wid or hol):
                wid = (end - self.kind.o) // self.kind.s - 1  # type: ignore[attr-defined]
        else:
            assert wid is not None
            start, end = self.kind.extents(wid)
        if parts is None and hol:
            assert wid is not None
            b = np.flatnonzero(np.r_[True, wid[1:] != wid[:-1], True])
            parts = [(int(wid[x]), codes[x:y], None) for x, y in zip(b[:-1], b[1:])]
        arrays: list[pa.Array] = [pa.array(codes)] if key_values else list(self.enc.keys(codes))
        tt = self.time_type
        arrays.append(as_time_array(start, tt))
        arrays.append(as_time_array(end, tt))
        for a in self.aggs:
            arrays.append(self._finalize(a, codes, wid, lanes, parts))
        if self.emit_wid:
            arrays.append(pa.array(wid))
        arrays += self.rule.flag_columns(codes.shape[0], revision)
        return pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)

    @cached_property
    def _any_holistic(self) -> bool:
        """Whether some aggregate is holistic (fixed by the query)."""
        return any(a.holistic for a in self.aggs)

    @cached_property
    def _agg_types(self) -> dict[str, tuple[pa.DataType, pa.DataType | None, float]]:
        """Per aggregate (by output name): its output type, its input column's type (None
        without a column) and the scale its lane values are divided by (``10**scale`` for a
        decimal column, whose lanes hold unscaled values; else 1.0). Fixed at open; read by
        every emission instead of two schema look-ups by name per aggregate."""
        out = {}
        for a in self.aggs:
            ct = self.schema_in.field(a.column).type if a.column else None
            scale = 10.0 ** ct.scale if ct is not None and pa.types.is_decimal(ct) else 1.0
            out[a.name] = (self.out_schema.field(a.name).type, ct, scale)
        return out

    def _finalize(self, a: Agg, codes: np.ndarray, wid: np.ndarray, lanes: dict,
                  parts: list) -> pa.Array:
        sp, c = a.spec, a.column
        f = sp.value_op
        typ, ct, scale = self._agg_types[a.name]
        if sp.counts_rows:
            return pa.array(lanes[("rows", None)].astype(np.int64, copy=False))
        if a.holistic:
            return self._finalize_holistic(a, parts)
        nn = lanes[("nn", c)]
        # an inactive nn lane is the rows lane (no null seen): every emitted cell has a value
        null = NO_NULLS if nn is lanes[("rows", None)] else nn == 0
        assert ct is not None
        if sp.from_sum and c in self.sum_max:
            check_exact_sum(self.name, c, lanes[("rows", None)], self.sum_max[c], typ)
        if sp.exact_sum:
            return lane_array(lanes[("sum", c)], null, typ)
        if f in ("sum", "sumsq"):  # mean, var, std: from the shifted sum
            assert self.ring is not None
            shift = self.ring.shift.get(c, 0)  # type: ignore[arg-type]
            sk = moment_sum_key(c, ct) if f == "sumsq" else ("sum", c)
            s = lanes[sk]
            sd = shifted_sum(s, nn, shift, s.dtype == np.float64
                             and (int_valued(ct) or sk[0] == SHIFTED_SUM))
        if f == "sum":  # mean
            with np.errstate(invalid="ignore", divide="ignore"):
                return lane_array((sd / nn + shift) / scale, null, typ)
        if f == "sumsq":  # var, std
            v = variance_from_sums(nn, sd, lanes[("sumsq", c)]) / (scale * scale)
            return lane_array(sp.from_variance(v), nn < 2, typ)  # type: ignore[attr-defined]
        if sp.selective:
            if c in self.value_ranks:
                return self.value_ranks[c].values(lanes[(f, c)], null)
            return lane_array(lanes[(f, c)], null, typ)
        raise AssertionError(f)  # pragma: no cover

    def _finalize_holistic(self, a: Agg, parts: list) -> pa.Array:
        sp = a.spec
        store = "code" if sp.counts_values else "num"
        ms = self.holistic[(store, a.column)]  # type: ignore[index]
        typ = self.out_schema.field(a.name).type
        q = sp.quantile_of(a)
        # the evaluator's all-windows-in-one-call shortcuts (Paned-WID); None: window by window
        u, update = self.units, self.rule.revises
        if q is not None:
            res = u.quantiles(ms, parts, q)
            if res is not None:
                return lane_array(res[0], ~res[1], typ)
        if sp.store_op == "distinct" and not update:
            # from a running multiplicity table (revisions: below)
            d = u.distinct(ms, parts, a.column, self.enc.n_codes)
            if d is not None:
                return pa.array(d)
        if sp.store_op == "udaf" and udaf_is_compiled(a):
            res = udaf_windows(a, parts, ms, u)
            if res is not None:
                return res
        if sp.store_op == "top_k" and not update:
            h = u.heavy(ms, parts, a.column, self.enc.n_codes, self._value_rank(a.column),
                        int(a.k))  # type: ignore[arg-type]
            if h is not None:
                return self._heavy_array(a, *h)
        chunks = []
        for w, codes, _ in parts:
            ulo, uhi = self.units.window_panes(w)
            c, v, n = ms.select(ulo, uhi)
            gcodes, bounds = group_bounds(c)
            pos = np.searchsorted(gcodes, codes)
            present = (pos < gcodes.shape[0]) & (gcodes[np.minimum(pos, max(gcodes.shape[0] - 1, 0))] == codes) \
                if gcodes.shape[0] else np.zeros(codes.shape[0], bool)
            if q is not None:
                qs = quantiles_from_counts(v, n, bounds, q) if gcodes.shape[0] else np.zeros(0)
                vals = np.zeros(codes.shape[0])
                vals[present] = qs[pos[present]]
                chunks.append(lane_array(vals, ~present, typ))
            elif sp.store_op == "distinct":
                d = np.diff(bounds)
                vals = np.zeros(codes.shape[0], np.int64)
                vals[present] = d[pos[present]]
                chunks.append(pa.array(vals))
            elif sp.store_op == "top_k":
                chunks.append(self._heavy(a, codes, c, v, n))
            else:  # udaf
                chunks.append(self._udaf(a, codes, w, ms))
        return pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]

    def _heavy(self, a: Agg, codes: np.ndarray, c: np.ndarray, v: np.ndarray, n: np.ndarray) -> pa.Array:
        m = np.isin(c, codes)  # PA: the unit may hold partitions not emitted now
        c, v, n = c[m], v[m], n[m]
        # ties between equal counts: by the value itself (not its code), so order cannot matter
        rank = self._value_rank(a.column)
        order = np.lexsort((rank[v], -n, c))
        c, v, n = c[order], v[order], n[order]
        gcodes, bounds = group_bounds(c)
        rank = np.arange(c.shape[0]) - np.repeat(bounds[:-1], np.diff(bounds)) if c.shape[0] else c
        keep = rank < int(a.k)  # type: ignore[arg-type]
        c, v, n = c[keep], v[keep], n[keep]
        # offsets per output code (codes are sorted within one window)
        counts = np.zeros(codes.shape[0], np.int64)
        pos = np.searchsorted(codes, c)
        np.add.at(counts, pos, 1)
        return self._heavy_array(a, np.concatenate(([0], np.cumsum(counts))), v, n)

    def _value_rank(self, col: str | None) -> np.ndarray:
        """Sort position of every value code of ``col`` (heavy hitters break count ties by
        value). Recomputed (one Arrow sort of the distinct values) only when values were added."""
        enc = self.value_enc[col]  # type: ignore[index]
        hit = self._rank_cache.get(col)
        if hit is None or hit.shape[0] != enc.n_codes:
            kt = sortable(enc.key_table().column(0))  # the values, not dictionary indices
            hit = np.empty(kt.length(), np.int64)
            hit[np.asarray(pc.sort_indices(kt).to_numpy(), np.int64)] = np.arange(kt.length())
            self._rank_cache[col] = hit
        return hit

    def _heavy_array(self, a: Agg, offsets: np.ndarray, v: np.ndarray, n: np.ndarray) -> pa.Array:
        """The heavy-hitters column: per cell ``[offsets[i], offsets[i+1])`` of (value code, count)."""
        typ = self.out_schema.field(a.name).type
        values = (self.value_enc[a.column].keys(v)[0] if v.shape[0]  # type: ignore[index]
                  else pa.array([], typ.value_type.field("value").type))
        struct = pa.StructArray.from_arrays([values, pa.array(n, pa.int64())], fields=list(typ.value_type))
        return pa.ListArray.from_arrays(pa.array(np.asarray(offsets, np.int32)), struct, type=typ)

    def _udaf(self, a: Agg, codes: np.ndarray, w: int, ms: Multiset) -> pa.Array:
        return udaf_window(a, codes, w, ms, self.units)


def as_time_array(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """int64 ``values`` as an Arrow array of the time column's type ``typ`` (timestamps: a view)."""
    arr = pa.array(values, pa.int64())
    if pa.types.is_int64(typ):
        return arr
    return arr.view(typ) if pa.types.is_timestamp(typ) else arr.cast(typ)
