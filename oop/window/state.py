"""The window operators' snapshots, typed: what a checkpoint holds of each (DESIGN §5).

:class:`WindowState` is what :meth:`WindowAggregate.snapshot
<oop.window.aggregate.WindowAggregate.snapshot>` returns and ``restore``
takes; :class:`PartitionedState` and :class:`SessionState` the same for
:class:`~oop.window.partitioned.PartitionedRowsAggregate` and
:class:`~oop.window.session.SessionAggregate`; :class:`ThreadedState` the key-partitioned
window's (:class:`~oop.window.threaded.ThreadedWindow`, also
:class:`~oop.adapt.threaded.ThreadedAdapt`). Each is taken at a
punctuation boundary, holds copies (never arrays shared with the running
operator) and is a plain frozen dataclass, so the checkpoint codec
(:mod:`oop.checkpoint.codec`) stores it field by field and a checkpoint
missing a field is refused by its format version, never read with a guessed
default. The parts' own snapshots (key dictionary, cell store, evaluator,
...) stay those parts' business and are typed ``Any`` here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["WindowState", "PartitionedState", "SessionState", "ThreadedState"]


@dataclass(frozen=True)
class WindowState:
    """One WID / Paned-WID window operator's state (:mod:`oop.window.aggregate`)."""

    base: Any  #: :meth:`Operator.snapshot` (which inputs ended)
    lwm: int  #: the last punctuation seen on the window's time column (INT64_MIN: none)
    emitted: int | None  #: first window id not yet emitted (None: no window closed yet)
    out_punct: int | None  #: the last ``window_end`` punctuation forwarded
    method: str | None  #: "wid" / "paned"; None: ``auto`` has not decided yet
    plan: dict[str, Any]  #: ``plan_info`` (method, layout, switches, compactions, ...)
    bucket: dict[str, Any]  #: :meth:`BucketLogic.snapshot` (row counters)
    enc: dict[str, Any]  #: the key dictionary (:meth:`KeyEncoder.snapshot`)
    ring: dict[str, Any] | None  #: the cell store (dense ring or hash cells); None: no row yet
    ms: dict[tuple[str, str], Any]  #: holistic value tables by (store, column)
    venc: dict[str, Any]  #: value dictionaries of count-distinct / heavy-hitter columns
    vranks: dict[str, Any]  #: value ranks of min/max/first/last over non-numeric columns
    units: Any  #: the evaluator's own state (Paned-WID's running sums and blocks)
    sum_max: dict[str, int]  #: per exact-sum column: the largest ``|value|`` seen
    span_hash: bool  #: hash cells were chosen for a sparse span of units
    keys_compact_at: int  #: key-dictionary size at which dead keys are next looked for


@dataclass(frozen=True)
class PartitionedState:
    """A partitioned row-based window's state (:mod:`oop.window.partitioned`)."""

    window: WindowState  #: the window operator it extends
    done: np.ndarray  #: per partition: windows emitted
    counters: np.ndarray  #: per partition: rows seen


@dataclass(frozen=True)
class SessionState:
    """One session-window operator's state (:mod:`oop.window.session`)."""

    base: Any  #: :meth:`Operator.snapshot` (which inputs ended)
    lwm: int  #: the last punctuation seen on the time column (INT64_MIN: none)
    out_punct: int | None  #: the last ``window_end`` punctuation forwarded
    enc: dict[str, Any]  #: the key dictionary (:meth:`KeyEncoder.snapshot`)
    sessions: dict[str, np.ndarray]  #: the held sessions' lanes (code, start, last, ...)
    plan: dict[str, Any]  #: ``plan_info``
    keys_compact_at: int  #: key-dictionary size at which dead keys are next looked for
    sum_max: dict[str, int]  #: per integer sum column: the largest ``|value|`` seen
    shift: dict[str, float | int | None]  #: per column: its var/std shift


@dataclass(frozen=True)
class ThreadedState:
    """A window on key partitions (:mod:`oop.window.threaded`), taken when no partition
    works: the driving thread's state, every partition's operator state, and the results
    its pipeline (``lag=1``) holds back, merged, to be released where the uninterrupted
    run releases them."""

    base: Any  #: :meth:`Operator.snapshot` (which inputs ended)
    lwm: int  #: the last punctuation seen on the window's time column (INT64_MIN: none)
    out_punct: int | None  #: the last ``window_end`` punctuation forwarded (the Meld minimum)
    enc: dict[str, Any]  #: the global key dictionary (:meth:`KeyEncoder.snapshot`)
    part_of: np.ndarray  #: the partition of each global key code
    keys_compact_at: int  #: global dictionary size at which dead keys are next looked for
    shifts: dict[str, Any]  #: the variance shifts picked so far, by column
    shift_cols: list[str]  #: the columns whose shift may still be picked
    plan: dict[str, Any]  #: ``plan_info`` of the driving thread (compactions, ...)
    own: dict[str, Any]  #: what the partitioned operator's hooks keep (the template's)
    partitions: list[Any]  #: each partition's operator snapshot, in partition order
    part_out_punct: list[int | None]  #: each partition's latest ``window_end`` punctuation
    part_late: list[dict[str, int]]  #: each partition's late counters
    held: list[tuple[bool, list[Any]]]  #: merged results not yet released (punctuation?, elements)
