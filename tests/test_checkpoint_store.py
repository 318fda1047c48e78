"""Durable checkpoints (oop.checkpoint): save mid-run, load into a fresh plan, finish.

The output rows, punctuations, late side outputs and metrics must equal an
uninterrupted run, for every plan of ``tests/_ckpt_plans.py``; loading must
not unpickle anything. The store survives damaged files (falls back to the
previous checkpoint with a warning), refuses newer formats and other
queries' checkpoints, and a writer killed mid-write leaves the previous
checkpoint usable. Codec and fingerprint: ``tests/test_checkpoint_codec.py``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest

import oop
from oop import agg
from oop.checkpoint import CheckpointStore, load, save
from oop.checkpoint import store as store_mod
from oop.errors import CheckpointError
from oop.testing import resumed_output
from oop.window.kinds import Tumbling

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
    """A checkpoint holds no output: a resumed run's rows, punctuations and late rows are
    the uninterrupted run's after the cut (``sink.rows_before`` rows were collected before)."""
    cut = sink.rows_before
    full = full_sink.table()
    assert sink.table().equals(full.slice(cut))
    tail = [(r - cut, p) for r, p in full_sink.punctuations if r >= cut]
    mine = [(r, p) for r, p in sink.punctuations]
    assert mine == tail[len(tail) - len(mine):]
    la, lb = _late(ex), _late(full_ex)
    assert set(la) <= set(lb)
    for k in la:
        ra = [r for b in la[k] for r in b.to_pylist()]
        rb = [r for b in lb[k] for r in b.to_pylist()]
        assert ra == rb[len(rb) - len(ra):], k
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
        if k == 11:  # saving does not disturb the run that saved
            ex.run()
            _same_run(ex, _sink(ex), full_ex, full_sink)


def _sink(ex):
    return ex.nodes[-1].op


