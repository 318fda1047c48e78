"""Parsers for the command-line specs of ``oop replay`` (also used by the Spark job).

* window: ``tumbling:DUR | sliding:RANGE,SLIDE | landmark:SLIDE | rows:RANGE,SLIDE | session:GAP``
* aggregate: ``count | sum:COL | mean:COL | min:COL | max:COL | var:COL | std:COL |
  first:COL | last:COL | median:COL | quantile:COL:Q | distinct:COL``

Durations are ``500ms``, ``5s``, ``10min``, ``1h``, ``1d`` or a bare integer in
the time column's unit. Every parse error is a :class:`~oop.errors.ConfigError`
whose message quotes the spec and shows the accepted forms.

>>> parse_window("sliding:10s,1s", "ms")
Sliding(range=10000, slide=1000, origin=0)
>>> parse_window("session:30s", "ms")
Session(gap=30000)
>>> [a.name for a in parse_aggs(["count", "sum:len"])]
['count', 'sum_len']
"""

from __future__ import annotations

from typing import Any, Sequence

from oop.errors import ConfigError

__all__ = ["parse_window", "parse_aggs", "parse_agg", "WINDOW_FORMS", "AGG_FORMS"]

WINDOW_FORMS = ("tumbling:DUR | sliding:RANGE,SLIDE | landmark:SLIDE | rows:RANGE,SLIDE | "
                "session:GAP")
AGG_FORMS = (
    "count | sum:COL | mean:COL | min:COL | max:COL | var:COL | std:COL | first:COL | "
    "last:COL | median:COL | quantile:COL:Q | distinct:COL | heavy:COL:K"
)
_COLUMN_AGGS = ("sum", "mean", "min", "max", "var", "std", "first", "last", "median", "distinct")


def _durations(spec: str, body: str, n: int, unit: str) -> list[int]:
    from oop.stream.timecol import parse_duration  # numpy + pyarrow: not for ``--help``

    parts = [p for p in body.split(",")]
    if len(parts) != n or not all(p.strip() for p in parts):
        raise ConfigError(f"window spec {spec!r}: expected {n} value(s); use {WINDOW_FORMS}")
    try:
        return [parse_duration(p.strip(), unit) for p in parts]
    except ConfigError as e:
        raise ConfigError(f"window spec {spec!r}: {e}") from e


def parse_window(spec: str, unit: str) -> Any:
    """A window-kind object from ``spec``; time durations are read in ``unit``."""
    from oop.window import Landmark, RowSliding, Sliding, Tumbling

    kind, sep, body = spec.partition(":")
    kind = kind.strip().lower()
    if not sep:
        raise ConfigError(f"cannot parse window spec {spec!r}; use {WINDOW_FORMS}")
    try:
        if kind == "tumbling":
            (size,) = _durations(spec, body, 1, unit)
            return Tumbling(size)
        if kind == "sliding":
            rng, slide = _durations(spec, body, 2, unit)
            return Sliding(rng, slide)
        if kind == "session":
            from oop.window.session import Session

            (gap,) = _durations(spec, body, 1, unit)
            return Session(gap)
        if kind == "landmark":
            (slide,) = _durations(spec, body, 1, unit)
            return Landmark(slide)
        if kind == "rows":
            parts = body.split(",")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise ConfigError(
                    f"window spec {spec!r}: rows windows take two row counts, e.g. rows:4000,1"
                )
            return RowSliding(int(parts[0]), int(parts[1]))
    except (ValueError, TypeError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"window spec {spec!r}: {e}") from e
    raise ConfigError(f"unknown window kind {kind!r} in {spec!r}; use {WINDOW_FORMS}")


def parse_agg(spec: str) -> Any:
    """One aggregate object from ``spec``."""
    from oop.window import agg

    name, _, rest = spec.strip().partition(":")
    name = name.lower()
    if name == "count":
        if rest:
            raise ConfigError(f"aggregate spec {spec!r}: count takes no column; use 'count'")
        return agg.count()
    if name == "quantile":
        col, _, q = rest.rpartition(":")
        try:
            qv = float(q)
        except ValueError:
            qv = -1.0
        if not col or not 0.0 <= qv <= 1.0:
            raise ConfigError(
                f"aggregate spec {spec!r}: write quantile:COL:Q with Q between 0 and 1"
            )
        return agg.quantile(col, qv)
    if name in ("heavy", "heavy_hitters"):
        col, _, k = rest.rpartition(":")
        if not col or not k.strip().isdigit() or int(k) < 1:
            raise ConfigError(f"aggregate spec {spec!r}: write heavy:COL:K with K >= 1 (the top-K "
                              "values per window and group, with their counts)")
        return agg.heavy_hitters(col, int(k))
    if name in _COLUMN_AGGS:
        if not rest:
            raise ConfigError(f"aggregate spec {spec!r}: {name} needs a column, e.g. {name}:len")
        return getattr(agg, name)(rest)
    raise ConfigError(f"unknown aggregate {name!r} in {spec!r}; use {AGG_FORMS}")


def parse_aggs(specs: Sequence[str]) -> list[Any]:
    """Aggregate objects from a list of specs (at least one)."""
    if not specs:
        raise ConfigError(f"give at least one --agg; use {AGG_FORMS}")
    return [parse_agg(s) for s in specs]
