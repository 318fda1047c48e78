"""DeriveTime: a progressing attribute ``max`` or ``min`` of several others (004 §7.1-7.2).

What it computes: every tuple extended by ``column = f(t.a_1, ..., t.a_k)``
with ``f`` = ``max`` or ``min`` over progressing attributes ``a_i`` of the
stream (e.g. ``ts`` and ``ts_right`` of an OA-Join result), registered as a
new progressing attribute (same unit), so that a downstream window can use it
(``Stream.window(..., time=column)``) and close its windows from punctuation.
A tuple with a null ``a_i`` (the missing side of an outer-join row) gets a
null ``column``: punctuation on ``a_i`` does not constrain such rows (the
join's convention), so no bound could cover them; filter them before a window.

Punctuation rule. A punctuation covers a region of attribute space that no
later tuple falls in; ``P(column, c)`` is valid when the region
``{f < c}`` lies inside the union of the regions covered so far (004 §7.2,
Fig. 7-5: an individual punctuation covers a *slab*, a joint one a *box*):

* ``max``: ``{max < c}`` is the box ``a_i < c for all i``. ``P(a_i, v)``
  alone covers it for ``c <= v`` (every later tuple has ``a_i >= v``, so
  ``max >= v``); a joint punctuation ``((a_j, v_j), ...)`` over attributes
  ``J`` that are all sources covers it for ``c <= min_j v_j``. Bound::

      c = max( max_i b_i , max over joints of min_j v_j )

* ``min``: ``{min < c}`` is the union of the slabs ``a_i < c``; each slab must
  be covered by an individual punctuation on ``a_i`` (a box never contains a
  slab), so a bound needs *every* source punctuated::

      c = min_i b_i        (joint punctuation alone gives no bound on the min)

``b_i`` is the largest ``P(a_i, v)`` seen. Every punctuation ever seen stays
valid, so ``c`` only grows. Note: 004 §7.1 (discussion of
*ProducePunctuation*) states the two cases the other way round ("max can
progress to s when it receives punctuation for s from both S0 and S1; min ...
from either"). Under the definition of punctuation used here (Eq. 4.1, every
later tuple has ``a >= v``) that does not hold: after ``P(S0.ts, 5)`` alone a
later result ``(S0.ts=5, S1.ts=0)`` has ``min = 0 < 5``, while ``max >= 5``
for every later result. The property tests check the rule above against a
brute-force coverage computation (:func:`bound_reference`).

On a batch: one vectorized ``np.maximum``/``np.minimum`` over the int64 views
of the sources (zero-copy for int64/timestamp columns), emitted at once.
On a punctuation: forwarded unchanged (the source columns are kept), then
``P(column, c)`` when ``c`` advanced. Group-wise punctuation is forwarded
only. Purges nothing; state is ``k + 2`` integers. Cost: O(batch x k) per
batch, O(k) per punctuation.

>>> import pyarrow as pa
>>> from oop.operators.base import StreamInfo
>>> from oop.stream.elements import Punctuation
>>> op = DeriveTime("t_max", "max", ["a", "b"])
>>> info = op.open([StreamInfo("s", pa.schema([("a", pa.int64()), ("b", pa.int64())]),
...                                {"a": "ms", "b": "ms"}, "a")])
>>> sorted(info.times), info.time
(['a', 'b', 't_max'], 'a')
>>> op.on_batch(pa.record_batch({"a": [1, 7], "b": [4, 2]}))[0].column("t_max").to_pylist()
[4, 7]
>>> op.on_punctuation(Punctuation("b", 3))
[Punctuation(attr='b', value=3), Punctuation(attr='t_max', value=3)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError
from oop.operators.base import Operator, StreamInfo, require_columns
from oop.stream.elements import INT64_MIN, Element, JointPunctuation, Punctuation
from oop.stream.timecol import check_time_column, time_arrow_type

__all__ = ["TimeReduction", "REDUCTIONS", "time_reduction", "DeriveTimeConfig", "DerivedBound",
           "DeriveTime", "derive_reference", "bound_reference"]


@dataclass(frozen=True)
class TimeReduction:
    """How a derived time combines its sources, row-wise and in its punctuation bound.

    ``of`` reduces values (tuple-at-a-time), ``ufunc`` reduces columns (a batch);
    ``joint_bounds``: whether a joint punctuation over sources bounds the result
    (``max``: a box covers ``{max < c}``; ``min``: it never covers a slab; see the
    module docstring).
    """

    name: str
    of: Callable[[Iterable[int]], int]
    ufunc: np.ufunc
    joint_bounds: bool


#: the reductions a derived time may use: the only ones non-decreasing in every source
REDUCTIONS: Mapping[str, TimeReduction] = {
    "max": TimeReduction("max", max, np.maximum, joint_bounds=True),
    "min": TimeReduction("min", min, np.minimum, joint_bounds=False),
}


def time_reduction(fn: str | TimeReduction, column: str = "?") -> TimeReduction:
    """``fn`` as a :class:`TimeReduction` (a name of :data:`REDUCTIONS`, or one already).

    >>> time_reduction("min").joint_bounds
    False
    """
    if isinstance(fn, TimeReduction):
        return fn
    if fn not in REDUCTIONS:
        raise ConfigError(
            f"derive_time {column!r}: fn={fn!r}; use {' or '.join(map(repr, REDUCTIONS))} (only "
            "these are non-decreasing in every source, so punctuation carries over)"
        )
    return REDUCTIONS[fn]


@dataclass(frozen=True)
class DeriveTimeConfig:
    """``column = fn(*sources)`` as a new progressing attribute (see the module docstring)."""

    column: str
    fn: str
    sources: tuple[str, ...]
    primary: bool = False

    def __post_init__(self) -> None:
        time_reduction(self.fn, self.column)
        if isinstance(self.sources, str) or len(self.sources) < 2:
            raise ConfigError(
                f"derive_time {self.column!r}: give at least two source attributes, got "
                f"{self.sources!r}; with one, window on it directly (Stream.window(time=...))"
            )
        if len(set(self.sources)) != len(self.sources):
            raise ConfigError(f"derive_time {self.column!r}: sources {self.sources!r} repeat a name")
        if self.column in self.sources:
            raise ConfigError(
                f"derive_time {self.column!r}: the new column would overwrite one of its sources; "
                "give it a new name"
            )

    @property
    def reduction(self) -> TimeReduction:
        return time_reduction(self.fn, self.column)

    def logic(self) -> "DerivedBound":
        return DerivedBound(self.reduction, self.sources)


class DerivedBound:
    """The bound ``c`` on ``fn(sources)`` implied by the punctuation seen so far.

    :meth:`observe` takes any punctuation and returns the new bound when it
    advanced (else None). O(k) per call, O(k) state.
    """

    def __init__(self, fn: str | TimeReduction, sources: Sequence[str]) -> None:
        self.fn = time_reduction(fn)
        self.sources = tuple(sources)
        self.b: dict[str, int] = {a: INT64_MIN for a in self.sources}
        self.joint = INT64_MIN  # max over joints (all attrs sources) of min_j v_j
        self.bound = INT64_MIN

    def current(self) -> int:
        """The bound implied by everything observed (INT64_MIN: none yet)."""
        c = self.fn.of(self.b.values())
        return max(c, self.joint) if self.fn.joint_bounds else c

    def observe(self, p: Element) -> int | None:
        """Fold one punctuation in; the new bound if it advanced, else None."""
        if isinstance(p, Punctuation):
            if p.attr in self.b and p.value > self.b[p.attr]:
                self.b[p.attr] = int(p.value)
        elif isinstance(p, JointPunctuation):
            if p.bounds and all(a in self.b for a in p.attrs):
                self.joint = max(self.joint, min(int(v) for _, v in p.bounds))
        else:
            return None
        c = self.current()
        if c > self.bound:
            self.bound = c
            return c
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"b": dict(self.b), "joint": self.joint, "bound": self.bound}

    def restore(self, s: Mapping[str, Any]) -> None:
        self.b, self.joint, self.bound = dict(s["b"]), int(s["joint"]), int(s["bound"])

    def _check(self) -> None:
        assert set(self.b) == set(self.sources)
        # the implied bound only grows, and every advance is emitted at once
        assert self.bound == self.current(), (
            f"emitted bound {self.bound} differs from the implied bound {self.current()}")


def _int64_view(arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """(int64 values, validity mask or None); nulls read as 0 under a False mask."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type):
        arr = arr.view(pa.int64())
    elif not pa.types.is_int64(arr.type):
        arr = arr.cast(pa.int64())
    if arr.null_count:
        valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
        return np.asarray(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False), np.int64), valid
    return arr.to_numpy(zero_copy_only=False), None


