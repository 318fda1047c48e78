"""Checkpoints of the join on key partitions (oop.join.keyed_join, Checkpoints).

A KeyedJoin on 2 or 3 partitions is fed two disordered inputs with late tuples
(and valid punctuation), snapshotted at random cuts; each snapshot goes through
the checkpoint codec (what a checkpoint file holds) into a fresh KeyedJoin on
the same partition count, which continues. The stopped runs' elements followed
by the resumed one's must be the uninterrupted run's -- rows in order,
punctuations, late counts and late side output -- and the one-worker ordered
SplitJoin's; the operator that took the first snapshot and went on must give
them too. The rows are checked against the from-scratch nested-loop join of
the tuples that were not late, and every input tuple is accounted for (joined
or unmatched in the output, or late). A restore into another partition count
continues on the checkpoint's count with the same rows; the plan fingerprint
leaves the count to the restore.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oop
from contract_cases import INFO, INFO_R, late_feed
from oop.checkpoint import decode, encode
from oop.checkpoint.fingerprint import describe_difference, plan_description
from oop.join import JoinConfig, SplitJoin, WindowPredicate, nested_loop_join, rows_counter
from oop.join.keyed_join import KeyedJoin
from oop.operators.base import Operator
from oop.stream.elements import Punctuation
from oop.stream.late import LatePolicy
from oop.testing import comparable_elements, drive_operator

ROOT = Path(__file__).resolve().parents[1]
HOWS = ["inner", "left", "right", "full", "semi", "anti"]
ON = (("key", "key"),)
Feed = list[tuple[int, Any]]


@st.composite
def late_pairs(draw: st.DrawFn) -> Feed:
    """Two inputs (ports 0, 1), each disordered with valid punctuation and a few late
    batches after some punctuations (:func:`contract_cases.late_feed`), interleaved at
    random (each keeps its own order)."""
    a = draw(late_feed(max_rows=14))
    b = [(1, x) for _, x in draw(late_feed(max_rows=14))]
    out: Feed = []
    for left in draw(st.lists(st.booleans(), min_size=len(a) + len(b),
                              max_size=len(a) + len(b))):
        out.append(a.pop(0) if (left and a) or not b else b.pop(0))
    return out


def _checkpointed(op: Operator) -> Any:
    """What a checkpoint file keeps of ``op`` and gives back (state and metrics)."""
    return decode(*encode({"state": op.snapshot(), "metrics": op.metrics.snapshot()}))


def _late_rows(op: Operator) -> list[dict[str, Any]]:
    return [r for b in op.side_outputs.get("late", []) for r in b.to_pylist()]


def _resumed(cfg: JoinConfig, n: int, feed: Feed, cuts: list[int]
             ) -> tuple[list[Any], list[dict[str, Any]], Operator, list[Any]]:
    """``feed`` through ``KeyedJoin(cfg, n)``, checkpointed at each of ``cuts`` (ascending)
    into a fresh one that continues: (all output elements, all late side-output rows, the
    last operator, the output of the first operator had it gone on past its first cut)."""
    op: Operator = KeyedJoin(cfg, n)
    op.open([INFO, INFO_R])
    out: list[Any] = []
    late: list[dict[str, Any]] = []
    at, going_on = 0, None
    for cut in cuts:
        out += drive_operator(op, (), feed[at:cut], end=False)
        saved = _checkpointed(op)
        late += _late_rows(op)
        if going_on is None:  # the operator that took the snapshot goes on, unaware
            going_on = out + drive_operator(op, (), feed[cut:])
        op = KeyedJoin(cfg, n)
        op.open([INFO, INFO_R])
        op.restore(saved["state"])
        op.metrics.restore(saved["metrics"])
        at = cut
    out += drive_operator(op, (), feed[at:])
    return out, late + _late_rows(op), op, going_on if going_on is not None else []



def _on_time(feed: Feed) -> tuple[pa.Table, pa.Table, int]:
    """By definition: each input's tuples at or above its last punctuation when they
    arrived (the others are late), and the number of late tuples."""
    bound = [None, None]
    kept: list[list[pa.RecordBatch]] = [[], []]
    late = 0
    for port, e in feed:
        if isinstance(e, Punctuation):
            bound[port] = e.value if bound[port] is None else max(bound[port], e.value)
        elif e.num_rows:
            ok = [bound[port] is None or t >= bound[port] for t in e.column("ts").to_pylist()]
            kept[port].append(e.filter(pa.array(ok)))
            late += ok.count(False)
    tables = [pa.Table.from_batches(k, schema=info.schema) for k, info in
              zip(kept, (INFO, INFO_R))]
    return tables[0], tables[1], late


def _bag(out: Sequence[Any]) -> Counter:
    """The output rows as a multiset of tuples (output column order, None for nulls)."""
    bs = [b for b in out if isinstance(b, pa.RecordBatch) and b.num_rows]
    return rows_counter(pa.Table.from_batches(bs)) if bs else Counter()


@pytest.mark.parametrize("n", [2, 3])
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(feed=late_pairs(), data=st.data())
def test_a_resumed_keyed_join_is_the_uninterrupted_one(n: int, feed: Feed,
                                                       data: st.DataObject) -> None:
    how = data.draw(st.sampled_from(HOWS))
    pred = data.draw(st.sampled_from([WindowPredicate.band(2, 3), WindowPredicate.tumbling(5)]))
    policy = data.draw(st.sampled_from([LatePolicy.DROP, LatePolicy.SIDE_OUTPUT]))
    cfg = JoinConfig(pred, ON, how, "both", late=policy)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(feed)), min_size=1, max_size=3)))

    out, late, last, going_on = _resumed(cfg, n, feed, cuts)
    whole_op, one_op = KeyedJoin(cfg, n), SplitJoin(cfg, 1)
    whole = drive_operator(whole_op, [INFO, INFO_R], feed)
    one = drive_operator(one_op, [INFO, INFO_R], feed)
    want = comparable_elements(whole)
    assert comparable_elements(out) == want == comparable_elements(one), cuts
    assert comparable_elements(going_on) == want  # a snapshot changes nothing
    assert last.metrics.late == whole_op.metrics.late == one_op.metrics.late
    assert late == _late_rows(whole_op)  # side output: each late tuple once, in order

    left, right, n_late = _on_time(feed)
    assert last.metrics.late_total == n_late  # each late tuple counted once, no other
    got = _bag(out)
    assert got == nested_loop_join(left, right, pred, ON, "ts", "ts", how=how)
    if how == "full":  # every on-time tuple is in the output, joined or padded with nulls
        tuples = {("l", r["ts"], r["key"], r["val"]) for r in left.to_pylist()}
        tuples |= {("r", r["ts"], r["key"], r["val"]) for r in right.to_pylist()}
        seen = {("l", *row[:3]) for row in got if row[0] is not None}
        seen |= {("r", *row[3:]) for row in got if row[3] is not None}
        assert seen == tuples


def test_another_partition_count_resumes_on_the_checkpoints_count() -> None:
    """A 2-partition snapshot restored into a join asked for 3 partitions runs on the
    checkpoint's 2 (the state is laid out by ``hash mod N``) and goes on exactly as the
    2-partition join that took the snapshot."""
    cfg = JoinConfig(WindowPredicate.band(2, 3), ON, "full")

    def batch(ts: list[int], keys: list[int]) -> pa.RecordBatch:
        return pa.record_batch({"ts": ts, "key": keys, "val": list(range(len(ts)))},
                               schema=INFO.schema)

    first = [(0, batch([1, 2, 3], [0, 1, 2])), (1, batch([1, 2, 3], [0, 1, 2]))]
    rest = [(0, batch([4, 6, 9], [1, 2, 3])), (1, batch([5, 8, 9], [1, 3, 0]))]
    two = KeyedJoin(cfg, 2)
    drive_operator(two, [INFO, INFO_R], first, end=False)
    saved = _checkpointed(two)
    three = KeyedJoin(cfg, 3)
    three.open([INFO, INFO_R])
    three.restore(saved["state"])
    assert three.n == 2 and len(three.parts) == 2 and three.threads_asked == 3
    assert three.state_size() == two.state_size() and three.state_size().items > 0
    from oop.sql.explain import _describe

    threads = [ln for ln in _describe(three, True) if ln.startswith("threads:")]
    assert threads and threads[0].startswith("threads: 2 key partitions")
    assert threads[0].endswith("; the checkpoint's count (3 asked)"), threads
    want = comparable_elements(drive_operator(two, (), rest))
    got = comparable_elements(drive_operator(three, (), rest))
    assert sum(e[0] == "row" for e in want) > 0 and got == want


def test_the_fingerprint_leaves_the_partition_count_to_the_restore() -> None:
    """``--threads 3`` and ``4`` (KeyedJoin on 2 / 3 partitions) have one fingerprint, so the
    restore's line is the one a user sees; across the one-thread join (SplitJoin) the line
    says to resume with the thread count of the run that wrote the checkpoint."""
    t = pa.table({"ts": [1, 2, 30], "key": [1, 2, 1], "val": [1, 2, 3]})

    def lines(workers: int) -> list[str]:
        s = [oop.from_arrow(t, time="ts", punctuation=oop.BoundedDelay(0), name=x)
             for x in "LR"]
        ex, _ = s[0].join(s[1], on="key", band=(1, 1), workers=workers, ordered=True,
                          keyed=True).executor()
        return plan_description(ex)

    one, two, three = lines(1), lines(2), lines(3)
    assert any("KeyedJoin" in ln for ln in two) and two == three
    msg = describe_difference(one, two)
    assert "operator 'join' ran on key partitions in the checkpoint, on one thread here" in msg
    assert "thread count" in msg, msg


# ---- oop sql, end to end ---------------------------------------------------------------
def _sql(tmp_path: Path, threads: int, out: str, *extra: str, fault: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    """``oop sql`` FULL JOIN of two disordered tables with late tuples, results to the part
    folder ``out``; ``extra``: more flags (the checkpoint ones)."""
    script = "".join(
        f"CREATE TABLE {n} (ts BIGINT, k STRING, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL "
        f"'1' SECOND) WITH ('path' = '{tmp_path / n}', 'time-unit' = 'ms');\n" for n in "ab")
    script += ("SELECT a.k, a.ts, a.v, b.ts AS bts, b.v AS bv FROM a FULL JOIN b ON a.k = b.k "
               "AND b.ts BETWEEN a.ts - INTERVAL '200' MILLISECOND AND a.ts + INTERVAL '100' "
               "MILLISECOND")
    env = {k: v for k, v in os.environ.items() if k != "OOP_FAULT"}
    env["PYTHONPATH"] = str(ROOT)
    if fault:
        env["OOP_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "oop.cli", "sql", "-e", script, "--threads",
                           str(threads), "--batch-size", "1000", "--quiet", "--out",
                           f"{tmp_path / out}/", "--metrics", str(tmp_path / f"{out}.json"),
                           *extra], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def _parts(folder: Path) -> pa.Table:
    """The committed parts of a part folder, in part (commit) order."""
    return pa.concat_tables(pq.read_table(p) for p in sorted(folder.iterdir())
                            if not p.name.startswith("."))


def test_oop_sql_join_on_key_partitions_checkpoints_and_resumes(tmp_path: Path) -> None:
    """``oop sql --threads 3 --checkpoint-dir`` plans the equi-join on 2 key partitions, is
    killed right after its first checkpoint, resumes with ``--threads 4`` on the
    checkpoint's 2 partitions (EXPLAIN ANALYZE says so) and then equals ``--threads 1`` row
    for row, in order."""
    rng = np.random.default_rng(11)
    for name, n, step in (("a", 12_000, 5), ("b", 6_000, 10)):
        (tmp_path / name).mkdir()
        ts = np.arange(n, dtype=np.int64) * step + rng.integers(0, 1500, n)
        pq.write_table(pa.table({"ts": ts, "k": [f"k{i}" for i in rng.integers(0, 30, n)],
                                 "v": rng.integers(0, 99, n)}),
                       tmp_path / name / "part-0.parquet", row_group_size=1000)
    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    ref = _sql(tmp_path, 1, "ref")
    assert ref.returncode == 0, ref.stderr
    ck = ["--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "3000rows"]
    killed = _sql(tmp_path, 3, "out", *ck, fault="checkpoint-after-rename")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = _sql(tmp_path, 4, "out", *ck)
    assert done.returncode == 0, done.stderr
    assert "resumed from the checkpoint" in done.stderr
    want, got = _parts(tmp_path / "ref"), _parts(tmp_path / "out")
    assert want.num_rows > 10_000 and got.equals(want)
    assert want.column("bts").null_count > 0  # unmatched rows of a are in the output
    notes = json.loads((tmp_path / "out.json").read_text())["threads"]["operators"]
    # the plan's note names the count --threads 4 asked for (3); the run says what it used
    assert any("key partitions" in x and "KeyedJoin" in x for x in notes), notes
    adopted = json.loads((tmp_path / "out.json").read_text())["partitions_from_checkpoint"]
    assert list(adopted.values()) == [{"partitions": 2, "asked": 3}], adopted
    (name,) = adopted
    assert f"{name}: resumed on the checkpoint's 2 key partitions (this run asked for 3" in \
        "\n".join(notes), notes
