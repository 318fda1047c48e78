"""Errors raised by the engine.

Every error names the operator or stream, the offending value and what to do
about it (STYLE §8). They all derive from :class:`OopError` so callers can
catch engine errors in one place; each also derives from the builtin error a
Python user would expect (``ValueError``, ``KeyError``, ``TypeError``).
"""

from __future__ import annotations


class OopError(Exception):
    """Base class of every error the engine raises on purpose."""


class LateTupleError(OopError, ValueError):
    """A tuple violates a punctuation already seen on its stream (late-policy ``raise``)."""


class PunctuationOrderError(OopError, ValueError):
    """A punctuation goes backwards on a stream whose punctuation must be non-decreasing."""


class NullTimeError(OopError, ValueError):
    """A progressing attribute holds null or NaN."""


class SchemaMismatchError(OopError, TypeError):
    """A batch's schema differs from the schema the stream declared."""


class UnknownColumnError(OopError, KeyError):
    """A column name that the stream does not have."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class TimeTypeError(OopError, TypeError):
    """A progressing attribute whose type cannot be used as event time."""


class EmptyInputError(OopError, ValueError):
    """An input with no schema at all (no batch and no declared schema)."""


class ConfigError(OopError, ValueError):
    """An operator or generator configuration that cannot work."""


class ValueRangeError(OopError, ValueError):
    """A value (uint64, unscaled decimal) or a sum beyond the int64 range that the window
    aggregates keep exactly; a uint64 event time above 2**63-1; a window whose start or end
    would not fit int64."""


class StateLimitError(OopError, MemoryError):
    """An operator's state would outgrow the memory it may take (raised before allocating)."""


class SinkError(OopError, OSError):
    """Writing results failed (missing folder, full disk, closed pipe); the run stops."""


class SourceError(OopError, OSError):
    """Reading a feed failed (unreadable file, lost connection, a row outside the reorder bound)."""


class CheckpointError(OopError, ValueError):
    """A checkpoint that cannot be used: another query's, a newer format, or corrupt."""


class Interrupted(KeyboardInterrupt):
    """A checkpointed run stopped by SIGINT / SIGTERM after writing a checkpoint.

    ``code`` is the conventional exit status (130 / 143) and ``signal`` the
    signal's name; running the same plan with the same checkpoint folder
    continues where it stopped. A KeyboardInterrupt, so ``except Exception``
    does not swallow it.
    """

    def __init__(self, message: str, code: int, signal: str) -> None:
        super().__init__(message)
        self.code = code
        self.signal = signal
