"""The README's examples run as written: its Python blocks in-process, its shell blocks in
a scratch folder (the install/test commands excepted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from _doc_blocks import code_blocks, run_shell


def _blocks(lang: str) -> list[str]:
    return code_blocks("README.md", lang)


@pytest.mark.parametrize("i", range(len(_blocks("python"))))
def test_python_blocks_run(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(_blocks("python")[i], f"README python block {i}", "exec"), {})


def test_live_feed_example_runs(tmp_path):
    block = next(b for b in _blocks("bash") if "feed.ndjson" in b)
    r = run_shell(block, tmp_path)
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
