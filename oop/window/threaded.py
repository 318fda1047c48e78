"""ThreadedWindow: one window aggregation run as N key partitions on N threads.

(:class:`oop.adapt.threaded.ThreadedAdapt` partitions AdaptWID the same way, through
the hooks of :class:`ThreadedWindow`.)

What it computes: exactly what :class:`~oop.window.aggregate.WindowAggregate`
(WID / Paned-WID, ``method`` auto/wid/paned) computes over the same input,
row for row and **in the same row order** -- it is that operator, split by
key (the Quill / GroupApply pattern of 001 and Trill: every group's windows
depend only on that group's tuples and on the punctuation).

How:

* **Punctuation before partitioning.** The stream arrives punctuated (the
  source generates punctuation on the whole input); every punctuation goes
  to every partition, so each partition closes the same windows at the same
  time.
* **Late tuples are decided here, once**, against the last punctuation seen
  (same bound, same policy, same counters as one thread), before any row is
  partitioned: no partition ever sees a late row (``late="update"``: only
  the rows beyond ``allowed_lateness`` are decided here; the revising ones
  go to their partition, which re-emits its revised windows).
* **Global key codes.** The ``by`` columns are encoded once, by one
  :class:`~oop.window.keys.KeyEncoder` (dense codes in order of first
  appearance -- the codes the one-thread operator would give). Row ``i``
  goes to its key's partition, ``code mod N`` for the code the key got when
  first seen (kept for the key's life: a compaction renumbers codes, never
  moves a key's state to another partition): a stable counting sort in one compiled
  pass (:func:`partition_rows`) gives each partition its row numbers in
  arrival order, and each partition gathers its rows on its own thread;
  the first-appearance order spreads the frequent keys round-robin.
  The dictionary forgets the keys no partition holds any more, by the rule
  of the one-thread operator (:meth:`ThreadedWindow._compact_keys`): the
  kept codes keep their order, and the partitions replace their key values.
  Partitions group by the code (an int64 column ``__oop_key``), so no
  partition hashes strings, and only the columns the aggregates need cross.
* **N copies of the operator**, one per partition, each fed by its own
  worker thread (a one-thread pool: elements are applied in order). The
  numba kernels on the hot path are compiled ``nogil=True``; Arrow and
  numpy release the GIL in their loops.
* **Combining (Meld, 004 §4).** The outputs of one input element (a
  punctuation closes windows in every partition) are merged by
  ``(window_end, code)``: the one-thread operator emits each punctuation's
  windows ordered by window, then by key code, and within one partition the
  local codes follow the global ones (a subsequence in arrival order), so a
  compiled merge of the partitions' sorted runs reproduces that order (a run
  that is not sorted, e.g. after a partition compacted its key dictionary,
  is sorted first). The ``__oop_key`` column is then replaced by the key
  columns. The output punctuation on ``window_end`` is the minimum over the
  partitions' latest (Meld), forwarded when it grows.
* **Cut merges.** Where the machine has more cores than there are partitions,
  and at least 4 (:func:`cut_merges`), a merge of at least
  :data:`CUT_MERGE_MIN_ROWS` rows is cut by value into one range per
  partition: pivots ``(window_end, code)``
  at the quantiles of the longest run, each run cut at them by binary search
  (:func:`run_cuts`), so every row of range ``j`` sorts before every row of
  range ``j + 1``. The ranges are merged and gathered at once, this thread
  taking the first and the merge threads the others, and leave as one batch
  each, in range order: the same rows in the same order, and this thread,
  the pipeline's serial part, does ``1 / N`` of the merge. (On 2 or 3 cores the
  partitions, the reader and the writer already fill them, and the cut
  ranges' extra ~30 % of merge CPU would only slow the run: there it is off.)
* **Pipelining.** ``lag=1``: a punctuation's results are collected when
  the *next* punctuation arrives (or at the end), so the partitions
  aggregate batch k while this thread merges and writes the results of k-1
  and reads batch k+1. The output stream (rows, their order, punctuations)
  is the same; it leaves one punctuation later -- for finite inputs only
  (``oop replay`` sets it for files): on a live feed that pauses, the
  results of the last punctuation would wait for the next one. Default
  ``lag=0``: each punctuation's results leave at once.

Punctuation rule: as the one-thread operator (emits every window with
``end <= v``, purges it, forwards ``P("window_end", e)``), minimum over the
partitions. Not supported (:func:`threadable` says why; ``Stream.window``
then runs one thread): no ``by`` key, row-based, landmark and
forward-context-aware windows, user-defined aggregates (not known to release
the GIL).

Checkpoints (:meth:`snapshot`, between two elements, as
:class:`~oop.plan.job.Job` takes them): every partition first finishes the
elements given so far, and the results the pipeline holds back (``lag=1``:
the last punctuation's, not yet released) are merged now and *carried in the
snapshot*, released after a restore where the uninterrupted run releases them
-- at the next punctuation or the end. Emitting them at the checkpoint
instead would move them one punctuation earlier than the uninterrupted run
(and needs a way out of ``snapshot()``); carried, the output stream -- rows,
their order, batches and punctuations -- is the same with or without
checkpoints and restarts, and the sink's commit point covers exactly what
left before the cut. The snapshot (:class:`~oop.window.state.ThreadedState`)
holds the global key dictionary and each key's partition, the driving
thread's last punctuation, shifts and compaction threshold, each partition's
operator state (taken on its own thread), latest output punctuation and late
counters, and what the template decided (the method). A restore into a run
with another partition count rebuilds the checkpoint's count (a key's state
lives in its partition; the rows are the same for any count).

Cost: this thread does O(rows) for late rows, key encoding and the scatter,
and O(output rows x log N) for the merge (``1 / N`` of it when merges are cut);
the partitions do the rest.
"""

