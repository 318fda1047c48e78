"""Late-tuple policy: what happens to a tuple that violates a punctuation already seen.

A tuple ``t`` is *late* on a stream when a punctuation ``P(attr, v)`` with
``t.attr < v`` preceded it (DESIGN §1 grammar). Lateness is never silent:

* ``drop`` -- the tuple is discarded and counted in ``late_dropped``.
* ``side_output`` -- the tuple is routed to the stream's late side output,
  which the user reads from the run result (``result.late[stream_name]``),
  and counted in ``late_side``.
* ``raise`` -- :class:`~oop.errors.LateTupleError` naming stream, attribute,
  value and bound.
* ``update`` -- (operators that support it, e.g. window aggregation with an
  allowed lateness) the tuple revises results already emitted. On a source,
  ``update`` forwards late tuples downstream (counted as ``late_forwarded``)
  so such an operator can see them; an operator without ``update`` then
  counts them late itself.

Rows whose event time is null follow the same policy as late rows, except
that ``drop`` and ``raise`` both raise: a null time is a data error, not lateness.

>>> LatePolicy.parse("side")
<LatePolicy.SIDE_OUTPUT: 'side_output'>
"""

from __future__ import annotations

import enum

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError, LateTupleError

__all__ = ["LatePolicy", "split_late"]


class LatePolicy(str, enum.Enum):
    """What to do with late tuples (one sentence per choice in the module doc)."""

    DROP = "drop"
    SIDE_OUTPUT = "side_output"
    RAISE = "raise"
    UPDATE = "update"

    @classmethod
    def parse(cls, value: "LatePolicy | str") -> "LatePolicy":
        """Accept an enum member or one of drop / side / side_output / raise / update."""
        if isinstance(value, LatePolicy):
            return value
        aliases = {"side": "side_output", "side-output": "side_output"}
        v = aliases.get(str(value).lower(), str(value).lower())
        try:
            return cls(v)
        except ValueError:
            raise ConfigError(
                f"unknown late policy {value!r}; use drop, side_output, raise or update"
            ) from None


def split_late(
    batch: pa.RecordBatch,
    times: np.ndarray,
    bound: int,
    policy: LatePolicy,
    stream: str,
    attr: str,
) -> tuple[pa.RecordBatch, pa.RecordBatch | None, np.ndarray]:
    """Split ``batch`` into on-time rows and late rows (``time < bound``).

    Returns ``(on_time, late_or_None, on_time_times)``. With policy ``raise``
    a late row raises :class:`LateTupleError`. Cost: one vectorized min (a compare
    and a filter only when some row is late); no copy when nothing is late.
    """
    if not len(times) or int(times.min()) >= bound:  # one reduction, no mask allocated
        return batch, None, times
    late_mask = times < bound
    if policy is LatePolicy.RAISE:
        i = int(np.argmax(late_mask))
        raise LateTupleError(
            f"stream {stream!r}: tuple at row {i} has {attr}={int(times[i])} but punctuation "
            f"already promised {attr} >= {bound} ({int(late_mask.sum())} late row(s) in this "
            "batch); widen the punctuation delay, or choose late='drop' or 'side_output'"
        )
    keep = ~late_mask
    on_time = batch.filter(pa.array(keep))
    late = batch.filter(pa.array(late_mask))
    return on_time, late, times[keep]
