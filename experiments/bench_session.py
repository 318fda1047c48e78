"""Session-window benchmark: oop's SessionAggregate, checked against DuckDB's gaps-and-islands.

Workload (numpy, in this script): ``--rows`` tuples over one hour of event
time (ms), ``--keys`` uniform keys, band disorder up to 2 s, float64
values; Arrow batches of ``--batch`` rows, punctuation ``BoundedDelay(2s)``
(exact: nothing is late). Query: count, sum(v), max(v) per key and session
of ``--gap`` ms. One warm-up run (numba compiles), then the timed run of the
whole pipeline (source + punctuation + window, results collected). The
result is compared with DuckDB's batch query over the same table
(``lag``/running ``sum`` of session starts); any difference exits 1.

    python experiments/bench_session.py --rows 1000000 --keys 200000 --batch 4096 --gap 600000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pyarrow as pa

import oop
from oop.window import Session, agg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=65_536)
    p.add_argument("--gap", type=int, default=5_000, help="session gap in ms")
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    ts = np.sort(rng.integers(0, 3_600_000, a.rows)) + rng.integers(0, 2_000, a.rows)
    t = pa.table({"ts": ts, "k": rng.integers(0, a.keys, a.rows), "v": rng.normal(0, 1, a.rows)})
    s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(2_000),
                       batch_size=a.batch)
    q = s.window(Session(a.gap), [agg.count(), agg.sum("v"), agg.max("v")], by="k")
    q.run()
    t0 = time.perf_counter()
    res = q.run()
    dt = time.perf_counter() - t0
    m = res.metrics["window"]
    print(f"rows={a.rows} keys={a.keys} batch={a.batch} gap={a.gap}ms: {a.rows / dt / 1e6:.2f} "
          f"M tuples/s ({dt:.2f} s), {res.table.num_rows} sessions, peak state "
          f"{m.peak_state_items} items / {m.peak_state_bytes} B, load {os.getloadavg()[0]:.1f}")
    import duckdb

    con = duckdb.connect()
    con.register("t", t)
    con.register("got", res.table)
    diff = con.execute(f"""
        WITH s AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k ORDER BY ts) < {a.gap}
                                  THEN 0 ELSE 1 END AS brk FROM t),
             g AS (SELECT *, sum(brk) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING)
                   AS sid FROM s),
             want AS (SELECT k, min(ts) AS ws, max(ts) + {a.gap} AS we, count(*) AS n, max(v) AS mx
                      FROM g GROUP BY k, sid),
             have AS (SELECT k, window_start AS ws, window_end AS we, count AS n, max_v AS mx
                      FROM got)
        SELECT (SELECT count(*) FROM (SELECT * FROM want EXCEPT SELECT * FROM have))
             + (SELECT count(*) FROM (SELECT * FROM have EXCEPT SELECT * FROM want))""").fetchone()
    print("DuckDB check:", "same sessions" if diff[0] == 0 else f"{diff[0]} rows differ")
    return 0 if diff[0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
