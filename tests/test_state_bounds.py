"""Hostile feeds cannot exhaust memory: state stays proportional to what windows hold.

* a poison-pill row (a bad clock: one row a year / a century ahead of the rest)
  does not make the dense window state span every window up to it: the
  operator moves to hash cells before allocating, emission skips the empty
  span, and the results equal the from-scratch oracle;
* a state limit (``oop.limits``: the plan's budget, an operator's
  ``max_state_bytes``) raises StateLimitError *before* allocating;
* ``default_state_limit`` takes the smallest of RAM and the cgroup limits;
* keys whose windows all closed are forgotten (key dictionary compaction).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import oop
import oop.limits as L
from oop.errors import StateLimitError
from oop.limits import StateBudget, default_state_limit, state_budget
from oop.stream.elements import Punctuation
from oop.window import Sliding, Tumbling, agg
from oop.window.reference import window_oracle

from test_window import assert_same_rows

YEAR = 365 * 86_400_000  # ms
SUMS = [agg.count(), agg.sum("val"), agg.mean("val")]
ALL = SUMS + [agg.min("val"), agg.max("val"), agg.first("val"), agg.last("val")]


def _pill_feed(ahead: int, n: int = 5000, keys: int = 20, seed: int = 0):
    """``n`` rows over ~80 min and ``keys`` keys, row ``n/2`` (``ahead < 0``: row 100) stamped
    ``ahead`` ms after its neighbour; batches of 500 with punctuations that trail the normal rows (never the pill)."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 5_000_000, n)).astype(np.int64)
    at = n // 2 if ahead > 0 else 100  # a row behind: before the first punctuation (not late)
    ts[at] = ts[at - 1] + ahead
    t = pa.table({"ts": ts, "key": rng.integers(0, keys, n).astype(np.int64),
                  "val": rng.random(n)})
    items: list = []
    for b in t.to_batches(max_chunksize=500):
        items.append(b)
        normal = b.column("ts").to_numpy()
        normal = normal[normal < ts[at]] if ahead > 0 else normal
        if normal.size:
            items.append(Punctuation("ts", int(normal.max()) - 20_000))
    return t, items


def _run(items, schema, kind, aggs, **kw):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    return s.window(kind, aggs, by=["key"], **kw).run()


@pytest.mark.parametrize("ahead", [YEAR, 100 * YEAR, -YEAR], ids=["1y", "100y", "-1y"])
@pytest.mark.parametrize("kind,method,aggs", [
    (Tumbling(10_000), "wid", ALL),
    (Sliding(10_000, 1_000), "wid", ALL),
    (Sliding(10_000, 1_000), "paned", SUMS),
], ids=["tumbling", "sliding-wid", "sliding-paned"])
def test_poison_pill_keeps_state_bounded_and_results_exact(ahead, kind, method, aggs,
                                                          monkeypatch):
    from oop.window import WindowAggregate

    t, items = _pill_feed(ahead)
    widest = [0]
    emit = WindowAggregate._emit_windows

    def spy(self, wids, *a, **k):  # emission must skip the empty span, not list its windows
        widest[0] = max(widest[0], len(wids))
        return emit(self, wids, *a, **k)
    monkeypatch.setattr(WindowAggregate, "_emit_windows", spy)
    with state_budget(256 << 20):  # a dense span would need GiBs: this fails loudly if taken
        res = _run(items, t.schema, kind, aggs, method=method)
    assert widest[0] < 10_000, widest
    m = res.metrics["window"]
    # 20 keys x a few open windows; the dense span would be 2^22+ rows x 64 codes x lanes x 8 B
    assert m.peak_state_bytes < 16 << 20, m.peak_state_bytes
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


def test_poison_pill_switch_is_reported_and_the_ring_comes_back():
    t, items = _pill_feed(YEAR)
    from oop.window import WindowAggregate

    op = WindowAggregate(Tumbling(10_000), SUMS, by=["key"], method="wid")
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    s.via(op).run()
    assert op.plan_info["sparse_span_units"] > 3_000_000
    assert op.plan_info["layout_switches"] >= 1


