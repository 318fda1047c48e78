"""oop.sql properties: Hypothesis over disorder, delay, batching (window and join against DuckDB
minus the rows the punctuation rule makes late), table options, and checkpoint resume."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings, strategies as st

import oop
from test_sql import ddl, disordered, duck, late_rows, rows, same

# ---- property: any disorder, delay and batching ---------------------------------------
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), jitter=st.integers(1, 8000), delay=st.integers(0, 4000),
       bs=st.integers(1, 64), size=st.sampled_from([1, 3, 10]))
def test_tumble_matches_duckdb_minus_late_rows(seed: int, jitter: int, delay: int, bs: int,
                                               size: int) -> None:
    t = disordered(seed, n=150, jitter=jitter, span=30)
    late = late_rows(t.column("ts").to_pylist(), delay, bs)
    q = ddl(d=delay, bs=bs) + f"""SELECT k, window_start, COUNT(*) AS n, SUM(w) AS sw,
        MIN(v) AS mn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '{size}' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"t": t}).collect()
    on_time = t.filter(pa.array([i not in late for i in range(t.num_rows)]))
    want = duck(f"""SELECT k, ts // {size * 1000} * {size * 1000} AS window_start,
        count(*) AS n, sum(w) AS sw, min(v) AS mn FROM t GROUP BY ALL""", t=on_time)
    same(got, want)


def test_a_stopped_sql_plan_resumes_from_an_encoded_checkpoint() -> None:
    from oop.checkpoint.codec import decode, encode
    from oop.plan.executor import Checkpoint

    t = disordered(3)
    q = ddl(bs=10) + """SELECT window_start, window_end, window_time, k, COUNT(*) AS n
        FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '12' SECOND))
        GROUP BY window_start, window_end, window_time, k"""
    full = oop.sql(q, {"t": t}).collect()
    first = oop.sql(q, {"t": t}).run(stop_after_rounds=7)
    cp = first.checkpoint
    tree, arrays = encode(cp.states)
    res = oop.sql(q, {"t": t}).run(resume_from=Checkpoint(cp.rounds, decode(tree, arrays),
                                                           cp.metrics))
    # a checkpoint holds no output: the rows before the cut plus the rows after it
    assert rows(pa.concat_tables([first.table, res.table])) == rows(full)


def test_punctuation_and_late_options() -> None:
    t = disordered(21, n=200, jitter=5000)
    late = late_rows(t.column("ts").to_pylist(), 500, 8)
    assert late
    q = """CREATE TABLE t (ts BIGINT, k STRING, k2 STRING, v DOUBLE, w BIGINT, rid BIGINT,
             WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
           WITH ('time-unit' = 'ms', 'punctuation' = 'bounded:500ms+cadence:8rows',
                 'late' = 'side_output', 'batch-size' = '3');
           SELECT rid FROM t"""
    res = oop.sql(q, {"t": t}).run()
    side = pa.concat_tables(list(res.late.values()))
    assert set(side.column("rid").to_pylist()) == late
    assert set(res.table.column("rid").to_pylist()) == set(range(t.num_rows)) - late
    text = oop.sql(q.replace("SELECT rid", "EXPLAIN SELECT rid"), {"t": t})
    assert ("punctuation: Cadence(inner=BoundedDelay(delay='500ms'), rows=8); "
            "late: side_output") in text


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), jitter=st.integers(1, 6000), delay=st.integers(0, 3000),
       bs=st.integers(1, 40), how=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL"]),
       lo=st.integers(-2000, 1000), width=st.integers(0, 3000))
def test_interval_join_matches_duckdb_minus_late_rows(seed: int, jitter: int, delay: int,
                                                      bs: int, how: str, lo: int,
                                                      width: int) -> None:
    a = disordered(seed, n=60, jitter=jitter, span=20)
    b = disordered(seed + 1, n=60, jitter=jitter, span=20)
    keep = {}
    for name, t in (("a", a), ("b", b)):
        late = late_rows(t.column("ts").to_pylist(), delay, bs)
        keep[name] = t.filter(pa.array([i not in late for i in range(t.num_rows)]))
    hi = lo + width
    bound = (lambda v: f"a.ts + INTERVAL '{v}' MILLISECOND" if v >= 0
             else f"a.ts - INTERVAL '{-v}' MILLISECOND")
    q = ddl("a", d=delay, bs=bs) + ddl("b", d=delay, bs=bs) + f"""
        SELECT a.rid, b.rid AS brid FROM a {how} JOIN b
        ON a.k2 = b.k2 AND b.ts BETWEEN {bound(lo)} AND {bound(hi)}"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck(f"""SELECT a.rid, b.rid AS brid FROM a {how} JOIN b
        ON a.k2 = b.k2 AND b.ts BETWEEN a.ts + {lo} AND a.ts + {hi}""", **keep)
    same(got, want)
