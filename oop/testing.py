"""Hypothesis strategies and slow references shared by every test of the engine (DESIGN §8).

The strategies build disordered feeds with *valid* punctuation so that tests
can assert the four properties of DESIGN §8: kernel == reference, result ==
from-scratch oracle, independence from arrival order and batch boundaries,
and accounting (nothing lost).

* :func:`disordered_tables` -- a ``pa.Table`` in **arrival order** with
  columns ``ts`` (int64 event time), ``key`` (int64 or string) and ``val``
  (int64). With ``max_delay=d`` the disorder is bounded: every tuple arrives
  at most ``d`` behind the largest ``ts`` seen before it, so
  ``oop.BoundedDelay(d)`` never makes a tuple late. With ``max_delay=None``
  the order is an arbitrary permutation (unbounded disorder).
* :func:`batch_splits` -- the table cut into RecordBatches of random sizes
  (including empty batches when ``allow_empty``).
* :func:`exact_punctuation_feed` -- batches interleaved with
  ``oop.Punctuation`` items that are valid (``v <=`` the smallest ``ts`` of
  everything after it), non-decreasing and sometimes lagging. Replay it with
  ``oop.from_batches(items, time="ts", punctuation=oop.External())`` (a
  generator that adds nothing to the feed's own punctuation).
* :func:`disordered_feeds` -- the three above in one draw: ``(table, items)``.
* :func:`reordered_feeds` -- two feeds of one table, the second in a drawn
  permutation (independence from arrival order and batch boundaries).
* :func:`band_disordered_pair` -- two seeded tables for joins (plain numpy).
* :func:`trailing_punctuation_feed`, :func:`late_scripts` -- feeds whose
  punctuation ignores the disorder, so later tuples may be late (for the
  late-tuple policies: every tuple is emitted or counted late).
* :func:`reference_replay` -- the slow, tuple-at-a-time replay of a feed:
  which tuples pass, which are late, which punctuations are emitted.
* :func:`rows`, :func:`same_bag`, :func:`check_punctuation_respected` --
  small oracle helpers.
* :func:`drive_operator`, :func:`check_invariants`,
  :func:`check_stream_contract` -- the operator contract (docs/architecture.md,
  "The operator contract"): push a feed through one operator checking its
  internal invariants after every step, and check that what it emitted obeys
  its own punctuation.

Example (inside a test)::

    from hypothesis import given, strategies as st
    from oop.testing import disordered_tables, batch_splits, exact_punctuation_feed

    @given(st.data())
    def test_passthrough(data):
        t = data.draw(disordered_tables(max_delay=5))
        items = data.draw(exact_punctuation_feed(data.draw(batch_splits(t))))
        res = oop.from_batches(items, time="ts", punctuation=oop.External(),
                               schema=t.schema).run()
        assert same_bag(res.table, t)

>>> import pyarrow as pa, oop
>>> feed = [pa.record_batch({"ts": [3, 1]}), oop.Punctuation("ts", 2),
...         pa.record_batch({"ts": [1, 5]})]
>>> ref = reference_replay(feed)
>>> [r["ts"] for r in ref.rows], [r["ts"] for r in ref.late], ref.punctuations
([3, 1, 5], [1], [(2, 2)])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

from oop.stream.elements import (INT64_MIN, GroupPunctuation, JointPunctuation, Punctuation,
                                  is_punctuation)

__all__ = [
    "comparable_elements",
    "disordered_tables",
    "batch_splits",
    "exact_punctuation_feed",
    "disordered_feeds",
    "trailing_punctuation_feed",
    "reordered_feeds",
    "band_disordered_pair",
    "late_scripts",
    "stop_and_resume",
    "reference_replay",
    "ReferenceRun",
    "rows",
    "same_bag",
    "check_punctuation_respected",
    "feed_batches",
    "resumed_output",
    "drive_operator",
    "check_invariants",
    "check_stream_contract",
    "TABLE_SCHEMA",
]

TABLE_SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.int64())])
TABLE_SCHEMA_STR = pa.schema([("ts", pa.int64()), ("key", pa.string()), ("val", pa.int64())])


@st.composite
def disordered_tables(
    draw: st.DrawFn,
    min_rows: int = 0,
    max_rows: int = 60,
    n_keys: int = 4,
    max_delay: int | None = 10,
    string_keys: bool = False,
    max_gap: int = 3,
) -> pa.Table:
    """A table ``(ts, key, val)`` in arrival order.

    Event times are drawn as a non-decreasing sequence (gaps ``0..max_gap``,
    so duplicates occur) from a random origin, then each tuple gets an
    arrival delay ``0..max_delay`` and the rows are ordered by
    ``ts + delay`` (ties by generation order). A tuple arriving after tuple
    ``i`` therefore has ``ts >= ts_i - max_delay``: ``BoundedDelay(max_delay)``
    is exact. ``max_delay=None`` gives an arbitrary permutation.
    """
    n = draw(st.integers(min_rows, max_rows))
    origin = draw(st.integers(-1_000, 1_000))
    gaps = draw(st.lists(st.integers(0, max_gap), min_size=n, max_size=n))
    ts = origin + np.cumsum(np.asarray(gaps, dtype=np.int64)) if n else np.zeros(0, np.int64)
    keys = draw(st.lists(st.integers(0, max(n_keys - 1, 0)), min_size=n, max_size=n))
    vals = draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n))
    if max_delay is None:
        order = draw(st.permutations(range(n))) if n else []
        order = np.asarray(order, dtype=np.int64)
    else:
        delays = draw(st.lists(st.integers(0, max_delay), min_size=n, max_size=n))
        arrival = ts + np.asarray(delays, dtype=np.int64)
        order = np.lexsort((np.arange(n), arrival))
    ts = np.asarray(ts, dtype=np.int64)[order] if n else ts
    key_arr = np.asarray(keys, dtype=np.int64)[order] if n else np.zeros(0, np.int64)
    val_arr = np.asarray(vals, dtype=np.int64)[order] if n else np.zeros(0, np.int64)
    if string_keys:
        key_col = pa.array([f"k{k}" for k in key_arr.tolist()], pa.string())
        schema = TABLE_SCHEMA_STR
    else:
        key_col = pa.array(key_arr, pa.int64())
        schema = TABLE_SCHEMA
    return pa.Table.from_arrays(
        [pa.array(ts, pa.int64()), key_col, pa.array(val_arr, pa.int64())], schema=schema
    )


@st.composite
def batch_splits(
    draw: st.DrawFn, table: pa.Table, max_batch: int = 16, allow_empty: bool = True
) -> list[pa.RecordBatch]:
    """``table`` cut, in order, into RecordBatches of ``1..max_batch`` rows, with up to two
    empty batches (``allow_empty``) before any of them and at the end.

    Concatenating the result gives ``table`` back. At least one batch is
    returned (an empty one for an empty table) so the schema is known. Every
    draw moves the cut forward (an empty batch is a draw of its own), so the
    smallest example is small: one-row batches, no empty ones.
    """
    n = table.num_rows
    combined = table.combine_chunks()
    empty = _slice_batch(combined, 0, 0)

    def empties() -> list[pa.RecordBatch]:
        return [empty] * max(0, draw(st.integers(0, 9)) - 7) if allow_empty else []

    out: list[pa.RecordBatch] = []
    i = 0
    while i < n:
        k = min(draw(st.integers(1, max_batch)), n - i)
        out += empties()
        out.append(_slice_batch(combined, i, k))
        i += k
    out += empties()
    return out or [empty]


def _slice_batch(table: pa.Table, start: int, length: int) -> pa.RecordBatch:
    t = table.slice(start, length)
    arrays = [t.column(i).combine_chunks() for i in range(t.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=table.schema)


@st.composite
def exact_punctuation_feed(
    draw: st.DrawFn, batches: Sequence[pa.RecordBatch], attr: str = "ts"
) -> list[pa.RecordBatch | Punctuation]:
    """Batches interleaved with valid, non-decreasing, sometimes lagging punctuation.

    Before the first batch and after each batch a punctuation may be
    inserted. Its value lies between the previous punctuation and the
    smallest ``attr`` of everything after it (the exact low-watermark,
    004 Eq. 4.1); often it *is* that bound, sometimes it lags, sometimes it
    repeats the previous one (a duplicate the engine must not forward).
    After the last batch the bound is ``max(attr) + 1``.
    """
    mins = [int(np.min(b.column(attr).to_numpy())) if b.num_rows else None for b in batches]
    all_max = max((int(np.max(b.column(attr).to_numpy())) for b in batches if b.num_rows),
                  default=0)
    suffix: list[int] = [0] * (len(batches) + 1)
    suffix[len(batches)] = all_max + 1
    for i in range(len(batches) - 1, -1, -1):
        m = mins[i]
        suffix[i] = suffix[i + 1] if m is None else min(m, suffix[i + 1])
    items: list[pa.RecordBatch | Punctuation] = []
    last: int | None = None
    for i in range(len(batches) + 1):
        # a punctuation at position i promises the batches i.. to have attr >= v
        if draw(st.booleans()):
            cap = suffix[i]
            lo = cap - 20 if last is None else last
            kind = draw(st.sampled_from(["exact", "lag", "repeat"]))
            if kind == "exact" or lo >= cap:
                v = cap
            elif kind == "repeat" and last is not None:
                v = last
            else:
                v = draw(st.integers(lo, cap))
            items.append(Punctuation(attr, v))
            last = v
        if i < len(batches):
            items.append(batches[i])
    return items


@st.composite
def disordered_feeds(draw: st.DrawFn, **table_kw: Any) -> tuple[pa.Table, list[Any]]:
    """``(table, feed items)``: :func:`disordered_tables` (``table_kw``) cut by
    :func:`batch_splits` and punctuated by :func:`exact_punctuation_feed`."""
    t = draw(disordered_tables(**table_kw))
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


@st.composite
def reordered_feeds(draw: st.DrawFn, t: pa.Table) -> list[list[Any]]:
    """Two feeds of ``t``'s rows, in ``t``'s order and in a drawn permutation of it, each cut
    by :func:`batch_splits` and punctuated by :func:`exact_punctuation_feed`."""
    perm = draw(st.permutations(range(t.num_rows)))
    t2 = t.take(pa.array(perm, pa.int64()))
    return [draw(exact_punctuation_feed(draw(batch_splits(table)))) for table in (t, t2)]


def band_disordered_pair(seed: int, n: int, span: int, keys: int, *, key: str = "key",
                         max_delay: int = 20) -> tuple[pa.Table, pa.Table]:
    """Two tables of ``n`` rows (``ts`` in ``[0, span)``, ``key`` in ``[0, keys)``, ``val``
    in ``[-50, 50)``, int64) in arrival order: a tuple arrives ``U[0, max_delay)`` after its
    ``ts``, so ``BoundedDelay(max_delay)`` makes none late. Seeded numpy, for joins."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        ts = rng.integers(0, span, n)
        arrival = np.argsort(ts + rng.integers(0, max_delay, n), kind="stable")
        out.append(pa.table({"ts": ts[arrival].astype(np.int64),
                             key: rng.integers(0, keys, n)[arrival].astype(np.int64),
                             "val": rng.integers(-50, 50, n)[arrival].astype(np.int64)}))
    return out[0], out[1]


