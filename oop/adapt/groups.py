"""AdaptWID's per-group entry (004 §6.3.3, Fig. 6-17): group codes, the mode flag, ``winVol``.

A group's entry is ``winVol[g, source]`` (int32: tuples of ``g`` still in an open window, per
source) with the flag ``alt`` (lazy 0 / eager 1) packed into bit 30 of ``winVol[g, 0]`` -- 4
bytes per source and live group. Group codes are the engine's dense key codes as ``GID``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LAZY", "EAGER", "MODE_BIT", "VOL_MASK", "GID", "GID_MAX"]

LAZY, EAGER = 0, 1
#: the flag ``alt`` (eager) is bit 30 of ``winVol[g, 0]``: an entry is 4 bytes per source
MODE_BIT = np.int32(1 << 30)
VOL_MASK = np.int32((1 << 30) - 1)
#: group codes as held in partials and buffered tuples (dense codes: < 2**31 groups)
GID = np.int32
GID_MAX = int(np.iinfo(GID).max)
