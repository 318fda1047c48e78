"""The fluent, typed Python API: build a plan over disordered feeds and run it.

>>> import pyarrow as pa, oop
>>> t = pa.table({"ts": [3, 1, 2, 6, 5], "v": [30, 10, 20, 60, 50]})
>>> s = oop.from_arrow(t, time="ts", unit="s", punctuation=oop.BoundedDelay(2), batch_size=2)
>>> res = s.select(lambda b: pa.compute.greater(b["v"], 15)).run()
>>> sorted(res.table.column("v").to_pylist())
[20, 30, 50, 60]

A :class:`Stream` is a lazy handle on a node of a plan DAG; every method
returns a new Stream. Nothing runs until :meth:`Stream.run` (or
:meth:`Stream.collect`), which builds the DAG from the sinks back to the
sources, opens each operator (validating columns and types), and pushes the
sources' feeds through it.

Sources come from :func:`from_arrow`, :func:`from_batches`,
:func:`from_parquet`, :func:`from_pandas` and :func:`from_iter`; each
declares its progressing attribute (``time``, with ``unit`` for integer
columns), a punctuation generator and a late policy.
"""

from __future__ import annotations

import time as _time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar, overload

import pyarrow as pa
import pyarrow.parquet as pq

from oop.errors import UnknownColumnError
from oop.operators.base import Operator
from oop.operators.meld import Meld
from oop.operators.select import Predicate, Select
from oop.plan.executor import Checkpoint, Executor, Node
from oop.plan.output import Target, as_sink, iterate, late_tables, late_writer, run_writing
from oop.plan.result import Result
from oop.plan.sink import Collect
from oop.plan.source import FeedItem, Source
from oop.plan.writer import Drain, SinkWriter
from oop.punctuation.base import GeneratorConfig
from oop.stream import DEFAULT_BATCH_SIZE
from oop.stream.late import LatePolicy

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from oop.io.amount import Amount

__all__ = [
    "Stream",
    "from_arrow",
    "from_batches",
    "from_parquet",
    "from_pandas",
    "from_iter",
    "from_connector",
    "from_socket",
    "DEFAULT_BATCH_SIZE",
]

DEFAULT_COMMIT_ROWS = 1_000_000  # to_parquet: parts become visible about this often
_Op = TypeVar("_Op", bound=Operator)


