"""Progressing attributes: int64 event time in a declared unit.

A progressing attribute is an integer column (any signed/unsigned int that
fits int64) whose unit the user declares, or an Arrow ``timestamp`` column
whose unit Arrow already knows. The engine reads it as an int64 numpy view
(zero-copy for int64 and timestamp columns) and never rewrites the column:
a tuple's event time is not mutated (DESIGN §1).

Durations in specs (``"500ms"``, ``"5s"``, ``"10min"``, ``"1h"``, ``"1d"`` or a
bare integer in the column's own unit) are converted with
:func:`parse_duration`.

>>> parse_duration("5s", "ms")
5000
>>> parse_duration("250", "ms")
250
>>> parse_duration("1.5s", "ms")
1500
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import (ConfigError, NullTimeError, TimeTypeError, UnknownColumnError,
                        ValueRangeError)

__all__ = [
    "TimeUnit",
    "TimeSpec",
    "UNIT_NS",
    "parse_duration",
    "time_values",
    "check_time_column",
    "time_arrow_type",
]

TimeUnit = Literal["s", "ms", "us", "ns"]
INT64_MAX = (1 << 63) - 1
UNIT_NS: dict[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_SUFFIX_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "sec": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_duration(text: str | int, unit: str) -> int:
    """Convert a duration spec to an integer count of ``unit``.

    A bare number is taken in ``unit`` already. Raises :class:`ConfigError`
    when the text does not parse or does not land on a whole number of units.
    """
    if isinstance(text, (int, np.integer)):
        return int(text)
    if unit not in UNIT_NS:
        raise ConfigError(f"unknown time unit {unit!r}; use one of s, ms, us, ns")
    m = _DURATION.match(str(text).lower())
    if not m:
        raise ConfigError(
            f"cannot parse duration {text!r}: write a number with an optional unit, "
            "e.g. 500ms, 5s, 10min, 1h, 1d, or a bare integer in the column's unit"
        )
    number, suffix = m.group(1), m.group(2)
    if suffix == "":
        if "." in number:
            raise ConfigError(f"duration {text!r}: a bare number must be a whole count of {unit}")
        return int(number)
    if suffix not in _SUFFIX_NS:
        raise ConfigError(
            f"duration {text!r}: unknown unit {suffix!r}; use ns, us, ms, s, min, h or d"
        )
    total_ns = float(number) * _SUFFIX_NS[suffix]
    per_unit = UNIT_NS[unit]
    if total_ns % per_unit:
        raise ConfigError(f"duration {text!r} is not a whole number of {unit}")
    return int(round(total_ns / per_unit))


@dataclass(frozen=True, slots=True)
class TimeSpec:
    """A progressing attribute: column name and unit of its int64 values."""

    column: str
    unit: str = "ms"

    def __post_init__(self) -> None:
        if self.unit not in UNIT_NS:
            raise ConfigError(
                f"time column {self.column!r}: unknown unit {self.unit!r}; use s, ms, us or ns"
            )

    def duration(self, text: str | int) -> int:
        """A duration spec in this attribute's unit."""
        return parse_duration(text, self.unit)


def _is_time_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_timestamp(t)


def check_time_column(schema: pa.Schema, column: str, stream: str) -> TimeSpec | None:
    """Validate that ``column`` can be a progressing attribute of ``stream``.

    Returns a TimeSpec carrying the Arrow unit for timestamp columns, None for
    integer columns (their unit is whatever the user declared).
    """
    if column not in schema.names:
        raise UnknownColumnError(
            f"stream {stream!r} has no column {column!r} to use as event time; "
            f"its columns are {schema.names}"
        )
    t = schema.field(column).type
    if not _is_time_type(t):
        raise TimeTypeError(
            f"stream {stream!r}: column {column!r} has type {t}, which cannot be event time; "
            "use an integer column (declare its unit) or an Arrow timestamp column, "
            "or cast it first"
        )
    if pa.types.is_timestamp(t):
        return TimeSpec(column, t.unit)
    return None


def time_arrow_type(schema: pa.Schema, column: str) -> pa.DataType:
    """The Arrow type results should use for times derived from ``column``."""
    t = schema.field(column).type
    return t if pa.types.is_timestamp(t) else pa.int64()


def time_values(batch: pa.RecordBatch, column: str, stream: str = "?") -> np.ndarray:
    """The int64 values of progressing attribute ``column`` (zero-copy where possible).

    Raises :class:`NullTimeError` when the column holds nulls; use
    :func:`null_time_mask` first to route such rows by a policy instead.
    """
    arr = batch.column(column)
    if arr.null_count:
        raise NullTimeError(
            f"stream {stream!r}: {arr.null_count} null value(s) in time column {column!r}; "
            "every tuple needs an event time -- fill or filter them before the source, "
            "or choose late='side_output' to route them to the late stream"
        )
    t = arr.type
    if pa.types.is_int64(t) or pa.types.is_timestamp(t):
        return int64_view(arr)
    if pa.types.is_integer(t):
        v = arr.to_numpy(zero_copy_only=False)
        if t == pa.uint64() and v.shape[0]:
            big = v > np.uint64(INT64_MAX)
            if big.any():  # astype would wrap them to negative times
                raise ValueRangeError(
                    f"stream {stream!r}: time column {column!r} (uint64) holds "
                    f"{int(v[big][0])} at row {int(np.flatnonzero(big)[0])} ({int(big.sum())} "
                    f"value(s) above 2**63-1 = {INT64_MAX}); event times are int64 -- "
                    "rebase the column (subtract a start time) or cast it to int64 after "
                    "checking its range")
        return v.astype(np.int64)
    raise TimeTypeError(
        f"stream {stream!r}: time column {column!r} has type {t}; "
        "use an integer or timestamp column"
    )


def int64_view(arr: pa.Array) -> np.ndarray:
    """A zero-copy int64 numpy view of a null-free 64-bit array (int64, timestamp, duration).

    Reads the Arrow data buffer directly: ``Array.to_numpy`` would go through pyarrow's
    pandas conversion layer, which imports pandas (~75 MB, ~0.3 s) on first use.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(buf, dtype=np.int64, count=len(arr), offset=arr.offset * 8)


def null_time_mask(batch: pa.RecordBatch, column: str) -> np.ndarray | None:
    """Boolean mask of rows whose time is null, or None when there are none."""
    arr = batch.column(column)
    if not arr.null_count:
        return None
    return np.asarray(pc.is_null(arr).to_numpy(zero_copy_only=False), dtype=bool)
