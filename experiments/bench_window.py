"""Window aggregation benchmark: WID / Paned-WID vs a numpy batch group-by, same run.

Workload (generated with numpy inside this script): N tuples (default 10M),
10k keys with Zipf(1.0) frequencies (key ids shuffled), ~10k tuples per
second of event time, band disorder up to 5 s (event time = arrival time -
U[0, 5 s), ms units), float64 values. Arrow RecordBatches of 64K rows in
memory, punctuation ``max seen - 5 s`` after every batch (exact for this
disorder: nothing is late), Arrow results out, one thread.

Queries (count + sum(v) per key):

* tumbling 1 s -- engine ``method="wid"``;
* sliding RANGE 10 s SLIDE 1 s -- engine ``method="paned"`` and plain ``"wid"``.

and max(v) per key (a non-differential aggregate: Paned-WID combines panes
with the prefix/suffix block kernel ``paned_emit_sel``):

* sliding RANGE 10 s SLIDE 1 s -- ``"paned"``, ``"wid"``, ``"auto"``; numpy
  reference: per-pane ``np.maximum.at`` then a 10-pane moving max.

Secondary workloads: median(v), a numba UDAF (sum of squares of v),
count-distinct and the top-3 heavy hitters of d = floor(1000 v) per key sliding 10 s / 1 s over the first
``--extra-rows`` tuples (default 1M; holistic: Paned-WID walks its panes'
sorted value runs for the median and moves a running (key, value)
multiplicity table by the entering and leaving panes for distinct and heavy
hitters; WID keeps one value table per window), and count + sum
over 300K tuples with 1M uniform (sparse) key ids, Paned-WID on the hash and
the dense layout (and what ``layout="auto"`` picks), beside WID.

Engine measurement: the window operator driven directly with the
pre-built batches and punctuations (``on_batch`` / ``on_punctuation``),
timing the operator's calls over the whole replay (the driver's own
bookkeeping excluded); every result batch is consumed as it leaves -- its
last column checksummed, then released, as a sink writing results out
would (holding all results in memory would time the page faults of fresh
memory rather than the operator); result latency = wall time of each
``on_punctuation`` call (the punctuation enters, the covered windows leave
as one Arrow batch), p50/p99/max; peak state = the operator's
``state_size()`` (items = live (window or pane, key) cells + distinct keys;
bytes = allocated lanes). One full-pipeline run (``oop.from_arrow(...)
.window(...).run()``, source + executor overhead included) is reported too.

Numpy reference, same arrays, same process (offline, no disorder handling):

* tumbling: ``wid = ts // 1000``; ``idx = (wid - min) * K + key``;
  ``np.bincount(idx)`` and ``np.bincount(idx, v)`` (dense reduce);
* sliding (two variants): *numpy-WID* -- the same per window offset
  (``range/slide`` bincounts); *numpy-panes* -- bincount per 1 s pane then a
  10-pane moving sum via cumsum over the pane axis.

Each figure is the best of ``--repeat`` interleaved rounds (every
configuration once per round, so on a shared machine all get the same
chances; each round starts one configuration later) after a warm-up;
Paned-WID vs plain WID is also given round by round (median and range).
Latency figures are those of the best run. Usage::

    python experiments/bench_window.py                 # 10M tuples
    python experiments/bench_window.py --rows 1000000 --repeat 1
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa

import oop
from oop.operators.base import StreamInfo
from oop.stream.elements import Punctuation
from oop.window import Sliding, Tumbling, agg, window_operator

BATCH = 65_536
KEYS = 10_000
RATE_PER_S = 10_000  # tuples per second of event time
DELAY_MS = 5_000
SPARSE_ROWS = 300_000


def make_workload(n: int, seed: int = 0, sparse_keys: int = 0
                  ) -> tuple[pa.Table, list[pa.RecordBatch], list[int]]:
    """The benchmark stream; ``sparse_keys``: uniform keys over that many ids instead of Zipf."""
    rng = np.random.default_rng(seed)
    if sparse_keys:
        key = rng.integers(0, sparse_keys, n).astype(np.int64)
    else:
        p = 1.0 / np.arange(1, KEYS + 1)
        p /= p.sum()
        key = rng.permutation(KEYS)[rng.choice(KEYS, size=n, p=p)].astype(np.int64)
    arrival_ms = np.arange(n, dtype=np.int64) * 1000 // RATE_PER_S
    ts = arrival_ms - rng.integers(0, DELAY_MS, n)
    v = rng.random(n)
    table = pa.table({"ts": ts, "key": key, "v": v})
    batches = table.to_batches(max_chunksize=BATCH)
    puncts = []
    mx = np.iinfo(np.int64).min
    for b in batches:
        mx = max(mx, int(b.column("ts").to_numpy().max()))
        puncts.append(mx - DELAY_MS)
    return table, batches, puncts


def drive(kind: Any, method: str, batches: list[pa.RecordBatch], puncts: list[int],
          schema: pa.Schema, aggs: Any = None, layout: str = "auto") -> dict[str, Any]:
    aggs = [agg.count(), agg.sum("v")] if aggs is None else aggs
    op = window_operator(kind, aggs, by="key", method=method, layout=layout)
    op.open([StreamInfo("bench", schema, {"ts": "ms"}, "ts")])
    lat = []
    peak_items = peak_bytes = 0
    rows_out = 0
    # the last aggregate column of every result batch, consumed as it leaves (a sink would
    # write it out; holding every result would time page faults of fresh memory, not the
    # operator): an exact, order-free checksum (the sum of its float64 bit patterns) for
    # the methods' equality, and a float sum for "close"
    sums = {"bits": 0, "float": 0.0}

    def consume(o: Any) -> None:
        nonlocal rows_out
        if isinstance(o, pa.RecordBatch):
            rows_out += o.num_rows
            col = np.asarray(o.column(o.num_columns - 1).to_numpy(zero_copy_only=False), np.float64)
            sums["bits"] += int(col.view(np.uint64).sum(dtype=np.uint64))
            sums["float"] += float(col.sum())

    last = None
    wall = 0.0  # the operator's calls only (driver bookkeeping and checksums excluded)
    for b, p in zip(batches, puncts):
        t0 = time.perf_counter_ns()
        res = op.on_batch(b)
        wall += time.perf_counter_ns() - t0
        for o in res:
            consume(o)
        if last is None or p > last:
            last = p
            t1 = time.perf_counter_ns()
            out = op.on_punctuation(Punctuation("ts", p))
            dt = time.perf_counter_ns() - t1
            wall += dt
            lat.append(dt)
            for o in out:
                consume(o)
        s = op.state_size()
        peak_items, peak_bytes = max(peak_items, s.items), max(peak_bytes, s.bytes)
    t0 = time.perf_counter_ns()
    res = op.flush()
    wall = (wall + time.perf_counter_ns() - t0) / 1e9
    for o in res:
        consume(o)
    checksum = sums["bits"] % (1 << 64)
    a = np.asarray(lat, np.float64) / 1e6
    return {"wall": wall, "rows_out": rows_out, "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max()), "peak_items": peak_items,
            "peak_bytes": peak_bytes, "checksum": checksum, "sum": sums["float"], "method": getattr(op, "plan_info", {}).get("method", method),
            "layout": getattr(op, "plan_info", {}).get("layout", "?"),
            "switches": int(getattr(op, "plan_info", {}).get("layout_switches", 0))}


def numpy_tumbling(ts: np.ndarray, key: np.ndarray, v: np.ndarray, size: int) -> int:
    wid = ts // size
    lo = wid.min()
    idx = (wid - lo) * KEYS + key
    cnt = np.bincount(idx)
    sm = np.bincount(idx, weights=v)
    nz = np.flatnonzero(cnt)
    return int(nz.size + sm[nz].size * 0)


def numpy_sliding_wid(ts: np.ndarray, key: np.ndarray, v: np.ndarray, r: int, s: int) -> int:
    base = ts // s
    lo = base.min()
    k = r // s
    M = (int(base.max() - lo) + k) * KEYS
    cnt = np.zeros(M, np.int64)
    sm = np.zeros(M, np.float64)
    for j in range(k):  # every tuple is in windows base .. base + r/s - 1
        idx = (base + j - lo) * KEYS + key
        cnt += np.bincount(idx, minlength=M)
        sm += np.bincount(idx, weights=v, minlength=M)
    return int(np.count_nonzero(cnt))


def numpy_sliding_panes(ts: np.ndarray, key: np.ndarray, v: np.ndarray, r: int, s: int) -> int:
    pane = ts // s
    lo = pane.min()
    P = int(pane.max() - lo) + 1
    idx = (pane - lo) * KEYS + key
    cnt = np.bincount(idx, minlength=P * KEYS).reshape(P, KEYS)
    sm = np.bincount(idx, weights=v, minlength=P * KEYS).reshape(P, KEYS)
    k = r // s
    zc = np.zeros((k, KEYS), np.int64)
    cc = np.cumsum(np.vstack([zc, cnt, zc]), axis=0)
    cs = np.cumsum(np.vstack([zc.astype(float), sm, zc.astype(float)]), axis=0)
    wc = cc[k:] - cc[:-k]
    ws = cs[k:] - cs[:-k]
    return int(np.count_nonzero(wc)) + 0 * ws.size


def numpy_sliding_max_panes(ts: np.ndarray, key: np.ndarray, v: np.ndarray, r: int, s: int) -> int:
    pane = ts // s
    lo = pane.min()
    P = int(pane.max() - lo) + 1
    idx = (pane - lo) * KEYS + key
    mx = np.full(P * KEYS, -np.inf)
    np.maximum.at(mx, idx, v)
    mx = mx.reshape(P, KEYS)
    k = r // s
    pad = np.full((k - 1, KEYS), -np.inf)
    full = np.vstack([pad, mx, pad])
    w = full[: P + k - 1].copy()
    for j in range(1, k):  # window i = panes i-k+1 .. i
        np.maximum(w, full[j: P + k - 1 + j], out=w)
    return int(np.count_nonzero(w > -np.inf))


@nb.njit  # no cache: the tests load this file as an anonymous module
def _udaf_init() -> float:
    return 0.0


@nb.njit  # no cache: the tests load this file as an anonymous module
def _udaf_sq(s: float, v: float) -> float:
    return s + v * v


@nb.njit  # no cache: the tests load this file as an anonymous module
def _udaf_fin(s: float) -> float:
    return s


def extra(n: int, repeat: int) -> bool:
    """Holistic median and count-distinct (Paned-WID vs WID) and sparse keys (hash vs dense)."""
    print(f"\nsecondary workloads (best of {repeat}): median and distinct {n:,} tuples, sparse "
          f"keys {min(n, SPARSE_ROWS):,} tuples over 1M uniform key ids:")
    sl = Sliding("10s", "1s")
    med = [agg.median("v")]
    dis = [agg.distinct("d")]  # d = floor(1000 v): up to 1000 distinct values per key
    hh = [agg.heavy_hitters("d", 3), agg.count()]  # count last: the checksummed column
    ud = [agg.udaf("sumsq", _udaf_init, _udaf_sq, lambda a, b: a + b, _udaf_fin, column="v")]
    table, batches, puncts = make_workload(n)
    d_batches = [b.append_column("d", pa.array((b.column("v").to_numpy() * 1000).astype(np.int64)))
                 for b in batches]
    n_sp = min(n, SPARSE_ROWS)  # the dense layout holds ring x all keys seen: keep it in memory
    sp_table, sp_batches, sp_puncts = make_workload(n_sp, seed=1, sparse_keys=1_000_000)
    # strings: 'w<d>' (<= 1000 values, re-ranked only while new ones appear) and 'id<row>'
    # (a new value in every row: every batch re-ranks the state)
    w_batches, start = [], 0
    for b in d_batches:
        d = b.column("d").to_numpy()
        w_batches.append(b.append_column("w", pa.array(np.char.add("w", d.astype(str))))
                         .append_column("u", pa.array(np.char.add("id", np.arange(start, start + len(d))
                                                                  .astype(str)))))
        start += len(d)
    # string group keys: the same 10k Zipf keys as text ("10.0.<hi>.<lo>", like IPv4 addresses)
    ip_batches = []
    for b in batches:
        k = b.column("key").to_numpy()
        ip = np.char.add(np.char.add("10.0.", (k // 256).astype(str)), np.char.add(".", (k % 256).astype(str)))
        ip_batches.append(b.set_column(b.schema.get_field_index("key"), "key", pa.array(ip)))
    st_words = [agg.max("w"), agg.last("w"), agg.count()]
    st_ids = [agg.max("u"), agg.last("u"), agg.count()]
    data = {"zipf": (batches, puncts, table.schema),
            "distinct": (d_batches, puncts, d_batches[0].schema),
            "strings": (w_batches, puncts, w_batches[0].schema),
            "ipkeys": (ip_batches, puncts, ip_batches[0].schema),
            "sparse": (sp_batches, sp_puncts, sp_table.schema)}
    cfgs = [("median sliding 10s/1s Paned", "paned", "auto", med, "zipf"),
            ("median sliding 10s/1s WID", "wid", "auto", med, "zipf"),
            ("median sliding 10s/1s auto", "auto", "auto", med, "zipf"),
            ("distinct sliding 10s/1s Paned", "paned", "auto", dis, "distinct"),
            ("distinct sliding 10s/1s WID", "wid", "auto", dis, "distinct"),
            ("heavy hitters 10s/1s Paned", "paned", "auto", hh, "distinct"),
            ("heavy hitters 10s/1s WID", "wid", "auto", hh, "distinct"),
            ("numba UDAF 10s/1s Paned", "paned", "auto", ud, "zipf"),
            ("numba UDAF 10s/1s WID", "wid", "auto", ud, "zipf"),
            ("10k string keys 10s/1s WID", "wid", "auto", None, "ipkeys"),
            ("10k string keys 10s/1s Paned", "paned", "auto", None, "ipkeys"),
            ("string max+last 1000 words Paned", "paned", "auto", st_words, "strings"),
            ("string max+last 1000 words WID", "wid", "auto", st_words, "strings"),
            ("string max+last unique ids Paned", "paned", "auto", st_ids, "strings"),
            ("string max+last unique ids WID", "wid", "auto", st_ids, "strings"),
            ("sparse 1M keys Paned auto", "paned", "auto", None, "sparse"),
            ("sparse 1M keys Paned hash", "paned", "hash", None, "sparse"),
            ("sparse 1M keys Paned dense", "paned", "dense", None, "sparse"),
            ("sparse 1M keys WID auto", "wid", "auto", None, "sparse"),
            ("sparse 1M keys WID hash", "wid", "hash", None, "sparse"),
            ("sparse 1M keys WID dense", "wid", "dense", None, "sparse")]
    best: dict[str, dict[str, Any]] = {}
    for label, method, layout, aggs, which in cfgs:  # warm-up (numba caches)
        b, p, sch = data[which]
        drive(sl, method, b[:4], p[:4], sch, aggs, layout)
    for _ in range(repeat):
        for label, method, layout, aggs, which in cfgs:
            b, p, sch = data[which]
            r = drive(sl, method, b, p, sch, aggs, layout)
            if label not in best or r["wall"] < best[label]["wall"]:
                best[label] = r
    print(f"{'query':34s} {'Mtuples/s':>10s} {'p99 ms':>7s} {'peak MB':>8s} {'rows out':>10s}  method / layout")
    for label, r in best.items():
        rows_in = n_sp if label.startswith("sparse") else n
        print(f"{label:34s} {rows_in / r['wall'] / 1e6:10.2f} {r['p99']:7.3f} {r['peak_bytes'] / 1e6:8.1f} "
              f"{r['rows_out']:10,d}  {r['method']} / {r['layout']}"
              + (f" ({r['switches']} switch{'es' if r['switches'] > 1 else ''} from the first"
                 " batch's choice)" if r["switches"] else ""))
    mp, mw = best["median sliding 10s/1s Paned"], best["median sliding 10s/1s WID"]
    print(f"median sliding Paned-WID vs plain WID: {mw['wall'] / mp['wall']:.2f}x; auto picked "
          f"{best['median sliding 10s/1s auto']['method']}; median checksums agree: "
          f"{math.isclose(mp['sum'], mw['sum'], rel_tol=1e-9)}")
    dp, dw = best["distinct sliding 10s/1s Paned"], best["distinct sliding 10s/1s WID"]
    print(f"distinct sliding Paned-WID vs plain WID: {dw['wall'] / dp['wall']:.2f}x; distinct "
          f"checksums agree: {dp['checksum'] == dw['checksum']}")
    hp, hw = best["heavy hitters 10s/1s Paned"], best["heavy hitters 10s/1s WID"]
    print(f"heavy hitters (top 3) sliding Paned-WID vs plain WID: {hw['wall'] / hp['wall']:.2f}x")
    up, uw = best["numba UDAF 10s/1s Paned"], best["numba UDAF 10s/1s WID"]
    print(f"numba UDAF (sum of squares) sliding Paned-WID vs plain WID: {uw['wall'] / up['wall']:.2f}x;"
          f" checksums agree: {up['checksum'] == uw['checksum']}")
    sh, sd = best["sparse 1M keys Paned hash"], best["sparse 1M keys Paned dense"]
    print(f"sparse keys Paned-WID hash vs dense layout: {sd['wall'] / sh['wall']:.2f}x time, "
          f"{sd['peak_bytes'] / max(sh['peak_bytes'], 1):.1f}x peak bytes")
    rows = {r["rows_out"] for k, r in best.items() if k.startswith("sparse")}
    return (len(rows) == 1 and mp["rows_out"] == mw["rows_out"]
            and math.isclose(mp["sum"], mw["sum"], rel_tol=1e-9)
            and dp["rows_out"] == dw["rows_out"] and dp["checksum"] == dw["checksum"]
            and hp["rows_out"] == hw["rows_out"] and up["checksum"] == uw["checksum"])


def _ratios(slow: list[float], fast: list[float]) -> str:
    """``slow / fast`` per round: the median and the range (a noisy machine moves both walls of
    a round together, so a per-round ratio varies less than a ratio of best-of walls)."""
    r = np.asarray(slow) / np.asarray(fast)
    return f"median {np.median(r):.2f}x (rounds {r.min():.2f}-{r.max():.2f}x)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--extra-rows", type=int, default=1_000_000,
                    help="rows of the median, distinct and sparse-key workloads (default 1M)")
    args = ap.parse_args(argv)
    n = args.rows
    print(f"generating {n:,} tuples, {KEYS} Zipf keys, {RATE_PER_S}/s, band disorder {DELAY_MS} ms ...")
    table, batches, puncts = make_workload(n)
    ts = table.column("ts").to_numpy()
    key = table.column("key").to_numpy()
    v = table.column("v").to_numpy()
    schema = table.schema
    results: dict[str, dict[str, Any]] = {}
    configs = [("tumbling 1s  WID", Tumbling("1s"), "wid"),
               ("sliding 10s/1s Paned-WID", Sliding("10s", "1s"), "paned"),
               ("sliding 10s/1s WID", Sliding("10s", "1s"), "wid"),
               ("sliding 10s/1s auto", Sliding("10s", "1s"), "auto"),
               ("max sliding 10s/1s Paned", Sliding("10s", "1s"), "paned"),
               ("max sliding 10s/1s WID", Sliding("10s", "1s"), "wid"),
               ("max sliding 10s/1s auto", Sliding("10s", "1s"), "auto")]
    max_aggs = [agg.max("v")]

    def aggs_of(label: str) -> Any:
        return max_aggs if label.startswith("max") else None

    for label, kind, method in configs:  # warm-up: numba caches, allocations
        drive(kind, method, batches[:4], puncts[:4], schema, aggs_of(label))
    np_refs = {
        "tumb": lambda: numpy_tumbling(ts, key, v, 1000),
        "swid": lambda: numpy_sliding_wid(ts, key, v, 10_000, 1000),
        "span": lambda: numpy_sliding_panes(ts, key, v, 10_000, 1000),
        "smax": lambda: numpy_sliding_max_panes(ts, key, v, 10_000, 1000),
    }
    np_best: dict[str, float] = {}
    np_rows: dict[str, int] = {}
    walls: dict[str, list[float]] = {label: [] for label, _, _ in configs}  # per round
    t_pipe = float("inf")
    pm = None
    # interleaved rounds: on a shared machine every configuration gets the same chances
    for rnd in range(args.repeat):
        for name, fn in np_refs.items():
            t0 = time.perf_counter()
            np_rows[name] = fn()
            np_best[name] = min(np_best.get(name, float("inf")), time.perf_counter() - t0)
        # each round starts one configuration later: none always runs after the same one
        # (in one 5-round run without rotation, the same Paned-WID plan measured a median
        # 2.78x plain WID when it ran right after plain WID, 3.41x after the tumbling query)
        for label, kind, method in configs[rnd % len(configs):] + configs[:rnd % len(configs)]:
            r = drive(kind, method, batches, puncts, schema, aggs_of(label))
            walls[label].append(r["wall"])
            if label not in results or r["wall"] < results[label]["wall"]:
                r["label"] = label
                results[label] = r
        t0 = time.perf_counter()
        res = oop.from_batches(batches, time="ts", unit="ms", punctuation=oop.BoundedDelay(DELAY_MS),
                               schema=schema).window(Tumbling("1s"), [agg.count(), agg.sum("v")],
                                                     by="key", method="wid").run()
        t = time.perf_counter() - t0
        if t < t_pipe:
            t_pipe, pm = t, res.metrics["window"]
        print(f"round {rnd + 1}/{args.repeat} done", flush=True)
    assert pm is not None
    t_np_tumb, t_np_swid, t_np_span = np_best["tumb"], np_best["swid"], np_best["span"]
    rows_np_tumb, rows_np_sl, rows_np_sl2 = np_rows["tumb"], np_rows["swid"], np_rows["span"]
    tumb = results["tumbling 1s  WID"]
    spaned = results["sliding 10s/1s Paned-WID"]
    swid = results["sliding 10s/1s WID"]
    sauto = results["sliding 10s/1s auto"]
    mpaned = results["max sliding 10s/1s Paned"]
    mwid = results["max sliding 10s/1s WID"]
    mauto = results["max sliding 10s/1s auto"]
    t_np_smax = np_best["smax"]

    def mtps(sec: float) -> float:
        return n / sec / 1e6

    print(f"\n{'query':34s} {'Mtuples/s':>10s} {'vs numpy':>9s} {'p50 ms':>7s} {'p99 ms':>7s} "
          f"{'max ms':>7s} {'peak cells':>11s} {'peak MB':>8s} {'rows out':>10s}")
    print(f"{'numpy tumbling 1s (bincount)':34s} {mtps(t_np_tumb):10.2f} {'1.00x':>9s}"
          f" {'':>7s} {'':>7s} {'':>7s} {'':>11s} {'':>8s} {rows_np_tumb:10,d}")
    print(f"{'numpy sliding 10s/1s (WID)':34s} {mtps(t_np_swid):10.2f} {'1.00x':>9s}"
          f" {'':>7s} {'':>7s} {'':>7s} {'':>11s} {'':>8s} {rows_np_sl:10,d}")
    print(f"{'numpy sliding 10s/1s (panes)':34s} {mtps(t_np_span):10.2f}"
          f" {t_np_swid / t_np_span:8.2f}x {'':>7s} {'':>7s} {'':>7s} {'':>11s} {'':>8s} {rows_np_sl2:10,d}")
    print(f"{'numpy max sliding 10s/1s (panes)':34s} {mtps(t_np_smax):10.2f} {'1.00x':>9s}"
          f" {'':>7s} {'':>7s} {'':>7s} {'':>11s} {'':>8s} {np_rows['smax']:10,d}")
    for r in results.values():
        ref = t_np_tumb if r["label"].startswith("tumbling") else \
            t_np_smax if r["label"].startswith("max") else t_np_swid
        print(f"{r['label'] + ' [' + r['method'] + ']':34s} {mtps(r['wall']):10.2f} "
              f"{ref / r['wall']:8.2f}x {r['p50']:7.3f} {r['p99']:7.3f} {r['max']:7.3f} "
              f"{r['peak_items']:11,d} {r['peak_bytes'] / 1e6:8.1f} {r['rows_out']:10,d}")
    print(f"\nsliding Paned-WID vs numpy-panes: {t_np_span / spaned['wall']:.2f}x; "
          f"Paned-WID vs plain WID: {swid['wall'] / spaned['wall']:.2f}x; "
          f"auto picked {sauto['method']}")
    print(f"Paned-WID vs plain WID round by round (same round, same machine state): "
          f"{_ratios(walls['sliding 10s/1s WID'], walls['sliding 10s/1s Paned-WID'])}; "
          f"auto (also Paned-WID) vs plain WID: "
          f"{_ratios(walls['sliding 10s/1s WID'], walls['sliding 10s/1s auto'])}")
    print(f"max sliding Paned-WID vs plain WID: {mwid['wall'] / mpaned['wall']:.2f}x; "
          f"auto picked {mauto['method']}; max checksums agree: "
          f"{mpaned['checksum'] == mwid['checksum'] == mauto['checksum']}")
    print(f"full pipeline tumbling 1s (from_batches -> window -> collect): {mtps(t_pipe):.2f} "
          f"Mtuples/s; executor latency {pm.latency_summary()}; peak state items "
          f"{pm.peak_state_items:,d}, bytes {pm.peak_state_bytes / 1e6:.1f} MB")
    print(f"layout: {tumb['layout']}; open windows x live keys bound: tumbling ~ "
          f"{(DELAY_MS // 1000 + 2)} x {KEYS}, sliding panes ~ {(10 + DELAY_MS // 1000 + 2)} x {KEYS}")
    for label in ("tumbling 1s  WID", "sliding 10s/1s Paned-WID", "sliding 10s/1s WID",
                  "max sliding 10s/1s Paned"):
        print(f"layout [{label}]: {results[label]['layout']}")
    extra_ok = extra(args.extra_rows, args.repeat)
    ok = extra_ok and (rows_np_tumb == tumb["rows_out"] and rows_np_sl == rows_np_sl2 == spaned["rows_out"] == swid["rows_out"]
          and np_rows["smax"] == mpaned["rows_out"] == mwid["rows_out"]
          and mpaned["checksum"] == mwid["checksum"])
    print(f"row counts agree with numpy: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
