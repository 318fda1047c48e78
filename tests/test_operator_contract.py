"""The operator contract, over every registered operator (docs/architecture.md).

For every case of ``tests/contract_cases.py`` (one per concrete Operator
subclass under ``oop/``), on disordered feeds with valid punctuation:

(a) accounting -- every input tuple is accounted for: represented in the
    output (a row, or the ``count`` of an aggregate row) or counted as lost
    (late counters, side output);
(b) punctuation -- the output's punctuation is non-decreasing and covers no
    row emitted after it (:func:`oop.testing.check_stream_contract`), and the
    operator's internal invariants hold after every step
    (:func:`oop.testing.check_invariants`);
(c) snapshot/resume -- stopping at any element, encoding ``snapshot()``
    through the checkpoint codec, restoring into a fresh operator and
    finishing gives exactly the elements of the uninterrupted run;
(d) batch boundaries -- re-cutting the same element sequence into other
    batches gives the same output rows (as a multiset).

A new Operator subclass without a case (and not in the commented exclusion
list) fails :func:`test_every_operator_has_a_contract_case`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract_cases import CASES, EXCLUDED, INFO, ContractCase, operator_classes, qualname
from oop.checkpoint.codec import decode, encode
from oop.errors import OopError
from oop.stream.elements import GroupPunctuation, JointPunctuation, Punctuation
from oop.testing import check_stream_contract, comparable_elements, drive_operator, same_bag

#: examples per (operator, property); ``OOP_CONTRACT_EXAMPLES=40`` for a deeper run (the
#: default keeps the file near 10-20 s: past ~10 examples Hypothesis draws larger feeds)
SETTINGS = settings(max_examples=int(os.environ.get("OOP_CONTRACT_EXAMPLES", "8")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _param(case: ContractCase, prop: str) -> Any:
    reason = case.xfail.get(prop)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


def _cases(prop: str) -> list[Any]:
    return [_param(c, prop) for c in CASES]


def test_every_operator_has_a_contract_case() -> None:
    classes = {qualname(c) for c in operator_classes()}
    registered = {qualname(c.cls) for c in CASES}
    missing = sorted(classes - registered - set(EXCLUDED))
    assert not missing, (
        f"Operator subclasses without a contract case: {missing}; add a ContractCase to "
        "tests/contract_cases.py (or, for an abstract base, a commented EXCLUDED entry)")
    assert not set(EXCLUDED) & registered, "an excluded operator also has a case"
    assert set(EXCLUDED) <= classes, f"stale exclusions: {sorted(set(EXCLUDED) - classes)}"


def _run(case: ContractCase, feed: list[tuple[int, Any]]) -> tuple[Any, list[Any]]:
    op = case.build()
    return op, drive_operator(op, case.inputs, feed)


def _tables(case: ContractCase, feed: list[tuple[int, Any]]) -> list[pa.Table]:
    out = []
    for port, info in enumerate(case.inputs):
        bs = [b for p, b in feed if p == port and isinstance(b, pa.RecordBatch)]
        out.append(pa.Table.from_batches(bs, schema=info.schema))
    return out


def _output_table(out: list[Any]) -> pa.Table | None:
    bs = [b for b in out if isinstance(b, pa.RecordBatch)]
    return pa.Table.from_batches(bs) if bs else None



@pytest.mark.parametrize("case", _cases("accounting"))
@SETTINGS
@given(data=st.data())
def test_accounting(case: ContractCase, data: st.DataObject) -> None:
    if case.weight is None:
        pytest.skip(case.no_accounting)
    feed = data.draw(case.feed())
    op, out = _run(case, feed)
    t = _output_table(out)
    got = (case.weight(t) if t is not None else 0) + case.lost(op)
    want = case.expected(_tables(case, feed))
    assert got == want, f"{case.id}: output accounts for {got} input tuples, expected {want}"


@pytest.mark.parametrize("case", _cases("punctuation"))
@SETTINGS
@given(data=st.data())
def test_output_punctuation(case: ContractCase, data: st.DataObject) -> None:
    feed = data.draw(case.feed())
    _, out = _run(case, feed)  # drive_operator checks the invariants after every step
    check_stream_contract(out, case.id)


@pytest.mark.parametrize("case", _cases("snapshot"))
@SETTINGS
@given(data=st.data())
def test_snapshot_resume(case: ContractCase, data: st.DataObject) -> None:
    feed = data.draw(case.feed())
    k = data.draw(st.integers(0, len(feed)))
    first = case.build()
    head = drive_operator(first, case.inputs, feed[:k], end=False)
    if case.no_snapshot:
        with pytest.raises(OopError, match=case.no_snapshot):
            encode(first.snapshot())
        return
    # what the executor checkpoints for one operator (oop.plan.executor.checkpoint)
    saved = decode(*encode({"state": first.snapshot(), "metrics": first.metrics.snapshot()}))
    second = case.build()
    second.open(list(case.inputs))
    second.restore(saved["state"])
    second.metrics.restore(saved["metrics"])
    tail = drive_operator(second, (), feed[k:])
    _, whole = _run(case, feed)
    assert comparable_elements(head + tail) == comparable_elements(whole), \
        f"{case.id}: resumed at element {k}"


def _rebatch(data: st.DataObject, feed: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The same element sequence, each run of batches of one port re-cut at random."""
    out: list[tuple[int, Any]] = []
    run: list[pa.RecordBatch] = []
    port = -1

    def close() -> None:
        if not run:
            return
        t = pa.Table.from_batches(run).combine_chunks()
        i = 0
        while i < t.num_rows:
            n = data.draw(st.integers(1, max(t.num_rows - i, 1)))
            out.append((port, t.slice(i, n).to_batches()[0]))
            i += n
        run.clear()

    for p, e in feed:
        if isinstance(e, pa.RecordBatch) and (p == port or not run):
            port = p
            run.append(e)
            continue
        close()
        if isinstance(e, pa.RecordBatch):
            port = p
            run.append(e)
        else:
            out.append((p, e))
    close()
    return out


