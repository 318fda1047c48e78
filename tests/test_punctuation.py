"""Punctuation generators: each one's guarantee, kernel vs tuple-at-a-time reference, specs.

Every generator is checked against the assumption it documents: on a feed that
satisfies it, no tuple is ever late and every emitted punctuation is true
(no later tuple is below it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop.punctuation import (
    Adaptive,
    BoundedDelay,
    BoundedTuples,
    External,
    Granular,
    Idle,
    Ordered,
    arrival_delays,
    floor_to_grid,
    parse_punctuation,
)
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import TimeSpec
from oop.testing import batch_splits, check_punctuation_respected, disordered_tables, same_bag

SPEC = TimeSpec("ts", "ms")


def _run(table: pa.Table, gen, batch_size: int = 7, late: str = "side"):
    return oop.from_arrow(table, time="ts", punctuation=gen, batch_size=batch_size,
                          late=late, name="src").run()


def _punct_true(res) -> None:
    """Every punctuation is true of the rest of the output, and nothing was late."""
    check_punctuation_respected(res.table, res.punctuations)


# ---- bounded delay in time -----------------------------------------------------------------
@given(st.data(), st.integers(0, 8))
def test_bounded_delay_exact_when_assumption_holds(data, d):
    t = data.draw(disordered_tables(max_delay=d))
    res = _run(t, BoundedDelay(d), batch_size=data.draw(st.integers(1, 9)))
    assert res.late_total == 0
    assert same_bag(res.table, t)
    _punct_true(res)


@given(st.data())
def test_bounded_delay_too_small_routes_late_never_loses(data):
    t = data.draw(disordered_tables(max_delay=None, min_rows=1))
    res = _run(t, BoundedDelay(1), late="side")
    late = res.late.get("src", t.schema.empty_table())
    assert res.table.num_rows + late.num_rows == t.num_rows
    assert same_bag(pa.concat_tables([res.table, late]), t)
    _punct_true(res)


# ---- bounded delay in tuples (BSort) ---------------------------------------------------------
@st.composite
def tuple_bounded_tables(draw, n):
    """Sorted times, locally shuffled inside consecutive blocks of <= n+1 rows."""
    k = draw(st.integers(0, 60))
    ts = sorted(draw(st.lists(st.integers(0, 200), min_size=k, max_size=k)))
    out, i = [], 0
    while i < k:
        size = draw(st.integers(1, n + 1))
        block = ts[i:i + size]
        out.extend(draw(st.permutations(block)))
        i += size
    return pa.table({"ts": pa.array(out, pa.int64()), "val": pa.array(range(k), pa.int64())})


def bsort_reference(batches: list[np.ndarray], n: int) -> list[int | None]:
    """After each batch: max over every tuple so far except the last n (tuple by tuple)."""
    seen: list[int] = []
    out = []
    for b in batches:
        seen.extend(int(x) for x in b)
        prefix = seen[: max(len(seen) - n, 0)]
        out.append(max(prefix) if prefix and len(b) else None)
    return out


@given(st.data(), st.integers(0, 5))
def test_bounded_tuples_kernel_equals_reference(data, n):
    batches = data.draw(st.lists(st.lists(st.integers(-50, 50), max_size=8), max_size=10))
    arrays = [np.asarray(b, dtype=np.int64) for b in batches]
    g = BoundedTuples(n).build(SPEC)
    got = [g.on_batch(None, a) for a in arrays]
    g._check()
    assert got == bsort_reference(arrays, n)


@given(st.data(), st.integers(0, 4))
def test_bounded_tuples_exact_when_assumption_holds(data, n):
    t = data.draw(tuple_bounded_tables(n))
    res = _run(t, BoundedTuples(n), batch_size=data.draw(st.integers(1, 9)), late="raise")
    assert res.table.num_rows == t.num_rows
    _punct_true(res)


# ---- external ----------------------------------------------------------------------------
def test_external_feed_records_and_marker_columns():
    b1 = pa.record_batch({"ts": [5, 3, 9], "eob": [False, True, False]})
    b2 = pa.record_batch({"ts": [7, 4, 12], "eob": [False, False, True]})
    res = oop.from_batches([b1, b2], time="ts", punctuation=External("eob"), late="side",
                           name="blocks").run()
    # block 1 ends at row 1 (max so far 5): P5; the 4 in batch 2 is late; block 2 ends: P12
    assert [p.value for _, p in res.punctuations] == [5, 12]
    assert res.late["blocks"].column("ts").to_pylist() == [4]
    # integer marker column
    b = pa.record_batch({"ts": [10, 11], "upto": pa.array([None, 8], pa.int64())})
    res = oop.from_batches([b], time="ts", punctuation=External("upto")).run()
    assert [p.value for _, p in res.punctuations] == [8]
    # feed-only: exactly the feed's records, duplicates removed
    items = [pa.record_batch({"ts": [3]}), oop.Punctuation("ts", 2), oop.Punctuation("ts", 2),
             pa.record_batch({"ts": [4]}), oop.Punctuation("ts", 4)]
    res = oop.from_batches(items, time="ts", punctuation=External()).run()
    assert [(r, p.value) for r, p in res.punctuations] == [(1, 2), (2, 4)]


def test_external_marker_errors():
    b = pa.record_batch({"ts": [1], "m": ["x"]})
    with pytest.raises(oop.TimeTypeError, match="marker column 'm'"):
        oop.from_batches([b], time="ts", punctuation=External("m")).run()
    with pytest.raises(oop.UnknownColumnError, match="no marker column 'zz'"):
        oop.from_batches([b], time="ts", punctuation=External("zz")).run()


# ---- granularity ---------------------------------------------------------------------------
@given(st.data(), st.integers(1, 10), st.integers(-5, 5))
def test_granular_grid_no_duplicates_never_above_inner(data, every, origin):
    batches = data.draw(st.lists(st.lists(st.integers(-100, 100), min_size=1, max_size=5),
                                 max_size=12))
    inner = BoundedDelay(2).build(SPEC)
    g = Granular(BoundedDelay(2), every, origin).build(SPEC)
    emitted = []
    last_inner = INT64_MIN
    for b in batches:
        a = np.asarray(b, dtype=np.int64)
        vi = inner.on_batch(None, a)
        last_inner = max(last_inner, vi)
        v = g.on_batch(None, a)
        if v is not None:
            assert (v - origin) % every == 0
            assert v <= last_inner
            assert v == floor_to_grid(last_inner, every, origin)
            emitted.append(v)
    assert emitted == sorted(set(emitted))


# ---- idle / lull -----------------------------------------------------------------------------
def _lull_feed(n_busy: int):
    busy = [pa.record_batch({"ts": [10 * i, 10 * i + 5]}) for i in range(n_busy)]
    # the quiet source sends one batch, then only empty batches (a lull)
    quiet = [pa.record_batch({"ts": [0]})] + [pa.record_batch({"ts": pa.array([], pa.int64())})] * (n_busy - 1)
    return busy, quiet


def test_quiet_input_stalls_meld_punctuation_without_idle_rule():
    busy, quiet = _lull_feed(20)
    a = oop.from_batches(busy, time="ts", punctuation=BoundedDelay(0), name="busy")
    b = oop.from_batches(quiet, time="ts", punctuation=BoundedDelay(0), name="quiet")
    res = a.meld(b).run()
    # until the quiet source ends, the union's punctuation is stuck at its 0
    before_end = [p.value for r, p in res.punctuations if r < 40]
    assert max(before_end) == 0
    assert res.table.num_rows == 41  # ... but no tuple is held


def test_idle_rule_keeps_meld_punctuation_moving():
    """Timeline: busy 0..195 in steps; quiet sends ts=0 then nothing; slack 20.

    busy : [0 5] [10 15] [20 25] ... [190 195]
    quiet: [0]   []      []      ... []           (lull)
    meld : P0 ... then P(clock - 20) each round -> reaches 175 before quiet ends
    """
    busy, quiet = _lull_feed(20)
    a = oop.from_batches(busy, time="ts", punctuation=BoundedDelay(0), name="busy")
    b = oop.from_batches(quiet, time="ts", punctuation=Idle(BoundedDelay(0), slack=20), name="quiet")
    res = a.meld(b).run()
    vals = [p.value for _, p in res.punctuations]
    assert vals == sorted(set(vals))
    assert 195 - 20 in vals  # reached in the lull, before the quiet source ended
    assert res.metrics["quiet"].gauges["idle_advances"] > 0
    _punct_true(res)


def test_idle_late_tuple_after_lull_follows_policy():
    quiet = [pa.record_batch({"ts": [0]}), pa.record_batch({"ts": pa.array([], pa.int64())}),
             pa.record_batch({"ts": [1]})]
    busy = [pa.record_batch({"ts": [100]}), pa.record_batch({"ts": [110]}),
            pa.record_batch({"ts": [120]})]
    a = oop.from_batches(busy, time="ts", punctuation=BoundedDelay(0), name="busy")
    b = oop.from_batches(quiet, time="ts", punctuation=Idle(Ordered(), 10), late="side",
                         name="quiet")
    res = a.meld(b).run()
    assert res.late["quiet"].column("ts").to_pylist() == [1]
    assert res.tuples_in == res.table.num_rows + res.late_total


# ---- adaptive --------------------------------------------------------------------------------
def test_arrival_delays_matches_tuple_reference():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 1000, 500)
    d, hwm = arrival_delays(t, INT64_MIN)
    ref, m = [], None
    for x in t.tolist():
        ref.append(0 if m is None else max(m - x, 0))
        m = x if m is None else max(m, x)
    assert d.tolist() == ref and hwm == m


def test_adaptive_estimate_tracks_target_late_fraction():
    rng = np.random.default_rng(7)
    n = 200_000
    ts = np.arange(n, dtype=np.int64) * 10
    arrival = ts + rng.exponential(200.0, n).astype(np.int64)
    order = np.argsort(arrival, kind="stable")
    table = pa.table({"ts": ts[order]})
    res = oop.from_arrow(table, time="ts", punctuation=Adaptive(0.01), batch_size=1000,
                         name="src").run()
    frac = res.late_total / n
    est = res.metrics["src"].gauges["delay_estimate"]
    assert 0 < est
    assert frac <= 0.03, frac          # about the target, never far above it
    # a tighter target needs a larger bound and makes fewer tuples late
    res2 = oop.from_arrow(table, time="ts", punctuation=Adaptive(0.001), batch_size=1000,
                          name="src").run()
    assert res2.metrics["src"].gauges["delay_estimate"] > est
    assert res2.late_total < res.late_total
    assert res.tuples_in == res.table.num_rows + res.late_total


@given(st.data())
def test_adaptive_zero_target_on_bounded_feed_loses_nothing(data):
    t = data.draw(disordered_tables(max_delay=6))
    res = _run(t, Adaptive(0.0), late="side")
    late = res.late.get("src", t.schema.empty_table())
    assert same_bag(pa.concat_tables([res.table, late]), t)
    _punct_true(res)


# ---- spec parser -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec,expected", [
    ("ordered", Ordered()),
    ("bounded:5s", BoundedDelay("5s")),
    ("bounded:250", BoundedDelay(250)),
    ("tuples:64", BoundedTuples(64)),
    ("adaptive:0.05", Adaptive(0.05)),
    ("external", External()),
    ("external:eob", External("eob")),
    ("bounded:1s+idle:10s", Idle(BoundedDelay("1s"), "10s")),
    ("ordered+every:5s", Granular(Ordered(), "5s")),
])
def test_parse_punctuation(spec, expected):
    assert parse_punctuation(spec) == expected


@pytest.mark.parametrize("spec", ["", "bounded", "bounded:5 parsecs", "tuples:x", "adaptive:abc",
                                  "nonsense", "ordered:3", "ordered+foo:1", "adaptive:1.5"])
def test_parse_punctuation_errors_say_what_is_expected(spec):
    with pytest.raises(oop.ConfigError, match="punctuation spec|target_late"):
        parse_punctuation(spec)


@pytest.mark.parametrize("make", [
    lambda: BoundedTuples(-1), lambda: Adaptive(1.0), lambda: Adaptive(0.1, window=0),
    lambda: Idle("x", 1), lambda: Granular(Ordered(), 0).build(SPEC),
    lambda: BoundedDelay(-5).build(SPEC), lambda: External(""),
])
def test_generator_configs_validate(make):
    with pytest.raises(oop.ConfigError):
        make()


def test_generators_snapshot_restore_roundtrip():
    for cfg in [BoundedTuples(3), Adaptive(0.1, window=16), Idle(BoundedDelay(2), 5),
                Granular(BoundedDelay(1), 4), External("m")]:
        g = cfg.build(SPEC)
        g2 = cfg.build(SPEC)
        b = pa.record_batch({"ts": [5, 1, 9], "m": pa.array([None, 3, None], pa.int64())})
        g.on_batch(b, np.array([5, 1, 9]))
        g2.restore(g.snapshot())
        b2 = pa.record_batch({"ts": [12, 2], "m": pa.array([None, None], pa.int64())})
        assert g.on_batch(b2, np.array([12, 2])) == g2.on_batch(b2, np.array([12, 2]))


@given(st.lists(st.lists(st.integers(-100, 100), min_size=1, max_size=6), max_size=10),
       st.sampled_from([Ordered(), BoundedDelay(3), Idle(BoundedDelay(2), 4),
                        Granular(Ordered(), 5), BoundedTuples(2), Adaptive(0.2, window=8)]))
def test_on_batch_stats_equals_on_batch(batches, cfg):
    """The source's fast path (min/max already known) gives the same bounds as on_batch."""
    a, b = cfg.build(SPEC), cfg.build(SPEC)
    for x in batches:
        t = np.asarray(x, dtype=np.int64)
        assert a.on_batch(None, t) == b.on_batch_stats(None, t, int(t.min()), int(t.max()))


