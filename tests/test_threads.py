"""The window on N key partitions (oop.window.threaded) == the one-thread window, row for row.

Differential tests: the threaded operator and the plain one run on the same
disordered feed; their outputs must be equal as Arrow tables (same rows,
same order, same types), with the same punctuation and the same late
accounting. The one-thread operator is checked against the from-scratch
oracle in test_window.py; here the oracle check is repeated on the
accounting (every tuple is in a window or late).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

import oop
from _drive import drive as drive_steps
from oop.errors import ConfigError
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.testing import (TABLE_SCHEMA, batch_splits, disordered_tables, exact_punctuation_feed,
                         late_scripts)
from oop.window import Landmark, Sliding, Tumbling, agg
from oop.window.aggregate import WindowAggregate
from oop.window import threaded
from oop.window.threaded import (ThreadedWindow, merge_order, merge_order_reference,
                                 partition_rows, partition_rows_reference, pivots,
                                 run_cuts, run_cuts_reference)

ROOT = Path(__file__).resolve().parents[1]
AGGS = [agg.count(), agg.sum("val"), agg.mean("val"), agg.min("val"), agg.max("val"),
        agg.std("val"), agg.first("val"), agg.last("val")]
HOLISTIC = [agg.median("val"), agg.distinct("val"), agg.heavy_hitters("val", 2)]
KINDS = [Tumbling(7), Tumbling(5, origin=3), Sliding(10, 3), Sliding(9, 6, origin=2)]


# ---- kernels vs references ------------------------------------------------------
@given(codes=st.lists(st.integers(0, 50), max_size=80), n=st.integers(1, 7))
def test_partition_rows_is_a_stable_scatter(codes, n):
    c = np.asarray(codes, np.int64)
    order, bounds = partition_rows(c, n)
    ref_order, ref_bounds = partition_rows_reference(c, n)
    assert order.tolist() == ref_order.tolist() and bounds.tolist() == ref_bounds.tolist()
    for p in range(n):  # every row of partition p, in arrival order
        rows = order[bounds[p]:bounds[p + 1]]
        assert (c[rows] % n == p).all() and (np.diff(rows) > 0).all()


@st.composite
def runs(draw):
    parts, a, b = [0], [], []
    for _ in range(draw(st.integers(1, 6))):
        m = draw(st.integers(0, 12))
        x = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), min_size=m, max_size=m))
        if draw(st.booleans()):
            x = sorted(x)  # usually sorted; an unsorted run must be sorted first
        a += [p[0] for p in x]
        b += [p[1] for p in x]
        parts.append(parts[-1] + m)
    return np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(parts, np.int64)


@given(r=runs())
def test_merge_order_equals_a_stable_sort(r):
    a, b, bounds = r
    got = merge_order(a, b, bounds)
    assert sorted(got.tolist()) == list(range(a.shape[0]))
    assert list(zip(a[got], b[got])) == sorted(zip(a.tolist(), b.tolist()))
    if all((np.lexsort((b[x:y], a[x:y])) == np.arange(y - x)).all()
           for x, y in zip(bounds[:-1], bounds[1:])):  # sorted runs: ties stay in run order
        assert got.tolist() == merge_order_reference(a, b).tolist()


@st.composite
def sorted_runs(draw):
    a, b, bounds = draw(runs())
    for x, y in zip(bounds[:-1], bounds[1:]):  # every run sorted by (a, b)
        o = x + np.lexsort((b[x:y], a[x:y]))
        a[x:y], b[x:y] = a[o], b[o]
    return a, b, bounds


@given(r=sorted_runs(), pv=st.lists(st.tuples(st.integers(-1, 5), st.integers(-1, 10)),
                                    max_size=4))
def test_run_cuts_equal_counting_the_rows_below_each_pivot(r, pv):
    a, b, bounds = r
    pv = sorted(pv)
    for x, y in zip(bounds[:-1], bounds[1:]):
        got = run_cuts(a[x:y], b[x:y], np.asarray([p[0] for p in pv], np.int64),
                       np.asarray([p[1] for p in pv], np.int64))
        assert got.tolist() == run_cuts_reference(a[x:y], b[x:y], pv).tolist()


@given(r=sorted_runs(), k=st.integers(1, 5))
def test_a_cut_merge_is_the_merge(r, k):
    """Range by range, each merged alone and put one after the other: merge_order's order."""
    a, b, bounds = r
    ends = [a[x:y] for x, y in zip(bounds[:-1], bounds[1:])]
    codes = [b[x:y] for x, y in zip(bounds[:-1], bounds[1:])]
    if a.shape[0] == 0:
        return
    cuts = np.stack([run_cuts(e, c, *pivots(ends, codes, k)) for e, c in zip(ends, codes)])
    got = []
    for j in range(k):
        rows = np.concatenate([np.arange(x + lo, x + hi) for x, lo, hi
                               in zip(bounds[:-1], cuts[:, j], cuts[:, j + 1])]).astype(np.int64)
        sub = np.concatenate(([0], np.cumsum(cuts[:, j + 1] - cuts[:, j]))).astype(np.int64)
        got += rows[merge_order(a[rows], b[rows], sub)].tolist()
    assert got == merge_order(a, b, bounds).tolist()