@pytest.mark.parametrize("case", _cases("batches"))
@SETTINGS
@given(data=st.data())
def test_independent_of_batch_boundaries(case: ContractCase, data: st.DataObject) -> None:
    feed = data.draw(case.feed())
    _, a = _run(case, feed)
    _, b = _run(case, _rebatch(data, feed))
    ta, tb = _output_table(a), _output_table(b)
    assert same_bag(ta if ta is not None else [], tb if tb is not None else []), (
        f"{case.id}: output depends on batch boundaries")


# ---- the checker itself, and the bug the contract found -----------------------------
def _b(**cols: list[int]) -> pa.RecordBatch:
    return pa.record_batch({k: pa.array(v, pa.int64()) for k, v in cols.items()})


def test_stream_contract_checker_rejects_each_violation() -> None:
    check_stream_contract([_b(ts=[1]), Punctuation("ts", 2), Punctuation("ts", 2), _b(ts=[2])])
    with pytest.raises(AssertionError, match="went backwards: 1 after 2"):
        check_stream_contract([Punctuation("ts", 2), Punctuation("ts", 1)])
    with pytest.raises(AssertionError, match=r"ts=1 was emitted after P\(ts, 2\)"):
        check_stream_contract([Punctuation("ts", 2), _b(ts=[3, 1])])
    joint = JointPunctuation((("a", 5), ("b", 5)))
    check_stream_contract([joint, _b(a=[1, 9], b=[9, 1])])  # each row escapes on one attribute
    with pytest.raises(AssertionError, match="joint punctuation"):
        check_stream_contract([joint, _b(a=[9, 1], b=[9, 1])])
    group = GroupPunctuation("ts", _b(k=[7]), np.array([10]))
    check_stream_contract([group, _b(k=[8], ts=[1])])  # another group
    with pytest.raises(AssertionError, match="group punctuation"):
        check_stream_contract([group, _b(k=[7], ts=[1])])


def test_gigascope_low_level_punctuation_after_a_window_jump() -> None:
    """Found by the contract: window 0 -> 2 with the IOP cursor done left (key 1, window 0)
    in the table while P(window_end, 8) claimed window 0 complete."""
    from oop.iop_baseline.gigascope import GigascopeLowLevel
    from oop.testing import TABLE_SCHEMA

    feed = [(0, pa.record_batch({"ts": [0] * 6, "key": [0] * 6, "val": [0] * 6}, TABLE_SCHEMA)),
            (0, pa.record_batch({"ts": [0, 0, 2, 8, 8, 5], "key": [0, 0, 1, 0, 0, 0],
                                 "val": [0] * 6}, TABLE_SCHEMA))]
    out = drive_operator(GigascopeLowLevel("key", 4, table_size=8), [INFO], feed)
    check_stream_contract(out)
    assert [e.value for e in out if isinstance(e, Punctuation)] == [0, 4]
