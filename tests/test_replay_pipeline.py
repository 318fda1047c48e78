"""``oop replay --threads 1`` reads ahead and writes behind on threads of its own over a finite
input (:func:`oop.replay.cli.pipelined`): which runs do, and that the output is the one of the
same run on one thread (a checkpointed run, which never pipelines), part for part, with every
input row accounted for."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from oop.cli import main
from oop.replay.cli import pipelined, write_behind_bytes


def _args(**kw: object) -> argparse.Namespace:
    base = dict(strategy="oop", spark=False, threads=1, input="in/", follow=False,
                checkpoint_dir=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("kw, expected", [
    ({}, True),                                    # one window thread, finite files
    ({"threads": 2}, True),                        # threaded runs always did
    ({"checkpoint_dir": "ck"}, False),             # a read-ahead input cannot resume
    ({"input": "-"}, False),                       # stdin: rows leave as they come
    ({"input": "redis://h:1/s"}, False),
    ({"follow": True}, False),
    ({"strategy": "iop-sort"}, False),
    ({"spark": True}, False),
])
def test_which_runs_pipeline(kw: dict[str, object], expected: bool) -> None:
    assert pipelined(_args(**kw)) is expected


def test_one_thread_queues_less() -> None:
    assert write_behind_bytes(_args()) == 4 << 20
    assert write_behind_bytes(_args(threads=2)) == 16 << 20


def _feed(folder: Path, seed: int, files: int = 4, rows: int = 3000) -> int:
    """Disordered rows (up to 3 s late, some later than the 2 s bound) in ``files`` files."""
    rng = np.random.default_rng(seed)
    folder.mkdir()
    n = 0
    for i in range(files):
        arrival = np.arange(n, n + rows, dtype=np.int64) * 7
        pq.write_table(pa.table({
            "ts": arrival - rng.integers(0, 3000, rows),
            "key": rng.integers(0, 30, rows), "v": rng.random(rows)}),
            folder / f"f{i}.parquet")
        n += rows
    return n


def _parts(folder: Path) -> list[pa.Table]:
    return [pq.read_table(p) for p in sorted(folder.glob("part-*.parquet"))]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("window", ["tumbling:1s", "sliding:4s,1s"])
def test_pipelined_output_is_the_one_thread_output(tmp_path: Path, seed: int,
                                                   window: str) -> None:
    n = _feed(tmp_path / "in", seed)
    common = ["replay", "--input", str(tmp_path / "in"), "--time", "ts", "--key", "key",
              "--window", window, "--agg", "count", "--agg", "sum:v",
              "--punctuation", "bounded:2s+cadence:500rows", "--batch-size", "700", "--threads", "1",
              "--quiet", "--late", "side"]
    runs = {}
    for name, extra in (("pipelined", []),
                        ("serial", ["--checkpoint-dir", str(tmp_path / "ck")])):
        out, late = tmp_path / f"out-{name}", tmp_path / f"late-{name}"
        assert main([*common, "--out", f"{out}/", "--late-out", f"{late}/", *extra]) == 0
        runs[name] = (_parts(out), _parts(late))
    (parts_p, late_p), (parts_s, late_s) = runs["pipelined"], runs["serial"]
    assert len(parts_p) == len(parts_s) and parts_p
    assert all(a.equals(b) for a, b in zip(parts_p, parts_s))  # same rows, same order
    assert len(late_p) == len(late_s) and all(a.equals(b) for a, b in zip(late_p, late_s))
    # every input row is accounted for: counted in a window, or late
    late_rows = sum(t.num_rows for t in late_p)
    assert late_rows > 0  # the feed does have late rows
    if window.startswith("tumbling"):  # (a sliding window counts a row several times)
        counted = sum(int(pc.sum(t["count"]).as_py()) for t in parts_p)
        assert counted + late_rows == n
