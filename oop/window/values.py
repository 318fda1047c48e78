"""Column values as the window aggregates read them: lanes, casts, shifts, exactness checks.

The type side of window state, shared by the dense ring (:mod:`oop.window.ring`), the hashed
cells (:mod:`oop.window.hashstore`), the multiset (:mod:`oop.window.multiset`) and the
operators that feed them:

- :class:`LaneInfo` / :func:`lane_infos`: the de-duplicated lanes of a query with their storage
  dtype (int64 or float64) and identity; :func:`check_agg_types` rejects an aggregate its
  column's type cannot take.
- :class:`ColumnValues` / :func:`column_values`: one Arrow column as numpy (int64 for integers,
  booleans, temporal types and unscaled decimals; float64 for floats) plus a uint8 validity;
  :func:`decimal_unscaled`, :func:`decimal_array` and :func:`lane_array` go back and forth.
- Variance shifts: :func:`pick_shift`, :func:`lane_input`, :func:`shifted_sum`,
  :func:`moment_sum_key` (values enter the var/std lanes shifted, so variances of values far
  from 0 -- epoch nanoseconds, ``1e9 + 1e-3`` noise -- keep their low digits).
- Exact integer sums: :func:`exact_sum_columns`, :func:`max_abs`, :func:`check_exact_sum`.
- Non-finite floats (:func:`note_nonfinite`) and value ranks of min/max/first/last lanes
  (:func:`remap_ranks`, :func:`held_ranks`).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, ValueRangeError
from oop.progress.watermark import time_bounds  # (min, max), as the sources take them
from oop.window.aggregates import Agg, Lane
from oop.window.kernels import all_abs_below

__all__ = ["LaneInfo", "ColumnValues", "lane_infos", "column_values"]

_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min

#: the storage key op of a float column's shifted ``sum`` lane (:attr:`LaneInfo.shifted`); its
#: kernels are the ``sum`` lane's
SHIFTED_SUM = "ssum"


@dataclass(frozen=True)
class LaneInfo:
    """A lane with its storage dtype and identity value."""

    lane: Lane
    dtype: Any  # np.int64 or np.float64
    #: a float column's ``sum`` lane that var/std read: it sums ``value - shift``
    #: (:func:`lane_input`) and is stored under :data:`SHIFTED_SUM`, beside the plain ``sum``
    #: lane a ``sum``/``mean`` of the same column reads
    shifted: bool = False
    #: the storage key ``(op, column)`` (``op`` :data:`SHIFTED_SUM` for a shifted lane): built
    #: once here, it is read for every lane on every batch and punctuation
    key: tuple[str, str | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (SHIFTED_SUM if self.shifted else self.lane.op,
                                         self.lane.column))

    def identity(self) -> Any:
        op = self.lane.op
        if op == "min":  # NaN is the greatest float (docs/semantics.md): min's identity
            return np.nan if self.dtype == np.float64 else _I64MAX
        if op == "max":
            return -np.inf if self.dtype == np.float64 else _I64MIN
        return 0


def _numeric_kind(t: pa.DataType) -> str:
    """'int' (stored as int64), 'decimal' (unscaled int64), 'float' (float64), or 'other'."""
    if pa.types.is_floating(t):
        return "float"
    if (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_timestamp(t)
            or pa.types.is_date(t) or pa.types.is_duration(t) or pa.types.is_time(t)):
        return "int"
    if pa.types.is_decimal(t):
        return "decimal"
    return "other"


def int_valued(t: pa.DataType) -> bool:
    """Whether the lanes read ``t``'s values as int64 integers (integers, booleans, temporal
    types; not decimals, which are unscaled int64 with a scale)."""
    return _numeric_kind(t) == "int"


def is_numeric_type(t: pa.DataType) -> bool:
    """Whether lanes hold ``t``'s values themselves (numbers, booleans, temporal, decimal)."""
    return _numeric_kind(t) != "other"