@contextlib.contextmanager
def cut_merges_from(rows):
    """Cut every merge of at least ``rows`` result rows into ranges, however many cores."""
    old = threaded.CUT_MERGE_MIN_ROWS, threaded.CUT_MERGES
    threaded.CUT_MERGE_MIN_ROWS, threaded.CUT_MERGES = rows, True
    try:
        yield
    finally:
        threaded.CUT_MERGE_MIN_ROWS, threaded.CUT_MERGES = old


def test_merges_are_cut_only_where_a_core_is_free_for_them():
    assert threaded.CUT_MERGES is None  # the default: decided by the machine
    assert not threaded.cut_merges(2, 2) and not threaded.cut_merges(3, 2)
    assert not threaded.cut_merges(2, 3)  # 3 cores: bound by the total CPU, not the driver
    assert threaded.cut_merges(3, 4) and threaded.cut_merges(15, 16)
    assert not threaded.cut_merges(16, 16)
    with cut_merges_from(1):
        assert threaded.cut_merges(3, 2)


def test_a_cut_merge_gives_one_batch_per_range_and_the_one_thread_rows():
    """Many keys, three partitions, merges cut from 1 row: each punctuation's windows leave
    as up to three batches, and together they are the one-thread output, row for row."""
    n = 6000
    rng = np.random.default_rng(7)
    ts = np.sort(rng.integers(0, 3000, n)) + rng.integers(0, 40, n)  # disordered
    t = pa.table({"ts": ts.astype(np.int64), "key": rng.integers(0, 500, n),
                  "val": rng.integers(0, 100, n)})
    items = []
    for b in t.to_batches(max_chunksize=700):
        items += [b, Punctuation("ts", int(np.min(b.column(0).to_numpy())) - 40)]
    with cut_merges_from(1):
        op = _threaded(Sliding(100, 50), EXACT, t.schema, threads=3)
        out, _ = _drive(op, t.schema, items)
    one = WindowAggregate(Sliding(100, 50), EXACT, by="key")
    one.open([StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
    ref, _ = _drive(one, t.schema, items)
    assert len(out) > len(ref)  # cut: several batches per punctuation
    assert pa.Table.from_batches(out).equals(pa.Table.from_batches(ref))
    assert op.plan_info["merge_cpu_s"] > 0


# ---- stream level: threaded == one thread, row for row --------------------------------
@st.composite
def feeds(draw, max_rows=60):
    t = draw(disordered_tables(max_rows=max_rows, n_keys=draw(st.sampled_from([1, 4, 12])),
                               max_delay=draw(st.sampled_from([0, 3, 10])),
                               string_keys=draw(st.booleans())))
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


def run(items, schema, kind, aggs, method, threads, by=("key",)):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=schema)
    return s.window(kind, aggs, by=list(by), method=method, threads=threads).run()


@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_threaded_output_is_the_one_thread_output(kind, data):
    t, items = data.draw(feeds())
    method = data.draw(st.sampled_from(["wid", "paned", "auto"]))
    aggs = AGGS + (HOLISTIC if data.draw(st.booleans()) else [])
    split = data.draw(st.sampled_from([1, threaded.CUT_MERGE_MIN_ROWS]))
    one = run(items, t.schema, kind, aggs, method, 1)
    for n in (2, 3):
        with cut_merges_from(split):
            res = run(items, t.schema, kind, aggs, method, n)
        assert res.table.equals(one.table), (n, res.table.to_pylist(), one.table.to_pylist())
        assert res.punctuations == one.punctuations
        assert res.late_total == one.late_total == 0


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_two_key_columns_and_timestamp_time(data):
    t, items = data.draw(feeds())
    t2 = t.append_column("k2", pa.array([i % 3 for i in range(t.num_rows)], pa.int64()))
    off = 0
    items2 = []
    for it in items:
        if isinstance(it, pa.RecordBatch):
            items2.append(pa.RecordBatch.from_arrays(
                [*it.columns, pa.array([(off + i) % 3 for i in range(it.num_rows)], pa.int64())],
                schema=t2.schema))
            off += it.num_rows
        else:
            items2.append(it)
    one = run(items2, t2.schema, Sliding(8, 4), AGGS, "auto", 1, by=("key", "k2"))
    two = run(items2, t2.schema, Sliding(8, 4), AGGS, "auto", 2, by=("key", "k2"))
    assert two.table.equals(one.table)


# ---- operator level: late tuples under every policy -----------------------------------
SCHEMA = TABLE_SCHEMA


def scripts():
    """Batches and punctuations in any order: punctuation may make later tuples late."""
    return late_scripts(max_steps=14, max_rows=8, n_keys=6)


def drive(op, steps):
    return drive_steps(op, SCHEMA, steps)


@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("policy", [None, "drop", "side_output", "update"])
@pytest.mark.parametrize("method", ["wid", "paned"])
@pytest.mark.parametrize("kind", [Tumbling(6), Sliding(9, 3)], ids=repr)
@settings(max_examples=20, deadline=None)
@given(steps=scripts(), lateness=st.integers(0, 12), split=st.sampled_from([1, 1 << 12]))
def test_late_policies_match_one_thread(kind, method, policy, lag, steps, lateness, split):
    aggs = [agg.count(), agg.sum("val"), agg.max("val"), agg.median("val")]
    kw = dict(by="key", method=method, late=policy)
    if policy == "update":
        kw["allowed_lateness"] = lateness
    one = WindowAggregate(kind, aggs, **kw)
    many = ThreadedWindow(kind, aggs, threads=3, lag=lag, **kw)
    t1, p1 = drive(one, steps)
    with cut_merges_from(split):
        tn, pn = drive(many, steps)
    assert tn.equals(t1), (tn.to_pylist(), t1.to_pylist())
    assert pn == p1
    assert many.metrics.late == one.metrics.late
    assert ([b.to_pylist() for b in many.side_outputs.get("late", [])]
            == [b.to_pylist() for b in one.side_outputs.get("late", [])])
    if isinstance(kind, Tumbling) and policy != "update":  # every tuple: a window or late
        n_in = sum(s.num_rows for s in steps if isinstance(s, pa.RecordBatch))
        assert sum(tn.column("count").to_pylist()) + many.metrics.late_total == n_in


def test_raise_policy_raises_on_the_same_tuple():
    steps = [pa.record_batch({"ts": [1, 15], "key": [0, 1], "val": [1, 1]}, schema=SCHEMA),
             Punctuation("ts", 12),
             pa.record_batch({"ts": [3, 20], "key": [0, 0], "val": [1, 1]}, schema=SCHEMA)]
    for op in (WindowAggregate(Tumbling(10), [agg.count()], by="key", late="raise"),
               ThreadedWindow(Tumbling(10), [agg.count()], by="key", late="raise", threads=2)):
        with pytest.raises(oop.LateTupleError, match="ts=3"):
            drive(op, steps)


# ---- planning and refusals -----------------------------------------------------------
def test_unpartitionable_queries_run_on_one_thread_and_partitions_resume():
    t = pa.table({"ts": [1, 2, 30], "key": [1, 2, 1], "val": [1, 2, 3]})
    s = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(0))
    land = s.window(Landmark(10), [agg.count()], by="key", threads=4)
    assert not isinstance(land.node.op, ThreadedWindow)  # landmark: one thread
    nokey = s.window(Tumbling(10), [agg.count()], threads=4)
    assert not isinstance(nokey.node.op, ThreadedWindow)
    w = s.window(Tumbling(10), [agg.count()], by="key", threads=2)
    assert isinstance(w.node.op, ThreadedWindow)
    assert w.run().table.equals(s.window(Tumbling(10), [agg.count()], by="key").run().table)
    head = w.run(stop_after_rounds=1)  # checkpointed (oop.window.threaded, Checkpoints)
    tail = w.run(resume_from=head.checkpoint)
    assert pa.concat_tables([head.table, tail.table]).equals(w.run().table)
    with pytest.raises(ConfigError, match="threads=1"):
        ThreadedWindow(Tumbling(10), [agg.count()], threads=1, by="key")


