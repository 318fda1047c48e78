"""KeyedJoin (oop.join.keyed_join): OA-Join on key partitions gives, row for row and
punctuation for punctuation, the output of the one-worker ordered SplitJoin -- for every
join type, band and tumbling predicates, any batch boundaries, late tuples -- and that
output is the from-scratch nested-loop join of the tuples that were not late."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oop
from oop.api import Stream
from oop.errors import ConfigError
from oop.join import JoinConfig, SplitJoin, WindowPredicate, nested_loop_join, rows_counter
from oop.join.keyed_join import KeyedJoin, keyed
from oop.plan.executor import Node
from oop.testing import disordered_tables

HOWS = ["inner", "left", "right", "full", "semi", "anti"]


def _run(L: pa.Table, R: pa.Table, how: str, pred: dict[str, Any], bl: int, br: int,
         make: Any) -> Any:
    s0 = oop.from_arrow(L, time="ts", punctuation=oop.BoundedDelay(3), batch_size=bl,
                        name="L")
    s1 = oop.from_arrow(R, time="ts", punctuation=oop.BoundedDelay(3), batch_size=br,
                        name="R")
    j = s0.join(s1, on="key", how=how, punctuation="both", **pred)
    return Stream(Node(make(j.node.op.config), j.node.parents)).run()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([3, 8]).flatmap(lambda d: st.tuples(  # 3: BoundedDelay(3) exact
           disordered_tables(max_rows=50, n_keys=6, max_delay=d),
           disordered_tables(max_rows=50, n_keys=6, max_delay=d))),
       st.sampled_from(HOWS), st.sampled_from([{"band": (2, 3)}, {"tumbling": 5}]),
       st.integers(1, 12), st.integers(1, 12), st.integers(2, 4))
def test_keyed_join_is_the_ordered_one_worker_join(tables: tuple[pa.Table, pa.Table],
                                                   how: str, pred: dict[str, Any], bl: int,
                                                   br: int, n: int) -> None:
    L, R = tables
    one = _run(L, R, how, pred, bl, br, lambda c: SplitJoin(c, 1))
    part = _run(L, R, how, pred, bl, br, lambda c: KeyedJoin(c, n))
    assert part.table.equals(one.table)
    assert part.punctuations == one.punctuations
    assert part.late_total == one.late_total
    if part.late_total == 0:  # from scratch (by definition) when no tuple was late
        p = WindowPredicate.band(2, 3) if "band" in pred else WindowPredicate.tumbling(5)
        want = nested_loop_join(L, R, p, (("key", "key"),), "ts", "ts", how=how)
        assert rows_counter(part.table) == want

def test_a_join_without_keys_is_refused_in_one_line() -> None:
    cfg = JoinConfig(WindowPredicate.band(1, 1), ())
    assert keyed(cfg) == "it has no equality keys to partition on"
    with pytest.raises(ConfigError, match="no equality keys"):
        KeyedJoin(cfg, 2)
    with pytest.raises(ConfigError, match="partitions=1"):
        KeyedJoin(JoinConfig(WindowPredicate.band(1, 1), (("key", "key"),)), 1)
