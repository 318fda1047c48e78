"""Punctuation generators (004 §8.1, DESIGN §2): low-watermarks from what is known of a feed.

=====================  ==========================================================
``Ordered()``          feed sorted on time: punctuate the last value
``BoundedDelay(d)``    no tuple more than ``d`` behind the max: ``max - d``
``BoundedTuples(n)``   no tuple overtaken by more than ``n`` tuples (BSort slack)
``External(col)``      the feed's own punctuation records / marker column
``Idle(g, slack)``     lull rule: a silent source follows ``clock - slack``
``Adaptive(frac)``     delay bound estimated from observed disorder
``Granular(g, every)`` only multiples of ``every``, no duplicates (Describe)
``IdleWall(g, sec)``   wall-clock idleness: silent ``sec`` seconds -> follow the clock
``Cadence(g, rows)``   punctuate after every ``rows`` input rows, whatever the chunking
=====================  ==========================================================

:func:`parse_punctuation` turns CLI specs (``"bounded:5s+idle:1min"``) into these.

Names load on first use (PEP 562), so the CLI can show :data:`SPEC_HELP`
without importing numpy and pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oop.lazy import lazy_names

if TYPE_CHECKING:  # the eager imports, for type checkers and IDEs
    from oop.punctuation.adaptive import Adaptive, AdaptiveLogic, arrival_delays
    from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
    from oop.punctuation.bounded_delay import BoundedDelay, BoundedDelayLogic
    from oop.punctuation.bounded_tuples import BoundedTuples, BoundedTuplesLogic
    from oop.punctuation.cadence import (DEFAULT_CADENCE_ROWS, Cadence, IdleWall, cadence_of,
                                         with_cadence, with_cadence_spec)
    from oop.punctuation.external import External, ExternalLogic
    from oop.punctuation.granularity import Granular, GranularLogic, floor_to_grid
    from oop.punctuation.idle import Idle, IdleLogic
    from oop.punctuation.ordered import Ordered, OrderedLogic
    from oop.punctuation.spec import SPEC_HELP, parse_punctuation

#: public name -> defining module
_LAZY: dict[str, str] = {
    "GeneratorConfig": "oop.punctuation.base",
    "PunctuationGenerator": "oop.punctuation.base",
    "Ordered": "oop.punctuation.ordered",
    "OrderedLogic": "oop.punctuation.ordered",
    "BoundedDelay": "oop.punctuation.bounded_delay",
    "BoundedDelayLogic": "oop.punctuation.bounded_delay",
    "BoundedTuples": "oop.punctuation.bounded_tuples",
    "BoundedTuplesLogic": "oop.punctuation.bounded_tuples",
    "External": "oop.punctuation.external",
    "ExternalLogic": "oop.punctuation.external",
    "Idle": "oop.punctuation.idle",
    "IdleLogic": "oop.punctuation.idle",
    "Adaptive": "oop.punctuation.adaptive",
    "AdaptiveLogic": "oop.punctuation.adaptive",
    "arrival_delays": "oop.punctuation.adaptive",
    "Granular": "oop.punctuation.granularity",
    "GranularLogic": "oop.punctuation.granularity",
    "floor_to_grid": "oop.punctuation.granularity",
    "Cadence": "oop.punctuation.cadence",
    "IdleWall": "oop.punctuation.cadence",
    "cadence_of": "oop.punctuation.cadence",
    "DEFAULT_CADENCE_ROWS": "oop.punctuation.cadence",
    "with_cadence": "oop.punctuation.cadence",
    "with_cadence_spec": "oop.punctuation.cadence",
    "parse_punctuation": "oop.punctuation.spec",
    "SPEC_HELP": "oop.punctuation.spec",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_names("oop.punctuation", {n: (m, n) for n, m in _LAZY.items()},
                                  globals())
