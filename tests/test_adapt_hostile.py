"""AdaptWID on a hostile feed: one row a year ahead of (or behind) the rest.

Every mode (adaptive, forced lazy, forced eager), tumbling and sliding
windows, bounded and holistic aggregates: the run either finishes with
bounded state and the oracle's results, or stops with the one-line
StateLimitError naming the operator (the eager dense ring refuses a span of
millions of window ids) -- never a MemoryError from an allocation or the
OOM killer. Before, closing the buffered tuples folded them into transient
lanes over the whole span of closing window ids (576 MiB for 20 groups, and
a numba allocation failure for sliding windows); now a punctuation closes
its windows run by run (``AdaptLogic._close_run``).
"""

from __future__ import annotations

import pytest

import oop
from oop.errors import StateLimitError
from oop.limits import state_budget
from oop.window import Sliding, Tumbling, agg
from oop.window.reference import window_oracle

from test_state_bounds import YEAR, _pill_feed
from test_window import assert_same_rows

BOUNDED = [agg.count(), agg.sum("val"), agg.max("val")]
HOLISTIC = [agg.count(), agg.median("val")]


@pytest.mark.parametrize("ahead", [YEAR, -YEAR], ids=["1y", "-1y"])
@pytest.mark.parametrize("thresholds", ["adaptive", "lazy", "eager"])
@pytest.mark.parametrize("kind", [Tumbling(10_000), Sliding(10_000, 1_000)], ids=repr)
@pytest.mark.parametrize("aggs", [BOUNDED, HOLISTIC], ids=["bounded", "holistic"])
def test_poison_pill_bounded_or_one_line_error(ahead, thresholds, kind, aggs):
    t, items = _pill_feed(ahead)
    s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                         schema=t.schema)
    kw = {} if thresholds == "adaptive" else {"thresholds": thresholds}
    try:
        with state_budget(256 << 20):
            res = s.adaptive_window(kind, aggs, by=["key"], **kw).run()
    except StateLimitError as e:  # the dense eager ring refuses the span: one line, named
        msg = str(e)
        assert "\n" not in msg and msg.startswith("adaptwid: held windows ")
        assert "--max-ahead" in msg
        assert thresholds != "lazy" and aggs is BOUNDED  # lazy / holistic hold no dense ring
        return
    assert res.metrics["adaptwid"].peak_state_bytes < 16 << 20
    assert_same_rows(res.table, window_oracle(t, kind, aggs, by=["key"], time="ts", unit="ms"))


@pytest.mark.parametrize("thresholds", ["adaptive", "lazy"])
def test_never_repeating_keys_are_charged_forgotten_and_stopped_by_the_budget(thresholds):
    """The key dictionary and the per-group arrays are charged to the state budget; keys
    whose windows all closed are forgotten (key compaction), so 200k session ids pass a
    4 MiB --max-state, while a budget under one batch's keys stops with one line naming
    the operator."""
    from test_state_bounds import _session_feed

    t, items = _session_feed(200_000, False)
    kw = {} if thresholds == "adaptive" else {"thresholds": thresholds}

    def run():
        s = oop.from_batches(items, time="ts", unit="ms", punctuation=oop.External(),
                             schema=t.schema)
        return s.adaptive_window(Tumbling(1000), [agg.count(), agg.sum("val")], by=["key"],
                                 name="sessions", **kw).run()

    with state_budget(16 << 10):
        with pytest.raises(StateLimitError, match=r"^sessions: state would grow to [\d.]+ \w+ "
                                                  r"\(key dictionary and per-group entries of "
                                                  r"\d+ groups held\), over the --max-state "
                                                  r"limit of 16\.0 KiB; [^\n]*$"):
            run()
    with state_budget(4 << 20):
        res = run()  # before key compaction: StateLimitError (the index of 200k groups)
    assert res.table.column("count").to_numpy().sum() == t.num_rows