def test_state_limit_raises_before_allocating():
    """A tiny budget: StateLimitError naming the operator, sizes, limit and what to do, and the
    ring keeps its old size (nothing was allocated)."""
    from oop.window import WindowAggregate
    from oop.operators.base import StreamInfo

    schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.float64())])
    with state_budget(1 << 20) as b:
        op = WindowAggregate(Tumbling(10), SUMS, by=["key"], method="wid", name="win")
        op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    small = pa.record_batch([pa.array(np.arange(100)), pa.array(np.arange(100) % 10),
                             pa.array(np.ones(100))], schema=schema)
    op.on_batch(small)
    before = op.ring.nbytes()
    assert 0 < b.used <= 1 << 20
    n = 100_000  # 100k keys x 16 windows x 4 lanes x 8 B: ~50 MiB of lanes
    big = pa.record_batch([pa.array(np.arange(n) // 6250 + 100), pa.array(np.arange(n)),
                           pa.array(np.ones(n))], schema=schema)
    with pytest.raises(StateLimitError, match=r"^win: state would grow to [\d.]+ MiB \(dense ring "
                                              r"of .* over the --max-state limit of 1\.0 MiB; "
                                              r"raise --max-state .*--max-ahead.*fewer keys$"):
        op.on_batch(big)
    assert op.ring.nbytes() == before


def test_operator_max_state_bytes():
    t, items = _pill_feed(0, n=2000, keys=2000)
    with pytest.raises(StateLimitError, match=r"window: .*over its max_state_bytes limit of "
                                              r"64\.0 KiB"):
        from oop.window import WindowAggregate

        op = WindowAggregate(Tumbling(10_000), SUMS, by=["key"], method="wid", layout="dense",
                             max_state_bytes=64 << 10)
        oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                         schema=t.schema).via(op).run()


@pytest.mark.parametrize("layout", ["dense", "hash"])
@pytest.mark.parametrize("method", ["wid", "paned"])
def test_a_dropped_window_operator_goes_at_once(method, layout):
    """The ring's growth check holds its operator weakly (``oop.limits.weak_guard``): no
    operator -> ring -> operator cycle, so a dropped operator and its lanes are freed by
    reference counting, not at the cyclic collector's next pass (a process running query after
    query kept each one's state until then; the next one's state was fresh memory)."""
    import gc
    import weakref

    from oop.window import WindowAggregate

    t, items = _pill_feed(0, n=2000, keys=50)
    op = WindowAggregate(Sliding(10_000, 1_000), SUMS, by=["key"], method=method, layout=layout)
    res = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                           schema=t.schema).via(op).run()
    assert res.table.num_rows > 0 and op.ring.guard is not None
    refs = [weakref.ref(op), weakref.ref(op.ring)]
    gc.collect()
    gc.disable()
    try:
        del op, res
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def test_budget_is_shared_by_the_operators_of_a_plan():
    b = StateBudget(1000)
    b.grow("a", "op a", 600)
    with pytest.raises(StateLimitError, match=r"op b: state would grow to 500 B \(\+ 600 B held "
                                              r"by other operators\)"):
        b.grow("b", "op b", 500)
    b.report("a", 100)  # a purged
    b.grow("b", "op b", 500)
    assert b.used == 600


def test_adaptive_dense_ring_refuses_a_sparse_span():
    t, items = _pill_feed(YEAR)
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    with pytest.raises(StateLimitError, match=r"adaptwid: held windows .* would make AdaptWID's "
                                              r"dense ring .*--max-ahead"):
        s.adaptive_window(Tumbling(10_000), SUMS[:2], by=["key"], thresholds="eager").run()


def _fake_fs(monkeypatch, files, phys=64 << 30, rlimit=None):
    import resource

    monkeypatch.setattr(L, "_read", lambda p: files.get(p))
    monkeypatch.setattr(L, "_physical_memory", lambda: phys)
    inf = resource.RLIM_INFINITY
    monkeypatch.setattr(resource, "getrlimit",
                        lambda what: (rlimit if rlimit is not None else inf, inf))


