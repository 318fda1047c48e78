"""Threads of an ``oop sql`` plan: which operators run on partitions, and why not.

``oop sql --threads N`` (:mod:`oop.command.threads`: N - 1 partitions when
the run is pipelined) gives the planner a :class:`Parallelism`. The planner
asks it, operator by operator, how many partitions to use; it answers by
what the operator can split without changing a row or the row order, and
keeps one line per decision (:attr:`Parallelism.notes`, shown by ``EXPLAIN``
and in the ``--metrics`` JSON under ``threads``):

* **window TVF aggregates** -- on key partitions
  (:class:`~oop.window.threaded.ThreadedWindow`: global key codes, punctuation
  to every partition, Meld of their punctuation, merge into the one-thread row
  order) where :func:`~oop.window.threaded.threadable` allows (TUMBLE and HOP
  with GROUP BY keys); CUMULATE, SESSION, a window without keys and
  user-defined aggregates run on one thread, and the note says why.
* **interval and window joins** -- always planned with SplitJoin's ordered
  gathering (002; :mod:`oop.join.split_join`): the rows each input element
  causes leave as one batch sorted by the output columns, so the output is
  the same row for row for any number of threads, one included (OA-Join's
  own row order inside an element could not be kept by any split: it follows
  its hash-table layout -- chain order, chunking, purge history). With
  N - 1 >= 2 a join with equality keys runs on N - 1 key partitions
  (:class:`~oop.join.keyed_join.KeyedJoin`: each partition stores, probes and
  purges the tuples of its keys on its own thread; every element's rows are
  gathered from all partitions and sorted the same way), a join without keys
  on N - 1 SplitJoin workers (tuples stored round-robin, every batch probed
  by all workers on threads). Skewed keys load one key partition (002's
  reason for round-robin); the key partitions split all of the join's work,
  SplitJoin only the probe. (:mod:`oop.sharded` gathers its shards at
  punctuations, not per element, so it would not keep the order.) A join
  whose output has a column that cannot be sorted (a list, struct, map or
  dictionary) runs on one thread: equal rows on the sortable columns would
  keep partition order. A checkpointed run (``--checkpoint-dir``) is planned
  the same way: KeyedJoin, SplitJoin and the windows on key partitions are all
  checkpointed (a restart resumes them on the checkpoint's partition count:
  :mod:`oop.join.keyed_join`, Checkpoints).

Cost: nothing at plan time beyond the checks; the run's costs are those of
the operators named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa

__all__ = ["Parallelism"]


def _sortable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


@dataclass
class Parallelism:
    """How many partitions the planned operators may use, and one note per decision.

    ``partitions``: partitions of a window or workers of a join (1: one thread);
    ``read_ahead``: finite table inputs are decoded on threads of their own.
    """

    partitions: int = 1
    read_ahead: bool = False
    notes: list[str] = field(default_factory=list)

    def window(self, fn: str, kind: Any, aggs: Sequence[Any], keys: Sequence[str]) -> int:
        """Key partitions for a ``fn`` (TUMBLE, HOP, ...) window aggregate grouped by ``keys``."""
        from oop.window.threaded import threadable

        if self.partitions < 2:
            self._note(f"{fn} window: one thread (the driving thread)")
            return 1
        why = threadable(kind, aggs, list(keys))
        if why is not None:
            self._note(f"{fn} window: one thread, not partitioned: {why}")
            return 1
        self._note(f"{fn} window: {self.partitions} key partitions, one thread each "
                   "(ThreadedWindow; rows in the one-thread order)")
        return self.partitions

    def join(self, name: str, schemas: Sequence[pa.Schema], keys: bool) -> int:
        """Partitions (``keys``: KeyedJoin) or SplitJoin workers for the join ``name`` over
        inputs of ``schemas``; ``keys``: whether it has equality keys."""
        bad = [f.name for s in schemas for f in s if not _sortable(f.type)]
        if self.partitions < 2:
            self._note(f"{name}: one thread (SplitJoin's ordered gathering)")
            return 1
        if bad:
            self._note(f"{name}: one thread, not split: column(s) {bad} cannot be sorted, so "
                       "the ordered gathering could not fix the order of the threads' rows")
            return 1
        if keys:
            self._note(f"{name}: {self.partitions} key partitions, one thread each (KeyedJoin; "
                       "ordered gathering)")
        else:
            self._note(f"{name}: SplitJoin on {self.partitions} workers, not key partitions: "
                       "it has no equality keys (tuples stored round-robin, probes on "
                       "threads, ordered gathering)")
        return self.partitions

    def _note(self, text: str) -> None:
        self.notes.append(text)

    def summary(self, threads: int) -> dict[str, Any]:
        """The ``threads`` entry of the ``--metrics`` JSON (the command adds which tables
        were read ahead and the stages' CPU seconds)."""
        return {"threads": threads, "partitions": self.partitions,
                "operators": list(self.notes)}
