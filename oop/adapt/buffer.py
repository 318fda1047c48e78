"""The shared lazy-tuple buffer ``B``, split into bins (004 §6.3.4.2, Discussion).

Lazy (and transitional) groups put their tuples into one shared buffer. So
that switching a group to eager does not scan every lazy tuple, the buffer
is split into ``n_bins`` bins and group ``g`` always uses bin ``g % n_bins``
(the hash table H is partitioned the same way): a switch scans only the bins
of the switching groups.

Rows are stored column-wise (``gid``, ``ts``, optional ``src``, the value
columns the aggregates read) as a list of numpy chunks per bin; a bin is
compacted to one chunk when it is scanned. An appended batch is first
*staged* as one chunk (a list append: no per-batch sort on the hot path) and
binned -- one stable counting sort over all staged rows, so each row is
binned once -- the first time bins are needed (a switch, a punctuation's pass over
``B``, a snapshot, a check). A punctuation's rebuild keeps the rows it keeps as
one chunk in bin order with the bin cuts; the per-bin views are made only when a
switch or a check needs them. ``row_bytes`` -- the size of one
buffered tuple, ``tup`` in the cost model -- is the sum of the column item
sizes, i.e. measured from this layout.

Cost: ``append`` O(columns) per batch (staged); binning O(staged rows) once per
row; ``take_groups`` O(staged rows + rows in the touched bins);
``compact``/``filter_bin`` O(rows in the bin).

>>> b = LazyBuffer(4, {"gid": np.dtype(np.int64), "ts": np.dtype(np.int64)})
>>> b.append({"gid": np.array([0, 1, 5, 1]), "ts": np.array([10, 11, 12, 13])})
>>> b.n_rows, b.row_bytes, b.nbytes
(4, 16, 64)
>>> out = b.take_groups(np.array([1]))       # scans bin 1 only (groups 1 and 5)
>>> out["ts"].tolist(), b.n_rows
([11, 13], 2)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oop.adapt.kernels.buffer import bin_order, take_scan

__all__ = ["LazyBuffer", "Chunk"]

Chunk = dict  # column name -> np.ndarray, all of one length


def _concat(chunks: list[Chunk], names: list[str], dtypes: dict[str, np.dtype]) -> Chunk:
    if not chunks:
        return {c: np.zeros(0, dtypes[c]) for c in names}
    if len(chunks) == 1:
        return chunks[0]
    return {c: np.concatenate([ch[c] for ch in chunks]) for c in names}


class LazyBuffer:
    """Binned, columnar tuple buffer. ``columns`` maps column name -> dtype; ``gid`` is required."""

    def __init__(self, n_bins: int, columns: dict[str, np.dtype]) -> None:
        if n_bins < 1:
            raise ValueError(f"LazyBuffer: n_bins must be >= 1, got {n_bins}")
        if "gid" not in columns:
            raise ValueError("LazyBuffer: a 'gid' column is required")
        self.n_bins = int(n_bins)
        self.dtypes = {c: np.dtype(t) for c, t in columns.items()}
        self.names = list(self.dtypes)
        self.row_bytes = int(sum(t.itemsize for t in self.dtypes.values()))
        self._bins: list[list[Chunk]] = [[] for _ in range(self.n_bins)]
        self._bin_rows = np.zeros(self.n_bins, np.int64)
        self.staged: list[Chunk] = []  # appended, not yet binned
        #: the binned rows as one chunk in bin order + cuts (a punctuation's rebuild), the
        #: per-bin views made only when bins are needed; when set, ``_bins`` is empty
        self._packed: tuple[Chunk, np.ndarray] | None = None
        self.n_rows = 0

    @property
    def bins(self) -> list[list[Chunk]]:
        """Chunks per bin (staged rows are binned first)."""
        self._settle()
        return self._bins

    def _unpack(self) -> None:
        """Per-bin views of the packed rows (O(bins x columns))."""
        if self._packed is None:
            return
        srt, cuts = self._packed
        self._packed = None
        cl = cuts.tolist()
        self._bins = [[{c: srt[c][cl[b]:cl[b + 1]] for c in self.names}]
                      if cl[b + 1] > cl[b] else [] for b in range(self.n_bins)]

    def _settle(self) -> None:
        """Bin the staged chunks: one stable counting sort by ``gid % n_bins`` each."""
        self._unpack()
        if not self.staged:
            return
        staged, self.staged = self.staged, []
        cols = _concat(staged, self.names, self.dtypes)  # one sort for every staged row
        n = len(cols["gid"])
        if self.n_bins == 1:
            self._bins[0].append(cols)
            self._bin_rows[0] += n
            return
        order, cuts = bin_order(cols["gid"], self.n_bins)  # stable counting sort
        srt = {c: cols[c][order] for c in self.names}  # one gather per column, then views
        cl = cuts.tolist()
        for k in range(self.n_bins):
            a, e = cl[k], cl[k + 1]
            if e > a:
                self._bins[k].append({c: srt[c][a:e] for c in self.names})
                self._bin_rows[k] += e - a

    @property
    def nbytes(self) -> int:
        """Bytes held: rows times ``row_bytes`` (the layout). O(1)."""
        return self.n_rows * self.row_bytes

    def append(self, chunk: Chunk) -> None:
        """Add rows (columns aligned); each row will go to bin ``gid % n_bins``. O(columns)."""
        n = len(chunk["gid"])
        if n == 0:
            return
        self.staged.append({c: np.asarray(chunk[c], dtype=self.dtypes[c]) for c in self.names})
        self.n_rows += n

    def add_column(self, name: str, dtype: np.dtype, fill: Any) -> None:
        """Add a column (``fill`` in every held row); ``row_bytes`` grows by its item size.

        Used for a validity column, held only once its value column has shown a null.
        """
        if name in self.dtypes:
            return
        dt = np.dtype(dtype)
        self._settle()
        for chs in self._bins:
            for ch in chs:
                ch[name] = np.full(len(ch["gid"]), fill, dt)
        self.dtypes[name] = dt
        self.names.append(name)
        self.row_bytes += dt.itemsize

    def compact(self, b: int) -> Chunk:
        """Bin ``b`` as one chunk (merging its chunks). O(rows in the bin)."""
        self._settle()
        ch = _concat(self._bins[b], self.names, self.dtypes)
        self._bins[b] = [ch] if len(ch["gid"]) else []
        return ch

    def filter_bin(self, b: int, keep: np.ndarray) -> Chunk:
        """Keep the rows of (compacted) bin ``b`` where ``keep``; return the removed rows."""
        ch = self.compact(b)
        removed = {c: ch[c][~keep] for c in self.names}
        kept = {c: ch[c][keep] for c in self.names}
        n_removed = len(removed["gid"])
        self._bins[b] = [kept] if len(kept["gid"]) else []
        self._bin_rows[b] -= n_removed
        self.n_rows -= n_removed
        return removed

    def all_rows(self) -> Chunk:
        """Every row as one chunk, bins in order (bin ``b`` is rows ``cuts[b]:cuts[b+1]``).

        The buffer is rebuilt from it (each bin one chunk, views into it), so a
        following :meth:`keep_rows` can split the kept rows back by bin. O(|B|).
        """
        self._settle()
        chunks = [ch for chs in self._bins for ch in chs]
        whole = _concat(chunks, self.names, self.dtypes)
        cl = np.concatenate([[0], np.cumsum(self._bin_rows)]).tolist()
        self._bins = [[{c: whole[c][cl[b]:cl[b + 1]] for c in self.names}]
                     if cl[b + 1] > cl[b] else [] for b in range(self.n_bins)]
        return whole

    def scan_rows(self) -> Chunk:
        """Every row as one chunk (binned rows in bin order, then the staged ones), the
        buffer unchanged; follow with :meth:`rebuild` to keep some of them. O(|B|)."""
        if self._packed is not None:
            chunks = [self._packed[0]] + self.staged
        else:
            chunks = [ch for chs in self._bins for ch in chs] + self.staged
        return _concat(chunks, self.names, self.dtypes)

    def scan_cuts(self) -> np.ndarray:
        """Bin cuts of :meth:`scan_rows`' binned part: its rows ``[cuts[b], cuts[b + 1])``
        are bin ``b``'s; the staged rows follow from ``cuts[-1]`` on. O(bins)."""
        if self._packed is not None:
            return self._packed[1]
        cuts = np.zeros(self.n_bins + 1, np.int64)
        np.cumsum(self._bin_rows, out=cuts[1:])
        return cuts

    def rebuild(self, whole: Chunk, order: np.ndarray, cuts: np.ndarray,
                kept: Chunk | None = None) -> None:
        """Hold exactly rows ``whole[order]`` of :meth:`scan_rows`' chunk, where ``order``
        lists them bin by bin (bin ``b``: ``order[cuts[b]:cuts[b+1]]``); ``kept``: columns
        of ``whole[order]`` gathered already (a close kernel's), taken as they are (cast to
        the buffer's dtype). O(kept rows)."""
        self.staged = []
        self._bins = [[] for _ in range(self.n_bins)]
        self._packed = None
        if len(order) == 0:  # nothing kept
            self._bin_rows = np.zeros(self.n_bins, np.int64)
            self.n_rows = 0
            return
        srt = {c: (whole[c][order] if kept is None or c not in kept  # one gather per column
                   else np.asarray(kept[c], self.dtypes[c])) for c in self.names}
        self._packed = (srt, np.asarray(cuts, np.int64))  # per-bin views when needed
        cuts = np.asarray(cuts, np.int64)
        self._bin_rows = cuts[1:] - cuts[:-1]  # (np.diff costs more than the subtraction)
        self.n_rows = int(cuts[-1])

    def keep_rows(self, whole: Chunk, keep: np.ndarray) -> None:
        """Keep the rows of :meth:`all_rows`' chunk where ``keep`` (bins stay contiguous). O(|B|)."""
        kept = {c: whole[c][keep] for c in self.names}
        assert not self.staged and self._packed is None, "keep_rows follows all_rows"
        per_bin = np.bincount(kept["gid"] % self.n_bins, minlength=self.n_bins)
        cl = np.concatenate([[0], np.cumsum(per_bin)]).tolist()
        self._bins = [[{c: kept[c][cl[b]:cl[b + 1]] for c in self.names}]
                      if cl[b + 1] > cl[b] else [] for b in range(self.n_bins)]
        self._bin_rows = per_bin.astype(np.int64)
        self.n_rows = int(cl[-1])

    def take_groups(self, gids: np.ndarray) -> Chunk:
        """Remove and return every row of ``gids``, scanning only their bins.

        When they fall into more than half of the bins, the whole buffer is scanned once by
        a kernel instead (the same rows, fewer Python calls). O(rows scanned)."""
        gids = np.asarray(gids, np.int64)
        if len(gids) == 0 or self.n_rows == 0:
            return _concat([], self.names, self.dtypes)
        hit = np.unique(gids % self.n_bins)
        if 2 * len(hit) > self.n_bins:  # most bins: one compiled pass over B instead
            whole = self.scan_rows()
            taken, order, cuts = take_scan(whole["gid"], np.unique(gids), self.n_bins)
            out_ch = {c: whole[c][taken] for c in self.names}
            if len(taken):
                self.rebuild(whole, order, cuts)
            return out_ch
        out: list[Chunk] = []
        self._settle()
        for b in hit.tolist():
            if self._bin_rows[b] == 0:
                continue
            ch = self.compact(b)
            hit = np.isin(ch["gid"], gids)
            if hit.any():
                out.append(self.filter_bin(b, ~hit))
        return _concat(out, self.names, self.dtypes)

    def remap_gids(self, remap: np.ndarray) -> None:
        """Renumber every row's group code through ``remap`` (old code -> new code; every
        held code maps to one >= 0) -- key compaction. The rows are staged again as one
        chunk: a group's bin is ``gid % n_bins``, so a new code may mean a new bin; each
        group's rows keep their order. O(|B|), vectorized."""
        if self.n_rows == 0:
            return
        whole = self.scan_rows()
        whole = dict(whole)
        whole["gid"] = remap[whole["gid"]].astype(self.dtypes["gid"])
        self._bins = [[] for _ in range(self.n_bins)]
        self._bin_rows = np.zeros(self.n_bins, np.int64)
        self._packed = None
        self.staged = [whole]

    def held_gids(self) -> np.ndarray:
        """Group codes with a buffered row (unsorted, repeated). O(|B|)."""
        return self.scan_rows()["gid"]

    # ---- checkpointing ----------------------------------------------------
    def snapshot(self) -> Any:
        self._settle()
        return {"bins": [[{c: a.copy() for c, a in ch.items()} for ch in chs] for chs in self._bins],
                "bin_rows": self._bin_rows.copy(), "n_rows": self.n_rows,
                "dtypes": dict(self.dtypes)}

    def restore(self, state: Any) -> None:
        self._bins = [[{c: a.copy() for c, a in ch.items()} for ch in chs] for chs in state["bins"]]
        self._bin_rows = state["bin_rows"].copy()
        self.staged = []
        self._packed = None
        self.n_rows = int(state["n_rows"])
        self.dtypes = dict(state["dtypes"])
        self.names = list(self.dtypes)
        self.row_bytes = int(sum(t.itemsize for t in self.dtypes.values()))

    def _check(self) -> None:
        for ch in self.staged:
            n = len(ch["gid"])
            assert all(len(ch[c]) == n for c in self.names), "misaligned staged chunk"
        staged = sum(len(ch["gid"]) for ch in self.staged)
        total = staged
        if self._packed is not None:
            srt, cuts = self._packed
            assert not any(self._bins), "packed rows and bin chunks at once"
            assert all(len(srt[c]) == cuts[-1] for c in self.names), "misaligned packed rows"
            bins = np.repeat(np.arange(self.n_bins), np.diff(cuts))
            assert (srt["gid"] % self.n_bins == bins).all(), "packed row in the wrong bin"
            assert (np.diff(cuts) == self._bin_rows).all()
            total += int(cuts[-1])
        for b, chs in enumerate(self._bins if self._packed is None else []):
            rows = 0
            for ch in chs:
                n = len(ch["gid"])
                assert all(len(ch[c]) == n for c in self.names), "misaligned chunk"
                assert (ch["gid"] % self.n_bins == b).all(), f"row in the wrong bin {b}"
                rows += n
            assert rows == self._bin_rows[b], (b, rows, self._bin_rows[b])
            total += rows
        assert total == self.n_rows, (total, self.n_rows)