def test_default_state_limit_reads_cgroup_v2(monkeypatch):
    _fake_fs(monkeypatch, {"/proc/self/cgroup": "0::/user.slice/job\n",
                           "/sys/fs/cgroup/user.slice/job/memory.max": "4294967296\n",
                           "/sys/fs/cgroup/memory.max": "max\n"})
    assert default_state_limit() == 2 << 30


def test_default_state_limit_reads_cgroup_v1(monkeypatch):
    _fake_fs(monkeypatch, {"/proc/self/cgroup": "5:memory:/docker/abc\n3:cpu:/x\n",
                           "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824"})
    assert default_state_limit() == 512 << 20


def test_default_state_limit_without_limits_is_half_the_ram(monkeypatch):
    _fake_fs(monkeypatch, {"/sys/fs/cgroup/memory.max": "max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes": str(1 << 63)})
    assert default_state_limit() == 32 << 30


def test_default_state_limit_takes_rlimit_as(monkeypatch):
    _fake_fs(monkeypatch, {"/sys/fs/cgroup/memory.max": str(8 << 30)}, rlimit=6 << 30)
    assert default_state_limit() == 3 << 30


# ---- never-repeating keys: the key dictionary forgets keys whose windows all closed ------------

def _session_feed(n: int, strings: bool, every: int = 2000, lag: int = 1000):
    """``n`` rows, 5 ms apart, each with a key never seen before; a punctuation ``lag`` ms
    behind the last row after every ``every`` rows."""
    ts = np.arange(n, dtype=np.int64) * 5
    keys = (pa.array([f"session-{i:09d}" for i in range(n)]) if strings
            else pa.array(np.arange(n, dtype=np.int64) * 7 + 3))
    t = pa.table({"ts": ts, "key": keys, "val": np.random.default_rng(n).random(n)})
    items: list = []
    for b in t.to_batches(max_chunksize=every):
        items.append(b)
        items.append(Punctuation("ts", int(b.column("ts")[-1].as_py()) - lag))
    return t, items


def _oracle_in_chunks(t: pa.Table, kind, aggs, chunk: int = 20_000) -> pa.Table:
    """window_oracle is O(windows x rows): run it on time slices. Windows ending in
    ``(a, b]`` only read rows in ``[a - range, b)``."""
    r, ts = kind.r, t.column("ts").to_numpy()
    parts = []
    hi = int(ts.max()) + r + 1
    for a in range(0, hi, chunk):
        b = a + chunk
        sub = t.filter(pa.array((ts >= a - r) & (ts < b)))
        if sub.num_rows == 0:
            continue
        o = window_oracle(sub, kind, aggs, by=["key"], time="ts", unit="ms")
        end = o.column("window_end").to_numpy()
        parts.append(o.filter(pa.array((end > a) & (end <= b))))
    return pa.concat_tables(parts)


@pytest.mark.parametrize("kind,method,strings,aggs", [
    (Tumbling(1000), "wid", True, ALL),
    (Tumbling(1000), "wid", False, SUMS + [agg.median("val")]),
    (Sliding(5000, 1000), "wid", False, ALL),
    (Sliding(5000, 1000), "paned", False, SUMS),
    (Sliding(5000, 1000), "paned", True, SUMS),
    (Sliding(5000, 1000), "paned", False, ALL),
    (Sliding(5000, 1000), "paned", True, SUMS + [agg.median("val"), agg.distinct("val")]),
], ids=["tumbling-str", "tumbling-int-median", "sliding-wid", "sliding-paned", "sliding-paned-str",
        "sliding-paned-select", "sliding-paned-holistic"])
