"""The registry of operator contract cases (docs/architecture.md, "The operator contract").

One :class:`ContractCase` per concrete :class:`~oop.operators.base.Operator`
subclass under ``oop/``: a factory building it with a representative
configuration, the StreamInfos it is opened on, a Hypothesis strategy for a
disordered feed with valid punctuation, and how its output accounts for its
input. ``tests/test_operator_contract.py`` runs every case through the same
properties and fails when an Operator subclass has no case here and is not in
:data:`EXCLUDED` (so adding an operator means adding a case).

To add an operator: append a ``ContractCase`` to :data:`CASES` (``cls`` is the
class, ``build`` a zero-argument factory). ``weight`` maps the output table to
the number of input tuples it represents (row count for one-to-one
operators, the sum of a ``count`` column for aggregates); ``expected`` maps
the fed input tables to the number the output must account for (default:
all rows); ``lost`` reads what the operator dropped (default: its late
counters). ``weight=None`` skips accounting with a reason in ``no_accounting``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import strategies as st

from oop.adapt.operator import AdaptWID
from oop.adapt.panes import PanedAdaptWID
from oop.adapt.threaded import ThreadedAdapt
from oop.iop_baseline.buffering_window import BufferingWindow
from oop.iop_baseline.gigascope import GigascopeHighLevel, GigascopeLowLevel
from oop.iop_baseline.merge import Merge
from oop.iop_baseline.opib_join import OPIBJoin
from oop.iop_baseline.opob_join import OPOBJoin
from oop.iop_baseline.reorder import Reorder
from oop.iop_baseline.sort_buffer import SortBuffer
from oop.join.oa_join import OAJoin
from oop.join.pair_window import PairWindow
from oop.join.reference import nested_loop_join
from oop.join.spec import JoinConfig, WindowPredicate
from oop.join.keyed_join import KeyedJoin
from oop.join.split_join import SplitJoin
from oop.operators.apply import Apply
from oop.operators.base import Operator, StreamInfo
from oop.operators.derive_time import DeriveTime
from oop.operators.dupelim import DupElim
from oop.operators.meld import Meld
from oop.operators.project import Project
from oop.operators.rename import Rename
from oop.operators.select import Select
from oop.sharded import Route, ShardedQuery
from oop.stream.elements import Punctuation
from oop.testing import TABLE_SCHEMA, batch_splits, disordered_tables, drive_operator, \
    exact_punctuation_feed
from oop.window import aggregates as agg
from oop.window.aggregate import WindowAggregate
from oop.window.cumulate import Cumulate
from oop.window.kinds import PartitionedRows, SlideByTuple, Sliding, Tumbling
from oop.window.partitioned import PartitionedRowsAggregate
from oop.window.session import Session, SessionAggregate
from oop.window.slide_by_tuple import SlideByTupleAggregate
from oop.window.threaded import ThreadedWindow

Feed = list[tuple[int, Any]]

#: Operator subclasses with no contract case, each with the reason. Only abstract bases
#: and plan plumbing that is not a stream operator belong here.
EXCLUDED: dict[str, str] = {
    # abstract base of the IOP operators' late handling (no on_batch of its own)
    "oop.iop_baseline._late.DropsLate": "abstract base",
    # shared base of OPOBJoin / OPIBJoin: its release step raises NotImplementedError
    "oop.join.inorder.InOrderJoin": "abstract base (OPOB/OPIB have cases)",
    # plan plumbing: a Source pulls from its own feed (nothing is pushed into it); its
    # replay, punctuation and resume are tested in tests/test_sources.py, test_snapshot.py
    "oop.plan.source.Source": "plan plumbing (a source, not pushed into)",
    # terminal sinks: they emit nothing, so there is no output stream to check
    "oop.plan.sink.Collect": "terminal sink (tests/test_core_smoke.py)",
    "oop.plan.writer.Drain": "terminal sink",
    "oop.plan.writer.SinkWriter": "terminal sink (tests/test_io_sinks.py)",
    # Spark shard plumbing: CombinePartials merges per-shard partial aggregates (its input
    # is a partial-aggregate schema made by the sharded planner; tests/test_spark_sharded.py)
    # and _Outbox is a private queue between shards
    "oop.spark.combine.CombinePartials": "Spark shard plumbing (tests/test_spark_sharded.py)",
    "oop.spark.tasks.Outbox": "Spark shard plumbing (a queue between shards)",
    # local sharding plumbing: the entry and exit of one shard's private plan, driven by
    # ShardedQuery (which has its case)
    "oop.sharded._Inlet": "private local shard plumbing (ShardedQuery has a case)",
    "oop.sharded._Outbox": "private local shard plumbing (ShardedQuery has a case)",
}

INFO = StreamInfo("s", TABLE_SCHEMA, {"ts": "ms"}, "ts")
INFO_R = StreamInfo("r", TABLE_SCHEMA, {"ts": "ms"}, "ts")


@dataclass(frozen=True)
class ContractCase:
    """One operator under the contract (module docstring)."""

    id: str
    cls: type
    build: Callable[[], Operator]
    inputs: tuple[StreamInfo, ...] = (INFO,)
    feed: Callable[[], st.SearchStrategy[Feed]] = field(default=lambda: one_feed())
    weight: Callable[[pa.Table], int] | None = lambda t: t.num_rows
    expected: Callable[[Sequence[pa.Table]], int] = lambda ins: sum(t.num_rows for t in ins)
    lost: Callable[[Operator], int] = lambda op: op.metrics.late_total
    no_accounting: str = ""
    #: when set, snapshot() must raise an error matching this text (the operator cannot
    #: checkpoint; the reason is the text)
    no_snapshot: str = ""
    #: property name -> reason for a known bug (the test is xfail(strict=True))
    xfail: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ContractCase({self.id!r})"


# ---- feeds ------------------------------------------------------------------------
def _punctuated(t: pa.Table, max_batch: int = 6) -> st.SearchStrategy[list[Any]]:
    return batch_splits(t, max_batch=max_batch).flatmap(exact_punctuation_feed)


@st.composite
def one_feed(draw: st.DrawFn, max_rows: int = 18, max_delay: int | None = 4,
             extra: Callable[[pa.Table], pa.Table] | None = None) -> Feed:
    """One disordered ``(ts, key, val)`` input with valid punctuation, on port 0."""
    t = draw(disordered_tables(max_rows=max_rows, n_keys=3, max_delay=max_delay))
    if extra is not None:
        t = extra(t)
    return [(0, x) for x in draw(_punctuated(t))]


@st.composite
def two_feeds(draw: st.DrawFn, max_rows: int = 12, max_delay: int | None = 4) -> Feed:
    """Two such inputs interleaved at random (each keeps its own order)."""
    a = draw(one_feed(max_rows, max_delay))
    b = [(1, x) for _, x in draw(one_feed(max_rows, max_delay))]
    picks = draw(st.lists(st.booleans(), min_size=len(a) + len(b), max_size=len(a) + len(b)))
    out: Feed = []
    for left in picks:
        out.append(a.pop(0) if (left and a) or not b else b.pop(0))
    return out


@st.composite
def late_feed(draw: st.DrawFn, max_rows: int = 18) -> Feed:
    """:func:`one_feed` with a few *late* tuples: after some punctuation ``P(ts, v)`` a
    batch of tuples with ``ts < v`` (the feed breaks its promise, as a real source can)."""
    out: Feed = []
    for port, e in draw(one_feed(max_rows)):
        out.append((port, e))
        if isinstance(e, Punctuation) and draw(st.booleans()):
            ts = draw(st.lists(st.integers(e.value - 6, e.value - 1), min_size=1, max_size=3))
            n = len(ts)
            out.append((port, pa.record_batch(
                [pa.array(ts, pa.int64()), pa.array([0] * n, pa.int64()),
                 pa.array(range(n), pa.int64())], schema=TABLE_SCHEMA)))
    return out


def upstream_feed(build: Callable[[], Operator], inputs: Sequence[StreamInfo],
                  feed: Callable[[], st.SearchStrategy[Feed]]) -> st.SearchStrategy[Feed]:
    """``feed`` pushed through an upstream operator: its output elements, on port 0."""
    return feed().map(lambda f: [(0, e) for e in drive_operator(build(), inputs, f)])


def upstream_info(build: Callable[[], Operator], inputs: Sequence[StreamInfo]) -> StreamInfo:
    return build().open(list(inputs))


def _with_seq(t: pa.Table) -> pa.Table:
    """Add a serial number ``seq`` = rank by ts (Reorder restores that order)."""
    seq = np.argsort(np.argsort(t.column("ts").to_numpy(), kind="stable"), kind="stable")
    return t.append_column("seq", pa.array(seq.astype(np.int64), pa.int64()))


def _count_sum(col: str = "count") -> Callable[[pa.Table], int]:
    return lambda t: int(pc.sum(t.column(col)).as_py() or 0) if t.num_rows else 0


def _select_expected(ins: Sequence[pa.Table]) -> int:
    return sum(int(pc.sum(pc.greater(t.column("val"), 0).cast(pa.int64())).as_py() or 0)
               for t in ins if t.num_rows)


def _distinct_expected(ins: Sequence[pa.Table]) -> int:
    return sum(len({(r["ts"], r["key"]) for r in t.select(["ts", "key"]).to_pylist()})
               for t in ins)


def _join_expected(cfg: JoinConfig) -> Callable[[Sequence[pa.Table]], int]:
    def n(ins: Sequence[pa.Table]) -> int:
        return sum(nested_loop_join(ins[0], ins[1], cfg.predicate, cfg.on, "ts", "ts",
                                    how=cfg.how).values())
    return n


# ---- configurations ---------------------------------------------------------------
AGGS = [agg.count(), agg.sum("val")]
BAND = JoinConfig(WindowPredicate.band(2, 3), (("key", "key"),))
TUMBLE_JOIN = JoinConfig(WindowPredicate.tumbling(5), (("key", "key"),))
FULL_BAND = JoinConfig(WindowPredicate.band(2, 3), (("key", "key"),), how="full",
                       punctuation="both")
SEQ_SCHEMA = TABLE_SCHEMA.append(pa.field("seq", pa.int64()))

_pair_inputs = (INFO, INFO_R)
PAIR_INFO = upstream_info(lambda: OAJoin(BAND), _pair_inputs)


def _seq_feed() -> st.SearchStrategy[Feed]:
    return one_feed(extra=_with_seq)


CASES: list[ContractCase] = [
    # -- windows (004 ch. 5-6) --
    ContractCase("wid-tumbling", WindowAggregate,
                 lambda: WindowAggregate(Tumbling(4), AGGS, by="key", method="wid"),
                 weight=_count_sum()),
    ContractCase("wid-late-side", WindowAggregate,
                 lambda: WindowAggregate(Tumbling(4), AGGS, by="key", late="side_output"),
                 feed=late_feed, weight=_count_sum()),
    ContractCase("paned-sliding", WindowAggregate,
                 lambda: WindowAggregate(Sliding(6, 2), AGGS, by="key", method="paned"),
                 weight=None, no_accounting="a tuple lies in range/slide windows"),
    ContractCase("cumulate", WindowAggregate,
                 lambda: WindowAggregate(Cumulate(step=2, size=6), AGGS, by="key"),
                 weight=None, no_accounting="a tuple lies in several cumulative windows"),
    ContractCase("session", SessionAggregate,
                 lambda: SessionAggregate(Session(3), AGGS, by="key"), weight=_count_sum()),
    ContractCase("session-late-drop", SessionAggregate,
                 lambda: SessionAggregate(Session(3), AGGS, by="key", late="drop"),
                 feed=late_feed, weight=_count_sum()),
    ContractCase("partitioned-rows", PartitionedRowsAggregate,
                 lambda: PartitionedRowsAggregate(PartitionedRows(2, 2), AGGS, by="key"),
                 weight=None, no_accounting="row windows: a tuple lies in range/slide windows"),
    ContractCase("slide-by-tuple", SlideByTupleAggregate,
                 lambda: SlideByTupleAggregate(SlideByTuple(5, 3), AGGS),
                 weight=None, no_accounting="a tuple lies in every window whose range holds it"),
    ContractCase("threaded-tumbling", ThreadedWindow,
                 lambda: ThreadedWindow(Tumbling(4), AGGS, threads=2, by="key"),
                 weight=_count_sum()),
    ContractCase("sharded-window", ShardedQuery,
                 lambda: ShardedQuery(lambda x: x.window(Tumbling(4), AGGS, by="key"),
                                      [Route("key", 2, ("key",))]),
                 weight=_count_sum(), no_snapshot="a sharded query cannot be checkpointed"),
    # -- AdaptWID (004 ch. 6.2) --
    ContractCase("adaptwid", AdaptWID,
                 lambda: AdaptWID(Tumbling(4), AGGS, by="key"), weight=_count_sum()),
    ContractCase("paned-adaptwid", PanedAdaptWID,
                 lambda: PanedAdaptWID(Tumbling(4), AGGS, by="key"), weight=_count_sum()),
    ContractCase("threaded-adaptwid", ThreadedAdapt,
                 lambda: ThreadedAdapt(Tumbling(4), AGGS, threads=2, by="key"),
                 weight=_count_sum()),
    # -- joins (004 ch. 7) --
    ContractCase("oa-join-band", OAJoin, lambda: OAJoin(BAND), inputs=(INFO, INFO_R),
                 feed=two_feeds, expected=_join_expected(BAND)),
    ContractCase("split-join-tumbling", SplitJoin, lambda: SplitJoin(TUMBLE_JOIN, 2),
                 inputs=(INFO, INFO_R), feed=two_feeds, expected=_join_expected(TUMBLE_JOIN)),
    ContractCase("keyed-join-band", KeyedJoin, lambda: KeyedJoin(BAND, 2),
                 inputs=(INFO, INFO_R), feed=two_feeds, expected=_join_expected(BAND)),
    # an outer join: a resumed partition must still emit the rows that never matched
    ContractCase("keyed-join-full-3", KeyedJoin, lambda: KeyedJoin(FULL_BAND, 3),
                 inputs=(INFO, INFO_R), feed=two_feeds, expected=_join_expected(FULL_BAND)),
    ContractCase("opob-join", OPOBJoin, lambda: OPOBJoin(BAND), inputs=(INFO, INFO_R),
                 feed=lambda: two_feeds(max_delay=0), expected=_join_expected(BAND)),
    ContractCase("opib-join", OPIBJoin, lambda: OPIBJoin(BAND), inputs=(INFO, INFO_R),
                 feed=lambda: two_feeds(max_delay=0), expected=_join_expected(BAND)),
    ContractCase("pair-window", PairWindow,
                 lambda: PairWindow(AGGS, sizes=(4, 4)), inputs=(PAIR_INFO,),
                 feed=lambda: upstream_feed(lambda: OAJoin(BAND), _pair_inputs, two_feeds),
                 weight=_count_sum()),
    # -- stateless and relational operators --
    ContractCase("select", Select, lambda: Select(pc.field("val") > 0),
                 expected=_select_expected),
    ContractCase("project", Project, lambda: Project(["ts", "val"])),
    ContractCase("apply", Apply, lambda: Apply({"v2": pc.field("val") * 2})),
    ContractCase("rename", Rename, lambda: Rename({"val": "value"})),
    ContractCase("dupelim", DupElim, lambda: DupElim(["ts", "key"]),
                 expected=_distinct_expected),
    ContractCase("meld", Meld, lambda: Meld(2), inputs=(INFO, INFO_R), feed=two_feeds),
    ContractCase("derive-time", DeriveTime,
                 lambda: DeriveTime("t_max", "max", ["ts", "ts_right"]), inputs=(PAIR_INFO,),
                 feed=lambda: upstream_feed(lambda: OAJoin(BAND), _pair_inputs, two_feeds)),
    # -- the in-order (IOP) baseline (004 ch. 8) --
    ContractCase("buffering-window", BufferingWindow,
                 lambda: BufferingWindow(Tumbling(4), AGGS, ("key",)), weight=_count_sum()),
    ContractCase("sort-buffer", SortBuffer, lambda: SortBuffer(mode="punctuation")),
    ContractCase("sort-buffer-late", SortBuffer,
                 lambda: SortBuffer(mode="punctuation", late="side_output"), feed=late_feed),
    ContractCase("reorder", Reorder, lambda: Reorder("seq", capacity=4),
                 inputs=(StreamInfo("s", SEQ_SCHEMA, {"ts": "ms"}, "ts"),), feed=_seq_feed,
                 lost=lambda op: op.metrics.late_total),
    ContractCase("merge", Merge, lambda: Merge(2), inputs=(INFO, INFO_R),
                 feed=lambda: two_feeds(max_delay=0), lost=lambda op: op.dropped),
    ContractCase("gigascope-low", GigascopeLowLevel,
                 lambda: GigascopeLowLevel("key", 2, table_size=8), weight=_count_sum(),
                 feed=lambda: one_feed(max_delay=1)),
    ContractCase("gigascope-high", GigascopeHighLevel, lambda: GigascopeHighLevel("key"),
                 inputs=(upstream_info(lambda: GigascopeLowLevel("key", 2, table_size=8),
                                       (INFO,)),),
                 feed=lambda: upstream_feed(lambda: GigascopeLowLevel("key", 2, table_size=8),
                                            (INFO,), one_feed),
                 weight=_count_sum(), expected=lambda ins: sum(_count_sum()(t) for t in ins)),
]


def operator_classes() -> list[type]:
    """Every Operator subclass defined under ``oop/`` (imports every module first)."""
    import importlib
    import pkgutil

    import oop

    for m in pkgutil.walk_packages(oop.__path__, "oop."):
        importlib.import_module(m.name)
    seen: list[type] = []
    todo = [Operator]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return [c for c in seen if c.__module__.startswith("oop.")]


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


__all__ = ["CASES", "EXCLUDED", "ContractCase", "operator_classes", "qualname"]
