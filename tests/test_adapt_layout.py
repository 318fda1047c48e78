"""The layout of oop.adapt after the split of its god files (issue 19).

* ``oop.adapt.kernels`` re-exports every public kernel and reference of its family
  modules -- the same objects -- so ``from oop.adapt import kernels as K`` keeps finding
  them wherever they live;
* every compiled kernel of the families is cached on disk (``cache=True``) next to the
  module that defines it, so a warm start does not recompile after the move;
* :class:`~oop.adapt.logic.AdaptLogic` is the chain core -> modes -> batch -> close ->
  logic, with each hook defined in the module that owns it and its public surface intact.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import oop.adapt.kernels as K
from oop.adapt.config import AdaptConfig
from oop.adapt.logic import AdaptLogic
from oop.window import aggregates as agg
from oop.window.kinds import Sliding

FAMILIES = ["buffer", "common", "dense", "groupby", "route", "settle"]


def _family(name: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"oop.adapt.kernels.{name}")


def _public(mod) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Functions (compiled or not) and constants a family module defines, not imports."""
    out: dict[str, object] = {}
    for n, v in vars(mod).items():
        if n.startswith("_"):
            continue
        if isinstance(v, CPUDispatcher) and v.py_func.__module__ == mod.__name__:
            out[n] = v
        elif inspect.isfunction(v) and v.__module__ == mod.__name__:
            out[n] = v
        elif n.isupper() and isinstance(v, int):
            out[n] = v
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_the_package_re_exports_every_public_kernel(family: str) -> None:
    mod = _family(family)
    public = _public(mod)
    if family != "common":  # common holds inlined helpers only (all private)
        assert public, f"{family} defines no public kernel"
    for name, obj in public.items():
        assert name in K.__all__, f"oop.adapt.kernels does not export {family}.{name}"
        assert getattr(K, name) is obj, f"oop.adapt.kernels.{name} is not {family}.{name}"


def test_every_exported_name_lives_in_one_family() -> None:
    homes: dict[str, list[str]] = {n: [] for n in K.__all__}
    for family in FAMILIES:
        for name in _public(_family(family)):
            homes.setdefault(name, []).append(family)
    assert {n: h for n, h in homes.items() if len(h) != 1} == {}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_kernel_is_cached_beside_its_module(family: str) -> None:
    mod = _family(family)
    kernels = [v for v in vars(mod).values()
               if isinstance(v, CPUDispatcher) and v.py_func.__module__ == mod.__name__]
    assert kernels
    here = Path(mod.__file__).resolve().parent
    for k in kernels:
        cache = k._cache
        assert type(cache).__name__ == "FunctionCache", f"{k.__name__}: not cache=True"
        # the cache's file names carry the defining module, so a moved kernel has its own
        assert Path(k.py_func.__code__.co_filename).resolve().parent == here
        assert Path(inspect.getsourcefile(k.py_func)).stem == family


def test_adapt_logic_is_the_chain_of_its_parts() -> None:
    mro = [c.__module__ for c in AdaptLogic.__mro__[:-1]]
    assert mro == ["oop.adapt.logic", "oop.adapt.close", "oop.adapt.batch",
                   "oop.adapt.modes", "oop.adapt.core"]
    owner = {name: next(c.__module__ for c in AdaptLogic.__mro__ if name in vars(c))
             for name in ("on_batch", "on_punctuation", "flush", "snapshot", "restore",
                          "_check", "live_codes", "remap_groups", "state_bytes",
                          "index_bytes", "partial_counts")}
    assert owner == {"on_batch": "oop.adapt.batch", "on_punctuation": "oop.adapt.close",
                     "flush": "oop.adapt.close", "snapshot": "oop.adapt.logic",
                     "restore": "oop.adapt.logic", "_check": "oop.adapt.logic",
                     "live_codes": "oop.adapt.modes", "remap_groups": "oop.adapt.modes",
                     "state_bytes": "oop.adapt.core", "index_bytes": "oop.adapt.core",
                     "partial_counts": "oop.adapt.core"}


def test_the_split_logic_runs_a_window_end_to_end() -> None:
    """One sliding count through the split paths, with punctuation between the batches:
    every tuple is counted in each of its windows (from ``kind.extent``), each window is
    emitted once, nothing is late, no state is left after the flush, invariants hold."""
    kind = Sliding(4, 2)
    lg = AdaptLogic(AdaptConfig(kind, (agg.count(),)), {})
    rng = np.random.default_rng(7)
    ts = np.sort(rng.integers(0, 40, 300))
    ts = ts[np.argsort(ts + rng.integers(0, 6, 300), kind="stable")]  # disordered, bounded
    gids = rng.integers(0, 9, 300)
    got: dict[tuple[int, int], int] = {}

    def take(out: list) -> None:  # type: ignore[type-arg]
        for w, blk in out:
            for g, c in zip(blk.gids.tolist(), blk.states[0][0].tolist()):
                assert (w, g) not in got, f"window {w} of group {g} emitted twice"
                got[(w, g)] = int(c)

    for a in range(0, 300, 50):
        assert lg.on_batch(gids[a:a + 50], ts[a:a + 50], None, {}) == 0
        lg._check()
        if a + 50 < 300:  # a valid punctuation: every later tuple is at or after it
            take(lg.on_punctuation(int(ts[a + 50:].min())))
            lg._check()
    take(lg.flush())
    lg._check()
    want: dict[tuple[int, int], int] = {}
    for w in range(-2, 22):
        lo, hi = kind.extent(w)
        for g in range(9):
            n = int(np.count_nonzero((ts >= lo) & (ts < hi) & (gids == g)))
            if n:
                want[(w, g)] = n
    assert got == want
    assert lg.state_items() == 0 and lg.late == 0
