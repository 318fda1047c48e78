"""Join state is charged to the plan's state budget (``oop.limits``, ``--max-state``).

* an OA-Join whose stored tuples would pass the limit raises the one-line
  StateLimitError naming the join, before storing (and so does a split join
  over several workers: the total over its workers counts);
* within the limit, the join's output is unchanged and its figure in the
  budget follows its state: it grows with stored tuples and shrinks when a
  punctuation purges them; the budget is shared with a window after it;
* a pair window (2-D cells after a join) is charged too.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import oop
from oop.errors import StateLimitError
from oop.limits import state_budget
from oop.stream.elements import JointPunctuation, Punctuation
from oop.testing import rows
from oop.window import Tumbling, agg


def _side(n: int, seed: int, punctuate: bool, every: int = 5000):
    """``n`` rows 1 ms apart with 1000 keys; a punctuation 50 ms behind after every batch
    (or none: the other side's state is never purged)."""
    rng = np.random.default_rng(seed)
    t = pa.table({"ts": np.arange(n, dtype=np.int64), "key": rng.integers(0, 1000, n),
                  "val": rng.random(n)})
    items: list = []
    for b in t.to_batches(max_chunksize=every):
        items.append(b)
        if punctuate:
            items.append(Punctuation("ts", int(b.column("ts")[-1].as_py()) - 50))
    return t, items


def _join(n: int, punctuate: bool, workers: int = 1):
    lt, li = _side(n, 1, punctuate)
    rt, ri = _side(n, 2, punctuate)
    L = oop.from_batches(li, time="ts", unit="ms", punctuation=oop.External(), schema=lt.schema)
    R = oop.from_batches(ri, time="ts", unit="ms", punctuation=oop.External(), schema=rt.schema)
    return L.join(R, on="key", band=(10, 10), name="band_join", workers=workers)


@pytest.mark.parametrize("workers", [1, 3])
def test_join_state_over_the_limit_raises_one_line_naming_the_join(workers):
    """No punctuation: every tuple stays stored (~45 B each); 2 x 100k of them pass 4 MiB."""
    with state_budget(4 << 20):
        j = _join(100_000, punctuate=False, workers=workers)
        with pytest.raises(StateLimitError, match=r"^band_join: state would grow to [\d.]+ MiB "
                                                  r"\(\d+ stored tuples of one input side\).* "
                                                  r"over the --max-state limit of 4\.0 MiB; "
                                                  r"raise --max-state[^\n]*$"):
            j.run()


def test_join_within_the_limit_is_unchanged_and_its_budget_figure_follows_its_state():
    free = _join(20_000, punctuate=True).run().table
    with state_budget(4 << 20) as b:
        res = _join(20_000, punctuate=True).run()
        peak_join = res.metrics["band_join"].peak_state_bytes
        assert 0 < peak_join < 4 << 20
        assert b.used < peak_join // 10  # purged by the punctuations, emptied at the end
    assert sorted(map(str, rows(res.table))) == sorted(map(str, rows(free)))
    with state_budget(4 << 20) as b:  # with a window after it: both fit, the output is the same
        j = _join(20_000, punctuate=True)
        w = j.window(Tumbling(100), [agg.count(), agg.sum("val")], by="key").run()
        assert w.table.column("count").to_numpy().sum() == free.num_rows


def test_join_charges_the_budget_it_shares_with_other_operators():
    """The limit counts the join and the window after it together."""
    with state_budget(4 << 20) as b:
        b.grow("someone else", "other", (4 << 20) - (64 << 10))  # all but 64 KiB taken
        j = _join(20_000, punctuate=True)
        with pytest.raises(StateLimitError, match=r"^band_join: .*held by other operators"):
            j.run()


def test_pair_window_cells_are_charged():
    from oop.join.pair_window import PairWindow
    from oop.operators.base import StreamInfo

    n = 50_000
    schema = pa.schema([("ts", pa.int64()), ("ts_right", pa.int64()), ("v", pa.float64())])
    with state_budget(1 << 20):
        op = PairWindow(agg.count(), times=("ts", "ts_right"), sizes=(1, 1), name="pairs")
        op.open([StreamInfo("s", schema, {"ts": "ms", "ts_right": "ms"}, "ts")])
    b = pa.record_batch([pa.array(np.arange(n)), pa.array(np.arange(n)), pa.array(np.ones(n))],
                        schema=schema)
    op.on_batch(b.slice(0, 100))
    op.on_punctuation(JointPunctuation((("ts", 200), ("ts_right", 200))))
    with pytest.raises(StateLimitError, match=r"^pairs: state would grow to .*pair-window cells"):
        for k in range(1, 20):  # 2-D cells never covered: the state only grows
            op.on_batch(b.slice(k * 2500, 2500))
