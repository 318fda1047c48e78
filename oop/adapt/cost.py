"""AdaptWID's memory-cost model and switching thresholds (004 §6.3.2, Eq. 6.5-6.9).

For one group, with window ``RANGE``/``SLIDE``, window-extent duration
``wed``, partial-aggregate size ``aggr`` and buffered-tuple size ``tup``
(both measured from the operator's actual state layout):

* eager (WID, partial aggregates), Eq. 6.5::

      MC_eager = aggr * wed / SLIDE

* lazy (buffered tuples) over the union of sources ``S1..Sn`` where ``S1``
  is the earliest-arriving source and ``vol_K`` the group's volume from
  source ``K`` (tuples per time unit), Eq. 6.7/6.8::

      MC_lazy = tup * (vol * wed - sum_K vol_K * offset_{K -> S1})

* eager is cheaper when (Cond. 6.9, ``winVol = vol * wed``)::

      winVol > aggr * wed / (tup * SLIDE) + sum_K vol_K * offset_{K -> S1}

The right-hand side is the group's *threshold* ``theta``. Two thresholds keep
a group near ``theta`` from thrashing (004 §6.3.4.2): a lazy group switches to
eager when ``winVol > up * theta``; an eager group switches back when
``winVol < down * theta`` (``down <= up``).

>>> m = MemoryCostModel(range_=10, slide=1)
>>> m.mc_eager(aggr=32, wed=10)
320.0
>>> m.mc_lazy(tup=16, vol=np.array([2.0]), wed=10, vol_src=np.array([[2.0]]), offsets=np.array([0])).tolist()
[320.0]
>>> m.threshold(aggr=32, tup=16, wed=10, vol_src=np.array([[2.0]]), offsets=np.array([0])).tolist()
[20.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from oop.errors import ConfigError

__all__ = ["Thresholds", "MemoryCostModel"]

Mode = Literal["adaptive", "eager", "lazy"]


@dataclass(frozen=True)
class Thresholds:
    """When groups switch. ``mode``: ``"adaptive"`` (Cond. 6.9), or always ``"eager"`` / ``"lazy"``.

    ``up``/``down`` multiply the Cond. 6.9 threshold ``theta`` (lazy -> eager
    when ``winVol > up * theta``, eager -> lazy when ``winVol < down * theta``).
    With ``absolute=True`` they are plain tuple counts instead (``theta = 1``):
    ``Thresholds(up=1, down=1, absolute=True)`` switches groups back and forth
    as often as possible -- what the tests use to exercise every transition.

    ``decide_on`` -- which ``winVol`` the eager -> lazy test at a punctuation
    uses. ``"remaining"`` is 004 §6.3.4.2 to the letter: the tuples still
    active *after* the punctuation expired the closed extents, and a group
    whose ``winVol`` reaches 0 is removed (it restarts lazy). In a tumbling
    window that count is ~0 for *every* group right after each boundary, so
    dense groups flip eager -> lazy -> eager once per window however the two
    thresholds are set. ``"closed_extent"`` (default) uses ``winVol`` *before*
    the expiry, i.e. the volume of the extents that just closed -- the
    "tuples in a window extent" from which 004 §6.3.4.1 deduces a group's
    volume -- and keeps the (empty) entry of a group the model keeps eager.

    >>> Thresholds().up, Thresholds().down, Thresholds().decide_on
    (1.0, 0.8, 'closed_extent')
    >>> Thresholds(up=1, down=2)
    Traceback (most recent call last):
    ...
    oop.errors.ConfigError: Thresholds(up=1, down=2): down must not exceed up, or a group whose winVol lies between them would switch on every tuple and punctuation (thrashing)
    """

    mode: Mode = "adaptive"
    up: float = 1.0
    down: float = 0.8
    absolute: bool = False
    decide_on: Literal["closed_extent", "remaining"] = "closed_extent"

    def __post_init__(self) -> None:
        if self.mode not in ("adaptive", "eager", "lazy"):
            raise ConfigError(
                f"Thresholds(mode={self.mode!r}): mode must be 'adaptive', 'eager' (WID) or "
                "'lazy' (buffering)"
            )
        if self.up < 0 or self.down < 0:
            raise ConfigError(
                f"Thresholds(up={self.up}, down={self.down}): thresholds are tuple counts or "
                "multipliers of Cond. 6.9 and must be >= 0"
            )
        if self.decide_on not in ("closed_extent", "remaining"):
            raise ConfigError(
                f"Thresholds(decide_on={self.decide_on!r}): use 'closed_extent' (volume of the "
                "extents that just closed) or 'remaining' (tuples left after the punctuation)"
            )
        if self.down > self.up:
            raise ConfigError(
                f"Thresholds(up={self.up}, down={self.down}): down must not exceed up, or a group "
                "whose winVol lies between them would switch on every tuple and punctuation "
                "(thrashing)"
            )

    @classmethod
    def eager(cls) -> "Thresholds":
        """Every group eager from its first tuple: WID."""
        return cls(mode="eager")

    @classmethod
    def lazy(cls) -> "Thresholds":
        """Every group lazy: the buffering implementation."""
        return cls(mode="lazy")

    @classmethod
    def parse(cls, value: "Thresholds | str | None") -> "Thresholds":
        if value is None:
            return cls()
        if isinstance(value, Thresholds):
            return value
        if isinstance(value, str):
            return cls(mode=value)  # type: ignore[arg-type]
        raise ConfigError(
            f"thresholds={value!r}: pass a Thresholds(...) or one of 'adaptive', 'eager', 'lazy'"
        )


class MemoryCostModel:
    """Eq. 6.5 / 6.8 and the Cond. 6.9 threshold for one window specification.

    ``vol_src`` is a ``(groups, sources)`` array of per-group, per-source
    volumes (tuples per time unit); ``offsets`` the per-source offsets to the
    earliest-arriving source (>= 0). All methods are vectorized over groups.
    """

    def __init__(self, range_: int, slide: int) -> None:
        if range_ <= 0 or slide <= 0:
            raise ConfigError(f"MemoryCostModel: RANGE={range_} and SLIDE={slide} must be > 0")
        self.range_ = int(range_)
        self.slide = int(slide)

    def mc_eager(self, aggr: float, wed: float) -> float:
        """Eq. 6.5: ``aggr * wed / SLIDE`` bytes."""
        return float(aggr) * float(wed) / self.slide

    def mc_lazy(self, tup: float, vol: np.ndarray, wed: float, vol_src: np.ndarray,
                offsets: np.ndarray) -> np.ndarray:
        """Eq. 6.8: ``tup * (vol * wed - sum_K vol_K * offset_K)`` bytes (never below 0)."""
        n = np.asarray(vol, np.float64) * wed - self._skew(vol_src, offsets)
        return float(tup) * np.maximum(n, 0.0)

    def threshold(self, aggr: float, tup: float, wed: float, vol_src: np.ndarray,
                  offsets: np.ndarray) -> np.ndarray:
        """Cond. 6.9's right-hand side per group: ``aggr*wed/(tup*SLIDE) + sum_K vol_K*offset_K``."""
        base = float(aggr) * float(wed) / (float(tup) * self.slide)
        return base + self._skew(vol_src, offsets)

    @staticmethod
    def _skew(vol_src: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        vs = np.asarray(vol_src, np.float64)
        if vs.ndim == 1:
            vs = vs[:, None]
        off = np.asarray(offsets, np.float64)
        if not off.any():  # one source, or synchronized sources: no skew term
            return np.zeros(vs.shape[0])
        return vs @ off
