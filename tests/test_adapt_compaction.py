"""AdaptWID key compaction: forgetting dead keys never changes results, and bounds the index.

``AdaptWID._compact_keys`` (the rule of ``WindowAggregate._compact_keys``)
forgets the keys no state holds -- no partial, no buffered tuple, no
``winVol`` entry, no kept pane (``PanedAdaptWID``) -- once more than half of
the dictionary is dead, renumbering every held code. These tests:

* run the compaction far more often than in production (``KEYS_COMPACT_MIN``
  patched down to 1: checked at every punctuation that finds the dictionary
  doubled) over disordered feeds whose keys rotate -- a key set is used for
  a while, forgotten when its windows close, and comes back with new codes
  -- for every mode and aggregate, plain and paned: the output equals the
  from-scratch oracle and ``_check()`` holds after every compaction;
* take a checkpoint after compactions and resume it: the output equals the
  uninterrupted run;
* never-repeating keys (session ids): the key dictionary and the per-group
  arrays stay under a bound that does not depend on the number of keys, the
  run passes a 4 MiB ``--max-state`` that it failed before, and its rows
  equal the oracle.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given, settings, strategies as st

import oop
import oop.adapt.operator as AO
from oop.adapt import AdaptWID, PanedAdaptWID, Thresholds
from oop.limits import state_budget
from oop.stream.elements import Punctuation
from oop.testing import batch_splits, disordered_tables, exact_punctuation_feed, resumed_output
from oop.window import aggregates as agg
from oop.window.kinds import Sliding, Tumbling

from test_adapt import ALL_AGGS, kinds, snapshot_plan, thresholds
from test_adapt_oracle import assert_same_cells, oracle, result_cells


@st.composite
def rotating_feeds(draw, max_rows=80):
    """A disordered feed whose key set depends on the time: key + 100 * ((ts // P) % M),
    so keys are used for a period, forgotten, and come back ``M`` periods later."""
    t = draw(disordered_tables(max_rows=max_rows, n_keys=4, max_delay=6))
    period, m = draw(st.integers(1, 8)), draw(st.integers(2, 5))
    ts = t.column("ts").to_numpy()
    key = t.column("key").to_numpy() + 100 * ((ts // period) % m)
    t = t.set_column(t.schema.get_field_index("key"), "key", pa.array(key, pa.int64()))
    items = draw(exact_punctuation_feed(draw(batch_splits(t, max_batch=6))))
    return t, items


def _checked(m: pytest.MonkeyPatch) -> list[int]:
    """Compaction checked at every punctuation; ``_check()`` after each compaction.
    Returns a list that gets one entry per compaction done."""
    m.setattr(AO, "KEYS_COMPACT_MIN", 1)
    orig = AO.AdaptWID._compact_keys
    done: list[int] = []

    def compact(self):
        before = self.key_compactions
        orig(self)
        self._check()
        assert self.keys.n_codes == self.logic.n_groups
        if self.key_compactions > before:
            done.append(self.keys.n_codes)
    m.setattr(AO.AdaptWID, "_compact_keys", compact)
    return done


def _run(cls, t, items, kind, aggs, th):
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    op = cls(kind, aggs, by="key", thresholds=th, n_bins=2)
    res = s.via(op).run()
    op._check()
    return res, op


@settings(max_examples=60)
@given(rotating_feeds(), kinds, thresholds,
       st.lists(st.sampled_from(range(len(ALL_AGGS))), min_size=1, max_size=3, unique=True),
       st.sampled_from([AdaptWID, PanedAdaptWID]))
def test_rotating_keys_compacted_equal_the_oracle(feed, kind, th, agg_idx, cls):
    t, items = feed
    aggs = [ALL_AGGS[i] for i in agg_idx]
    with pytest.MonkeyPatch.context() as m:
        _checked(m)
        res, op = _run(cls, t, items, kind, aggs, th)
    assert_same_cells(result_cells(res.table, aggs), oracle(t.to_pylist(), kind, aggs))
    assert op.logic.tuples_in == t.num_rows and op.logic.late == 0
    event(f"compactions > 0: {op.key_compactions > 0}")


def test_rotating_keys_come_back_with_new_codes():
    """Deterministic: 4 key sets of 50 keys rotate over 40 tumbling windows; compaction
    runs many times, the keys come back, and every cell equals the oracle."""
    n = 4000
    ts = np.arange(n, dtype=np.int64)
    key = (ts % 50) + 1000 * ((ts // 100) % 4)
    t = pa.table({"ts": ts, "key": key, "val": ts % 7})
    items = []
    for b in t.to_batches(max_chunksize=50):
        items += [b, Punctuation("ts", int(b.column("ts")[-1].as_py()))]
    aggs = [agg.count(), agg.sum("val"), agg.median("val")]
    for th in (Thresholds(), Thresholds.lazy(), Thresholds.eager()):
        with pytest.MonkeyPatch.context() as m:
            _checked(m)
            m.setattr(AO, "KEYS_COMPACT_MIN", 64)
            res, op = _run(AdaptWID, t, items, Tumbling(100), aggs, th)
        assert op.key_compactions >= 10
        assert op.keys.n_codes <= 200
        assert_same_cells(result_cells(res.table, aggs),
                          oracle(t.to_pylist(), Tumbling(100), aggs))


@settings(max_examples=40)
@given(rotating_feeds(max_rows=70), kinds, st.integers(1, 60),
       st.sampled_from([AdaptWID, PanedAdaptWID]))
def test_snapshot_restore_after_compaction_identical(feed, kind, stop, cls):
    plan = snapshot_plan(cls, feed, kind)
    with pytest.MonkeyPatch.context() as m:
        done = _checked(m)
        full = plan().run()
        del done[:]
        first = plan().run(stop_after_rounds=stop)
        if first.checkpoint is None:
            return
        event(f"compacted before the checkpoint: {bool(done)}")
        resumed = resumed_output(first, plan().run(resume_from=first.checkpoint))
    assert resumed.table.to_pylist() == full.table.to_pylist()


def _session_run(n: int, th: str, budget: int | None):
    """``n`` never-repeating keys over tumbling windows; returns (result, operator, the
    largest key dictionary and index bytes seen after any batch)."""
    from test_state_bounds import _session_feed

    t, items = _session_feed(n, False)
    seen = {"codes": 0, "bytes": 0}
    op = AdaptWID(Tumbling(1000), [agg.count(), agg.sum("val")], by="key", name="sessions",
                  thresholds=th)
    orig = op.on_batch

    def on_batch(batch, port=0):
        out = orig(batch, port)
        seen["codes"] = max(seen["codes"], op.keys.n_codes)
        seen["bytes"] = max(seen["bytes"], op.keys.nbytes() + op.logic.index_bytes())
        return out
    op.on_batch = on_batch
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(), schema=t.schema)
    with state_budget(budget):
        res = s.via(op).run()
    op._check()
    return t, res, op, seen


@pytest.mark.parametrize("th", ["adaptive", "lazy", "eager"])
def test_never_repeating_keys_bounded_independent_of_key_count(th):
    """Session ids: the dictionary and index peak the same for 30k and 120k keys (about the
    keys of the open windows plus the compaction slack), and the rows equal the oracle."""
    from test_state_bounds import _oracle_in_chunks
    from test_window import assert_same_rows

    small = _session_run(30_000, th, None)
    t, res, op, seen = _session_run(120_000, th, None)
    bound = 2 * AO.KEYS_COMPACT_MIN + 2000  # 2000 rows (keys) per batch
    assert small[3]["codes"] <= bound and seen["codes"] <= bound
    assert seen["bytes"] <= 2 * small[3]["bytes"]
    assert op.key_compactions >= 10
    assert_same_rows(res.table, _oracle_in_chunks(t, Tumbling(1000),
                                                  [agg.count(), agg.sum("val")]))


def test_never_repeating_keys_pass_a_small_state_budget():
    """200k session ids under a 4 MiB --max-state: before compaction the index of every key
    seen passed it (StateLimitError); now the run finishes with every row counted."""
    t, res, op, seen = _session_run(200_000, "adaptive", 4 << 20)
    assert res.table.column("count").to_numpy().sum() == t.num_rows
    assert res.table.num_rows == t.num_rows  # one row per (session, window)
    assert seen["codes"] <= 2 * AO.KEYS_COMPACT_MIN + 2000
