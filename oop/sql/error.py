"""The SQL front end's error type (kept apart so ``import oop.sql`` does not need sqlglot)."""

from oop.errors import OopError

__all__ = ["SqlError"]


class SqlError(OopError):
    """A SQL script outside the supported subset, or invalid: ``line:col: message``."""
