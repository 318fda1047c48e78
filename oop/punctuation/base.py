"""The punctuation-generator contract (004 §8.1, DESIGN §2).

Sources rarely carry punctuation; a generator derives it from what is known
about the feed. A generator is configured by a frozen dataclass (a
:class:`GeneratorConfig`) that validates its arguments and builds the runtime
logic (a :class:`PunctuationGenerator`) for one source:

* :meth:`PunctuationGenerator.on_batch` sees each on-time batch (after late
  rows were split off) with its int64 times, and returns a new bound ``v``
  (meaning: every later tuple has ``time >= v``) or None. The batch's
  columns are given only to a generator whose ``reads_rows`` is True (e.g.
  a marker column, :mod:`oop.punctuation.external`); the others get None and
  read the times: a segment of several input batches is then not
  concatenated (a copy of the whole input, once, for nothing).
* :meth:`PunctuationGenerator.on_batch_stats` is the same call with the
  batch's min and max time already computed by the source (one fused pass);
  generators that only need the max override it and set ``reads_times`` to
  False: they get no times then (a segment's times are not concatenated).
* :meth:`PunctuationGenerator.on_late` sees the times of the rows the source
  found late (before they are dropped or routed); estimators use it.
* :meth:`PunctuationGenerator.on_idle` is called by the executor between
  batches with the data-time clock (the largest event time seen on any
  source); lull handling uses it to advance a silent source.
* :meth:`PunctuationGenerator.gauges` reports the generator's current
  estimates (e.g. the adaptive delay bound); the source copies them into its
  metrics (``result.metrics[source].gauges``) after every batch.

A returned bound may be smaller than one returned before (the source never
lets its punctuation go backwards: it simply emits nothing then).

A generator's guarantee is only as good as its assumption about the feed
(e.g. "no tuple is more than d late"); tuples that break it are *late* and
follow the source's late policy -- never silently lost.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import pyarrow as pa

from oop.stream.timecol import TimeSpec

__all__ = ["PunctuationGenerator", "GeneratorConfig"]


class PunctuationGenerator(ABC):
    """Runtime logic of one source's punctuation. One instance per source."""

    #: whether :meth:`on_batch` reads the batch's columns (else it is given None)
    reads_rows: bool = False
    #: whether :meth:`on_batch_stats` reads ``times`` (else it is given an empty array)
    reads_times: bool = True

    @abstractmethod
    def on_batch(self, batch: pa.RecordBatch | None, times: np.ndarray) -> int | None:
        """A batch of on-time tuples arrived; return a new low-watermark bound or None.
        ``batch`` is None unless :attr:`reads_rows`."""

    def on_batch_stats(
        self, batch: pa.RecordBatch | None, times: np.ndarray, lo: int, hi: int
    ) -> int | None:
        """:meth:`on_batch` when the source already knows ``min(times)`` and ``max(times)``.

        Generators that only need the max (ordered, bounded delay) override it
        to skip a pass over the batch; the default calls :meth:`on_batch`.
        Only called for a non-empty segment; ``times`` is empty when
        :attr:`reads_times` is False.
        """
        return self.on_batch(batch, times)

    def on_late(self, times: np.ndarray) -> None:
        """The source found rows with these times late (they never reach :meth:`on_batch`)."""

    def on_idle(self, clock: int) -> int | None:
        """No data from this source in the last round; ``clock`` is the data-time clock."""
        return None

    def late_bound(self) -> int | None:
        """An extra bound below which arriving tuples are late, beyond emitted punctuation."""
        return None

    def gauges(self) -> dict[str, float]:
        """Current estimates worth reporting (name -> value). Default: none. O(1)."""
        return {}

    def snapshot(self) -> Any:
        """A deep copy of the generator's state (taken at a punctuation boundary).

        A wrapped generator (``Idle``, ``Granular``) is stored as its own snapshot,
        so the state is plain data (a durable checkpoint encodes it without pickle).
        """
        return {k: v.snapshot() if isinstance(v, PunctuationGenerator) else copy.deepcopy(v)
                for k, v in self.__dict__.items()}

    def restore(self, state: Any) -> None:
        for k, v in state.items():
            cur = self.__dict__.get(k)
            if isinstance(cur, PunctuationGenerator) and not isinstance(v, PunctuationGenerator):
                cur.restore(v)
            else:
                self.__dict__[k] = copy.deepcopy(v)


class GeneratorConfig(ABC):
    """A validated generator configuration; :meth:`build` makes the runtime logic."""

    @abstractmethod
    def build(self, time: TimeSpec) -> PunctuationGenerator:
        """Runtime logic for one source whose progressing attribute is ``time``."""
