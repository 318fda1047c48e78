"""Gigascope two-level aggregation: IOP slow-flush vs OOP lazy-flush / slow-flush (004 §8.3.3).

What it computes: a tumbling-window ``count(*)`` per group (Q8-1), split in
two levels. The *low level* keeps a fixed-size hash table of ``H`` partial
counts (no allocation per packet); the *high level* rolls the partials up
with a ``sum`` per (group, window). Roll-up of the low level's output is
exactly the per-(group, window) count of the processed packets, whatever
the flush policy (``_check`` and the tests assert it).

Low level, one packet of group ``g`` in window ``w`` at slot ``h(g)``
(004 Fig. 8-6; an entry is *new* when its window is the current one, *old*
otherwise):

* ``iop-slow`` (IOP slow-flush, Fig. 8-6): at the first packet of a new
  window, any old entries not yet flushed are flushed at once; then the
  flush cursor restarts. Every packet advances the cursor one slot
  (``every`` = 1: Gigascope's aggressive slow-flush) and outputs the slot if
  old. Slot empty: insert. New entry of ``g``: update. Old entry: output
  it, insert. **New entry of another group: to keep the output ordered by
  window, flush every old entry first** (the workload surge), then output
  the colliding entry and insert.
* ``oop-lazy`` (OOP lazy-flush): collisions flush naturally -- the existing
  entry (old, or new of another group) is output and replaced; no order is
  kept. At a window boundary entries older than ``max_delay`` windows are
  forced out (maximum result delay ``m`` windows).
* ``oop-slow`` (OOP slow-flush): lazy-flush plus one old entry output every
  ``every`` packets (a cursor over the table).

Output punctuation (on ``window_end`` of the partials): IOP -- the start of
the previous window's successor once the old window is flushed; OOP -- the
end of window ``w - max_delay`` at the start of window ``w + 1``; in both
never above the end of the oldest window still held in the table.

Ring-buffer input model (:func:`simulate`): packet ``k`` arrives at
``k / rate`` (in work units); processing costs ``per_packet`` plus
``per_output`` per aggregate output plus ``per_scan`` per slot scanned by a
flush; a packet arriving while ``ring`` packets wait is dropped.
:func:`max_sustainable_rate` finds the largest rate with no drop (binary
search; 004 raised the rate 5K pkt/s at a time). Rates are in packets per
unit of per-packet work, so 1.0 is the low level's raw capacity.

Cost: O(1) per packet plus the flushes; one numba kernel per batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa
from numba import njit

from oop.errors import ConfigError
from oop.iop_baseline._late import DropsLate
from oop.metrics import StateSize
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import parse_duration, time_values

__all__ = [
    "FlushPolicy",
    "CostModel",
    "LowLevelTable",
    "SimResult",
    "simulate",
    "max_sustainable_rate",
    "lowlevel_reference",
    "GigascopeLowLevel",
    "GigascopeHighLevel",
    "rollup",
]

PolicyKind = Literal["iop-slow", "oop-lazy", "oop-slow"]
_POLICY = {"iop-slow": 0, "oop-lazy": 1, "oop-slow": 2}
_EMPTY = INT64_MIN


@dataclass(frozen=True)
class FlushPolicy:
    """How the low level flushes: ``kind``, ``every`` packets per slow-flush step, ``max_delay`` windows.

    >>> FlushPolicy("oop-slow", every=160, max_delay=2).kind
    'oop-slow'
    """

    kind: PolicyKind = "iop-slow"
    every: int = 1
    max_delay: int = 2

    def __post_init__(self) -> None:
        if self.kind not in _POLICY:
            raise ConfigError(f"gigascope: unknown flush policy {self.kind!r}; use iop-slow, "
                              "oop-lazy or oop-slow")
        if self.every < 1:
            raise ConfigError(f"gigascope: every={self.every}: a slow-flush step needs at least one "
                              "packet between outputs")
        if self.max_delay < 1:
            raise ConfigError(f"gigascope: max_delay={self.max_delay}: OOP needs at least one window "
                              "of delay to flush lazily")

    @property
    def code(self) -> int:
        return _POLICY[self.kind]


@dataclass(frozen=True)
class CostModel:
    """Work units of the ring-buffer model: per packet, per output aggregate, per scanned slot."""

    per_packet: float = 1.0
    per_output: float = 1.0
    per_scan: float = 0.02
    ring: int = 4096

    def __post_init__(self) -> None:
        if self.per_packet <= 0 or self.per_output < 0 or self.per_scan < 0:
            raise ConfigError("gigascope cost model: costs must be >= 0 and per_packet > 0")
        if self.ring < 1:
            raise ConfigError(f"gigascope cost model: ring={self.ring}; the ring buffer needs a slot")


class LowLevelTable:
    """The low level's state: ``H`` slots of (key, window, count) and the flush cursor."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ConfigError(f"gigascope: hash table size must be >= 1, got {size}")
        self.key = np.zeros(size, np.int64)
        self.tag = np.full(size, _EMPTY, np.int64)
        self.cnt = np.zeros(size, np.int64)
        # cur_w, flush_pos, flush_active, since_flush, n_entries, n_new (entries of cur_w)
        self.st = np.array([_EMPTY, 0, 0, 0, 0, 0], np.int64)

    @property
    def size(self) -> int:
        return int(self.key.shape[0])

    @property
    def entries(self) -> int:
        return int(self.st[4])

    def _check(self) -> None:
        used = self.tag != _EMPTY
        assert int(used.sum()) == self.entries, (int(used.sum()), self.entries)
        assert bool(np.all(self.cnt[used] > 0))
        if self.st[0] != _EMPTY:
            assert bool(np.all(self.tag[used] <= self.st[0]))