def is_ranked_type(t: pa.DataType) -> bool:
    """Whether min/max/first/last take ``t`` through value ranks (strings and binary, plain or
    dictionary-encoded): see :class:`~oop.window.keys.ValueRanks`."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def check_agg_types(aggs: Sequence[Agg], schema: pa.Schema, op_name: str) -> None:
    """Raise ConfigError naming the operator when an aggregate cannot use its column's type."""
    for a in aggs:
        if a.column is None:
            continue
        t = schema.field(a.column).type
        kind = _numeric_kind(t)
        arith_ok = kind in ("float", "decimal") or pa.types.is_integer(t) or pa.types.is_boolean(t)
        if a.spec.arithmetic and not arith_ok:
            raise ConfigError(
                f"{op_name}: {a.name} needs a numeric column but {a.column!r} has type {t}; "
                "cast it first or use min/max/first/last/distinct"
            )
        if a.spec.selective and kind == "other" and not is_ranked_type(t):
            raise ConfigError(
                f"{op_name}: {a.name} on column {a.column!r} of type {t} is not supported; "
                "use a numeric, boolean, temporal, decimal, string or binary column"
            )


def lane_infos(aggs: Sequence[Agg], schema: pa.Schema) -> list[LaneInfo]:
    """The de-duplicated lanes of ``aggs``; ``rows`` is always first.

    Storage: counts are int64, ``sumsq`` float64, float columns float64,
    decimal columns unscaled int64. The ``sum`` lane of an integer (boolean,
    temporal) column is int64 -- exact, checked against overflow at emission
    (:func:`check_exact_sum`) -- when the query asks for ``sum`` of that
    column, and float64 when only ``mean``/``var``/``std`` read it (as
    Spark's ``avg`` does: a mean of epoch-nanosecond values must not wrap).

    The ``sum`` lane ``var``/``std`` of a float column read is its own
    shifted lane (:attr:`LaneInfo.shifted`, key :func:`moment_sum_key`):
    ``sum(value - shift)`` cannot be derived from the unshifted sum
    without cancellation far from 0, and the unshifted sum (what
    ``sum``/``mean`` read, unchanged) not from the shifted one without a
    second rounding. So a query with var/std *and* sum/mean of one float
    column keeps both lanes; every other query keeps one, as before.
    """
    exact_sums = {a.column for a in aggs if a.spec.exact_sum}
    out: dict[tuple[str, str | None], LaneInfo] = {("rows", None): LaneInfo(Lane("rows"), np.int64)}
    for a in aggs:
        moments = "sumsq" in a.spec.lane_ops
        for ln in a.lanes():
            kind = _numeric_kind(schema.field(ln.column).type) if ln.column else "other"
            if moments and ln.op == "sum" and kind == "float":
                out.setdefault((SHIFTED_SUM, ln.column), LaneInfo(ln, np.float64, shifted=True))
                continue
            if (ln.op, ln.column) in out:
                continue
            if ln.op in ("rows", "nn"):
                dt: Any = np.int64
            elif ln.op == "sumsq":
                dt = np.float64
            else:
                assert ln.column is not None
                dt = np.float64 if kind == "float" else np.int64
                if ln.op == "sum" and kind == "int" and ln.column not in exact_sums:
                    dt = np.float64
            out[(ln.op, ln.column)] = LaneInfo(ln, dt)
    return list(out.values())


def moment_sum_key(column: str, typ: pa.DataType) -> tuple[str, str]:
    """The key of the ``sum`` lane var/std of ``column`` (type ``typ``) read: the shifted lane
    of a float column (:attr:`LaneInfo.shifted`), else the column's one ``sum`` lane."""
    return (SHIFTED_SUM if _numeric_kind(typ) == "float" else "sum", column)


def exact_sum_columns(lanes: Sequence[LaneInfo]) -> dict[str, int]:
    """``{column: 0}`` for every column with an int64 ``sum`` lane: the running largest
    ``|value|`` seen, which :func:`check_exact_sum` needs at emission."""
    return {li.lane.column: 0 for li in lanes
            if li.lane.op == "sum" and li.lane.column and li.dtype == np.int64}


#: :attr:`~oop.window.ring.Ring.nf_hi` of a ring that never saw a NaN or an infinity
NO_NONFINITE = -(1 << 62)
#: a float value whose square (a ``sumsq`` lane) could overflow counts as non-finite
SQ_SAFE = 1e150


