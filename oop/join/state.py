"""Hash-partitioned tuple state of one join input, with numba probe kernels.

One :class:`SideState` holds the stored tuples ``M_i`` of one input of a
window join (004 Fig. 7-1): their payload rows as Arrow chunks, and a
chained hash index over numpy arrays::

    ts[e]   event time of entry e          kh[e]   key hash (exact key for int keys)
    nxt[e]  next entry of the same bucket (int32)   flag[e] bit0 matched, bit1 dead
    head[b] newest entry of bucket b (-1 = empty, int32), b = mix64(bucket_key) & mask
    (entry e is payload row e of the chunks; bucket_key = kh, or for a tumbling
    join kh * 1000003 + window id, computed from kh and ts, not stored)

*Insert* links new entries at the head of their bucket: O(1) per tuple.
*Probe* walks the bucket of each probe tuple and keeps entries with the same
key hash whose time lies in the probe tuple's partner interval ``[lo, hi]``:
O(chain length) per tuple; the pairs are written into a growable buffer
inside the kernel. *Purge* drops every entry with ``ts < thr`` in one numpy
pass, compacts the payload into one chunk and relinks the survivors: O(|M|)
per purge, done only when the oldest entry is actually expired. When chains
are long (few keys) the survivors are laid out bucket by bucket (one sort,
O(|M| log |M|)), so probes walk contiguous memory.

Every kernel has a tuple-at-a-time Python reference (``*_reference``) that
the tests compare against. Kernels release the GIL (``nogil=True``) so the
split join can probe several states on threads.

State accounting is O(1): ``items`` = live entries, ``bytes`` = index arrays
(21 B per entry incl. dead ones awaiting compaction, 4 B per bucket) + the
Arrow payload's ``nbytes``. *Budget*: with a ``guard`` (the owning join's
check against the plan's state budget, :func:`oop.limits.guard_for`), an
insert asks it first with the state's size after the insert; it raises
:class:`~oop.errors.StateLimitError` and nothing is stored.
"""

from __future__ import annotations

from typing import Any, Callable

import numba as nb
import numpy as np
import pyarrow as pa

from oop.errors import StateLimitError
from oop.join.keys import mix64
from oop.stream.elements import INT64_MAX

__all__ = ["SideState", "probe_kernel", "probe_reference", "link_kernel"]

MATCHED = np.uint8(1)
DEAD = np.uint8(2)
_ENTRY_BYTES = 8 + 8 + 4 + 1
MAX_ENTRIES = 2**31 - 1  # int32 links
CLUSTER_CHAIN = 4  # purge re-lays entries out by bucket when chains average more


@nb.njit(cache=True, nogil=True)
def bucket_key(kh: np.int64, ts: np.int64, tsize: np.int64) -> np.int64:
    """The key hash, plus the window id ``floor(ts / tsize)`` for a tumbling join (tsize > 0)."""
    if tsize == 0:
        return kh
    return kh * np.int64(1_000_003) + ts // tsize


@nb.njit(cache=True, nogil=True)
def link_kernel(kh: np.ndarray, ts: np.ndarray, tsize: np.int64, nxt: np.ndarray,
                head: np.ndarray, mask: np.int64, start: np.int64, stop: np.int64) -> None:
    """Link entries ``start..stop-1`` at the head of their buckets."""
    for e in range(start, stop):
        b = mix64(bucket_key(kh[e], ts[e], tsize)) & mask
        nxt[e] = head[b]
        head[b] = e


@nb.njit(cache=True, nogil=True)
def bucket_kernel(kh: np.ndarray, ts: np.ndarray, tsize: np.int64, mask: np.int64) -> np.ndarray:
    """Hash bucket of every entry (what :func:`link_kernel` uses)."""
    out = np.empty(kh.shape[0], dtype=np.int64)
    for e in range(kh.shape[0]):
        out[e] = mix64(bucket_key(kh[e], ts[e], tsize)) & mask
    return out


