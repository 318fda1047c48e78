"""Core throughput benchmark: pass-through, select 50%, 4-input Meld vs a bare numpy pass.

Every engine run replays N tuples (int64 ``ts``, ``key``, ``val``), pre-cut
into 64K-row RecordBatches (``oop.from_batches``; the Meld gets four sources of
N/4 tuples each), with a punctuation after every batch (``BoundedDelay``: the
feed's disorder is bounded by the delay, so nothing is late), into a
collecting sink. Beside it, in the same process and on the same arrays, a
bare numpy pass does the minimum any such pipeline must do per batch:

* *bare pass*: read the time column as a numpy view and take its max (the
  punctuation);
* *bare select*: the same plus the 50% mask and the compress of every column.

Each measurement is the best of ``--repeat`` runs after one warm-up; tuples/s
and the ratio to the matching bare pass are printed as a table.

Usage::

    python experiments/bench_core.py               # 10M tuples
    python experiments/bench_core.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import oop

BATCH = 65_536
DELAY = 100


def make_table(n: int, seed: int = 0) -> pa.Table:
    """ts = i + U[0, DELAY): disorder bounded by DELAY; val uniform so val < 0 is 50%."""
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64) + rng.integers(0, DELAY, n)
    key = rng.integers(0, 1000, n)
    val = rng.integers(-1_000_000, 1_000_000, n)
    return pa.table({"ts": ts, "key": key, "val": val})


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    fn()  # warm-up (imports, numba/Arrow caches)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bare_loop(batches: list[pa.RecordBatch], select: bool) -> int:
    """The per-batch minimum of a pipeline, in numpy: the time column as a view and its
    max minus ``DELAY`` (the punctuation); with ``select`` also the ``val < 0`` mask and
    the compress of every column. Returns the tuples passed on."""
    total = 0
    bound = np.iinfo(np.int64).min
    for b in batches:
        ts = b.column(0).to_numpy()
        bound = max(bound, int(ts.max()) - DELAY)
        if select:
            mask = b.column(2).to_numpy() < 0
            cols = [b.column(i).to_numpy()[mask] for i in range(b.num_columns)]
            total += len(cols[0])
        else:
            total += len(ts)
    return total


def bare_pass(batches: list[pa.RecordBatch]) -> int:
    """:func:`bare_loop` without the select (the pass-through floor)."""
    return bare_loop(batches, select=False)


def bare_select(batches: list[pa.RecordBatch]) -> int:
    """:func:`bare_loop` with the select 50% (the select floor)."""
    return bare_loop(batches, select=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="tuples per run (default 10M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per measurement")
    args = ap.parse_args(argv)
    n = args.rows
    table = make_table(n)
    batches = table.to_batches(max_chunksize=BATCH)
    quarters = [table.slice(k * (n // 4), n // 4 if k < 3 else n - 3 * (n // 4)) for k in range(4)]
    quarter_batches = [q.to_batches(max_chunksize=BATCH) for q in quarters]
    gen = oop.BoundedDelay(DELAY)

    def oop_pass() -> oop.Stream:
        return oop.from_batches(batches, time="ts", punctuation=gen)

    def oop_select() -> oop.Stream:
        return oop_pass().select(pc.field("val") < 0)

    def oop_meld() -> oop.Stream:
        s = [oop.from_batches(qb, time="ts", punctuation=gen, name=f"s{k}")
             for k, qb in enumerate(quarter_batches)]
        return s[0].meld(*s[1:])

    checks = {}

    def run(make: Callable[[], oop.Stream], label: str) -> Callable[[], object]:
        def go() -> object:
            res = make().run()
            checks[label] = (res.table.num_rows, len(res.punctuations), res.late_total)
            return res
        return go

    rows = [
        ("bare numpy pass", timed(lambda: bare_pass(batches), args.repeat), None, n),
        ("oop pass-through", timed(run(oop_pass, "pass"), args.repeat), "bare numpy pass", n),
        ("bare numpy select 50%", timed(lambda: bare_select(batches), args.repeat), None, n),
        ("oop select 50%", timed(run(oop_select, "select"), args.repeat),
         "bare numpy select 50%", n),
        ("oop 4-input meld", timed(run(oop_meld, "meld"), args.repeat), "bare numpy pass", n),
    ]
    best = {name: min(ts) for name, ts, _, _ in rows}
    print(f"# bench_core: {n:,} tuples, {BATCH:,}-row batches, a punctuation after every batch "
          f"({len(batches)} batches), best of {args.repeat} (median in brackets)")
    print(f"{'run':<24} {'tuples/s':>14} {'(median)':>14} {'seconds':>9} {'us/batch':>9} "
          f"{'vs bare':>8}")
    for name, ts, base, count in rows:
        tput = count / min(ts)
        med = count / statistics.median(ts)
        per_batch = min(ts) / len(batches) * 1e6
        ratio = f"{min(ts) / best[base]:.2f}x" if base else ""
        print(f"{name:<24} {tput:>14,.0f} {med:>14,.0f} {min(ts):>9.3f} {per_batch:>9.1f} "
              f"{ratio:>8}")
    out_pass, p_pass, late_pass = checks["pass"]
    out_sel, _, _ = checks["select"]
    out_meld, p_meld, late_meld = checks["meld"]
    print(f"# checks: pass-through rows {out_pass:,} (punctuations {p_pass}, late {late_pass}); "
          f"select kept {out_sel / n:.1%}; meld rows {out_meld:,} (punctuations {p_meld}, "
          f"late {late_meld})")
    ok = out_pass == n and out_meld == n and late_pass == 0 and late_meld == 0 and p_pass > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