@st.composite
def trailing_punctuation_feed(draw: st.DrawFn, batches: Sequence[pa.RecordBatch],
                              max_lag: int) -> list[Any]:
    """``batches`` with, after some, ``Punctuation("ts", hi - lag)`` (``hi`` the largest
    ``ts`` so far, ``0 <= lag <= max_lag``), strictly increasing (one not above the last is
    left out). It trails the newest tuple, not the disorder: later tuples may be late."""
    items: list[Any] = []
    hi: int | None = None
    last: int | None = None
    for b in batches:
        items.append(b)
        if b.num_rows:
            m = int(max(b.column("ts").to_pylist()))
            hi = m if hi is None else max(hi, m)
        if hi is not None and draw(st.booleans()):
            v = hi - draw(st.integers(0, max_lag))
            if last is None or v > last:
                items.append(Punctuation("ts", v))
                last = v
    return items


@st.composite
def late_scripts(draw: st.DrawFn, *, max_steps: int = 12, max_rows: int = 6,
                 n_keys: int = 4) -> list[Any]:
    """Up to ``max_steps`` batches (:data:`TABLE_SCHEMA`, up to ``max_rows`` rows, keys in
    ``[0, n_keys)``) and punctuations in any order: punctuation rises by 0..10 from -5,
    tuples land 8 below to 25 above it, so punctuation may make later tuples late."""
    steps: list[Any] = []
    p = -5
    for _ in range(draw(st.integers(1, max_steps))):
        if draw(st.booleans()):
            n = draw(st.integers(0, max_rows))
            ts = draw(st.lists(st.integers(p - 8, p + 25), min_size=n, max_size=n))
            keys = draw(st.lists(st.integers(0, n_keys - 1), min_size=n, max_size=n))
            vals = draw(st.lists(st.integers(-9, 9), min_size=n, max_size=n))
            steps.append(pa.record_batch({"ts": ts, "key": keys, "val": vals},
                                         schema=TABLE_SCHEMA))
        else:
            p += draw(st.integers(0, 10))
            steps.append(Punctuation("ts", p))
    return steps