# ---- what a generator is given ------------------------------------------------------
class _Seen:
    """A bounded-delay generator that records what each on_batch call was given."""

    def __init__(self, reads_rows: bool) -> None:
        self.calls: list[tuple[int | None, int]] = []  # (rows of the batch given, times)
        self.reads_rows = reads_rows


def _recording(seen: _Seen) -> oop.punctuation.GeneratorConfig:
    from oop.punctuation.base import GeneratorConfig, PunctuationGenerator

    class Logic(PunctuationGenerator):
        reads_rows = seen.reads_rows

        def on_batch(self, batch: pa.RecordBatch | None, times: np.ndarray) -> int | None:
            seen.calls.append((None if batch is None else batch.num_rows, len(times)))
            return int(times.max()) - 50 if len(times) else None

    class Config(GeneratorConfig):
        def build(self, time: TimeSpec) -> PunctuationGenerator:
            return Logic()

    return Config()


@pytest.mark.parametrize("reads_rows", [False, True])
def test_the_batch_is_given_only_to_a_generator_that_reads_rows(reads_rows: bool) -> None:
    """A segment of several input batches is concatenated only for a generator that reads
    its columns (``reads_rows``); the others get None and every time, the same results."""
    ts = np.arange(3000, dtype=np.int64)
    t = pa.table({"ts": ts, "v": np.ones(3000)})
    seen = _Seen(reads_rows)
    from oop.punctuation.cadence import Cadence

    src = oop.from_arrow(t, time="ts", punctuation=Cadence(_recording(seen), 700),
                         batch_size=250)  # segments of 700 rows over 3-4 batches
    got = src.window(oop.Tumbling(100), [oop.agg.count()]).run().table
    # every time seen once, but those of the last segment: end-of-stream punctuates them
    assert 3000 - 700 <= sum(n for _, n in seen.calls) <= 3000
    rows = [r for r, _ in seen.calls]
    assert rows == ([n for _, n in seen.calls] if reads_rows else [None] * len(rows))
    assert any(n > 250 for _, n in seen.calls)  # some segment spans several batches
    assert got.column("count").to_pylist() == [100] * 30


