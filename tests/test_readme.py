"""The README's examples run as written: its Python blocks in-process, its shell blocks in
a scratch folder (the install/test commands excepted)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


@pytest.mark.parametrize("i", range(len(_blocks("python"))))
def test_python_blocks_run(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_blocks("python")[i], f"README python block {i}", "exec"), {})


def test_live_feed_example_runs(tmp_path):
    block = next(b for b in _blocks("bash") if "feed.ndjson" in b)
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = "set -e\noop() { \"" + sys.executable + "\" -m oop.cli \"$@\"; }\n" + block
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    windows = (tmp_path / "windows.csv").read_text().splitlines()
    assert windows[0].startswith('"k","window_start"') and len(windows) > 100
    import pyarrow.parquet as pq

    out = pq.read_table(tmp_path / "results")
    assert sum(out.column("count").to_pylist()) + _late(tmp_path) == 20_000
    assert (tmp_path / "metrics.jsonl").read_text().strip()


def _late(folder: Path) -> int:
    import json

    return json.loads((folder / "metrics.jsonl").read_text().splitlines()[-1])["late"]