def feed_batches(items: Iterable[Any]) -> list[pa.RecordBatch]:
    """The RecordBatches of a feed (punctuation records removed)."""
    return [x for x in items if isinstance(x, pa.RecordBatch)]


@dataclass
class ReferenceRun:
    """What :func:`reference_replay` computed, tuple by tuple.

    ``rows`` -- on-time tuples as dicts, in arrival order; ``late`` -- tuples
    below the punctuation seen before them; ``punctuations`` -- ``(rows_before,
    value)`` for every punctuation that advanced the low-watermark.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)
    punctuations: list[tuple[int, int]] = field(default_factory=list)


def reference_replay(items: Iterable[Any], attr: str = "ts",
                     allowed_lateness: int = 0) -> ReferenceRun:
    """Replay a feed one tuple at a time: the obviously-correct source semantics.

    A tuple with ``attr <`` the last punctuation ``- allowed_lateness`` is late
    (``late="update"`` still takes tuples up to ``allowed_lateness`` behind); a
    punctuation that does not raise the low-watermark is a duplicate and is not
    emitted; a punctuation that goes backwards raises ``ValueError``.
    """
    out = ReferenceRun()
    lwm = INT64_MIN
    for item in items:
        if isinstance(item, Punctuation):
            if item.value < lwm:
                raise ValueError(f"punctuation went backwards: {item.value} < {lwm}")
            if item.value > lwm:
                lwm = item.value
                out.punctuations.append((len(out.rows), lwm))
            continue
        for r in item.to_pylist():
            (out.late if r[attr] < lwm - allowed_lateness else out.rows).append(r)
    return out


def rows(table: pa.Table | pa.RecordBatch | Sequence[dict[str, Any]],
         columns: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """Rows as tuples (of ``columns``, default all), sorted: a canonical bag for comparison."""
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        recs = table.to_pylist()
    else:
        recs = list(table)
    if not recs:
        return []
    cols = list(columns) if columns is not None else list(recs[0].keys())
    return sorted((tuple(r[c] for c in cols) for r in recs), key=repr)


def same_bag(a: Any, b: Any, columns: Sequence[str] | None = None) -> bool:
    """True when ``a`` and ``b`` hold the same multiset of rows (order ignored)."""
    ra, rb = rows(a, columns), rows(b, columns)
    return Counter(ra) == Counter(rb)


def check_punctuation_respected(
    table: pa.Table, punctuations: Sequence[tuple[int, Any]], attr: str = "ts"
) -> None:
    """Assert the output obeys its own punctuation and that it never goes backwards.

    ``punctuations`` is ``Result.punctuations``: ``(rows_before, Punctuation)``.
    Every row emitted after ``P(attr, v)`` must have ``attr >= v``.
    """
    ts = table.column(attr).to_numpy() if table.num_rows else np.zeros(0, np.int64)
    if pa.types.is_timestamp(table.schema.field(attr).type) and table.num_rows:
        ts = table.column(attr).cast(pa.int64()).to_numpy()
    prev = INT64_MIN
    for rows_before, p in punctuations:
        if not isinstance(p, Punctuation) or p.attr != attr:
            continue
        assert p.value >= prev, f"punctuation went backwards: {p.value} after {prev}"
        assert p.value > prev, f"duplicate punctuation {p.value}"
        prev = p.value
        after = ts[rows_before:]
        assert not len(after) or int(after.min()) >= p.value, (
            f"a row with {attr}={int(after.min())} was emitted after P({attr}, {p.value})"
        )


def resumed_output(*parts: Any) -> Any:
    """The output of a run stopped and resumed (``Stream.run(resume_from=...)``) one or more
    times: the Results' rows, punctuations (row counts shifted) and late rows, in order.

    A checkpoint holds no output, so each resumed Result has only the rows after its
    cut; this joins them into one :class:`oop.Result` comparable to an uninterrupted run.
    """
    from oop.plan.result import Result

    tables = [r.table for r in parts]
    schema = next((t.schema for t in tables if t.num_rows), tables[0].schema)
    table = pa.concat_tables([t.cast(schema) for t in tables])
    puncts: list[tuple[int, Any]] = []
    late: dict[str, list[pa.Table]] = {}
    before = 0
    for r in parts:
        puncts.extend((before + n, p) for n, p in r.punctuations)
        before += r.table.num_rows
        for k, t in r.late.items():
            late.setdefault(k, []).append(t)
    last = parts[-1]
    return Result(table=table, punctuations=puncts, metrics=last.metrics,
                  late={k: pa.concat_tables(v) for k, v in late.items()},
                  wall_s=sum(r.wall_s for r in parts), checkpoint=last.checkpoint,
                  sources=last.sources)


def stop_and_resume(plan: Callable[[], Any], stop_after_rounds: int) -> tuple[Any, Any]:
    """Run ``plan()`` (a fresh ``oop.Stream`` each call) to the end, and again stopped after
    ``stop_after_rounds`` rounds and resumed from its checkpoint: ``(uninterrupted Result,
    stopped-and-resumed Result joined by :func:`resumed_output`)``; the second is None when
    the run ended before the stop (no checkpoint). Three runs of the plan."""
    full = plan().run()
    first = plan().run(stop_after_rounds=stop_after_rounds)
    if first.checkpoint is None:
        return full, None
    return full, resumed_output(first, plan().run(resume_from=first.checkpoint))


# ---- the operator contract ----------------------------------------------------------
def check_invariants(op: Any) -> None:
    """Assert ``op``'s internal state invariants: the public name of ``Operator._check``.

    Every stateful operator overrides ``_check`` (store layouts, frontiers,
    counters agree with each other); stateless ones inherit a no-op. Raises
    ``AssertionError`` on a broken invariant. Cost: O(state).
    """
    op._check()


def comparable_elements(out: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Output elements as comparable tuples, in order: one per row (``("row", *values)``),
    one per punctuation (linear ``"p"``, joint ``"j"``, group ``"g"``). O(rows)."""
    res: list[tuple[Any, ...]] = []
    for e in out:
        if isinstance(e, pa.RecordBatch):
            res.extend(("row", *r.values()) for r in e.to_pylist())
        elif isinstance(e, Punctuation):
            res.append(("p", e.attr, e.value))
        elif isinstance(e, JointPunctuation):
            res.append(("j", e.bounds))
        elif isinstance(e, GroupPunctuation):
            res.append(("g", e.attr, repr(e.keys.to_pylist()), np.asarray(e.values).tolist()))
    return res


