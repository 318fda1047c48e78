"""oop.sql against DuckDB: each supported form, on disordered data with string keys and nulls.

Every expected result is a batch query written by hand for DuckDB over the
whole input, minus the rows the punctuation makes late. The late rows come
from a small reference of the source's rule (BoundedDelay(d), punctuation
after every batch): row i is late iff ``ts_i < max(ts of the batches before
row i's batch) - d``. Most tests keep the disorder within the bound (nothing
late, and the reference is checked to say so); ``test_late_rows_*`` does not.
Hypothesis properties over disorder / delay / batching are in ``test_sql_properties.py``.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import oop

SEEDS = [0, 1, 2]


# ---- data and references -------------------------------------------------------
def disordered(seed: int, n: int = 300, jitter: int = 2000, span: int = 60) -> pa.Table:
    """Unique ms times in [0, span s), in an arrival order where a row comes at most
    ``jitter`` ms of event time after a later-stamped one; string keys and values with nulls."""
    rng = np.random.default_rng(seed)
    ts = rng.choice(span * 1000, n, replace=False).astype(np.int64)
    order = np.argsort(ts + rng.integers(0, jitter, n), kind="stable")
    ts = ts[order]
    k = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n)
    k[rng.random(n) < 0.1] = None
    k2 = rng.choice(np.array(["x", "y", "z"], dtype=object), n)
    k2[rng.random(n) < 0.2] = None
    v = np.round(rng.normal(10, 5, n), 3)
    v_mask = rng.random(n) < 0.1
    return pa.table({"ts": pa.array(ts), "k": pa.array(k, pa.string()),
                     "k2": pa.array(k2, pa.string()),
                     "v": pa.array(v, mask=v_mask), "w": pa.array(rng.integers(0, 100, n)),
                     "rid": pa.array(np.arange(n))})


def late_rows(ts: list[int], delay: int, batch_size: int) -> set[int]:
    """Positions of the rows BoundedDelay(delay) makes late with punctuation after every
    ``batch_size`` rows (``+cadence:{batch_size}rows``, whatever the batches)."""
    late: set[int] = set()
    seen_max: int | None = None
    for start in range(0, len(ts), batch_size):
        batch = ts[start:start + batch_size]
        if seen_max is not None:
            late.update(start + i for i, t in enumerate(batch) if t < seen_max - delay)
        seen_max = max(batch) if seen_max is None else max(seen_max, max(batch))
    return late


def duck(query: str, **tables: pa.Table) -> list[dict[str, Any]]:
    con = duckdb.connect()
    for name, t in tables.items():
        con.register(name, t)
    cur = con.execute(query)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, 6)
    if hasattr(v, "timestamp") and not isinstance(v, (int, float)):
        return v.replace(tzinfo=None).isoformat()
    return v


def rows(rs: list[dict[str, Any]] | pa.Table) -> list[tuple]:
    if isinstance(rs, pa.Table):
        rs = rs.to_pylist()
    out = [tuple((k, _norm(v)) for k, v in r.items()) for r in rs]
    return sorted(out, key=repr)


def same(got: pa.Table, want: list[dict[str, Any]]) -> None:
    g, w = rows(got), rows(want)
    assert len(g) == len(w), (len(g), len(w))
    for a, b in zip(g, w):
        assert [k for k, _ in a] == [k for k, _ in b]
        for (k, x), (_, y) in zip(a, b):
            if isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6), (k, x, y, a, b)
            else:
                assert x == y, (k, x, y, a, b)


DDL = """
CREATE TABLE t (ts BIGINT, k STRING, k2 STRING, v DOUBLE, w BIGINT, rid BIGINT,
                WATERMARK FOR ts AS ts - INTERVAL '{d}' MILLISECOND)
WITH ('time-unit' = 'ms', 'punctuation' = 'bounded:{d}ms+cadence:{bs}rows',
      'batch-size' = '5');
