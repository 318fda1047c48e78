"""SplitJoin: the k-worker parallel OA-Join (002 SplitJoin; 004 §7.1 semantics).

What it computes: exactly what :class:`~oop.join.oa_join.OAJoin` computes with
the same configuration (a test asserts equality with the single-worker join).

How (002): the join is split into a *storing* and a *processing* step over k
workers. Every tuple of input i is stored by exactly one worker -- worker
``seq_i mod k`` where ``seq_i`` is the tuple's per-input sequence number
(round-robin, no coordination, no key partitioning, so skewed keys spread
evenly). Every batch is *processed* (probed) by all k workers against their
own share of the other input's state; the probes run on a thread pool and
the numba probe kernel releases the GIL (``nogil=True``), so on k cores they
run in parallel. The gatherer unions the results; a tuple's "matched" bit for
outer/semi/anti joins is the OR over the workers' probes.

On a punctuation every worker purges its share of the other input and
reports its output punctuation; the gatherer emits the min over workers
(Meld rule, :class:`~oop.progress.frontier.MinFrontier`). As every worker
sees every punctuation the min equals each worker's bound -- the frontier
is kept so that a worker lagging behind (e.g. after restore) can never let
a punctuation overtake its results.

Ordered gathering (deterministic output). The workers' results for one
input element arrive in worker order, and which worker holds a stored tuple
depends on k, so the raw union is not the one-worker order. The gatherer
therefore emits, for every input element (a batch, a punctuation, an end of
input) in arrival order:

1. all result rows the element caused (joined pairs, semi rows, unmatched
   rows padded with nulls -- from every worker) as ONE batch, sorted
   lexicographically by the output columns in schema order (ascending,
   nulls last; :func:`ordered_rows`); then
2. the element's output punctuation(s) (individual per time attribute, then
   joint), each the min over the workers (Meld).

The multiset of an element's rows does not depend on k (each stored tuple
is probed by exactly one worker, purged by exactly one, its matched bit is
the OR over the probes), so this order makes the output of every k -- the
sequence of batches and punctuations, row for row -- equal to the output
of ``SplitJoin(config, workers=1)`` (a test asserts it on disordered
streams). Punctuation rule: unchanged (a punctuation is emitted after the
rows of its element and bounds every later row, as in OA-Join). Rows equal
on every orderable column (e.g. differing only in a list column) keep
worker order. Cost: one sort of each element's results,
O(r log r) for r result rows, on the gathering thread.

Cost: probing is divided by k (wall time), storing and output assembly are
done once; speed-up therefore appears when probing dominates (long hash
chains: few keys, wide bands, large state).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.join.oa_join import OAJoin
from oop.join.spec import JoinConfig
from oop.progress.frontier import MinFrontier
from oop.stream.elements import Element, Punctuation

__all__ = ["SplitJoin", "ordered_rows", "ordered_elements"]


def _orderable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


#: pyarrow 25 deprecated SortOptions' null_placement for one per sort key
_NULLS_PER_KEY = int(pa.__version__.split(".")[0]) >= 25


def _sort_indices(t: pa.Table, names: list[str]) -> pa.Array:
    """Stable ascending order of ``t`` by ``names``, nulls last."""
    if _NULLS_PER_KEY:
        return pc.sort_indices(t, sort_keys=[(n, "ascending", "at_end") for n in names])
    return pc.sort_indices(t, sort_keys=[(n, "ascending") for n in names],
                           null_placement="at_end")


def ordered_rows(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """``batches`` (one schema) as one batch sorted by the orderable columns, in schema
    order (ascending, nulls last; a stable sort). O(r log r)."""
    t = pa.Table.from_batches(batches).combine_chunks()
    names = [f.name for f in t.schema if _orderable(f.type)]
    if names and t.num_rows > 1:
        t = t.take(_sort_indices(t, names))
    return t.combine_chunks().to_batches()[0] if t.num_rows else batches[0].slice(0, 0)


def ordered_elements(out: list[Element]) -> list[Element]:
    """``out`` with every run of consecutive non-empty batches replaced by one
    :func:`ordered_rows` batch; punctuations stay where they are."""
    res: list[Element] = []
    run: list[pa.RecordBatch] = []
    for el in out:
        if isinstance(el, pa.RecordBatch):
            if el.num_rows:
                run.append(el)
            continue
        if run:
            res.append(ordered_rows(run))
            run = []
        res.append(el)
    if run:
        res.append(ordered_rows(run))
    return res


class SplitJoin(OAJoin):
    """OA-Join over ``workers`` round-robin state shares probed on threads."""

    def __init__(self, config: JoinConfig, workers: int = 2) -> None:
        super().__init__(config, workers=workers)
        self._pool: ThreadPoolExecutor | None = None
        self._frontiers = (MinFrontier(workers), MinFrontier(workers))

    def _probe_all(self, o: int, lo: np.ndarray, hi: np.ndarray, kh: np.ndarray,
                   bk: np.ndarray, valid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max(1, self.workers - 1),
                                            thread_name_prefix=f"{self.name}-probe")
        # workers 1..k-1 on the pool, worker 0 on the calling thread (one wake-up fewer)
        futs = [self._pool.submit(w[o].probe, lo, hi, kh, bk, valid) for w in self.states[1:]]
        first = self.states[0][o].probe(lo, hi, kh, bk, valid)
        return [first, *(f.result() for f in futs)]

    # ---- ordered gathering (module docstring) ----------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        return ordered_elements(super().on_batch(batch, port))

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        return ordered_elements(super().on_punctuation(punctuation, port))

    def on_end(self, port: int = 0) -> list[Element]:
        return ordered_elements(super().on_end(port))

    def _produce_punctuation(self) -> list[Element]:
        out = super()._produce_punctuation()
        # Every worker applied the same punctuation: each reports the same bound; the
        # gatherer forwards the min over workers (Meld), never more than any worker proves.
        gathered: list[Element] = []
        for p in out:
            if isinstance(p, Punctuation):
                j = self.out_time.index(p.attr)
                v = None
                for w in range(self.workers):
                    v = self._frontiers[j].update(w, p.value)
                if v is not None:
                    gathered.append(Punctuation(p.attr, v))
            else:
                gathered.append(p)
        return gathered

    def close(self) -> None:
        """Stop the probe threads (also done at end of stream)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def flush(self) -> list[Element]:
        out = super().flush()
        self.close()
        return out

    def snapshot(self) -> Any:
        s = super().snapshot()
        s["frontiers"] = [(list(f.values), f.emitted) for f in self._frontiers]
        return s

    def restore(self, state: Any) -> None:
        super().restore(state)
        for f, (vals, em) in zip(self._frontiers, state["frontiers"]):
            f.values, f.emitted = list(vals), em