class Stream:
    """A lazy handle on one node of a plan. Methods return new Streams."""

    def __init__(self, node: Node) -> None:
        self.node = node

    # ---- composing ---------------------------------------------------
    def via(self, op: Operator, *others: "Stream") -> "Stream":
        """Feed this stream (input 0) and ``others`` (inputs 1..) into ``op``."""
        return Stream(Node(op, [self.node, *(o.node for o in others)]))

    def select(self, predicate: Predicate, name: str = "select") -> "Stream":
        """Keep tuples where ``predicate`` holds (an Arrow expression or a batch -> mask callable)."""
        return self.via(Select(predicate, name=name))

    def project(self, columns: Sequence[str], name: str = "project") -> "Stream":
        """Keep only ``columns`` (punctuation on dropped attributes is dropped too)."""
        from oop.operators.project import Project

        return self.via(Project(columns, name=name))

    def apply(self, name: str = "apply", **columns: Any) -> "Stream":
        """Add or replace columns computed by vectorized expressions or batch callables."""
        from oop.operators.apply import Apply

        return self.via(Apply(columns, name=name))

    def derive_time(self, column: str, fn: str, sources: Sequence[str], *,
                    primary: bool = False, name: str = "derive_time") -> "Stream":
        """Add ``column = fn(*sources)`` (``fn`` = ``"max"``/``"min"``) as a progressing attribute.

        Punctuation on the sources is translated (max: any source's, or a joint
        one; min: all sources' individual punctuation); window on it with
        ``.window(..., time=column)``. See :mod:`oop.operators.derive_time`.
        """
        from oop.operators.derive_time import DeriveTime

        return self.via(DeriveTime(column, fn, sources, primary=primary, name=name))

    def dupelim(self, columns: Sequence[str] | None = None, name: str = "dupelim") -> "Stream":
        """Drop tuples equal (on ``columns``, default all) to one seen before."""
        from oop.operators.dupelim import DupElim

        return self.via(DupElim(columns, name=name))

    def meld(self, *others: "Stream", name: str = "meld") -> "Stream":
        """Order-agnostic union with ``others``; punctuation is the min over inputs."""
        return self.via(Meld(1 + len(others), name=name), *others)

    def join(
        self,
        other: "Stream",
        *,
        on: Sequence[str | tuple[str, str]] | str = (),
        band: tuple[int | str, int | str] | None = None,
        tumbling: int | str | None = None,
        how: str = "inner",
        punctuation: str = "individual",
        residual: Any = None,
        late: LatePolicy | str = "drop",
        workers: int = 1,
        ordered: bool = False,
        keyed: bool = False,
        name: str = "join",
    ) -> "Stream":
        """Order-agnostic window join with ``other`` (OA-Join, 004 ch. 7; see ``oop.join``).

        ``band=(range0, range1)``: ``self.ts - range0 <= other.ts <= self.ts + range1``
        (durations like ``"1s"`` or ints in the time unit); ``tumbling=size``:
        same window ``[N*size, (N+1)*size)``. ``on``: equality keys (names or
        ``(left, right)`` pairs). ``how``: inner, left, right, full, semi, anti.
        ``punctuation``: individual, joint or both. ``residual``: extra vectorized
        predicate over the joined columns. Output: this stream's columns as they
        are, then ``other``'s, a clashing name suffixed ``_right``; both times stay
        progressing attributes. ``workers > 1`` runs the parallel SplitJoin.
        ``ordered``: each input element's rows sorted (SplitJoin's ordered gathering) even
        with one worker, so the output is the same row for row for every ``workers``.
        ``keyed`` (``workers > 1`` with ``on`` keys): split the join by key instead
        (:class:`~oop.join.keyed_join.KeyedJoin`: each partition stores, probes and purges
        its keys on its own thread; the ordered output); skewed keys load one partition.
        """
        from oop.join import JoinConfig, WindowPredicate, make_join
        if (band is None) == (tumbling is None):
            from oop.errors import ConfigError

            raise ConfigError(
                f"join {name!r}: give exactly one of band=(range0, range1) or tumbling=size"
            )
        spec = ("band", *band) if band is not None else ("tumbling", tumbling)
        # durations are resolved when the plan opens, in the inputs' time unit
        placeholder = WindowPredicate.band(0, 0) if band is not None else WindowPredicate.tumbling(1)
        cfg = JoinConfig(placeholder, JoinConfig.normalize_on(on), how, punctuation, residual,
                         LatePolicy.parse(late), name=name, extra={"durations": spec})
        return self.via(make_join(cfg, workers, ordered, keyed), other)

    def window(
        self,
        kind: Any,
        aggs: Any,
        *,
        by: str | Sequence[str] = (),
        method: str = "auto",
        late: LatePolicy | str | None = None,
        allowed_lateness: int | str = 0,
        emit_wid: bool = False,
        name: str = "window",
        time: str | None = None,
        threads: int = 1,
    ) -> "Stream":
        """Window aggregation (WID / Paned-WID / AdaptWID, 004 ch. 6); see :mod:`oop.window`.

        Output: ``by`` columns, ``window_start``, ``window_end``, one column per
        aggregate (+ ``wid``, + ``is_revision`` with ``late="update"``),
        punctuated on ``window_end``. ``late=None`` counts tuples behind the
        last punctuation as ``late_dropped``; ``"update"`` with
        ``allowed_lateness`` re-emits revised rows. ``time``: the progressing
        attribute to window on (default: the primary one), e.g. ``"ts_right"``
        after a join or a column made by :meth:`derive_time`; only punctuation
        on it closes windows. ``threads``: run on that many key partitions, one thread
        each (:mod:`oop.window.threaded`: same rows in the same order; tumbling and
        sliding windows with a ``by`` key, else one thread). ``method="adapt"``: AdaptWID,
        as :meth:`adaptive_window` (its late rule, no ``late`` / ``emit_wid`` options).
        """
        if method == "adapt":
            return self._adapt_window(kind, aggs, by=by, late=late,
                                      allowed_lateness=allowed_lateness, emit_wid=emit_wid,
                                      name=name, time=time, threads=threads)
        from oop.window.plan import window_operator

        return self.via(window_operator(kind, aggs, by=by, method=method, late=late,
                                        allowed_lateness=allowed_lateness, emit_wid=emit_wid,
                                        name=name, time=time, threads=threads))

    def adaptive_window(
        self,
        kind: Any,
        aggs: Any,
        *,
        by: str | Sequence[str] = (),
        sources: Sequence["Stream"] | None = None,
        thresholds: Any = "adaptive",
        name: str = "adaptwid",
        time: str | None = None,
        threads: int = 1,
    ) -> "Stream":
        """AdaptWID (004 §6.3): per-group eager/lazy window aggregation; see :mod:`oop.adapt`.

        Same output as :meth:`window` (``by``, ``window_start``, ``window_end``,
        one column per aggregate, punctuated on ``window_end``) for Tumbling /
        Sliding windows. ``sources``: other streams aggregated in union with
        this one (their arrival-time offsets enter Cond. 6.9). ``thresholds``:
        ``"adaptive"``, ``"eager"`` (WID), ``"lazy"`` (buffering) or an
        ``oop.adapt.Thresholds``. ``time``: the progressing attribute to window
        on (default: the primary one), as in :meth:`window`. ``threads``: run on that
        many key partitions (:mod:`oop.adapt.threaded`: same rows in the same order; with
        a ``by`` key and one source, else one thread, the reason in ``plan_info``).
        """
        from oop.adapt.threaded import adaptive_operator

        others = list(sources or ())
        op = adaptive_operator(kind, aggs, by=by, n_inputs=1 + len(others),
                               thresholds=thresholds, name=name, time=time, threads=threads)
        return self.via(op, *others)

    def _adapt_window(self, kind: Any, aggs: Any, *, by: str | Sequence[str],
                      late: LatePolicy | str | None, allowed_lateness: int | str,
                      emit_wid: bool, name: str, time: str | None, threads: int) -> "Stream":
        """``window(method="adapt")``: AdaptWID, refusing the options it does not have."""
        from oop.errors import ConfigError

        given = [f"{k}={v!r}" for k, v, none in (("late", late, None),
                                                 ("allowed_lateness", allowed_lateness, 0),
                                                 ("emit_wid", emit_wid, False)) if v != none]
        if given:
            raise ConfigError(f"window {name!r}: method='adapt' (AdaptWID) counts its late "
                              f"tuples and has no {', '.join(given)}; drop it, or use "
                              "method='auto'")
        return self.adaptive_window(kind, aggs, by=by, name=name, time=time, threads=threads)

    def pair_window(self, aggs: Any, *, times: tuple[str, str] = ("ts", "ts_right"),
                    sizes: tuple[Any, Any] = (1, 1), origins: tuple[int, int] = (0, 0),
                    by: str | Sequence[str] = (), name: str = "pair_window") -> "Stream":
        """Aggregate per 2-D cell of two progressing attributes (a join's ``ts``, ``ts_right``).

        Cells close on individual punctuation on either time or on joint
        punctuation covering them (004 §7.2, Q7-1): see :mod:`oop.join.pair_window`.
        """
        from oop.join.pair_window import PairWindow

        return self.via(PairWindow(aggs, times=times, sizes=sizes, origins=origins, by=by,
                                   name=name))

    # ---- running -----------------------------------------------------
    @overload
    def executor(self, sink_name: str = "sink") -> tuple[Executor, Collect]: ...

    @overload
    def executor(self, sink_name: str = "sink", *, terminal: _Op) -> tuple[Executor, _Op]: ...

    def executor(self, sink_name: str = "sink", *,
                 terminal: Operator | None = None) -> tuple[Executor, Operator]:
        """Build (but do not run) the plan ending in ``terminal`` (default: a collecting sink).

        ``terminal`` is a one-input operator that ends the plan: :class:`Collect`
        (``run``), :class:`~oop.plan.writer.SinkWriter` (``sink``),
        :class:`~oop.plan.writer.Drain` (``iter_batches``). The first run uses
        this Stream's operator objects; if they have already been opened by an
        earlier run, the DAG is rebuilt on fresh operators (same constructor
        arguments), so running a Stream twice gives the same result twice.
        """
        sink = terminal if terminal is not None else Collect(sink_name)
        node = _fresh_dag(self.node) if _dag_used(self.node) else self.node
        return Executor([Node(sink, [node])]), sink

    def run(
        self,
        *,
        stop_after_rounds: int | None = None,
        resume_from: Checkpoint | None = None,
        on_round: Callable[[int], None] | None = None,
    ) -> Result:
        """Run the plan to the end (or stop after ``stop_after_rounds`` source rounds).

        The output is collected in memory (``Result.table``); use :meth:`sink`,
        :meth:`iter_batches` or :meth:`to_parquet` to let it leave as it is
        produced. ``resume_from`` continues a checkpoint taken by an earlier,
        stopped run of a plan built the same way; a checkpoint holds no output,
        so the Result then holds only the rows produced after the cut (the
        stopped run's rows followed by these equal an uninterrupted run).
        """
        ex, sink = self.executor()
        t0 = _time.perf_counter()
        if resume_from is not None:
            ex.resume(resume_from)
        cp = ex.run(stop_after_rounds=stop_after_rounds, on_round=on_round)
        wall = _time.perf_counter() - t0
        return Result(
            table=sink.table(),
            punctuations=list(sink.punctuations),
            metrics={n.op.name: n.op.metrics for n in ex.nodes},
            late=late_tables(ex),
            wall_s=wall,
            checkpoint=cp,
            sources=tuple(s.op.name for s in ex.sources),
        )

    def sink(self, target: Target, *, format: str | None = None, late: Target | None = None,
             commit_every: int | None = None,
             on_round: Callable[[int], None] | None = None,
             checkpoint_dir: str | Path | None = None,
             checkpoint_every: "Amount | str | None" = None,
             keep_checkpoints: int = 3, progress: bool = False,
             background: bool | None = None) -> Result:
        """Run the plan writing every output batch to ``target`` as it is produced.

        ``target``: a :class:`~oop.io.protocol.Sink`, a ``fn(batch)`` callable,
        or a path / folder / ``-`` given to :func:`oop.io.sinks.open_sink` (with
        ``format``). ``late``: the same kinds of target for the rows that
        ``side_output`` late policies route (default: kept in ``Result.late``).
        ``commit_every``: commit the sink at the first punctuation after this
        many rows (a part folder then shows its parts during the run, each once
        it is durable, without waiting for it: :meth:`~oop.io.parts.PartsSink.publish`;
        a file is flushed and fsynced); None commits at the end only.
        Nothing is collected: the Result has an empty table and no
        punctuations, but metrics, late (when no ``late`` target) and wall time.
        The run opens, commits and closes the sinks; on an error it aborts
        them and re-raises (a failing write is a :class:`oop.errors.SinkError`).
        Memory: the plan's state plus at most the sink's Parquet row-group buffer.

        ``checkpoint_dir``: run as a restartable job (:class:`oop.plan.job.Job`, as
        ``oop replay --checkpoint-dir``): every ``checkpoint_every`` (an
        :class:`~oop.io.amount.Amount` or text such as ``"1min"`` or
        ``"100000rows"``; default one minute) the sinks commit and a durable
        checkpoint (source offsets, operator state, commit points) is written,
        keeping the newest ``keep_checkpoints``. Running the same plan again
        with the same folder resumes from the newest checkpoint: the committed
        output equals an uninterrupted run's, with no row repeated or lost
        (targets must then be folders of parts and sources re-readable; a
        finished run's final checkpoint makes a rerun a no-op). SIGINT / SIGTERM
        checkpoint and raise :class:`oop.errors.Interrupted` (``code`` 130 / 143).
        ``commit_every`` is ignored then (parts are committed with checkpoints).
        ``progress``: a progress line on stderr every 5 s.
        ``background``: the batches are encoded and written on threads of their own, in
        order, as ``oop replay --threads 2`` does (a part folder encodes its parts on two
        lanes; any other target is written by one thread, a ``fn(batch)`` target called
        there): the same output, while the plan goes on
        (:class:`oop.plan.background.BackgroundSink`). Commits and checkpoints wait for
        what was queued before them; a failed write is raised by the next write, commit
        or the end of the run. The default (None) is on for a path target when the
        process may use more than one core, off for a Sink or a callable of yours
        (which then runs on the calling thread);
        :func:`~oop.plan.background.on_by_default`.
        """
        if checkpoint_dir is None and checkpoint_every is not None:
            from oop.errors import ConfigError

            raise ConfigError("checkpoint_every says how often to write a checkpoint; "
                              "give checkpoint_dir too (where to write it)")
        if checkpoint_dir is None:
            writer = SinkWriter(_out_sink(target, format, background), commit_rows=commit_every)
            late_out = late_writer(late)
            ex, _ = self.executor(terminal=writer)
            return run_writing(ex, writer, late_out, on_round)
        from oop.plan.job import job_options
        from oop.plan.output import run_checkpointed

        options = job_options(checkpoint_dir, checkpoint_every, keep_checkpoints,
                              progress=progress, on_round=on_round)
        writer = SinkWriter(_out_sink(target, format, background))
        late_out = late_writer(late)
        ex, _ = self.executor(terminal=writer)
        return run_checkpointed(ex, writer, late_out, options)

    def iter_batches(self, *, late: Target | None = None) -> Iterator[pa.RecordBatch]:
        """Run the plan lazily, yielding output batches round by round as they are produced.

        Only one executor round's batches are held at a time. ``late`` is a
        late-rows target as in :meth:`sink` (without one, late rows stay in the
        operators' ``side_outputs`` until the generator is dropped). Closing
        the generator early stops the run (and commits the late target).
        """
        late_out = late_writer(late)
        drain = Drain()
        ex, _ = self.executor(terminal=drain)
        return iterate(ex, drain, late_out)

    def collect(self) -> pa.Table:
        """Run and return the output rows as an Arrow table."""
        return self.run().table

    def to_pandas(self) -> "pd.DataFrame":
        return self.collect().to_pandas()

    def to_parquet(self, path: str | Path, *, late: Target | None = None,
                   commit_every: int | None = DEFAULT_COMMIT_ROWS,
                   checkpoint_dir: str | Path | None = None,
                   checkpoint_every: "Amount | str | None" = None,
                   keep_checkpoints: int = 3, background: bool | None = None) -> Result:
        """Run, streaming the output rows to Parquet without collecting them.

        A path ending in ``/`` or an existing folder gets rolling part files
        (``part-00000.parquet`` ...), committed -- renamed into view -- at the
        first punctuation after every ``commit_every`` rows and at the end; any
        other path is one Parquet file written row group by row group.
        ``checkpoint_dir`` / ``checkpoint_every`` / ``keep_checkpoints``: a
        restartable, exactly-once run as in :meth:`sink` (``path`` must then be
        a folder). ``background``: encode and write on threads of their own, as in
        :meth:`sink` (by default when the process may use more than one core). Returns the
        (table-less) Result of :meth:`sink`.
        """
        return self.sink(path, format="parquet", late=late, commit_every=commit_every,
                         checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                         keep_checkpoints=keep_checkpoints, background=background)


