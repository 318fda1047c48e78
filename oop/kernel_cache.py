"""How oop's numba kernels load from numba's on-disk cache: without numba's registries.

Every oop kernel is compiled with ``cache=True``, so after a first run each one loads
from numba's cache. numba's ``Cache.load_overload`` refreshes the target context first
(``BaseContext.refresh``: every typing and lowering registry, ~60 modules of
``numba.cpython``, ``numba.np``, ``numba.typed``..., among them ``numba.np.arraymath``,
whose BLAS probe imports ``scipy.linalg``), although cached machine code only links
against numba's runtime (NRT). Measured on a 2-core VM, 20k-row ``oop replay`` with a
warm cache: 1.20 -> 1.00 s wall, 1.17 -> 0.97 s CPU (medians of 15); the README's Python
quick start spent ~1 s of its ~2.2 s there.

:func:`load_cached_kernels_lean` makes a cache load of *oop's own* kernels initialize NRT
only and leaves the registries to the first real compile: numba's compiler refreshes
both contexts itself before it types anything (``CompilerBase.__init__``), so a compile
-- of an oop kernel not yet cached, or of any user function -- sees every registry as
usual. Any other cached function (a user's, defined outside ``oop.*``) loads exactly as
numba loads it. The plan executor sets this up when it opens a plan, before the plan's
first kernel, for the commands and the Python API alike.

:func:`literal_twins` reads the cache's index files for kernels numba compiled twice for one
call (a literal argument and its type): each twin costs a first run the compile of a whole
specialization. ``tests/test_compile_ahead.py`` asserts none for two first runs, and
``.ci/literal-twins`` for every kernel the test suite compiled.

``tests/test_numba_probes.py`` checks, in fresh processes with an empty and then a warm
cache, that the kernels compute the same either way and that a later compile works.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

__all__ = ["load_cached_kernels_lean", "literal_twins"]


def _is_oop_kernel(cache: Any) -> bool:
    """Whether a numba cache object belongs to a kernel of oop's own modules."""
    module = getattr(getattr(cache, "_py_func", None), "__module__", None) or ""
    return module == "oop" or module.startswith("oop.")


def load_cached_kernels_lean() -> bool:
    """Make numba load oop's cached kernels without loading its registries (see module
    doc); True if it was set up now.

    Only oop's own kernels (defined in ``oop.*`` modules) load this way; any other cached
    function (a user's) loads as numba does it. False when already set up, or when this
    numba's cache does not have the shape this relies on (``Cache.load_overload`` calling
    ``_guard_against_spurious_io_errors`` and ``_load_overload``, a ``_py_func``;
    ``numba.core.runtime.rtsys``): then numba loads as usual. Idempotent; O(1).
    """
    from numba.core import caching

    cache = getattr(caching, "Cache", None)
    numba_load = getattr(cache, "load_overload", None)
    if numba_load is None or getattr(numba_load, "_oop_lean", False):
        return False
    if not all(hasattr(cache, a) for a in ("_guard_against_spurious_io_errors",
                                            "_load_overload")):
        return False
    try:
        from numba.core.runtime import rtsys
    except ImportError:
        return False

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        """numba's ``Cache.load_overload``; for oop's kernels with ``rtsys.initialize``
        (what cached code links against) instead of ``target_context.refresh()`` (what
        compiling needs)."""
        if not _is_oop_kernel(self):
            return numba_load(self, sig, target_context)
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload._oop_lean = True  # type: ignore[attr-defined]
    cache.load_overload = load_overload
    return True


def _widened(sig: str) -> str:
    """A signature with every ``Literal[T](v)`` replaced by its type (``int`` -> ``int64``)."""
    return re.sub(r"Literal\[(\w+)\]\([^)]*\)",
                  lambda m: {"int": "int64"}.get(m.group(1), m.group(1)), sig)


def literal_twins(cache: str | Path) -> list[str]:
    """The index files under ``cache`` of kernels numba compiled twice for one call: once
    for a literal argument (``Literal[int](0)``, e.g. a counter typed before its loop widened
    it) and once for its type. numba 0.6x's index layout: a pickled version, then the pickled
    ``(stamp, overloads)`` keyed by ``(signature, target, ...)``. Sorted names; O(index
    files)."""
    twins = []
    for index in Path(cache).rglob("*.nbi"):
        with open(index, "rb") as f:
            pickle.load(f)
            _, overloads = pickle.loads(f.read())
        sigs = [_widened(str(key[0])) for key in overloads]
        if len(set(sigs)) < len(sigs):
            twins.append(index.name)
    return sorted(twins)
