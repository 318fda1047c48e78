"""IOP baselines beside their OOP counterparts, same workloads, same run (004 §6.1, ch. 7).

Workloads (int64 ``ts``, ``key`` in 0..99, ``val``; band disorder: every
tuple at most ``--delay`` behind the newest, punctuation ``BoundedDelay``):

1. *union of 4 sources* (one lags ``--skew`` time units behind the others):
   Meld (OOP) vs sort + order-preserving Merge (IOP) -- tuples/s, peak
   buffered tuples.
2. *sliding window count+sum by key* (RANGE ``--range``, SLIDE ``--slide``):
   OOP WID window vs ``iop-sort`` (heartbeat sort + buffering window),
   ``iop-slack`` consistent and generous with the exact delay, and with half
   of it (accuracy < 1) -- tuples/s, peak state items, latency p50, dropped,
   accuracy (mean error % of count).
3. *buffering variants*: materialise-every-extent vs differential (Eq. 6.4).
4. *sort buffers alone*: heartbeat, BSort(n), time slack(d).
5. *ordered output*: Reorder ring by serial vs heartbeat sort by time.

Each measurement is the best of ``--repeat`` runs after a warm-up.

Usage::

    python experiments/bench_iop.py                 # 1M tuples
    python experiments/bench_iop.py --rows 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa

import oop
from oop.iop_baseline import BufferingWindow, Merge, Reorder, SortBuffer
from oop.punctuation import External
from oop.query import WindowQuery, accuracy, dropped
from oop.window import aggregates as agg
from oop.window.kinds import Sliding

BATCH = 16_384


def band_table(n: int, delay: int, seed: int = 0, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = start + np.arange(n, dtype=np.int64)
    order = np.argsort(ts + rng.integers(0, delay + 1, n), kind="stable")
    return pa.table({"ts": pa.array(ts[order]), "key": pa.array(rng.integers(0, 100, n)[order]),
                     "val": pa.array(rng.integers(0, 1000, n)[order])})


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    res = fn()  # warm-up
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        t = min(t, time.perf_counter() - t0)
    return t, res


def peak(res: Any, prefix: tuple[str, ...] = ()) -> int:
    return sum(m.peak_state_items for n, m in res.metrics.items()
               if not prefix or n.startswith(prefix))


def lat(res: Any) -> float:
    vals = [m.latency_summary().get("latency_p50_ms") for m in res.metrics.values() if m.latency_ns]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else float("nan")


def row(name: str, n: int, secs: float, res: Any, **extra: Any) -> dict[str, Any]:
    return {"plan": name, "Mtuples/s": n / secs / 1e6, "peak_state": peak(res),
            "lat_p50_ms": lat(res), **extra}


def show(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n== {title}")
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print("  ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print("  ".join(f"{r.get(c, ''):>16.3f}" if isinstance(r.get(c), float)
                        else f"{str(r.get(c, '')):>16}" for c in cols))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--delay", type=int, default=200)
    ap.add_argument("--skew", type=int, default=5_000)
    ap.add_argument("--range", type=int, default=1_000)
    ap.add_argument("--slide", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)
    n, d = a.rows, a.delay

    # 1. union -----------------------------------------------------------------
    parts = [band_table(n // 4, 0, seed=i, start=(-a.skew if i == 3 else 0)) for i in range(4)]

    def srcs() -> list[Any]:
        return [oop.from_arrow(p, time="ts", batch_size=BATCH, punctuation=oop.Ordered(),
                               name=f"link{i}") for i, p in enumerate(parts)]

    t_meld, r_meld = best(lambda: (lambda s: s[0].meld(*s[1:]).run())(srcs()), a.repeat)
    t_merge, r_merge = best(lambda: (lambda s: s[0].via(Merge(4), *s[1:]).run())(srcs()), a.repeat)
    show(f"union of 4 ordered links, one {a.skew} behind ({n} tuples)", [
        row("OOP Meld", n, t_meld, r_meld), row("IOP Merge", n, t_merge, r_merge)])

    # 2. window ------------------------------------------------------------------
    t = band_table(n, d)
    kind = Sliding(a.range, a.slide)
    aggs = [agg.count(), agg.sum("val")]

    def plan(spec: str) -> Any:
        src = oop.from_arrow(t, time="ts", batch_size=BATCH, punctuation=oop.BoundedDelay(d))
        return WindowQuery([src], kind, aggs, by="key").plan(spec).run()

    rows = []
    base = None
    for spec in ("oop", "iop-sort", f"iop-slack:{d}", f"iop-slack:{d},generous",
                 f"iop-slack:{d // 2}", f"iop-slack:{d // 2},generous"):
        secs, res = best(lambda s=spec: plan(s), a.repeat)
        if base is None:
            base = res.table
        acc = accuracy(res.table, base, ["key", "window_start"], "count")
        rows.append(row(spec, n, secs, res, dropped=dropped(res),
                        mean_err_pct=acc.mean_error_pct))
    show(f"sliding count+sum by key, RANGE {a.range} SLIDE {a.slide}, band delay {d}", rows)

    # 3. buffering variants -----------------------------------------------------------
    srt = t.take(pa.compute.sort_indices(t, [("ts", "ascending")]))
    rows = []
    for diff in (False, True):
        op = lambda diff=diff: oop.from_arrow(srt, time="ts", batch_size=BATCH).via(  # noqa: E731
            BufferingWindow(kind, aggs, ("key",), differential=diff)).run()
        secs, res = best(op, a.repeat)
        rows.append(row("differential" if diff else "materialise", n, secs, res))
    secs, res = best(lambda: oop.from_arrow(srt, time="ts", batch_size=BATCH).window(
        kind, aggs, by="key").run(), a.repeat)
    rows.append(row("OOP WID (same)", n, secs, res))
    show("buffering window on ordered input", rows)

    # 4. sort buffers --------------------------------------------------------------
    rows = []
    for name, mk, punct in (
        ("heartbeat", lambda: SortBuffer(mode="punctuation"), oop.BoundedDelay(d)),
        (f"BSort n={4 * d}", lambda: SortBuffer(mode="tuples", slack=4 * d), External()),
        (f"time slack {d}", lambda: SortBuffer(mode="time", slack=d), External()),
    ):
        secs, res = best(lambda mk=mk, p=punct: oop.from_arrow(
            t, time="ts", batch_size=BATCH, punctuation=p).via(mk()).run(), a.repeat)
        rows.append(row(name, n, secs, res, dropped=dropped(res)))
    show(f"sort buffers on band disorder {d}", rows)

    # 5. ordered output ------------------------------------------------------------
    serial = t.append_column("seq", pa.array(np.argsort(np.argsort(t.column("ts").to_numpy(),
                                                                   kind="stable"))))
    rows = []
    for name, mk in (("Reorder ring (seq)", lambda: Reorder("seq", capacity=4096)),
                     ("heartbeat sort (ts)", lambda: SortBuffer(mode="punctuation"))):
        secs, res = best(lambda mk=mk: oop.from_arrow(serial, time="ts", batch_size=BATCH,
                                                      punctuation=oop.BoundedDelay(d)).via(mk()).run(),
                         a.repeat)
        rows.append(row(name, n, secs, res))
    show("ordered output after an order-agnostic stage", rows)
    import os

    print(f"\nload average: {os.getloadavg()[0]:.2f} (machine shared with other jobs)")


if __name__ == "__main__":
    main()
