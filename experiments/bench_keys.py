"""Group-key encoding benchmark: KeyEncoder over string keys (the compiled interner) vs int keys.

Every window, join and distinct operator turns its key columns into dense
codes with :class:`oop.window.keys.KeyEncoder` before anything else. This
measures that step alone: N rows of keys like IPv4 addresses
(``"10.<a>.<b>.<c>"``) at several cardinalities, cut into 64K-row batches,
encoded by one persistent encoder; the same keys as int64 beside them, the
same number of distinct keys as a (string, int64) pair of columns, and
``pyarrow.compute.dictionary_encode`` per batch (Arrow's own hashing, which
is not persistent across batches) as a reference floor. Best of
``--repeat`` runs, rows/s.

Usage::

    python experiments/bench_keys.py                 # 1M rows
    python experiments/bench_keys.py --rows 5000000 --repeat 3
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.window.keys import KeyEncoder

BATCH = 65_536


def ipv4(ids: np.ndarray) -> pa.Array:
    parts = [(ids >> s) & 255 for s in (16, 8, 0)]
    text = np.char.add("10.", parts[0].astype(str))
    for p in parts[1:]:
        text = np.char.add(np.char.add(text, "."), p.astype(str))
    return pa.array(text)


def best_of(repeat: int, run: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(repeat + 1):  # the first run warms the numba caches
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def encode_all(*cols: pa.Array) -> Callable[[], None]:
    """One persistent encoder over the key columns ``cols``, batch by batch."""
    names = [f"k{j}" for j in range(len(cols))]

    def run() -> None:
        enc = KeyEncoder(names)
        for off in range(0, len(cols[0]), BATCH):
            enc.encode(pa.record_batch([c.slice(off, BATCH) for c in cols], names=names))
    return run


def arrow_dictionary(col: pa.Array) -> Callable[[], None]:
    def run() -> None:
        for off in range(0, len(col), BATCH):
            pc.dictionary_encode(col.slice(off, BATCH))
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    rng = np.random.default_rng(0)
    print(f"{'distinct keys':>14s} {'strings M rows/s':>17s} {'int64 M rows/s':>15s} "
          f"{'string+int64 M rows/s':>22s} {'arrow dict-encode per batch':>28s}")
    for card in (1_000, 100_000, 1_000_000):
        ids = rng.integers(0, card, n)
        s = best_of(args.repeat, encode_all(ipv4(ids)))
        i = best_of(args.repeat, encode_all(pa.array((ids * 7919 + 1) << 23)))  # hashed, not direct
        # two key columns (host-like string, port-like int): the hash table over the pair
        p = best_of(args.repeat, encode_all(ipv4(ids >> 4), pa.array(ids & 15)))
        d = best_of(args.repeat, arrow_dictionary(ipv4(ids)))
        print(f"{card:14,d} {n / s / 1e6:17.2f} {n / i / 1e6:15.2f} {n / p / 1e6:22.2f} "
              f"{n / d / 1e6:28.2f}")


if __name__ == "__main__":
    main()