def _out_sink(target: Target, format: str | None, background: bool | None) -> Any:
    """The sink of :meth:`Stream.sink`'s ``target``, written on threads of its own when
    ``background`` (None: for a path, when the process may use more than one core)."""
    from oop.plan.background import BackgroundSink, on_by_default

    out = as_sink(target, format, "out")
    if background is None and not isinstance(target, (str, Path)):
        background = False  # the caller's Sink or callable runs on the calling thread
    return BackgroundSink(out) if on_by_default(background) else out


def _dag_nodes(node: Node) -> list[Node]:
    out: list[Node] = []
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen.add(n.id)
        out.append(n)
        stack.extend(n.parents)
    return out


def _dag_used(node: Node) -> bool:
    """True when some operator upstream of ``node`` was already opened by a run."""
    return any(n.op.output is not None for n in _dag_nodes(node))


def _fresh_dag(node: Node) -> Node:
    """A copy of the DAG ending at ``node`` with fresh operators (shared sub-DAGs stay shared)."""
    memo: dict[int, Node] = {}

    def copy(n: Node) -> Node:
        if n.id not in memo:
            memo[n.id] = Node(n.op.fresh(), [copy(p) for p in n.parents])
        return memo[n.id]

    return copy(node)


# ---- sources -----------------------------------------------------------
def _source(
    feed: Callable[[], Iterable[FeedItem]],
    *,
    time: str,
    unit: str,
    punctuation: GeneratorConfig | None,
    late: LatePolicy | str,
    schema: pa.Schema | None,
    name: str,
    resumable: bool = True,
    connector: Any = None,
    max_ahead: str | int | None = None,
) -> Stream:
    src = Source(feed, time=time, unit=unit, punctuation=punctuation, late=late,
                 schema=schema, name=name, resumable=resumable, connector=connector,
                 max_ahead=max_ahead)
    return Stream(Node(src))