@pytest.mark.parametrize("reads_times", [False, True])
def test_times_are_concatenated_only_for_a_generator_that_reads_them(reads_times: bool) -> None:
    """A generator whose ``on_batch_stats`` reads only the bounds (``reads_times`` False)
    gets an empty ``times`` for a segment of several batches, with the segment's exact
    min and max; one that reads them gets every time. Same punctuation, same results."""
    from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
    from oop.punctuation.cadence import Cadence

    rng = np.random.default_rng(7)
    ts = np.sort(rng.integers(0, 3000, 3000)) + rng.integers(0, 40, 3000)  # disordered
    seen: list[tuple[int, int, int, int]] = []  # (times given, lo, hi, bound)

    class Logic(PunctuationGenerator):
        def __init__(self) -> None:
            self.reads_times = reads_times
            self.hwm = -1

        def on_batch(self, batch: pa.RecordBatch | None, times: np.ndarray) -> int | None:
            raise AssertionError("a segment without late rows goes to on_batch_stats")

        def on_batch_stats(self, batch: pa.RecordBatch | None, times: np.ndarray,
                           lo: int, hi: int) -> int | None:
            if reads_times:
                assert (int(times.min()), int(times.max())) == (lo, hi)
            self.hwm = max(self.hwm, hi)
            seen.append((len(times), lo, hi, self.hwm - 100))
            return self.hwm - 100

    class Config(GeneratorConfig):
        def build(self, time: TimeSpec) -> PunctuationGenerator:
            return Logic()

    t = pa.table({"ts": ts.astype(np.int64), "v": np.ones(3000)})
    src = oop.from_arrow(t, time="ts", punctuation=Cadence(Config(), 700), batch_size=250)
    got = src.window(oop.Tumbling(100), [oop.agg.count()]).run().table
    segments = [ts[i:i + 700] for i in range(0, 2800, 700)]  # the closed segments
    assert [(lo, hi) for _, lo, hi, _ in seen] == [(s.min(), s.max()) for s in segments]
    assert [n for n, *_ in seen] == ([700] * 4 if reads_times else [0] * 4)
    assert sum(got.column("count").to_pylist()) == 3000  # every tuple in one window


