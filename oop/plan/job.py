"""Running a plan on a feed: the loop around the executor that a live job needs.

Used by ``oop replay`` and by :meth:`oop.Stream.sink` with ``checkpoint_dir``
(``oop.replay.job`` re-exports it).

:class:`Job` drives an :class:`~oop.plan.executor.Executor` whose plan ends in
a :class:`~oop.plan.writer.SinkWriter` round by round (DESIGN §5.1) and, between
two rounds -- where the plan is at a consistent cut -- does what a stream
processor does besides computing:

* a progress line on stderr (tuples/s, low-watermark, its lag behind the wall
  clock, state size, late so far) and, with ``metrics_every``, one JSON line of
  metrics appended to ``metrics_log``;
* durable checkpoints every ``checkpoint_every`` (wall time or input rows) into
  a :class:`~oop.checkpoint.CheckpointStore`: the output sink and the late sink
  prepare their commits (parts finished and fsynced, not yet visible), the
  checkpoint records their commit points, the sources' offsets and every
  operator's state (:func:`oop.checkpoint.save`), then the sinks commit (rename
  the parts into view); a final checkpoint after the end makes a restarted
  finished job a no-op, and the sinks are closed only after it (the end of the
  input does not commit them), so no part -- not even the last -- becomes
  visible before a checkpoint covers it and a restart never takes output back;
* SIGINT / SIGTERM: a handler only sets a flag (never raises inside a kernel);
  the loop then finishes the round, checkpoints (if a directory is set),
  commits, and :meth:`Job.run` returns 130 / 143;
* ``stop_after_idle``: after that much wall time without a new input row the
  live connectors are told to stop, so the feed ends and every window closes.

Cost per round: O(operators) for the bookkeeping; checkpoints cost their
state's size.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time as _time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from oop.io.amount import Amount
from oop.plan.executor import Executor
from oop.plan.writer import LateWriter, SinkWriter
from oop.stream.elements import INT64_MIN
from oop.stream.timecol import UNIT_NS

__all__ = ["Job", "JobOptions", "JobOutcome", "job_options", "ensure_parent"]

_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass
class JobOptions:
    """How a :class:`Job` reports, checkpoints and stops (validated by the CLI)."""

    progress: bool = True
    progress_every: float = 1.0  # seconds between progress lines
    metrics_every: Amount | None = None
    metrics_log: str | None = None
    stop_after_idle: float | None = None  # seconds of wall time without a new input row
    checkpoint_dir: str | None = None
    checkpoint_every: Amount | None = None
    keep_checkpoints: int = 3
    held_back_warn_s: float = 30.0  # warn when one input holds back a union this long
    manifest: dict[str, Any] = field(default_factory=dict)
    on_round: Callable[[int], None] | None = None  # called after every executor round
    prefix: str = "oop replay"  # what stderr lines start with
    handle_signals: bool = True  # SIGINT/SIGTERM -> checkpoint and stop (main thread only)


@dataclass
class JobOutcome:
    """How the run ended: exit code, rounds, checkpoints taken, whether it resumed."""

    code: int = 0
    rounds: int = 0
    checkpoints: int = 0
    resumed_from: str | None = None
    stopped_by: str | None = None  # "SIGINT", "SIGTERM", "idle" or None (the feed ended)
    checkpoint_s: float = 0.0


class Job:
    """One run of a plan ending in ``writer`` (see module doc)."""

    def __init__(self, ex: Executor, writer: SinkWriter, late: LateWriter | None,
                 options: JobOptions, log: IO[str] | None = None) -> None:
        self.ex = ex
        self.writer = writer
        self.late = late
        self.opt = options
        self.log = log or sys.stderr
        self.outcome = JobOutcome()
        self._signal: int | None = None
        self._store: Any = None
        self._t0 = _time.perf_counter()
        self._tty = bool(getattr(self.log, "isatty", lambda: False)())
        # fault injection for tests: OOP_FAULT=sigterm-at-end sends this process SIGTERM in
        # the round its input ended (the signal is then handled like a user's)
        self._sigterm_at_end = os.environ.get("OOP_FAULT") == "sigterm-at-end"

    # ---- set-up ----------------------------------------------------------
    def _say(self, msg: str) -> None:
        print(f"{self.opt.prefix}: {msg}", file=self.log, flush=True)

    def _connectors(self) -> list[Any]:
        return [s.op.connector for s in self.ex.sources if s.op.connector is not None]

    def _late_schema(self) -> Any:
        out = self.ex.sources[0].op.output if self.ex.sources else None
        return out.schema if out is not None else None

    def open(self) -> None:
        """Open the plan and, with a checkpoint directory, resume from its newest checkpoint."""
        self.ex.open()
        if self.late is not None:
            for n in self.ex.nodes:
                n.op.late_sink = self.late
        if self.opt.checkpoint_dir is None:
            return
        for n in self.ex.nodes:  # before any work: an operator that cannot be snapshotted
            why = getattr(n.op, "not_checkpointable", None)
            if why:
                from oop.errors import ConfigError

                raise ConfigError(f"{n.op.name}: {why}")
        self.writer.close_at_end = False  # closed after the final checkpoint (_finish)
        from oop.checkpoint import CheckpointStore, load

        self._store = CheckpointStore(self.opt.checkpoint_dir, keep=self.opt.keep_checkpoints,
                                      on_warning=lambda m: self._say(f"warning: {m}"))
        with warnings.catch_warnings():  # a skipped damaged checkpoint: one line, via _say
            warnings.simplefilter("ignore", RuntimeWarning)
            manifest = load(self.ex, self._store)
        if manifest is None:
            self._fresh_start()
            return
        late_point = manifest.get("late_commit")
        if self.late is not None and hasattr(self.late.sink, "resume"):
            self.late.sink.resume(late_point)
        self.outcome.resumed_from = str(manifest.get("created", "?"))
        rows = sum(s.op.rows_read for s in self.ex.sources)
        self._say(f"resumed from the checkpoint of {self.outcome.resumed_from} "
                  f"({rows} input rows already done)")

    def _fresh_start(self) -> None:
        """No checkpoint yet: remove the pending parts a crashed run may have left behind;
        refuse a folder that already holds committed results of another run."""
        from oop.errors import ConfigError
        from oop.io.parts import PartsSink, committed_parts

        for sink in [self.writer.sink] + ([self.late.sink] if self.late is not None else []):
            sink = getattr(sink, "inner", sink)  # a wrapping sink (oop sql's cast to INSERT)
            if not isinstance(sink, PartsSink):
                continue
            if committed_parts(sink.folder):
                raise ConfigError(
                    f"{sink.folder} already holds results but {self.opt.checkpoint_dir} holds "
                    "no checkpoint to continue from; empty the folder or choose another one")
            sink.resume(None)

    # ---- signals ---------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self._signal is not None:  # a second Ctrl-C: stop the hard way
            raise KeyboardInterrupt
        self._signal = signum

    def _install(self) -> dict[int, Any]:
        old: dict[int, Any] = {}
        if not self.opt.handle_signals:
            return old
        for sig in _EXIT:
            try:
                old[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return old

    # ---- the loop --------------------------------------------------------
    def run(self) -> JobOutcome:
        old = self._install()
        try:
            self._loop()
        except BaseException:
            self.writer.abort()
            if self.late is not None:
                self.late.abort()
            raise
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            for c in self._connectors():
                c.close()
            if self._tty and self.opt.progress:
                print(file=self.log)
        return self.outcome

    def _loop(self) -> None:
        opt = self.opt
        last_rows, last_data = self._rows(), _time.monotonic()
        next_progress = _time.monotonic() + opt.progress_every
        ck_rows, ck_time = self._rows(), _time.monotonic()
        m_rows, m_time = self._rows(), _time.monotonic()
        idle_stopped = False
        watch = FeedWatch(self.ex.sources, opt.held_back_warn_s, self._say)
        for r in self.ex.steps():
            if opt.on_round is not None:
                opt.on_round(r)
            if self._sigterm_at_end and self.writer.ended:
                self._sigterm_at_end = False
                os.kill(os.getpid(), signal.SIGTERM)  # a test's fault point (__init__)
            now, rows = _time.monotonic(), self._rows()
            if rows != last_rows:
                last_rows, last_data = rows, now
            watch.check(now)
            if opt.progress and now >= next_progress:
                self._progress(now)
                next_progress = now + opt.progress_every
            if opt.metrics_every is not None and _due(opt.metrics_every, rows - m_rows,
                                                      now - m_time):
                self._metrics_line()
                m_rows, m_time = rows, now
            if self._store is not None and opt.checkpoint_every is not None and _due(
                    opt.checkpoint_every, rows - ck_rows, now - ck_time):
                self._checkpoint()
                ck_rows, ck_time = rows, _time.monotonic()
            if self._signal is not None:
                self._interrupted()
                return
            if (opt.stop_after_idle is not None and not idle_stopped
                    and now - last_data >= opt.stop_after_idle):
                self._say(f"no new input for {opt.stop_after_idle:g}s: ending the feed")
                self.outcome.stopped_by = "idle"
                idle_stopped = True
                for c in self._connectors():
                    if hasattr(c, "stop"):
                        c.stop()
        self._finish()
        if opt.progress:
            self._progress(_time.monotonic())
        if opt.metrics_every is not None:
            self._metrics_line()
        self.outcome.rounds = self.ex.rounds

    def _finish(self) -> None:
        """The input ended: with a checkpoint directory, the final checkpoint records the
        sinks' last parts (and the empty part a folder without any gets) before they are
        committed; then the sinks close."""
        if self._store is not None:
            self.writer.seal()
            if self.late is not None:
                self.late.seal(self._late_schema())
            self._checkpoint()
        self.writer.close()
        if self.late is not None:
            self.late.close(self._late_schema())

    def _interrupted(self) -> None:
        sig = signal.Signals(self._signal or signal.SIGINT)
        self.outcome.stopped_by = sig.name
        self.outcome.code = _EXIT.get(sig, 130)
        if self._store is not None and not self.writer.ended:
            self._checkpoint()
        else:  # no checkpoints, or the input ended this round: end as a finished job does
            self._finish()
        if self._store is not None:
            self._say(f"{sig.name}: checkpoint written to {self.opt.checkpoint_dir}; run the "
                      "same command again to continue")
        else:
            self._say(f"{sig.name}: stopped; the results written so far are complete windows "
                      "(use --checkpoint-dir to be able to continue)")
        self.outcome.rounds = self.ex.rounds

    def _checkpoint(self) -> None:
        from oop.checkpoint import save

        t = _time.perf_counter()
        manifest = dict(self.opt.manifest)
        if self.late is not None:
            prepare = getattr(self.late.sink, "prepare", None)
            manifest["late_commit"] = prepare() if prepare is not None else \
                self.late.sink.commit()
        save(self.ex, self._store, manifest)  # the output sink prepares in its snapshot
        # the checkpoint is durable: make the parts it covers visible (a crash before
        # these renames is rolled forward by the restart's recover())
        self.writer.commit()
        if self.late is not None:
            self.late.sink.commit()
        self.outcome.checkpoints += 1
        self.outcome.checkpoint_s += _time.perf_counter() - t

    # ---- reporting -------------------------------------------------------
    def _rows(self) -> int:
        return sum(s.op.rows_read for s in self.ex.sources)

    def snapshot_metrics(self) -> dict[str, Any]:
        """What a progress line and a metrics-log line say (one dict)."""
        wall = _time.perf_counter() - self._t0
        rows = self._rows()
        lwm = min((s.op.lwm.value for s in self.ex.sources), default=INT64_MIN)
        state = sum(n.op.metrics.state_bytes for n in self.ex.nodes)
        late = sum(n.op.metrics.late_total for n in self.ex.nodes)
        out: dict[str, Any] = {
            "wall_s": round(wall, 3), "tuples_in": rows,
            "tuples_per_s": rows / wall if wall > 0 else 0.0,
            "low_watermark": None if lwm == INT64_MIN else lwm,
            "state_bytes": state, "late": late, "rows_out": self.writer.rows,
        }
        src = self.ex.sources[0].op if self.ex.sources else None
        live = any(getattr(c, "live", False) for c in self._connectors())
        if live and src is not None and lwm != INT64_MIN and src.output is not None:
            unit_ns = UNIT_NS.get(src.unit, 1)
            lag = _time.time() - lwm * unit_ns / 1e9
            if abs(lag) < 366 * 86400:  # event times on the wall clock's scale (epoch)
                out["watermark_lag_s"] = round(lag, 3)
        return out

    def _progress(self, _now: float) -> None:
        m = self.snapshot_metrics()
        lag = f", lag {m['watermark_lag_s']:.1f}s" if "watermark_lag_s" in m else ""
        line = (f"{self.opt.prefix}: {m['tuples_in']:,} tuples ({m['tuples_per_s'] / 1e6:.2f} M/s), "
                f"low-watermark {m['low_watermark']}{lag}, state {m['state_bytes']:,} B, "
                f"{m['late']:,} late, {m['rows_out']:,} rows out")
        if self._tty:
            print("\r" + line[:160].ljust(160), end="", file=self.log, flush=True)
        else:
            print(line, file=self.log, flush=True)

    def _metrics_line(self) -> None:
        if self.opt.metrics_log is None:
            return
        with open(self.opt.metrics_log, "a") as f:
            f.write(json.dumps(self.snapshot_metrics()) + "\n")


def job_options(checkpoint_dir: str | Path, checkpoint_every: "Amount | str | None",
                keep_checkpoints: int = 3, *, progress: bool = False,
                on_round: Callable[[int], None] | None = None) -> JobOptions:
    """JobOptions of a library run (``Stream.sink(checkpoint_dir=...)``), checked in one line."""
    from oop.errors import ConfigError
    from oop.io.amount import parse_amount

    if keep_checkpoints < 1:
        raise ConfigError(f"keep_checkpoints={keep_checkpoints}: keep at least 1")
    every = checkpoint_every if checkpoint_every is not None else "1min"
    if not isinstance(every, Amount):
        every = parse_amount(str(every), what="checkpoint_every")
    return JobOptions(progress=progress, progress_every=5.0, checkpoint_dir=str(checkpoint_dir),
                      checkpoint_every=every, keep_checkpoints=keep_checkpoints,
                      manifest={"command": "Stream.sink"}, prefix="oop", on_round=on_round)


def _due(amount: Amount, rows: int, seconds: float) -> bool:
    if amount.rows is not None:
        return rows >= amount.rows
    return seconds >= (amount.seconds or 0.0)


def ensure_parent(path: str | None, flag: str) -> None:
    """A one-line error before any work when ``path``'s folder does not exist."""
    if path is None or path == "-":
        return
    parent = Path(path).parent
    if not parent.exists():
        from oop.errors import ConfigError

        raise ConfigError(f"{flag} {path}: no folder {parent}; create it first")