def test_a_checkpointed_job_runs_key_partitions(tmp_path):
    t = pa.table({"ts": [1, 2, 30], "key": [1, 2, 1], "val": [1, 2, 3]})
    s = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(0))
    w = s.window(Tumbling(10), [agg.count()], by="key", threads=2)
    w.sink(f"{tmp_path}/out/", checkpoint_dir=tmp_path / "ck")
    assert pq.read_table(tmp_path / "out").equals(
        s.window(Tumbling(10), [agg.count()], by="key").run().table)


# ---- the command ------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "oop.cli", "replay", *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_cli_threads_gives_the_one_thread_output(tmp_path):
    rng = np.random.default_rng(3)
    n = 30_000
    ts = np.arange(n) - rng.integers(0, 400, n)
    keys = np.array([f"k{x}" for x in rng.zipf(1.3, n) % 500])
    pq.write_table(pa.table({"ts": ts, "key": keys, "v": rng.random(n)}), tmp_path / "in.parquet")
    common = ["--input", str(tmp_path / "in.parquet"), "--time", "ts", "--key", "key",
              "--window", "sliding:1s,100ms", "--agg", "count", "--agg", "sum:v",
              "--agg", "max:v", "--punctuation", "bounded:300ms+cadence:2048rows", "--batch-size", "4096",
              "--quiet"]
    outs, m = {}, {}
    for th in ("1", "2", "3"):
        out = tmp_path / f"out{th}.parquet"
        r = _cli(*common, "--threads", th, "--out", str(out),
                 "--metrics", str(tmp_path / f"m{th}.json"))
        assert r.returncode == 0, r.stderr
        outs[th] = pq.read_table(out)
        m[th] = json.loads((tmp_path / f"m{th}.json").read_text())
    assert outs["1"].num_rows > 1000
    assert outs["2"].equals(outs["1"]) and outs["3"].equals(outs["1"])
    # bounded:300ms < the 400ms disorder: late tuples, the same count
    assert m["3"]["late"] == m["2"]["late"] == m["1"]["late"] > 0
    # --threads N: reading and writing on their own threads, the window on N - 1 partitions
    # (one partition: the one-thread operator)
    assert m["3"]["plan"]["threads"] == 2
    assert "threads" not in m["2"]["plan"] and "threads" not in m["1"]["plan"]
    # the pipeline stages report their threads' CPU (one thread: no such stages)
    cpu = ("reader_cpu_s", "writer_cpu_s", "driver_cpu_s")
    for th in ("2", "3"):
        assert all(m[th]["plan"][k] >= 0 for k in cpu), m[th]["plan"]
    assert not set(cpu) & set(m["1"]["plan"])
    # a pipelined run (reading, the window on key partitions, writing) is checkpointed
    r = _cli(*common, "--threads", "3", "--out", f"{tmp_path}/ck-out/", "--checkpoint-dir",
             str(tmp_path / "ck"), "--checkpoint-every", "2000rows")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(tmp_path / "ck-out").equals(outs["1"])
    assert list((tmp_path / "ck").iterdir())