# ---- damaged, newer, foreign checkpoints -------------------------------------------
def _three_saves(tmp_path, plan="wid-sliding-str", **kw):
    t = table()
    ex, _ = PLANS[plan](t).executor()
    store = CheckpointStore(tmp_path / "ck", **kw)
    for k in (2, 5, 8):
        ex.run(stop_after_rounds=k)
        save(ex, store)
    return t, store


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[: len(data) // 2]
    elif how == "flip":
        data[len(data) // 2] ^= 0x01
    elif how == "magic":
        data[:4] = b"XXXX"
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncate", "flip", "magic", "empty"])
def test_damaged_newest_falls_back_to_previous_with_warning(tmp_path, how):
    t, msgs = None, []
    t, store = _three_saves(tmp_path, on_warning=msgs.append)
    newest = store.paths()[-1]
    _damage(newest, how)
    ex, sink = PLANS["wid-sliding-str"](t).executor()
    with pytest.warns(RuntimeWarning, match="skipping damaged checkpoint"):
        man = load(ex, store)
    assert man is not None and man["rounds"] == 5
    assert len(msgs) == 1 and newest.name in msgs[0] and "\n" not in msgs[0]
    ex.run()
    full_ex, full_sink = PLANS["wid-sliding-str"](t).executor()
    full_ex.run()
    _same_run(ex, sink, full_ex, full_sink)


def test_all_damaged_means_no_checkpoint(tmp_path):
    t, store = _three_saves(tmp_path)
    for p in store.paths():
        _damage(p, "flip")
    ex, _ = PLANS["wid-sliding-str"](t).executor()
    with pytest.warns(RuntimeWarning):
        assert load(ex, store) is None
    assert ex.rounds == 0


def test_empty_store_loads_nothing(tmp_path):
    ex, _ = PLANS["oa-join"](table()).executor()
    assert load(ex, CheckpointStore(tmp_path / "none")) is None


def test_newer_format_is_refused(tmp_path, monkeypatch):
    t = table()
    ex, _ = PLANS["oa-join"](t).executor()
    ex.run(stop_after_rounds=3)
    store = CheckpointStore(tmp_path)
    save(ex, store)
    monkeypatch.setattr(store_mod, "FORMAT_VERSION", store_mod.FORMAT_VERSION + 1)
    save(ex, store)
    monkeypatch.undo()
    ex2, _ = PLANS["oa-join"](t).executor()
    v = store_mod.FORMAT_VERSION
    with pytest.raises(CheckpointError,
                       match=rf"written by a newer oop \(format {v + 1} > {v}\); upgrade"):
        load(ex2, store)


def test_older_format_is_refused_not_skipped(tmp_path, monkeypatch):
    """A checkpoint of an older format (operator state laid out differently) is an error
    that says what to do, not a damaged file to skip (which would silently start over)."""
    t = table()
    ex, _ = PLANS["oa-join"](t).executor()
    ex.run(stop_after_rounds=3)
    store = CheckpointStore(tmp_path)
    monkeypatch.setattr(store_mod, "FORMAT_VERSION", store_mod.FORMAT_VERSION - 1)
    save(ex, store)
    monkeypatch.undo()
    ex2, _ = PLANS["oa-join"](t).executor()
    v = store_mod.FORMAT_VERSION
    with pytest.raises(CheckpointError, match=rf"older oop \(format {v - 1} < {v}.*delete the "
                                              r"--checkpoint-dir to start over"):
        load(ex2, store)


def test_other_query_is_refused_naming_what_differs(tmp_path):
    t = table()
    ex, _ = src(t).window(Tumbling(50), [agg.count()], by="key").executor()
    ex.run(stop_after_rounds=3)
    store = CheckpointStore(tmp_path / "dir")
    save(ex, store)
    ex2, _ = src(t).window(Tumbling(60), [agg.count()], by="key").executor()
    with pytest.raises(CheckpointError) as err:
        load(ex2, store)
    msg = str(err.value)
    assert f"checkpoint in {tmp_path / 'dir'} was written by another query" in msg
    assert "window" in msg and "differs" in msg and "--checkpoint-dir" in msg


def test_prune_keeps_the_newest(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for i in range(5):
        store.write({"$": "dict", "v": {"i": i}}, {}, {"rounds": i})
    assert [p.name for p in store.paths()] == ["ckpt-00000004.oopckpt", "ckpt-00000005.oopckpt"]
    man, tree, arrays = store.latest()
    assert man["rounds"] == 4 and tree == {"$": "dict", "v": {"i": 4}}
    assert man["format"] == store_mod.FORMAT_VERSION and man["oop_version"] == oop.__version__
    assert "created" in man


_KILLED_WRITER = textwrap.dedent("""
    import os, sys
    import numpy as np
    from oop.checkpoint import CheckpointStore, encode
    store = CheckpointStore(sys.argv[1])
    tree, arrays = encode({"n": 1, "a": np.arange(100000)})
    store.write(tree, arrays, {"rounds": 1})
    os.environ["OOP_FAULT"] = sys.argv[2]
    tree, arrays = encode({"n": 2, "a": np.arange(100000)})
    store.write(tree, arrays, {"rounds": 2})
    print("not killed")
""")


@pytest.mark.parametrize("fault", ["checkpoint-write-mid", "checkpoint-before-rename",
                                   "checkpoint-after-rename"])
def test_writer_killed_during_write_leaves_a_good_checkpoint(tmp_path, fault):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OOP_FAULT", None)
    p = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(tmp_path), fault], env=env,
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, (p.returncode, p.stdout, p.stderr)
    store = CheckpointStore(tmp_path)
    man, tree, arrays = store.latest()
    want = 2 if fault == "checkpoint-after-rename" else 1
    assert man["rounds"] == want
    from oop.checkpoint import decode
    state = decode(tree, arrays)
    assert state["n"] == want and (state["a"] == np.arange(100000)).all()
    leftovers = [q for q in tmp_path.iterdir() if ".tmp-" in q.name]
    assert bool(leftovers) == (fault != "checkpoint-after-rename")
    if fault == "checkpoint-write-mid":
        assert 0 < leftovers[0].stat().st_size < store.paths()[-1].stat().st_size
    store.write(tree, arrays, {"rounds": 3})  # the next write clears the leftover
    assert not [q for q in tmp_path.iterdir() if ".tmp-" in q.name]
    assert store.latest()[0]["rounds"] == 3


# ---- resuming twice from one in-memory checkpoint -----------------------------------------
TWICE = ["wid-tumbling-int", "wid-sliding-str", "paned-sliding", "adaptwid", "oa-join",
         "keyed-join-3", "meld-select-dupelim", "iop-slack", "iop-sort", "iop-slack-2s"]


@pytest.mark.parametrize("name", TWICE)
def test_resume_twice_from_one_checkpoint(name):
    t = table()
    full = PLANS[name](t).run()
    for k in (3, 12):
        part = PLANS[name](t).run(stop_after_rounds=k)
        assert part.checkpoint is not None
        r1 = resumed_output(part, PLANS[name](t).run(resume_from=part.checkpoint))
        r2 = resumed_output(part, PLANS[name](t).run(resume_from=part.checkpoint))
        assert r1.table.equals(full.table) and r2.table.equals(full.table), (name, k)
        assert r1.tuples_in == r2.tuples_in == full.tuples_in


@pytest.mark.parametrize("name", sorted(PLANS))
def test_checkpoint_does_not_share_state_with_the_running_plan(name):
    """Continuing the run that took an in-memory checkpoint leaves the checkpoint intact."""
    t = table()
    full = PLANS[name](t).run()
    ex, _ = PLANS[name](t).executor()
    if ex.run(stop_after_rounds=7) is None:
        pytest.skip("the run ends before round 7")
    cp = ex.checkpoint()
    ex.run()
    ex2, sink2 = PLANS[name](t).executor()
    ex2.resume(cp)
    ex2.run()
    assert sink2.table().equals(full.table.slice(sink2.rows_before))


_SAVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from _ckpt_plans import PLANS, table
    from oop.checkpoint import CheckpointStore, save
    ex, _ = PLANS[sys.argv[2]](table()).executor()
    ex.run(stop_after_rounds=9)
    save(ex, CheckpointStore(sys.argv[3]))
""")


@pytest.mark.parametrize("name", ["wid-sliding-str", "oa-join", "iop-slack", "generators"])
def test_checkpoint_saved_by_another_process_resumes_here(tmp_path, name, monkeypatch):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "777"}
    p = subprocess.run([sys.executable, "-c", _SAVER, str(Path(__file__).parent), name,
                        str(tmp_path)], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    t = table()
    full_ex, full_sink = PLANS[name](t).executor()
    full_ex.run()
    ex, sink = PLANS[name](t).executor()
    with monkeypatch.context() as m:
        _no_pickle(m)
        assert load(ex, CheckpointStore(tmp_path))["rounds"] == 9
    ex.run()
    _same_run(ex, sink, full_ex, full_sink)


class _Opaque:
    pass


class _Holds(oop.Select):
    """A Select whose snapshot holds an object the codec does not know."""

    def snapshot(self):
        return {**super().snapshot(), "x": [_Opaque()]}


def test_save_names_the_operator_and_path_of_an_unsupported_state(tmp_path):
    t = table()
    ex, _ = src(t).via(_Holds(pc.field("val") > 1, name="mine")).executor()
    ex.run(stop_after_rounds=2)
    store = CheckpointStore(tmp_path)
    with pytest.raises(CheckpointError, match=r"_Opaque at states\['mine'\]\['x'\]\[0\]"):
        save(ex, store)
    assert store.paths() == []


def test_state_that_does_not_fit_the_operators_is_a_checkpoint_error(tmp_path):
    """Same plan and format, but an operator's state layout changed (another oop build)."""
    from oop.checkpoint import decode, encode

    t = table()
    ex, _ = PLANS["oa-join"](t).executor()
    ex.run(stop_after_rounds=3)
    store = CheckpointStore(tmp_path)
    save(ex, store)
    man, tree, arrays = store.latest()
    payload = decode(tree, arrays, root="")
    del payload["states"]["join"]["states"]
    tree, arrays = encode(payload, root="")
    store.write(tree, arrays, man)
    ex2, _ = PLANS["oa-join"](t).executor()
    with pytest.raises(CheckpointError, match="does not fit this oop's operators"):
        load(ex2, store)
