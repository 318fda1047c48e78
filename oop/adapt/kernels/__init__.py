"""Compiled kernels of AdaptWID (004 §6.3), each beside a tuple-at-a-time reference.

The kernels are grouped by the state they work on; this package re-exports every public
kernel and reference, so ``from oop.adapt.kernels import route_batch`` and
``from oop.adapt import kernels as K`` keep working.

* :mod:`~oop.adapt.kernels.route` -- a batch's one pass (004 §6.3.4.2, "Processing
  Tuples" and the lazy -> eager switch): :func:`route_batch` (Bucket, late test,
  ``winVol[g, source] += 1``, per-source high-watermarks, lazy -> eager by Cond. 6.9, each
  row routed eager / lazy / late: O(n x sources)) and the row classes ``ROW_*``.
* :mod:`~oop.adapt.kernels.dense` -- the dense eager store ``H`` of bounded aggregates
  (:mod:`oop.adapt.dense`): the per-aggregate fold kernels over (window ring x slot)
  lanes, slot assignment (:func:`dense_assign_slots_sel`: the batch's eager rows, no
  gather), a closing window's slots (:func:`dense_pop_slots`) and slot release
  (:func:`dense_release`).
* :mod:`~oop.adapt.kernels.buffer` -- the lazy buffer ``B`` (:mod:`oop.adapt.buffer`):
  binning (:func:`bin_order`), pulling a switching group's tuples (:func:`take_scan`),
  and a punctuation's pass over ``B`` (004 §6.3.4.2, "Processing Punctuation" cases 2
  and 3): :func:`close_scan` ((row, closing window) pairs, expiry) and
  :func:`close_fold` (the same fused with the transient slots and the per-(window,
  group) tuple counts: one call per punctuation).
* :mod:`~oop.adapt.kernels.settle` -- a punctuation's group bookkeeping (004 §6.3.4.2,
  "Processing Punctuation" case 1 and the eager -> lazy switch): :func:`settle_close`
  (``winVol`` minus the popped partials' ``tupcnt``, :func:`switch_down`,
  :func:`count_dead`) and :func:`count_transitional`.
* :mod:`~oop.adapt.kernels.groupby` -- group-bys over group codes: :func:`group_pairs`
  (the Aggregate's (window id, group) group-by), :func:`segment_tupcnt`,
  :func:`covered_windows_kernel`, :func:`transient_slots`, :func:`match_groups`.
* :mod:`~oop.adapt.kernels.common` -- the small inlined pieces the kernels above share
  (one tuple's window-id span, first-seen scratch marks, the bin sort, Cond. 6.9's skew
  term) and the references' Python counterparts.

Every kernel is ``@njit(cache=True)``; numba caches a kernel next to the module that
defines it (``oop/adapt/kernels/__pycache__``). The cache of a kernel is invalidated by
changes to its own module only: after editing an inlined helper of
:mod:`~oop.adapt.kernels.common`, clear the cache (or touch the modules that use it).
"""

from __future__ import annotations

from oop.adapt.kernels.buffer import (bin_order, bin_order_reference, close_fold,
                                      close_fold_reference, close_scan, close_scan_reference,
                                      take_scan, take_scan_reference)
from oop.adapt.kernels.dense import (dense_assign_slots, dense_assign_slots_reference,
                                     dense_assign_slots_sel, dense_assign_slots_sel_reference,
                                     dense_count_new, dense_fold_count, dense_fold_firstlast,
                                     dense_fold_minmax, dense_fold_reference, dense_fold_rows,
                                     dense_fold_sum, dense_fold_var, dense_last_w,
                                     dense_pop_slots, dense_pop_slots_reference, dense_release,
                                     dense_release_reference)
from oop.adapt.kernels.groupby import (covered_windows_kernel, covered_windows_reference,
                                       group_pairs, group_pairs_reference, match_groups,
                                       match_groups_reference, segment_tupcnt,
                                       segment_tupcnt_reference, transient_slots,
                                       transient_slots_reference)
from oop.adapt.kernels.route import (ROW_EAGER, ROW_LATE, ROW_LAZY, route_batch,
                                     route_batch_reference)
from oop.adapt.kernels.settle import (count_dead, count_dead_reference, count_transitional,
                                      count_transitional_reference, settle_close,
                                      settle_close_reference, switch_down, switch_down_reference)

__all__ = ["group_pairs", "group_pairs_reference", "bin_order", "bin_order_reference",
           "covered_windows_kernel",
           "covered_windows_reference", "segment_tupcnt", "segment_tupcnt_reference",
           "route_batch", "route_batch_reference", "dense_assign_slots_sel",
           "dense_assign_slots_sel_reference", "close_scan", "close_scan_reference", "count_dead",
           "count_dead_reference", "take_scan", "take_scan_reference", "switch_down",
           "switch_down_reference", "transient_slots", "transient_slots_reference",
           "match_groups", "match_groups_reference", "close_fold", "close_fold_reference",
           "settle_close", "settle_close_reference", "dense_pop_slots",
           "dense_pop_slots_reference", "dense_release", "dense_release_reference",
           "count_transitional", "count_transitional_reference",
           # the dense store's fold and slot kernels (oop.adapt.dense) and the row classes
           "dense_fold_rows", "dense_last_w", "dense_fold_count", "dense_fold_sum",
           "dense_fold_minmax", "dense_fold_var", "dense_fold_firstlast",
           "dense_fold_reference", "dense_count_new", "dense_assign_slots",
           "dense_assign_slots_reference", "ROW_LATE", "ROW_LAZY", "ROW_EAGER"]
