"""The ``oop`` command line: one console script, one subcommand per job.

Conventions: ``--help`` on every level; results go to stdout, logs and
progress bars to stderr; exit code 0 on success, 1 when a check fails
(e.g. ``replay --verify`` found mismatches), 2 on bad usage or bad input
(a one-line ``oop: error: ...`` message, no traceback).

Subcommands live beside the code they drive; each module listed in
:data:`SUBCOMMANDS` provides ``register(subparsers)`` which adds its parser
and sets ``func`` (``args -> exit code``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import Any, Iterator, Sequence

from oop.version import __version__
from oop.errors import OopError

__all__ = ["main", "build_parser", "compile_notice", "SUBCOMMANDS", "COMPILE_NOTE"]

#: said once on stderr when a command's first kernel misses numba's on-disk cache
COMPILE_NOTE = ("oop: compiling kernels for this query "
                "(first run after install; cached afterwards)...")

#: subcommand name -> the module providing its ``register(subparsers)``, in help order
SUBCOMMANDS: dict[str, str] = {
    "replay": "oop.replay.cli",
    "sql": "oop.sql.cli",
    "experiments": "oop.experiments.cli",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``oop`` parser; ``only`` (a subcommand name) registers that subcommand alone,
    sparing a command's start-up the other subcommands' imports (~5 ms)."""
    parser = argparse.ArgumentParser(
        prog="oop",
        description="Out-of-order stream processing for disordered feeds.",
    )
    parser.add_argument("--version", action="version", version=f"oop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, mod_name in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name and mod_name.startswith(e.name):
                continue  # that part of the engine is not installed in this build
            raise
        mod.register(sub)
    return parser


@contextlib.contextmanager
def compile_notice(stream: Any = None) -> Iterator[None]:
    """Say :data:`COMPILE_NOTE` on ``stream`` (stderr) when numba starts compiling in the block.

    numba fires ``numba:compile`` only when a kernel is not in its on-disk
    cache (``cache=True``): a first run after install, or a new type
    specialization. A kernel handed to the compile-ahead helper
    (:func:`oop.compile_ahead.on_ask`) counts too. Said at most once per block,
    before the wait, not after. Imports numba (without its scipy version check:
    :mod:`oop.command.numba_probes`).
    """
    from oop import compile_ahead
    from oop.command.numba_probes import import_numba

    import_numba()
    from numba.core import event

    said = [False]

    def say() -> None:
        if not said[0]:
            said[0] = True
            print(COMPILE_NOTE, file=stream or sys.stderr, flush=True)

    class _Note(event.Listener):
        def on_start(self, _ev: Any) -> None:
            say()

        def on_end(self, _ev: Any) -> None:
            pass

    with event.install_listener("numba:compile", _Note()), compile_ahead.on_ask(say):
        yield


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from oop.command.blas_threads import import_numpy_one_blas_thread
    from oop.command.startup_gc import held

    try:
        with held():
            import_numpy_one_blas_thread()  # no kernel calls BLAS: no thread pool for it
            with compile_notice():
                return int(args.func(args) or 0)
    except (OopError, FileNotFoundError) as e:
        print(f"oop: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("oop: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
