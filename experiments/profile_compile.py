"""Which numba kernels compile for a README / docs/usage.md query, and how long each takes.

Runs one query of ``bench_startup.QUERIES`` in a fresh process with an empty
``NUMBA_CACHE_DIR`` and a ``numba:compile`` listener that times every
compilation (exclusive of nested compilations of callees) in CPU seconds of
the compiling thread (steadier than wall time on a shared machine), then
prints kernel, signature and seconds, largest first. The compile-ahead helper is
off (``OOP_COMPILE_AHEAD=0``), so every kernel compiles in the profiled process.

    python experiments/profile_compile.py "usage: replay sliding"
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_startup as bs  # noqa: E402

_HOOK = """
import atexit, json, sys, time
from numba.core import event
_stack, _rows = [], []
class _L(event.Listener):
    def on_start(self, ev):
        _stack.append([time.thread_time(), 0.0])
    def on_end(self, ev):
        t0, inner = _stack.pop()
        d = time.thread_time() - t0
        if _stack:
            _stack[-1][1] += d
        disp = ev.data["dispatcher"]
        _rows.append([disp.py_func.__module__ + "." + disp.py_func.__qualname__,
                      str(ev.data["args"]), round(d - inner, 3)])
_ctx = event.install_listener("numba:compile", _L())
_ctx.__enter__()
atexit.register(lambda: print("PROFILE " + json.dumps(_rows), file=sys.stderr))
"""


def profile(name: str) -> list[list]:
    kind, body = next(v for k, v in bs.QUERIES.items() if name in k)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "flows.parquet"
        bs.write_data(data)
        env = bs._env(work / "cache", ahead=False)  # every kernel here, none in the helper
        if kind == "python":
            r = subprocess.run([sys.executable, "-c", _HOOK + bs._PY_RUNNER], input=body,
                               text=True, capture_output=True, cwd=work, env=env)
        else:
            argv = [a.format(data=data, out=work / "o.parquet") for a in body]
            r = subprocess.run([sys.executable, "-c", _HOOK + bs._CLI_RUNNER, *argv],
                               capture_output=True, text=True, cwd=work, env=env)
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("PROFILE ")]
    if not line:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(line[-1][8:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queries", nargs="+", metavar="QUERY",
                    help="a name (or part of one) of bench_startup.QUERIES: "
                         + "; ".join(bs.QUERIES))
    names = ap.parse_args(argv).queries
    for name in names:
        if not any(name in k for k in bs.QUERIES):
            ap.error(f"no query of bench_startup.QUERIES is named like {name!r}")
    for name in names:
        rows = sorted(profile(name), key=lambda x: -x[2])
        print(f"== {name}: {sum(x[2] for x in rows):.1f} s in {len(rows)} compilations")
        for fn, sig, sec in rows:
            print(f"{sec:7.3f}  {fn}  {sig[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
