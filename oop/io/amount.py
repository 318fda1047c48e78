"""One syntax for amounts: a wall-clock duration or a count of input rows.

Every flag that takes an amount (``--stop-after-idle``, ``--metrics-every``,
the punctuation ``+cadence:``, ``--checkpoint-every``) parses it here:

* a duration: a number with a unit, ``500ms``, ``5s``, ``1.5s``, ``1min``, ``2h``;
* a row count: a whole number followed by ``rows``, ``10000rows`` (``10k rows``
  is not accepted: write the digits).

>>> parse_amount("500ms")
Amount(seconds=0.5, rows=None)
>>> parse_amount("10000rows")
Amount(seconds=None, rows=10000)
>>> parse_amount("5s", allow_rows=False).seconds
5.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from oop.errors import ConfigError

__all__ = ["Amount", "parse_amount", "AMOUNT_HELP"]

AMOUNT_HELP = "a duration (500ms, 5s, 1min) or a row count (10000rows)"
_ROWS = re.compile(r"^\s*(\d+)\s*rows?\s*$")
_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d)\s*$")
_SECONDS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Amount:
    """Exactly one of ``seconds`` (wall clock) or ``rows`` (input rows) is set."""

    seconds: float | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.rows is None):
            raise ConfigError("an amount is either a duration or a row count, not both")
        if self.seconds is not None and self.seconds <= 0:
            raise ConfigError(f"a duration must be positive, got {self.seconds}s")
        if self.rows is not None and self.rows <= 0:
            raise ConfigError(f"a row count must be positive, got {self.rows}")

    def __str__(self) -> str:
        return f"{self.rows}rows" if self.rows is not None else f"{self.seconds:g}s"


def parse_amount(text: str, *, what: str = "amount", allow_rows: bool = True,
                 allow_duration: bool = True) -> Amount:
    """Parse ``text`` as an :class:`Amount`; ``what`` names the flag in errors."""
    s = str(text).strip().lower()
    m = _ROWS.match(s)
    if m and allow_rows:
        n = int(m.group(1))
        if n <= 0:
            raise ConfigError(f"{what} {text!r}: a row count must be positive")
        return Amount(rows=n)
    m = _DUR.match(s)
    if m and allow_duration:
        sec = float(m.group(1)) * _SECONDS[m.group(2)]
        if sec <= 0:
            raise ConfigError(f"{what} {text!r}: a duration must be positive")
        return Amount(seconds=sec)
    kinds = ([AMOUNT_HELP] if allow_rows and allow_duration
             else ["a duration (500ms, 5s, 1min)"] if allow_duration
             else ["a row count (10000rows)"])
    raise ConfigError(f"{what} {text!r}: expected {kinds[0]}")
