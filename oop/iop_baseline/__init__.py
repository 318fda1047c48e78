"""In-order processing (IOP) baselines (DESIGN §4): the classic way, measured beside OOP.

Each baseline is an :class:`~oop.operators.base.Operator` with the same
metrics as the OOP operators (state items/bytes, latency, late/dropped
counts): :class:`Merge` (order-preserving union), :class:`SortBuffer`
(BSort tuple slack, time slack, heartbeat), :class:`BufferingWindow`
(materialise each extent from ordered input; differential variant),
:class:`Reorder` (serial-number ring for ordered output), the Gigascope
two-level aggregation (:mod:`oop.iop_baseline.gigascope`), and the
order-preserving joins OPOB / OPIB (:mod:`oop.iop_baseline.opob_join`,
:mod:`oop.iop_baseline.opib_join`) when they are present.
"""

from oop.iop_baseline.gigascope import (
    CostModel,
    FlushPolicy,
    GigascopeHighLevel,
    GigascopeLowLevel,
    max_sustainable_rate,
    simulate,
)
from oop.iop_baseline.merge import Merge
from oop.iop_baseline.sort_buffer import SortBuffer, SortSpec

__all__ = ["Merge", "SortBuffer", "SortSpec", "FlushPolicy", "CostModel", "GigascopeLowLevel",
           "GigascopeHighLevel", "simulate", "max_sustainable_rate"]

try:  # optional pieces: each import is guarded so a missing module never breaks the package
    from oop.iop_baseline.reorder import Reorder  # noqa: F401

    __all__.append("Reorder")
except ImportError:  # pragma: no cover
    pass
try:
    from oop.iop_baseline.buffering_window import BufferingWindow, Slack  # noqa: F401

    __all__ += ["BufferingWindow", "Slack"]
except ImportError:  # pragma: no cover
    pass
try:
    from oop.iop_baseline.opob_join import *  # noqa: F401,F403
    from oop.iop_baseline import opob_join as _opob

    __all__ += list(getattr(_opob, "__all__", []))
except ImportError:  # pragma: no cover
    pass
try:
    from oop.iop_baseline.opib_join import *  # noqa: F401,F403
    from oop.iop_baseline import opib_join as _opib

    __all__ += list(getattr(_opib, "__all__", []))
except ImportError:  # pragma: no cover
    pass
