"""Slide-by-tuple windows with the bins algorithm (004 §5.1.5 Eq. 5.10-5.15, §6.1.4).

What it computes: RANGE ``r`` in event time, SLIDE ``n`` rows. Every
``n``-th tuple to arrive (the n-th, 2n-th, ...) with event time ``w``
defines window ``w`` = the tuples with ``w - r < t <= w``; output rows
``(keys, window_start = w - r + 1, window_end = w + 1, aggregates)`` per
group present in the extent. This window is forward-context aware (FCA,
§6.1.2): which ids a tuple belongs to depends on tuples not seen yet, so
``wids()`` only gives the candidate range ``[t, t + r)``.

The bins algorithm (§6.1.4.1, Fig. 6-5/6-6/6-7) keeps no tuples: every
tuple ``t`` (time ``s``) ensures a *start bin* ``S_s`` (id ``s``) and an
*end bin* ``E_s`` (id ``s + r``); a bin ``b`` holds the partial aggregate
of the tuples seen so far with ``b - r < t <= b``. A new bin is initialized
from its predecessor (the largest existing bin id below it: no seen tuple
can distinguish the two, because every seen tuple created bins at ``t`` and
``t + r``), then the tuple updates every bin in ``[s, s + r)``. Bins are
per group (a ``C``-wide row of every lane); ids live in a sorted array with
a slot indirection so inserting a bin moves only ids.

Implementation: a numba pass plans the batch (bin insertions, slot
allocation, and a log of "copy row a -> b" / "update slot a with tuple i"
steps, in arrival order); a second numba pass replays the log on each lane.
On a punctuation ``P(time, v)``: window bins with id ``< v`` are complete;
they are emitted, and every bin below ``v`` is freed except the largest
(it is the predecessor of future bins); groups that no retained bin holds
are forgotten (key compaction, :meth:`SlideByTupleAggregate._compact_keys`).
Forwards ``P(window_end, v + 1)``.
Holistic aggregates are not supported here (a ConfigError says so).
Cost per tuple: O(log B + bins in [s, s+r)) lane updates; state: O(bins x
groups) partial aggregates, where bins ~ 2 x distinct times in the open
range.
"""

from __future__ import annotations

from typing import Any, Sequence

import numba as nb
import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.metrics import StateSize
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import time_values
from oop.window import aggregate as _aggregate
from oop.window.aggregate import SELECT, WindowAggregate
from oop.window.aggregates import Agg
from oop.window.kinds import SlideByTuple
from oop.window.late import LateRule
from oop.window.values import held_ranks, lane_input, remap_ranks
from oop.window.kernels import _lt, nan_max as _nan_max, nan_min as _nan_min

__all__ = ["SlideByTupleAggregate", "sbt_plan", "sbt_replay"]

_OPS = {"rows": 0, "nn": 1, "sum": 2, "sumsq": 3, "min": 4, "max": 5, "first": 6, "last": 7}

#: most copy/update steps one :func:`sbt_plan` call logs (17 bytes each) before it is replayed
LOG_BUDGET = 1 << 22
_NO_NULLS = np.zeros(0, np.uint8)
_NO_TIMES = np.zeros(0, np.int64)
#: the values of a counting lane (rows, nn): never read
_NO_VALUES = np.zeros(0, np.int64)


