"""The examples of docs/usage.md, docs/recovery.md and docs/benchmarks.md run as written.

docs/sql.md's blocks run in test_sql_cli, the README's in test_readme. Not run here: the
Spark block of usage.md (it starts a JVM; tests/test_spark_*.py make the same calls), shell
lines with a ``...`` placeholder, usage.md's ``oop sql -f query.sql`` block (placeholders),
and recovery.md's test-suite and benchmark commands (minutes long). The names the blocks
assume (``views``, ``clicks``, ``s``, ``link1``, ``stream``, a ``flows`` table) are made
here, small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import oop

from _doc_blocks import code_blocks, run_shell

N = 3000  # rows of each example table: ~30 s of event time at 100 tuples/s


def _flows(seed: int = 0) -> pa.Table:
    """Packets in arrival order: ``ts`` (ms) up to 2 s behind ``arrival``, ``srcIP``, ``k``,
    ``len``."""
    rng = np.random.default_rng(seed)
    arrival = np.arange(N, dtype=np.int64) * 10
    return pa.table({"ts": arrival - rng.integers(0, 2000, N), "arrival": arrival,
                     "srcIP": rng.integers(0, 20, N), "k": rng.integers(0, 5, N),
                     "len": rng.integers(40, 1500, N)})


def _names() -> dict[str, Any]:
    """What the usage.md "More examples" and benchmarks.md blocks take as given."""
    flows = _flows()

    def src(t: pa.Table, name: str) -> oop.Stream:
        return oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay("2s"),
                              name=name)

    users = flows.rename_columns(["ts", "arrival", "user", "k", "len"])
    return {"oop": oop, "s": src(flows, "s"), "stream": src(flows, "stream"),
            "views": src(users, "views"), "clicks": src(_flows(1).rename_columns(
                ["ts", "arrival", "user", "k", "len"]), "clicks"),
            "link1": src(flows.slice(0, N // 2), "link1"),
            "link2": src(flows.slice(N // 2), "link2")}


def _runnable(block: str) -> str:
    """The shell block without its commands that hold a ``...`` placeholder (a command with
    its ``\\`` continuation lines is one)."""
    commands, cur = [], ""
    for line in block.splitlines():
        cur += line + "\n"
        if not line.rstrip().endswith("\\"):
            commands.append(cur)
            cur = ""
    return "".join(c for c in commands + [cur] if " ... " not in c)


def test_usage_python_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [b for b in code_blocks("docs/usage.md", "python") if "oop.spark" not in b]
    assert len(blocks) == 4
    first: dict[str, Any] = {}
    exec(compile(blocks[0], "docs/usage.md[python 0]", "exec"), first)
    assert first["res"].table.num_rows and (tmp_path / "out.parquet").exists()
    (tmp_path / "flows").mkdir()
    for i, part in enumerate((_flows().slice(0, N // 2), _flows().slice(N // 2))):
        pq.write_table(part, tmp_path / "flows" / f"part-{i}.parquet")
    exec(compile(blocks[1], "docs/usage.md[python 1]", "exec"), dict(first))
    threaded = pq.read_table(tmp_path / "results")  # read ahead, written in the background
    plain = oop.from_parquet("flows/", time="ts", punctuation=oop.BoundedDelay("5s")).window(
        first["Sliding"]("10s", "1s"), [first["agg"].count(), first["agg"].sum("len")],
        by="srcIP").collect()
    assert threaded.num_rows and threaded.equals(plain)
    more = _names()
    exec(compile(blocks[2], "docs/usage.md[python 2]", "exec"), more)
    assert more["q"].plan("oop").run().table.num_rows
    exec(compile(blocks[3], "docs/usage.md[python 3]", "exec"), first)
    assert first["out"].num_rows


def test_usage_replay_commands(tmp_path: Path) -> None:
    pq.write_table(_flows(), tmp_path / "flows.parquet")
    (block, *_) = code_blocks("docs/usage.md", "bash")
    code = _runnable(block)
    assert "oop --help" in code and "--out out.parquet" in code
    r = run_shell(code, tmp_path)
    assert r.returncode == 0, r.stderr
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows and (tmp_path / "metrics.json").exists()


def test_recovery_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpointed replay command and its Python twin write the same windows."""
    flows = _flows()
    for where in ("cli", "api"):
        (tmp_path / where / "flows").mkdir(parents=True)
        for i in range(3):
            pq.write_table(flows.slice(i * N // 3, N // 3),
                           tmp_path / where / "flows" / f"part-{i}.parquet")
    (sh, *_) = code_blocks("docs/recovery.md", "sh")
    assert "--checkpoint-dir ck/" in sh
    r = run_shell(sh, tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    (py,) = code_blocks("docs/recovery.md", "python")
    monkeypatch.chdir(tmp_path / "api")
    exec(compile(py, "docs/recovery.md[python 0]", "exec"), {})
    cli, api = (pq.read_table(tmp_path / w / "results") for w in ("cli", "api"))
    cols = ["k", "window_start", "window_end", "count"]
    assert cli.num_rows and sorted(cli.select(cols).to_pylist(), key=str) == \
        sorted(api.select(cols).to_pylist(), key=str)


def test_benchmarks_state_budget_block() -> None:
    (py,) = code_blocks("docs/benchmarks.md", "python")
    ns = _names()
    exec(compile(py, "docs/benchmarks.md[python 0]", "exec"), ns)
    assert ns["result"].table.num_rows == N