def drive_operator(op: Any, inputs: Sequence[Any], feed: Iterable[tuple[int, Any]], *,
                   check: bool = True, end: bool = True) -> list[Any]:
    """Push ``feed`` -- ``(port, RecordBatch | punctuation)`` in arrival order -- through
    ``op`` opened on ``inputs`` (StreamInfos) and return every element it emitted, in order.

    Keeps ``op.metrics``' common counters (tuples/batches/punctuations in and
    out, state) as the executor does, so invariants that relate them hold.
    With ``check`` :func:`check_invariants` runs after every step. With
    ``end`` every port is ended (port order) after the feed, so the operator
    flushes; the end-of-stream marker itself is not returned. ``inputs`` may
    be empty when ``op`` is already opened (a restored operator).
    """
    if inputs:
        op.open(list(inputs))
    m = op.metrics
    out: list[Any] = []

    def emitted(els: list[Any]) -> None:
        for e in els:
            if isinstance(e, pa.RecordBatch) and e.num_rows:
                m.batches_out += 1
                m.tuples_out += e.num_rows
                out.append(e)
            elif is_punctuation(e):
                m.punctuations_out += 1
                out.append(e)
        m.record_state(op.state_size())
        if check:
            check_invariants(op)

    for port, el in feed:
        if isinstance(el, pa.RecordBatch):
            m.batches_in += 1
            m.tuples_in += el.num_rows
            emitted(op.on_batch(el, port))
        else:
            m.punctuations_in += 1
            emitted(op.on_punctuation(el, port))
    if end:
        for port in range(len(op.inputs)):
            emitted(op.on_end(port))
    return out


