"""LateRule: what a window operator does with late tuples and emitted windows.

One object per window operator, built at ``open()`` from the configured
:class:`~oop.stream.late.LatePolicy` (or None) and ``allowed_lateness``
(resolved to the stream's time unit). Every question the window operators
(:mod:`oop.window.aggregate`, :mod:`oop.window.session`,
:mod:`oop.window.threaded`, :mod:`oop.window.slide_by_tuple`) ask about
lateness is answered here, so the rule has one meaning in one place.

The rule (DESIGN §1 grammar, docs/semantics.md "Lateness", 004 §4.1 on
punctuation as a low-watermark ``lwm``):

* A tuple with ``t < lwm`` (the last punctuation the operator saw) is *late*.
  Policies ``drop`` / ``side_output`` / ``raise`` (and None: drop and count
  as ``late_dropped``) route it as :func:`~oop.stream.late.split_late` does;
  windows are emitted once and purged when the punctuation passes their end.
* ``update`` with allowed lateness ``L``: a tuple with
  ``lwm - L <= t < lwm`` is folded in and *revises* the results already
  emitted (rows with ``is_revision = true``); a tuple with ``t < lwm - L``
  is dropped and counted as ``late_dropped``. Emitted windows are kept until
  ``lwm - L`` passes their end, and the output punctuation on
  ``window_end`` follows ``lwm - L`` (a revision can still come before it).

``update`` needs event-time windows whose state is bounded: row-based,
landmark and slide-by-tuple windows refuse it (:meth:`LateRule.refuse_kind`);
``allowed_lateness`` without ``update`` is refused too (:meth:`LateRule.resolve`).

>>> r = LateRule.resolve("w", LatePolicy.UPDATE, 5, "s")
>>> r.revises, r.horizon(100), r.revisable_from(100)
(True, 95, 95)
>>> LateRule.resolve("w", None, 0, "s").revisable_from(100) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.stream.elements import INT64_MIN
from oop.stream.late import LatePolicy
from oop.stream.timecol import parse_duration

if TYPE_CHECKING:
    from oop.operators.base import Operator
    from oop.window.kinds import WindowKind

__all__ = ["LateRule"]


@dataclass(frozen=True)
class LateRule:
    """The late policy of one window operator, with its allowed lateness in time units.

    ``policy``: the configured policy (None: drop and count late tuples);
    ``allowed``: ``L`` >= 0, nonzero only with ``update``. Answers are O(1)
    except :meth:`split`, O(rows) vectorized.
    """

    policy: LatePolicy | None
    allowed: int = 0

    # ---- configuration ----------------------------------------------------------------
    @staticmethod
    def refuse_kind(name: str, policy: LatePolicy | None, kind: "WindowKind") -> None:
        """Raise :class:`ConfigError` (one line) when ``update`` is asked on a window kind
        that cannot revise: rows (no event time), landmark (every pane kept forever),
        slide-by-tuple (its bins forget the tuples). Called at construction."""
        if policy is not LatePolicy.UPDATE:
            return
        from oop.window.kinds import Landmark

        if kind.row_based:
            raise ConfigError(f"{name}: late='update' needs an event-time window, not rows")
        if isinstance(kind, Landmark):
            raise ConfigError(f"{name}: late='update' is not supported on landmark windows "
                              "(every pane would have to be kept forever)")
        if kind.fca:
            raise ConfigError(f"{name}: late='update' is not supported on slide-by-tuple windows")

    @classmethod
    def resolve(cls, name: str, policy: LatePolicy | None, allowed_lateness: int | str,
                unit: str) -> "LateRule":
        """The rule at ``open()``: ``allowed_lateness`` (a duration or an int in ``unit``)
        must be >= 0, and nonzero only with ``update``."""
        allowed = parse_duration(allowed_lateness, unit)
        if allowed < 0:
            raise ConfigError(f"{name}: allowed_lateness must be >= 0, got {allowed}")
        if allowed and policy is not LatePolicy.UPDATE:
            raise ConfigError(
                f"{name}: allowed_lateness={allowed_lateness!r} only applies with "
                "late='update' (revise emitted windows); set late='update' or drop it"
            )
        return cls(policy, allowed)

    # ---- what the policy decides --------------------------------------------------------
    @cached_property  # read on every batch and punctuation; the rule is frozen
    def revises(self) -> bool:
        """Whether late tuples within ``L`` revise emitted results (policy ``update``): the
        output then carries ``is_revision``, emitted cells stay in the state until
        ``lwm - L`` passes (so emission neither resets them nor reads them differentially,
        and the hash layout and pane-state caches that assume one emission do not apply)."""
        return self.policy is LatePolicy.UPDATE

    @property
    def may_cache_pane_states(self) -> bool:
        """Whether Paned-WID may cache combined pane states across punctuations (not when a
        late tuple can change a pane already combined)."""
        return not self.revises

    def may_hash(self, revisions_ok: bool = False) -> bool:
        """Whether the hash-cells layout may hold the state: always without revisions; with
        them only where the evaluator re-reads a window from hash cells (``revisions_ok``)."""
        return not self.revises or revisions_ok

    def output_fields(self, retractions: bool = False) -> list[pa.Field]:
        """The flag columns the output carries after the aggregates: ``is_revision`` (and
        ``is_retraction`` for sessions) with ``update``, none otherwise."""
        if not self.revises:
            return []
        fields = [pa.field("is_revision", pa.bool_())]
        if retractions:
            fields.append(pa.field("is_retraction", pa.bool_()))
        return fields

    def flag_columns(self, n: int, revision: bool,
                     retraction: bool | None = None) -> list[pa.Array]:
        """The values of :meth:`output_fields` for ``n`` rows (``retraction`` given iff the
        fields include ``is_retraction``)."""
        if not self.revises:
            return []
        cols = [pa.array(np.full(n, revision))]
        if retraction is not None:
            cols.append(pa.array(np.full(n, retraction)))
        return cols

    def horizon(self, lwm: int) -> int:
        """The oldest time still folded in after punctuation ``lwm``: ``lwm - L`` (``L = 0``
        without ``update``, so plain ``lwm``). Rows below it are not folded in; state
        ending at or before it is purged."""
        return lwm - self.allowed

    def revisable_from(self, lwm: int) -> int | None:
        """With ``update`` after a punctuation: ``lwm - L``, the time from which emitted
        windows are kept for revision (and the output punctuation's base). None: emitted
        windows are purged at once."""
        if not self.revises or lwm == INT64_MIN:
            return None
        return self.horizon(lwm)

    def split(self, op: "Operator", batch: pa.RecordBatch, times: np.ndarray, lwm: int,
              time: str) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray | None]:
        """Apply the rule to a batch after punctuation ``lwm`` (INT64_MIN: none yet).

        Returns ``(kept rows, their times, revise)``: with ``update``, rows with
        ``t < lwm - L`` are dropped and counted on ``op`` as ``late_dropped`` and
        ``revise`` marks the kept rows with ``t < lwm`` (they revise emitted windows);
        otherwise rows with ``t < lwm`` go by the policy (:meth:`Operator.drop_late_rows`)
        and ``revise`` is None. Cost O(rows), no copy when nothing is dropped.
        """
        if lwm == INT64_MIN:
            return batch, times, None
        if not self.revises:
            batch, times = op.drop_late_rows(batch, times, lwm, self.policy, time)
            return batch, times, None
        too_late = times < self.horizon(lwm)
        if too_late.any():
            op.metrics.count_late("late_dropped", int(too_late.sum()))
            keep = ~too_late
            batch, times = batch.filter(pa.array(keep)), times[keep]
        return batch, times, times < lwm
