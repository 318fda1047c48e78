"""Punctuation generators (004 §8.1, DESIGN §2): derive low-watermarks from what is known of a feed."""

from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.bounded_delay import BoundedDelay
from oop.punctuation.external import External
from oop.punctuation.ordered import Ordered

__all__ = ["GeneratorConfig", "PunctuationGenerator", "Ordered", "BoundedDelay", "External"]