@nb.njit(cache=True)
def _search(ids, nbins, x):
    lo, hi = 0, nbins
    while lo < hi:
        mid = (lo + hi) >> 1
        if ids[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@nb.njit(cache=True, inline="always")
def _grow_copy(k2, a2, b2, log_k, log_a, log_b, nlog):
    """The first ``nlog`` log entries into the grown arrays, as a loop (a slice copy
    compiles ~1 s longer in numba)."""
    for j in range(nlog):
        k2[j] = log_k[j]
        a2[j] = log_a[j]
        b2[j] = log_b[j]


@nb.njit(cache=True)
def sbt_plan(times, row0, n_slide, ids, slots, is_win, nbins, free, nfree, next_slot, r,
             start=0, max_log=1 << 62):
    """Plan rows ``start ..`` of a batch: insert bins, allocate slots, and log copy/update steps.

    Stops before the first row after which the log holds ``max_log`` steps or more (each row
    logs one update per bin in its RANGE, so the log of a whole batch can outgrow memory);
    the caller replays that log and calls again from the returned row.
    Returns (nbins, nfree, next_slot, log_kind, log_a, log_b, nlog, stop). Needs
    capacity for ``nbins`` plus the batch's new bins in ``ids``/``slots`` and
    free slots or fresh ones in ``is_win`` (``SlideByTupleAggregate._new_bins``
    counts them exactly).
    """
    cap = 4 * times.shape[0] + 16
    log_k = np.empty(cap, np.int8)
    log_a = np.empty(cap, np.int64)
    log_b = np.empty(cap, np.int64)
    nlog = 0
    for i in range(start, times.shape[0]):
        if nlog >= max_log and i > start:
            return nbins, nfree, next_slot, log_k, log_a, log_b, nlog, i
        s = times[i]
        for which in range(2):
            target = s if which == 0 else s + r
            pos = _search(ids, nbins, target)
            if pos < nbins and ids[pos] == target:
                continue
            if nfree > 0:
                nfree -= 1
                sl = free[nfree]
            else:
                sl = next_slot
                next_slot += 1
            src = slots[pos - 1] if pos > 0 else -1
            if nlog + 1 > cap:
                cap *= 2
                k2 = np.empty(cap, np.int8); a2 = np.empty(cap, np.int64); b2 = np.empty(cap, np.int64)
                _grow_copy(k2, a2, b2, log_k, log_a, log_b, nlog)
                log_k, log_a, log_b = k2, a2, b2
            log_k[nlog] = 0
            log_a[nlog] = src
            log_b[nlog] = sl
            nlog += 1
            for p in range(nbins, pos, -1):
                ids[p] = ids[p - 1]
                slots[p] = slots[p - 1]
            ids[pos] = target
            slots[pos] = sl
            is_win[sl] = False
            nbins += 1
        if (row0 + i + 1) % n_slide == 0:
            is_win[slots[_search(ids, nbins, s)]] = True
        a = _search(ids, nbins, s)
        b = _search(ids, nbins, s + r)
        if nlog + (b - a) > cap:
            while nlog + (b - a) > cap:
                cap *= 2
            k2 = np.empty(cap, np.int8); a2 = np.empty(cap, np.int64); b2 = np.empty(cap, np.int64)
            _grow_copy(k2, a2, b2, log_k, log_a, log_b, nlog)
            log_k, log_a, log_b = k2, a2, b2
        for p in range(a, b):
            log_k[nlog] = 1
            log_a[nlog] = slots[p]
            log_b[nlog] = i
            nlog += 1
    return nbins, nfree, next_slot, log_k, log_a, log_b, nlog, times.shape[0]


@nb.njit(cache=True)
def sbt_replay(acc, tacc, ident, tident, log_k, log_a, log_b, nlog, C, codes, vals, times,
               valid, op, shift):
    """Apply a planned log to one lane (``op`` as in ``_OPS``)."""
    allv = valid.shape[0] == 0
    has_t = tacc.shape[0] > 0
    for e in range(nlog):
        if log_k[e] == 0:
            dst = log_b[e] * C
            src = log_a[e]
            for c in range(C):
                if src < 0:
                    acc[dst + c] = ident
                    if has_t:
                        tacc[dst + c] = tident
                else:
                    acc[dst + c] = acc[src * C + c]
                    if has_t:
                        tacc[dst + c] = tacc[src * C + c]
            continue
        i = log_b[e]
        j = log_a[e] * C + codes[i]
        if op == 0:
            acc[j] += 1
            continue
        if not (allv or valid[i]):
            continue
        if op == 1:
            acc[j] += 1
        elif op == 2:
            acc[j] += vals[i]
        elif op == 3:
            d = vals[i] - shift
            acc[j] += d * d
        elif op == 4:  # NaN is the greatest value and min's float identity (docs/semantics.md)
            acc[j] = _nan_min(vals[i], acc[j])
        elif op == 5:
            acc[j] = _nan_max(vals[i], acc[j])
        elif op == 6:
            if times[i] < tacc[j] or (times[i] == tacc[j] and _lt(vals[i], acc[j])):
                tacc[j] = times[i]
                acc[j] = vals[i]
        else:
            if times[i] > tacc[j] or (times[i] == tacc[j] and _lt(acc[j], vals[i])):
                tacc[j] = times[i]
                acc[j] = vals[i]


class SlideByTupleAggregate(WindowAggregate):
    """Window aggregation over :class:`~oop.window.kinds.SlideByTuple` (see module docstring)."""

    def __init__(self, kind: SlideByTuple, aggs: Agg | Sequence[Agg], *, method: str = "auto",
                 **kw: Any) -> None:
        if not isinstance(kind, SlideByTuple):
            raise ConfigError(f"SlideByTupleAggregate needs a SlideByTuple kind, not {kind!r}")
        name = kw.get("name", "window")
        if method == "paned":
            raise ConfigError(f"{name}: panes do not help slide-by-tuple windows (one tuple per "
                              "pane, 004 §6.2); use method='wid' or 'auto'")
        late = kw.get("late")
        LateRule.refuse_kind(name, None if late is None else LatePolicy.parse(late), kind)
        super().__init__(_AsSliding(kind), aggs, method="wid", **kw)
        if any(a.holistic for a in self.aggs):
            raise ConfigError(
                f"{name}: holistic aggregates ({[a.name for a in self.aggs if a.holistic]}) are not "
                "supported on slide-by-tuple windows; the bins keep bounded partial aggregates only"
            )
        self.kind_config = kind

    def infer_output(self, inputs: Any) -> Any:
        out = super().infer_output(inputs)
        self.kind = self.kind_config.resolve(self.unit)
        self.r = self.kind.r
        cap = 1024
        self.ids = np.empty(cap, np.int64)
        self.slots = np.empty(cap, np.int64)
        self.nbins = 0
        self.is_win = np.zeros(cap, np.bool_)
        self.free = np.empty(cap, np.int64)
        self.nfree = 0
        self.next_slot = 0
        self.S = 256  # slot capacity of the lanes
        self.C = 16
        self.rows_seen = 0
        self.live_cells = 0
        self.larr: dict = {}
        self.ltarr: dict = {}
        self.shift: dict[str, Any] = {}  # column -> variance shift (store.lane_input)
        self._alloc(self.S, self.C)
        return out

    def _alloc(self, S: int, C: int) -> None:
        for li in self.lanes:
            new = np.full(S * C, li.identity(), li.dtype)
            old = self.larr.get(li.key)
            if old is not None:
                new.reshape(S, C)[: self.S, : self.C] = old.reshape(self.S, self.C)
            self.larr[li.key] = new
            if li.lane.op in ("first", "last"):
                tid = np.iinfo(np.int64).max if li.lane.op == "first" else np.iinfo(np.int64).min
                newt = np.full(S * C, tid, np.int64)
                oldt = self.ltarr.get(li.key)
                if oldt is not None:
                    newt.reshape(S, C)[: self.S, : self.C] = oldt.reshape(self.S, self.C)
                self.ltarr[li.key] = newt
        self.S, self.C = S, C

    def _new_bins(self, times: np.ndarray) -> int:
        """How many bins a batch inserts: its distinct start (``t``) and end (``t + r``) ids
        that are not bins yet (the exact count :func:`sbt_plan` needs room for)."""
        cand = np.unique(np.concatenate([times, times + self.r]))
        ids = self.ids[: self.nbins]
        pos = np.searchsorted(ids, cand)
        present = np.zeros(cand.shape[0], np.bool_)
        inside = pos < self.nbins
        present[inside] = ids[pos[inside]] == cand[inside]
        return int(cand.shape[0] - np.count_nonzero(present))

    def _reserve(self, new_bins: int, n_codes: int) -> None:
        need = self.nbins + new_bins + 1
        if need > self.ids.shape[0]:
            cap = max(need, 2 * self.ids.shape[0])
            for attr in ("ids", "slots", "free"):
                a = np.empty(cap, np.int64)
                old = getattr(self, attr)
                a[: old.shape[0]] = old
                setattr(self, attr, a)
            w = np.zeros(cap, np.bool_)
            w[: self.is_win.shape[0]] = self.is_win
            self.is_win = w
        S, C = self.S, self.C
        while S < self.next_slot + max(0, new_bins - self.nfree) + 1:
            S *= 2
        while C < n_codes:
            C *= 2
        if (S, C) != (self.S, self.C):
            self._check_state_limit(S, C)
            self._alloc(S, C)
        if self.is_win.shape[0] < S:
            w = np.zeros(S, np.bool_)
            w[: self.is_win.shape[0]] = self.is_win
            self.is_win = w

    def _check_state_limit(self, S: int, C: int) -> None:
        """Raise :class:`StateLimitError` before allocating lanes of ``S`` bins x ``C`` group
        columns when the operator's state would pass its ``max_state_bytes`` or the plan's
        state budget (:mod:`oop.limits`: by default half of this process's memory limit)."""
        L = len(self.lanes) + len(self.ltarr)
        nbytes = 8 * S * C * L
        rest = self.state_size().bytes - 8 * self.S * self.C * L
        self.budget.grow(
            self, self.name, rest + nbytes,
            f"slide-by-tuple lanes of {S} bin slots x {C} group columns x {L} lanes: the bins "
            f"algorithm (004 §6.1.4) keeps one partial aggregate per (bin, group), about two "
            f"bins per distinct event time in RANGE plus the disorder; a coarser time unit, a "
            f"shorter RANGE or a time-sliding window (Sliding) also help",
            self.max_state_bytes)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.time, self.inputs[0].name)
        batch, times, _ = self.rule.split(self, batch, times, self.lwm, self.time)
        n = batch.num_rows
        if n == 0:
            return []
        codes = self.enc.encode(batch)
        self._reserve(self._new_bins(times), self.enc.n_codes)
        cols = self._lane_columns(batch)
        inputs = [self._replay_input(li, cols) for li in self.lanes]
        start = 0
        while start < n:  # the log of one plan call stays within LOG_BUDGET steps
            (self.nbins, self.nfree, self.next_slot, lk, la, lb, nlog, start) = sbt_plan(
                times, self.rows_seen, self.kind.slide_rows, self.ids, self.slots, self.is_win,
                self.nbins, self.free, self.nfree, self.next_slot, self.r, start, LOG_BUDGET)
            for li, (vals, valid, shift) in zip(self.lanes, inputs):
                op = li.lane.op  # a shifted sum lane (values.LaneInfo.shifted) folds as a sum
                tacc = self.ltarr.get(li.key, _NO_TIMES)
                tid = np.iinfo(np.int64).max if op == "first" else np.iinfo(np.int64).min
                sbt_replay(self.larr[li.key], tacc, li.dtype(li.identity()), tid, lk, la, lb,
                           nlog, self.C, codes, vals, times, valid, _OPS[op], shift)
        self.rows_seen += n
        self._count_live()
        return []

    def _replay_input(self, li: Any, cols: dict) -> tuple[np.ndarray, np.ndarray, float]:
        """(values, validity, shift) lane ``li`` folds for this batch (see ``lane_input``).

        The counting lanes read no value (``sbt_replay``'s ops 0 and 1): the row count
        none, the non-null count ``nn`` only the validity -- its column's values are not
        cast to its int64 count (NaN / infinite floats have no int64 value)."""
        col = li.key[1]
        if col is None:
            return _NO_VALUES, _NO_NULLS, 0.0
        cv = cols[col]
        if li.lane.op == "nn":
            return _NO_VALUES, cv.valid, 0.0
        vals, shift = lane_input(li, cv, self.shift)
        return vals, cv.valid, shift

    def _count_live(self) -> None:
        rows = self.larr[("rows", None)].reshape(self.S, self.C)
        self.live_cells = int(np.count_nonzero(rows[self.slots[: self.nbins]]))

    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        if not isinstance(p, Punctuation) or p.attr != self.time or p.value <= self.lwm:
            return []
        self.lwm = p.value
        out = self._emit_below(p.value)
        out.append(Punctuation("window_end", p.value + 1))
        return out

    def _emit_below(self, v: int) -> list[Element]:
        k = int(np.searchsorted(self.ids[: self.nbins], v))  # bins [0, k) are complete
        if k == 0:
            return []
        ids, slots = self.ids[:k], self.slots[:k]
        win = self.is_win[slots]
        parts = []
        for w, sl in zip(ids[win], slots[win]):
            rows = self.larr[("rows", None)][sl * self.C: sl * self.C + self.enc.n_codes]
            codes = np.flatnonzero(rows)
            if codes.size == 0:
                continue
            j = sl * self.C + codes
            lanes = {key: a[j] for key, a in self.larr.items()}
            for key, a in self.ltarr.items():
                lanes[("t:" + key[0], key[1])] = a[j]
            parts.append((int(w), codes, lanes))
        # free every complete bin except the largest (the predecessor of future bins)
        drop = slots[: k - 1]
        self.is_win[slots] = False
        self.free[self.nfree:self.nfree + drop.shape[0]] = drop
        self.nfree += drop.shape[0]
        self.ids[: self.nbins - (k - 1)] = self.ids[k - 1: self.nbins].copy()
        self.slots[: self.nbins - (k - 1)] = self.slots[k - 1: self.nbins].copy()
        self.nbins -= k - 1
        self._count_live()
        out: list[Element] = []
        if parts:
            self.ring = None
            out.append(self._build(parts, revision=False))
        if self.enc.n_codes >= self._keys_compact_at:  # after the codes above became keys
            self._compact_keys()
        self.budget.report(self, self.state_size().bytes)
        return out

    def _compact_keys(self) -> None:
        """Forget the groups no retained bin holds (every window that held them is out).

        A future bin starts as a copy of its predecessor, a retained bin, so a
        group with no tuple in any retained bin can only come back with a new
        tuple: it gets a new code then. Same schedule as
        :meth:`WindowAggregate._compact_keys` (when the dictionary doubled;
        compacts when more than half of it is dead); the lanes of the retained
        bins keep the live group columns, renumbered, and the group axis
        shrinks. O(retained bins x live groups x lanes) per compaction.
        """
        n = self.enc.n_codes
        if not self.by:
            self._keys_compact_at = 1 << 62
            return
        used = self.slots[: self.nbins]
        rows = self.larr[("rows", None)].reshape(self.S, self.C)[used, :n]
        keep = np.flatnonzero(rows.any(axis=0))
        if 2 * keep.shape[0] >= n:
            self._keys_compact_at = max(_aggregate.KEYS_COMPACT_MIN, 2 * n)
            return
        k, C = keep.shape[0], 16
        while C < k:
            C *= 2
        cell = np.ix_(used, keep)
        for li in self.lanes:
            new = np.full((self.S, C), li.identity(), li.dtype)
            new[used, :k] = self.larr[li.key].reshape(self.S, self.C)[cell]
            self.larr[li.key] = new.reshape(-1)
            if li.key in self.ltarr:
                tid = np.iinfo(np.int64).max if li.lane.op == "first" else np.iinfo(np.int64).min
                nt = np.full((self.S, C), tid, np.int64)
                nt[used, :k] = self.ltarr[li.key].reshape(self.S, self.C)[cell]
                self.ltarr[li.key] = nt.reshape(-1)
        self.C = C
        self.enc.compact(keep)
        self._keys_compact_at = max(_aggregate.KEYS_COMPACT_MIN, 2 * k)
        self.plan_info["key_compactions"] = self.plan_info.get("key_compactions", 0) + 1

    def _finalize(self, a: Agg, codes: np.ndarray, wid: np.ndarray, lanes: dict, parts: list) -> pa.Array:
        class _R:  # the base finalize reads the variance shift from a ring
            shift = self.shift

        saved = self.ring
        self.ring = _R()  # type: ignore[assignment]
        try:
            return super()._finalize(a, codes, wid, lanes, parts)
        finally:
            self.ring = saved

    def flush(self) -> list[Element]:
        if self.nbins == 0:
            return []
        return self._emit_below(int(self.ids[self.nbins - 1]) + 1)

    def state_size(self) -> StateSize:
        items = self.enc.n_codes + self.live_cells
        nbytes = (self.enc.nbytes() + sum(vr.nbytes() for vr in self.value_ranks.values())
                  + 8 * self.S * self.C * (len(self.larr) + len(self.ltarr)) + 17 * self.ids.shape[0])
        return StateSize(items, nbytes)

    def _remap_values(self, col: str, remap: np.ndarray) -> None:
        for li in self.lanes:
            if li.lane.column == col and li.lane.op in SELECT:
                remap_ranks(self.larr[li.key], self.ltarr.get(li.key), li.lane.op, remap)

    def _held_values(self, col: str) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.int64)] + [
            held_ranks(self.larr[li.key], self.ltarr.get(li.key), li.lane.op)
            for li in self.lanes
            if li.lane.column == col and li.lane.op in SELECT])

    def snapshot(self) -> Any:
        return {
            "ended": list(self._ended), "lwm": self.lwm, "enc": self.enc.snapshot(),
            "ids": self.ids.copy(), "slots": self.slots.copy(), "nbins": self.nbins,
            "is_win": self.is_win.copy(), "free": self.free.copy(), "nfree": self.nfree,
            "next_slot": self.next_slot, "S": self.S, "C": self.C, "rows": self.rows_seen,
            "larr": {k: v.copy() for k, v in self.larr.items()},
            "ltarr": {k: v.copy() for k, v in self.ltarr.items()}, "shift": dict(self.shift),
            "sum_max": dict(self.sum_max),
            "vranks": {k: v.snapshot() for k, v in self.value_ranks.items()},
        }

    def restore(self, s: Any) -> None:
        self._ended = list(s["ended"])
        self.lwm = s["lwm"]
        self.enc.restore(s["enc"])
        for k in ("ids", "slots", "is_win", "free", "larr", "ltarr"):
            v = s[k]
            setattr(self, k, {a: b.copy() for a, b in v.items()} if isinstance(v, dict) else v.copy())
        self.nbins, self.nfree, self.next_slot = s["nbins"], s["nfree"], s["next_slot"]
        self.S, self.C, self.rows_seen, self.shift = s["S"], s["C"], s["rows"], dict(s["shift"])
        self.sum_max = dict(s["sum_max"])
        for k, v in s["vranks"].items():
            self.value_ranks[k].restore(v)
        self._count_live()

    def _check(self) -> None:
        self.enc._check()
        ids = self.ids[: self.nbins]
        assert (np.diff(ids) > 0).all(), "bin ids must be strictly increasing"
        used = self.slots[: self.nbins]
        assert np.unique(used).shape[0] == used.shape[0], "a slot is used by two bins"
        assert not np.isin(self.free[: self.nfree], used).any(), "a free slot is in use"
        if self.lwm > INT64_MIN and self.nbins:
            assert (ids >= self.lwm).sum() >= self.nbins - 1, "more than one complete bin retained"


class _AsSliding(SlideByTuple):
    """Stand-in so the base class accepts the kind (the bins logic is in the subclass)."""

    fca = False

    def __init__(self, kind: SlideByTuple) -> None:
        object.__setattr__(self, "range", kind.range)
        object.__setattr__(self, "slide_rows", kind.slide_rows)
