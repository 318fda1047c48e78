"""SQL SESSION windows against DuckDB: a hand-written gaps-and-islands batch query.

The DuckDB query numbers each key's sessions with window functions: a row
starts a session when the step from the key's previous row (by time) is
``>= gap`` (or it has none); a running sum of those starts is the session id.
Sessions are then ordinary groups: ``window_start = min(ts)``,
``window_end = max(ts) + gap``. The disorder stays within the WATERMARK
delay, so no row is late (checked with the source's rule).
"""

from __future__ import annotations

import math
import re
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import oop
from oop.sql import SqlError

DDL = """CREATE TABLE t (ts BIGINT, k STRING, v DOUBLE, w BIGINT,
                WATERMARK FOR ts AS ts - INTERVAL '{d}' MILLISECOND)
WITH ('time-unit' = 'ms', 'punctuation' = 'bounded:{d}ms+cadence:{bs}rows',
      'batch-size' = '5');
"""
OOP_AGGS = """COUNT(*) AS n, COUNT(v) AS nv, SUM(w) AS sw, AVG(v) AS av, MIN(v) AS mn,
    MAX(w) AS mx, STDDEV_SAMP(v) AS sd, VAR_SAMP(v) AS vr, FIRST_VALUE(v) AS fv,
    LAST_VALUE(w) AS lw"""
DUCK_AGGS = """count(*) AS n, count(v) AS nv, sum(w) AS sw, avg(v) AS av, min(v) AS mn,
    max(w) AS mx, stddev_samp(v) AS sd, var_samp(v) AS vr,
    arg_min(v, ts) FILTER (WHERE v IS NOT NULL) AS fv, arg_max(w, ts) AS lw"""


def disordered(seed: int, n: int = 300, jitter: int = 1500, span: int = 60) -> pa.Table:
    """Unique ms times in [0, span s) arriving up to ``jitter`` ms out of order; string keys
    and values with nulls."""
    rng = np.random.default_rng(seed)
    ts = rng.choice(span * 1000, n, replace=False).astype(np.int64)
    ts = ts[np.argsort(ts + rng.integers(0, jitter, n), kind="stable")]
    k = rng.choice(np.array(["a", "b", "c"], dtype=object), n)
    k[rng.random(n) < 0.1] = None
    v = np.round(rng.normal(10, 5, n), 3)
    return pa.table({"ts": pa.array(ts), "k": pa.array(k, pa.string()),
                     "v": pa.array(v, mask=rng.random(n) < 0.1),
                     "w": pa.array(rng.integers(0, 100, n))})


def no_late(ts: list[int], delay: int, bs: int) -> bool:
    """BoundedDelay(delay) with punctuation after every ``bs`` rows makes none late."""
    seen = None
    for s in range(0, len(ts), bs):
        if seen is not None and min(ts[s:s + bs]) < seen - delay:
            return False
        seen = max(ts[s:s + bs]) if seen is None else max(seen, max(ts[s:s + bs]))
    return True


def duck_sessions(t: pa.Table, gap: int, keys: str) -> list[dict[str, Any]]:
    part = f"PARTITION BY {keys}" if keys else ""
    q = f"""
    WITH s AS (SELECT *, CASE WHEN ts - lag(ts) OVER ({part} ORDER BY ts) < {gap}
                              THEN 0 ELSE 1 END AS brk FROM t),
         g AS (SELECT *, sum(brk) OVER ({part} ORDER BY ts ROWS UNBOUNDED PRECEDING) AS sid
               FROM s)
    SELECT {keys + ',' if keys else ''} min(ts) AS window_start, max(ts) + {gap} AS window_end,
           {DUCK_AGGS}
    FROM g GROUP BY {keys + ',' if keys else ''} sid"""
    con = duckdb.connect()
    con.register("t", t)
    cur = con.execute(q)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def same(got: pa.Table, want: list[dict[str, Any]]) -> None:
    def key(r: dict) -> str:
        return repr((r.get("k"), r["window_start"]))

    g = sorted(got.to_pylist(), key=key)
    w = sorted(want, key=key)
    assert len(g) == len(w) and len(g) > 0
    for a, b in zip(g, w):
        assert set(a) == set(b), (a, b)
        for c in a:
            x, y = a[c], b[c]
            if isinstance(x, float) or isinstance(y, float):
                assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-6,
                                                                 abs_tol=1e-6), (c, a, b)
            else:
                assert x == y, (c, a, b)


@pytest.mark.parametrize("seed,gap,bs", [(0, 500, 16), (1, 900, 7), (2, 300, 64)])
@pytest.mark.parametrize("form", ["partition", "group"])
def test_session_matches_duckdb_gaps_and_islands(seed: int, gap: int, bs: int, form: str) -> None:
    t = disordered(seed)
    assert no_late(t.column("ts").to_pylist(), 1500, bs)
    table = "TABLE t PARTITION BY k" if form == "partition" else "TABLE t"
    q = DDL.format(d=1500, bs=bs) + f"""
        SELECT k, window_start, window_end, {OOP_AGGS}
        FROM TABLE(SESSION({table}, DESCRIPTOR(ts), INTERVAL '{gap}' MILLISECOND))
        GROUP BY k, window_start, window_end"""
    same(oop.sql(q, {"t": t}).collect(), duck_sessions(t, gap, "k"))


def test_unkeyed_session_and_window_time() -> None:
    t = disordered(3)
    q = DDL.format(d=1500, bs=16) + f"""
        SELECT window_start, window_end, {OOP_AGGS}
        FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))
        GROUP BY window_start, window_end"""
    same(oop.sql(q, {"t": t}).collect(), duck_sessions(t, 1000, ""))


@pytest.mark.parametrize("q,msg", [
    ("SELECT COUNT(*) FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), "
     "INTERVAL '1' SECOND)) GROUP BY window_start, window_end", "PARTITION BY k must name"),
    ("SELECT * FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))",
     "SESSION without GROUP BY is not supported"),
])
def test_session_errors_are_one_line(q: str, msg: str) -> None:
    with pytest.raises(SqlError) as e:
        oop.sql(DDL.format(d=10, bs=4) + q, {"t": disordered(0, n=10)}).collect()
    assert msg in str(e.value) and "\n" not in str(e.value)
    assert re.match(r"^\d+:\d+: ", str(e.value))


def late_rows(ts: list[int], delay: int, bs: int) -> set[int]:
    """Rows BoundedDelay(delay) makes late with punctuation after every ``bs`` rows."""
    late: set[int] = set()
    seen = None
    for s in range(0, len(ts), bs):
        if seen is not None:
            late.update(s + i for i, t in enumerate(ts[s:s + bs]) if t < seen - delay)
        seen = max(ts[s:s + bs]) if seen is None else max(seen, max(ts[s:s + bs]))
    return late


@pytest.mark.parametrize("seed", [4, 5])
def test_late_rows_are_left_out_like_duckdb_without_them(seed: int) -> None:
    t = disordered(seed, jitter=4000)
    late = late_rows(t.column("ts").to_pylist(), 500, 8)
    assert late  # the disorder exceeds the delay: some rows are late
    kept = t.filter(pa.array([i not in late for i in range(t.num_rows)]))
    q = DDL.format(d=500, bs=8) + f"""
        SELECT k, window_start, window_end, {OOP_AGGS}
        FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '700' MILLISECOND))
        GROUP BY k, window_start, window_end"""
    same(oop.sql(q, {"t": t}).collect(), duck_sessions(kept, 700, "k"))
