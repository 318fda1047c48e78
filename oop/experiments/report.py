"""``report.md``: every experiment of one invocation with its plots, checks and verdict.

Layout: a header (command, size, seed, machine, total time), a summary table
(experiment, what it reproduces, verdict, time), then one section per
experiment: its summary, the plots (relative links, so the folder can be
moved or published as is), the checks table (claim, held?, measured,
expected) and the parameters; a crashed experiment shows its traceback tail.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from oop.experiments.runner import RunRecord, to_jsonable

__all__ = ["verdict", "write_report", "render_report"]


def verdict(r: RunRecord) -> str:
    if r.status != "ok":
        return "ERROR"
    return "shape holds" if r.holds else "shape does NOT hold"


def _cell(x: Any, limit: int = 160) -> str:
    s = x if isinstance(x, str) else json.dumps(to_jsonable(x))
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def render_report(records: list[RunRecord], *, command: str, size: str, seed: int,
                  total_s: float) -> str:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_ok = sum(r.status == "ok" for r in records)
    n_hold = sum(bool(r.holds) for r in records)
    lines = [
        "# oop experiments: IOP vs OOP",
        "",
        f"`{command}` — size **{size}**, seed {seed}, {now}, "
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()} ({os.cpu_count()} cpus, load average {_load()}), "
        f"total {total_s:.1f} s.",
        "",
        f"**{n_hold} of {len(records)}** experiments reproduce the expected shape; "
        f"{len(records) - n_ok} errored. A shape that does not hold is a finding, reported "
        "as measured; timings are wall-clock on this machine (other load distorts them).",
        "",
        *(["*Tiny* is the CI smoke size: it checks that everything runs; its numbers and "
            "verdicts are not meaningful. Use `--quick` or the full size.", ""]
          if size == "tiny" else []),
        "| experiment | reproduces | verdict | checks held | time (s) |",
        "|---|---|---|---|---|",
    ]
    for r in records:
        held = (f"{sum(c.holds for c in r.outcome.checks)}/{len(r.outcome.checks)}"
                if r.outcome else "–")
        lines.append(f"| [{r.name}](#{_anchor(r.name)}) | {_cell(r.reproduces)} | {verdict(r)} "
                     f"| {held} | {r.wall_s:.1f} |")
    for r in records:
        lines += ["", f"## {r.name}", "", f"*Reproduces:* {r.reproduces}. {r.summary}", "",
                  f"**Verdict: {verdict(r)}** ({r.wall_s:.1f} s)", ""]
        if r.status != "ok":
            tail = "\n".join((r.error or "").strip().splitlines()[-12:])
            lines += ["```", tail, "```"]
            continue
        assert r.outcome is not None
        for p in r.plots:
            lines += [f"![{r.name}: {p}]({r.name}/{p})", ""]
        lines += ["| claim | holds | measured | expected |", "|---|---|---|---|"]
        for c in r.outcome.checks:
            lines.append(f"| {_cell(c.claim)} | {'yes' if c.holds else '**no**'} | "
                         f"{_cell(c.measured)} | {_cell(c.expected)} |")
        lines += ["", f"Parameters: `{_cell(r.outcome.params, 600)}`  ",
                  f"Data: [{r.name}/results.json]({r.name}/results.json), "
                  f"[{r.name}/results.csv]({r.name}/results.csv)"]
    return "\n".join(lines) + "\n"


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        return "n/a"


def _anchor(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def write_report(records: list[RunRecord], out: Path, *, command: str | None = None,
                 size: str, seed: int, total_s: float) -> Path:
    """Write ``out/report.md`` and return its path."""
    cmd = command or "oop " + " ".join(sys.argv[1:])
    path = Path(out) / "report.md"
    path.write_text(render_report(records, command=cmd, size=size, seed=seed, total_s=total_s))
    return path