# ---- the pipeline stages: read ahead, write behind ------------------------------------
class _ListSink:
    name = "list"

    def __init__(self, fail_at: int | None = None) -> None:
        self.rows: list[int] = []
        self.events: list[str] = []
        self.fail_at = fail_at

    def open(self, schema: pa.Schema) -> None:
        self.events.append("open")

    def write(self, batch: pa.RecordBatch) -> None:
        if self.fail_at is not None and len(self.rows) >= self.fail_at:
            raise OSError("disk full")
        self.rows += batch.column(0).to_pylist()

    def commit(self) -> int:
        self.events.append(f"commit@{len(self.rows)}")
        return len(self.rows)

    def close(self) -> None:
        self.events.append(f"close@{len(self.rows)}")

    def abort(self) -> None:
        self.events.append("abort")


def _batches(n: int, size: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"x": list(range(i * size, (i + 1) * size))}) for i in range(n)]


def test_background_sink_writes_in_order_and_commits_what_was_written():
    from oop.plan.background import BackgroundSink

    inner = _ListSink()
    s = BackgroundSink(inner, max_bytes=100)
    s.open(pa.schema([("x", pa.int64())]))
    for b in _batches(20, 5):
        s.write(b)
    assert s.commit() == 100  # every queued write happened before the commit
    for b in _batches(3, 5):
        s.write(b)
    s.close()
    assert inner.rows == list(range(100)) + list(range(15))
    assert inner.events == ["open", "commit@100", "close@115"]


