"""Durable checkpoints (oop.checkpoint): save mid-run, load into a fresh plan, finish.

The output rows, punctuations, late side outputs and metrics must equal an
uninterrupted run, for every plan of ``tests/_ckpt_plans.py``; loading must
not unpickle anything. The store survives damaged files (falls back to the
previous checkpoint with a warning), refuses newer formats and other
queries' checkpoints, and a writer killed mid-write leaves the previous
checkpoint usable.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import oop
from oop import agg
from oop.checkpoint import CheckpointStore, load, plan_fingerprint, save
from oop.checkpoint import store as store_mod
from oop.errors import CheckpointError
from oop.window.kinds import Sliding, Tumbling

sys.path.insert(0, str(Path(__file__).parent))
from _ckpt_plans import PLANS, src, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    """pickle.load/loads raise, except for numba reading its own kernel cache (a kernel
    first called by a restore() loads its compiled code; that is not checkpoint data)."""
    real = {"load": pickle.load, "loads": pickle.loads}

    def guard(fn_name):
        def refuse(*a, **k):
            if sys._getframe(1).f_globals.get("__name__", "").startswith("numba."):
                return real[fn_name](*a, **k)
            raise AssertionError("a checkpoint load used pickle")
        return refuse

    monkeypatch.setattr(pickle, "loads", guard("loads"))
    monkeypatch.setattr(pickle, "load", guard("load"))


def _late(ex) -> dict:
    return {n.op.name: [b for b in n.op.side_outputs.get("late", [])] for n in ex.nodes}


def _same_run(ex, sink, full_ex, full_sink) -> None:
    assert sink.table().equals(full_sink.table())
    assert [(r, p) for r, p in sink.punctuations] == [(r, p) for r, p in full_sink.punctuations]
    la, lb = _late(ex), _late(full_ex)
    assert la.keys() == lb.keys()
    for k in la:
        assert [b.to_pylist() for b in la[k]] == [b.to_pylist() for b in lb[k]], k
    for a, b in zip(ex.nodes, full_ex.nodes):
        ma, mb = a.op.metrics.as_dict(), b.op.metrics.as_dict()
        for f in ("tuples_in", "tuples_out", "batches_in", "batches_out", "punctuations_in",
                  "punctuations_out", "late", "counters", "peak_state_items"):
            assert ma[f] == mb[f], (a.op.name, f, ma[f], mb[f])


@pytest.mark.parametrize("name", sorted(PLANS))
def test_save_load_equals_uninterrupted(name, tmp_path, monkeypatch):
    t = table()
    full_ex, full_sink = PLANS[name](t).executor()
    full_ex.run()
    for k in (2, 11):
        ex, _ = PLANS[name](t).executor()
        if ex.run(stop_after_rounds=k) is None:
            continue
        store = CheckpointStore(tmp_path / f"k{k}")
        save(ex, store, extra_manifest={"note": "test", "rounds": -1})
        ex2, sink2 = PLANS[name](t).executor()
        with monkeypatch.context() as m:
            _no_pickle(m)
            man = load(ex2, store)
        assert man is not None and man["rounds"] == k and man["note"] == "test"
        ex2.run()
        _same_run(ex2, sink2, full_ex, full_sink)
