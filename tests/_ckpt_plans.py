"""Plans used by the durable-checkpoint tests (tests/test_checkpoint_store.py)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import oop
from oop import agg
from oop.query import WindowQuery, parse_strategy
from oop.iop_baseline import Merge, Reorder, SortBuffer
from oop.iop_baseline.gigascope import FlushPolicy, GigascopeHighLevel, GigascopeLowLevel
from oop.query import JoinQuery
from oop.window.session import Session
from oop.window.kinds import Landmark, PartitionedRows, RowSliding, SlideByTuple, Sliding, Tumbling


def table(n: int = 600, seed: int = 0, delay: int = 20) -> pa.Table:
    """A disordered table: ts (int64), key (int), skey (string), val, fval, seq."""
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64)
    order = np.argsort(ts + rng.integers(0, delay, n), kind="stable")
    keys = rng.integers(0, 5, n)[order]
    return pa.table({
        "ts": pa.array(ts[order]),
        "key": pa.array(keys),
        "skey": pa.array([f"k{int(k)}" for k in keys]),
        "val": pa.array(rng.integers(0, 50, n)[order]),
        "fval": pa.array(rng.normal(0, 1, n)[order]),
        "seq": pa.array(order.astype(np.int64)),
    })


def src(t: pa.Table, name: str = "src", batch_size: int = 16, delay: int = 20,
        punctuation: object = None, late: str = "side") -> oop.Stream:
    return oop.from_arrow(t, time="ts", batch_size=batch_size,
                          punctuation=punctuation or oop.BoundedDelay(delay), late=late, name=name)


def _sq(s: float, v: float) -> float:
    return s + v * v


SUMSQ = agg.udaf("sumsq", lambda: 0.0, _sq, lambda a, b: a + b, lambda s: s, column="val")


ALL_AGGS = [agg.count(), agg.sum("val"), agg.mean("fval"), agg.min("val"), agg.max("fval"),
            agg.var("fval"), agg.std("val"), agg.first("val"), agg.last("val"),
            agg.median("val"), agg.quantile("fval", 0.9), agg.distinct("val"),
            agg.heavy_hitters("val", 3)]

Plan = Callable[..., oop.Stream]


def _join(t: pa.Table, workers: int, bs: int) -> oop.Stream:
    left = src(t, "L", bs)
    right = src(t.slice(0, 400), "R", bs).project(["ts", "key", "val"], name="pr")
    return left.join(right, on="key", band=(5, 5), workers=workers)


def _keyed_join(t: pa.Table, partitions: int, how: str, bs: int) -> oop.Stream:
    """An outer join on key partitions; the sources forward their late tuples
    (``late="update"``, a short delay) so the join decides them (side output; both inputs
    projected to one schema: a join keeps both inputs' late rows in one side output)."""
    left = src(t, "L", bs, delay=5, late="update").project(["ts", "key", "val"], name="pl")
    right = src(t.slice(0, 400), "R", bs, delay=5, late="update").project(
        ["ts", "key", "val"], name="pr")
    return left.join(right, on="key", band=(5, 5), how=how, late="side_output",
                     workers=partitions, ordered=True, keyed=True)


PLANS: dict[str, Plan] = {
    "wid-tumbling-int": lambda t, bs=16: src(t, batch_size=bs).window(
        Tumbling(50), ALL_AGGS, by="key", method="wid"),
    "wid-sliding-str": lambda t, bs=16: src(t, batch_size=bs).window(
        Sliding(60, 20), ALL_AGGS, by="skey", method="wid"),
    "paned-sliding": lambda t, bs=16: src(t, batch_size=bs).window(
        Sliding(60, 20), ALL_AGGS, by=["key", "skey"], method="paned"),
    "paned-tumbling-nokey": lambda t, bs=16: src(t, batch_size=bs).window(
        Tumbling(40), [agg.count(), agg.median("val"), agg.distinct("skey")], method="paned"),
    "adaptwid": lambda t, bs=16: src(t, batch_size=bs).adaptive_window(
        Sliding(60, 20), [agg.count(), agg.sum("val"), agg.max("val"), agg.std("fval")],
        by="key"),
    "adaptwid-lazy": lambda t, bs=16: src(t, batch_size=bs).adaptive_window(
        Tumbling(50), [agg.count(), agg.mean("fval"), agg.var("fval")], by="skey",
        thresholds="lazy"),
    "slide-by-tuple": lambda t, bs=16: src(t, batch_size=bs).window(
        SlideByTuple(30, 7), [agg.count(), agg.sum("val")], by="key"),
    "partitioned-rows": lambda t, bs=16: src(t, batch_size=bs).window(
        PartitionedRows(10, 5), [agg.count(), agg.sum("val"), agg.median("val")], by="key"),
    "oa-join": lambda t, bs=16: _join(t, 1, bs),
    "split-join": lambda t, bs=16: _join(t, 2, bs),
    # (two queries: the fingerprint does not tell partition counts apart)
    "keyed-join-2": lambda t, bs=16: _keyed_join(t, 2, "left", bs),
    "keyed-join-3": lambda t, bs=16: _keyed_join(t, 3, "full", bs),
    "meld-select-dupelim": lambda t, bs=16: src(t, "a", bs).meld(
        src(t.slice(100), "b", bs)).select(pc.field("val") > 5).apply(
        v2=pc.field("val") * 2).dupelim(["ts", "key"]),
    "derive-time": lambda t, bs=16: _join(t, 1, bs).derive_time(
        "t_max", "max", ["ts", "ts_right"], name="dmax").window(
        Tumbling(50), [agg.count()], by="key", time="t_max"),
    "iop-slack": lambda t, bs=16: WindowQuery(
        [src(t, batch_size=bs)], Tumbling(50), [agg.count(), agg.sum("val")], by="key"
    ).plan(parse_strategy("iop-slack:20,consistent")),
    "iop-slack-2s": lambda t, bs=16: WindowQuery(
        [oop.from_arrow(t.set_column(0, "ts", pc.multiply(t.column("ts"), 20)), time="ts",
                        batch_size=bs, name="src")],
        Sliding(1000, 500), [agg.count(), agg.sum("val")], by="skey"
    ).plan(parse_strategy("iop-slack:2s,consistent")),
    "generators": lambda t, bs=16: src(
        t, "a", bs, punctuation=oop.Idle(oop.BoundedTuples(4), 5)).meld(
        src(t, "b", bs, punctuation=oop.Granular(oop.BoundedDelay(10), 8)),
        src(t, "c", bs, punctuation=oop.Adaptive(0.1, window=8))).window(
        Sliding(40, 20), [agg.count(), agg.sum("val")], by="key", method="paned"),
    "late-update": lambda t, bs=16: src(t, batch_size=bs, delay=5, late="update").window(
        Tumbling(30), [agg.count(), agg.sum("val"), agg.median("val")], by="key", late="update",
        allowed_lateness=40),
    "session": lambda t, bs=16: src(t, batch_size=bs).window(
        Session(4), [agg.count(), agg.sum("val"), agg.var("fval"), agg.first("val")], by="skey"),
    "session-update": lambda t, bs=16: src(t, batch_size=bs, delay=5, late="update").window(
        Session(6), [agg.count(), agg.max("val")], by="key", late="update", allowed_lateness=40),
    "udaf-landmark": lambda t, bs=16: src(t, batch_size=bs).window(
        Landmark(100), [agg.count(), SUMSQ], by="key"),
    "udaf-paned": lambda t, bs=16: src(t, batch_size=bs).window(
        Sliding(60, 20), [SUMSQ, agg.quantile("val", 0.25)], by="skey", method="paned"),
    "row-sliding": lambda t, bs=16: src(t, batch_size=bs).window(
        RowSliding(20, 10), [agg.count(), agg.max("val")], by="skey"),
    "pair-window": lambda t, bs=16: _join(t, 1, bs).pair_window(
        [agg.count(), agg.sum("val")], sizes=(20, 30), by="key"),
    "gigascope": lambda t, bs=16: oop.from_arrow(t.sort_by("ts"), time="ts", batch_size=bs).via(
        GigascopeLowLevel("key", 50, table_size=3, policy=FlushPolicy("oop-slow", every=2))).via(
        GigascopeHighLevel("key")),
    "bsort-merge": lambda t, bs=16: src(t, "a", bs).via(
        SortBuffer(mode="tuples", slack=30)).via(
        Merge(2), src(t, "b", bs).via(SortBuffer(mode="time", slack=20))),
    "reorder": lambda t, bs=16: src(t, batch_size=bs).via(Reorder("seq", capacity=4)),
    "opob-join": lambda t, bs=16: JoinQuery(
        src(t, "L", bs), src(t.slice(0, 300), "R", bs), iop_join="opob", on="key", band=(5, 5)
    ).plan("iop-sort"),
    "opib-join": lambda t, bs=16: JoinQuery(
        src(t, "L", bs), src(t.slice(0, 300), "R", bs), iop_join="opib", on="key", band=(5, 5)
    ).plan("iop-bsort:20"),
    "iop-sort": lambda t, bs=16: WindowQuery(
        [src(t, "a", bs), src(t.slice(50), "b", bs)], Sliding(40, 10),
        [agg.count(), agg.max("val")], by="skey").plan("iop-sort"),
}