from __future__ import annotations

import time as _time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Sequence

import numba as nb
import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.limits import current_budget, usable_cores
from oop.metrics import StateSize, ThreadClock
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import int64_view, time_values
from oop.window.aggregates import Agg, as_aggs
from oop.window import aggregate as _aggregate
from oop.window.build import one_window_operator
from oop.window.keys import KeyEncoder
from oop.window.kinds import Landmark, Sliding, WindowKind
from oop.window.state import ThreadedState
from oop.window.values import column_values, pick_shift

__all__ = ["ThreadedWindow", "threadable", "partition_rows", "merge_order", "run_cuts", "pivots",
           "KEY", "CUT_MERGE_MIN_ROWS", "CUT_MERGES", "CUT_MERGES_MIN_CORES",
           "cut_merges"]

#: the int64 group column the partitions aggregate by (the global key code)
KEY = "__oop_key"

#: a merge of at least this many result rows is cut into one range per partition, the ranges
#: merged and gathered at once (the driving thread takes one, merge threads the others);
#: smaller ones stay on the driving thread (read at each merge)
CUT_MERGE_MIN_ROWS = 1 << 12

#: whether merges are cut at all: None (default) when the process may run on more cores than
#: there are partitions and on at least :data:`CUT_MERGES_MIN_CORES`; True / False force it
#: (read at each merge)
CUT_MERGES: bool | None = None

#: cut ranges cost ~30 % more CPU than one whole merge (the 50M sliding benchmark), so they
#: pay only where the driving thread, not the cores, bounds the run. By the per-thread CPU
#: of that benchmark (driver 1.5 s of which merge 0.8 s, all threads 5.4 s): on 3 cores the
#: run is bound by its total CPU and cutting loses ~4 %; on 4 it gains ~8 %, on 8 ~35 %
#: (docs/benchmarks.md, "What 2, 16 and 64 cores give")
CUT_MERGES_MIN_CORES = 4


def cut_merges(partitions: int, cores: int) -> bool:
    """Whether a merge of ``partitions`` runs is cut into ranges on a machine of ``cores``
    usable cores (:data:`CUT_MERGES`, :data:`CUT_MERGES_MIN_CORES`)."""
    if CUT_MERGES is not None:
        return CUT_MERGES
    return cores > partitions and cores >= CUT_MERGES_MIN_CORES


# ---- kernels ----------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def partition_rows(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, bounds): rows of partition ``p = codes mod n`` are
    ``order[bounds[p]:bounds[p+1]]``, in arrival order (stable counting sort). O(rows)."""
    bounds = np.zeros(n + 1, np.int64)
    for i in range(codes.shape[0]):
        bounds[codes[i] % n + 1] += 1
    for p in range(n):
        bounds[p + 1] += bounds[p]
    fill = bounds[:n].copy()
    order = np.empty(codes.shape[0], np.int64)
    for i in range(codes.shape[0]):
        p = codes[i] % n
        order[fill[p]] = i
        fill[p] += 1
    return order, bounds


def partition_rows_reference(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Obviously correct :func:`partition_rows` (a stable argsort of the partition ids)."""
    pid = codes % n
    order = np.argsort(pid, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(pid, minlength=n))))
    return order.astype(np.int64), bounds.astype(np.int64)