@nb.njit(cache=True, nogil=True)
def probe_kernel(lo: np.ndarray, hi: np.ndarray, kh: np.ndarray, bk: np.ndarray,
                 valid: np.ndarray, s_ts: np.ndarray, s_kh: np.ndarray, s_nxt: np.ndarray,
                 s_flag: np.ndarray, head: np.ndarray, mask: np.int64
                 ) -> tuple[np.ndarray, np.ndarray]:
    """All (probe row i, entry e) with ``kh[i] == s_kh[e]`` and ``lo[i] <= s_ts[e] <= hi[i]``."""
    n = lo.shape[0]
    cap = max(16, n)
    pi = np.empty(cap, dtype=np.int64)
    ei = np.empty(cap, dtype=np.int64)
    k = 0
    for i in range(n):
        if not valid[i]:
            continue
        h = kh[i]
        a = lo[i]
        z = hi[i]
        e = head[mix64(bk[i]) & mask]
        while e >= 0:
            if s_kh[e] == h and (s_flag[e] & 2) == 0:
                t = s_ts[e]
                if a <= t and t <= z:
                    if k == cap:
                        cap *= 2
                        pi2 = np.empty(cap, dtype=np.int64)
                        ei2 = np.empty(cap, dtype=np.int64)
                        for j in range(k):  # a loop: a slice copy compiles ~1 s longer
                            pi2[j] = pi[j]
                            ei2[j] = ei[j]
                        pi = pi2
                        ei = ei2
                    pi[k] = i
                    ei[k] = e
                    k += 1
            e = s_nxt[e]
    return pi[:k], ei[:k]


def probe_reference(lo: np.ndarray, hi: np.ndarray, kh: np.ndarray, valid: np.ndarray,
                    s_ts: np.ndarray, s_kh: np.ndarray, s_flag: np.ndarray,
                    n: int) -> set[tuple[int, int]]:
    """Tuple-at-a-time nested loop: the pairs :func:`probe_kernel` must return (as a set)."""
    out = set()
    for i in range(len(lo)):
        if not valid[i]:
            continue
        for e in range(n):
            if s_flag[e] & 2:
                continue
            if int(s_kh[e]) == int(kh[i]) and int(lo[i]) <= int(s_ts[e]) <= int(hi[i]):
                out.add((i, e))
    return out


