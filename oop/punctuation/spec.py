"""Punctuation specs for the command line: ``parse_punctuation("bounded:5s")``.

Grammar (case-insensitive, no spaces needed)::

    SPEC     := BASE ("+" MODIFIER)*
    BASE     := "ordered" | "bounded:" DUR | "tuples:" N | "adaptive:" FRACTION
              | "external" [":" COLUMN]
    MODIFIER := "idle:" DUR      -- lull rule: a silent source follows the clock - DUR
              | "every:" DUR     -- granularity: only multiples of DUR, no duplicates
              | "idle-wall:" AMOUNT -- a source silent this long in wall time follows the clock
              | "cadence:" N "rows" -- ask the generator after every N input rows

``cadence`` makes the punctuation after a row a function of the rows before it
and the spec only (not of how the input happened to be chunked); the CLI adds
``+cadence:65536rows`` when a spec names none.

``DUR`` is a duration (``500ms``, ``5s``, ``1min``) or a bare integer in the
time column's unit; ``FRACTION`` is the target late fraction in ``[0, 1)``.

>>> parse_punctuation("bounded:5s")
BoundedDelay(delay='5s')
>>> parse_punctuation("tuples:100")
BoundedTuples(n=100)
>>> parse_punctuation("adaptive:0.01+every:1s")
Granular(inner=Adaptive(target_late=0.01, window=100000, min_delay=0), every='1s', origin=0)
>>> parse_punctuation("external:eob")
External(column='eob')
>>> parse_punctuation("bounded:5s+cadence:10000rows")
Cadence(inner=BoundedDelay(delay='5s'), rows=10000)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oop.errors import ConfigError
from oop.io.amount import parse_amount

if TYPE_CHECKING:
    from oop.punctuation.base import GeneratorConfig

# The generator classes are imported inside the parsers: the CLI shows
# SPEC_HELP in ``--help`` without importing numpy and pyarrow.

__all__ = ["parse_punctuation", "SPEC_HELP"]

SPEC_HELP = (
    "ordered | bounded:DUR | tuples:N | adaptive:FRACTION | external[:COLUMN], "
    "optionally followed by +idle:DUR, +every:DUR, +idle-wall:DUR, +cadence:Nrows"
)


def _fail(spec: str, why: str) -> ConfigError:
    return ConfigError(f"punctuation spec {spec!r}: {why}; expected {SPEC_HELP}")


def _duration(spec: str, arg: str) -> str | int:
    from oop.stream.timecol import parse_duration

    if not arg:
        raise _fail(spec, "a duration is missing")
    try:
        parse_duration(arg, "ns")  # syntax check only; the unit is known at build time
    except ConfigError as e:
        raise _fail(spec, str(e)) from None
    return int(arg) if arg.lstrip("-").isdigit() else arg


def _base(spec: str, part: str) -> GeneratorConfig:
    from oop.punctuation.adaptive import Adaptive
    from oop.punctuation.bounded_delay import BoundedDelay
    from oop.punctuation.bounded_tuples import BoundedTuples
    from oop.punctuation.external import External
    from oop.punctuation.ordered import Ordered

    kind, _, arg = part.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind == "ordered":
        if arg:
            raise _fail(spec, "'ordered' takes no argument")
        return Ordered()
    if kind in ("bounded", "delay"):
        return BoundedDelay(_duration(spec, arg))
    if kind in ("tuples", "bsort"):
        if not arg.isdigit():
            raise _fail(spec, f"'tuples' needs a whole tuple count, got {arg!r}")
        return BoundedTuples(int(arg))
    if kind == "adaptive":
        try:
            frac = float(arg) if arg else 0.01
        except ValueError:
            raise _fail(spec, f"'adaptive' needs a late fraction like 0.01, got {arg!r}") from None
        return Adaptive(frac)
    if kind == "external":
        return External(arg or None)
    raise _fail(spec, f"unknown generator {kind!r}")


def parse_punctuation(spec: str) -> GeneratorConfig:
    """Parse a CLI punctuation spec into a :class:`GeneratorConfig` (see module doc)."""
    from oop.punctuation.cadence import Cadence, IdleWall
    from oop.punctuation.granularity import Granular
    from oop.punctuation.idle import Idle

    if not isinstance(spec, str) or not spec.strip():
        raise _fail(str(spec), "it is empty")
    parts = spec.strip().split("+")
    cfg = _base(spec, parts[0])
    cadence: int | None = None
    for mod in parts[1:]:
        kind, _, arg = mod.partition(":")
        kind = kind.strip().lower()
        if kind in ("idle", "lull"):
            cfg = Idle(cfg, _duration(spec, arg.strip()))
        elif kind in ("every", "granularity"):
            cfg = Granular(cfg, _duration(spec, arg.strip()))
        elif kind == "idle-wall":
            try:
                wall = parse_amount(arg, what="idle-wall", allow_rows=False)
            except ConfigError as e:
                raise _fail(spec, str(e)) from None
            cfg = IdleWall(cfg, float(wall.seconds or 0))
        elif kind == "cadence":
            if cadence is not None:
                raise _fail(spec, "give one +cadence")
            try:
                cadence = parse_amount(arg, what="cadence", allow_duration=False).rows
            except ConfigError as e:
                raise _fail(spec, str(e)) from None
        else:
            raise _fail(spec, f"unknown modifier {kind!r}")
    return cfg if cadence is None else Cadence(cfg, cadence)
