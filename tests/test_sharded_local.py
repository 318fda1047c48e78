"""oop.sharded (the Spark ShardedStream's API on threads) == the one-thread plan.

Differential tests on Hypothesis disordered feeds with valid punctuation:
``window`` (ThreadedWindow) equals the one-thread window row for row, with
the same punctuation; every other sharded plan (GroupApply by key, reshard,
broadcast, multicast, fused queries, rekey, shuffle and broadcast joins)
equals the one-thread plan as a multiset of rows, its melded punctuation is
never violated by a later row, and every input tuple is accounted for.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oop
from oop.errors import ConfigError, UnknownColumnError
from oop.sharded import Route, ShardedQuery, shard, shard_of_keys
from oop.stream.elements import Punctuation
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed
from oop.window import Sliding, Tumbling, agg

AGGS = [agg.count(), agg.sum("val"), agg.min("val"), agg.max("val"), agg.mean("val")]


@st.composite
def feeds(draw, max_rows=60, string_keys=None):
    sk = draw(st.booleans()) if string_keys is None else string_keys
    t = draw(disordered_tables(max_rows=max_rows, n_keys=draw(st.sampled_from([1, 4, 12])),
                               max_delay=draw(st.sampled_from([0, 3, 10])), string_keys=sk))
    return t, draw(exact_punctuation_feed(draw(batch_splits(t))))


def source(items, schema, name="in"):
    return oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                            schema=schema, name=name)


def bag(t: pa.Table) -> Counter:
    return Counter(zip(*(t.column(c).to_pylist() for c in t.column_names)))


def assert_valid(res) -> None:
    """No row after a melded punctuation is below it; the values grow."""
    rows = res.table.to_pylist()
    last: dict[str, int] = {}
    for at, p in res.punctuations:
        assert isinstance(p, Punctuation)
        assert p.value > last.get(p.attr, -2**63)
        last[p.attr] = p.value
        assert all(r[p.attr] >= p.value for r in rows[at:] if r[p.attr] is not None), p


# ---- window: row for row ---------------------------------------------------------------
@pytest.mark.parametrize("kind", [Tumbling(7), Sliding(10, 3)], ids=repr)
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_window_is_the_one_thread_window_row_for_row(kind, data):
    t, items = data.draw(feeds())
    one = source(items, t.schema).window(kind, AGGS, by="key").run()
    for n in (2, 3):
        res = shard(source(items, t.schema), shards=n).window(kind, AGGS, by="key").run()
        assert res.table.equals(one.table)
        assert res.punctuations == one.punctuations
        assert res.late_total == one.late_total == 0
    # no by key: ThreadedWindow cannot partition it; it runs on one thread, same rows
    glob = shard(source(items, t.schema), shards=2).window(kind, AGGS).run()
    assert glob.table.equals(source(items, t.schema).window(kind, AGGS).run().table)


# ---- GroupApply: redistribute by key, a plan per shard ------------------------------------
def per_key_plan(s):
    return (s.select(pc.field("val") >= -50)
             .window(Tumbling(5), [agg.count(), agg.sum("val")], by="key", name="w"))


@settings(max_examples=25, deadline=None)
@given(data=st.data(), n=st.sampled_from([1, 2, 3]))
def test_group_apply_equals_the_one_thread_plan(data, n):
    t, items = data.draw(feeds())
    one = per_key_plan(source(items, t.schema)).run()
    sh = shard(source(items, t.schema), shards=n).redistribute(n, "key").query(per_key_plan)
    res = sh.collect()
    assert bag(res.table) == bag(one.table)
    assert res.table.schema.equals(one.table.schema)
    assert res.tuples_in == t.num_rows and res.late_total == 0
    assert_valid(res)
    # each key was aggregated in exactly one shard: no (key, window) twice
    keys = list(zip(res.table.column("key").to_pylist(),
                    res.table.column("window_end").to_pylist()))
    assert len(keys) == len(set(keys))


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_movements_keep_every_row(data):
    t, items = data.draw(feeds(string_keys=False))
    ident = lambda s: s.select(pc.field("val") >= -1000)  # noqa: E731
    base = bag(t)
    s = shard(source(items, t.schema), shards=3)
    r = s.reshard(2).query(ident).collect()
    assert bag(r.table) == base and r.tuples_in == t.num_rows
    assert_valid(r)
    b = s.broadcast(3).query(ident).collect()
    assert bag(b.table) == Counter({k: 3 * c for k, c in base.items()})
    # multicast: even keys to shard 0, odd keys to shards 0 and 1
    def two_for_odd(batch):
        odd = (batch.column("key").to_numpy() % 2) == 1
        return np.stack([np.ones(batch.num_rows, bool), odd], axis=1)

    m = s.multicast(2, two_for_odd).query(ident).collect()
    assert bag(m.table) == Counter({k: (2 if k[1] % 2 else 1) * c for k, c in base.items()})
    assert_valid(m)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_fused_queries_and_rekey(data):
    t, items = data.draw(feeds(string_keys=False))

    one = (source(items, t.schema).apply(k2=pc.multiply(pc.field("key"), 3))
           .select(pc.field("val") > 0).dupelim(["ts", "k2", "val"])
           .window(Tumbling(6), [agg.count()], by="k2")).run()
    sh = (shard(source(items, t.schema), shards=2)
          .rekey("k2", pc.multiply(pc.field("key"), 3))
          .redistribute(3, "k2")
          .query(lambda s: s.select(pc.field("val") > 0))  # fused ...
          .query(lambda s: s.dupelim(["ts", "k2", "val"]))  # ... with this one
          .query(lambda s: s.window(Tumbling(6), [agg.count()], by="k2")))
    res = sh.collect()
    assert bag(res.table) == bag(one.table) and res.shards == 3
    assert_valid(res)


# ---- joins -------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(data=st.data(), how=st.sampled_from(["inner", "left", "full", "semi", "anti"]),
       keyed=st.booleans())
def test_sharded_join_equals_the_one_thread_join(data, how, keyed):
    (tl, il), (tr, ir) = data.draw(feeds(string_keys=False)), data.draw(feeds(string_keys=False))
    if not keyed and how == "full":
        how = "left"
    kw = dict(on="key" if keyed else (), band=(2, 3), how=how)
    one = source(il, tl.schema, "L").join(source(ir, tr.schema, "R"), **kw).run()
    n = data.draw(st.sampled_from([2, 3]))
    res = shard(source(il, tl.schema, "L"), shards=n).join(
        shard(source(ir, tr.schema, "R"), shards=n), **kw).collect()
    assert bag(res.table) == bag(one.table)
    assert res.late_total == one.late_total == 0
    assert_valid(res)


# ---- pieces and errors ---------------------------------------------------------------------
def test_key_shards_agree_across_inputs_and_nulls_go_to_shard_0():
    a = pa.record_batch({"k": pa.array([1, 2, None, 7], pa.int64())})
    b = pa.record_batch({"kk": pa.array([7, 1, 2], pa.int64())})
    sa, sb = shard_of_keys(a, ["k"], 5), shard_of_keys(b, ["kk"], 5)
    assert sa[2] == 0 and sa[3] == sb[0] and sa[0] == sb[1] and sa[1] == sb[2]
    assert ((sa >= 0) & (sa < 5)).all()


def test_errors_are_one_line():
    t = pa.table({"ts": [1, 2], "key": [1, 2], "val": [3, 4]})
    s = shard(oop.from_arrow(t, time="ts"), shards=2)
    with pytest.raises(ConfigError, match="2 and 3 shards"):
        s.query(lambda a, b: a.meld(b), shard(oop.from_arrow(t, time="ts"), shards=3))
    with pytest.raises(ConfigError, match="full outer join without on= keys"):
        s.join(shard(oop.from_arrow(t, time="ts"), shards=2), band=(1, 1), how="full")
    with pytest.raises(ConfigError, match="shards must be >= 1"):
        shard(oop.from_arrow(t, time="ts"), shards=0)
    with pytest.raises(UnknownColumnError, match="no key column"):
        s.redistribute(2, "nope").query(lambda x: x).run()
    with pytest.raises(ConfigError, match="checkpointed"):
        ShardedQuery(lambda x: x, [Route("round_robin", 2)]).snapshot()
    with pytest.raises(ConfigError, match="must return an oop Stream"):
        s.query(lambda x: 3).run()
