"""Errors of the Spark layer; all are :class:`oop.errors.OopError` (one line, exit 2 in the CLI)."""

from __future__ import annotations

from oop.errors import OopError

__all__ = ["SparkUnavailableError", "SparkInputError"]


class SparkUnavailableError(OopError, RuntimeError):
    """Spark cannot run here: PySpark missing, no Java, or the JVM did not start."""


class SparkInputError(OopError, ValueError):
    """Spark could not read or process the input (corrupt file, bad type, failed task)."""
