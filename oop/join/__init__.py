"""Window joins (004 ch. 7): OA-Join (band and tumbling; inner, outer, semi, anti;
individual and joint output punctuation) and the k-worker SplitJoin (002).

>>> import pyarrow as pa, oop
>>> L = oop.from_arrow(pa.table({"ts": [1, 5, 9], "k": [1, 2, 1]}), time="ts", name="L")
>>> R = oop.from_arrow(pa.table({"ts": [2, 8, 30], "k": [1, 1, 1]}), time="ts", name="R")
>>> sorted(L.join(R, on="k", band=(2, 2)).collect().to_pylist(), key=lambda r: r["ts"])
[{'ts': 1, 'k': 1, 'ts_right': 2, 'k_right': 1}, {'ts': 9, 'k': 1, 'ts_right': 8, 'k_right': 1}]
"""

from oop.join.oa_join import OAJoin
from oop.operators.base import Operator
from oop.join.reference import nested_loop_join, rows_counter
from oop.join.spec import JoinConfig, WindowPredicate
from oop.join.split_join import SplitJoin

__all__ = ["OAJoin", "SplitJoin", "JoinConfig", "WindowPredicate", "nested_loop_join",
           "rows_counter", "make_join"]


def make_join(config: JoinConfig, workers: int = 1, ordered: bool = False,
              keyed: bool = False) -> Operator:
    """OA-Join for ``workers == 1``, else a SplitJoin with ``workers`` threads; ``ordered``:
    a SplitJoin even for one worker (its ordered gathering: the output of every ``workers``
    row for row); ``keyed`` (with ``workers > 1`` and equality keys): a
    :class:`~oop.join.keyed_join.KeyedJoin` on ``workers`` key partitions (the same output
    as the ordered SplitJoin)."""
    if keyed and workers > 1 and config.on:
        from oop.join.keyed_join import KeyedJoin

        return KeyedJoin(config, workers)
    return OAJoin(config, 1) if workers == 1 and not ordered else SplitJoin(config, workers)
