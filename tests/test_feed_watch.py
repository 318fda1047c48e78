"""Warnings while a feed runs: an input that holds back a union, implausible time units."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oop.cli import main
from oop.plan.job import FeedWatch
from oop.stream.elements import INT64_MIN


def _src(name: str, lwm: int, hwm: int = INT64_MIN, unit: str = "ms"):
    op = SimpleNamespace(name=name, lwm=SimpleNamespace(value=lwm),
                         hwm=SimpleNamespace(value=hwm), unit=unit, exhausted=False)
    return SimpleNamespace(op=op)


def test_an_input_that_holds_back_the_union_is_named_once():
    said: list[str] = []
    a, b = _src("busy", 0, 0), _src("quiet", INT64_MIN, 0)
    w = FeedWatch([a, b], held_back_s=10.0, say=said.append)
    t0 = w.last["busy"][1]
    for k in range(1, 30):  # busy advances every second of wall time; quiet never does
        a.op.lwm.value = k * 1000
        w.check(t0 + k)
    assert len(said) == 1 and "'quiet'" in said[0] and "idle" in said[0]
    assert "'busy'" not in said[0]


def test_inputs_that_advance_together_give_no_warning():
    said: list[str] = []
    a, b = _src("a", 0, 0), _src("b", 0, 0)
    w = FeedWatch([a, b], held_back_s=5.0, say=said.append)
    t0 = w.last["a"][1]
    for k in range(1, 30):
        a.op.lwm.value = b.op.lwm.value = k
        w.check(t0 + k)
    assert said == []


def test_epoch_milliseconds_declared_as_seconds_warn(tmp_path, capsys):
    n = 1000
    ts = 1_700_000_000_000 + np.arange(n, dtype=np.int64) * 1000  # epoch ms
    pq.write_table(pa.table({"ts": ts}), tmp_path / "in.parquet")
    rc = main(["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts",
               "--time-unit", "s", "--window", "tumbling:1h", "--agg", "count",
               "--punctuation", "bounded:0", "--out", str(tmp_path / "o.parquet"), "--quiet"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "beyond the year 3000" in err and "--time-unit" in err
    capsys.readouterr()
    rc = main(["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts",
               "--time-unit", "ms", "--window", "tumbling:1h", "--agg", "count",
               "--punctuation", "bounded:0", "--out", str(tmp_path / "o2.parquet"), "--quiet"])
    assert rc == 0 and "year 3000" not in capsys.readouterr().err


def test_experiments_set_with_an_unknown_name_is_refused(tmp_path, capsys):
    rc = main(["experiments", "run", "fig6-11", "--tiny", "--set", "slackz_ms=[1]",
               "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "slackz_ms" in err[0] and "slacks_ms" in err[0]