def from_arrow(
    table: pa.Table | pa.RecordBatch,
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    name: str = "source",
) -> Stream:
    """A stream replaying ``table``'s rows in row order, in batches of ``batch_size``."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if time not in table.column_names:
        raise UnknownColumnError(
            f"source {name!r}: no column {time!r} to use as event time; "
            f"the table's columns are {table.column_names}"
        )
    return _source(
        lambda: table.to_batches(max_chunksize=batch_size), time=time, unit=unit,
        punctuation=punctuation, late=late, schema=table.schema, name=name,
    )


def from_batches(
    batches: Sequence[pa.RecordBatch],
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    schema: pa.Schema | None = None,
    name: str = "source",
) -> Stream:
    """A stream replaying a list of RecordBatches (and feed punctuations) as given."""
    items = list(batches)
    return _source(lambda: items, time=time, unit=unit, punctuation=punctuation,
                   late=late, schema=schema, name=name)


def from_iter(
    items: Iterable[FeedItem],
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    schema: pa.Schema | None = None,
    name: str = "source",
) -> Stream:
    """A stream over a one-shot Python iterator of batches (not resumable)."""
    return _source(lambda: items, time=time, unit=unit, punctuation=punctuation,
                   late=late, schema=schema, name=name, resumable=False)


def from_parquet(
    path: str | Path,
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    columns: Sequence[str] | None = None,
    name: str | None = None,
    read_ahead: bool | None = None,
) -> Stream:
    """A stream over a Parquet file or folder; rows are replayed in file order.

    The data is read lazily, ``batch_size`` rows at a time (memory is bounded by the
    batch, not the file), on one thread as ``oop replay`` reads it. A folder's files are
    read in sorted name order. ``read_ahead``: decode on a thread of its own, up to two
    batches ahead of the plan (Arrow decodes without holding the GIL), as ``oop replay
    --threads 2`` does: the same rows in the same order
    (:func:`oop.plan.background.read_ahead`); by default (None) when the process may use
    more than one core (:func:`~oop.plan.background.on_by_default`). Every run of the
    stream reads the files again.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no Parquet file or folder at {str(p)!r}")
    files = sorted(f for f in p.rglob("*.parquet")) if p.is_dir() else [p]
    if not files:
        raise FileNotFoundError(f"folder {str(p)!r} holds no *.parquet files")
    schema = pq.read_schema(files[0])
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])

    from oop.io.formats import parquet_file

    def batches() -> Iterator[pa.RecordBatch]:
        for f in files:  # one thread: as oop.io.formats reads Parquet for oop replay
            yield from parquet_file(f).iter_batches(batch_size=batch_size, columns=columns,
                                                    use_threads=False)

    from oop.plan.background import on_by_default, read_ahead as ahead

    ahead_of_plan = on_by_default(read_ahead)

    def feed() -> Iterable[pa.RecordBatch]:
        return ahead(batches(), name or p.stem) if ahead_of_plan else batches()

    return _source(feed, time=time, unit=unit, punctuation=punctuation, late=late,
                   schema=schema, name=name or p.stem)


