"""Cyclic collection held during a command's start-up (oop.command.startup_gc): off until
the work starts, on for the work, back as it was for an in-process caller, and the whole
command run through ``oop.cli.main`` leaves the collector as it found it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oop.command.startup_gc import held, settle


def _cycle() -> None:
    a: list[object] = []
    a.append(a)  # unreachable once this returns: only the cyclic collector frees it


def test_held_until_settled_then_collecting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with held():
        assert not gc.isenabled()
        settle()
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0  # what start-up built is skipped by later collections
        _cycle()
        assert gc.collect() >= 1  # garbage made by the work is still collected
        freezes: list[int] = []  # a second call changes nothing: it freezes nothing more
        monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
        settle()
        monkeypatch.undo()
        assert freezes == [] and gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0  # the caller's collector, as it was


def test_settle_outside_held_does_nothing() -> None:
    settle()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_never_settled_block_resumes_on_leaving() -> None:
    try:
        with held():
            raise KeyError("a command failing in its start-up")
    except KeyError:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with held():
            settle()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_callers_own_freeze_is_kept() -> None:
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with held():
            settle()
        assert gc.isenabled() and gc.get_freeze_count() >= before
    finally:
        gc.unfreeze()


def _feed(path: Path) -> Path:
    pq.write_table(pa.table({"ts": [5, 1200, 300, 2500, 1999], "k": [1, 2, 1, 1, 2],
                             "v": [1.0, 2.0, 3.0, 4.0, 5.0]}), path)
    return path


def test_replay_in_process_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    from oop.cli import main

    out = tmp_path / "out.parquet"
    rc = main(["replay", "--input", str(_feed(tmp_path / "in.parquet")), "--time", "ts",
               "--key", "k", "--window", "tumbling:1s", "--agg", "count", "--agg", "sum:v",
               "--punctuation", "bounded:5s", "--out", str(out), "--quiet"])
    assert rc == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    got = sorted(pq.read_table(out).select(["k", "count", "sum_v"]).to_pylist(),
                 key=lambda r: (r["k"], r["count"]))
    # k 1: ts 5 and 300 in [0, 1000), ts 2500 in [2000, 3000); k 2: ts 1200 and 1999
    assert got == [{"k": 1, "count": 1, "sum_v": 4.0}, {"k": 1, "count": 2, "sum_v": 4.0},
                   {"k": 2, "count": 2, "sum_v": 7.0}]


_EXIT = """
import atexit, gc, sys
from oop.command.startup_gc import held, settle
atexit.register(lambda: print(gc.get_freeze_count() > 0))  # first in, so run after oop's
with held():
    settle()
print(gc.get_freeze_count() == 0, file=sys.stderr)
"""


def test_the_process_freezes_everything_at_exit() -> None:
    """Shutdown's collections then walk nothing (the exit half of the saving)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run([sys.executable, "-c", _EXIT], check=True, capture_output=True,
                       text=True, env=env)
    assert p.stderr.strip() == "True" and p.stdout.strip() == "True"