@nb.njit(cache=True, nogil=True)
def _is_sorted(a: np.ndarray, b: np.ndarray, lo: int, hi: int) -> bool:
    for i in range(lo + 1, hi):
        if a[i] < a[i - 1] or (a[i] == a[i - 1] and b[i] < b[i - 1]):
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _merge_runs(a: np.ndarray, b: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Permutation merging the runs ``[bounds[r], bounds[r+1])`` (each sorted by (a, b)) into
    one sequence sorted by (a, b), ties by run then position (stable). Pairwise rounds:
    O(rows x log runs)."""
    n = a.shape[0]
    cur = np.arange(n)
    tmp = np.empty(n, np.int64)
    bnd = bounds.copy()
    runs = bnd.shape[0] - 1
    while runs > 1:
        nb_ = np.empty((runs + 1) // 2 + 1, np.int64)
        k = 0
        r = 0
        while r < runs:
            lo = bnd[r]
            if r + 1 == runs:
                hi = bnd[r + 1]
                for i in range(lo, hi):
                    tmp[i] = cur[i]
            else:
                mid, hi = bnd[r + 1], bnd[r + 2]
                i, j, o = lo, mid, lo
                while i < mid and j < hi:
                    x, y = cur[i], cur[j]
                    if a[y] < a[x] or (a[y] == a[x] and b[y] < b[x]):
                        tmp[o] = y
                        j += 1
                    else:
                        tmp[o] = x
                        i += 1
                    o += 1
                while i < mid:
                    tmp[o] = cur[i]
                    i += 1
                    o += 1
                while j < hi:
                    tmp[o] = cur[j]
                    j += 1
                    o += 1
            nb_[k] = lo
            k += 1
            r += 2
        nb_[k] = bnd[runs]
        bnd = nb_[: k + 1]
        runs = k
        cur, tmp = tmp, cur
    return cur


def merge_order(a: np.ndarray, b: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Stable order of the rows sorted by ``(a, b)``, given runs ``bounds`` each usually
    sorted already (a run that is not is sorted first). O(rows x log runs)."""
    a = np.ascontiguousarray(a, np.int64)
    b = np.ascontiguousarray(b, np.int64)
    fix = [r for r in range(bounds.shape[0] - 1)
           if not _is_sorted(a, b, int(bounds[r]), int(bounds[r + 1]))]
    pre = None
    if fix:
        pre = np.arange(a.shape[0])
        for r in fix:
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            pre[lo:hi] = lo + np.lexsort((b[lo:hi], a[lo:hi]))
        a, b = a[pre], b[pre]
    order = _merge_runs(a, b, np.asarray(bounds, np.int64))
    return order if pre is None else pre[order]


def merge_order_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Obviously correct :func:`merge_order`: a stable lexicographic sort."""
    return np.lexsort((b, a))


@nb.njit(cache=True, nogil=True)
def run_cuts(a: np.ndarray, b: np.ndarray, pa_: np.ndarray, pb_: np.ndarray) -> np.ndarray:
    """Where the pivots ``(pa_[j], pb_[j])`` cut one run sorted by ``(a, b)``: ``cuts[j]``
    (``j = 0 .. k``, ``k = len(pa_) + 1``) is the first row at or after ``cuts[j - 1]`` that
    is not below pivot ``j - 1``; ``cuts[0] = 0``, ``cuts[k] = len(a)``. Range ``j`` of the
    run is ``[cuts[j], cuts[j + 1])``: every row of range ``j`` of any run cut by the same
    pivots sorts before every row of range ``j + 1`` of any run. The search keeps
    ``a[cuts[j] - 1] < pivot <= a[cuts[j]]`` on any input, so a run is sorted if and only if
    each of its ranges is. Binary searches: O(k x log rows)."""
    n = a.shape[0]
    k = pa_.shape[0] + 1
    cuts = np.empty(k + 1, np.int64)
    cuts[0] = 0
    cuts[k] = n
    for j in range(1, k):
        lo, hi = cuts[j - 1], n
        x, y = pa_[j - 1], pb_[j - 1]
        while lo < hi:
            mid = (lo + hi) // 2
            if a[mid] < x or (a[mid] == x and b[mid] < y):
                lo = mid + 1
            else:
                hi = mid
        cuts[j] = lo
    return cuts


def run_cuts_reference(a: np.ndarray, b: np.ndarray,
                       pivots: list[tuple[int, int]]) -> np.ndarray:
    """Obviously correct :func:`run_cuts` on a sorted run and ascending pivots: the number
    of rows below each pivot."""
    rows = list(zip(a.tolist(), b.tolist()))
    return np.asarray([0, *(sum(1 for x in rows if x < p) for p in pivots), len(rows)], np.int64)


def pivots(ends: Sequence[np.ndarray], codes: Sequence[np.ndarray],
           k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k - 1`` pivots cutting the merge of sorted runs into ``k`` ranges of about equal
    size: the ``j / k`` quantiles of the longest run (the partitions hold keys dealt
    round-robin, so their runs spread alike). O(k)."""
    r = max(range(len(ends)), key=lambda i: ends[i].shape[0])
    at = (np.arange(1, k, dtype=np.int64) * ends[r].shape[0]) // k
    return ends[r][at].copy(), codes[r][at].copy()


# ---- planning -----------------------------------------------------------------
def threadable(kind: WindowKind, aggs: Agg | Sequence[Agg], by: Sequence[str]) -> str | None:
    """Why this window query cannot run on key partitions (None: it can)."""
    if not by:
        return "there is no by= key to partition on"
    if not isinstance(kind, Sliding) or isinstance(kind, Landmark) or kind.row_based or kind.fca:
        return f"{type(kind).__name__} windows are not partitioned (tumbling and sliding are)"
    if any(a.spec.store_op == "udaf" for a in as_aggs(aggs)):
        return "user-defined aggregates are not known to be thread-safe"
    return None


def _on_batch(op: Any, batch: pa.RecordBatch, rows: np.ndarray,
              presets: dict[str, Any]) -> list[Element]:
    """A partition's share of a batch: its ``rows`` (in arrival order) into its operator,
    after setting the attributes ``presets`` (what one thread would know by then: the
    variance shifts, :meth:`ThreadedWindow._presets`; each a dict, copied: the operator
    may update its own)."""
    for attr, value in presets.items():
        setattr(op, attr, dict(value))
    return op.on_batch(batch if rows.shape[0] == batch.num_rows else batch.take(pa.array(rows)))


def _columns(table: pa.Table) -> list[pa.Array]:
    """The table's columns after the first (``__oop_key``), one array each."""
    return [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns[1:]]


def _merge_range(batches: Sequence[pa.RecordBatch], ends: Sequence[np.ndarray],
                 codes: Sequence[np.ndarray], cuts: np.ndarray, j: int,
                 keys: Callable[[np.ndarray], list[pa.Array]],
                 schema: pa.Schema) -> pa.RecordBatch | None:
    """Range ``j`` of a cut merge (``cuts[r]``: :func:`run_cuts` of run ``r``) in the
    one-thread order: its pieces of the runs merged by ``(window_end, code)``, gathered, and
    ``__oop_key`` replaced by the key columns. None when a piece is not sorted (the merge
    is then done whole). Runs on any thread: it reads only (``keys`` is the dictionary's
    lookup, built before). O(rows of the range x log runs)."""
    lo, hi = cuts[:, j], cuts[:, j + 1]
    if not all(_is_sorted(e, c, int(x), int(y)) for e, c, x, y in zip(ends, codes, lo, hi)):
        return None
    end = np.concatenate([e[x:y] for e, x, y in zip(ends, lo, hi)])
    code = np.concatenate([c[x:y] for c, x, y in zip(codes, lo, hi)])
    order = _merge_runs(end, code, np.concatenate(([0], np.cumsum(hi - lo))).astype(np.int64))
    part = pa.Table.from_batches([b.slice(x, y - x) for b, x, y in zip(batches, lo, hi)])
    taken = part.combine_chunks().take(pa.array(order))
    return pa.RecordBatch.from_arrays([*keys(code[order]), *_columns(taken)], schema=schema)


class _Partition:
    """One partition: its operator and the one thread that applies elements to it in order."""

    def __init__(self, op: Operator, name: str) -> None:
        self.op = op
        self.clock = ThreadClock()  # CPU time of its thread
        self.pool = ThreadPoolExecutor(1, name, initializer=self.clock.start)
        self.state = StateSize()
        self.out_punct: int | None = None  # latest P(window_end, v) it emitted
        self.late: dict[str, int] = {}  # its late counters after its last element (a copy)

    @property
    def cpu_s(self) -> float:
        """CPU seconds its thread spent so far."""
        return self.clock.seconds

    def _run(self, fn: Callable[[], list[Element]]) -> list[Element]:
        out = fn()
        self.state = self.op.state_size()
        if self.op.metrics.late:
            self.late = dict(self.op.metrics.late)
        return out

    def submit(self, fn: Callable[[], list[Element]]) -> "Future[list[Element]]":
        return self.pool.submit(self._run, fn)


class ThreadedWindow(Operator):
    """WindowAggregate over ``threads`` key partitions (see the module docstring).

    The partitioned operator is a hook: :meth:`_one_operator` builds the one-thread
    operator of the query (the template, which validates it and gives the output schema,
    and each partition, grouping by ``__oop_key``), :meth:`_adopt` reads from the template
    what this operator needs, :meth:`_presets` what a partition must know before a batch,
    :meth:`_keys_compact_min` the compaction threshold. A subclass partitions another
    operator that emits in the same order -- by window, then by key code -- and holds
    ``held_key_values`` / ``rekey``: :class:`oop.adapt.threaded.ThreadedAdapt`.
    """

    def __init__(self, kind: WindowKind, aggs: Agg | Sequence[Agg], *, threads: int,
                 by: str | Sequence[str] = (), method: str = "auto",
                 late: LatePolicy | str | None = None, allowed_lateness: int | str = 0,
                 emit_wid: bool = False, name: str = "window", layout: str = "auto",
                 time: str | None = None, lag: int = 0) -> None:
        super().__init__(name)
        self.by = [by] if isinstance(by, str) else list(by)
        why = threadable(kind, aggs, self.by)
        if why is not None:
            raise ConfigError(f"{name}: cannot run on {threads} threads: {why}; use threads=1")
        if threads < 2:
            raise ConfigError(f"{name}: threads={threads}; {type(self).__name__} needs >= 2 "
                              "(one thread is the plain operator)")
        if lag not in (0, 1):
            raise ConfigError(f"{name}: lag={lag}; use 0 (results at once) or 1 (pipelined)")
        self.n = threads
        self.lag = lag
        self.kw: dict[str, Any] = dict(kind=kind, aggs=as_aggs(aggs), method=method, late=late,
                                       allowed_lateness=allowed_lateness, emit_wid=emit_wid,
                                       layout=layout, time=time)
        self.shifts: dict[str, Any] = {}
        self.shift_cols: list[str] = []
        self.sumsq_cols: set[str] = set()
        self._plan: dict[str, Any] = {"threads": threads}
        #: pipeline stages (objects with ``cpu_s``: oop.plan.background) whose CPU time the
        #: plan summary reports, e.g. ``{"writer_cpu_s": sink}`` (set by ``oop replay``)
        self.stages: dict[str, Any] = {}

    @property
    def threads_asked(self) -> int | None:
        """The partition count this run asked for when a restore took the checkpoint's
        instead (None otherwise), as :class:`~oop.join.keyed_join.KeyedJoin` says it."""
        asked = self._plan.get("threads_asked")
        return None if asked is None else int(asked)

    @property
    def plan_info(self) -> dict[str, Any]:
        """The partitions' choices (method, layout, ...), ``threads``, and after the end the
        CPU seconds of the driving thread, each partition and the pipeline stages."""
        return {**self._plan, **{k: round(float(v.cpu_s), 3) for k, v in self.stages.items()}}

    # ---- opening ------------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        if KEY in info.schema.names:
            raise ConfigError(f"{self.name}: the input has a column {KEY!r}, which the threaded "
                              "window uses internally; rename it or use threads=1")
        # the one-thread operator: validates the query, gives the output schema, the time
        # column, the late policy, and decides the method on the first batch
        self.template = self._one_operator(self.by, self.name)
        out = self.template.open(inputs)
        cols = self._adopt(self.template)
        fields = [info.schema.field(c) for c in cols] + [pa.field(KEY, pa.int64())]
        self.part_cols = cols
        self.part_schema = pa.schema(fields)
        self._pinfo = StreamInfo(info.name, self.part_schema,
                                 {a: u for a, u in info.times.items() if a in cols}, self.time)
        self.enc = KeyEncoder(self.by)
        self.part_of = np.zeros(0, np.int64)  # partition of each global code (module doc)
        # the global key dictionary is this operator's own state (the partitions charge theirs)
        self.budget = current_budget()
        self._charged_codes = 0
        self._keys_compact_at = self._keys_compact_min()  # see _compact_keys
        self.parts: list[_Partition] = []
        self._stopped = False
        self._open_partitions(self.n)
        self.out_schema = out.schema
        self.n_keys = len(self.by)
        self.lwm = INT64_MIN
        self.out_punct: int | None = None
        #: elements given to the partitions, oldest first: (is a punctuation, the partitions'
        #: futures, their merged results once settled -- :meth:`_settle`; else None)
        self.pending: deque[tuple[bool, list[Future[list[Element]]], list[Element] | None]] = \
            deque()
        self._cpu0 = _time.thread_time()  # the driving thread's CPU time, see flush
        self._cpu_batch = self._cpu_merge = 0.0  # of which: batches in, merging results out
        return out

    def _open_partitions(self, n: int) -> None:
        """``n`` partitions, each a fresh opened one-thread operator with its thread (the
        ones there were are stopped first)."""
        self.close()
        self.n = n
        self._plan["threads"] = n
        self.parts = []
        for i in range(n):
            op = self._one_operator([KEY], f"{self.name}[{i}]")
            op.open([self._pinfo])
            self.parts.append(_Partition(op, f"oop-{self.name}-{i}"))
        # the merge threads: ranges 1 .. n-1 of a cut merge (the driving thread takes 0)
        self.cores = usable_cores()
        self.merge_clocks: list[ThreadClock] = []
        self.mergers = ThreadPoolExecutor(n - 1, f"oop-{self.name}-merge",
                                          initializer=self._start_merge_clock)
        self._stopped = False

    def _start_merge_clock(self) -> None:
        clock = ThreadClock()
        clock.start()
        self.merge_clocks.append(clock)

    # ---- the partitioned operator (hooks) ---------------------------------------------
    def _one_operator(self, by: Sequence[str], name: str) -> Operator:
        """The one-thread operator of this query grouping by ``by`` (not opened)."""
        return one_window_operator(by=by, name=name, **self.kw)

    def _adopt(self, t: Any) -> list[str]:
        """Read the opened template ``t``: time column, late rule, the shifted
        variance columns; returns the columns the partitions need (time first)."""
        self.time = t.time
        self.rule = t.rule
        self.shift_cols = sorted({li.lane.column for li in t.lanes if li.lane.column and (
            li.key[0] == "sumsq" or (li.key[0] == "sum" and li.dtype == np.float64))}
            - set(t.value_ranks))
        self.sumsq_cols = {li.lane.column for li in t.lanes if li.key[0] == "sumsq"}
        return [self.time] + [c for c in dict.fromkeys(a.column for a in t.aggs if a.column)
                              if c != self.time]

    def _keys_compact_min(self) -> int:
        """The key count at which the global dictionary is first checked for dead keys
        (the one-thread operator's own ``KEYS_COMPACT_MIN``, read at each use)."""
        return int(_aggregate.KEYS_COMPACT_MIN)

    def _presets(self, batch: pa.RecordBatch, times: np.ndarray | None,
                 codes: np.ndarray) -> dict[str, Any]:
        """Before ``batch`` goes to the partitions: the one-thread decisions its first rows
        make (the method, by the cost model on the first batch; the variance shifts), as
        attributes set on each partition's operator."""
        if self.template.method is None:  # the one-thread cost model, on the same first batch
            assert times is not None
            self.template._decide(times, codes)
            for p in self.parts:
                p.op._set_method(self.template.method, dict(self.template.plan_info))
        self._pick_shifts(batch)
        return {"preset_shift": dict(self.shifts)}

    # ---- elements -----------------------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        t0 = _time.thread_time()
        try:
            return self._on_batch(batch)
        finally:
            self._cpu_batch += _time.thread_time() - t0

    def _on_batch(self, batch: pa.RecordBatch) -> list[Element]:
        if batch.num_rows == 0:
            return []
        times = time_values(batch, self.time, self.inputs[0].name)
        batch, times, _ = self.rule.split(self, batch, times, self.lwm, self.time)
        if batch.num_rows == 0:
            return []
        early = self._compact_keys() if self.enc.n_codes >= self._keys_compact_at else []
        return early + self._scatter(batch, times)

    def _scatter(self, batch: pa.RecordBatch, times: np.ndarray | None) -> list[Element]:
        """Encode ``batch``'s keys (global codes), hand each partition its rows, on its
        own thread; returns what ``late="update"`` revisions leave now. ``times``: the
        batch's times, for :meth:`_presets`. O(rows)."""
        codes = self.enc.encode(batch)
        if self.enc.n_codes > self._charged_codes:  # the dictionary grew: within --max-state?
            self._charged_codes = self.enc.n_codes
            self.budget.grow(self, self.name, self.enc.nbytes(),
                             f"global key dictionary of {self.enc.n_codes} live keys")
        presets = self._presets(batch, times, codes)
        if self.enc.n_codes > self.part_of.shape[0]:  # new keys: partition fixed for life
            new = np.arange(self.part_of.shape[0], self.enc.n_codes, dtype=np.int64) % self.n
            self.part_of = np.concatenate((self.part_of, new))
        order, bounds = partition_rows(self.part_of[codes], self.n)
        arrays = [batch.column(c) for c in self.part_cols] + [pa.array(codes, pa.int64())]
        sub = pa.RecordBatch.from_arrays(arrays, schema=self.part_schema)
        futs = []
        for p, lo, hi in zip(self.parts, bounds[:-1].tolist(), bounds[1:].tolist()):
            if hi > lo:  # each partition gathers its own rows, on its own thread
                futs.append(p.submit(partial(_on_batch, p.op, sub, order[lo:hi], presets)))
        self.pending.append((False, futs, None))
        if self.rule.revises:
            return self._collect(keep_punctuations=self.lag)
        return []

    def _compact_keys(self) -> list[Element]:
        """Forget the global keys no partition holds any more, by the rule of
        :meth:`WindowAggregate._compact_keys <oop.window.aggregate.WindowAggregate._compact_keys>`:
        checked once the dictionary holds ``KEYS_COMPACT_MIN`` keys and then each time it
        doubled; compacts when more than half of its keys are dead.

        First every pending element is finished and its results merged (returned: with
        ``lag=1`` they leave one element early -- the same rows, in the same order), so no
        partition works and no result holds an old code. The live codes are the union of
        the key values the partitions' state holds (:meth:`WindowAggregate.held_key_values`);
        the global dictionary keeps them (:meth:`KeyEncoder.compact`, same relative order,
        so the merge order by code is kept) and every partition replaces its key values by
        the new codes (:meth:`WindowAggregate.rekey`, on its own thread). Cost O(state + live
        keys), amortized over the keys added since the last check."""
        out = self._collect(keep_punctuations=0)
        n = self.enc.n_codes
        held = [q.submit(lambda op=q.op: op.held_key_values()) for q in self.parts]
        values = [f.result() for f in held]
        if any(v is None for v in values):
            self._keys_compact_at = 1 << 62
            return out
        live = np.zeros(n, bool)
        for v in values:
            live[v] = True
        keep = np.flatnonzero(live)
        if 2 * keep.shape[0] >= n:
            self._keys_compact_at = max(self._keys_compact_min(), 2 * n)
            return out
        remap = np.full(n, -1, np.int64)
        remap[keep] = np.arange(keep.shape[0])
        self.enc.compact(keep)
        self.part_of = self.part_of[keep]  # a kept key stays in its partition
        for f in [q.submit(lambda op=q.op: op.rekey(remap) or []) for q in self.parts]:
            f.result()
        self._charged_codes = self.enc.n_codes
        self.budget.report(self, self.enc.nbytes())
        self._keys_compact_at = max(self._keys_compact_min(), 2 * keep.shape[0])
        self._plan["global_key_compactions"] = self._plan.get("global_key_compactions", 0) + 1
        return out

    def _pick_shifts(self, batch: pa.RecordBatch) -> None:
        """The variance shift of every shifted column, as one thread picks it: the first
        valid finite value of the first batch that reaches the state with one
        (:func:`~oop.window.values.lane_input`); the partitions start their rings with it."""
        for c in self.shift_cols:
            if c not in self.shifts:
                cv = column_values(batch, c)
                if c not in self.sumsq_cols and cv.values.dtype != np.int64:
                    self.shift_cols = [x for x in self.shift_cols if x != c]
                    continue  # float, no var/std: its plain sum lane is never shifted
                v = pick_shift(cv)
                if v is not None:
                    self.shifts[c] = v

    def on_punctuation(self, p: Element, port: int = 0) -> list[Element]:
        if not isinstance(p, Punctuation) or p.attr != self.time or p.value <= self.lwm:
            return []
        self.lwm = p.value
        task = self._punctuation_task(p)
        self.pending.append((True, [q.submit(partial(task, q.op)) for q in self.parts], None))
        return self._collect(keep_punctuations=self.lag)

    def _punctuation_task(self, p: Punctuation) -> Callable[[Any], list[Element]]:
        """What each partition runs on its thread for the punctuation ``p`` (a subclass
        may first tell the partition what one thread knows at ``p``)."""
        return lambda op: op.on_punctuation(p)

    def flush(self) -> list[Element]:
        self.pending.append((True, [q.submit(q.op.flush) for q in self.parts], None))
        out = self._collect(keep_punctuations=0)
        self._plan.update({k: v for k, v in self.parts[0].op.plan_info.items()
                           if k not in self._plan})
        # where the CPU time went (per-core figures that a loaded machine does not distort)
        self._plan["driver_cpu_s"] = round(_time.thread_time() - self._cpu0, 3)
        self._plan["driver_window_in_cpu_s"] = round(self._cpu_batch, 3)
        self._plan["driver_window_out_cpu_s"] = round(self._cpu_merge, 3)
        self._plan["partition_cpu_s"] = [round(p.cpu_s, 3) for p in self.parts]
        self._plan["merge_cpu_s"] = round(sum(c.seconds for c in self.merge_clocks), 3)
        self.close()
        return out

    def close(self) -> None:
        """Stop the partitions' threads (after the end, or to abandon a run)."""
        for p in getattr(self, "parts", ()):
            p.clock.stop()  # before its thread ends (its clock goes with it)
            p.pool.shutdown(wait=True)
        for clock in getattr(self, "merge_clocks", ()):
            clock.stop()
        if getattr(self, "mergers", None) is not None:
            self.mergers.shutdown(wait=True)
        self._stopped = bool(getattr(self, "parts", ()))

    # ---- combining ----------------------------------------------------------
    def _collect(self, keep_punctuations: int) -> list[Element]:
        """Merge the results of the pending elements, oldest first, leaving the newest
        ``keep_punctuations`` punctuation elements (and what follows them) pending."""
        waiting = sum(1 for is_p, _, _ in self.pending if is_p)
        out: list[Element] = []
        while self.pending and waiting > keep_punctuations:
            is_p, futs, done = self.pending.popleft()
            waiting -= is_p
            out.extend(done if done is not None else
                       self._combine([f.result() for f in futs], is_p))
        return out

    def _settle(self) -> None:
        """Wait for every pending element and merge its results, oldest first, keeping
        them pending (released by :meth:`_collect` where they would have been): the
        partitions are idle and no result depends on work in flight. O(pending results)."""
        for i, (is_p, futs, done) in enumerate(self.pending):
            if done is None:
                self.pending[i] = (is_p, [], self._combine([f.result() for f in futs], is_p))

    def _combine(self, results: list[list[Element]], with_punct: bool) -> list[Element]:
        batches: list[pa.RecordBatch] = []
        for part, res in zip(self.parts, results) if with_punct else ((None, r) for r in results):
            for el in res:
                if isinstance(el, pa.RecordBatch):
                    if el.num_rows:
                        batches.append(el)
                elif isinstance(el, Punctuation) and part is not None:
                    part.out_punct = el.value
        out: list[Element] = []
        if batches:
            out.extend(self._merge(batches))
        if with_punct:
            vals = [p.out_punct for p in self.parts]
            if all(v is not None for v in vals):
                v = min(vals)  # type: ignore[type-var]
                if self.out_punct is None or v > self.out_punct:
                    self.out_punct = v
                    out.append(Punctuation("window_end", v))
        return out

    def _merge(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """The batches in the one-thread order: by window, then by global key code (one
        batch, or one per range of a cut merge: the same rows in the same order)."""
        t0 = _time.thread_time()
        try:
            return self._merge_now(batches)
        finally:
            self._cpu_merge += _time.thread_time() - t0

    def _merge_now(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        ends = [int64_view(b.column(2)) for b in batches]  # window_end, never null
        codes = [int64_view(b.column(0)) for b in batches]
        if (len(batches) > 1 and sum(e.shape[0] for e in ends) >= CUT_MERGE_MIN_ROWS
                and cut_merges(self.n, self.cores)):
            cut = self._cut_merge(batches, ends, codes)
            if cut is not None:
                return cut
        return [self._whole_merge(batches, ends, codes)]

    def _cut_merge(self, batches: list[pa.RecordBatch], ends: list[np.ndarray],
                   codes: list[np.ndarray]) -> list[pa.RecordBatch] | None:
        """The merge cut by value into one range per partition (:func:`run_cuts`), the
        ranges merged at once: range 0 on this thread, the others on the merge threads. A
        batch per range, in range order. None when a run is not sorted."""
        k = self.n
        self.enc.keys(codes[0][:1])  # builds the lookup here (once per new keys)
        pv = pivots(ends, codes, k)
        cuts = np.stack([run_cuts(e, c, *pv) for e, c in zip(ends, codes)])
        task = partial(_merge_range, batches, ends, codes, cuts, keys=self.enc.keys,
                       schema=self.out_schema)
        futs = [self.mergers.submit(task, j) for j in range(1, k)]
        out = [task(0), *(f.result() for f in futs)]
        if any(b is None for b in out):
            return None
        return [b for b in out if b.num_rows] or out[:1]  # type: ignore[union-attr,misc]

    def _whole_merge(self, batches: list[pa.RecordBatch], ends: list[np.ndarray],
                     codes: list[np.ndarray]) -> pa.RecordBatch:
        """The merge on this thread, as one batch."""
        bounds = np.concatenate(([0], np.cumsum([e.shape[0] for e in ends]))).astype(np.int64)
        end, code = np.concatenate(ends), np.concatenate(codes)
        table = pa.Table.from_batches(batches)
        if len(batches) > 1 or not _is_sorted(end, code, 0, code.shape[0]):
            # one partition's run too may be out of code order: its local codes follow the
            # global ones only until one side compacts its dictionary
            order = merge_order(end, code, bounds)
            if (order != np.arange(order.shape[0])).any():
                table = table.combine_chunks().take(pa.array(order))
                code = code[order]
        return pa.RecordBatch.from_arrays([*self.enc.keys(code), *_columns(table)],
                                          schema=self.out_schema)

    # ---- state --------------------------------------------------------------
    def state_size(self) -> StateSize:
        """Sum over the partitions (as of their last finished element) + the key dictionary."""
        items, nbytes = self.enc.n_codes, self.enc.nbytes()
        for p in self.parts:
            items += p.state.items
            nbytes += p.state.bytes
        return StateSize(items, nbytes)

    def snapshot(self) -> ThreadedState:
        """The whole state (module docstring, Checkpoints): waits for the partitions
        (:meth:`_settle`), then each partition snapshots its operator on its own thread.
        O(state + held results)."""
        self._settle()
        snaps = self._on_partitions([lambda op=p.op: op.snapshot() for p in self.parts])
        return ThreadedState(
            base=super().snapshot(), lwm=self.lwm, out_punct=self.out_punct,
            enc=self.enc.snapshot(), part_of=self.part_of.copy(),
            keys_compact_at=self._keys_compact_at, shifts=dict(self.shifts),
            shift_cols=list(self.shift_cols), plan=dict(self._plan), own=self._own_state(),
            partitions=snaps, part_out_punct=[p.out_punct for p in self.parts],
            part_late=[dict(p.late) for p in self.parts],
            held=[(is_p, list(done or ())) for is_p, _, done in self.pending])

    def restore(self, state: ThreadedState) -> None:
        """Load a :meth:`snapshot` into this freshly opened operator, on the checkpoint's
        partition count (each partition restores on its own thread). O(state)."""
        super().restore(state.base)
        if len(state.partitions) != self.n:
            asked = self.n
            self._open_partitions(len(state.partitions))
            self._plan["threads_asked"] = asked
        self._on_partitions([partial(p.op.restore, s) for p, s in zip(self.parts,
                                                                       state.partitions)])
        for p, punct, late in zip(self.parts, state.part_out_punct, state.part_late):
            p.out_punct, p.late, p.state = punct, dict(late), p.op.state_size()
        self.lwm, self.out_punct = state.lwm, state.out_punct
        self.enc.restore(state.enc)
        self.part_of = np.asarray(state.part_of, np.int64).copy()
        self._keys_compact_at = state.keys_compact_at
        self.shifts, self.shift_cols = dict(state.shifts), list(state.shift_cols)
        self._plan = {**state.plan, **{k: v for k, v in self._plan.items()
                                       if k in ("threads", "threads_asked")}}
        self._charged_codes = self.enc.n_codes
        self.budget.report(self, self.enc.nbytes())
        self.pending = deque((is_p, [], list(out)) for is_p, out in state.held)
        self._restore_own(state.own)

    def _on_partitions(self, fns: list[Callable[[], Any]]) -> list[Any]:
        """``fns[i]()`` on partition i's thread, all at once; on this thread once the
        partitions are stopped (after the end: the job's last checkpoint)."""
        if self._stopped:
            return [fn() for fn in fns]
        return [f.result() for f in [p.pool.submit(fn) for p, fn in zip(self.parts, fns)]]

    def _own_state(self) -> dict[str, Any]:
        """What the hooks decided that a restore needs: the template's method."""
        return {"method": self.template.method, "method_plan": dict(self.template.plan_info)}

    def _restore_own(self, own: dict[str, Any]) -> None:
        if own["method"] is not None:
            self.template._set_method(own["method"], {})
            self.template.plan_info = dict(own["method_plan"])
