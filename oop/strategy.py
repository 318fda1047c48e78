"""Disorder-handling strategies: how a logical query is planned, OOP or one of the IOP baselines.

:class:`Strategy` names the plan and its slack; :func:`parse_strategy` reads the
``--strategy`` spec. :mod:`oop.query` plans a logical query per strategy (the table
of plans is there); the IOP join plans (:mod:`oop.iop_baseline.opob_join`) read the
same spec, so it lives here, below both (and importing it does not load the IOP operators).

>>> parse_strategy("iop-slack:2s,generous")
Strategy(kind='iop-slack', amount='2s', semantics='generous')
>>> parse_strategy("oop").spec, parse_strategy("iop-bsort:100").spec
('oop', 'iop-bsort:100')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oop.errors import ConfigError

__all__ = ["Strategy", "parse_strategy", "STRATEGY_HELP", "Kind"]

Kind = Literal["oop", "iop-sort", "iop-bsort", "iop-slack"]
STRATEGY_HELP = ("oop | iop-sort | iop-bsort:N | iop-slack:DUR[,consistent|generous] "
                 "(e.g. iop-slack:2s,generous)")


@dataclass(frozen=True)
class Strategy:
    """How a logical query handles disorder: ``kind`` with its slack ``amount`` and ``semantics``."""

    kind: Kind = "oop"
    amount: int | str | None = None
    semantics: Literal["consistent", "generous"] = "consistent"

    def __post_init__(self) -> None:
        if self.kind not in ("oop", "iop-sort", "iop-bsort", "iop-slack"):
            raise ConfigError(f"unknown strategy {self.kind!r}; use {STRATEGY_HELP}")
        if self.kind in ("iop-slack", "iop-bsort") and self.amount is None:
            raise ConfigError(f"strategy {self.kind} needs an amount, e.g. "
                              f"{'iop-slack:2s' if self.kind == 'iop-slack' else 'iop-bsort:1000'}")
        if self.kind == "iop-bsort" and not isinstance(self.amount, int):
            raise ConfigError(f"iop-bsort needs a whole number of tuples, got {self.amount!r}")
        if self.semantics not in ("consistent", "generous"):
            raise ConfigError(f"slack semantics {self.semantics!r}: use consistent or generous")

    @property
    def spec(self) -> str:
        """The string :func:`parse_strategy` reads back."""
        if self.kind in ("oop", "iop-sort"):
            return self.kind
        if self.kind == "iop-bsort":
            return f"iop-bsort:{self.amount}"
        return f"iop-slack:{self.amount},{self.semantics}"

    @property
    def is_iop(self) -> bool:
        """True for the in-order plans (everything but ``oop``)."""
        return self.kind != "oop"


def parse_strategy(spec: str | Strategy) -> Strategy:
    """Parse ``oop``, ``iop-sort``, ``iop-bsort:N`` or ``iop-slack:DUR[,consistent|generous]``."""
    if isinstance(spec, Strategy):
        return spec
    text = str(spec).strip().lower()
    if text in ("oop", "iop-sort", "iop"):
        return Strategy("iop-sort" if text == "iop" else text)  # type: ignore[arg-type]
    head, _, rest = text.partition(":")
    if head == "iop-bsort" and rest:
        try:
            n = int(rest)
        except ValueError:
            raise ConfigError(f"strategy {spec!r}: iop-bsort:N needs an integer tuple count") from None
        if n < 0:
            raise ConfigError(f"strategy {spec!r}: the tuple count must be >= 0, e.g. iop-bsort:100")
        return Strategy("iop-bsort", n)
    if head == "iop-slack" and rest:
        amount, _, sem = rest.partition(",")
        amount = amount.strip()
        value: int | str = int(amount) if amount.lstrip("-").isdigit() else amount
        from oop.stream.timecol import parse_duration

        if parse_duration(value, "ns") < 0:  # validates the syntax too
            raise ConfigError(f"strategy {spec!r}: the slack must be >= 0 (a negative slack "
                              "would drop almost every tuple as late); e.g. iop-slack:2s")
        return Strategy("iop-slack", value, (sem.strip() or "consistent"))  # type: ignore[arg-type]
    raise ConfigError(f"cannot parse strategy {spec!r}; use {STRATEGY_HELP}")