class DeriveTime(Operator):
    """Add ``column = fn(*sources)`` as a progressing attribute; see the module docstring."""

    def __init__(self, column: str, fn: str, sources: Sequence[str], *, primary: bool = False,
                 name: str = "derive_time") -> None:
        super().__init__(name)
        self.config = DeriveTimeConfig(column, fn, tuple(sources), primary)
        self.logic = self.config.logic()

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        cfg = self.config
        require_columns(info, list(cfg.sources), self.name)
        missing = [a for a in cfg.sources if a not in info.times]
        if missing:
            raise ConfigError(
                f"{self.name}: {missing} of stream {info.name!r} are not progressing attributes "
                f"(it has {sorted(info.times)}); a max/min of non-progressing columns has no "
                "punctuation to carry over"
            )
        for a in cfg.sources:
            check_time_column(info.schema, a, info.name)
        units = {info.times[a] for a in cfg.sources}
        types = {str(time_arrow_type(info.schema, a)) for a in cfg.sources}
        if len(units) > 1 or len(types) > 1:
            raise ConfigError(
                f"{self.name}: sources {list(cfg.sources)} of stream {info.name!r} have units "
                f"{[info.times[a] for a in cfg.sources]} and types {sorted(types)}; cast them to "
                "one unit and type first so their max/min compares like with like"
            )
        if cfg.column in info.schema.names:
            raise ConfigError(
                f"{self.name}: stream {info.name!r} already has a column {cfg.column!r}; give the "
                "derived time a new name"
            )
        self.out_type = time_arrow_type(info.schema, cfg.sources[0])
        schema = info.schema.append(pa.field(cfg.column, self.out_type))
        times = {**info.times, cfg.column: info.times[cfg.sources[0]]}
        return StreamInfo(self.name, schema, times, cfg.column if cfg.primary else info.time)

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.output is not None
        reduce = self.config.reduction.ufunc
        vals, valid = _int64_view(batch.column(self.config.sources[0]))
        for a in self.config.sources[1:]:
            v, ok = _int64_view(batch.column(a))
            vals = reduce(vals, v)
            if ok is not None:
                valid = ok if valid is None else valid & ok
        arr = pa.array(vals, pa.int64(), mask=None if valid is None else ~valid)
        if pa.types.is_timestamp(self.out_type):
            arr = arr.view(self.out_type)
        return [pa.RecordBatch.from_arrays([*batch.columns, arr], schema=self.output.schema)]

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        out: list[Element] = [punctuation]
        c = self.logic.observe(punctuation)
        if c is not None:
            out.append(Punctuation(self.config.column, c))
        return out

    def snapshot(self) -> Any:
        return {**super().snapshot(), "bound": self.logic.snapshot()}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.logic.restore(state["bound"])

    def _check(self) -> None:
        self.logic._check()


