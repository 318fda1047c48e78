"""AdaptWID's configuration (004 §6.3) and its per-punctuation report.

:class:`AdaptConfig` validates a query -- an event-time Tumbling / Sliding window, at least
one aggregate, 1..127 sources, the lazy buffer's bins -- with errors that say what to use
instead; ``AdaptLogic(config, value_dtypes)`` (:mod:`oop.adapt.logic`) is the runtime built
from it.
:class:`Timeline` records, per punctuation, how many groups are eager / lazy /
transitional and the bytes each kind of state holds (004 Fig. 6-19/6-20's curves).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oop.adapt.cost import Thresholds
from oop.errors import ConfigError
from oop.window.aggregates import Agg
from oop.window.kinds import Sliding

__all__ = ["AdaptConfig", "Timeline"]


@dataclass(frozen=True)
class AdaptConfig:
    """AdaptWID configuration; ``AdaptLogic(config, value_dtypes)`` is its runtime.

    ``kind``: a resolved time-based :class:`~oop.window.kinds.Sliding` or
    ``Tumbling`` window; ``aggs``: aggregates of :mod:`oop.window.agg`;
    ``n_sources``: sources whose arrival-time offsets enter Cond. 6.9;
    ``n_bins``: bins of the lazy buffer.
    """

    kind: Sliding
    aggs: tuple[Agg, ...]
    n_sources: int = 1
    thresholds: Thresholds = field(default_factory=Thresholds)
    n_bins: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Sliding):
            raise ConfigError(
                f"adaptive_window: window kind {self.kind!r} is not supported; AdaptWID chooses "
                "per group between partials and buffered tuples over event-time windows -- use "
                "Tumbling or Sliding, or Stream.window for row-based, landmark and FCA windows"
            )
        self.kind.r, self.kind.s  # raises ConfigError if not resolved
        if not self.aggs:
            raise ConfigError("adaptive_window: give at least one aggregate, e.g. agg.count()")
        if self.n_sources < 1 or self.n_sources > 127:
            raise ConfigError(f"adaptive_window: n_sources={self.n_sources} must be in 1..127")
        if self.n_bins < 1:
            raise ConfigError(f"adaptive_window: n_bins={self.n_bins} must be >= 1")

    @property
    def value_columns(self) -> list[str]:
        out: list[str] = []
        for a in self.aggs:
            if a.column and a.column not in out and not a.spec.counts_rows:
                out.append(a.column)
        return out


@dataclass
class Timeline:
    """Per punctuation: the punctuation value and groups eager / lazy / transitional, bytes."""

    punct: list[int] = field(default_factory=list)
    eager: list[int] = field(default_factory=list)
    lazy: list[int] = field(default_factory=list)
    transitional: list[int] = field(default_factory=list)
    partial_bytes: list[int] = field(default_factory=list)
    buffer_bytes: list[int] = field(default_factory=list)
    group_bytes: list[int] = field(default_factory=list)
    wed: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in self.__dict__.items()}