#: event times beyond this many seconds from the epoch (the year 3000) are implausible
_PLAUSIBLE_S = 32_503_680_000


class FeedWatch:
    """Warnings about a feed while it runs, each said once on stderr:

    * an input of a union whose punctuation has not moved for ``held_back_s`` of wall
      time while another input's has: it holds back every window downstream and its
      state grows; the remedy is an idle rule (``+idle:DUR`` or ``+idle-wall:DUR``);
    * event times implausible for the declared unit (beyond the year 3000 once
      converted, e.g. epoch milliseconds declared ``--time-unit s``).
    """

    def __init__(self, sources: list[Any], held_back_s: float,
                 say: Any) -> None:
        self.sources = sources
        self.held_back_s = held_back_s
        self.say = say
        now = _time.monotonic()
        self.last = {s.op.name: (s.op.lwm.value, now) for s in sources}
        self.warned: set[str] = set()
        self.unit_checked = False

    def check(self, now: float) -> None:
        """O(sources) per round."""
        if not self.unit_checked:
            self._unit()
        if len(self.sources) < 2:
            return
        moved = False
        for s in self.sources:
            v, t = self.last[s.op.name]
            if s.op.lwm.value != v:
                self.last[s.op.name] = (s.op.lwm.value, now)
                moved = True
        if not moved and all(now - t < self.held_back_s for _, t in self.last.values()):
            return
        newest = max(t for _, t in self.last.values())
        for s in self.sources:
            name = s.op.name
            _, t = self.last[name]
            late_by = newest - t
            if name not in self.warned and not s.op.exhausted and late_by >= self.held_back_s:
                self.warned.add(name)
                self.say(f"warning: input {name!r} has not advanced its punctuation for "
                         f"{late_by:.0f}s while other inputs did: it holds back every "
                         "window of the union and its state grows; give it an idle rule "
                         "(--punctuation ...+idle-wall:30s or +idle:DUR)")

    def _unit(self) -> None:
        for s in self.sources:
            hwm = s.op.hwm.value
            if hwm == INT64_MIN:
                return
            unit_ns = UNIT_NS.get(s.op.unit, 1)
            if abs(hwm) / (1e9 / unit_ns) > _PLAUSIBLE_S:
                self.say(f"warning: input {s.op.name!r}: time {hwm} in unit {s.op.unit!r} is "
                         "beyond the year 3000; is --time-unit right (epoch milliseconds "
                         "declared as seconds)?")
        self.unit_checked = True