# ---- the kernel ----------------------------------------------------------
@njit(cache=True)
def _slot(key, h):  # type: ignore[no-untyped-def]
    x = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return np.int64(x % np.uint64(h))


@njit(cache=True)
def _emit(tkey, ttag, tcnt, s, ok, ow, oc, no, record):  # type: ignore[no-untyped-def]
    if record:
        ok[no] = tkey[s]
        ow[no] = ttag[s]
        oc[no] = tcnt[s]
    ttag[s] = _EMPTY_K
    tcnt[s] = 0
    return no + 1


_EMPTY_K = INT64_MIN


@njit(cache=True)
def _flush_older(tkey, ttag, tcnt, lo, hi, bound, ok, ow, oc, no, record):  # type: ignore[no-untyped-def]
    """Emit every entry of slots ``[lo, hi)`` whose window is ``< bound``.

    Returns (new output count ``no``, entries emitted, slots scanned).
    """
    outs = 0
    for s in range(lo, hi):
        if ttag[s] != _EMPTY_K and ttag[s] < bound:
            no = _emit(tkey, ttag, tcnt, s, ok, ow, oc, no, record)
            outs += 1
    return no, outs, max(0, hi - lo)


@njit(cache=True)
def _lowlevel(keys, wids, tkey, ttag, tcnt, st, policy, every, m,  # type: ignore[no-untyped-def]
              c_pkt, c_out, c_scan, rate, ring, record):
    """Process packets in arrival order. Returns outputs and accounting.

    ``rate <= 0`` disables the ring model (every packet is processed).
    Returns (out_key, out_wid, out_cnt, n_out, dropped, late, work, max_queue, processed mask).
    """
    n = keys.shape[0]
    h = tkey.shape[0]
    cap = n + h + 1 if record else 1
    ok = np.empty(cap, np.int64)
    ow = np.empty(cap, np.int64)
    oc = np.empty(cap, np.int64)
    no = np.int64(0)  # not the literal 0: _emit and _flush_older would compile twice
    n_out = 0
    dropped = 0
    late = 0
    work_total = 0.0
    busy = 0.0
    qcap = ring + 1
    q = np.zeros(qcap, np.float64)
    qh = 0
    qn = 0
    maxq = 0
    done = np.zeros(n, np.bool_)
    cur = st[0]
    fpos = st[1]
    factive = st[2]
    since = st[3]
    nent = st[4]
    nnew = st[5]
    for k in range(n):
        a = k / rate if rate > 0 else 0.0
        if rate > 0:
            while qn > 0 and q[qh] <= a:
                qh = (qh + 1) % qcap
                qn -= 1
            if qn >= ring:
                dropped += 1
                continue
        w = wids[k]
        g = keys[k]
        if cur != _EMPTY_K and w < cur:
            late += 1
            continue
        outs = 0
        scans = 0
        if w > cur:
            nnew = 0
            if policy == 0:
                if factive == 1 or cur == _EMPTY_K:
                    # flush the remaining old entries at once
                    no, e, sc = _flush_older(tkey, ttag, tcnt, fpos, h, cur, ok, ow, oc, no, record)
                    outs += e
                    scans += sc
                    nent -= e
                # entries older than the previous window cannot remain in IOP
                cur = w
                factive = 1
                fpos = 0
            else:
                cur = w
                # force out entries older than max_delay windows (only if any can exist)
                if nent > 0:
                    no, e, sc = _flush_older(tkey, ttag, tcnt, np.int64(0), h, cur - m, ok, ow, oc,
                                             no, record)  # int64 0: one specialization
                    outs += e
                    scans += sc
                    nent -= e
        # slow-flush step
        if policy == 0 and factive == 1:
            if fpos < h:
                scans += 1
                if ttag[fpos] != _EMPTY_K and ttag[fpos] < cur:
                    no = _emit(tkey, ttag, tcnt, fpos, ok, ow, oc, no, record)
                    outs += 1
                    nent -= 1
                fpos += 1
            if fpos >= h:
                factive = 0
        elif policy == 2:
            since += 1
            if since >= every and nent - nnew > 0:
                since = 0
                # advance the cursor to the next old entry (one exists: at most one sweep)
                for _ in range(h):
                    scans += 1
                    s = fpos
                    fpos = fpos + 1 if fpos + 1 < h else 0
                    if ttag[s] != _EMPTY_K and ttag[s] < cur:
                        no = _emit(tkey, ttag, tcnt, s, ok, ow, oc, no, record)
                        outs += 1
                        nent -= 1
                        break
        s = _slot(g, h)
        if ttag[s] == _EMPTY_K:
            tkey[s] = g
            ttag[s] = w
            tcnt[s] = 1
            nent += 1
            nnew += 1
        elif ttag[s] == w and tkey[s] == g:
            tcnt[s] += 1
        elif ttag[s] < w:
            no = _emit(tkey, ttag, tcnt, s, ok, ow, oc, no, record)
            outs += 1
            tkey[s] = g
            ttag[s] = w
            tcnt[s] = 1
            nnew += 1
        else:
            # a new entry of another group
            if policy == 0:
                no, e, sc = _flush_older(tkey, ttag, tcnt, fpos, h, cur, ok, ow, oc, no, record)
                outs += e
                scans += sc
                nent -= e
                fpos = h
                factive = 0
            no = _emit(tkey, ttag, tcnt, s, ok, ow, oc, no, record)
            outs += 1
            tkey[s] = g
            ttag[s] = w
            tcnt[s] = 1
        n_out += outs
        done[k] = True
        work = c_pkt + outs * c_out + scans * c_scan
        work_total += work
        if rate > 0:
            start = a if a > busy else busy
            busy = start + work
            if start > a:
                q[(qh + qn) % qcap] = start
                qn += 1
                if qn > maxq:
                    maxq = qn
    st[0] = cur
    st[1] = fpos
    st[2] = factive
    st[3] = since
    st[4] = nent
    st[5] = nnew
    span = busy if rate > 0 else work_total
    return ok[:no], ow[:no], oc[:no], n_out, dropped, late, work_total, maxq, done, span