def note_nonfinite(nf_hi: int, lanes: Sequence["LaneInfo"], cols: dict[str, ColumnValues],
                   lo: np.ndarray, hi: np.ndarray | None, checked: Iterable[str] = ()) -> int:
    """``nf_hi`` raised to the last unit (``hi - 1``, or ``lo``) of every valid row whose value
    feeds a float ``sum``/``sumsq`` lane and is NaN, infinite or too large to square.

    Paned-WID's differential step cannot subtract such a pane (``inf - inf`` is NaN), so it
    recomputes the windows that follow one (docs/semantics.md). Cost on all-finite batches: one
    compiled pass per float column; the masks are only built when one is not finite.
    ``checked``: columns the caller already found all below :data:`SQ_SAFE` (the fused update
    kernel's check, :func:`~oop.window.kernels.upd_rows_sums1`): skipped.
    """
    seen: set[str] = set(checked)
    for li in lanes:
        col = li.lane.column
        if li.lane.op not in ("sum", "sumsq") or col is None or col in seen or col not in cols:
            continue
        seen.add(col)
        v = cols[col].values
        if v.dtype != np.float64 or v.shape[0] == 0:
            continue
        if all_abs_below(v, SQ_SAFE):  # False on NaN
            continue
        bad = ~(np.abs(v) < SQ_SAFE)
        valid = cols[col].valid
        if valid.shape[0]:
            bad &= valid.astype(bool)
        if bad.any():
            last = (hi - 1) if hi is not None else lo
            nf_hi = max(nf_hi, int(last[bad].max()))
    return nf_hi


def pick_shift(cv: ColumnValues) -> float | int | None:
    """A column's variance shift: its first valid finite value (an int for int64-held columns, so
    that ``value - shift`` is exact before the float conversion); None when every value is null
    (or NaN / infinite: a non-finite shift would turn every later window's mean and variance
    NaN, see docs/semantics.md)."""
    v = cv.values if cv.valid.shape[0] == 0 else cv.values[cv.valid.astype(bool)]
    if not v.size:
        return None
    if v.dtype == np.int64:
        return int(v[0])
    if not math.isfinite(v[0]):
        fin = np.flatnonzero(np.isfinite(v))
        if not fin.size:
            return None
        return float(v[fin[0]])
    return float(v[0])


def lane_input(li: LaneInfo, cv: ColumnValues, shifts: dict[str, Any]) -> tuple[np.ndarray, float]:
    """The values lane ``li``'s kernel folds for column values ``cv``, and the shift a
    ``sumsq`` kernel subtracts.

    Values enter the float lanes shifted: ``sumsq`` sums ``(value - shift)**2``
    (the kernel subtracts the returned shift), the float ``sum`` lane of an
    integer column (mean/var/std only, see :func:`lane_infos`) sums
    ``value - shift``, the difference taken in int64 before the float
    conversion -- exact for a spread below ``2**53``, so the mean and the
    variance of epoch-nanosecond values keep their low digits -- and the
    shifted ``sum`` lane of a float column (var/std, :attr:`LaneInfo.shifted`)
    sums ``value - shift`` in float64 (exact for values within a factor 2 of the
    shift, Sterbenz). The plain float ``sum`` lane (sum/mean) is unshifted.
    ``shifts[column]`` is picked (:func:`pick_shift`) from the first batch
    with a valid value and then fixed (an all-null batch folds nothing).
    """
    op, col = li.key
    v = cv.values
    if li.shifted or op == "sumsq" or (op == "sum" and li.dtype == np.float64
                                       and v.dtype == np.int64):
        shift = shifts.get(col)
        if shift is None:
            shift = pick_shift(cv)
            if shift is None:
                shift = 0
            else:
                shifts[col] = shift
        if v.dtype == np.int64:
            return (v - np.int64(shift)).astype(np.float64), 0.0
        if li.shifted:
            return v - float(shift), 0.0
        return v, float(shift)
    return v.astype(li.dtype, copy=False), 0.0


def shifted_sum(s: np.ndarray, nn: np.ndarray, shift: Any, lane_shifted: bool) -> np.ndarray:
    """The sum of ``value - shift`` per cell as float64, from a ``sum`` lane ``s`` over ``nn``
    values.

    ``lane_shifted``: the lane already holds it (the float lane of an integer column, the
    shifted lane of a float column, see :func:`lane_input`). An int64 lane (integers under ``sum``, unscaled decimals) subtracts
    ``nn * shift`` in int64 -- wrapping, and exact whenever the difference fits, even if the
    sum does not; a float lane subtracts in float64.
    """
    if lane_shifted:
        return s
    if s.dtype == np.int64:
        with np.errstate(over="ignore"):
            return (s - nn * np.int64(shift)).astype(np.float64)
    return s - nn * float(shift)


