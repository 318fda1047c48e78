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
"""

from oop.punctuation.adaptive import Adaptive, AdaptiveLogic, arrival_delays
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.bounded_delay import BoundedDelay, BoundedDelayLogic
from oop.punctuation.bounded_tuples import BoundedTuples, BoundedTuplesLogic
from oop.punctuation.cadence import DEFAULT_CADENCE_ROWS, Cadence, IdleWall, cadence_of
from oop.punctuation.external import External, ExternalLogic
from oop.punctuation.granularity import Granular, GranularLogic, floor_to_grid
from oop.punctuation.idle import Idle, IdleLogic
from oop.punctuation.ordered import Ordered, OrderedLogic
from oop.punctuation.spec import SPEC_HELP, parse_punctuation

__all__ = [
    "GeneratorConfig",
    "PunctuationGenerator",
    "Ordered",
    "OrderedLogic",
    "BoundedDelay",
    "BoundedDelayLogic",
    "BoundedTuples",
    "BoundedTuplesLogic",
    "External",
    "ExternalLogic",
    "Idle",
    "IdleLogic",
    "Adaptive",
    "AdaptiveLogic",
    "arrival_delays",
    "Granular",
    "GranularLogic",
    "floor_to_grid",
    "Cadence",
    "IdleWall",
    "cadence_of",
    "DEFAULT_CADENCE_ROWS",
    "parse_punctuation",
    "SPEC_HELP",
]
