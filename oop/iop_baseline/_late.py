"""Late rows of the IOP operators: the rows that break an order assumption.

IOP operators assume ordered input (or a slack); a row below what they have
already released or closed cannot be processed any more. Every such row is
accounted for through one path, the late policy of the operator
(:class:`~oop.stream.late.LatePolicy`):

* ``drop`` -- counted under ``late["drop"]`` and in :attr:`DropsLate.dropped`;
* ``side_output`` -- routed to ``side_outputs["late"]`` and counted under
  ``late["side_output"]`` (and in ``dropped``: the operator's result misses it);
* ``raise`` -- :class:`~oop.errors.LateTupleError` with the operator's own
  message (naming the first late row), before any state changes.

:meth:`DropsLate.drop_late` splits, routes (through
:meth:`Operator.route_late <oop.operators.base.Operator.route_late>`) and
returns the kept rows; :meth:`DropsLate.record_accuracy` publishes the gauge
``kept_fraction``. Cost: one filter per batch that has late rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa

from oop.errors import LateTupleError
from oop.operators.base import Operator
from oop.stream.late import LatePolicy

__all__ = ["DropsLate"]


class DropsLate(Operator):
    """Base of IOP operators that drop rows breaking their order assumption (see module doc).

    Subclasses set ``late_policy`` and ``dropped = 0`` in ``__init__``.
    """

    late_policy: LatePolicy
    dropped: int

    def drop_late(self, batch: pa.RecordBatch, late: np.ndarray,
                  why: Callable[[int], str]) -> tuple[pa.RecordBatch, np.ndarray | None]:
        """Account for the rows flagged in ``late`` (bool mask); return ``(kept rows, keep mask)``.

        The mask is ``None`` when nothing is late (the batch is returned as is).
        Policy ``raise``: raises ``LateTupleError(why(i))``, ``i`` = the first
        late row. Cost: O(rows) compare, one filter each way when some row is late.
        """
        n = int(late.sum())
        if not n:
            return batch, None
        if self.late_policy is LatePolicy.RAISE:
            raise LateTupleError(why(int(np.argmax(late))))
        self.route_late(batch.filter(pa.array(late)), self.late_policy)
        self.dropped += n
        keep = ~late
        return batch.filter(pa.array(keep)), keep

    def record_accuracy(self) -> None:
        """Gauge ``kept_fraction``: share of the input this operator did not drop (1.0 = exact)."""
        n = self.metrics.tuples_in
        self.metrics.gauges["kept_fraction"] = 1.0 - self.dropped / n if n else 1.0
