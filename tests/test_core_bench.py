"""Keep the core benchmark alive (STYLE §12): a tiny run must work and pass its own checks.

No timing is asserted here -- speed is reported by ``experiments/bench_core.py``.
"""

import importlib.util
from pathlib import Path


def test_bench_core_tiny_run(capsys):
    path = Path(__file__).resolve().parents[1] / "experiments" / "bench_core.py"
    spec = importlib.util.spec_from_file_location("bench_core", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--rows", "200000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("bare numpy pass", "oop pass-through", "oop select 50%", "oop 4-input meld"):
        assert label in out
    assert "late 0" in out