def lowlevel_reference(keys: Sequence[int], wids: Sequence[int], size: int,
                       policy: FlushPolicy) -> list[tuple[int, int, int]]:
    """Fig. 8-6 and the OOP variants, one packet at a time with dicts: the outputs in order."""
    slot_of = lambda g: int(_slot(np.int64(g), size))  # noqa: E731
    table: dict[int, list[int]] = {}  # slot -> [key, wid, count]
    out: list[tuple[int, int, int]] = []
    cur: int | None = None
    fpos, factive, since = 0, False, 0
    m = policy.max_delay

    def emit(s: int) -> None:
        k, w, c = table.pop(s)
        out.append((k, w, c))

    for g, w in zip(keys, wids):
        if cur is not None and w < cur:
            continue
        if cur is None or w > cur:
            if policy.kind == "iop-slow":
                if factive or cur is None:
                    for s in range(fpos, size):
                        if s in table and cur is not None and table[s][1] < cur:
                            emit(s)
                cur, factive, fpos = w, True, 0
            else:
                cur = w
                for s in range(size):
                    if s in table and table[s][1] < cur - m:
                        emit(s)
        if policy.kind == "iop-slow" and factive:
            if fpos < size:
                if fpos in table and table[fpos][1] < cur:
                    emit(fpos)
                fpos += 1
            if fpos >= size:
                factive = False
        elif policy.kind == "oop-slow":
            since += 1
            if since >= policy.every and any(v[1] < cur for v in table.values()):
                since = 0
                while True:
                    s = fpos
                    fpos = fpos + 1 if fpos + 1 < size else 0
                    if s in table and table[s][1] < cur:
                        emit(s)
                        break
        s = slot_of(g)
        if s not in table:
            table[s] = [g, w, 1]
        elif table[s][1] == w and table[s][0] == g:
            table[s][2] += 1
        elif table[s][1] < w:
            emit(s)
            table[s] = [g, w, 1]
        else:
            if policy.kind == "iop-slow":
                for s2 in range(fpos, size):
                    if s2 in table and table[s2][1] < cur:
                        emit(s2)
                fpos, factive = size, False
            emit(s)
            table[s] = [g, w, 1]
    for s in sorted(table, key=lambda s: (table[s][1], s)):
        out.append(tuple(table[s]))  # type: ignore[arg-type]
    return out


