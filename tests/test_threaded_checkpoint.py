"""Checkpoints of the window on key partitions (oop.window.threaded, Checkpoints).

A threaded window is snapshotted at random cuts of a disordered feed, the
snapshot goes through the checkpoint codec (what a checkpoint file holds),
and a fresh operator -- on the same or another partition count -- restores
it and continues. The stopped run's rows followed by the resumed run's must
be the uninterrupted one-thread operator's, row for row and in order, with
the same punctuations and late counts; the one that took the snapshot and
went on must give them too (a snapshot changes nothing). The counts and sums
are checked against a from-scratch group-by over the feed, and every input
tuple is accounted for (a window's count or the late count).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

import oop
from _drive import drive
from oop.adapt.operator import AdaptWID
from oop.adapt.threaded import ThreadedAdapt
from oop.checkpoint import decode, encode
from oop.checkpoint.fingerprint import describe_difference, plan_description
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import Punctuation
from oop.testing import (TABLE_SCHEMA, batch_splits, disordered_tables, exact_punctuation_feed,
                         late_scripts)
from oop.window import Sliding, Tumbling, agg
from oop.window import aggregate as _aggregate
from oop.window.aggregate import WindowAggregate
from oop.window.kinds import WindowKind
from oop.window.threaded import ThreadedWindow

AGGS = [agg.count(), agg.sum("val"), agg.mean("val"), agg.min("val"), agg.std("val")]
ROOT = Path(__file__).resolve().parents[1]
KINDS = [Tumbling(6), Tumbling(5, origin=3), Sliding(9, 3), Sliding(8, 6, origin=2)]


@st.composite
def feeds(draw: Any) -> tuple[pa.Schema, list[Any]]:
    """A disordered table cut into batches, with valid punctuation between them."""
    t = draw(disordered_tables(max_rows=60, n_keys=draw(st.sampled_from([1, 5, 14])),
                               max_delay=draw(st.sampled_from([0, 4, 12])),
                               string_keys=draw(st.booleans())))
    return t.schema, draw(exact_punctuation_feed(draw(batch_splits(t))))


def _apply(op: Operator, steps: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for s in steps:
        out += op.on_punctuation(s) if isinstance(s, Punctuation) else op.on_batch(s)
    return out


def _checkpointed(op: Operator) -> Any:
    """What a checkpoint file keeps of ``op`` and gives back (state and metrics)."""
    return decode(*encode({"state": op.snapshot(), "metrics": op.metrics.snapshot()}))


def _resumed(build: Callable[[int], Operator], schema: pa.Schema, steps: Sequence[Any],
             cuts: list[int], counts: list[int]) -> tuple[list[Any], Operator, list[Any]]:
    """Run ``steps`` on ``build(counts[0])``, checkpointing at each of ``cuts`` (ascending)
    into a fresh ``build(counts[i + 1])`` that continues; returns (all output elements, the
    last operator, the output of the first operator had it gone on past its first cut --
    after its output up to that cut)."""
    info = [StreamInfo("s", schema, {"ts": "ms"}, "ts")]
    op = build(counts[0])
    op.open(info)
    out: list[Any] = []
    at, going_on = 0, None
    for cut, n in zip(cuts, counts[1:]):
        out += _apply(op, steps[at:cut])
        saved = _checkpointed(op)
        if going_on is None:  # the operator that took the snapshot goes on, unaware
            going_on = out + _apply(op, steps[cut:]) + op.flush()
        else:
            op.close()
        op = build(n)
        op.open(info)
        op.restore(saved["state"])
        op.metrics.restore(saved["metrics"])
        at = cut
    out += _apply(op, steps[at:]) + op.flush()
    return out, op, going_on if going_on is not None else []


def _table(out: Sequence[Any], schema: pa.Schema) -> pa.Table:
    rows = [b for b in out if isinstance(b, pa.RecordBatch) and b.num_rows]
    return pa.Table.from_batches(rows, schema=schema).combine_chunks()


def _puncts(out: Sequence[Any]) -> list[Punctuation]:
    return [p for p in out if isinstance(p, Punctuation)]


def _oracle(kind: WindowKind, steps: Sequence[Any]) -> Counter:
    """From scratch: (key, window_start) -> (count, sum) over every tuple (none is late
    under exact punctuation), by the reference definition of the windows
    (``kind.extent(w)``: ``[end - RANGE, end)``, ``end = origin + (w + 1) * SLIDE``)."""
    acc: dict[tuple[Any, int], list[int]] = {}
    for s in steps:
        if isinstance(s, Punctuation):
            continue
        for ts, key, val in zip(*(s.column(c).to_pylist() for c in ("ts", "key", "val"))):
            w = (ts - kind.o) // kind.s  # the first window whose end is past ts
            while kind.extent(w)[0] <= ts:
                cell = acc.setdefault((key, kind.extent(w)[0]), [0, 0])
                cell[0] += 1
                cell[1] += val
                w += 1
    return Counter({k: tuple(v) for k, v in acc.items()})


def _cuts(data: st.DataObject, n: int) -> list[int]:
    return sorted(data.draw(st.lists(st.integers(0, n), min_size=1, max_size=3)))


@pytest.mark.parametrize("lag", [0, 1])
@pytest.mark.parametrize("kind", KINDS, ids=repr)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_resumed_partitions_give_the_one_thread_rows(kind: WindowKind, lag: int,
                                                     data: st.DataObject) -> None:
    schema, steps = data.draw(feeds())
    method = data.draw(st.sampled_from(["wid", "paned", "auto"]))
    cuts = _cuts(data, len(steps))
    counts = data.draw(st.lists(st.integers(2, 4), min_size=len(cuts) + 1,
                                max_size=len(cuts) + 1))
    compact_at = data.draw(st.sampled_from([4, 1 << 20]))  # global key compactions or none
    with mock.patch.object(_aggregate, "KEYS_COMPACT_MIN", compact_at):
        one = WindowAggregate(kind, AGGS, by="key", method=method)
        t1, p1 = drive(one, schema, steps)
        out, last, going_on = _resumed(
            lambda n: ThreadedWindow(kind, AGGS, by="key", method=method, threads=n, lag=lag),
            schema, steps, cuts, counts)
        if compact_at < 1 << 20:
            # compacting far more often than in production, the threaded window may order
            # a window's keys otherwise than one thread (its dictionary is compacted at
            # other moments); the uninterrupted threaded run is then the reference, and
            # one thread's rows the same set
            tn, _ = drive(ThreadedWindow(kind, AGGS, by="key", method=method,
                                         threads=counts[0], lag=lag), schema, steps)
            assert sorted(map(str, tn.to_pylist())) == sorted(map(str, t1.to_pylist()))
            t1 = tn
    got = _table(out, one.output.schema)
    assert got.equals(t1), (cuts, counts, got.to_pylist(), t1.to_pylist())
    assert _puncts(out) == p1
    assert _table(going_on, one.output.schema).equals(t1) and _puncts(going_on) == p1
    assert last.metrics.late_total == one.metrics.late_total == 0
    assert last.n == counts[0]  # a restore runs on the checkpoint's partition count
    want = _oracle(kind, steps)
    assert Counter({(r["key"], r["window_start"]): (r["count"], r["sum_val"])
                    for r in got.to_pylist()}) == want
    if isinstance(kind, Tumbling):  # every tuple in exactly one window (none is late)
        n_in = sum(s.num_rows for s in steps if isinstance(s, pa.RecordBatch))
        assert sum(got.column("count").to_pylist()) == n_in


@pytest.mark.parametrize("policy", ["drop", "side_output", "update"])
@settings(max_examples=15, deadline=None)
@given(steps=late_scripts(max_steps=14, max_rows=8, n_keys=6), data=st.data())
def test_resumed_partitions_decide_late_tuples_as_one_thread(policy: str, steps: list[Any],
                                                             data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from([Tumbling(6), Sliding(9, 3)]))
    kw: dict[str, Any] = dict(by="key", method="wid", late=policy)
    if policy == "update":
        kw["allowed_lateness"] = data.draw(st.integers(0, 12))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val")]
    one = WindowAggregate(kind, aggs, **kw)
    t1, p1 = drive(one, TABLE_SCHEMA, steps)
    cuts = _cuts(data, len(steps))
    out, last, _ = _resumed(lambda n: ThreadedWindow(kind, aggs, threads=n, lag=1, **kw),
                            TABLE_SCHEMA, steps, cuts, [3] * (len(cuts) + 1))
    got = _table(out, one.output.schema)
    assert got.equals(t1), (got.to_pylist(), t1.to_pylist())
    assert _puncts(out) == p1
    assert last.metrics.late == one.metrics.late
    if isinstance(kind, Tumbling) and policy != "update":  # every tuple: a window or late
        n_in = sum(s.num_rows for s in steps if isinstance(s, pa.RecordBatch))
        assert sum(got.column("count").to_pylist()) + last.metrics.late_total == n_in


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_resumed_adaptwid_partitions_give_the_one_thread_rows(data: st.DataObject) -> None:
    schema, steps = data.draw(feeds())
    kind = data.draw(st.sampled_from([Tumbling(6), Sliding(9, 3)]))
    thresholds = data.draw(st.sampled_from(["adaptive", "eager", "lazy"]))
    aggs = [agg.count(), agg.sum("val"), agg.mean("val"), agg.std("val")]
    one = AdaptWID(kind, aggs, by="key", thresholds=thresholds)
    t1, p1 = drive(one, schema, steps)
    cuts = _cuts(data, len(steps))
    out, last, _ = _resumed(
        lambda n: ThreadedAdapt(kind, aggs, by="key", thresholds=thresholds, threads=n, lag=1),
        schema, steps, cuts, [2] + [3] * len(cuts))
    got = _table(out, one.output.schema)
    assert got.equals(t1), (got.to_pylist(), t1.to_pylist())
    assert _puncts(out) == p1
    assert last.metrics.late_total == one.metrics.late_total
    assert Counter({(r["key"], r["window_start"]): (r["count"], r["sum_val"])
                    for r in got.to_pylist()}) == _oracle(kind, steps)


def test_a_checkpoint_across_the_one_partition_boundary_is_refused_saying_why() -> None:
    t = pa.table({"ts": [1, 2, 30], "key": [1, 2, 1], "val": [1, 2, 3]})
    s = oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(0))

    def lines(threads: int) -> list[str]:
        ex, _ = s.window(Tumbling(10), [agg.count()], by="key", threads=threads).executor()
        return plan_description(ex)

    one, two, three = lines(1), lines(2), lines(3)
    assert two == three  # the same fingerprint: a restore takes the checkpoint's count
    for ours, theirs, where in ((one, two, "on key partitions in the checkpoint, on one "
                                 "thread here"),
                                (three, one, "on one thread in the checkpoint, on key "
                                 "partitions here")):
        msg = describe_difference(ours, theirs)
        assert "operator 'window' ran " + where in msg and "thread count" in msg, msg


def test_a_compacted_key_keeps_its_partition_across_a_restart() -> None:
    """Key 2 (code 2: partition 2 of 3) outlives a global compaction that renumbers it to
    code 0 (``code mod 3`` would say partition 0); the checkpoint must keep its partition.

    ::

        ts   0         6         12
             |--w0-----|--w1-----|
        b1   k0..k7 @0, k2 @7
        P6             ^ w0 closes: every key but k2 dead
        b2             k2, k9 @8  (8 keys >= 4: compacted to k2 -> 0, k9 -> 1)
        -- checkpoint, restart --
        b3             k2 @9      (must land in k2's partition: one row for (k2, w1))
    """
    def b(ts: list[int], keys: list[int]) -> pa.RecordBatch:
        return pa.record_batch({"ts": ts, "key": keys, "val": [1] * len(ts)},
                               schema=TABLE_SCHEMA)

    steps = [b([0, 0, 7, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5, 6, 7]), Punctuation("ts", 6),
             b([8, 8], [2, 9]), b([9], [2]), Punctuation("ts", 12)]
    aggs = [agg.count(), agg.sum("val")]
    with mock.patch.object(_aggregate, "KEYS_COMPACT_MIN", 4):
        def build(n: int) -> ThreadedWindow:
            return ThreadedWindow(Tumbling(6), aggs, by="key", method="wid", threads=n, lag=1)

        whole, _ = drive(build(3), TABLE_SCHEMA, steps)
        out, last, _ = _resumed(build, TABLE_SCHEMA, steps, [3], [3, 3])
    assert last.plan_info.get("global_key_compactions") == 1
    got = _table(out, whole.schema)
    assert got.equals(whole), got.to_pylist()
    assert [(r["key"], r["window_start"], r["count"]) for r in got.to_pylist()
            if r["window_start"] == 6] == [(2, 6, 3), (9, 6, 1)]


def test_oop_sql_threads_with_checkpoints_gives_the_one_thread_rows(tmp_path: Path) -> None:
    """``oop sql --threads 3 --checkpoint-dir``: a HOP aggregate on 2 key partitions,
    checkpointed every 3000 rows, equals ``--threads 1`` row for row (a part folder read
    in part order); the plan says where it ran."""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 20_000
    pq.write_table(pa.table({"ts": np.arange(n, dtype=np.int64) * 5 + rng.integers(0, 900, n),
                             "k": rng.integers(0, 40, n), "v": rng.integers(0, 99, n)}),
                   tmp_path / "a.parquet", row_group_size=2000)
    script = (f"CREATE TABLE a (ts BIGINT, k BIGINT, v BIGINT, WATERMARK FOR ts AS ts - "
              f"INTERVAL '1' SECOND) WITH ('path' = '{tmp_path / 'a.parquet'}', 'time-unit' = "
              "'ms');\nSELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total "
              "FROM TABLE(HOP(TABLE a, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' "
              "SECOND)) GROUP BY window_start, window_end, k")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outs = {}
    for threads, ck in (("1", []), ("3", ["--checkpoint-dir", str(tmp_path / "ck"),
                                          "--checkpoint-every", "3000rows"])):
        out = tmp_path / f"out{threads}"
        p = subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e", script, "--threads",
                            threads, "--batch-size", "1000", "--quiet", "--out", f"{out}/",
                            "--metrics", str(tmp_path / f"m{threads}.json"), *ck],
                           env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        outs[threads] = pa.concat_tables(pq.read_table(f) for f in sorted(out.iterdir()))
    assert outs["1"].num_rows > 1000 and outs["3"].equals(outs["1"])
    notes = json.loads((tmp_path / "m3.json").read_text())["threads"]["operators"]
    assert any("2 key partitions" in x for x in notes), notes
    assert len(list((tmp_path / "ck").iterdir())) >= 1