def test_background_sink_raises_a_write_error_on_the_next_call_and_aborts():
    from oop.plan.background import BackgroundSink

    inner = _ListSink(fail_at=10)
    s = BackgroundSink(inner, max_bytes=100)
    s.open(pa.schema([("x", pa.int64())]))
    with pytest.raises(OSError, match="disk full"):
        for b in _batches(50, 5):
            s.write(b)
        s.commit()
    s.abort()
    assert inner.rows == list(range(10)) and inner.events[-1] == "abort"


def test_read_ahead_gives_the_same_batches_then_end():
    from oop.io.protocol import END
    from oop.plan.background import ReadAhead

    class Feed:
        name, live, resumable = "feed", False, True

        def __init__(self) -> None:
            self.items = _batches(30, 3)
            self.closed = False

        def open(self):
            return self.items[0].schema

        def poll(self, max_rows, timeout=0.1):
            return self.items.pop(0) if self.items else END

        def offset(self):
            return None

        def seek(self, offset):
            pass

        def close(self):
            self.closed = True

    inner = Feed()
    expect = [b.column(0).to_pylist() for b in inner.items]
    r = ReadAhead(inner, depth=3)
    assert r.open() is not None
    got = []
    while (item := r.poll(3)) is not END:
        got.append(item.column(0).to_pylist())
    r.close()
    assert got == expect and inner.closed


def test_threaded_global_key_dictionary_is_charged_to_the_state_budget() -> None:
    """Keys that never repeat: the threaded window's global key dictionary is compacted
    (its charge to --max-state stays small), so a budget the one-thread run fits is enough."""
    from oop.limits import state_budget

    n = 200_000  # one new key per ms: each 100 ms window holds 100 keys
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "key": np.arange(n, dtype=np.int64) * 7})
    with state_budget(4 << 20):
        s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(10),
                           batch_size=4096)
        res = s.window(Tumbling(100), [agg.count()], by="key", threads=2).run()
    assert res.table.num_rows == n and pa.compute.sum(res.table.column("count")).as_py() == n


