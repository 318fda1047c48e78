"""Partitioned row-based windows (PA, 004 §5.1.3 Eq. 5.4-5.6, §6.1.3.2).

What it computes: the ``by`` columns are the partitioning attribute. Each
partition ``p`` numbers its own rows by arrival (rank 0, 1, 2, ...);
window ``(w, p)`` holds ``p``'s rows of rank
``[(w+1)*slide - range, (w+1)*slide)``. Output: the partition keys,
``window_start``/``window_end`` (ranks), the aggregates.

On a batch (no event-time punctuation is involved -- a partition's rows
arrive in rank order by definition): the Bucket logic ranks rows per
partition (numba counter kernel), every row updates the cells
``(w mod R, p)`` of its ``range/slide`` windows in the dense ring, and as
soon as a partition's row count reaches ``(w+1)*slide`` window ``(w, p)``
is emitted and its cells are reset. The batch is processed in chunks in
which no partition has more than ``32 * slide`` rows (cut in one compiled
pass over the codes: a batch spread over many partitions is one chunk), so
that a partition completes at most 33 windows per chunk and
``R >= range/slide + 34`` ring rows never collide (each partition has at
most ``ceil(range/slide)`` open windows).
Punctuation in: ``P(time, v)`` is consumed and not forwarded (results
do not depend on it; see below).

Punctuation out (group-wise, :class:`~oop.stream.elements.GroupPunctuation`
on ``window_end``, keyed by the ``by`` columns): partition ``p`` emits its
windows in id order, so once windows ``0 .. done_p - 1`` are out every
later row of ``p`` has ``w >= done_p``, i.e.
``window_end >= (done_p + 1) * slide``. After each input batch that
completed windows, the operator emits ``GroupPunctuation("window_end",
keys, (done + 1) * slide)`` for exactly the partitions whose ``done``
advanced (the bound is tight: it is the ``window_end`` of the next window
of ``p``). Nothing *linear* is sound:

* on ``window_end`` -- a partition seen for the first time starts at rank 0,
  so its first window has ``window_end = slide`` however far the others
  are (only the trivial ``P(window_end, slide)`` holds);
* on event time -- after input ``P(ts, v)`` a window completed by a later
  row holds a row with ``ts >= v`` (so e.g. its ``max(ts)`` is ``>= v``),
  but the incomplete windows emitted at end of stream can hold only rows
  with ``ts < v``, and ``min(ts)`` of any window can stay below ``v``. So
  the output declares no progressing attribute and the input punctuation
  is not forwarded.

Keys are never forgotten: a partition's row counter is its state for as
long as the stream runs (its next row has the next rank, however long it
was silent), so the state grows with the partitions seen -- the ring's key
columns, the dictionary, 16 bytes of counters per partition. Every growth
of the ring is charged to the plan's state budget (:mod:`oop.limits`,
``--max-state``), which stops a run over never-repeating partitions with
one ``StateLimitError`` line naming the operator.

End of stream: emits every partition's incomplete windows (no punctuation
needed: END_OF_STREAM follows).
Cost: O(range/slide) per row; state O(partitions x range/slide) cells;
punctuation O(partitions touched) per batch.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.metrics import StateSize
from oop.operators.base import StreamInfo
from oop.stream.elements import Element, GroupPunctuation
from oop.stream.timecol import time_values
from oop.window.aggregate import WindowAggregate
from oop.window.aggregates import Agg
from oop.window.kinds import PartitionedRows
from oop.window.state import PartitionedState
from oop.window.ring import Ring, check_state_size

__all__ = ["PartitionedRowsAggregate"]

_CHUNK_WINDOWS = 32


class PartitionedRowsAggregate(WindowAggregate):
    """Window aggregation over :class:`~oop.window.kinds.PartitionedRows` (see module docstring)."""

    def __init__(self, kind: PartitionedRows, aggs: Agg | Sequence[Agg], *,
                 by: str | Sequence[str] = (), method: str = "auto", **kw: Any) -> None:
        if not isinstance(kind, PartitionedRows):
            raise ConfigError(f"PartitionedRowsAggregate needs a PartitionedRows kind, not {kind!r}")
        name = kw.get("name", "window")
        if not by:
            raise ConfigError(
                f"{name}: PartitionedRows needs by=... (the partitioning attribute); "
                "without partitions use RowSliding"
            )
        if method == "paned":
            raise ConfigError(f"{name}: Paned-WID applies to time windows; use method='wid'")
        if kw.get("late") not in (None, "drop"):
            raise ConfigError(f"{name}: row-based windows have no late tuples; leave late=None")
        # the base class refuses PA kinds (the fused PA logic lives here)
        self._pa_kind = kind
        super().__init__(_Placeholder(kind), aggs, by=by, method="wid", **kw)
        self.kind_config = kind

    def infer_output(self, inputs: Any) -> Any:
        out = super().infer_output(inputs)
        self.kind = self._pa_kind
        self.chunk = self.kind.slide * _CHUNK_WINDOWS
        self.R = -(-self.kind.range // self.kind.slide) + _CHUNK_WINDOWS + 2
        check_state_size(self.R, 64, len(getattr(self, "lanes", ())), 0, self.R)  # before data
        self.done = np.zeros(64, np.int64)  # per partition: first window not emitted
        self.counters = np.zeros(64, np.int64)
        self._scratch(64)
        self._key_schema = pa.schema([self.out_schema.field(c) for c in self.by])
        return StreamInfo(out.name, out.schema, {}, None)

    def _scratch(self, size: int) -> None:
        """Zeroed per-partition scratch of the compiled helpers (they leave it zeroed):
        ``seen`` for ``distinct_codes``, ``counts`` for ``cut_chunks``."""
        self.seen = np.zeros(size, np.uint8)
        self.counts = np.zeros(size, np.int64)

    def _grow(self, n: int) -> None:
        if n > self.done.shape[0]:
            size = max(n, 2 * self.done.shape[0])
            for attr in ("done", "counters"):
                a = np.zeros(size, np.int64)
                old = getattr(self, attr)
                a[: old.shape[0]] = old
                setattr(self, attr, a)
            self._scratch(size)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        if batch.num_rows == 0:
            return []
        from oop.window.kernels import cut_chunks, distinct_codes, rank_in_partition

        out: list[Element] = []
        advanced: list[np.ndarray] = []
        all_codes = self.enc.encode(batch)
        self._grow(self.enc.n_codes)
        bounds = cut_chunks(all_codes, self.chunk, self.counts)
        for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            b = batch.slice(start, stop - start)
            times = time_values(b, self.time, self.inputs[0].name)
            codes = all_codes[start:stop]
            ranks = rank_in_partition(codes, self.counters)
            lo, hi = self.kind.wids(ranks)
            if self.ring is None:  # growth charged to the state budget (oop.limits)
                self._set_ring(Ring(self.lanes, codes=max(self.enc.n_codes, 64)))
                self.ring.make_fixed(self.R)
            cols = self._lane_columns(b)
            self.ring.update(codes, lo, hi, cols, times, self.enc.n_codes)
            self._add_holistic(b, codes, lo, hi, cols)
            touched = distinct_codes(codes, self.seen)  # first-appearance order
            complete = self.counters[touched] // self.kind.slide
            advanced.append(touched[complete > self.done[touched]])
            res = self._emit_upto(touched, complete)
            if res is not None:
                out.append(res)
        parts = np.unique(np.concatenate(advanced))
        if parts.shape[0]:
            out.append(self._group_punctuation(parts))
        return out

    def _group_punctuation(self, parts: np.ndarray) -> GroupPunctuation:
        """Per partition in ``parts``: later rows have ``window_end >= (done + 1) * slide``."""
        keys = pa.RecordBatch.from_arrays(self.enc.keys(parts), schema=self._key_schema)
        return GroupPunctuation("window_end", keys, (self.done[parts] + 1) * self.kind.slide)

    def _emit_upto(self, parts: np.ndarray, upto: np.ndarray) -> pa.RecordBatch | None:
        assert self.ring is not None
        n = np.maximum(upto - self.done[parts], 0)
        if not n.any():
            return None
        pc_ = np.repeat(parts, n)
        pw = np.repeat(self.done[parts], n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
        self.done[parts] = np.maximum(self.done[parts], upto)
        lanes = self.ring.gather(pw, pc_)
        live = lanes[("rows", None)] > 0
        self.ring.reset_cells(pw, pc_)
        pw, pc_ = pw[live], pc_[live]
        lanes = {k: v[live] for k, v in lanes.items()}
        batch = None
        if pw.shape[0]:  # one batch ordered by (window, partition), no per-window Python
            order = np.lexsort((pc_, pw))
            pw, pc_ = pw[order], pc_[order]
            lanes = {k: v[order] for k, v in lanes.items()}
            batch = self._build_arrays(pw, pc_, lanes, revision=False)
        if self.holistic:
            done = self.done
            for ms in self.holistic.values():
                ms.keep_rows(lambda u, c: u >= done[c])
        return batch

    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        return []

    def flush(self) -> list[Element]:
        if self.ring is None:
            return []
        parts = np.arange(self.enc.n_codes)
        last = (self.counters[parts] - 1 + self.kind.range) // self.kind.slide
        b = self._emit_upto(parts, last)
        return [b] if b is not None else []

    def state_size(self) -> StateSize:
        """The base state plus the per-partition row counters and emitted-window marks."""
        base = super().state_size()
        return StateSize(base.items, base.bytes + self.done.nbytes + self.counters.nbytes)

    def snapshot(self) -> PartitionedState:  # type: ignore[override]
        return PartitionedState(super().snapshot(), self.done.copy(), self.counters.copy())

    def restore(self, state: PartitionedState) -> None:  # type: ignore[override]
        super().restore(state.window)
        if self.ring is not None:
            self.ring.fixed = True
        self.done, self.counters = state.done.copy(), state.counters.copy()
        self._scratch(self.done.shape[0])

    def _check(self) -> None:
        self.enc._check()
        if self.ring is not None:
            self.ring._check()
            # per partition, windows emitted = complete ones (open stream) or all of them (flushed)
            n = self.enc.n_codes
            done, cnt = self.done[:n], self.counters[:n]
            flushed = np.where(cnt > 0, (cnt - 1 + self.kind.range) // self.kind.slide, 0)
            assert ((done == cnt // self.kind.slide) | (done == flushed)).all()
            assert not self.done[n:].any() and not self.counters[n:].any()


class _Placeholder(PartitionedRows):
    """A RowSliding stand-in so the base class accepts the kind (PA logic is in the subclass)."""

    partitioned = False

    def __init__(self, kind: PartitionedRows) -> None:
        object.__setattr__(self, "range", kind.range)
        object.__setattr__(self, "slide", kind.slide)
