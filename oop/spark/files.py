"""Source shards read straight from Parquet files inside Spark tasks (the fast path).

Why: in :func:`oop.spark.sharded.shard` Spark reads the files and hands the
rows to Python through ``mapInArrow``; on 2 cores that JVM -> Python row
transfer alone caps the pipeline near 0.8 M rows/s, below what the engine does
per core. When the input is a set of Parquet files and the first step is
shard-local (a query before any data movement, e.g. the local half of
local-then-global aggregation), the rows do not need to pass through the JVM
at all.

How: the input is cut into *fragments* -- a whole file (``split="file"``) or
one row group (``split="row_group"``) -- listed on the driver from the file
footers. A tiny DataFrame ``spark.range(tasks)`` with one row per partition is
mapped with ``mapInArrow``: Spark schedules one task per partition (so this
runs on a cluster with a shared filesystem as well as in ``local[N]``), and
task ``i`` reads *its* fragments with pyarrow (only the columns the query
needs), replays each in arrival order through a :class:`~oop.plan.source.Source`
and the fused first query, and emits only the query's output -- the small
physical rows of the next stage (:mod:`oop.spark.sharded`) -- back into Spark.

Shards and order: every fragment is one source shard (one producer of the
next stage, producer id = fragment index) -- or, with ``shard_per="task"``,
the contiguous fragments of one task, in order, are one shard (producer id
= task index) -- replayed in arrival order: in
row order, or -- with ``arrival=COL`` -- in ``COL`` order (the fragment's
arrival column is read first; if it is already non-decreasing, as for files
written in arrival order, the rows stream batch by batch; otherwise the
fragment is read whole and stably sorted, so memory is bounded by one
fragment -- use ``split="row_group"`` for big unsorted files). Punctuation of
each shard comes from its own generator, travels in band, and the next stage
re-combines the producers with the Meld rule, exactly as for a DataFrame
source. Late rows are counted in the stats rows.

Cost per task: pyarrow Parquet decoding of the needed columns + the fused
plan; JVM work is O(output rows). A DataFrame that is not a file set keeps
the general ``mapInArrow`` path (:func:`oop.spark.sharded.shard`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from oop.api import DEFAULT_BATCH_SIZE, Stream
from oop.errors import ConfigError, EmptyInputError, UnknownColumnError
from oop.punctuation.base import GeneratorConfig
from oop.spark import arrowio
from oop.spark.common import IDEAL, parse_punctuation_arg
from oop.stream.late import LatePolicy

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from oop.spark.sharded import ShardedStream
    from oop.spark.tasks import ShardRead

__all__ = ["Fragment", "parquet_fragments", "parquet_paths", "shard_files", "read_fragment"]


@dataclass(frozen=True)
class Fragment:
    """One source shard: a Parquet file, or some of its row groups (``None`` = all)."""

    path: str
    row_groups: tuple[int, ...] | None = None
    rows: int = 0


def parquet_paths(paths: str | Path | Sequence[str | Path]) -> list[str]:
    """Expand folders to their ``*.parquet`` files (sorted by name); keep the given order."""
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    out: list[str] = []
    for p in items:
        q = Path(p)
        if q.is_dir():
            found = sorted(str(f) for f in q.glob("*.parquet"))
            if not found:
                raise FileNotFoundError(f"no *.parquet files in folder {str(q)!r}")
            out += found
        elif q.exists():
            out.append(str(q))
        else:
            raise FileNotFoundError(f"no file or folder at {str(q)!r}")
    if not out:
        raise ConfigError("shard_files: no input files given")
    return out


def parquet_fragments(paths: Sequence[str], split: str = "file") -> list[Fragment]:
    """The fragments of ``paths`` in order; reads only the footers. Empty ones are skipped."""
    import pyarrow.parquet as pq

    if split not in ("file", "row_group"):
        raise ConfigError(f"split must be 'file' or 'row_group', got {split!r}")
    out: list[Fragment] = []
    for p in paths:
        try:
            md = pq.read_metadata(p)
        except (OSError, pa.ArrowException) as e:
            raise ConfigError(f"cannot read Parquet footer of {p!r}: {e}") from e
        if split == "file":
            if md.num_rows:
                out.append(Fragment(p, None, md.num_rows))
        else:
            out += [Fragment(p, (g,), md.row_group(g).num_rows)
                    for g in range(md.num_row_groups) if md.row_group(g).num_rows]
    return out


def read_fragment(frag: Fragment, schema: pa.Schema, batch_size: int,
                  arrival: str | None) -> Iterator[pa.RecordBatch]:
    """The rows of ``frag`` (columns of ``schema``, conformed) in arrival order, in batches.

    Without ``arrival``: row order, streamed. With ``arrival``: if the
    fragment's arrival column is non-decreasing the rows stream in batches;
    otherwise the fragment is read whole and stably sorted by ``arrival``.
    """
    from oop.io.formats import parquet_file

    f = parquet_file(frag.path)
    groups = list(frag.row_groups) if frag.row_groups is not None else None
    cols = list(schema.names)
    if arrival is not None:
        a = (f.read_row_groups(groups, columns=[arrival]) if groups is not None
             else f.read(columns=[arrival])).column(0)
        av = a.to_numpy() if a.null_count == 0 else None
        if av is None or (len(av) > 1 and not bool(np.all(av[1:] >= av[:-1]))):
            t = f.read_row_groups(groups, columns=cols) if groups is not None \
                else f.read(columns=cols)
            idx = np.argsort(t.column(arrival).to_numpy(zero_copy_only=False), kind="stable")
            t = t.take(pa.array(idx))
            for b in t.to_batches(max_chunksize=batch_size):
                if b.num_rows:
                    yield arrowio.conform(b, schema)
            return
    for b in f.iter_batches(batch_size=batch_size, row_groups=groups, columns=cols):
        if b.num_rows:
            yield arrowio.conform(b, schema)


def task_ranges(n_frags: int, tasks: int) -> list[range]:
    """Contiguous fragment ranges, one per task (sizes differ by at most one)."""
    bounds = [n_frags * i // tasks for i in range(tasks + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(tasks)]


def _file_task(frags: Sequence[Fragment], tasks: int, schema: pa.Schema, arrival: str | None,
               run: Callable[[Iterator[pa.RecordBatch], int], Iterator[pa.RecordBatch]],
               batch_size: int, per_task: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow task over ``spark.range(tasks)``: task ``i`` runs its contiguous fragments,
    each as its own shard, or (``per_task``) all of them one after the other as ONE shard."""
    ranges = task_ranges(len(frags), tasks)

    def task(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from itertools import chain

        for ids in it:
            for i in ids.column(0).to_numpy(zero_copy_only=False):
                mine = ranges[int(i)]
                if per_task:
                    feed = chain.from_iterable(
                        read_fragment(frags[j], schema, batch_size, arrival) for j in mine)
                    yield from run(feed, int(i))
                else:
                    for j in mine:
                        yield from run(read_fragment(frags[j], schema, batch_size, arrival), j)

    return task


@dataclass(frozen=True)
class FileSource:
    """How the file source shards are read (kept so the first query fuses with them)."""

    spark: Any
    fragments: tuple[Fragment, ...]
    tasks: int
    read: ShardRead
    arrival: str | None
    per_task: bool = False

    def fused(self, plan: Callable[[Stream], Stream] | None, out_schema: pa.Schema,
              out_time: str | None, phys_out: Any) -> "DataFrame":
        """Physical rows of ``plan`` (None: the source itself) run over every fragment."""
        from oop.spark.tasks import fused_rows

        read = self.read

        def run(feed: Iterator[pa.RecordBatch], pid: int) -> Iterator[pa.RecordBatch]:
            phys = arrowio.spark_to_arrow(phys_out)
            return fused_rows(feed, pid, read, plan, out_schema, out_time, phys)

        ids = self.spark.range(0, self.tasks, 1, self.tasks)
        return ids.mapInArrow(_file_task(self.fragments, self.tasks, read.schema, self.arrival,
                                         run, read.batch_size, self.per_task), phys_out)


def _spark_schema_of(path: str, columns: Sequence[str]) -> tuple[pa.Schema, Any]:
    """(Arrow schema as ``mapInArrow`` would see it, Spark StructType) of ``columns``.

    Read from the Parquet footer on the driver (no Spark job): Arrow -> Spark
    -> Arrow types, so timestamps become ``timestamp[us, tz=UTC]`` as in Spark.
    """
    import pyarrow.parquet as pq

    try:
        file_schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as e:
        raise ConfigError(f"cannot read Parquet schema of {path!r}: {e}") from e
    missing = [c for c in columns if c not in file_schema.names]
    if missing:
        raise UnknownColumnError(
            f"shard_files: no column(s) {missing} in {path!r}; its columns are "
            f"{file_schema.names}")
    picked = pa.schema([file_schema.field(c) for c in columns])
    struct = arrowio.arrow_to_spark(picked)
    return arrowio.spark_to_arrow(struct), struct


def shard_files(
    spark: "SparkSession",
    paths: str | Path | Sequence[str | Path],
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | str | None = None,
    arrival: str | None = None,
    columns: Sequence[str] | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    split: str = "file",
    tasks: int | None = None,
    shard_per: str = "fragment",
    name: str = "input",
) -> "ShardedStream":
    """A ShardedStream whose source shards are Parquet fragments read inside Spark tasks.

    ``columns`` (default: all) are the columns the plan reads; ``time`` and
    ``arrival`` are added. ``tasks`` (default: Spark's default parallelism,
    at most one per fragment) is the number of Spark tasks; task ``i`` runs
    the ``i``-th contiguous range of fragments. ``shard_per="fragment"``:
    every fragment is its own shard (producer). ``shard_per="task"``: a
    task's fragments, in order, form ONE shard -- for files written in
    arrival order this is the same stream with fewer shards, hence fewer
    partial windows cut at fragment boundaries (each fragment is still
    sorted by ``arrival`` on its own).
    The first :meth:`~oop.spark.sharded.ShardedStream.query` runs in the same
    task (see the module docstring); movement without a query first runs the
    bare sources there.
    """
    from oop.spark.common import check_time
    from oop.spark.physical import HELPERS, SIDE, phys_spark_schema
    from oop.spark.sharded import ShardedStream
    from oop.spark.tasks import ShardRead

    files = parquet_paths(paths)
    if batch_size < 1:
        raise ConfigError(f"{name}: batch_size must be >= 1, got {batch_size}")
    frags = parquet_fragments(files, split)
    if not frags:
        raise EmptyInputError(f"{name}: the files {files[:3]}... have no rows")
    first = frags[0].path
    if columns is None:
        import pyarrow.parquet as pq

        columns = pq.read_schema(first).names
    cols = list(dict.fromkeys([*columns, time, *([arrival] if arrival else [])]))
    schema, struct = _spark_schema_of(first, cols)
    is_ts, unit = check_time(SimpleNamespace(columns=cols, schema=struct), time, unit, what=name)
    clash = [c for c in cols if c in HELPERS or c == SIDE]
    if clash:
        raise ConfigError(f"{name}: column names {clash} are reserved by oop.spark; rename them")
    punct = parse_punctuation_arg(punctuation)
    if punct == IDEAL or not isinstance(punct, GeneratorConfig):
        raise ConfigError(f"shard_files: punctuation {IDEAL!r} is computed by shard(df, "
                          "punctuation='ideal'); give a generator here")
    # one task per core by default: a Spark task costs tens of ms to schedule and start
    n_tasks = int(spark.sparkContext.defaultParallelism) if tasks is None else int(tasks)
    if n_tasks < 1:
        raise ConfigError(f"{name}: tasks must be >= 1, got {tasks}")
    n_tasks = min(n_tasks, len(frags))
    if shard_per not in ("fragment", "task"):
        raise ConfigError(f"{name}: shard_per must be 'fragment' or 'task', got {shard_per!r}")
    per_task = shard_per == "task"
    fs = FileSource(spark, tuple(frags), n_tasks,
                    ShardRead(schema, time, unit, punct, late, batch_size), arrival, per_task)
    phys_out = phys_spark_schema(schema)
    df = fs.fused(None, schema, time, phys_out)
    n = n_tasks if per_task else len(frags)
    return ShardedStream(df, schema, time, unit, producers=n, shards=n, name=name, aligned=True,
                         source=fs)