def _drain(table: LowLevelTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Everything left in the table, ordered by window (end of stream)."""
    used = np.nonzero(table.tag != _EMPTY)[0]
    order = used[np.argsort(table.tag[used], kind="stable")]
    k, w, c = table.key[order].copy(), table.tag[order].copy(), table.cnt[order].copy()
    table.tag[used] = _EMPTY
    table.cnt[used] = 0
    table.st[4] = 0
    table.st[5] = 0
    return k, w, c


def rollup(keys: np.ndarray, wids: np.ndarray, counts: np.ndarray) -> dict[tuple[int, int], int]:
    """The high level's sum of partial counts per (group, window), as a dict (tests, small data)."""
    out: dict[tuple[int, int], int] = {}
    for k, w, c in zip(keys.tolist(), wids.tolist(), counts.tolist()):
        out[(k, w)] = out.get((k, w), 0) + c
    return out


@dataclass
class SimResult:
    """One run of the ring-buffer model."""

    packets: int
    processed: int
    dropped: int
    outputs: int
    work: float
    span: float
    max_queue: int

    @property
    def utilization(self) -> float:
        """Busy fraction of the low level over the run (Table 8-1's CPU usage)."""
        return self.work / self.span if self.span > 0 else 0.0


def simulate(keys: np.ndarray, packets_per_window: int, table_size: int, policy: FlushPolicy,
             rate: float, cost: CostModel = CostModel()) -> SimResult:
    """Run the low level on ``keys`` (packet ``k`` in window ``k // packets_per_window``)."""
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    wids = np.arange(len(keys), dtype=np.int64) // max(1, int(packets_per_window))
    t = LowLevelTable(table_size)
    _, _, _, n_out, dropped, _late, work, maxq, done, span = _lowlevel(
        keys, wids, t.key, t.tag, t.cnt, t.st, policy.code, policy.every, policy.max_delay,
        cost.per_packet, cost.per_output, cost.per_scan, float(rate), cost.ring, False)
    return SimResult(len(keys), int(done.sum()), int(dropped), int(n_out), float(work),
                     float(span), int(maxq))


def max_sustainable_rate(
    keys_for: Any, window_work: float, table_size: int, policy: FlushPolicy,
    cost: CostModel = CostModel(), windows: int = 4, lo: float = 0.01, hi: float = 1.0,
    steps: int = 10,
) -> tuple[float, SimResult]:
    """The largest rate (packets per work unit) with no dropped packet, by bisection.

    ``keys_for(n)`` returns the first ``n`` group keys of the packet stream.
    At rate ``r`` a window (``window_work`` units of time) holds ``r * window_work``
    packets and ``windows`` windows are simulated.
    """
    def run(r: float) -> SimResult:
        ppw = max(1, int(r * window_work))
        return simulate(keys_for(ppw * windows), ppw, table_size, policy, r, cost)

    top = run(hi)
    if top.dropped == 0:
        return hi, top
    bottom = run(lo)
    if bottom.dropped:
        return 0.0, bottom
    best_r, best = lo, bottom
    a, b = lo, hi
    for _ in range(steps):
        r = (a + b) / 2
        res = run(r)
        if res.dropped == 0:
            best_r, best, a = r, res, r
        else:
            b = r
    return best_r, best


# ---- operators -----------------------------------------------------------
class GigascopeLowLevel(DropsLate):
    """Low-level sub-aggregation over an ordered packet stream (see module doc).

    Input: a stream with an integer group column ``key`` and progressing
    attribute ``time``; tumbling windows of ``size``. Output: partial counts
    ``(key, window_start, window_end, count)`` progressing on ``window_end``.
    Packets older than the current window are late: handled by ``late``
    (drop / side_output: counted and kept out of the table; raise).
    """

    def __init__(self, key: str, size: int | str, table_size: int,
                 policy: FlushPolicy = FlushPolicy(), name: str = "gigascope_low", *,
                 late: LatePolicy | str = "drop") -> None:
        super().__init__(name)
        self.late_policy = LatePolicy.parse(late)
        if self.late_policy is LatePolicy.UPDATE:
            raise ConfigError(f"{name}: late='update' is not supported (emitted partial counts "
                              "are never revised); use drop, side_output or raise")
        self.dropped = 0
        self.key = key
        self.size_spec = size
        self.size = 0
        self.policy = policy
        self.table = LowLevelTable(table_size)
        self.attr = ""
        self.punct_out = INT64_MIN

    def infer_output(self, inputs: list[StreamInfo]) -> StreamInfo:  # type: ignore[override]
        info = inputs[0]
        require_columns(info, [self.key], self.name)
        if info.time is None:
            raise ConfigError(f"{self.name}: stream {info.name!r} has no progressing attribute")
        self.attr = info.time
        self.size = parse_duration(self.size_spec, info.unit())
        if self.size <= 0:
            raise ConfigError(f"{self.name}: window size must be positive, got {self.size_spec!r}")
        schema = pa.schema([(self.key, pa.int64()), ("window_start", pa.int64()),
                            ("window_end", pa.int64()), ("count", pa.int64())])
        return StreamInfo(self.name, schema, {"window_end": info.unit()}, "window_end")

    def _out(self, k: np.ndarray, w: np.ndarray, c: np.ndarray) -> list[Element]:
        if not len(k):
            return []
        assert self.output is not None
        return [pa.RecordBatch.from_arrays(
            [pa.array(k), pa.array(w * self.size), pa.array((w + 1) * self.size), pa.array(c)],
            schema=self.output.schema)]

    def _punct(self) -> list[Element]:
        cur = int(self.table.st[0])
        if cur == _EMPTY:
            return []
        # oldest window that may still be output
        oldest = cur - 1 if self.policy.kind == "iop-slow" else cur - self.policy.max_delay
        if self.policy.kind == "iop-slow" and self.table.st[2] == 0:
            oldest = cur
        # never above an entry still held: a jump over empty windows (0 -> 2) leaves the
        # entries of window 0 to the IOP cursor, so "cur - 1" alone would cover them
        tags = self.table.tag
        held = tags[tags != _EMPTY]
        if len(held):
            oldest = min(oldest, int(held.min()))
        v = (oldest + 1) * self.size
        if v > self.punct_out:
            self.punct_out = v
            return [Punctuation("window_end", v)]
        return []

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.attr)
        wids = np.floor_divide(times, self.size)
        t = self.table
        # the kernel skips a packet below the current window (the running max of window ids)
        cur = np.maximum.accumulate(np.concatenate(([t.st[0]], wids)))[:-1]
        batch, keep = self.drop_late(batch, wids < cur, lambda i: (
            f"{self.name}: packet with {self.attr}={int(times[i])} (window {int(wids[i])}) arrived "
            f"after window {int(cur[i])} opened; the low level needs ordered input -- put a sort "
            "buffer in front of it, or use late='drop'/'side_output'"))
        if keep is not None:
            wids = wids[keep]
        keys = batch.column(self.key).to_numpy(zero_copy_only=False).astype(np.int64)
        p = self.policy
        k, w, c, _n, _d, late, _work, _q, _done, _span = _lowlevel(
            keys, wids, t.key, t.tag, t.cnt, t.st, p.code, p.every, p.max_delay,
            1.0, 1.0, 0.0, 0.0, 1, True)
        assert late == 0, "late packets are split off before the kernel"
        return self._out(k, w, c) + self._punct()

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        return []  # the output progresses on window_end, driven by the packets

    def flush(self) -> list[Element]:
        self.record_accuracy()
        return self._out(*_drain(self.table))

    def state_size(self) -> StateSize:
        return StateSize(self.table.entries, self.table.entries * 24)

    def snapshot(self) -> Any:
        t = self.table
        return {**super().snapshot(), "t": (t.key.copy(), t.tag.copy(), t.cnt.copy(), t.st.copy()),
                "p": self.punct_out, "dropped": self.dropped}

    def restore(self, state: Any) -> None:
        super().restore(state)
        t = self.table
        t.key, t.tag, t.cnt, t.st = (a.copy() for a in state["t"])
        self.punct_out = state["p"]
        self.dropped = state.get("dropped", 0)

    def _check(self) -> None:
        self.table._check()