def test_never_repeating_keys_keep_state_bounded(kind, method, strings, aggs):
    """100k session ids, 200 per second: the open windows hold ~200 x (range + lag + a batch)
    keys; peak state items stay within a small multiple of that, not 200k, and the results
    equal the oracle."""
    n = 100_000
    t, items = _session_feed(n, strings)
    from oop.window import WindowAggregate

    op = WindowAggregate(kind, aggs, by=["key"], method=method)
    res = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                           schema=t.schema).via(op).run()
    m = res.metrics[op.name]
    open_keys = 200 * (kind.r // 1000 + 1 + 10 + 1)  # range + lag + one batch (10 s), in keys
    cells = open_keys * (kind.r // kind.s if method == "wid" else 1)
    assert m.peak_state_items <= 4 * open_keys + cells + 2 * 4096, (m.peak_state_items, open_keys)
    assert m.peak_state_items < n // 4  # without compaction: > n (every key ever seen)
    assert op.plan_info["key_compactions"] > 10
    assert op.enc.n_codes < 3 * open_keys + 4096
    for enc in op.value_enc.values():  # count-distinct of never-repeating values: forgotten too
        assert enc.n_codes < 3 * open_keys + 4096
        assert op.plan_info["value_compactions"] > 10
    assert_same_rows(res.table, _oracle_in_chunks(t, kind, aggs))


def test_compaction_keeps_the_keys_of_open_windows_under_allowed_lateness():
    """late='update': a key stays while its window may still be revised, then goes; revisions
    of a window after compactions still find its key."""
    n = 40_000
    t, items = _session_feed(n, False, every=1000)
    rng = np.random.default_rng(5)
    late_rows = rng.choice(n, 200, replace=False)
    late = t.take(pa.array(np.sort(late_rows)))
    mixed: list = []
    for it in items:  # each late copy 1.5 s behind the stream (lateness 3 s: revised, not dropped)
        mixed.append(it)
        if isinstance(it, Punctuation):
            lt = late.filter(pa.array((late.column("ts").to_numpy() < it.value - 500)
                                      & (late.column("ts").to_numpy() >= it.value - 2000)))
            if lt.num_rows:
                mixed.extend(lt.to_batches())
    from oop.window import WindowAggregate

    op = WindowAggregate(Tumbling(1000), SUMS, by=["key"], method="wid", late="update",
                         allowed_lateness=3000)
    res = oop.from_batches(mixed, time="ts", unit="ms", punctuation=oop.External(),
                           late="update", schema=t.schema).via(op).run()
    assert op.plan_info["key_compactions"] > 3
    assert res.table.column("is_revision").to_numpy().sum() > 10
    # the last revision of every window == the oracle over every row (late copies included)
    full = pa.concat_tables([t, *[pa.Table.from_batches([b]) for b in mixed
                                   if isinstance(b, pa.RecordBatch) and b.num_rows <= 200]])
    got = res.table.to_pandas()
    got = got.groupby(["key", "window_start"], as_index=False).last().drop(columns="is_revision")
    exp = _oracle_in_chunks(full, Tumbling(1000), SUMS).to_pandas()
    assert len(got) == len(exp)
    a = got.sort_values(["key", "window_start"]).reset_index(drop=True)
    b = exp.sort_values(["key", "window_start"]).reset_index(drop=True)[a.columns]
    assert (a["count"] == b["count"]).all()
    assert np.allclose(a["sum_val"], b["sum_val"])


@pytest.mark.parametrize("kind,method,aggs", [
    (Tumbling(1000), "wid", SUMS),
    (Sliding(3000, 1000), "paned", ALL + [agg.median("val"), agg.distinct("val")]),
], ids=["wid", "paned-all"])
def test_snapshot_restore_after_key_compactions(kind, method, aggs):
    """A snapshot taken after compactions restores into a fresh operator that goes on to the
    same output as the uninterrupted one."""
    from oop.operators.base import StreamInfo
    from oop.window import WindowAggregate

    t, items = _session_feed(60_000, True)

    def make():
        op = WindowAggregate(kind, aggs, by=["key"], method=method)
        op.open([StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
        return op

    def feed(op, its):
        out = []
        for it in its:
            res = op.on_punctuation(it) if isinstance(it, Punctuation) else op.on_batch(it)
            out += [o for o in res if isinstance(o, pa.RecordBatch)]
        return out

    whole = make()
    full = feed(whole, items) + [o for o in whole.flush() if isinstance(o, pa.RecordBatch)]
    op = make()
    cut = len(items) // 2
    first = feed(op, items[:cut])
    assert op.plan_info["key_compactions"] >= 2
    again = make()
    again.restore(op.snapshot())
    rest = feed(again, items[cut:]) + [o for o in again.flush() if isinstance(o, pa.RecordBatch)]
    assert pa.Table.from_batches(first + rest).equals(pa.Table.from_batches(full))
