"""In-order processing (IOP) baselines (DESIGN §4): the classic way, measured beside OOP.

Each baseline is an :class:`~oop.operators.base.Operator` with the same
metrics as the OOP operators (state items/bytes, latency, late/dropped
counts): :class:`Merge` (order-preserving union), :class:`SortBuffer`
(BSort tuple slack, time slack, heartbeat), :class:`BufferingWindow`
(materialise each extent from ordered input; differential variant),
:class:`Reorder` (serial-number ring for ordered output), the Gigascope
two-level aggregation (:mod:`oop.iop_baseline.gigascope`), and the
order-preserving joins OPOB / OPIB (:mod:`oop.iop_baseline.opob_join`,
:mod:`oop.iop_baseline.opib_join`).
"""

from oop.iop_baseline.buffering_window import BufferingWindow, Slack
from oop.iop_baseline.gigascope import (
    CostModel,
    FlushPolicy,
    GigascopeHighLevel,
    GigascopeLowLevel,
    max_sustainable_rate,
    simulate,
)
from oop.iop_baseline.merge import Merge
from oop.iop_baseline.opib_join import OPIBJoin, plan_opib
from oop.iop_baseline.opob_join import OPOBJoin, plan_opob
from oop.iop_baseline.reorder import Reorder
from oop.iop_baseline.sort_buffer import SortBuffer, SortSpec

__all__ = [
    "Merge",
    "SortBuffer",
    "SortSpec",
    "BufferingWindow",
    "Slack",
    "Reorder",
    "OPOBJoin",
    "OPIBJoin",
    "plan_opob",
    "plan_opib",
    "FlushPolicy",
    "CostModel",
    "GigascopeLowLevel",
    "GigascopeHighLevel",
    "simulate",
    "max_sustainable_rate",
]