class GigascopeHighLevel(Operator):
    """High-level roll-up: sum partial counts per (key, window); emit a window on punctuation.

    Holds the partials of open windows (items = partial rows). On
    ``P(window_end, v)`` it sums and emits every window with ``window_end < v``
    and purges them. Cost: one numpy group-by per punctuation.
    """

    def __init__(self, key: str, name: str = "gigascope_high") -> None:
        super().__init__(name)
        self.key = key
        self.parts: list[pa.RecordBatch] = []
        self.rows = 0

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows:
            self.parts.append(batch)
            self.rows += batch.num_rows
        return []

    def _emit(self, v: int | None) -> list[Element]:
        if not self.parts:
            return []
        tab = pa.Table.from_batches(self.parts).combine_chunks()
        end = tab.column("window_end").to_numpy()
        # P(window_end, v): later partials have window_end >= v, so windows ending before v are done
        ready = np.ones(len(end), bool) if v is None else end < v
        if not ready.any():
            return []
        done = tab.filter(pa.array(ready))
        rest = tab.filter(pa.array(~ready))
        self.parts = rest.to_batches() if rest.num_rows else []
        self.rows = rest.num_rows
        g = done.group_by([self.key, "window_start", "window_end"]).aggregate([("count", "sum")])
        g = g.rename_columns([*g.column_names[:-1], "count"]).select(
            [self.key, "window_start", "window_end", "count"])
        g = g.sort_by([("window_end", "ascending"), (self.key, "ascending")])
        assert self.output is not None
        return [b for b in g.cast(self.output.schema).to_batches() if b.num_rows]

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if isinstance(punctuation, Punctuation) and punctuation.attr == "window_end":
            return self._emit(punctuation.value) + [punctuation]
        return [punctuation]

    def flush(self) -> list[Element]:
        return self._emit(None)

    def state_size(self) -> StateSize:
        return StateSize(self.rows, self.rows * 32)

    def snapshot(self) -> Any:
        return {**super().snapshot(), "parts": list(self.parts), "rows": self.rows}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.parts, self.rows = list(state["parts"]), state["rows"]
