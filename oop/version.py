"""The version of oop, in one place below every other module (checkpoint manifests record it).

>>> __version__.count(".")
2
"""

__version__ = "0.1.0"
