"""Former home of the window state; re-exports the old names from their new modules.

Window state now lives in three modules:

- :mod:`oop.window.values` -- column values, lanes, casts, variance shifts, exactness checks;
- :mod:`oop.window.ring` -- :class:`~oop.window.ring.Ring`, the dense (ring x codes) lanes of
  bounded aggregates, and the state-size check;
- :mod:`oop.window.multiset` -- :class:`~oop.window.multiset.Multiset`, the table of holistic
  aggregates, and its group queries.

Code inside the repository imports from those; this module keeps ``oop.window.store``
imports of other branches working. New code should not import from here.
"""

from __future__ import annotations

from oop.window.multiset import Multiset, group_bounds, quantiles_from_counts
from oop.window.ring import STATE_LIMIT_FRACTION, Ring, check_state_size, physical_memory
from oop.window.values import (NO_NONFINITE, NO_NULLS, ColumnValues, LaneInfo, check_agg_types,
                               check_exact_sum, column_values, decimal_array, decimal_unscaled,
                               exact_sum_columns, held_ranks, int_valued, is_numeric_type,
                               is_ranked_type, lane_array, lane_infos, lane_input, max_abs,
                               note_nonfinite, pick_shift, remap_ranks, shifted_sum)

__all__ = [
    "Multiset", "group_bounds", "quantiles_from_counts",
    "STATE_LIMIT_FRACTION", "Ring", "check_state_size", "physical_memory",
    "NO_NONFINITE", "NO_NULLS", "ColumnValues", "LaneInfo", "check_agg_types", "check_exact_sum",
    "column_values", "decimal_array", "decimal_unscaled", "exact_sum_columns", "held_ranks",
    "int_valued", "is_numeric_type", "is_ranked_type", "lane_array", "lane_infos", "lane_input",
    "max_abs", "note_nonfinite", "pick_shift", "remap_ranks", "shifted_sum",
]
