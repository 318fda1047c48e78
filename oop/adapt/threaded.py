"""ThreadedAdapt: AdaptWID run as N key partitions on N threads.

What it computes: exactly what :class:`~oop.adapt.operator.AdaptWID` computes over the
same input (``SELECT by..., window_start, window_end, aggs... GROUP BY by, wid`` over
Tumbling / Sliding windows, 004 §6.3) -- the same rows **in the same order** (by window,
then by key code, :func:`~oop.adapt.order.window_code_order`) and the same late count.
It is :class:`~oop.window.threaded.ThreadedWindow` (punctuation to every partition,
global key codes, ``code mod N`` scatter, Meld-style merge by ``(window_end, code)``,
pipelining ``lag``) with one AdaptWID per partition, grouping by the global key code.

What differs from the window's partitioning, and why:

* **Late tuples are decided in the partitions.** AdaptWID's late rule is its own (a
  tuple is late when all its windows are complete under the last punctuation, not when
  it is behind the punctuation) and every partition sees every punctuation in the same
  place, so each row is decided once, by the same rule and bound, in its partition; the
  counters are summed (:attr:`_Partition.late <oop.window.threaded._Partition>`).
* **Codes as one thread gives them.** AdaptWID encodes a batch's keys before it drops
  the late rows, so the global dictionary does too (a key first seen in a late tuple
  gets its code then), and it is compacted when one thread compacts: after a
  punctuation's windows are emitted, by :func:`~oop.window.keys.compaction_remap` with
  ``oop.adapt.operator.KEYS_COMPACT_MIN``, a key being live while a tuple of it is held
  (:meth:`AdaptWID._live_codes <oop.adapt.operator.AdaptWID._live_codes>`, whichever
  groups are eager) -- so the key codes, and with them the row order, are the
  one-thread ones.
* **The exact-sum bound is global.** One thread checks an integer ``sum`` against the
  largest ``|value|`` of the whole column; each partition is told that bound before
  its batch (``sum_max``), so an overflow is refused exactly where one thread refuses.

* **Eager or lazy as one thread decides.** Cond. 6.9 (one source: ``theta = aggr * wed
  / (tup * SLIDE)``, 004 §6.3.2) has terms that describe the whole stream: ``wed`` (the
  high-watermark when an extent completes minus the low-watermark when its first tuple
  arrived) and ``tup`` (the buffer's columns: a value column's validity is held from its
  first null). A partition that measured them from its own tuples would flip a group at
  other moments than one thread, and a float sum / mean / var would add in another
  order (the 4M-row tumbling benchmark: 88 of 1.13M sums differed, <= 2.8e-16
  relative). So this thread measures them over every tuple
  (:class:`~oop.adapt.extents.StreamTerms`: the one-thread kernel for the rows' window
  ids, the one :class:`~oop.adapt.extents.OpenExtents` for the extents) and gives each
  partition the one-thread values before each batch, punctuation and the end
  (:attr:`AdaptWID.stream_terms <oop.adapt.operator.AdaptWID.stream_terms>`); the
  partitions compute ``theta`` by the one-thread code with them, and a group's own
  volume ``winVol`` is its partition's. ``aggr`` of bounded aggregates is fixed by the
  lanes' layout (the same everywhere); a holistic aggregate's is the measured bytes per
  held partial, which would need every partition's state after each element: not given
  (docs/limits.md) -- such a query's modes are each partition's own. The stream volume
  and the sources' offsets enter ``theta`` only with several sources, which are not
  partitioned. The switch counts and each punctuation's eager / transitional / lazy
  group counts add up to one thread's, and the output is one thread's to the bit
  (forced modes too).

Punctuation rule: as AdaptWID (emits every window with ``end <= v``, purges it,
forwards ``P("window_end", v)``), minimum over the partitions. Not partitioned
(:func:`adapt_threadable` says why; :func:`adaptive_operator` then builds one AdaptWID
and records the reason in its ``plan_info["one_thread"]``): several ``sources`` (their
offsets enter Cond. 6.9 by port), no ``by`` key, windows other than tumbling and
sliding. Checkpoints: as the window's (:mod:`oop.window.threaded`), the driving
thread's own part adding the global sum bounds, the var/std shifts one thread fixed and
Cond. 6.9's stream-wide terms (:meth:`StreamTerms.snapshot
<oop.adapt.extents.StreamTerms.snapshot>`); each partition's AdaptWID snapshots itself
(the terms it was last given are given again before its next element).

Cost: as ThreadedWindow -- this thread O(rows) for key encoding, the global sum bound,
Cond. 6.9's terms (one compiled pass over the time column, adaptive thresholds only)
and the scatter, O(output rows x log N) for the merge; the partitions the rest.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from oop.adapt import operator as _adapt
from oop.adapt.cost import Thresholds
from oop.adapt.extents import StreamTerms
from oop.adapt.operator import AdaptWID
from oop.operators.base import Operator
from oop.stream.elements import Element, Punctuation
from oop.stream.timecol import time_values
from oop.window.aggregates import Agg, as_aggs
from oop.window.kinds import WindowKind
from oop.window.late import LateRule
from oop.window.threaded import ThreadedWindow, threadable
from oop.window.values import max_abs

__all__ = ["ThreadedAdapt", "adapt_threadable", "adaptive_operator"]


def adapt_threadable(kind: WindowKind, aggs: Agg | Sequence[Agg], by: Sequence[str],
                     n_inputs: int = 1) -> str | None:
    """Why this AdaptWID query cannot run on key partitions (None: it can)."""
    if n_inputs > 1:
        return (f"{n_inputs} sources: Cond. 6.9 measures each source's arrival offsets over "
                "the whole stream")
    return threadable(kind, aggs, by)


def adaptive_operator(kind: WindowKind, aggs: Agg | Sequence[Agg], *, by: Sequence[str] = (),
                      n_inputs: int = 1, thresholds: Thresholds | str | None = None,
                      name: str = "adaptwid", time: str | None = None,
                      threads: int = 1) -> Operator:
    """AdaptWID for this query: on ``threads`` key partitions (:class:`ThreadedAdapt`) where
    :func:`adapt_threadable` allows, else one AdaptWID whose ``plan_info["one_thread"]``
    says why (when ``threads > 1`` was asked for). O(1)."""
    by = [by] if isinstance(by, str) else list(by)
    if threads > 1:
        why = adapt_threadable(kind, aggs, by, n_inputs)
        if why is None:
            return ThreadedAdapt(kind, aggs, threads=threads, by=by, thresholds=thresholds,
                                 name=name, time=time)
    op = AdaptWID(kind, aggs, by=by, n_inputs=n_inputs, thresholds=thresholds, name=name,
                  time=time)
    if threads > 1:
        op.plan_info["one_thread"] = f"threads={threads} not used: {why}"
    return op


def _punctuate(op: AdaptWID, p: Punctuation, terms: dict[str, Any]) -> list[Element]:
    """A partition's punctuation, deciding with the one-thread ``wed`` after it
    (:class:`~oop.adapt.extents.StreamTerms`), on the partition's thread."""
    op.stream_terms = terms
    return op.on_punctuation(p)