def max_abs(values: np.ndarray) -> int:
    """The largest ``|value|`` of an int64 array as a Python int (``|INT64_MIN|`` included)."""
    if not values.shape[0]:
        return 0
    # numpy, not the (min, max) kernel: these are read-only Arrow buffers, for which numba
    # would compile it a second time
    lo, hi = values.min(), values.max()
    return max(int(hi), -int(lo), 0)


@dataclass
class ColumnValues:
    """One input column as numpy: values (int64 or float64), uint8 validity (empty = all valid).

    Decimal columns are read as their *unscaled* int64 values (``12.34`` in
    ``decimal(p, 2)`` is ``1234``), so sums, min/max and first/last stay
    exact. Null slots hold 0, so :func:`max_abs` of ``values`` bounds a sum.
    """

    values: np.ndarray
    valid: np.ndarray


_EMPTY_U8 = np.zeros(0, np.uint8)


def column_values(batch: pa.RecordBatch, col: str, as_float: bool = False) -> ColumnValues:
    arr = batch.column(col)
    t = arr.type
    valid = _EMPTY_U8
    if arr.null_count:
        valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), np.uint8)
    kind = _numeric_kind(t)
    if kind == "decimal" and not as_float:
        v = decimal_unscaled(arr, col)
        if valid.shape[0]:
            v[valid == 0] = 0
        return ColumnValues(v, valid)
    if kind == "float" or as_float:
        a = arr if pa.types.is_float64(t) else pc.cast(arr, pa.float64())
        if a.null_count:
            a = a.fill_null(0.0)
        v = np.asarray(a.to_numpy(zero_copy_only=False), np.float64)
    else:
        if pa.types.is_boolean(t):
            a = pc.cast(arr, pa.int64())
        elif pa.types.is_uint64(t):
            a = arr
            if len(arr) - arr.null_count and pc.max(arr).as_py() > _I64MAX:
                raise ValueRangeError(
                    f"column {col!r} (uint64) holds {pc.max(arr).as_py()}, beyond the int64 range "
                    "the window aggregates keep exactly; cast the column to float64")
            a = a.view(pa.int64())
        elif pa.types.is_integer(t):
            a = arr if pa.types.is_int64(t) else pc.cast(arr, pa.int64())
        elif t.bit_width == 64:
            a = arr.view(pa.int64())
        else:
            a = pc.cast(arr.view(pa.int32()), pa.int64())
        if a.null_count:
            a = a.fill_null(0)
        v = np.asarray(a.to_numpy(zero_copy_only=False), np.int64)
    return ColumnValues(v, valid)


def decimal_unscaled(arr: pa.Array, col: str) -> np.ndarray:
    """The unscaled values of a decimal array as int64 (a copy; null slots hold garbage).

    Raises :class:`~oop.errors.ValueRangeError` naming ``col`` when a
    value does not fit (more than 18 digits without its scale).
    """
    t, n = arr.type, len(arr)
    if t.bit_width <= 64:  # decimal32/decimal64: one little-endian word per value
        w = np.frombuffer(arr.buffers()[1], np.int32 if t.bit_width == 32 else np.int64,
                          count=arr.offset + n)[arr.offset:]
        return w.astype(np.int64)
    k = t.bit_width // 64  # decimal128 / decimal256: k little-endian 64-bit words
    words = np.frombuffer(arr.buffers()[1], np.int64, count=(arr.offset + n) * k)
    words = words[arr.offset * k:].reshape(n, k)
    lo = words[:, 0].copy()
    sign = lo >> 63
    bad = (words[:, 1:] != sign[:, None]).any(axis=1) | (lo == _I64MIN)
    if arr.null_count:
        bad &= np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), bool)
    if bad.any():
        v = arr[int(np.flatnonzero(bad)[0])]
        raise ValueRangeError(
            f"column {col!r} ({t}) holds {v.as_py()}, beyond the 18 digits (unscaled int64) the "
            "window aggregates keep exactly; cast the column to float64, or to a decimal with a "
            "smaller scale")
    return lo


