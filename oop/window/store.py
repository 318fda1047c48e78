"""State of window aggregation: a dense ring of partial aggregates, and a multiset store.

:class:`Ring` -- bounded aggregates. One flat array per *lane* (see
:class:`~oop.window.aggregates.Lane`), viewed as ``(R, C)``: ``R`` ring rows
for the open *units* (window ids for WID, pane ids for Paned-WID), row
``unit & (R-1)``; ``C`` columns for the dense group codes. Open units are
``[base, base + R)``; ``R`` (a power of two) and ``C`` grow by doubling when a
batch needs more. Emitting a unit reads its row and resets it to the lanes'
identities. This is the *dense (ring x codes)* layout: O(1) per update, no
hashing, memory ``R x C x lanes x 8`` bytes.

Live-cell accounting (``live``) is exact and O(1) to read: the count kernel
returns how many cells became non-empty, and resetting a row subtracts its
non-empty cells.

:class:`Multiset` -- holistic aggregates (median, quantiles, count-distinct,
heavy hitters, UDAFs): a compacted table of ``(unit, code, value, count)``
rows. Appends are vectorized; :meth:`Multiset.compact` merges duplicates
(np.unique); queries select a unit range and group by code.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, ValueRangeError
from oop.progress.watermark import time_bounds  # (min, max): the sources' kernel, one compile
from oop.window import kernels as K
from oop.window.aggregates import Agg, Lane

__all__ = ["LaneInfo", "Ring", "Multiset", "ColumnValues", "lane_infos", "column_values"]

_I64MAX = np.iinfo(np.int64).max
_I64MIN = np.iinfo(np.int64).min


@dataclass(frozen=True)
class LaneInfo:
    """A lane with its storage dtype and identity value."""

    lane: Lane
    dtype: Any  # np.int64 or np.float64

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.lane.op, self.lane.column)

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
    """
    exact_sums = {a.column for a in aggs if a.spec.exact_sum}
    out: dict[tuple[str, str | None], LaneInfo] = {("rows", None): LaneInfo(Lane("rows"), np.int64)}
    for a in aggs:
        for ln in a.lanes():
            if (ln.op, ln.column) in out:
                continue
            if ln.op in ("rows", "nn"):
                dt: Any = np.int64
            elif ln.op == "sumsq":
                dt = np.float64
            else:
                assert ln.column is not None
                kind = _numeric_kind(schema.field(ln.column).type)
                dt = np.float64 if kind == "float" else np.int64
                if ln.op == "sum" and kind == "int" and ln.column not in exact_sums:
                    dt = np.float64
            out[(ln.op, ln.column)] = LaneInfo(ln, dt)
    return list(out.values())


def exact_sum_columns(lanes: Sequence[LaneInfo]) -> dict[str, int]:
    """``{column: 0}`` for every column with an int64 ``sum`` lane: the running largest
    ``|value|`` seen, which :func:`check_exact_sum` needs at emission."""
    return {li.lane.column: 0 for li in lanes
            if li.lane.op == "sum" and li.lane.column and li.dtype == np.int64}


#: :attr:`Ring.nf_hi` of a ring that never saw a NaN or an infinity
NO_NONFINITE = -(1 << 62)
#: a float value whose square (a ``sumsq`` lane) could overflow counts as non-finite
_SQ_SAFE = 1e150


