"""The experiment runner: discovery, results.json schema, report, isolation of crashes, exit codes."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from oop.cli import main
from oop.experiments import registry as registry_mod
from oop.experiments.base import RunContext
from oop.experiments.registry import discover
from oop.experiments.runner import run_all, to_jsonable

RESULT_KEYS = {"experiment", "reproduces", "params", "rows", "checks", "holds"}
CHECK_KEYS = {"claim", "holds", "measured", "expected"}


def assert_well_formed(out: Path, name: str) -> dict:
    """results.json has the runner's format (oop.experiments.runner); csv and the listed PNGs exist."""
    d = json.loads((out / name / "results.json").read_text())
    assert RESULT_KEYS <= set(d), set(d)
    assert d["experiment"] == name and isinstance(d["reproduces"], str) and d["reproduces"]
    assert isinstance(d["params"], dict)
    assert isinstance(d["rows"], list) and d["rows"] and all(isinstance(r, dict) for r in d["rows"])
    assert isinstance(d["checks"], list) and d["checks"]
    for c in d["checks"]:
        assert set(c) == CHECK_KEYS
        assert isinstance(c["holds"], bool) and isinstance(c["claim"], str)
        assert isinstance(c["expected"], str)
    assert d["holds"] == all(c["holds"] for c in d["checks"])
    assert (out / name / "results.csv").read_text().count("\n") == len(d["rows"]) + 1
    plots = d["run"]["plots"]
    assert plots
    for p in plots:
        data = (out / name / p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    return d


FAKE = {
    "__init__.py": "",
    "exp_good.py": """
        from oop.experiments.base import Check, Experiment, Outcome
        from oop.experiments.common import line_plot

        def run(ctx):
            xs = [1, 2, 3]
            ys = [x * (2 if ctx.tiny else 1) for x in xs]
            line_plot(ctx, "good.png", xs, {"y": ys}, xlabel="x", ylabel="y", title="good")
            return Outcome({"tiny": ctx.tiny, "seed": ctx.seed},
                           [{"x": x, "y": y} for x, y in zip(xs, ys)],
                           [Check("y grows", ys[-1] > ys[0], ys, "rising")], ["good.png"])

        EXPERIMENT = Experiment("good", "nothing (test)", "a fake study", run)
    """,
    "exp_shape_fails.py": """
        import numpy as np
        from oop.experiments.base import Check, Experiment, Outcome
        from oop.experiments.common import line_plot

        def run(ctx):
            ys = np.array([3.0, 2.0, float("nan")])
            line_plot(ctx, "p.png", [1, 2, 3], {"y": ys}, xlabel="x", ylabel="y", title="t")
            return Outcome({}, [{"x": 1, "y": ys[0]}, {"x": 3, "y": ys[2]}],
                           [Check("y grows", bool(ys[1] > ys[0]), ys, "rising"),
                            Check("trivially true", True, np.int64(1), "1")], ["p.png"])

        EXPERIMENT = Experiment("shape-fails", "nothing (test)", "a shape that does not hold", run)
    """,
    "exp_crash.py": """
        from oop.experiments.base import Experiment

        def run(ctx):
            raise RuntimeError("deliberate crash in a test experiment")

        EXPERIMENT = Experiment("crash", "nothing (test)", "crashes", run)
    """,
    "exp_badimport.py": "import no_such_module_anywhere_xyz\n",
    "helper.py": "X = 1\n",  # not an exp_ module: ignored
}


@pytest.fixture
def fake_pkg(tmp_path, monkeypatch):
    root = tmp_path / "pkgs"
    pkg = root / "fake_oop_exps"
    pkg.mkdir(parents=True)
    for name, src in FAKE.items():
        (pkg / name).write_text(textwrap.dedent(src))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry_mod, "PACKAGE", "fake_oop_exps")
    yield "fake_oop_exps"
    for m in [m for m in sys.modules if m.startswith("fake_oop_exps")]:
        del sys.modules[m]


def test_discovery_finds_exp_modules_and_isolates_broken_ones(fake_pkg):
    reg = discover()
    assert reg.names() == ["crash", "good", "shape-fails"]
    assert set(reg.broken) == {"exp_badimport"}
    assert "no_such_module_anywhere_xyz" in reg.broken["exp_badimport"]
    assert reg.resolve(["good", "good"]) == ["good"]
    assert reg.resolve(["all"])[-1] == "!exp_badimport"
    with pytest.raises(Exception, match="known: crash, good, shape-fails"):
        reg.resolve(["nope"])


def test_runner_writes_results_and_keeps_going_after_a_crash(fake_pkg, tmp_path):
    reg = discover()
    out = tmp_path / "res"
    ctx = RunContext(quick=False, seed=3, out_dir=out, tiny=True)
    recs = run_all(reg, reg.resolve(["all"]), ctx, show_progress=False)
    by = {r.name: r for r in recs}
    assert by["good"].status == "ok" and by["good"].holds is True
    d = assert_well_formed(out, "good")
    assert d["params"] == {"tiny": True, "seed": 3} and d["run"]["size"] == "tiny"
    # a shape that does not hold is a finding, with NaN written as null (strict JSON)
    assert by["shape-fails"].status == "ok" and by["shape-fails"].holds is False
    d = assert_well_formed(out, "shape-fails")
    assert d["holds"] is False and d["rows"][1]["y"] is None
    assert by["crash"].status == "error" and "deliberate crash" in by["crash"].error
    assert "deliberate crash" in (out / "crash" / "error.txt").read_text()
    assert by["exp_badimport"].status == "error"


def test_cli_exit_codes_and_report(fake_pkg, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["experiments", "run", "good", "shape-fails", "--tiny", "--out", str(out),
                 "--no-progress"]) == 0  # a failing shape is not an error
    text = capsys.readouterr().out
    assert "shape holds" in text and "shape does NOT hold" in text
    rep = (out / "report.md").read_text()
    assert "![good: good.png](good/good.png)" in rep and "**1 of 2**" in rep
    assert main(["experiments", "run", "all", "--tiny", "--out", str(out), "--no-progress"]) == 1
    rep = (out / "report.md").read_text()
    assert "ERROR" in rep and "deliberate crash" in rep and "no_such_module_anywhere_xyz" in rep
    assert main(["experiments", "run", "nope", "--out", str(out)]) == 2
    assert "no experiment named 'nope'" in capsys.readouterr().err
    assert main(["experiments", "list"]) == 0
    listing = capsys.readouterr()
    assert listing.out.splitlines()[0].startswith("crash")
    assert "exp_badimport failed to load" in listing.err


def test_to_jsonable_handles_numpy_and_nonfinite():
    import numpy as np

    assert to_jsonable({"a": np.float32(1.5), "b": (np.int64(2), float("inf")),
                        "c": np.array([True, False])}) == {"a": 1.5, "b": [2, None],
                                                           "c": [True, False]}