def _held(values: np.ndarray, times: np.ndarray | None, op: str) -> np.ndarray:
    """Mask of the cells of a min/max/first/last lane that hold a value (not the identity)."""
    if op in ("first", "last"):
        assert times is not None
        return times != (_I64MAX if op == "first" else _I64MIN)
    return values != (_I64MAX if op == "min" else _I64MIN)


def remap_ranks(values: np.ndarray, times: np.ndarray | None, op: str, remap: np.ndarray) -> None:
    """Apply ``remap`` (old rank -> new rank, see :class:`~oop.window.keys.ValueRanks`) in place
    to the live cells of a min/max/first/last lane; empty cells keep their identities."""
    live = _held(values, times, op)
    values[live] = remap[values[live]]


def held_ranks(values: np.ndarray, times: np.ndarray | None, op: str) -> np.ndarray:
    """The ranks the live cells of a min/max/first/last lane hold (with repeats)."""
    return values[_held(values, times, op)]


def check_exact_sum(op_name: str, col: str, rows: np.ndarray, max_abs: int,
                    typ: pa.DataType) -> None:
    """Raise unless every int64 sum of column ``col`` over ``rows[i]`` rows is exact.

    For integer columns and decimal columns (unscaled). A sum over ``n`` rows
    is at most ``n * max_abs`` (``max_abs``: the largest ``|value|`` seen).
    int64 arithmetic wraps but the wrapped result equals the true sum
    whenever the true sum is in range, whatever the arrival order and however
    Paned-WID adds and subtracts panes -- so this bound, against int64 and
    the output precision of a decimal ``typ``, decides exactness. It is
    conservative: a sum whose bound fails raises even if its true value would
    have fitted (values that large are near the int64 range themselves).
    """
    if not rows.shape[0] or not max_abs:
        return
    limit = 2 ** 63 - 1
    decimal = pa.types.is_decimal(typ)
    if decimal:
        limit = min(limit, 10 ** typ.precision - 1)
    n = time_bounds(rows)[1]
    if n * max_abs > limit:
        what = "decimal column" if decimal else "integer column"
        unit = " unscaled" if decimal else ""
        fix = ("to float64, or to a decimal with a smaller scale," if decimal
               else "to float64 (exact up to 2**53)")
        raise ValueRangeError(
            f"{op_name}: a window sum of {what} {col!r} may exceed {limit}{unit} "
            f"({n} rows x max |value| {max_abs}), the int64 range it is summed in exactly; "
            f"cast {col!r} {fix} before aggregating")


def decimal_array(unscaled: np.ndarray, null: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A decimal array of ``typ`` from unscaled int64 values, null where ``null`` (empty: none)."""
    v = np.ascontiguousarray(unscaled, np.int64)
    n = v.shape[0]
    if typ.bit_width <= 64:
        data = v.astype(np.int32 if typ.bit_width == 32 else np.int64)
    else:  # sign-extend into bit_width / 64 little-endian words
        data = np.repeat((v >> 63)[:, None], typ.bit_width // 64, axis=1)
        data[:, 0] = v
    validity = None
    if null.shape[0] and null.any():
        validity = pa.array(~null.astype(bool)).buffers()[1]
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(data.tobytes())])


NO_NULLS = np.zeros(0, bool)  # lane_array: no cell is null


def lane_array(values: np.ndarray, null: np.ndarray, typ: pa.DataType) -> pa.Array:
    """An Arrow array of ``typ`` from numpy values with nulls where ``null`` (empty: none)."""
    mask = null if null.shape[0] and null.any() else None
    if pa.types.is_floating(typ) or pa.types.is_integer(typ) and values.dtype == np.int64:
        arr = pa.array(values, mask=mask)
        return arr if arr.type == typ else arr.cast(typ)
    if pa.types.is_boolean(typ):
        return pa.array(values.astype(bool), mask=mask)
    if pa.types.is_integer(typ):
        return pa.array(values, mask=mask).cast(typ)
    if pa.types.is_decimal(typ):  # decimal lanes hold unscaled int64 values
        return decimal_array(values, null, typ)
    # temporal types stored as int64
    if typ.bit_width == 64:
        return pa.array(values.astype(np.int64), pa.int64(), mask=mask).view(typ)
    return pa.array(values.astype(np.int64), pa.int64(), mask=mask).cast(pa.int32()).view(typ)