def check_stream_contract(elements: Sequence[Any], name: str = "output") -> None:
    """Assert that a stream of emitted elements obeys its own punctuation (DESIGN §3).

    * linear punctuation ``P(a, v)`` is non-decreasing per attribute ``a``;
    * no row emitted after ``P(a, v)`` has ``a < v`` (the punctuation covered it);
    * no row emitted after a joint punctuation has every ``a_i < v_i``;
    * no row emitted after a group punctuation ``(keys, values)`` for its group
      has ``a < value``.

    ``elements`` is what an operator returned (batches and punctuations, in
    order; see :func:`drive_operator`). Null attribute values are covered by
    no punctuation. Raises ``AssertionError`` naming ``name``, the row and the
    punctuation. Cost: O(rows x distinct punctuations), vectorized per batch.
    """
    from oop.stream.elements import GroupPunctuation, JointPunctuation

    linear: dict[str, int] = {}
    joints: list[tuple[tuple[str, int], ...]] = []
    groups: dict[tuple[str, tuple[str, ...], tuple[Any, ...]], int] = {}
    for e in elements:
        if isinstance(e, Punctuation):
            prev = linear.get(e.attr, INT64_MIN)
            assert e.value >= prev, (
                f"{name}: punctuation on {e.attr!r} went backwards: {e.value} after {prev}")
            linear[e.attr] = e.value
        elif isinstance(e, JointPunctuation):
            joints.append(e.bounds)
        elif isinstance(e, GroupPunctuation):
            cols = tuple(e.keys.schema.names)
            for key, v in zip(e.keys.to_pylist(), np.asarray(e.values).tolist()):
                k = (e.attr, cols, tuple(key[c] for c in cols))
                groups[k] = max(groups.get(k, INT64_MIN), int(v))
        elif isinstance(e, pa.RecordBatch) and e.num_rows:
            _check_batch_covered(e, linear, joints, groups, name)