def derive_reference(rows: Iterable[Mapping[str, Any]], fn: str | TimeReduction,
                     sources: Sequence[str]) -> list[Any]:
    """Tuple-at-a-time reference of the column: ``fn`` of the sources, None if any is None."""
    f = time_reduction(fn).of
    out = []
    for r in rows:
        vals = [r[a] for a in sources]
        out.append(None if any(v is None for v in vals) else f(vals))
    return out


def bound_reference(punctuations: Sequence[Element], fn: str | TimeReduction,
                    sources: Sequence[str], lo: int, hi: int) -> int | None:
    """The tightest bound on ``fn(sources)`` by brute force over the grid ``[lo, hi]^k``.

    A point is *open* when no punctuation covers it (a later tuple may still
    sit there); the bound is the smallest ``fn`` over open points, or None
    when that is the grid's lower edge (no bound). Punctuation values must lie
    well inside the grid. O((hi - lo)^k x |punctuations|) -- for tests.
    """
    import itertools

    f = time_reduction(fn).of

    def covered(pt: dict[str, int]) -> bool:
        for p in punctuations:
            if isinstance(p, Punctuation) and p.attr in pt and pt[p.attr] < p.value:
                return True
            if isinstance(p, JointPunctuation) and all(a in pt for a in p.attrs) \
                    and p.covers_point(pt):
                return True
        return False

    best: int | None = None
    for xs in itertools.product(range(lo, hi + 1), repeat=len(sources)):
        pt = dict(zip(sources, xs))
        if not covered(pt):
            v = f(xs)
            best = v if best is None else min(best, v)
    return None if best is None or best <= lo else best
