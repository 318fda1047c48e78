"""External punctuation: progress comes from the feed itself (004 §8.1, "source punctuation").

Two ways a feed can carry its own progress:

* **Punctuation records** -- the feed interleaves ``oop.Punctuation(time, v)``
  items with its batches (``oop.from_batches([b1, P("ts", 10), b2, ...])``).
  The :class:`~oop.plan.source.Source` checks and forwards them itself (a
  record that goes backwards raises); this generator then adds nothing.
  ``External()`` with no column is exactly that: *feed-only* punctuation.
* **A marker column** ``column`` -- each row may carry a promise about the
  rows that follow it:

  * an *integer or timestamp* column: a non-null value ``v`` on a row means
    "every later tuple has ``time >= v``"; null means no promise;
  * a *boolean* column (end-of-block, e.g. block-sorted NetFlow exports): a
    true marker means "the block ends here and later blocks never reach back
    before it": every later tuple has ``time >=`` the largest time seen up to
    and including the marked row.

  A promise inside a batch takes effect at the end of that batch (the
  generator sees whole batches), so it is applied slightly late -- which is
  always safe: a punctuation that is emitted later than allowed is still true.
  A marker on a row the source found late is not seen (the source splits late
  rows off first); that can only delay punctuation, never make it false.

Guarantee: exactly the feed's own promises, never more. Cost: one vectorized
pass over the marker column per batch (a max over its non-null values, or an
argmax over the marker mask plus a max over the prefix).

>>> import numpy as np, pyarrow as pa
>>> g = External("eob").build(TimeSpec("ts", "ms"))
>>> b = pa.record_batch({"ts": [5, 3, 9, 7], "eob": [False, True, False, False]})
>>> g.on_batch(b, np.array([5, 3, 9, 7]))
5
>>> g2 = External("upto").build(TimeSpec("ts", "ms"))
>>> b2 = pa.record_batch({"ts": [5, 3], "upto": pa.array([None, 4], pa.int64())})
>>> g2.on_batch(b2, np.array([5, 3]))
4
>>> External().build(TimeSpec("ts", "ms")).on_batch(b, np.array([5, 3, 9, 7])) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, TimeTypeError, UnknownColumnError
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec

__all__ = ["External", "ExternalLogic"]


class ExternalLogic(PunctuationGenerator):
    """Runtime of :class:`External`; ``column=None`` adds no punctuation."""

    reads_rows = True  # the marker column

    def __init__(self, column: str | None, time: str) -> None:
        self.column = column
        self.time = time
        self.hwm = INT64_MIN  # max time seen so far (for end-of-block markers)

    def on_batch(self, batch: pa.RecordBatch, times: np.ndarray) -> int | None:
        if self.column is None or batch is None or batch.num_rows == 0:
            return None
        if self.column not in batch.schema.names:
            raise UnknownColumnError(
                f"External punctuation: the batch has no marker column {self.column!r}; "
                f"its columns are {batch.schema.names} -- name the column that carries the "
                "feed's punctuation, or use External() for punctuation records in the feed"
            )
        marker = batch.column(self.column)
        t = marker.type
        if pa.types.is_boolean(t):
            mask = np.asarray(marker.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
            bound = None
            if mask.any():
                last = len(mask) - 1 - int(np.argmax(mask[::-1]))
                bound = max(self.hwm, int(times[: last + 1].max()))
            if len(times):
                self.hwm = max(self.hwm, int(times.max()))
            return bound
        if pa.types.is_integer(t) or pa.types.is_timestamp(t):
            if marker.null_count == len(marker):
                return None
            if pa.types.is_timestamp(t):
                marker = marker.cast(pa.int64())
            return int(pc.max(marker).as_py())
        raise TimeTypeError(
            f"External punctuation: marker column {self.column!r} has type {t}; use a boolean "
            "end-of-block column or an integer/timestamp column holding punctuation values"
        )


@dataclass(frozen=True)
class External(GeneratorConfig):
    """Punctuation the feed carries: records in the feed, plus an optional marker ``column``."""

    column: str | None = None

    def __post_init__(self) -> None:
        if self.column is not None and (not isinstance(self.column, str) or not self.column):
            raise ConfigError(
                f"External: column must be a non-empty column name or None, got {self.column!r}"
            )

    def build(self, time: TimeSpec) -> PunctuationGenerator:
        return ExternalLogic(self.column, time.column)
