"""``--threads N``: the flag ``oop replay`` and ``oop sql`` share, and what N means.

N is the number of threads a run uses in all; the default is every core this
process may use (:func:`usable_cores`), except with a ``--strategy`` other
than ``oop`` (then 1: the in-order plans run on one thread).

* N = 1: the plan runs on the driving thread, and a first run compiles its kernels
  there too (no compile-ahead helper: :func:`compile_on_threads`).
* N > 1 *pipelines* the run (:func:`pipelined`): a finite input is decoded
  ahead on a thread of its own (:class:`oop.plan.background.ReadAhead`), the
  results are encoded and written on another
  (:class:`oop.plan.background.BackgroundSink`), and the operators that can be
  split run on :func:`partitions` = N - 1 partitions, one thread each -- a
  window on key partitions (:class:`oop.window.threaded.ThreadedWindow`), a
  join on SplitJoin workers (``oop sql``, :mod:`oop.join.split_join`). With one
  partition (N = 2) the operator is the one-thread operator, on the driving
  thread: on 2 cores that beats two partitions (the scatter and the merge cost
  more than a second core gives the window: ``docs/benchmarks.md``, Threads).

Every N gives the same rows in the same order as N = 1. With ``--checkpoint-dir``
every N is checkpointed, a window on key partitions too (its snapshot:
:mod:`oop.window.threaded`) and an ``oop sql`` join with equality keys on key
partitions (:mod:`oop.join.keyed_join`). A restart resumes a window on the
partition count of its checkpoint, whatever N it is given (it must be N > 2
again when the checkpoint's was: the one-partition window is another
operator); so does a join on key partitions (N > 2 again when the
checkpoint's was).
"""

from __future__ import annotations

import argparse

from oop.errors import ConfigError
from oop.limits import usable_cores

__all__ = ["add_threads_flag", "check_threads", "usable_cores", "run_threads", "pipelined",
           "partitions", "compile_on_threads"]


def add_threads_flag(p: argparse.ArgumentParser, *, splits: str, spark: bool = False) -> None:
    """``--threads N``; ``splits`` names what runs on the N-1 partitions (the help text)."""
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="use N threads: N > 1 reads (finite inputs) and writes on threads of "
                        f"their own and runs {splits} on N-1 partitions, one thread each (same "
                        "rows in the same order as --threads 1); default: all cores this "
                        "process may use (1 with a --strategy other than oop)" + ("; with --spark it applies inside each task (default 1 "
                                  "there)" if spark else ""))


def check_threads(args: argparse.Namespace) -> None:
    """Refuse, in one line, a ``--threads`` that cannot work with the other flags."""
    n = args.threads
    if n is None:
        return
    if n < 1:
        raise ConfigError(f"--threads {n}: give at least 1")
    if n > 1 and args.strategy != "oop":
        raise ConfigError(f"--threads {n} runs the oop operators on threads; --strategy "
                          f"{args.strategy} runs on one thread: drop --threads")


def run_threads(args: argparse.Namespace) -> int:
    """``--threads``, or by default every usable core (1 with a ``--strategy`` other than
    ``oop``)."""
    threads = getattr(args, "threads", None)
    if threads is not None:
        return int(threads)
    if args.strategy != "oop":
        return 1
    return usable_cores()


def compile_on_threads(args: argparse.Namespace) -> None:
    """A first run's kernels may compile on another core (:mod:`oop.compile_ahead`) only
    when the run may use more than one thread: ``--threads 1`` keeps to one core."""
    from oop import compile_ahead  # not at import: ``--help`` loads no more than it needs

    compile_ahead.allow(run_threads(args) > 1)


def pipelined(args: argparse.Namespace) -> bool:
    """Whether the run uses several threads: then a finite input is read ahead and the
    output written on threads of their own (:mod:`oop.plan.background`)."""
    return args.strategy == "oop" and not getattr(args, "spark", False) and run_threads(args) > 1


def partitions(args: argparse.Namespace) -> int:
    """Partitions of a window or join for ``--threads N``: a pipelined run gives one core to
    reading and writing and the operator the other N - 1; one partition is the one-thread
    operator, on the driving thread. On 2 cores that beats two partitions: the 10M-row
    sliding benchmark's data work is 0.77 s of CPU (driver 0.36 s) against 1.13 s (driver
    0.34 s) -- partitioning costs the scatter and the merge, and the driver's share
    (source, punctuation, executor) does not shrink with it."""
    n = run_threads(args)
    return max(1, n - 1) if pipelined(args) else n