def note_nonfinite(nf_hi: int, lanes: Sequence["LaneInfo"], cols: dict[str, ColumnValues],
                   lo: np.ndarray, hi: np.ndarray | None) -> int:
    """``nf_hi`` raised to the last unit (``hi - 1``, or ``lo``) of every valid row whose value
    feeds a float ``sum``/``sumsq`` lane and is NaN, infinite or too large to square.

    Paned-WID's differential step cannot subtract such a pane (``inf - inf`` is NaN), so it
    recomputes the windows that follow one (docs/semantics.md). Cost on all-finite batches: a
    min and a max per float column; the masks are only built when one is not finite.
    """
    seen: set[str] = set()
    for li in lanes:
        col = li.lane.column
        if li.lane.op not in ("sum", "sumsq") or col is None or col in seen or col not in cols:
            continue
        seen.add(col)
        v = cols[col].values
        if v.dtype != np.float64 or v.shape[0] == 0:
            continue
        if -_SQ_SAFE < v.min() and v.max() < _SQ_SAFE:  # False on NaN
            continue
        bad = ~(np.abs(v) < _SQ_SAFE)
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

    Integer (and unscaled decimal) values enter the float lanes shifted:
    ``sumsq`` sums ``(value - shift)**2`` and the float ``sum`` lane of an
    integer column (mean/var/std only, see :func:`lane_infos`) sums
    ``value - shift``, the difference taken in int64 before the float
    conversion -- exact for a spread below ``2**53``, so the mean and the
    variance of epoch-nanosecond values keep their low digits.
    ``shifts[column]`` is picked (:func:`pick_shift`) from the first batch
    with a valid value and then fixed (an all-null batch folds nothing).
    """
    op, col = li.key
    v = cv.values
    if op == "sumsq" or (op == "sum" and li.dtype == np.float64 and v.dtype == np.int64):
        shift = shifts.get(col)
        if shift is None:
            shift = pick_shift(cv)
            if shift is None:
                shift = 0
            else:
                shifts[col] = shift
        if v.dtype == np.int64:
            return (v - np.int64(shift)).astype(np.float64), 0.0
        return v, float(shift)
    return v.astype(li.dtype, copy=False), 0.0


def shifted_sum(s: np.ndarray, nn: np.ndarray, shift: Any, lane_shifted: bool) -> np.ndarray:
    """The sum of ``value - shift`` per cell as float64, from a ``sum`` lane ``s`` over ``nn``
    values.

    ``lane_shifted``: the lane already holds it (the float lane of an integer column, see
    :func:`lane_input`). An int64 lane (integers under ``sum``, unscaled decimals) subtracts
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


#: the share of physical memory the dense window state may take before StateLimitError
STATE_LIMIT_FRACTION = 0.5


