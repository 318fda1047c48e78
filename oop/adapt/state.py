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

__all__ = ["LogicState"]


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
    peak: dict[str, int]
