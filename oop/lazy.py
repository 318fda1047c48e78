"""Public names of a package loaded on first use (PEP 562), so ``import oop`` stays cheap.

:func:`lazy_names` gives a package the module ``__getattr__`` and ``__dir__`` that import
the module defining a public name when it is first asked for, cache the value in the
package, and load submodules (``oop.window.kernels``) the same way. ``oop``,
``oop.punctuation`` and ``oop.window`` use it.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable

__all__ = ["lazy_names"]


def lazy_names(package: str, names: dict[str, tuple[str, str | None]],
               namespace: dict[str, Any]) -> tuple[Callable[[str], object],
                                                   Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose public ``names`` map to (defining
    module, attribute; ``None``: the module itself); values are cached in ``namespace``
    (the package's ``globals()``)."""

    def __getattr__(name: str) -> object:
        if name not in names:
            if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = names[name]
        value: object = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