def from_connector(
    connector: Any,
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    poll_timeout: float = 0.2,
    name: str | None = None,
    max_ahead: str | int | None = None,
) -> Stream:
    """A stream over an :mod:`oop.io` connector (a file or folder, standard input, a socket,
    a Redis stream): batches of at most ``batch_size`` rows are polled as they come.

    A live connector that has nothing after ``poll_timeout`` seconds makes the source
    idle for that round (its punctuation segment closes, idle rules run). The source's
    checkpoint holds the connector's offset, and a restore seeks to it. The connector
    is opened here (its schema, when known, is the stream's). ``max_ahead`` (a duration):
    a tuple further ahead of the source's punctuation than that -- a bad clock -- does not
    advance it and follows the late policy, counted as ``ahead``.
    """
    from oop.io.protocol import END

    if batch_size < 1:
        from oop.errors import ConfigError

        raise ConfigError(f"batch_size must be a row count >= 1, got {batch_size}")
    schema = connector.open()

    def feed() -> Iterable[FeedItem]:
        while True:
            item = connector.poll(batch_size, poll_timeout)
            if item is END:
                return
            yield item

    return _source(feed, time=time, unit=unit, punctuation=punctuation, late=late,
                   schema=schema, name=name or connector.name,
                   resumable=bool(connector.resumable), connector=connector,
                   max_ahead=max_ahead)


def from_socket(
    host: str,
    port: int,
    *,
    format: str = "csv",
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    name: str | None = None,
) -> Stream:
    """A stream over a TCP socket carrying CSV or NDJSON lines or an Arrow IPC stream.

    The feed ends when the peer closes the connection. Not resumable after a crash
    (a socket cannot be re-read): at-most-once unless the sender replays.
    """
    from oop.io.live import SocketSource

    return from_connector(SocketSource(host, port, format), time=time, unit=unit,
                          punctuation=punctuation, late=late, batch_size=batch_size,
                          name=name or f"{host}:{port}")


def from_pandas(
    df: "pd.DataFrame",
    *,
    time: str,
    unit: str = "ms",
    punctuation: GeneratorConfig | None = None,
    late: LatePolicy | str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    name: str = "source",
) -> Stream:
    """A stream replaying a pandas DataFrame's rows in row order."""
    return from_arrow(pa.Table.from_pandas(df, preserve_index=False), time=time, unit=unit,
                      punctuation=punctuation, late=late, batch_size=batch_size, name=name)