def physical_memory() -> int:
    """Bytes of physical memory (``os.sysconf``; 16 GiB where it is not available)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16 << 30


def check_state_size(R: int, C: int, n_lanes: int, lo: int, hi: int) -> None:
    """Raise :class:`~oop.errors.StateLimitError` before allocating dense lanes of ``R`` ring
    rows x ``C`` group columns x ``n_lanes`` beyond :data:`STATE_LIMIT_FRACTION` of memory
    (units ``[lo, hi)`` are the window / pane / row-window ids the ring must hold)."""
    nbytes = 8 * int(R) * int(C) * max(int(n_lanes), 1)
    limit = STATE_LIMIT_FRACTION * physical_memory()
    if nbytes > limit:
        from oop.errors import StateLimitError

        raise StateLimitError(
            f"window state: a dense ring of {R} window/pane ids x {C} group columns x "
            f"{n_lanes} lanes would need {nbytes / 2**30:.3g} GiB (limit {limit / 2**30:.1f} "
            f"GiB) to hold the open ids {lo}..{hi}. Usual causes: an event time far from the "
            "others (int64 min/max or 0 used as a placeholder among real timestamps -- filter "
            "or fix those rows), a time column in the wrong unit, a row-based RANGE of "
            "billions of rows, or no punctuation to close old windows. Fix the data, declare "
            "the right unit, or use a shorter range / coarser slide")


def tumble_units(times: np.ndarray, origin: int, size: int) -> np.ndarray:
    """The tumbling WIDs ``floor((times - origin) / size)`` (004 §6.1), as
    :meth:`oop.window.kinds.Sliding.wids` gives them for ``range == slide``."""
    d = times - origin if origin else times
    return np.floor_divide(d, size)


class Ring:
    """Dense (ring x codes) lanes of bounded partial aggregates. See the module docstring."""

    def __init__(self, lanes: Sequence[LaneInfo], base: int = 0, rows: int = 8,
                 codes: int = 64) -> None:
        self.lanes = list(lanes)
        self.R = 1 << max(int(np.ceil(np.log2(max(rows, 2)))), 1)
        self.C = max(codes, 1)
        check_state_size(self.R, self.C, len(self.lanes), int(base), int(base) + int(rows))
        self.base = int(base)  # smallest unit that may be live
        self.top = int(base)  # one past the largest unit ever updated
        self.live = 0  # number of non-empty (unit, code) cells
        self.n_used = 0  # codes < n_used may have been written (update's n_codes)
        self.fixed = False  # fixed R: rows are addressed per code (PA), base/top unused
        # a column's non-null count equals the row count until it shows a null: its nn lane
        # is only maintained (and read) from then on -- one random-access lane less per row
        self.nn_active: set[str] = set()
        self.shift: dict[str, Any] = {}  # column -> variance shift (see lane_input)
        # the largest unit that may hold a NaN / infinite float sum (see note_nonfinite),
        # tracked when the owner subtracts units (Paned-WID sets track_nf)
        self.nf_hi = NO_NONFINITE
        self.track_nf = False
        # growth check (oop.limits): called with the lanes' bytes after a growth, before
        # allocating; raises StateLimitError. None: unchecked
        self.guard: Any = None
        self.arr: dict[tuple[str, str | None], np.ndarray] = {}
        self.tarr: dict[tuple[str, str | None], np.ndarray] = {}  # time lanes of first/last
        for li in self.lanes:
            self.arr[li.key] = np.full(self.R * self.C, li.identity(), li.dtype)
            if li.lane.op in ("first", "last"):
                ident = _I64MAX if li.lane.op == "first" else _I64MIN
                self.tarr[li.key] = np.full(self.R * self.C, ident, np.int64)

    # ---- geometry --------------------------------------------------------
    @property
    def mask(self) -> int:
        return self.R - 1

    def nbytes(self) -> int:
        return self.R * self.C * 8 * (len(self.arr) + len(self.tarr))

    def view(self, key: tuple[str, str | None], unit: int, time: bool = False) -> np.ndarray:
        """The ``C`` cells of ``unit`` in lane ``key`` (a view)."""
        a = (self.tarr if time else self.arr)[self._alias(key)]
        r = unit & self.mask
        return a[r * self.C:(r + 1) * self.C]

    def _alias(self, key: tuple[str, str | None]) -> tuple[str, str | None]:
        """The lane that holds ``key``'s values (inactive nn lanes read the rows lane)."""
        if key[0] == "nn" and key[1] not in self.nn_active:
            return ("rows", None)
        return key

    def remap_values(self, key: tuple[str, str | None], remap: np.ndarray) -> None:
        """Re-rank the value column of lane ``key`` (min/max/first/last over ranked values)."""
        remap_ranks(self.arr[key], self.tarr.get(key), key[0], remap)

    def held_values(self, key: tuple[str, str | None]) -> np.ndarray:
        """The ranks lane ``key``'s live cells hold (see :meth:`remap_values`)."""
        return held_ranks(self.arr[key], self.tarr.get(key), key[0])

    def block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """All live cells of ``units`` (ascending, inside the ring) in one vectorized pass.

        Returns (units of the cells, codes, lane values); cells are ordered by (unit, code).
        """
        u = np.asarray([x for x in units if self.base <= x < self.top], np.int64)
        rr = u & self.mask
        wi, codes = K.scan_rows(self.arr[("rows", None)], self.C, rr, n)
        cr = rr[wi]
        lanes = {k: self.arr[self._alias(k)].reshape(self.R, self.C)[cr, codes] for k in self.arr}
        for k in self.tarr:
            lanes[("t:" + k[0], k[1])] = self.tarr[k].reshape(self.R, self.C)[cr, codes]
        return u[wi], codes, lanes

    def take_block(self, units: Sequence[int], n: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """:meth:`block` and reset of the returned cells, fused in one compiled pass."""
        u = np.asarray([x for x in units if self.base <= x < self.top], np.int64)
        rr = u & self.mask
        ik, fk, iid, fid = [], [], [], []
        for li in self.lanes:
            if li.key == ("rows", None) or self._alias(li.key) != li.key:
                continue
            (ik if li.dtype == np.int64 else fk).append(li.key)
            (iid if li.dtype == np.int64 else fid).append(li.identity())
        tk = list(self.tarr)
        ilanes = tuple(self.arr[k] for k in ik) + tuple(self.tarr[k] for k in tk)
        iid += [_I64MAX if k[0] == "first" else _I64MIN for k in tk]
        di, df = np.zeros(1, np.int64), np.zeros(1, np.float64)
        wi, codes, rv, iv, fv = K.take_rows(
            self.arr[("rows", None)], self.C, rr, n, ilanes or (di,), len(ilanes),
            np.asarray(iid or [0], np.int64), tuple(self.arr[k] for k in fk) or (df,), len(fk),
            np.asarray(fid or [0.0], np.float64))
        self.live -= codes.shape[0]
        lanes: dict = {("rows", None): rv}
        for q, k in enumerate(ik):
            lanes[k] = iv[q]
        for q, k in enumerate(tk):
            lanes[("t:" + k[0], k[1])] = iv[len(ik) + q]
        for q, k in enumerate(fk):
            lanes[k] = fv[q]
        for k in self.arr:
            if k not in lanes:  # aliased (inactive nn) lanes
                lanes[k] = lanes[self._alias(k)]
        return u[wi], codes, lanes

    def reserve(self, top: int, n_codes: int) -> None:
        """Make room for units ``[base, top)`` and ``n_codes`` codes (grows by doubling)."""
        need_r = top - self.base
        newR = self.R
        while newR < need_r:
            newR *= 2
        newC = self.C
        while newC < n_codes:
            newC *= 2
        if newR == self.R and newC == self.C:
            return
        check_state_size(newR, newC, len(self.lanes) + len(self.tarr), self.base, top)
        if self.guard is not None:
            self.guard(newR * newC * 8 * (len(self.arr) + len(self.tarr)),
                       f"dense ring of {newR} window/pane rows x {newC} key columns x "
                       f"{len(self.arr) + len(self.tarr)} lanes")
        live_units = range(self.base, max(self.top, self.base))
        for li in self.lanes:
            self.arr[li.key] = self._regrid(self.arr[li.key], li.identity(), li.dtype, newR, newC,
                                            live_units)
            if li.key in self.tarr:
                ident = _I64MAX if li.lane.op == "first" else _I64MIN
                self.tarr[li.key] = self._regrid(self.tarr[li.key], ident, np.int64, newR, newC,
                                                 live_units)
        self.R, self.C = newR, newC

    def lower_base(self, low: int) -> None:
        """Open units down to ``low`` (tuples before the first punctuation may go back in time)."""
        if low >= self.base:
            return
        self.reserve(self.base + (self.top - low), self.C)  # grow R first, with the old base
        self.base = low

    def _regrid(self, a, ident, dtype, newR, newC, units) -> np.ndarray:
        old = a.reshape(self.R, self.C)
        new = np.full((newR, newC), ident, dtype)
        for u in units:
            new[u & (newR - 1), : self.C] = old[u & (self.R - 1)]
        return new.reshape(-1)

    # ---- updating -----------------------------------------------------------
    def update(self, codes: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
               cols: dict[str, ColumnValues], times: np.ndarray, n_codes: int,
               single: bool = False, top: int | None = None,
               tumble: tuple[int, int] | None = None) -> None:
        """Fold a batch into the lanes: row ``i`` updates units ``[lo[i], hi[i])`` of ``codes[i]``.

        ``single``: the caller guarantees ``hi == lo + 1`` (one unit per row: a
        cheaper kernel; ``hi`` may then be None); ``top``: ``max(hi)`` when the
        caller knows it. ``tumble=(origin, size)`` with ``lo`` None (and ``single``,
        ``top``): the units are the tumbling WIDs ``floor((times - origin) / size)``,
        computed inside the fused kernel when the lanes allow, else here.
        Requires ``base <= lo`` (late rows were removed).
        Cost: O(sum(hi-lo) x lanes).
        """
        if codes.shape[0] == 0:
            return
        if lo is None:
            assert tumble is not None and single and top is not None
            if self.track_nf:
                lo = tumble_units(times, *tumble)
        if self.track_nf:
            self.nf_hi = note_nonfinite(self.nf_hi, self.lanes, cols, lo, hi)
        self.n_used = max(self.n_used, n_codes)
        if self.fixed:
            self.reserve(self.top, n_codes)
        else:
            if top is None:
                top = time_bounds(lo)[1] + 1 if single else time_bounds(hi)[1]
            self.reserve(top, n_codes)
            self.top = max(self.top, top)
        C, mask = self.C, self.mask
        # fused fast path: rows, plus nn counts and float sums of columns without nulls
        def nonull(li: LaneInfo) -> bool:
            return cols[li.lane.column].valid.shape[0] == 0  # type: ignore[index]

        for li in self.lanes:
            if li.lane.op == "nn" and not nonull(li) and li.lane.column not in self.nn_active:
                self.arr[li.key][:] = self.arr[("rows", None)]
                self.nn_active.add(li.lane.column)  # type: ignore[arg-type]
        fn = [li for li in self.lanes if li.lane.op == "nn" and nonull(li)
              and li.lane.column in self.nn_active]
        skip = {li.key for li in self.lanes if li.lane.op == "nn"
                and li.lane.column not in self.nn_active}
        ff = [li for li in self.lanes if li.lane.op == "sum" and li.dtype == np.float64
              and nonull(li)]
        dummy_i, dummy_f = np.zeros(1, np.int64), np.zeros(1, np.float64)
        nacc = tuple(self.arr[li.key] for li in fn) or (dummy_i,)
        facc = tuple(self.arr[li.key] for li in ff) or (dummy_f,)
        fvals = tuple(lane_input(li, cols[li.lane.column], self.shift)[0]  # type: ignore[index]
                      for li in ff) or (dummy_f,)
        done = {li.key for li in fn} | {li.key for li in ff} | skip
        if lo is None and all(li.key[0] == "rows" or li.key in done for li in self.lanes):
            assert tumble is not None
            self.live += K.upd_rows_sums_tumble(self.arr[("rows", None)], nacc, len(fn), facc,
                                                fvals, len(ff), codes, times, tumble[0],
                                                tumble[1], C, mask)
            return
        if lo is None:
            assert tumble is not None
            lo = tumble_units(times, *tumble)
        if single:
            self.live += K.upd_rows_sums1(self.arr[("rows", None)], nacc, len(fn), facc, fvals,
                                          len(ff), codes, lo, C, mask)
        else:
            self.live += K.upd_rows_sums(self.arr[("rows", None)], nacc, len(fn), facc, fvals,
                                         len(ff), codes, lo, hi, C, mask)
        if hi is None:
            assert single
            hi = lo + 1 if any(li.key[0] != "rows" and li.key not in done for li in self.lanes) else lo
        for li in self.lanes:
            op, col = li.key
            if op == "rows" or li.key in done:
                continue
            cv = cols[col]  # type: ignore[index]
            acc = self.arr[li.key]
            if op == "nn":
                K.upd_nn(acc, codes, lo, hi, C, mask, cv.valid)
            elif op == "sum":
                K.upd_sum(acc, codes, lo, hi, C, mask, lane_input(li, cv, self.shift)[0], cv.valid)
            elif op == "sumsq":
                vals, shift = lane_input(li, cv, self.shift)
                K.upd_sumsq(acc, codes, lo, hi, C, mask, vals, shift, cv.valid)
            elif op == "min":
                K.upd_min(acc, codes, lo, hi, C, mask, cv.values.astype(li.dtype, copy=False),
                          cv.valid)
            elif op == "max":
                K.upd_max(acc, codes, lo, hi, C, mask, cv.values.astype(li.dtype, copy=False),
                          cv.valid)
            elif op == "first":
                K.upd_first(self.tarr[li.key], acc, codes, lo, hi, C, mask, times,
                            cv.values.astype(li.dtype, copy=False), cv.valid)
            elif op == "last":
                K.upd_last(self.tarr[li.key], acc, codes, lo, hi, C, mask, times,
                           cv.values.astype(li.dtype, copy=False), cv.valid)

    # ---- reading / purging ----------------------------------------------------
    def row(self, unit: int) -> dict[tuple[str, str | None], np.ndarray]:
        """Copies of every lane's cells for ``unit`` (time lanes under key ('t:'+op, col))."""
        out = {k: self.view(k, unit).copy() for k in self.arr}  # view() resolves aliases
        for k in self.tarr:
            out[("t:" + k[0], k[1])] = self.view(k, unit, time=True).copy()
        return out

    def reset(self, unit: int) -> None:
        """Reset ``unit``'s row to the identities and drop its live cells."""
        if not (self.base <= unit < self.base + self.R) or unit >= self.top:
            return
        rows = self.view(("rows", None), unit)
        self.live -= int(np.count_nonzero(rows))
        for li in self.lanes:
            self.view(li.key, unit)[:] = li.identity()
            if li.key in self.tarr:
                self.view(li.key, unit, time=True)[:] = _I64MAX if li.lane.op == "first" else _I64MIN

    def reset_range(self, lo: int, hi: int) -> None:
        """Reset the rows of units ``[lo, hi)`` (those that are live: ``[base, top)``).

        Same as :meth:`reset` per unit, but as at most two 2-D slice fills
        per lane (the ring wraps once at most), over the code columns that
        were ever written. Cost: O((hi - lo) x codes used), no per-unit Python.
        """
        lo = max(lo, self.base)
        hi = min(hi, self.top, self.base + self.R)
        if hi <= lo:
            return
        R, C, n = self.R, self.C, min(self.n_used, self.C)
        if n == 0:
            return
        r0 = lo & self.mask
        cnt = hi - lo
        segs = [(r0, r0 + cnt)] if r0 + cnt <= R else [(r0, R), (0, r0 + cnt - R)]
        rows = self.arr[("rows", None)].reshape(R, C)
        self.live -= sum(int(np.count_nonzero(rows[a:b, :n])) for a, b in segs)
        for li in self.lanes:  # only the code columns ever written: [0, n_used)
            arr, ident = self.arr[li.key].reshape(R, C), li.identity()
            tarr = self.tarr[li.key].reshape(R, C) if li.key in self.tarr else None
            tid = _I64MAX if li.lane.op == "first" else _I64MIN
            for a, b in segs:
                arr[a:b, :n] = ident
                if tarr is not None:
                    tarr[a:b, :n] = tid

    def purge_below(self, unit: int, clean: bool = False) -> None:
        """Reset every unit ``< unit`` and move ``base`` there.

        ``clean``: the caller already reset every live cell below ``unit``
        (:meth:`reset_cells` after emitting them), so only ``base`` moves.
        """
        if not clean:
            self.reset_range(self.base, unit)
        self.base = max(self.base, unit)
        self.top = max(self.top, self.base)

    def make_fixed(self, rows: int) -> None:
        """Switch to per-code addressing with ``rows`` (rounded up to a power of two) ring rows."""
        R = 1 << max(int(np.ceil(np.log2(max(rows, 2)))), 1)
        assert self.live == 0
        self.fixed, self.base, self.top = True, 0, R
        self.reserve(R, self.C)

    def slots(self, units: np.ndarray, codes: np.ndarray) -> np.ndarray:
        return (units & self.mask) * self.C + codes

    def gather(self, units: np.ndarray, codes: np.ndarray) -> dict:
        """Lane values at cells ``(units[i], codes[i])`` (time lanes under ('t:'+op, col))."""
        j = self.slots(units, codes)
        out = {k: self.arr[self._alias(k)][j] for k in self.arr}
        for k, a in self.tarr.items():
            out[("t:" + k[0], k[1])] = a[j]
        return out

    def reset_cells(self, units: np.ndarray, codes: np.ndarray) -> None:
        """Reset cells ``(units[i], codes[i])`` (distinct) to the identities."""
        j = self.slots(units, codes)
        self.live -= int(np.count_nonzero(self.arr[("rows", None)][j]))
        for li in self.lanes:
            self.arr[li.key][j] = li.identity()
            if li.key in self.tarr:
                self.tarr[li.key][j] = _I64MAX if li.lane.op == "first" else _I64MIN

    def compact_codes(self, keep: np.ndarray) -> None:
        """Keep only code columns ``keep`` (ascending; every other column holds no live cell),
        renumbered ``0..len(keep)-1``; the code axis shrinks to ``max(64, 2 x len(keep))``.
        Cost: O(R x len(keep)) per lane."""
        assert not self.fixed
        k = keep.shape[0]
        C = max(64, 2 * k)
        for li in self.lanes:
            old = self.arr[li.key].reshape(self.R, self.C)
            new = np.full((self.R, C), li.identity(), li.dtype)
            new[:, :k] = old[:, keep]
            self.arr[li.key] = new.reshape(-1)
            if li.key in self.tarr:
                t = self.tarr[li.key].reshape(self.R, self.C)
                nt = np.full((self.R, C), _I64MAX if li.lane.op == "first" else _I64MIN, np.int64)
                nt[:, :k] = t[:, keep]
                self.tarr[li.key] = nt.reshape(-1)
        self.C, self.n_used = C, k

    def live_codes(self, n: int) -> np.ndarray:
        """Whether each code ``< n`` has a live cell. O(R x n)."""
        rows = self.arr[("rows", None)].reshape(self.R, self.C)[:, :min(n, self.C)]
        out = np.zeros(n, bool)
        out[: rows.shape[1]] = rows.any(axis=0)
        return out

    def snapshot(self) -> dict[str, Any]:
        return {"nf_hi": self.nf_hi, "nn_active": set(self.nn_active), "fixed": self.fixed, "R": self.R, "C": self.C, "base": self.base, "top": self.top, "live": self.live,
                "shift": dict(self.shift), "arr": {k: v.copy() for k, v in self.arr.items()},
                "tarr": {k: v.copy() for k, v in self.tarr.items()}}

    def restore(self, s: dict[str, Any]) -> None:
        self.R, self.C, self.base, self.top, self.live = s["R"], s["C"], s["base"], s["top"], s["live"]
        self.fixed = s["fixed"]
        self.nn_active = set(s["nn_active"])
        self.shift = dict(s["shift"])
        self.nf_hi = s.get("nf_hi", NO_NONFINITE)
        self.arr = {k: v.copy() for k, v in s["arr"].items()}
        self.tarr = {k: v.copy() for k, v in s["tarr"].items()}
        self.n_used = self.C  # conservative: any column may hold data

    def _check(self) -> None:
        rows = self.arr[("rows", None)].reshape(self.R, self.C)
        assert self.n_used >= self.C or int(np.count_nonzero(rows[:, self.n_used:])) == 0
        assert self.top - self.base <= self.R, (self.base, self.top, self.R)
        assert int(np.count_nonzero(rows)) == self.live, (int(np.count_nonzero(rows)), self.live)
        assert (rows >= 0).all()
        for k, a in self.arr.items():
            if k[0] == "nn" and k[1] not in self.nn_active:
                assert not a.any(), f"inactive lane {k} holds data"
        live_rows = {u & self.mask for u in range(self.base, self.top)}
        for r in range(self.R):
            if r not in live_rows:
                assert not rows[r].any(), f"ring row {r} outside [base, top) holds data"


class Multiset:
    """Compacted ``(unit, code, value) -> count`` table for holistic aggregates.

    ``value`` is float64 (median/quantile/UDAF) or int64 value codes
    (distinct/heavy hitters). :meth:`add` appends (O(n)); :meth:`compact`
    sorts and merges duplicates (O(m log m)), called once per punctuation.
    """

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.unit = np.zeros(0, np.int64)
        self.code = np.zeros(0, np.int64)
        self.value = np.zeros(0, dtype)
        self.count = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_rows = 0
        #: units below ``floor`` may have been purged (state built from them is stale)
        self.floor = _I64MIN

    def __len__(self) -> int:
        return self.unit.shape[0] + self._pending_rows

    def add(self, units: np.ndarray, codes: np.ndarray, values: np.ndarray) -> None:
        if units.shape[0]:
            self._pending.append((units.astype(np.int64, copy=False), codes.astype(np.int64, copy=False),
                                  values.astype(self.dtype, copy=False)))
            self._pending_rows += units.shape[0]

    def compact(self) -> None:
        """Merge pending rows and duplicates; rows end sorted by (unit, code, value).

        Only the pending rows are sorted (O(p log p)); they are then merged
        into the already sorted table by :func:`~oop.window.kernels.merge_counted`
        (O(table + p)), not re-sorted with it.
        """
        if not self._pending:
            return
        u = np.concatenate([p[0] for p in self._pending])
        c = np.concatenate([p[1] for p in self._pending])
        v = np.concatenate([p[2] for p in self._pending])
        self._pending, self._pending_rows = [], 0
        order = np.lexsort((v, c, u))
        u, c, v = u[order], c[order], v[order]
        n = np.ones(u.shape[0], np.int64)
        if u.shape[0]:
            new = np.ones(u.shape[0], bool)
            new[1:] = (u[1:] != u[:-1]) | (c[1:] != c[:-1]) | (v[1:] != v[:-1])
            idx = np.flatnonzero(new)
            n = np.add.reduceat(n, idx)
            u, c, v = u[idx], c[idx], v[idx]
        if self.unit.shape[0]:
            u, c, v, n = K.merge_counted(self.unit, self.code, self.value, self.count, u, c, v, n)
        self.unit, self.code, self.value, self.count = u, c, v, n

    def select(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(code, value, count) of units in ``[lo, hi)``, merged over units, sorted by (code, value).

        The table is sorted by (unit, code, value), so the rows of each unit
        are a (code, value)-sorted run: the runs are merged pairwise
        (:func:`~oop.window.kernels.merge_counted`, log2(units) rounds of
        O(rows)) instead of re-sorting their concatenation -- Paned-WID's
        window-level combine of holistic aggregates (004 §6.2.1: a window
        is the merge of its panes' sorted value tables).
        """
        self.compact()
        a, b = np.searchsorted(self.unit, [lo, hi])
        c, v, n = self.code[a:b], self.value[a:b], self.count[a:b]
        if hi - lo > 1 and c.shape[0]:
            cuts = np.flatnonzero(self.unit[a + 1:b] != self.unit[a:b - 1]) + 1
            bounds = [0, *cuts.tolist(), c.shape[0]]
            runs = [(c[x:y], c[x:y], v[x:y], n[x:y]) for x, y in zip(bounds[:-1], bounds[1:])]
            while len(runs) > 1:
                nxt = [K.merge_counted(*runs[q], *runs[q + 1]) for q in range(0, len(runs) - 1, 2)]
                if len(runs) % 2:
                    nxt.append(runs[-1])
                runs = nxt
            c, _, v, n = runs[0]
        return c, v, n

    def keep_rows(self, keep_fn: Any) -> None:
        """Keep only rows where ``keep_fn(unit, code)`` (vectorized) is true."""
        self.compact()
        self.floor = _I64MAX  # arbitrary rows went: no state built from the table stays valid
        m = keep_fn(self.unit, self.code)
        self.unit, self.code, self.value, self.count = (
            self.unit[m], self.code[m], self.value[m], self.count[m])

    def remap_codes(self, remap: np.ndarray) -> None:
        """Renumber group codes (``remap[old]``, increasing on the codes held: the table stays
        sorted by (unit, code, value)); every held code must map to ``>= 0``."""
        self.compact()
        if self.code.shape[0]:
            self.code = remap[self.code]
            assert self.code.min() >= 0

    def remap_values(self, remap: np.ndarray) -> None:
        """Renumber value codes (count-distinct / heavy hitters: ``remap[old]``, increasing on
        the values held, so the table stays sorted); every held value must map to ``>= 0``."""
        self.compact()
        if self.value.shape[0]:
            self.value = remap[self.value]
            assert self.value.min() >= 0

    def purge_below(self, unit: int) -> None:
        self.compact()
        self.floor = max(self.floor, int(unit))
        a = int(np.searchsorted(self.unit, unit))
        self.unit, self.code, self.value, self.count = (
            self.unit[a:], self.code[a:], self.value[a:], self.count[a:])

    def nbytes(self) -> int:
        return 32 * len(self)

    def snapshot(self) -> dict[str, Any]:
        self.compact()
        return {"u": self.unit.copy(), "c": self.code.copy(), "v": self.value.copy(),
                "n": self.count.copy()}

    def restore(self, s: dict[str, Any]) -> None:
        self.unit, self.code, self.value, self.count = s["u"].copy(), s["c"].copy(), s["v"].copy(), s["n"].copy()
        self._pending, self._pending_rows = [], 0
        self.floor = int(self.unit[0]) if self.unit.shape[0] else _I64MAX

    def _check(self) -> None:
        assert self.unit.shape == self.code.shape == self.value.shape == self.count.shape
        assert (self.count > 0).all()
        if self.unit.shape[0] > 1:
            assert (np.diff(self.unit) >= 0).all()


def group_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique codes, start offsets + final end) of a code-sorted array."""
    if codes.shape[0] == 0:
        return codes, np.zeros(1, np.int64)
    new = np.ones(codes.shape[0], bool)
    new[1:] = codes[1:] != codes[:-1]
    starts = np.flatnonzero(new)
    return codes[starts], np.append(starts, codes.shape[0])


def quantiles_from_counts(values: np.ndarray, counts: np.ndarray, bounds: np.ndarray,
                          q: float) -> np.ndarray:
    """Linear-interpolated q-quantile per group of (value-sorted, counted) rows."""
    cum = np.cumsum(counts)
    start_cum = np.concatenate(([0], cum))[bounds[:-1]]
    n = cum[bounds[1:] - 1] - start_cum
    pos = q * (n - 1)
    lo_r = np.floor(pos).astype(np.int64)
    frac = pos - lo_r
    hi_r = np.minimum(lo_r + 1, n - 1)
    # value at global rank g: first row whose cum > g
    lo_v = values[np.searchsorted(cum, start_cum + lo_r, side="right")].astype(np.float64)
    hi_v = values[np.searchsorted(cum, start_cum + hi_r, side="right")].astype(np.float64)
    with np.errstate(invalid="ignore"):  # NaN / inf neighbours (docs/semantics.md)
        return np.where(frac == 0, lo_v, lo_v + (hi_v - lo_v) * frac)


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
