"""Helpers of the crash-recovery tests: the data, the commands, killing and comparing.

Every job runs in a subprocess (``python -m oop.cli replay`` or
``tests/_recovery_driver.py``) with ``PYTHONPATH`` = the repository root, so the
worktree's ``oop`` is the one tested.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().parent / "_recovery_driver.py"
PUNCTUATION = "bounded:3s+cadence:5000rows"  # the driver's, too
EVERY = "8000rows"  # checkpoint interval: about 10 checkpoints per run of input A
TIMEOUT = 120


def env(**extra: str) -> dict[str, str]:
    """The subprocess environment: this worktree's oop, no inherited fault point."""
    e = {k: v for k, v in os.environ.items() if k != "OOP_FAULT"}
    e["PYTHONPATH"] = str(ROOT)
    e.update(extra)
    return e


def write_data(folder: Path, seed: int = 7) -> tuple[Path, Path]:
    """Inputs A (80k rows, 4 files) and B (30k rows, 2 files) with string keys ``k``,
    event time ``ts`` (ms) disordered by up to 4 s, so ``bounded:3s`` makes some late."""
    rng = np.random.default_rng(seed)
    keys = np.array([f"key-{i:03d}" for i in range(200)])
    out = []
    for name, n, step, files in (("a", 80_000, 12, 4), ("b", 30_000, 32, 2)):
        d = folder / name
        d.mkdir(parents=True)
        ts = np.arange(n, dtype=np.int64) * step + rng.integers(0, 4000, n)
        k = keys[rng.zipf(1.3, n) % len(keys)]
        v = rng.integers(0, 1000, n)
        for i in range(files):
            sl = slice(i * n // files, (i + 1) * n // files)
            pq.write_table(pa.table({"ts": ts[sl], "k": k[sl], "v": v[sl]}),
                           d / f"part-{i}.parquet", row_group_size=5000)
        out.append(d)
    return out[0], out[1]


@dataclass
class Job:
    """One restartable job: its command (without the checkpoint folder) and its folders."""

    kind: str  # "cli" or a driver plan name
    args: list[str]
    out: Path
    late: Path
    ck: Path

    def command(self, checkpointed: bool = True) -> list[str]:
        if self.kind == "cli":
            ck = ["--checkpoint-dir", str(self.ck), "--checkpoint-every", EVERY] \
                if checkpointed else []
            return [sys.executable, "-m", "oop.cli", "replay", *self.args, "--out",
                    f"{self.out}/", "--late", "side", "--late-out", f"{self.late}/",
                    "--quiet", *ck]
        return [sys.executable, str(DRIVER), self.kind, *self.args, f"{self.out}/",
                f"{self.late}/", str(self.ck) if checkpointed else "-", EVERY]


def cli_job(root: Path, a: Path, *query: str) -> Job:
    """``oop replay`` over input A with ``query`` flags, its folders under ``root``."""
    args = ["--input", str(a), "--time", "ts", "--time-unit", "ms", "--key", "k",
            "--punctuation", PUNCTUATION, "--batch-size", "5000", *query]
    return Job("cli", args, root / "out", root / "late", root / "ck")


def driver_job(root: Path, plan: str, a: Path, b: Path) -> Job:
    return Job(plan, [str(a), str(b)], root / "out", root / "late", root / "ck")


def run(cmd: list[str], **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env(**extra_env), cwd=ROOT, capture_output=True,
                          text=True, timeout=TIMEOUT)


def bag(folder: Path) -> Counter[tuple[Any, ...]]:
    """The committed rows of a part folder as a multiset (pending parts are hidden names)."""
    names = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    rows: Counter[tuple[Any, ...]] = Counter()
    for p in names:
        t = pq.read_table(p)
        rows.update(zip(*(t.column(c).to_pylist() for c in t.column_names)))
    return rows


def pending(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def visible_parts(job: Job) -> dict[Path, int]:
    """The committed parts of the output and late folders, with their sizes."""
    return {p: p.stat().st_size for d in (job.out, job.late) if d.is_dir()
            for p in d.iterdir() if not p.name.startswith(".")}


def newest_checkpoint(ck: Path) -> int:
    """The number of the newest checkpoint file in ``ck`` (0: none yet)."""
    if not ck.is_dir():
        return 0
    nums = [int(p.name[5:13]) for p in ck.iterdir()
            if p.name.startswith("ckpt-") and p.name.endswith(".oopckpt")]
    return max(nums, default=0)


def wait_for_checkpoint(proc: subprocess.Popen[str], ck: Path, after: int,
                        limit: float = 60.0) -> bool:
    """Wait until a checkpoint numbered above ``after`` exists; False if ``proc`` ended first."""
    t_end = time.monotonic() + limit
    while time.monotonic() < t_end:
        if newest_checkpoint(ck) > after:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


def kill_until_done(job: Job, rng: np.random.Generator, kills: int,
                    log: list[str], label: str) -> int:
    """Start the job, SIGKILL it ``kills`` times at random moments, rerun until it exits 0.

    Three kills in four land a random 0-100 ms after a new checkpoint file appeared
    (so each run makes progress and the kill catches uncommitted output); the others
    a random 0.2-1.2 s after the start (start-up, a restore, or anywhere in the run).
    When the job finishes before all kills (a fast machine), fewer are returned.
    Committed output is never taken back: every part visible after a kill is still
    there, unchanged, at the end. Returns the number of SIGKILLs delivered.
    """
    done = 0
    seen: dict[Path, int] = {}  # committed parts seen after a kill, with their sizes
    for attempt in range(kills + 10):
        proc = subprocess.Popen(job.command(), env=env(), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        if done < kills:
            if rng.random() < 0.75:
                alive = wait_for_checkpoint(proc, job.ck, newest_checkpoint(job.ck))
                delay = float(rng.uniform(0.0, 0.1))
            else:
                alive, delay = True, float(rng.uniform(0.2, 1.2))
            time.sleep(delay)
            if alive and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                seen.update(visible_parts(job))
                done += 1
                log.append(f"{label}: kill {done} ({delay:.2f}s), newest checkpoint "
                           f"{newest_checkpoint(job.ck)}")
                continue
        _, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, f"attempt {attempt}: exit {proc.returncode}: {err}"
        final = visible_parts(job)
        taken_back = {p: n for p, n in seen.items() if final.get(p) != n}
        assert not taken_back, f"{label}: committed parts deleted or rewritten: {taken_back}"
        return done
    raise AssertionError(f"{label}: no clean finish after {kills + 10} attempts")