class ThreadedAdapt(ThreadedWindow):
    """AdaptWID over ``threads`` key partitions (see the module docstring)."""

    def __init__(self, kind: WindowKind, aggs: Agg | Sequence[Agg], *, threads: int,
                 by: str | Sequence[str] = (), thresholds: Thresholds | str | None = None,
                 n_bins: int = 8, name: str = "adaptwid", time: str | None = None,
                 lag: int = 0) -> None:
        super().__init__(kind, aggs, threads=threads, by=by, name=name, time=time, lag=lag)
        self.adapt_kw: dict[str, Any] = dict(kind=kind, aggs=as_aggs(aggs),
                                             thresholds=thresholds, n_bins=n_bins, time=time)
        self.sum_max: dict[str, int] = {}
        #: Cond. 6.9's stream-wide terms over every tuple (set at open; None: forced modes)
        self.terms: StreamTerms | None = None

    # ---- the partitioned operator ----------------------------------------------------
    def _one_operator(self, by: Sequence[str], name: str) -> Operator:
        return AdaptWID(by=by, name=name, **self.adapt_kw)

    def _adopt(self, t: Any) -> list[str]:
        """AdaptWID's time column; no late policy here (the partitions decide); the
        integer ``sum`` columns whose bound is global."""
        self.time = t._time
        self.rule = LateRule(None)  # never revises: the partitions decide late rows
        self.sum_max = dict(t.sum_max)
        k = t.window_kind
        # Cond. 6.9's stream-wide terms, measured here over every tuple (forced modes: none)
        self.terms = (StreamTerms((k.r, k.s, k.o), t.cfg.value_columns)
                      if t.logic.monitor else None)
        return [self.time] + [c for c in t.cfg.value_columns if c != self.time]

    def _keys_compact_min(self) -> int:
        return int(_adapt.KEYS_COMPACT_MIN)

    def _presets(self, batch: pa.RecordBatch, times: np.ndarray | None,
                 codes: np.ndarray) -> dict[str, Any]:
        """What one thread knows before this batch: Cond. 6.9's stream-wide terms
        (:class:`~oop.adapt.extents.StreamTerms`, this batch measured; one compiled pass
        over its times), var/std's shift (the column's first
        valid value, :meth:`AdaptWID.fix_shifts`) and the bound of every exact integer sum
        over the whole column so far (one thread's ``sum_max``; a partition's own is never
        larger). O(rows) per such column."""
        presets: dict[str, Any] = {}
        if self.terms is not None:  # what one thread decides this batch with, then measure it
            presets["stream_terms"] = self.terms.on_batch(
                batch, time_values(batch, self.time, self.inputs[0].name))
        t = self.template
        var_cols = {a.column for a in t.logic.aggs if a.op == "sumsq" and a.shift is None}
        if var_cols:  # var/std's shift: the one one thread fixes, from the whole batch
            t.fix_shifts({c: _adapt._values(batch, c) for c in var_cols if c})
        if t.preset_shift:
            presets["preset_shift"] = t.preset_shift
        if not self.sum_max:
            return presets
        for c in self.sum_max:
            v = _adapt._values(batch, c)[0]
            self.sum_max[c] = max(self.sum_max[c], max_abs(v.astype(np.int64, copy=False)))
        presets["sum_max"] = dict(self.sum_max)
        return presets

    # ---- elements ----------------------------------------------------------------------
    def _on_batch(self, batch: pa.RecordBatch) -> list[Element]:
        """Every row to its partition (late ones too: the partition counts them, by
        AdaptWID's rule against the same punctuation)."""
        if batch.num_rows == 0:
            return []
        self.check_schema(batch, 0)
        return self._scatter(batch, None)  # no time decision here

    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        """As the window; then, when one thread would (after the close, the dictionary at
        its check size), the global key compaction."""
        before = self.lwm
        out = super().on_punctuation(p, port)
        if self.lwm > before and self.enc.n_codes >= self._keys_compact_at:
            out.extend(self._compact_keys())
        return out

    def _punctuation_task(self, p: Punctuation) -> Callable[[Any], list[Element]]:
        """Each partition is told the one-thread ``wed`` after ``p`` first (forced modes:
        as the window)."""
        if self.terms is None:
            return super()._punctuation_task(p)
        return partial(_punctuate, p=p, terms=self.terms.on_punctuation(p.value))

    def flush(self) -> list[Element]:
        """As the window; each partition first told the one-thread terms (the validity
        columns of a batch that gave it no row)."""
        if self.terms is not None:
            terms = self.terms.terms()
            for q in self.parts:  # ordered before the flush on each partition's thread
                q.submit(partial(setattr, q.op, "stream_terms", terms))
        return super().flush()

    def _collect(self, keep_punctuations: int) -> list[Element]:
        out = super()._collect(keep_punctuations)
        late: dict[str, int] = {}
        for part in self.parts:
            for k, v in part.late.items():
                late[k] = late.get(k, 0) + v
        self.metrics.late = late
        return out

    def _own_state(self) -> dict[str, Any]:
        """The global sum bounds, the var/std shifts fixed and Cond. 6.9's terms."""
        return {"sum_max": dict(self.sum_max), "shifts": dict(self.template.preset_shift),
                "terms": None if self.terms is None else self.terms.snapshot()}

    def _restore_own(self, own: dict[str, Any]) -> None:
        self.sum_max = dict(own["sum_max"])
        self.template.preset_shift = dict(own["shifts"])
        if self.terms is not None:
            self.terms.restore(own["terms"])

    def adapt_metrics(self) -> dict[str, Any]:
        """Each partition's :meth:`AdaptWID.adapt_metrics` (its groups' modes, as one thread
        decides them: the switch counts and the timeline's group counts add up to one
        thread's; ``wed`` and ``tup`` are one thread's)."""
        return {"partitions": [p.op.adapt_metrics() for p in self.parts]}
