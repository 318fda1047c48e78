"""Pluggable disorder handling: one logical query, planned OOP or IOP.

When the slack covers the actual disorder, every plan (``oop``, ``iop-sort``,
``iop-bsort:N``, ``iop-slack:D`` consistent and generous) gives the batch
oracle's rows. When it does not, the IOP plan reports what it dropped and
its accuracy is below 1 -- never a silent difference.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

import oop
from oop.errors import ConfigError
from oop.query import (Strategy, WindowQuery, accuracy, dropped, parse_strategy,
                       partially_dropped)
from oop.testing import disordered_tables
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling
from oop.window.reference import canonical, window_oracle

AGGS = [agg.count(), agg.sum("val")]
KINDS = [Tumbling(6), Sliding(10, 2)]


def _sources(t: pa.Table, n_sources: int, d: int, batch: int) -> list:
    """Split ``t`` round-robin into ``n_sources`` feeds, each punctuated BoundedDelay(d)."""
    out = []
    for i in range(n_sources):
        part = t.take(pa.array(np.arange(i, t.num_rows, n_sources), pa.int64()))
        out.append(oop.from_arrow(part, time="ts", punctuation=oop.BoundedDelay(d),
                                  batch_size=batch, name=f"s{i}"))
    return out


@given(st.data())
def test_all_plans_equal_the_oracle_when_slack_covers_the_disorder(data):
    d = data.draw(st.integers(0, 8))
    t = data.draw(disordered_tables(min_rows=1, max_rows=50, max_delay=d))
    kind = data.draw(st.sampled_from(KINDS))
    n_src = data.draw(st.integers(1, 2))
    batch = data.draw(st.integers(1, 12))
    expected = canonical(window_oracle(t, kind, AGGS, ("key",)))
    # splitting into sources keeps each source within delay d of its own max
    specs = ["oop", "iop-sort", f"iop-bsort:{t.num_rows}", f"iop-slack:{d}",
             f"iop-slack:{d},generous"]
    if n_src > 1:
        # the union's disorder also depends on how the sources' batches interleave: a slack
        # as wide as the data's time span covers it whatever the interleaving
        ts = t.column("ts").to_numpy()
        span = int(ts.max() - ts.min()) + 1
        specs = ["oop", "iop-sort", f"iop-slack:{span}", f"iop-slack:{span},generous"]
    for spec in specs:
        q = WindowQuery(_sources(t, n_src, d, batch), kind, AGGS, by="key")
        res = q.plan(spec).run()
        assert res.late_total == 0, spec
        assert dropped(res) == 0, spec
        assert canonical(res.table) == expected, spec


@given(st.data())
def test_too_small_slack_reports_drops_and_accuracy(data):
    t = data.draw(disordered_tables(min_rows=5, max_rows=50, max_delay=None))
    kind = data.draw(st.sampled_from(KINDS))
    src = oop.from_arrow(t, time="ts", punctuation=oop.punctuation.External(), batch_size=7)
    oracle = window_oracle(t, kind, AGGS, ("key",))
    for sem in ("consistent", "generous"):
        res = WindowQuery([src], kind, AGGS, by="key").plan(f"iop-slack:0,{sem}").run()
        acc = accuracy(res.table, oracle, ["key", "window_start"], "count")
        lost = dropped(res) + partially_dropped(res)
        # every input tuple is either counted in some window or reported dropped
        assert res.tuples_in == t.num_rows
        if canonical(res.table) != canonical(oracle):
            assert lost > 0 and acc.exact_fraction < 1.0
        else:
            assert acc.exact_fraction == 1.0
        if sem == "consistent":
            counted = sum(r["count"] for r in res.table.to_pylist())
            per_tuple = {r: (r.wids(np.array([0]))[1] - r.wids(np.array([0]))[0])[0] for r in [kind]}
            assert counted == (t.num_rows - dropped(res)) * int(per_tuple[kind])


def test_generous_is_at_least_as_accurate_as_consistent():
    """004 Fig. 6-11's claim on one band-disordered stream: same slack, generous loses less."""
    rng = np.random.default_rng(0)
    n = 3000
    ts = np.sort(rng.integers(0, 6000, n))
    order = np.argsort(ts + rng.integers(0, 200, n), kind="stable")
    t = pa.table({"ts": pa.array(ts[order], pa.int64()), "key": pa.array(rng.integers(0, 3, n)),
                  "val": pa.array(rng.integers(0, 100, n))})
    kind = Sliding(400, 50)
    oracle = window_oracle(t, kind, AGGS, ("key",))
    errs = {}
    for sem in ("consistent", "generous"):
        src = oop.from_arrow(t, time="ts", batch_size=64)
        res = WindowQuery([src], kind, AGGS, by="key").plan(f"iop-slack:60,{sem}").run()
        errs[sem] = accuracy(res.table, oracle, ["key", "window_start"], "count").mean_error_pct
    assert 0 <= errs["generous"] <= errs["consistent"]
    assert errs["consistent"] > 0


def test_parse_strategy_round_trips_and_rejects_nonsense():
    for spec in ("oop", "iop-sort", "iop-bsort:100", "iop-slack:2s,consistent",
                 "iop-slack:500,generous"):
        assert parse_strategy(parse_strategy(spec).spec) == parse_strategy(spec)
    assert parse_strategy("iop-slack:2s") == Strategy("iop-slack", "2s", "consistent")
    for bad in ("iop-slack", "iop-slack:2s,lenient", "iop-bsort:x", "fast", "iop-slack:2 parsecs"):
        with pytest.raises(ConfigError):
            parse_strategy(bad)


def test_plan_shapes():
    t = pa.table({"ts": pa.array([1, 2, 3], pa.int64()), "key": pa.array([0, 0, 1]),
                  "val": pa.array([1, 2, 3])})
    srcs = [oop.from_arrow(t, time="ts", name="a"), oop.from_arrow(t, time="ts", name="b")]
    q = WindowQuery(srcs, Tumbling(2), AGGS, by="key")
    names = {spec: set(q.plan(spec).run().metrics) for spec in ("oop", "iop-sort", "iop-slack:1")}
    assert "meld" in names["oop"] and "window" in names["oop"]
    assert {"merge", "buffering_window"} <= names["iop-sort"]
    assert any(n.startswith("sort[") for n in names["iop-sort"])
    assert "buffering_window" in names["iop-slack:1"]


@pytest.mark.parametrize("iop_join", ["opob", "opib"])
def test_join_query_oop_and_iop_plans_agree(iop_join):
    from oop.query import JoinQuery
    from oop.testing import same_bag

    def tab(seed: int, n: int = 150) -> pa.Table:
        r = np.random.default_rng(seed)
        ts = np.sort(r.integers(0, 300, n))
        o = np.argsort(ts + r.integers(0, 10, n), kind="stable")
        return pa.table({"ts": pa.array(ts[o], pa.int64()), "key": pa.array(r.integers(0, 5, n)[o]),
                         "val": pa.array(np.arange(n))})

    a, b = tab(1), tab(2)
    out = {}
    for spec in ("oop", "iop-sort"):
        left = oop.from_arrow(a, time="ts", batch_size=16, punctuation=oop.BoundedDelay(10), name="l")
        right = oop.from_arrow(b, time="ts", batch_size=16, punctuation=oop.BoundedDelay(10), name="r")
        out[spec] = JoinQuery(left, right, iop_join=iop_join, on="key", band=(5, 5)).plan(spec).run()
    assert out["oop"].table.num_rows > 0
    assert same_bag(out["iop-sort"].table.select(out["oop"].table.schema.names), out["oop"].table)