def _int_column(batch: pa.RecordBatch, attr: str) -> np.ndarray:
    """``attr`` as int64 with nulls at INT64_MAX (covered by nothing)."""
    col = batch.column(attr)
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type) \
            or pa.types.is_duration(col.type):
        col = col.cast(pa.int64())
    return np.asarray(col.fill_null(np.iinfo(np.int64).max).to_numpy(zero_copy_only=False),
                      dtype=np.int64)


def _check_batch_covered(batch: pa.RecordBatch, linear: dict[str, int],
                         joints: list[tuple[tuple[str, int], ...]],
                         groups: dict[tuple[str, tuple[str, ...], tuple[Any, ...]], int],
                         name: str) -> None:
    names = batch.schema.names
    for attr, v in linear.items():
        if attr in names:
            t = _int_column(batch, attr)
            assert int(t.min()) >= v, (
                f"{name}: a row with {attr}={int(t.min())} was emitted after P({attr}, {v})")
    for bounds in joints:
        if all(a in names for a, _ in bounds):
            hit = np.ones(batch.num_rows, bool)
            for a, v in bounds:
                hit &= _int_column(batch, a) < v
            assert not hit.any(), (
                f"{name}: row {batch.slice(int(np.argmax(hit)), 1).to_pylist()[0]} was "
                f"emitted after the joint punctuation {bounds} that covers it")
    for (attr, cols, key), v in groups.items():
        if attr not in names or not all(c in names for c in cols):
            continue
        for r in batch.to_pylist():  # group punctuation is rare; a slow check is fine here
            if tuple(r[c] for c in cols) == key and r[attr] is not None:
                assert r[attr] >= v, (
                    f"{name}: row {r} was emitted after the group punctuation "
                    f"{attr}>={v} of its group {key}")
