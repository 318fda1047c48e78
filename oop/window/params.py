"""The parameters of a window query, defined once: :class:`WindowParams`.

``Stream.window``, :func:`~oop.window.plan.window_operator`,
:func:`~oop.window.build.one_window_operator` and
:class:`~oop.window.aggregate.WindowAggregate` all take the same keyword options; they are
the fields of this frozen dataclass (whose ``__post_init__`` normalizes and validates them,
with one-line errors naming the operator) and, for the type checker, of the
:class:`WindowOptions` keyword dictionary (``**options: Unpack[WindowOptions]``;
``tests/test_window_params.py`` checks the two name the same options). The operator-specific
rules (Paned-WID on a landmark window, ``late="update"`` on rows, ...) stay with the
operator that owns them.

>>> from oop.window import Tumbling, agg
>>> p = WindowParams.of(Tumbling(10), agg.count(), by="k", late="update")
>>> p.by, p.late.value, p.method
(('k',), 'update', 'auto')
>>> WindowParams.of(Tumbling(10), agg.count(), layout="sparse")
Traceback (most recent call last):
...
oop.errors.ConfigError: window: layout='sparse'; use 'auto', 'dense' or 'hash'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence, TypedDict

from oop.errors import ConfigError
from oop.stream.late import LatePolicy
from oop.window.aggregates import Agg, as_aggs
from oop.window.kinds import WindowKind

__all__ = ["WindowParams", "WindowOptions", "LAYOUTS"]

#: ``layout=``: dense ring x codes, hash cells, or decided on the first batch
LAYOUTS = ("auto", "dense", "hash")


class WindowOptions(TypedDict, total=False):
    """The keyword options of a window query (the fields of :class:`WindowParams` after
    ``kind`` and ``aggs``), for ``**options: Unpack[WindowOptions]`` signatures."""

    by: str | Sequence[str]
    method: str
    late: LatePolicy | str | None
    allowed_lateness: int | str
    emit_wid: bool
    name: str
    layout: str
    time: str | None
    max_state_bytes: int | None


@dataclass(frozen=True)
class WindowParams:
    """One window query's parameters, normalized and checked (see the module docstring).

    ``by``: grouping columns (a tuple); ``method``: ``"auto"``, ``"wid"``, ``"paned"``
    (each window operator accepts its own, checked there); ``late``: the parsed
    :class:`~oop.stream.late.LatePolicy` or None (count late tuples); ``allowed_lateness``:
    a duration resolved against the time unit at open; ``emit_wid``: add a ``wid`` column;
    ``layout``: one of :data:`LAYOUTS`; ``time``: the progressing attribute (None: the
    stream's primary one); ``max_state_bytes``: the operator's own state bound.
    """

    kind: WindowKind
    aggs: tuple[Agg, ...]
    by: tuple[str, ...] = ()
    method: str = "auto"
    late: LatePolicy | None = None
    allowed_lateness: int | str = 0
    emit_wid: bool = False
    name: str = "window"
    layout: str = "auto"
    time: str | None = None
    max_state_bytes: int | None = None

    @classmethod
    def of(cls, kind: WindowKind, aggs: Agg | Sequence[Agg], **options: Any) -> "WindowParams":
        """The parameters from the public keyword form (``by`` a name or names, ``aggs`` one
        aggregate or several, ``late`` a policy or its name). O(len(aggs))."""
        unknown = set(options) - set(OPTION_NAMES)
        if unknown:
            raise ConfigError(f"{options.get('name', 'window')}: unknown window option(s) "
                              f"{sorted(unknown)}; use {', '.join(OPTION_NAMES)}")
        return cls(kind, aggs, **options)  # type: ignore[arg-type]  # normalized below

    def __post_init__(self) -> None:
        name = self.name
        if self.max_state_bytes is not None and self.max_state_bytes <= 0:
            raise ConfigError(f"{name}: max_state_bytes must be > 0, got {self.max_state_bytes}")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"{name}: layout={self.layout!r}; use 'auto', 'dense' or 'hash'")
        if not isinstance(self.kind, WindowKind):
            raise ConfigError(f"{name}: {self.kind!r} is not a window kind; use "
                              "oop.window.Tumbling(...) etc.")
        by: Any = self.by
        object.__setattr__(self, "aggs", as_aggs(self.aggs))
        object.__setattr__(self, "by", (by,) if isinstance(by, str) else tuple(by))
        if self.late is not None:
            object.__setattr__(self, "late", LatePolicy.parse(self.late))

    def options(self, *, drop: Sequence[str] = ()) -> dict[str, Any]:
        """The keyword options (every field but ``kind`` and ``aggs`` and ``drop``), to
        build an operator with. O(fields)."""
        return {f: getattr(self, f) for f in OPTION_NAMES if f not in drop}


#: the keyword options, in order (the fields after kind and aggs)
OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(WindowParams))[2:]
