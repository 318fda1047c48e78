"""AdaptWID's snapshot: the Aggregate's whole state at a punctuation boundary, typed (004 §6.3.3).

What :meth:`~oop.adapt.logic.AdaptLogic.snapshot` returns and ``restore`` takes: the eager
store ``H`` and the lazy buffer ``B`` (their own snapshots), the cost model's measures
(``wed``, source offsets, stream volume), the progress (low-watermark, first open window, open
window ids), the group entries (``winVol`` with the mode flag, :mod:`oop.adapt.groups`), the
var/std shifts (:mod:`oop.aggregates.moments`) and the counters and reports. A plain
dataclass, so the checkpoint codec stores it field by field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from oop.adapt.config import Timeline

__all__ = ["LogicState", "PeakBytes"]


@dataclass
class PeakBytes:
    """The largest bytes each kind of state held at a batch or punctuation boundary."""

    partials: int = 0  #: the eager store H
    buffer: int = 0  #: the lazy buffer B
    groups: int = 0  #: the live groups' entries
    total: int = 0  #: the largest sum (not the sum of the peaks)

    def track(self, partials: int, buffer: int, groups: int) -> None:
        """Raise each peak to the state now held. O(1)."""
        self.partials = max(self.partials, partials)
        self.buffer = max(self.buffer, buffer)
        self.groups = max(self.groups, groups)
        self.total = max(self.total, partials + buffer + groups)

    def as_dict(self) -> dict[str, int]:
        return {"partials": self.partials, "buffer": self.buffer, "groups": self.groups,
                "total": self.total}


@dataclass
class LogicState:
    """One AdaptLogic's state (a deep copy: never shared with the running operator)."""

    eager: Any  #: the eager store's snapshot (dense lanes or blocks)
    buffer: Any  #: the lazy buffer's snapshot
    wed: Any  #: WindowExtentDuration's snapshot
    offsets: Any  #: SourceOffsets' snapshot
    lwm: int
    first_open: int  #: every window id below it is complete
    active: Any  #: StreamVolume's active tuples
    open_wids: list[int]
    n_groups: int
    wv: np.ndarray  #: winVol[g, source] with the mode flag (monitored runs; else empty)
    tupcnt_from: int | None
    shifts: list[float | int | None]  #: per aggregate: its var/std shift
    tuples_in: int
    late: int
    switches_to_eager: int
    switches_to_lazy: int
    timeline: Timeline
    peak: PeakBytes