# ---- the global key dictionary forgets dead keys ------------------------------------
def _drive(op, schema, items):
    """Feed ``items`` (batches, punctuations) to an opened operator; (output tables, the
    largest global dictionary seen after a batch)."""
    out, most = [], 0
    for it in items:
        res = op.on_batch(it) if isinstance(it, pa.RecordBatch) else op.on_punctuation(it)
        if isinstance(it, pa.RecordBatch):
            most = max(most, op.enc.n_codes)
        out.extend(r for r in res if isinstance(r, pa.RecordBatch))
    out.extend(r for r in op.flush() if isinstance(r, pa.RecordBatch))
    return out, most


def _threaded(kind, aggs, schema, lag=0, threads=2):
    op = ThreadedWindow(kind, aggs, threads=threads, by="key", lag=lag)
    op.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    return op


def _rows(batches, schema=None):
    if not batches:
        return []
    return sorted(pa.Table.from_batches(batches).to_pylist(), key=repr)


EXACT = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.first("val"),
         agg.last("val"), agg.median("val")]


@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("kind", [Tumbling(50), Sliding(60, 20)], ids=repr)
def test_never_repeating_keys_keep_the_global_dictionary_bounded(monkeypatch, kind, lag):
    from oop.window import aggregate
    monkeypatch.setattr(aggregate, "KEYS_COMPACT_MIN", 256)
    n, bs = 20_000, 500  # one new key per ms; a window holds 50-60 keys
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "key": np.arange(n, dtype=np.int64) * 3,
                  "val": np.arange(n, dtype=np.int64) % 97})
    items = []
    for b in t.to_batches(max_chunksize=bs):
        items.append(b)
        items.append(Punctuation("ts", int(b.column(0)[-1].as_py()) + 1))
    op = _threaded(kind, EXACT, t.schema, lag=lag)
    out, most = _drive(op, t.schema, items)
    assert most <= 2 * aggregate.KEYS_COMPACT_MIN + bs, most
    assert op.plan_info.get("global_key_compactions", 0) >= 5
    one = WindowAggregate(kind, EXACT, by="key")
    one.open([StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
    ref, _ = _drive(one, t.schema, items)
    assert _rows(out) == _rows(ref) and len(_rows(out)) > 0


def test_without_compaction_rows_match_row_for_row(monkeypatch):
    """Below the threshold nothing is compacted: the same rows in the same order."""
    n = 3000
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "key": np.arange(n, dtype=np.int64),
                  "val": np.arange(n, dtype=np.int64) % 13})
    items = []
    for b in t.to_batches(max_chunksize=300):
        items += [b, Punctuation("ts", int(b.column(0)[-1].as_py()) + 1)]
    op = _threaded(Sliding(40, 10), EXACT, t.schema)
    out, _ = _drive(op, t.schema, items)
    assert "global_key_compactions" not in op.plan_info
    one = WindowAggregate(Sliding(40, 10), EXACT, by="key")
    one.open([StreamInfo("s", t.schema, {"ts": "ms"}, "ts")])
    ref, _ = _drive(one, t.schema, items)
    assert pa.Table.from_batches(out).equals(pa.Table.from_batches(ref))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_rotating_keys_forgotten_and_coming_back(data):
    """Keys that leave and come back later (a rotating set, compaction threshold patched
    low): the threaded rows equal the one-thread rows as a multiset, every tuple counted."""
    from oop.window import aggregate
    old = aggregate.KEYS_COMPACT_MIN
    aggregate.KEYS_COMPACT_MIN = data.draw(st.sampled_from([2, 4, 8]))
    try:
        n_sets = data.draw(st.integers(3, 6))
        per_set = data.draw(st.integers(2, 10))
        steps = data.draw(st.integers(8, 25))
        threads = data.draw(st.integers(2, 3))
        lag = data.draw(st.sampled_from([0, 1]))
        kind = data.draw(st.sampled_from([Tumbling(10), Sliding(20, 10), Sliding(15, 5)]))
        aggs = data.draw(st.sampled_from([EXACT, [agg.count(), agg.sum("val")]]))
        ts, keys, vals, items = [], [], [], []
        rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
        schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.int64())])
        for s in range(steps):  # step s: keys of set s mod n_sets, times in [10s, 10s + 10)
            k = (s % n_sets) * per_set + rng.integers(0, per_set, 8)
            tt = 10 * s + rng.integers(0, 10, 8)
            v = rng.integers(-5, 6, 8)
            items.append(pa.RecordBatch.from_arrays(
                [pa.array(tt), pa.array(k), pa.array(v)], schema=schema))
            items.append(Punctuation("ts", 10 * s + 10))
            ts += tt.tolist()
        op = _threaded(kind, aggs, schema, lag=lag, threads=threads)
        out, most = _drive(op, schema, items)
        one = WindowAggregate(kind, aggs, by="key")
        one.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
        ref, _ = _drive(one, schema, items)
        assert _rows(out) == _rows(ref)
        # the dictionary never holds more than the distinct key values (returning keys are
        # re-coded only after being forgotten); the bound independent of the number of keys
        # is asserted by test_never_repeating_keys_keep_the_global_dictionary_bounded.
        # Sliding windows keep up to range/slide + 1 sets alive, plus one element in flight.
        live_sets = kind.r // kind.s + 2
        assert most <= min(n_sets * per_set,
                           2 * max(aggregate.KEYS_COMPACT_MIN, live_sets * per_set) + 8)
        if "count" in pa.Table.from_batches(out).column_names and kind.r == kind.s:
            assert sum(pa.Table.from_batches(out).column("count").to_pylist()) == len(ts)
    finally:
        aggregate.KEYS_COMPACT_MIN = old