def test_wrappers_carry_what_the_inner_generator_reads() -> None:
    """Idle, wall-clock idle and granular wrappers read what their inner generator reads."""
    from oop.punctuation import parse_punctuation

    for spec, times in [("bounded:5", False), ("ordered", False), ("adaptive", True)]:
        for wrapped in (spec, f"{spec}+idle:10", f"{spec}+every:10", f"{spec}+cadence:100rows"):
            g = parse_punctuation(wrapped).build(SPEC)
            assert g.reads_times is times, wrapped


@pytest.mark.parametrize("late_row", [False, True])
def test_a_batch_cut_by_the_cadence_is_forwarded_whole(late_row: bool) -> None:
    """Input batches of 250 rows, a punctuation every 700 rows: a batch with a cadence
    point inside goes on whole, its punctuation after it, when none of its rows is late;
    a batch with a late row is cut at the point. Same punctuations, same windows as with
    batches aligned to the cadence, and every tuple counted."""
    from oop.punctuation.cadence import Cadence

    ts = np.arange(3000, dtype=np.int64) + np.tile([0, 30, 10, 20], 750)  # disordered
    if late_row:
        ts[1300] = 100  # behind the punctuation of rows 0-699 (~670): late, in a cut batch
    t = pa.table({"ts": ts, "v": np.ones(3000)})

    def run(batch_size: int) -> Any:
        return (oop.from_arrow(t, time="ts", punctuation=Cadence(oop.BoundedDelay(30), 700),
                               batch_size=batch_size, name="src")
                .window(oop.Tumbling(100), [oop.agg.count()]).run())

    cut, aligned = run(250), run(700)
    src = cut.metrics["src"]
    assert src.punctuations_out == aligned.metrics["src"].punctuations_out == 4
    # 12 batches, 4 with a cadence point inside (cut in two before: 16)
    assert src.batches_out == (13 if late_row else 12)
    assert cut.table.equals(aligned.table)
    assert sum(cut.table.column("count").to_pylist()) + sum(src.late.values()) == 3000
    assert sum(src.late.values()) == (1 if late_row else 0)
