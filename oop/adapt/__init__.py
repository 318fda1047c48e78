"""AdaptWID: per-group adaptive eager/lazy window aggregation (004 §6.3).

* :class:`~oop.adapt.operator.AdaptWID` -- the operator (``Stream.adaptive_window``);
* :class:`~oop.adapt.cost.Thresholds`, :class:`~oop.adapt.cost.MemoryCostModel` --
  Eq. 6.5 / 6.8 / Cond. 6.9 and the two switching thresholds;
* :class:`~oop.adapt.logic.AdaptLogic` -- the group state machine, testable without a plan;
  its parts: :mod:`~oop.adapt.core` (what is held), :mod:`~oop.adapt.modes` (the eager /
  lazy switch), :mod:`~oop.adapt.batch` (a batch), :mod:`~oop.adapt.close` (a punctuation);
  compiled kernels by family in :mod:`oop.adapt.kernels`;
* :class:`~oop.adapt.buffer.LazyBuffer` (binned buffer B); partials H in
  :class:`~oop.adapt.dense.DenseEagerStore` (bounded aggregates: (open-window ring x
  eager-group slot) lanes, numba fold per batch) or :class:`~oop.adapt.store.EagerStore`
  (sorted blocks, holistic aggregates); :mod:`oop.adapt.algebra` (block aggregates from
  :mod:`oop.window.agg`);
* :class:`~oop.adapt.panes.PanedAdaptWID` -- the pane-enhanced variant.;
* :class:`~oop.adapt.threaded.ThreadedAdapt` -- AdaptWID on N key partitions, one thread
  each, the one-thread rows in the one-thread order (``threads=N``);
  :mod:`oop.adapt.order` -- that order (window, then key code).
"""

from oop.adapt.cost import MemoryCostModel, Thresholds
from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.adapt.operator import AdaptWID
from oop.adapt.panes import PanedAdaptWID

__all__ = ["AdaptWID", "PanedAdaptWID", "AdaptConfig", "AdaptLogic", "Thresholds", "MemoryCostModel"]
