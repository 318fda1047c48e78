"""SplitJoin's ordered gathering (oop.join.split_join): for every k the output -- batches and
punctuations, row for row -- equals SplitJoin(workers=1)'s, on disordered streams with valid
punctuation; the rows are the OA-Join's (as a multiset, element by element); the order is
the stated one (each element's rows sorted by the output columns, then its punctuation)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from oop.join import JoinConfig, OAJoin, SplitJoin
from oop.join.reference import drive, rows_counter
from oop.join.spec import HOWS, PUNCTUATION_MODES
from oop.join.split_join import ordered_rows
from test_join import _infos, _on, join_case


def _elements(out):
    """Batches as row lists, punctuations as themselves (one comparable sequence)."""
    return [el.to_pylist() if isinstance(el, pa.RecordBatch) else el for el in out]


def _sort_key(row: dict) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in row.values())


@settings(max_examples=80, deadline=None)
@given(case=join_case(), how=st.sampled_from(HOWS), mode=st.sampled_from(PUNCTUATION_MODES),
       k=st.sampled_from([2, 3, 5]), end_first=st.sampled_from([0, 1]))
def test_k_workers_equal_one_worker_in_the_stated_order(case, how, mode, k, end_first):
    kind, _, _, feed, pred = case
    cfg = JoinConfig(pred, _on(kind), how, mode)
    ends = (end_first, 1 - end_first)
    one = drive(SplitJoin(cfg, 1), _infos(kind), feed, check=True, end_order=ends)
    many = drive(SplitJoin(cfg, k), _infos(kind), feed, check=True, end_order=ends)
    assert _elements(many) == _elements(one)
    # the stated order: every batch sorted by its columns (nulls last) ...
    for el in many:
        if isinstance(el, pa.RecordBatch):
            rows = el.to_pylist()
            assert rows == sorted(rows, key=_sort_key)
            assert el.num_rows > 0
    # ... and the same rows as the plain OA-Join (its order is the workers' layout)
    plain = drive(OAJoin(cfg, 1), _infos(kind), feed, end_order=ends)
    assert _bag(plain) == _bag(many)


def _bag(out) -> Counter:
    return sum((rows_counter(e) for e in out if isinstance(e, pa.RecordBatch)), Counter())


def test_ordered_rows_sorts_by_columns_nulls_last():
    b1 = pa.record_batch({"a": [2, None, 1], "b": ["x", "y", "z"]})
    b2 = pa.record_batch({"a": [1, 2], "b": ["a", None]})
    got = ordered_rows([b1, b2]).to_pylist()
    assert got == [{"a": 1, "b": "a"}, {"a": 1, "b": "z"}, {"a": 2, "b": "x"},
                   {"a": 2, "b": None}, {"a": None, "b": "y"}]
