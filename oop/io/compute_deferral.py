"""``pyarrow.compute`` loaded on its first use, not on its import, in a command's process.

Importing ``pyarrow.compute`` wraps each of Arrow's ~290 compute functions in a Python
function and builds its docstring (numpydoc parsing of the options classes): ~0.03 s of CPU,
one of the larger parts of ``oop replay``'s start-up after numba. oop's modules import it at
their top (26 of them), yet a replay over integer keys calls none of its functions.

:func:`defer_arrow_compute` puts a stand-in module under the name ``pyarrow.compute``
(in ``sys.modules`` and as ``pyarrow.compute``) that carries the real module's spec: an
``import pyarrow.compute as pc`` binds the stand-in at no cost, and the first attribute
asked of it (``pc.cast``, ``Array.cast`` inside pyarrow, ``from pyarrow.compute import X``)
imports the real module, copies its names into the stand-in and puts the real module back
in its place -- from then on both answer the same objects at plain module speed. Loading is
serialized by a lock (a reading or writing thread may be first). Nothing else changes;
results do not depend on it. Call it before anything imports ``pyarrow.compute``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

__all__ = ["defer_arrow_compute"]

_NAME = "pyarrow.compute"
_lock = threading.Lock()


class _Deferred(types.ModuleType):
    """The stand-in: every name missing from its dict loads the real module first."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # import machinery and copy protocols probing
        return getattr(_load(self), name)


def _load(stand_in: _Deferred) -> types.ModuleType:
    """The real ``pyarrow.compute``, imported once; its names copied into ``stand_in``."""
    with _lock:
        current = sys.modules.get(_NAME)
        if current is not None and current is not stand_in:
            return current  # loaded already (by another thread)
        sys.modules.pop(_NAME, None)
        try:
            real = importlib.import_module(_NAME)
        except BaseException:
            sys.modules[_NAME] = stand_in
            raise
        stand_in.__dict__.update({k: v for k, v in real.__dict__.items()
                                  if k not in ("__spec__", "__loader__")})
        return real


def defer_arrow_compute() -> bool:
    """Put the stand-in in place; True if it was (False: ``pyarrow.compute`` is imported
    already, nothing to save). Imports ``pyarrow`` itself. O(1)."""
    if _NAME in sys.modules:
        return False
    import pyarrow

    spec = importlib.util.find_spec(_NAME)
    if spec is None:  # pragma: no cover - every pyarrow has it
        return False
    stand_in = _Deferred(_NAME)
    # the real spec: importlib finds it (not initializing) and binds the stand-in as is
    vars(stand_in).update(__spec__=spec, __loader__=spec.loader, __file__=spec.origin)
    sys.modules[_NAME] = stand_in
    setattr(pyarrow, "compute", stand_in)
    return True
