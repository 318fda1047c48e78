"""The experiment contract shared by every study in ``oop experiments``.

An experiment reproduces the *shape* of a figure or table of the sources
(who wins, what grows, what stays flat) by running the OOP engine and its
IOP baseline in the same run on the same data. It is one module in
``oop/experiments/`` that defines a module-level ``EXPERIMENT`` object:

>>> def run(ctx: RunContext) -> Outcome:
...     rows = [{"x": 1, "oop_s": 0.1, "iop_s": 0.2}]
...     return Outcome(params={"n": 1}, rows=rows,
...                    checks=[Check("OOP is faster", 0.1 < 0.2, {"oop": 0.1, "iop": 0.2}, "oop_s < iop_s")])
>>> EXPERIMENT = Experiment(name="demo", reproduces="nothing", summary="a demo", run=run)
>>> EXPERIMENT.name
'demo'

``run(ctx)`` gets a :class:`RunContext` (``quick``, ``seed``, ``out_dir`` to
write PNG plots into, ``progress`` to wrap long loops in a progress bar on
stderr) and returns an :class:`Outcome`: the parameters used, the result
rows (one dict per measured point, JSON-serialisable), the checks, and the
file names of the plots it wrote. The runner writes ``results.json`` /
``results.csv`` and the report; ``holds`` is the AND of the checks.

Checks state the source's expected shape, never a tuned constant. A shape
that does not hold is a finding (``holds: false``), not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

__all__ = ["Check", "Outcome", "RunContext", "Experiment"]

T = TypeVar("T")


@dataclass
class Check:
    """One expected shape: a claim, whether it held, what was measured, what was expected."""

    claim: str
    holds: bool
    measured: Any
    expected: str

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "holds": bool(self.holds), "measured": self.measured,
                "expected": self.expected}


@dataclass
class Outcome:
    """What an experiment's ``run`` returns."""

    params: dict[str, Any]
    rows: list[dict[str, Any]]
    checks: list[Check]
    plots: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return all(c.holds for c in self.checks)


def _no_progress(it: Iterable[T], **_: Any) -> Iterable[T]:
    return it


@dataclass
class RunContext:
    """How to run: reduced size (``quick``), the seed, where plots go, a progress wrapper."""

    quick: bool
    seed: int
    out_dir: Path
    progress: Callable[..., Iterable[Any]] = _no_progress
    tiny: bool = False  # CI's smoke size: even smaller than --quick
    #: experiment-specific overrides (``oop experiments run NAME --set key=value``; tests use
    #: them to run a deliberately broken configuration). Unknown keys are ignored.
    params: dict[str, Any] = field(default_factory=dict)

    def param(self, key: str, default: T) -> T:
        """The override ``key`` if given, else ``default``."""
        return self.params.get(key, default)  # type: ignore[return-value]


@dataclass(frozen=True)
class Experiment:
    """A named study: ``name`` (e.g. ``"fig6-11"``), what it ``reproduces``, and its ``run``."""

    name: str
    reproduces: str
    summary: str
    run: Callable[[RunContext], Outcome]
