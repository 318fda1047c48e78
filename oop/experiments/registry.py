"""Discovering experiments: every ``oop/experiments/exp_*.py`` module defining ``EXPERIMENT``.

Nothing is hard-coded: an engineer adds a study by dropping a module
``exp_<name>.py`` with a module-level :class:`~oop.experiments.base.Experiment`
named ``EXPERIMENT``. A module that fails to import (or has no
``EXPERIMENT``) does not hide the others: it is listed in
:attr:`Registry.broken` with its error, and running it reports the error.

>>> reg = discover()
>>> all(n == reg.experiments[n].name for n in reg.experiments)
True
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback
from dataclasses import dataclass, field

from oop.errors import ConfigError
from oop.experiments.base import Experiment

__all__ = ["Registry", "discover", "PACKAGE"]

PACKAGE = "oop.experiments"


@dataclass
class Registry:
    """Experiments by name (sorted), and modules that could not be loaded (module -> traceback)."""

    experiments: dict[str, Experiment] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)

    def names(self) -> list[str]:
        """Figure reproductions first (``fig*``, in natural order), then the other studies."""
        return sorted(self.experiments, key=lambda n: (not n.startswith("fig"), _natural(n)))

    def resolve(self, names: list[str]) -> list[str]:
        """Expand ``all``; reject unknown names with the list of known ones."""
        if not names:
            raise ConfigError("name at least one experiment, or 'all'; see `oop experiments list`")
        out: list[str] = []
        for n in names:
            if n == "all":
                out.extend(x for x in self.names() if x not in out)
                out.extend(f"!{m}" for m in sorted(self.broken) if f"!{m}" not in out)
            elif n in self.experiments:
                if n not in out:
                    out.append(n)
            elif _module_of(n) in self.broken:
                out.append(f"!{_module_of(n)}")
            else:
                raise ConfigError(
                    f"no experiment named {n!r}; known: {', '.join(self.names()) or '(none)'}"
                )
        return out


def _natural(name: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _module_of(name: str) -> str:
    return f"exp_{name.replace('-', '_')}"


def discover(package: str | None = None) -> Registry:
    """Import every ``exp_*`` module of ``package`` (default :data:`PACKAGE`), collect ``EXPERIMENT``."""
    reg = Registry()
    package = package or PACKAGE
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("exp_"):
            continue
        try:
            mod = importlib.import_module(f"{package}.{info.name}")
            exp = getattr(mod, "EXPERIMENT", None)
            if not isinstance(exp, Experiment):
                raise TypeError(
                    f"module {info.name} defines no EXPERIMENT = Experiment(...); "
                    "see oop/experiments/base.py"
                )
            if exp.name in reg.experiments:
                raise ValueError(f"experiment name {exp.name!r} is defined twice")
        except Exception:  # noqa: BLE001 -- a broken module is reported, not fatal
            reg.broken[info.name] = traceback.format_exc()
            continue
        reg.experiments[exp.name] = exp
    return reg
