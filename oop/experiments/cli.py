"""``oop experiments``: list and run the IOP-vs-OOP studies.

* ``oop experiments list`` -- one line per experiment: name, what it reproduces.
* ``oop experiments run NAME... | all [--quick] [--out DIR] [--seed N]`` --
  progress bars on stderr; writes ``DIR/NAME/results.json``, ``results.csv``
  and PNG plots, then ``DIR/report.md``; prints one verdict line per
  experiment on stdout. ``--tiny`` is the CI smoke size (each experiment in
  seconds; the numbers are not meaningful). Exit code 0 even when a shape
  does not hold (a finding), 1 when an experiment crashed (the others still
  run and the report shows the traceback), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from oop.experiments.base import RunContext

__all__ = ["register", "cmd_list", "cmd_run"]


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subparsers.add_parser(
        "experiments", help="run the IOP-vs-OOP studies (tables, plots, report)",
        description="Reproduce the shapes of the thesis' figures: OOP vs IOP on the same data.",
    )
    sub = p.add_subparsers(dest="exp_command", metavar="ACTION")
    pl = sub.add_parser("list", help="list experiments and what they reproduce")
    pl.set_defaults(func=cmd_list)
    pr = sub.add_parser("run", help="run experiments and write results + report.md")
    pr.add_argument("names", nargs="+", metavar="NAME", help="experiment names, or 'all'")
    size = pr.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="reduced sizes (all experiments in <= 10 min on 2 cores)")
    size.add_argument("--tiny", action="store_true",
                      help="CI smoke size: seconds per experiment, numbers not meaningful")
    pr.add_argument("--out", type=Path, default=Path("results"),
                    help="output folder (default: ./results)")
    pr.add_argument("--seed", type=int, default=0, help="dataset seed (default 0)")
    pr.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    pr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override an experiment parameter (VALUE parsed as JSON if it can be)")
    pr.set_defaults(func=cmd_run)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _parse_sets(items: list[str]) -> dict:
    import json

    from oop.errors import ConfigError

    out = {}
    for it in items:
        if "=" not in it:
            raise ConfigError(f"--set expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except ValueError:
            out[k.strip()] = v
    return out


def accepted_params(exp: object) -> set[str]:
    """The parameter names an experiment reads (``ctx.param("NAME", ...)`` in its module)."""
    import inspect
    import re

    module = inspect.getmodule(getattr(exp, "run", None))
    src = inspect.getsource(module) if module is not None else ""
    return set(re.findall(r"""ctx\.param\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""", src))


def _check_params(params: dict, exps: list) -> None:
    """Refuse ``--set`` names that none of the chosen experiments reads (one line)."""
    from oop.errors import ConfigError

    known = set().union(*(accepted_params(e) for e in exps)) if exps else set()
    unknown = sorted(set(params) - known)
    if unknown:
        raise ConfigError(f"--set {', '.join(unknown)}: no chosen experiment reads "
                          f"{'it' if len(unknown) == 1 else 'them'}; they take "
                          f"{', '.join(sorted(known)) or 'no parameters'}")


def cmd_list(args: argparse.Namespace) -> int:
    from oop.experiments.registry import discover

    reg = discover()
    width = max((len(n) for n in reg.names()), default=0)
    for n in reg.names():
        e = reg.experiments[n]
        print(f"{n:<{width}}  {e.reproduces} -- {e.summary}")
    for mod, tb in sorted(reg.broken.items()):
        last = tb.strip().splitlines()[-1] if tb.strip() else "?"
        print(f"oop: warning: {mod} failed to load: {last}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from oop.command.startup_gc import settle

    settle()  # experiments allocate freely: collect their garbage as they run
    from oop.experiments.registry import discover
    from oop.experiments.report import verdict, write_report
    from oop.experiments.runner import run_all, size_name, tqdm_progress

    reg = discover()
    names = reg.resolve(list(args.names))
    params = _parse_sets(args.set)
    _check_params(params, [reg.experiments[n] for n in names if n in reg.experiments])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(quick=bool(args.quick), seed=int(args.seed), out_dir=out,
                     progress=tqdm_progress(disable=args.no_progress), tiny=bool(args.tiny),
                     params=params)
    t0 = time.perf_counter()
    records = run_all(reg, names, ctx, show_progress=not args.no_progress)
    total = time.perf_counter() - t0
    cmd = "oop experiments run " + " ".join(args.names) + (
        " --quick" if args.quick else " --tiny" if args.tiny else "") + (
        f" --seed {args.seed}" if args.seed else "")
    report = write_report(records, out, command=cmd, size=size_name(ctx), seed=ctx.seed,
                          total_s=total)
    for r in records:
        print(f"{r.name:<14} {verdict(r):<20} {r.wall_s:7.1f}s  {r.reproduces}")
    print(f"report: {report}  ({total:.1f} s)")
    return 1 if any(r.status != "ok" for r in records) else 0