def test_a_partition_without_rows_does_not_stop_compaction(monkeypatch):
    """One new key per punctuation on 5 threads: the first checks find partitions that saw
    no row yet; compaction still runs and the rows equal one thread's."""
    from oop.window import aggregate
    monkeypatch.setattr(aggregate, "KEYS_COMPACT_MIN", 2)
    schema = pa.schema([("ts", pa.int64()), ("key", pa.int64()), ("val", pa.int64())])
    items = []
    for s in range(30):
        items += [pa.RecordBatch.from_arrays([pa.array([10 * s]), pa.array([s]), pa.array([1])],
                                             schema=schema), Punctuation("ts", 10 * s + 10)]
    op = _threaded(Tumbling(10), EXACT, schema, threads=5)
    out, most = _drive(op, schema, items)
    assert op.plan_info.get("global_key_compactions", 0) >= 2 and most <= 5
    one = WindowAggregate(Tumbling(10), EXACT, by="key")
    one.open([StreamInfo("s", schema, {"ts": "ms"}, "ts")])
    ref, _ = _drive(one, schema, items)
    assert _rows(out) == _rows(ref) and len(_rows(out)) == 30


@pytest.mark.parametrize("threads,parts,piped", [(1, 1, False), (2, 1, True),
                                                 (3, 2, True), (8, 7, True)])
def test_replay_threads_give_one_core_to_reading_and_writing(threads, parts, piped):
    from oop.cli import build_parser
    from oop.command.threads import partitions, pipelined

    args = build_parser().parse_args(
        ["replay", "--input", "x.parquet", "--time", "ts", "--key", "k", "--window",
         "tumbling:1s", "--agg", "count", "--out", "o/", "--threads", str(threads)])
    assert (partitions(args), pipelined(args)) == (parts, piped)
    args.strategy = "iop"  # another strategy: nothing pipelined
    assert not pipelined(args)
