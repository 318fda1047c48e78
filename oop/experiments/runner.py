"""Running experiments and writing their results.

For each experiment the runner makes ``OUT/NAME/``, calls ``run(ctx)`` with
``ctx.out_dir`` pointing there, and writes:

* ``results.json`` -- ``{"experiment", "reproduces", "params", "rows",
  "checks": [{"claim", "holds", "measured", "expected"}], "holds"}`` (``holds``
  is the AND of the checks) plus a ``"run"``
  object (``size``, ``seed``, ``wall_s``, ``plots``, ``summary``);
* ``results.csv`` -- the rows (union of their keys);
* the PNG plots the experiment wrote (listed in ``Outcome.plots``).

An experiment that raises is recorded with its traceback (``error.txt``,
``status: "error"``) and the others still run. A shape that does not hold
is a finding, not an error. :func:`run_all` returns the records; the CLI's
exit code is 1 when any record is an error.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from oop.experiments.base import Experiment, Outcome, RunContext
from oop.experiments.registry import Registry

__all__ = ["RunRecord", "run_one", "run_all", "to_jsonable", "results_dict", "size_name",
           "tqdm_progress"]


@dataclass
class RunRecord:
    """What happened to one experiment in one invocation."""

    name: str
    reproduces: str
    summary: str
    status: str  # "ok" or "error"
    wall_s: float
    outcome: Outcome | None = None
    error: str | None = None
    plots: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool | None:
        return self.outcome.holds if self.outcome is not None else None


def size_name(ctx: RunContext) -> str:
    return "tiny" if ctx.tiny else "quick" if ctx.quick else "full"


def to_jsonable(x: Any) -> Any:
    """Plain JSON values: numpy scalars/arrays to Python, NaN/inf to None, tuples to lists."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [to_jsonable(v) for v in x.tolist()]
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else None
    if x is None or isinstance(x, (str, int, bool)):
        return x
    return str(x)


def results_dict(exp: Experiment, outcome: Outcome, ctx: RunContext, wall_s: float) -> dict:
    return to_jsonable({
        "experiment": exp.name,
        "reproduces": exp.reproduces,
        "params": outcome.params,
        "rows": outcome.rows,
        "checks": [c.as_dict() for c in outcome.checks],
        "holds": bool(outcome.holds),
        "run": {"size": size_name(ctx), "seed": ctx.seed, "wall_s": round(wall_s, 3),
                "plots": list(outcome.plots), "summary": exp.summary,
                "overrides": dict(ctx.params)},
    })


def _write_csv(rows: list[dict], path: Path) -> None:
    keys: list[str] = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v
                        for k, v in to_jsonable(r).items()})


def _validate(exp: Experiment, outcome: Any, out_dir: Path) -> Outcome:
    if not isinstance(outcome, Outcome):
        raise TypeError(f"experiment {exp.name!r}: run() returned {type(outcome).__name__}, "
                        "not an Outcome")
    if not outcome.checks:
        raise ValueError(f"experiment {exp.name!r}: no checks; state the expected shape")
    if not outcome.plots:
        raise ValueError(f"experiment {exp.name!r}: wrote no plot (Outcome.plots is empty)")
    for p in outcome.plots:
        if not (out_dir / p).is_file():
            raise FileNotFoundError(f"experiment {exp.name!r}: plot {p!r} listed but not written "
                                    f"in {out_dir}")
    json.dumps(to_jsonable(outcome.rows))
    return outcome


def run_one(exp: Experiment, ctx_base: RunContext) -> RunRecord:
    """Run one experiment into ``ctx_base.out_dir / exp.name``; never raises for its errors."""
    out_dir = Path(ctx_base.out_dir) / exp.name
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("results.json", "results.csv", "error.txt"):
        (out_dir / stale).unlink(missing_ok=True)
    ctx = RunContext(quick=ctx_base.quick, seed=ctx_base.seed, out_dir=out_dir,
                     progress=ctx_base.progress, tiny=ctx_base.tiny, params=dict(ctx_base.params))
    t0 = time.perf_counter()
    try:
        outcome = _validate(exp, exp.run(ctx), out_dir)
    except Exception:  # noqa: BLE001 -- reported in report.md, exit code 1
        wall = time.perf_counter() - t0
        tb = traceback.format_exc()
        (out_dir / "error.txt").write_text(tb)
        return RunRecord(exp.name, exp.reproduces, exp.summary, "error", wall, error=tb)
    wall = time.perf_counter() - t0
    (out_dir / "results.json").write_text(
        json.dumps(results_dict(exp, outcome, ctx, wall), indent=2, allow_nan=False) + "\n")
    _write_csv(outcome.rows, out_dir / "results.csv")
    return RunRecord(exp.name, exp.reproduces, exp.summary, "ok", wall, outcome=outcome,
                     plots=list(outcome.plots))


def tqdm_progress(disable: bool = False) -> Callable[..., Iterable[Any]]:
    """A ``ctx.progress`` wrapper drawing tqdm bars on stderr (nested under the main bar)."""
    from tqdm import tqdm

    def progress(it: Iterable[Any], **kw: Any) -> Iterable[Any]:
        kw.setdefault("leave", False)
        kw.setdefault("position", 1)
        return tqdm(it, file=sys.stderr, disable=disable, dynamic_ncols=True, **kw)

    return progress


def run_all(reg: Registry, names: list[str], ctx: RunContext,
            show_progress: bool = True) -> list[RunRecord]:
    """Run ``names`` (already resolved; ``!module`` = a module that failed to import)."""
    from tqdm import tqdm

    records: list[RunRecord] = []
    bar = tqdm(names, file=sys.stderr, disable=not show_progress, desc="experiments",
               position=0, dynamic_ncols=True)
    for n in bar:
        bar.set_postfix_str(n)
        if n.startswith("!"):
            mod = n[1:]
            records.append(RunRecord(mod, "?", f"module {mod} failed to import", "error", 0.0,
                                     error=reg.broken[mod]))
            continue
        records.append(run_one(reg.experiments[n], ctx))
    bar.close()
    return records
