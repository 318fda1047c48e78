"""Keep Python's cyclic garbage collector out of a command's start-up and exit.

A command's start-up builds ~120k objects that live until the process ends: the modules
of numpy, pyarrow and numba, numba's typing and lowering registries (~2,200 classes made
by its ``@overload`` templates) and oop's own modules. While they are being built, the
collector's allocation counters fire every few hundred objects, and every tenth / hundredth
of those collections walks the older generations again -- two full collections of ~110k
objects and ~20 middle ones in a replay's start-up -- and interpreter shutdown walks them
all once more. Not one of those objects is garbage. Measured on ``oop replay`` of 1000
rows (tumbling 1 s count+sum, ``--threads 1``, warm kernel cache): 0.79 -> 0.47 s CPU
(user+sys) of the whole command; the 10M-row run gains the same ~0.3 s.

So a command holds collection while it starts (:func:`held`: the collector off), and the
moment its work starts (:func:`settle`, called by the job runner before the first batch)
everything built so far is moved to the permanent generation (``gc.freeze``), which later
collections skip, and collection resumes for what the work allocates: cyclic garbage made
while the job runs is still collected. At exit everything is frozen (an :mod:`atexit`
hook, which runs before shutdown's collections), so shutdown has nothing to walk. A caller
of ``oop.cli.main`` in its own process (a test) gets its collector back as it was, with
nothing left frozen.

What it costs: cyclic garbage made during start-up stays until the command ends -- 910
objects in a replay's start-up (``gc.collect()`` at :func:`settle`), beside ~91k live ones.
Finalizers of cyclic objects still alive at exit do not run; oop closes its files and
writers explicitly, never through ``__del__``. A command that never calls :func:`settle`
runs without cyclic collection to its end: ``oop replay`` and ``oop sql`` settle in
:func:`oop.command.flags.run_job`, ``--spark`` and ``oop experiments run`` where they start.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from typing import Iterator

__all__ = ["held", "settle"]

_held = [False]  # whether held() turned the collector off and settle() has not yet resumed it
_exit_hook = [False]  # whether the exit-time freeze is registered


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Run the block with cyclic collection off until :func:`settle` (or the block's end).

    On leaving, collection is back as it was (what :func:`settle` froze is unfrozen, so an
    in-process caller -- a test, a notebook -- keeps collecting its own garbage), and the
    process freezes everything at exit (:mod:`atexit`), before shutdown's collections.
    O(1); does nothing when the collector is off already (a caller's choice, kept).
    """
    if not gc.isenabled():
        yield
        return
    frozen_before = gc.get_freeze_count()
    gc.disable()
    _held[0] = True
    try:
        yield
    finally:
        _held[0] = False
        if frozen_before == 0:  # a caller's own freeze (before a fork, say) stays
            gc.unfreeze()
        gc.enable()
        _freeze_at_exit()


def settle() -> None:
    """Start-up is over: freeze what exists now and resume collection, if :func:`held`
    turned it off (else nothing). Call where a command's work starts. One pass over the
    tracked objects (~30 us for 90k: a list splice)."""
    if _held[0]:
        _held[0] = False
        gc.freeze()
        gc.enable()


def _freeze_at_exit() -> None:
    """Once per process: freeze every object at exit, so shutdown's collections walk none."""
    if not _exit_hook[0]:
        _exit_hook[0] = True
        atexit.register(gc.freeze)
