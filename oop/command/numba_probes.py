"""Keep numba's start-up probes from importing libraries that oop's kernels never use.

numba asks five questions once per process, four by importing a library:

* ``import numba`` checks scipy's version (``_ensure_critical_deps``): it imports
  scipy's top (~10-15 ms) only to read ``scipy.__version__``;
* ``import numba`` imports PyYAML (~10 ms) to read a ``.numba_config.yaml`` in the
  current folder, if there is one;
* the first kernel dispatch (also when the kernel only loads from numba's on-disk
  cache) imports ``numba.np.arraymath``, which probes for a BLAS by importing
  ``scipy.linalg.cython_blas``: scipy.linalg and, through scipy's array-API layer,
  ``numpy.f2py`` -- measured ~0.13 s of a ~1.3 s CPU ``oop replay`` of 10M rows;
* the same dispatch loads numba's typing registries, among them
  ``numba.core.typing.cffi_utils``, which imports cffi and builds a ``cffi.FFI()``
  (pycparser parses C declarations: ~20 ms);
* the first dispatch also loads numba extensions: ``importlib.metadata`` reads the
  entry points of every installed distribution (~25 ms CPU with 128 of them) looking
  for the ``numba_extensions`` group.

:func:`skip_probes_at_compile` answers the BLAS and cffi probes at the first compile
instead of up front (a ``numba:compile`` listener, called before the compiler runs): with
:func:`oop.kernel_cache.load_cached_kernels_lean`, a run whose kernels are all cached never
loads numba's registries, so never meets the probes.

No oop kernel calls ``np.dot``, ``@``, ``np.linalg`` or a cffi function. The
functions below answer each probe with "not installed" by importing the probing
module once with the library blocked (an import hook, removed right after), so
numba never asks again. Afterwards the libraries import normally for anyone else.

:func:`import_numba` blocks PyYAML only when the current folder holds no
``.numba_config.yaml`` (numba then would not read one), and marks numba's extension
scan done only when no ``entry_points.txt`` of a distribution on ``sys.path`` names the
``numba_extensions`` group (:func:`declares_numba_extensions`, ~1 ms): there is no
extension to load then. Neither changes what numba does.

Effect on the process: a numba kernel compiled *afterwards* that uses ``np.dot`` /
``np.linalg`` (no BLAS) or calls a cffi function (no cffi typing) fails to compile.
:func:`import_numba` is harmless everywhere (only the version check is skipped);
call :func:`skip_blas_probe`, :func:`skip_cffi_probe` and
:func:`skip_probes_at_compile` only in processes that run oop's own kernels (``oop
replay``), not in a library import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import os
import sys
from typing import Any

__all__ = ["import_numba", "skip_blas_probe", "skip_cffi_probe", "declares_numba_extensions",
           "skip_probes_at_compile"]


class _Block(importlib.abc.MetaPathFinder):
    """An import hook that refuses the packages ``names`` (and their submodules)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if any(name == n or name.startswith(n + ".") for n in self.names):
            raise ImportError(f"{name} is not used by this process (oop.command.numba_probes)")
        return None


def _import_without(module: str, blocked: tuple[str, ...], probed: str) -> bool:
    """Import ``module`` with the packages ``blocked`` refused; True if it was imported now.

    False when ``module`` or ``probed`` (what the probe would load) is already imported:
    nothing to save, or too late. A blocked package already imported stays usable; only
    its submodules not yet imported are refused.
    """
    if module in sys.modules or probed in sys.modules:
        return False
    block = _Block(blocked)
    sys.meta_path.insert(0, block)
    try:
        importlib.import_module(module)
    finally:
        sys.meta_path.remove(block)
    return True


def import_numba() -> bool:
    """``import numba`` without its scipy version check (and without PyYAML when there is
    no numba config file to read); True if numba was imported now.

    Idempotent; O(numba's import) the first time, O(1) after.
    """
    blocked = ("scipy",) if os.path.exists(".numba_config.yaml") else ("scipy", "yaml")
    imported = _import_without("numba", blocked, "scipy")
    if imported:
        _skip_empty_extension_scan()
    return imported


def declares_numba_extensions() -> bool:
    """Whether an installed distribution may declare a numba extension: an
    ``entry_points.txt`` naming ``numba_extensions`` in a ``*.dist-info`` / ``*.egg-info``
    folder of a ``sys.path`` folder -- or a ``sys.path`` entry that is not a folder (a zip
    or an egg, not searched: assumed to). O(distributions) small reads."""
    for entry in sys.path:
        if entry and not os.path.isdir(entry):
            if os.path.exists(entry):
                return True  # a zip or egg file: metadata inside, not searched here
            continue
        try:
            it = os.scandir(entry or ".")
        except OSError:
            return True  # a folder we cannot list: assume it may declare one
        with it:
            for e in it:
                if not e.name.endswith((".dist-info", ".egg-info", ".egg")):
                    continue
                sub = "EGG-INFO" if e.name.endswith(".egg") else ""
                try:
                    with open(os.path.join(e.path, sub, "entry_points.txt"), "rb") as f:
                        if b"numba_extensions" in f.read():
                            return True
                except OSError:  # no entry points (or a metadata file, not a folder)
                    continue
    return False


def _skip_empty_extension_scan() -> None:
    """Mark numba's extension loading done when there is nothing to load (module doc)."""
    import numba.core.entrypoints as entrypoints

    if hasattr(entrypoints, "_already_initialized") and not declares_numba_extensions():
        entrypoints._already_initialized = True


def skip_blas_probe() -> bool:
    """Answer numba's BLAS probe with "none" (see module doc); True if it was answered.

    False when ``scipy.linalg`` or ``numba.np.arraymath`` is already imported (nothing to
    save, or too late). Idempotent.
    """
    import_numba()
    return _import_without("numba.np.arraymath", ("scipy",), "scipy.linalg")


def skip_cffi_probe() -> bool:
    """Answer numba's cffi probe with "not installed" (see module doc); True if answered.

    False when cffi or numba's cffi support is already imported. Idempotent.
    """
    import_numba()
    return _import_without("numba.core.typing.cffi_utils", ("cffi",), "cffi")


def skip_probes_at_compile() -> bool:
    """Answer the BLAS and cffi probes when numba first compiles, before the compiler's
    registry refresh would run them (a ``numba:compile`` listener; the answers are
    idempotent after). For processes that run oop's own kernels only (module doc); True if
    the listener was installed now."""
    import_numba()
    from numba.core import event

    if _PROBES_AT_COMPILE:
        return False

    class _Probes(event.Listener):
        def on_start(self, _ev: Any) -> None:
            skip_blas_probe()
            skip_cffi_probe()

        def on_end(self, _ev: Any) -> None:
            pass

    _PROBES_AT_COMPILE.append(_Probes())
    event.register("numba:compile", _PROBES_AT_COMPILE[0])
    return True


_PROBES_AT_COMPILE: list[Any] = []