"""


def ddl(name: str = "t", d: int = 2000, bs: int = 16) -> str:
    return DDL.replace("TABLE t", f"TABLE {name}").format(d=d, bs=bs)


# ---- row-wise forms ------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_where_and_projection(seed: int) -> None:
    t = disordered(seed)
    assert not late_rows(t.column("ts").to_pylist(), 2000, 16)
    q = ddl() + """SELECT k, v * 2 + 1 AS v2, ts, UPPER(k2) AS K2,
                   CASE WHEN w > 50 THEN 'hi' ELSE 'lo' END AS band, COALESCE(k2, '-') AS k3
                   FROM t WHERE (v > 8.5 OR k IS NULL) AND k2 IS NOT NULL AND w BETWEEN 10 AND 90
                     AND k2 IN ('x', 'y') AND k2 NOT LIKE 'z%'"""
    got = oop.sql(q, {"t": t}).collect()
    assert got.column_names == ["k", "v2", "ts", "K2", "band", "k3"]
    want = duck("""SELECT k, v * 2 + 1 AS v2, ts, upper(k2) AS K2,
                   CASE WHEN w > 50 THEN 'hi' ELSE 'lo' END AS band, coalesce(k2, '-') AS k3
                   FROM t WHERE (v > 8.5 OR k IS NULL) AND k2 IS NOT NULL
                     AND w BETWEEN 10 AND 90 AND k2 IN ('x', 'y') AND k2 NOT LIKE 'z%'""", t=t)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_union_all(seed: int) -> None:
    a, b = disordered(seed), disordered(seed + 100, n=200)
    q = ddl("a") + ddl("b") + "SELECT ts, k, v FROM a WHERE w < 50 UNION ALL SELECT ts, k2, v FROM b"
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck("SELECT ts, k, v FROM a WHERE w < 50 UNION ALL SELECT ts, k2, v FROM b", a=a, b=b)
    same(got, want)


# ---- window TVFs -----------------------------------------------------------------
AGGS_SQL = """COUNT(*) AS n, COUNT(v) AS nv, COUNT(DISTINCT k2) AS dk, SUM(w) AS sw, AVG(v) AS av,
    MIN(v) AS mn, MAX(k2) AS mx, STDDEV_SAMP(v) AS sd, VAR_SAMP(v) AS vr, MEDIAN(v) AS md,
    PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY v) AS p25, FIRST_VALUE(v) AS fv,
    LAST_VALUE(w) AS lw"""
AGGS_DUCK = """count(*) AS n, count(v) AS nv, count(DISTINCT k2) AS dk, sum(w) AS sw,
    avg(v) AS av, min(v) AS mn, max(k2) AS mx, stddev_samp(v) AS sd, var_samp(v) AS vr,
    median(v) AS md, quantile_cont(v, 0.25) AS p25,
    arg_min(v, ts) FILTER (WHERE v IS NOT NULL) AS fv, arg_max(w, ts) AS lw"""


@pytest.mark.parametrize("seed", SEEDS)
def test_tumble_all_aggregates(seed: int) -> None:
    t = disordered(seed)
    q = ddl() + f"""SELECT window_start, window_end, k, {AGGS_SQL}
        FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"t": t}).collect()
    want = duck(f"""SELECT ts // 10000 * 10000 AS window_start,
        ts // 10000 * 10000 + 10000 AS window_end, k, {AGGS_DUCK}
        FROM t GROUP BY ALL""", t=t)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_hop_with_expressions(seed: int) -> None:
    t = disordered(seed)
    q = ddl() + """SELECT k2, window_start AS ws, window_end, SUM(w) / COUNT(*) AS mean_w,
        MAX(v) - MIN(v) AS spread, COUNT(*) AS n
        FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
        WHERE w > 5 GROUP BY window_start, window_end, k2 HAVING COUNT(*) > 2"""
    got = oop.sql(q, {"t": t}).collect()
    want = duck("""WITH win AS (SELECT range AS ws FROM range(-15000, 80000, 5000))
        SELECT k2, ws, ws + 15000 AS window_end, sum(w) // count(*) AS mean_w,
               max(v) - min(v) AS spread, count(*) AS n
        FROM t JOIN win ON t.ts >= ws AND t.ts < ws + 15000 WHERE w > 5
        GROUP BY k2, ws HAVING count(*) > 2""", t=t)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_cumulate(seed: int) -> None:
    t = disordered(seed)
    q = ddl() + """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(w) AS sw, MAX(v) AS mv
        FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '12' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"t": t}).collect()
    want = duck("""WITH win AS (SELECT s.range AS ws, s.range + j.range * 4000 AS we
                               FROM range(0, 72000, 12000) s, range(1, 4) j)
        SELECT ws AS window_start, we AS window_end, k, count(*) AS n, sum(w) AS sw, max(v) AS mv
        FROM t JOIN win ON t.ts >= ws AND t.ts < we GROUP BY ALL""", t=t)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS)
def test_window_over_union(seed: int) -> None:
    a, b = disordered(seed), disordered(seed + 7, n=150)
    q = ddl("a") + ddl("b", d=2500, bs=9) + """
        CREATE VIEW u AS SELECT ts, k, w FROM a UNION ALL SELECT ts, k, w FROM b;
        SELECT window_start, k, COUNT(*) AS n, SUM(w) AS sw
        FROM TABLE(TUMBLE(TABLE u, DESCRIPTOR(ts), INTERVAL '20' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck("""SELECT ts // 20000 * 20000 AS window_start, k, count(*) AS n, sum(w) AS sw
        FROM (SELECT ts, k, w FROM a UNION ALL SELECT ts, k, w FROM b) GROUP BY ALL""", a=a, b=b)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_cascading_windows_on_window_time(seed: int) -> None:
    t = disordered(seed)
    q = ddl() + """
        CREATE VIEW per_k AS SELECT k, window_time AS wt, COUNT(*) AS n, SUM(w) AS sw
          FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))
          GROUP BY window_start, window_end, window_time, k;
        SELECT window_start, window_time, SUM(n) AS n, MAX(sw) AS top, COUNT(*) AS keys
        FROM TABLE(HOP(TABLE per_k, DESCRIPTOR(wt), INTERVAL '10' SECOND, INTERVAL '20' SECOND))
        GROUP BY window_start, window_end"""
    got = oop.sql(q, {"t": t}).collect()
    want = duck("""WITH per_k AS (SELECT k, ts // 5000 * 5000 + 4999 AS wt, count(*) AS n,
                                 sum(w) AS sw FROM t GROUP BY ALL),
                    win AS (SELECT range AS ws FROM range(-20000, 80000, 10000))
        SELECT ws AS window_start, ws + 19999 AS window_time, sum(n) AS n, max(sw) AS top,
               count(*) AS keys
        FROM per_k JOIN win ON wt >= ws AND wt < ws + 20000 GROUP BY ws""", t=t)
    same(got, want)


# ---- interval joins ------------------------------------------------------------------
@pytest.mark.parametrize("how", ["INNER", "LEFT", "RIGHT", "FULL OUTER"])
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_interval_join(how: str, seed: int) -> None:
    a, b = disordered(seed, n=120), disordered(seed + 50, n=100)
    q = ddl("a") + ddl("b", bs=5) + f"""SELECT a.k, a.ts, b.ts AS bts, b.w, a.v
        FROM a {how} JOIN b ON a.k = b.k
         AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '2' SECOND
         AND b.w > a.w"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck(f"""SELECT a.k, a.ts, b.ts AS bts, b.w, a.v FROM a {how} JOIN b ON a.k = b.k
        AND b.ts BETWEEN a.ts - 1000 AND a.ts + 2000 AND b.w > a.w""", a=a, b=b)
    same(got, want)


def test_interval_join_written_with_comparisons() -> None:
    a, b = disordered(3, n=120), disordered(4, n=100)
    q = ddl("a") + ddl("b") + """SELECT x.k2, x.ts, y.ts AS yts FROM a AS x JOIN b AS y
        ON x.k2 = y.k2 AND x.ts >= y.ts - INTERVAL '500' MILLISECOND
        AND y.ts + INTERVAL '1.5' SECOND >= x.ts AND x.ts <= y.ts + INTERVAL '1' SECOND"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck("""SELECT x.k2, x.ts, y.ts AS yts FROM a x JOIN b y ON x.k2 = y.k2
        AND x.ts >= y.ts - 500 AND x.ts <= y.ts + 1000""", a=a, b=b)
    same(got, want)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_window_over_join(seed: int) -> None:
    a, b = disordered(seed, n=150), disordered(seed + 9, n=150)
    q = ddl("a") + ddl("b") + """
        CREATE VIEW j AS SELECT a.k AS k, b.ts AS bts, a.w + b.w AS ww
          FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '2' SECOND AND b.ts;
        SELECT k, window_start, COUNT(*) AS n, SUM(ww) AS s
        FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(bts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck("""SELECT a.k, b.ts // 10000 * 10000 AS window_start, count(*) AS n,
        sum(a.w + b.w) AS s FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts - 2000 AND b.ts
        GROUP BY ALL""", a=a, b=b)
    same(got, want)


def test_join_of_a_join_view_renames_clashing_columns() -> None:
    a, b, c = disordered(12, n=80), disordered(13, n=80), disordered(14, n=80)
    q = ddl("a") + ddl("b") + ddl("c") + """
        CREATE VIEW ab AS SELECT * FROM a JOIN b ON a.k = b.k
          AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND;
        SELECT ab.ts, ab.ts_right, c.ts AS cts, c.w
        FROM ab JOIN c ON ab.k2_right = c.k2 AND c.ts BETWEEN ab.ts AND ab.ts + INTERVAL '3' SECOND"""
    got = oop.sql(q, {"a": a, "b": b, "c": c}).collect()
    want = duck("""SELECT a.ts, b.ts AS ts_right, c.ts AS cts, c.w FROM a
        JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - 2000 AND a.ts + 2000
        JOIN c ON b.k2 = c.k2 AND c.ts BETWEEN a.ts AND a.ts + 3000""", a=a, b=b, c=c)
    assert want
    same(got, want)


def test_tumble_rows_without_group_by() -> None:
    t = disordered(17)
    q = ddl() + """SELECT k, ts, window_start, window_end, window_time
        FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '7' SECOND)) WHERE w > 20"""
    got = oop.sql(q, {"t": t}).collect()
    want = duck("""SELECT k, ts, ts // 7000 * 7000 AS window_start,
        ts // 7000 * 7000 + 7000 AS window_end, ts // 7000 * 7000 + 6999 AS window_time
        FROM t WHERE w > 20""", t=t)
    same(got, want)


@pytest.mark.parametrize("how", ["INNER", "LEFT", "FULL OUTER"])
def test_window_join(how: str) -> None:
    a, b = disordered(18, n=150), disordered(19, n=120)
    q = ddl("a") + ddl("b", bs=7) + f"""
        SELECT L.k2, L.rid, R.rid AS rrid, COALESCE(L.window_start, R.window_start) AS ws,
               R.window_end AS rwe
        FROM (SELECT * FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '5' SECOND))) L
        {how} JOIN (SELECT * FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '5' SECOND))) R
        ON L.k2 = R.k2 AND L.window_start = R.window_start AND L.window_end = R.window_end"""
    got = oop.sql(q, {"a": a, "b": b}).collect()
    want = duck(f"""WITH L AS (SELECT *, ts // 5000 * 5000 AS ws FROM a),
                          R AS (SELECT *, ts // 5000 * 5000 AS ws FROM b)
        SELECT L.k2, L.rid, R.rid AS rrid, coalesce(L.ws, R.ws) AS ws, R.ws + 5000 AS rwe
        FROM L {how} JOIN R ON L.k2 = R.k2 AND L.ws = R.ws""", a=a, b=b)
    same(got, want)


def test_computed_event_time_column(tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    t = disordered(22).rename_columns(["epoch", "k", "k2", "v", "w", "rid"])
    pq.write_table(t, tmp_path / "e.parquet")
    q = f"""CREATE TABLE e (epoch BIGINT, k STRING, w BIGINT,
              ts AS TO_TIMESTAMP_LTZ(epoch, 3), w2 AS w * 2 + 1,
              WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
            WITH ('path' = '{tmp_path}/e.parquet', 'batch-size' = '16');
        SELECT k, window_start, SUM(w2) AS s, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q).collect()
    assert got.schema.field("window_start").type == pa.timestamp("ms", "UTC")
    want = duck("""SELECT k, make_timestamp((epoch // 10000 * 10000) * 1000) AS window_start,
        sum(w * 2 + 1) AS s, count(*) AS n FROM e GROUP BY ALL""", e=t)
    same(got, want)


# ---- late rows, files, in-order plans ------------------------------------------------------
@pytest.mark.parametrize("bs", [1, 7, 32])
def test_late_rows_are_those_of_the_punctuation_rule(bs: int) -> None:
    t = disordered(11, n=300, jitter=6000)
    d = 1000
    late = late_rows(t.column("ts").to_pylist(), d, bs)
    assert 0 < len(late) < t.num_rows  # the test covers both
    q = ddl(d=d, bs=bs) + """SELECT window_start, k, COUNT(*) AS n, SUM(w) AS sw, MAX(v) AS mv
        FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q, {"t": t}).collect()
    on_time = t.filter(pa.array([i not in late for i in range(t.num_rows)]))
    want = duck("""WITH win AS (SELECT range AS ws FROM range(-6000, 70000, 2000))
        SELECT ws AS window_start, k, count(*) AS n, sum(w) AS sw, max(v) AS mv
        FROM t JOIN win ON t.ts >= ws AND t.ts < ws + 6000 GROUP BY ALL""", t=on_time)
    same(got, want)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_timestamp_table_from_a_file(tmp_path: Any, fmt: str) -> None:
    t = disordered(5)
    ts = t.column("ts").cast(pa.timestamp("ms"))
    data = t.set_column(0, "ts", ts).drop_columns(["k2"])
    if fmt == "csv":  # CSV has no null strings: they read back as ""
        data = data.set_column(1, "k", pa.compute.fill_null(data.column("k"), ""))
    path = tmp_path / f"t.{fmt}"
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, path)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(data, path)
    q = f"""CREATE TABLE t (ts TIMESTAMP(3), k STRING, v DOUBLE, w BIGINT,
              WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
            WITH ('path' = '{path}', 'format' = '{fmt}', 'batch-size' = '10');
        SELECT k, window_start, window_end, COUNT(*) AS n, SUM(w) AS sw
        FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '15' SECOND))
        GROUP BY window_start, window_end, k"""
    got = oop.sql(q).collect()
    assert pa.types.is_timestamp(got.schema.field("window_start").type)
    want = duck("""SELECT k, time_bucket(INTERVAL 15 SECOND, ts::TIMESTAMP) AS window_start,
        time_bucket(INTERVAL 15 SECOND, ts::TIMESTAMP) + INTERVAL 15 SECOND AS window_end,
        count(*) AS n, sum(w) AS sw FROM d GROUP BY ALL""", d=data)
    same(got, want)


@pytest.mark.parametrize("strategy", ["iop-sort", "iop-slack:2s"])
def test_in_order_strategies_agree(strategy: str) -> None:
    t = disordered(8)
    q = ddl() + """SELECT window_start, k, COUNT(*) AS n, SUM(w) AS sw, AVG(v) AS av
        FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
        WHERE w > 3 GROUP BY window_start, window_end, k"""
    oop_rows = oop.sql(q, {"t": t}).collect()
    iop_rows = oop.sql(q, {"t": t}, strategy=strategy).collect()
    same(iop_rows, oop_rows.to_pylist())


def test_in_order_inner_join_agrees() -> None:
    a, b = disordered(15, n=100), disordered(16, n=100)
    q = ddl("a") + ddl("b") + """SELECT a.k, a.ts, b.ts AS bts FROM a JOIN b ON a.k = b.k
        AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND"""
    want = duck("""SELECT a.k, a.ts, b.ts AS bts FROM a JOIN b ON a.k = b.k
        AND b.ts BETWEEN a.ts - 1000 AND a.ts + 1000""", a=a, b=b)
    same(oop.sql(q, {"a": a, "b": b}, strategy="iop-sort").collect(), want)
    text = oop.sql("EXPLAIN " + q.split(";")[-1], {"a": oop.sql(ddl("a") + "SELECT * FROM a",
                                                                 {"a": a}),
                                                    "b": oop.sql(ddl("b") + "SELECT * FROM b",
                                                                 {"b": b})},
                   strategy="iop-sort")
    assert "[OPOBJoin]" in text and "[SortBuffer]" in text


def test_streams_and_insert_positional_names() -> None:
    t = disordered(9)
    s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay("2s"), batch_size=8)
    plan = oop.sql.plan_sql("""CREATE TABLE out (key STRING, n BIGINT) WITH ('path' = 'x.csv');
        INSERT INTO out SELECT k, COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),
        INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, k""", tables={"t": s})
    got = plan.stream.collect()
    assert plan.sink_name == "out" and plan.sink_target() == ("x.csv", None)
    same(got, duck("SELECT k AS key, count(*) AS n FROM t GROUP BY k", t=t))