class SideState:
    """Stored tuples of one join input (see the module docstring). Not thread-safe."""

    def __init__(self, capacity: int = 1024, tumbling_size: int = 0) -> None:
        cap = max(16, int(capacity))
        self.tsize = np.int64(tumbling_size)  # > 0: buckets keyed by (key, window id)
        self.ts = np.empty(cap, dtype=np.int64)
        self.kh = np.empty(cap, dtype=np.int64)
        self.nxt = np.empty(cap, dtype=np.int32)
        self.flag = np.zeros(cap, dtype=np.uint8)
        self.head = np.full(64, -1, dtype=np.int32)
        self.n = 0            # entries in use (live + dead)
        self.alive = 0        # live entries (= items)
        self.chunks: list[pa.RecordBatch] = []
        self.starts: list[int] = []
        self.rows_total = 0
        self.payload_bytes = 0
        self.min_ts = INT64_MAX
        #: called with this state's bytes after a growth, before it happens (oop.limits);
        #: raises StateLimitError. None: unchecked
        self.guard: Callable[[int, str], None] | None = None

    # ---- accounting --------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Deterministic state bytes. O(1)."""
        return self.n * _ENTRY_BYTES + 4 * len(self.head) + self.payload_bytes

    # ---- insert ------------------------------------------------------
    def _grow(self, need: int) -> None:
        cap = len(self.ts)
        if need > MAX_ENTRIES:
            raise StateLimitError(f"join state: {need} stored tuples exceed the {MAX_ENTRIES} "
                                  "an input side can hold; purge more often (punctuate) or split")
        if need > cap:
            new = max(need, 2 * cap)
            for name in ("ts", "kh", "nxt", "flag"):
                a = getattr(self, name)
                b = np.zeros(new, dtype=a.dtype) if name == "flag" else np.empty(new, dtype=a.dtype)
                b[: self.n] = a[: self.n]
                setattr(self, name, b)
        if need > len(self.head):  # load factor <= 1
            h = len(self.head)
            while need > h:
                h *= 2
            self.head = np.full(h, -1, dtype=np.int32)
            link_kernel(self.kh, self.ts, self.tsize, self.nxt, self.head, np.int64(h - 1),
                        np.int64(0), np.int64(self.n))

    def insert(self, rows: pa.RecordBatch, ts: np.ndarray, kh: np.ndarray,
               flag: np.ndarray | None = None) -> None:
        """Store ``rows`` (their times, key hashes, initial flags). O(rows)."""
        m = rows.num_rows
        if m == 0:
            return
        if self.guard is not None:
            need, h = self.n + m, len(self.head)
            while need > h:
                h *= 2
            self.guard(max(need, len(self.ts)) * _ENTRY_BYTES + 4 * h + self.payload_bytes
                       + rows.nbytes, f"{need} stored tuples of one input side")
        self._grow(self.n + m)
        s, e = self.n, self.n + m
        self.ts[s:e] = ts
        self.kh[s:e] = kh
        self.flag[s:e] = 0 if flag is None else flag
        link_kernel(self.kh, self.ts, self.tsize, self.nxt, self.head,
                    np.int64(len(self.head) - 1), np.int64(s), np.int64(e))
        self.n = e
        self.alive += m
        self.chunks.append(rows)
        self.starts.append(self.rows_total)
        self.rows_total += m
        self.payload_bytes += rows.nbytes
        tmin = int(ts.min())
        if tmin < self.min_ts:
            self.min_ts = tmin

    # ---- probe -------------------------------------------------------
    def probe(self, lo: np.ndarray, hi: np.ndarray, kh: np.ndarray, bk: np.ndarray,
              valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (probe row, entry) of matching live entries. Releases the GIL."""
        if self.alive == 0 or len(lo) == 0:
            z = np.empty(0, dtype=np.int64)
            return z, z
        return probe_kernel(lo, hi, kh, bk, valid, self.ts, self.kh, self.nxt, self.flag,
                            self.head, np.int64(len(self.head) - 1))

    def take(self, entries: np.ndarray) -> tuple[np.ndarray, pa.RecordBatch]:
        """Payload rows of ``entries``, grouped by chunk: returns (order, rows).

        ``order`` permutes ``entries`` into the order of the returned rows.
        """
        pos = np.asarray(entries, dtype=np.int64)  # entry e is payload row e
        if len(self.chunks) == 1:
            return np.arange(len(entries)), self.chunks[0].take(pa.array(pos - self.starts[0]))
        starts = np.asarray(self.starts, dtype=np.int64)
        cid = np.searchsorted(starts, pos, side="right") - 1
        order = np.argsort(cid, kind="stable")
        pos_s, cid_s = pos[order], cid[order]
        pieces = []
        bounds = np.searchsorted(cid_s, np.arange(len(self.chunks) + 1))
        for c in range(len(self.chunks)):
            a, b = bounds[c], bounds[c + 1]
            if a < b:
                pieces.append(self.chunks[c].take(pa.array(pos_s[a:b] - starts[c])))
        if not pieces:
            return order, self.chunks[0].slice(0, 0)
        return order, pa.concat_batches(pieces)

    def mark(self, entries: np.ndarray, dead: bool = False) -> np.ndarray:
        """Set the matched bit (and the dead bit) of ``entries``; return the newly matched ones."""
        if len(entries) == 0:
            return entries
        u = np.unique(entries)
        new = u[(self.flag[u] & MATCHED) == 0]
        self.flag[u] |= MATCHED
        if dead and len(new):
            self.flag[new] |= DEAD
            self.alive -= len(new)
        return new

    # ---- purge -------------------------------------------------------
    def purge(self, thr: int, want_unmatched: bool) -> pa.RecordBatch | None:
        """Drop live entries with ``ts < thr`` (and dead ones); compact. O(|M|).

        Returns the payload rows of purged entries that never matched, when
        ``want_unmatched`` (outer and anti joins), else None.
        """
        if self.n == 0 or self.min_ts >= thr:
            return None
        n = self.n
        ts = self.ts[:n]
        dead = (self.flag[:n] & DEAD) != 0
        keep = (ts >= thr) & ~dead
        unmatched = None
        if want_unmatched:
            um = ~keep & ~dead & ((self.flag[:n] & MATCHED) == 0)
            if um.any():
                _, unmatched = self.take(np.flatnonzero(um))
        kept = np.flatnonzero(keep)
        m = len(kept)
        h = 64
        while m > h:
            h *= 2
        if m and m > CLUSTER_CHAIN * np.count_nonzero(self.head >= 0):
            # long chains (few keys): lay the survivors out bucket by bucket, so a probe
            # walks its chain through contiguous memory instead of one cache miss per entry
            kept = kept[np.argsort(bucket_kernel(self.kh[:n][kept], ts[kept], self.tsize,
                                                 np.int64(h - 1)), kind="stable")]
        payload = None
        if m:
            whole = self.chunks[0] if len(self.chunks) == 1 else pa.concat_batches(self.chunks)
            payload = whole.take(pa.array(kept))
        self.ts[:m] = ts[kept]
        self.kh[:m] = self.kh[:n][kept]
        self.flag[:m] = self.flag[:n][kept]
        self.n = m
        self.alive = m
        self.head = np.full(h, -1, dtype=np.int32)
        link_kernel(self.kh, self.ts, self.tsize, self.nxt, self.head, np.int64(h - 1),
                    np.int64(0), np.int64(m))
        if payload is not None:
            self.chunks, self.starts = [payload], [0]
            self.payload_bytes = payload.nbytes
        else:
            self.chunks, self.starts, self.payload_bytes = [], [], 0
        self.rows_total = m
        self.min_ts = int(self.ts[:m].min()) if m else INT64_MAX
        return unmatched

    # ---- checkpoint --------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        n = self.n
        return {"ts": self.ts[:n].copy(), "kh": self.kh[:n].copy(), "tsize": int(self.tsize),
                "flag": self.flag[:n].copy(),
                "chunks": list(self.chunks), "starts": list(self.starts),
                "rows_total": self.rows_total, "alive": self.alive}

    @classmethod
    def from_snapshot(cls, s: dict[str, Any]) -> "SideState":
        st = cls(len(s["ts"]), s["tsize"])
        n = len(s["ts"])
        st._grow(n)
        for name in ("ts", "kh", "flag"):
            getattr(st, name)[:n] = s[name]
        st.n = n
        link_kernel(st.kh, st.ts, st.tsize, st.nxt, st.head, np.int64(len(st.head) - 1),
                    np.int64(0), np.int64(n))
        st.alive = s["alive"]
        st.chunks, st.starts = list(s["chunks"]), list(s["starts"])
        st.rows_total = s["rows_total"]
        st.payload_bytes = sum(c.nbytes for c in st.chunks)
        st.min_ts = int(st.ts[:n].min()) if n else INT64_MAX
        return st

    # ---- invariants --------------------------------------------------
    def _check(self, min_live_ts: int | None = None) -> None:
        """Assert: every entry is reachable exactly once from its bucket; counts agree."""
        n = self.n
        seen = np.zeros(n, dtype=np.int64)
        mask = len(self.head) - 1
        for b in range(len(self.head)):
            e = int(self.head[b])
            while e >= 0:
                assert e < n, (e, n)
                bkey = bucket_key(self.kh[e], self.ts[e], self.tsize)
                assert int(mix64(bkey)) & mask == b, "entry linked in the wrong bucket"
                seen[e] += 1
                e = int(self.nxt[e])
        assert (seen == 1).all(), "an entry is unreachable or linked twice"
        live = (self.flag[:n] & DEAD) == 0
        assert int(live.sum()) == self.alive, (int(live.sum()), self.alive)
        assert sum(c.num_rows for c in self.chunks) == self.rows_total
        assert n == self.rows_total, "entries and payload rows out of step"
        if n:
            assert self.min_ts <= int(self.ts[:n].min())
        if min_live_ts is not None and self.alive:
            assert int(self.ts[:n][live].min()) >= min_live_ts, "an expired entry was not purged"
