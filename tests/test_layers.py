"""The layer contract of docs/architecture.md ("Layers") holds: ``lint-imports`` keeps every
contract in ``[tool.importlinter]`` of pyproject.toml -- modules import only from the layers
below their own, and no two modules of one package import each other in a circle. Imports
inside functions count (import-linter reads them), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> list[str]:
    exe = shutil.which("lint-imports")
    if exe is not None:
        return [exe]
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
    return [sys.executable, "-c", "from importlinter.cli import lint_imports_command as m; m()"]


def test_the_import_contracts_are_kept():
    # run in the checkout, so the oop analysed is this one (lint-imports puts cwd first)
    done = subprocess.run([*_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "0 broken" in report and "layers" in report, report


def test_the_layers_contract_orders_every_layer():
    """The contract orders the foundation below the runtime below the facade below the tools."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in cfg["contracts"] if c["type"] == "layers"]
    level = {name.strip(): i for i, layer in enumerate(layers) for name in layer.split("|")}
    assert level["errors"] > level["stream"] > level["punctuation"] > level["operators"]
    assert level["operators"] >= level["plan"] > level["window"] > level["iop_baseline"]
    assert level["iop_baseline"] > level["api"] > level["replay"]
    assert level["api"] >= level["query"] > level["spark"] >= level["experiments"]
