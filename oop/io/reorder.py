"""Replaying a feed in the order of an arrival column (``--arrival COL``), as connectors.

* :class:`BoundedReorder` holds at most ``bound_rows`` rows: each poll adds the
  inner connector's batch, sorts the buffer by arrival (stable) and releases
  the smallest rows beyond the bound. A later row whose arrival is below the
  largest value already released is outside the bound: a
  :class:`~oop.errors.SourceError` suggests a larger ``--arrival-bound``. At END
  the rest is released in order. The output equals a stable sort of the whole
  feed whenever no row is outside the bound. Cost: a sort of bound + batch rows
  per poll. Not resumable (offset None): resuming would need the inner offset at
  the oldest buffered row, which is not tracked.
* :class:`ExternalSort` sorts a finite feed out of core: runs of ``run_rows``
  rows are sorted (stable) and spilled as Arrow IPC files to a temporary folder
  (no spill when the feed fits in one run), then merged k-way in blocks of
  ``block_rows``. Ties are ordered by (arrival, run, position), so the output
  equals a stable sort of the whole feed. Memory: one run while reading, then
  about one block per run. Offset: rows emitted; seek re-reads the inner feed
  from its start, re-sorts and skips.

The arrival column must not hold nulls or NaN (SourceError).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from oop.errors import ConfigError, SourceError
from oop.io.files import take_rows
from oop.io.protocol import END, IDLE, Offset, Poll, SourceConnector

__all__ = ["BoundedReorder", "ExternalSort"]


def _sorted(table: pa.Table, column: str) -> pa.Table:
    """``table`` stably sorted by ``column`` (pyarrow's sort_indices is stable)."""
    return table.take(pc.sort_indices(table, [(column, "ascending")]))


def _check_arrival(batch: pa.RecordBatch, column: str, name: str) -> pa.Array:
    if column not in batch.schema.names:
        raise ConfigError(f"source {name!r}: arrival column {column!r} is not in the feed; its "
                          f"columns are {batch.schema.names}")
    arr = batch.column(column)
    bad = arr.null_count > 0 or (pa.types.is_floating(arr.type) and pc.any(pc.is_nan(arr)).as_py())
    if bad:
        raise SourceError(f"source {name!r}: arrival column {column!r} holds null or NaN; "
                          "fill it or order by another column")
    return arr


class BoundedReorder:
    """Release rows in arrival order with a buffer of ``bound_rows`` rows (see module doc)."""

    resumable = False

    def __init__(self, connector: SourceConnector, column: str, bound_rows: int,
                 name: str | None = None) -> None:
        if bound_rows < 0:
            raise ConfigError(f"--arrival-bound {bound_rows} must be at least 0 rows")
        self.inner, self.column, self.bound_rows = connector, column, bound_rows
        self.name = name or connector.name
        self.live = connector.live
        self._buffer: pa.Table | None = None
        self._out: list[pa.RecordBatch] = []
        self._released: pa.Scalar | None = None  # largest arrival value released
        self._ended = False

    def open(self) -> pa.Schema | None:
        schema = self.inner.open()
        if schema is not None and self.column not in schema.names:
            raise ConfigError(f"source {self.name!r}: arrival column {self.column!r} is not in "
                              f"the feed; its columns are {schema.names}")
        return schema

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        while sum(b.num_rows for b in self._out) < max_rows and not self._ended:
            item = self.inner.poll(max_rows, timeout)
            if item is END:
                self._ended = True
                if self._buffer is not None:
                    self._out.extend(self._buffer.to_batches())
                    self._buffer = None
            elif item is IDLE:
                break
            else:
                self._add(item)  # type: ignore[arg-type]
        out = take_rows(self._out, max_rows)
        if out is not None:
            return out
        return END if self._ended else IDLE

    def _add(self, batch: pa.RecordBatch) -> None:
        arr = _check_arrival(batch, self.column, self.name)
        if self._released is not None and batch.num_rows:
            below = pc.less(arr, self._released)
            if pc.any(below).as_py():
                v = pc.min(pc.filter(arr, below)).as_py()
                raise SourceError(
                    f"source {self.name!r}: arrival column {self.column!r} value {v!r} comes after "
                    f"{self._released.as_py()!r} was released: outside the reorder bound of "
                    f"{self.bound_rows} rows; pass a larger --arrival-bound")
        table = pa.Table.from_batches([batch])
        if self._buffer is not None:
            table = pa.concat_tables([self._buffer, table])
        table = _sorted(table, self.column)
        over = table.num_rows - self.bound_rows
        if over > 0:
            released = table.slice(0, over)
            self._out.extend(released.combine_chunks().to_batches())
            self._released = released.column(self.column)[over - 1]
            table = table.slice(over)
        self._buffer = table

    def offset(self) -> Offset:
        return None

    def seek(self, offset: Offset) -> None:
        raise SourceError(f"source {self.name!r}: a bounded arrival reorder cannot resume from "
                          "an offset; replay from the start")

    def stop(self) -> None:
        """Ask the wrapped feed to end (``--stop-after-idle``, signals); thread-safe if it is."""
        stop = getattr(self.inner, "stop", None)
        if stop is not None:
            stop()

    def close(self) -> None:
        self.inner.close()


class _Run:
    """A sorted run handing out blocks: from memory, or from a spilled Arrow IPC file."""

    def __init__(self, blocks: list[pa.RecordBatch] | None = None, path: Path | None = None):
        self._blocks = blocks
        self._reader = ipc.open_file(pa.memory_map(str(path), "r")) if path is not None else None
        self._i = 0

    @property
    def has_more(self) -> bool:
        n = len(self._blocks) if self._blocks is not None else self._reader.num_record_batches
        return self._i < n

    def next_block(self) -> pa.RecordBatch:
        b = self._blocks[self._i] if self._blocks is not None else self._reader.get_batch(self._i)
        self._i += 1
        return b


class _Merge:
    """K-way merge of sorted runs, ties by (arrival, run, position)."""

    def __init__(self, runs: list[_Run], column: str, schema: pa.Schema) -> None:
        self.runs, self.column, self.schema = runs, column, schema
        self.loaded = [schema.empty_table() for _ in runs]
        self.out: list[pa.RecordBatch] = []
        for i in range(len(runs)):
            self._refill(i)

    def _refill(self, i: int) -> None:
        while self.loaded[i].num_rows == 0 and self.runs[i].has_more:
            self._load(i)

    def _load(self, i: int) -> None:
        block = pa.Table.from_batches([self.runs[i].next_block()])
        self.loaded[i] = pa.concat_tables([self.loaded[i], block]) if self.loaded[i].num_rows \
            else block

    def next(self, max_rows: int) -> pa.RecordBatch | None:
        while sum(b.num_rows for b in self.out) < max_rows and self._step():
            pass
        return take_rows(self.out, max_rows)

    def _last(self, i: int) -> pa.ChunkedArray:
        col = self.loaded[i].column(self.column)
        return col.slice(len(col) - 1, 1)

    def _step(self) -> bool:
        """Release what is safe (below every open run's last loaded value); False when done."""
        open_runs = [i for i, r in enumerate(self.runs) if r.has_more]
        if not open_runs:
            return self._release([t.num_rows for t in self.loaded])
        lasts = [self._last(i) for i in open_runs]
        threshold = pc.min(pa.chunked_array([c for last in lasts for c in last.chunks],
                                            lasts[0].type))
        counts = [pc.sum(pc.less(t.column(self.column), threshold)).as_py() or 0
                  for t in self.loaded]
        if sum(counts) == 0:  # every open run's loaded rows sit at the threshold: load more
            for i, last in zip(open_runs, lasts):
                if pc.equal(last, threshold).to_pylist()[0]:
                    self._load(i)
            return True
        return self._release(counts)

    def _release(self, counts: list[int]) -> bool:
        parts = [t.slice(0, c) for t, c in zip(self.loaded, counts) if c]
        if not parts:
            return False
        merged = _sorted(pa.concat_tables(parts), self.column)  # run order kept for ties
        self.out.extend(merged.combine_chunks().to_batches())
        for i, c in enumerate(counts):
            self.loaded[i] = self.loaded[i].slice(c)
            self._refill(i)
        return True


class ExternalSort:
    """Out-of-core stable sort of a finite feed by an arrival column (see module doc)."""

    def __init__(self, connector: SourceConnector, column: str, run_rows: int = 1_000_000,
                 tmpdir: str | Path | None = None, block_rows: int | None = None,
                 name: str | None = None) -> None:
        if run_rows < 1 or (block_rows is not None and block_rows < 1):
            raise ConfigError(f"run_rows={run_rows} and block_rows={block_rows} must be at least 1")
        self.inner, self.column, self.run_rows = connector, column, run_rows
        self.block_rows = block_rows or max(1, min(65_536, run_rows // 8))
        self.tmpdir = tmpdir
        self.name = name or connector.name
        self.live = connector.live
        self.resumable = connector.resumable
        self.schema: pa.Schema | None = None
        self._start: Offset = None
        self._reset()

    def _reset(self) -> None:
        self._run: list[pa.RecordBatch] = []
        self._run_rows = 0
        self._spills: list[Path] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._merge: _Merge | None = None
        self._emitted = 0
        self._skip = 0
        self._done = False

    def open(self) -> pa.Schema | None:
        self.schema = self.inner.open()
        if self.schema is not None and self.column not in self.schema.names:
            raise ConfigError(f"source {self.name!r}: arrival column {self.column!r} is not in "
                              f"the feed; its columns are {self.schema.names}")
        self._start = self.inner.offset() if self.resumable else None
        return self.schema

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        """IDLE while a live inner feed is still being read; then sorted batches; END."""
        if self._done:
            return END
        while self._merge is None:
            if self._collect(timeout) is IDLE:
                return IDLE
        while self._skip:
            b = self._merge.next(min(self._skip, 65_536))
            if b is None:
                break
            self._skip -= b.num_rows
        out = self._merge.next(max_rows)
        if out is None:
            self._cleanup()
            self._done = True
            return END
        self._emitted += out.num_rows
        return out

    def _collect(self, timeout: float) -> Any:
        item = self.inner.poll(min(self.run_rows - self._run_rows, 65_536), timeout)
        if item is IDLE:
            return IDLE
        if item is END:
            self._finish()
            return END
        batch: pa.RecordBatch = item  # type: ignore[assignment]
        _check_arrival(batch, self.column, self.name)
        if self.schema is None:
            self.schema = batch.schema
        self._run.append(batch)
        self._run_rows += batch.num_rows
        if self._run_rows >= self.run_rows:
            self._spill()
        return batch

    def _sorted_run(self) -> pa.Table:
        assert self.schema is not None
        return _sorted(pa.Table.from_batches(self._run, schema=self.schema), self.column)

    def _spill(self) -> None:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="oop-sort-", dir=self.tmpdir)
        path = Path(self._dir.name) / f"run-{len(self._spills):06d}.arrow"
        table = self._sorted_run()
        try:
            with ipc.new_file(path, table.schema) as w:
                w.write_table(table, max_chunksize=self.block_rows)
        except OSError as e:
            raise SourceError(f"source {self.name!r}: cannot spill a sorted run to {str(path)!r} "
                              f"({e.strerror or e}); free disk space or pass tmpdir=") from e
        self._spills.append(path)
        self._run, self._run_rows = [], 0

    def _finish(self) -> None:
        if self.schema is None:
            self.schema = pa.schema([(self.column, pa.int64())])
        if self._spills and self._run_rows:
            self._spill()
        if self._spills:
            runs = [_Run(path=p) for p in self._spills]
        else:
            runs = [_Run(blocks=self._sorted_run().combine_chunks().to_batches())]
        self._merge = _Merge(runs, self.column, self.schema)

    def offset(self) -> Offset:
        return self._emitted

    def seek(self, offset: Offset) -> None:
        """Re-read the inner feed from its start, re-sort and skip ``offset`` rows."""
        if not self.resumable:
            raise SourceError(f"source {self.name!r}: the inner feed cannot be re-read, so the "
                              "external sort cannot resume; replay from the start")
        if not isinstance(offset, int) or offset < 0:
            raise ConfigError(f"source {self.name!r}: offset {offset!r} is not a row count")
        self._cleanup()
        self.inner.seek(self._start)
        self._reset()
        self._skip = self._emitted = offset

    def _cleanup(self) -> None:
        self._merge = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def stop(self) -> None:
        """Ask the wrapped feed to end (``--stop-after-idle``, signals); thread-safe if it is."""
        stop = getattr(self.inner, "stop", None)
        if stop is not None:
            stop()

    def close(self) -> None:
        self._cleanup()
        self.inner.close()
