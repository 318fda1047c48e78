"""numpy imported with one OpenBLAS thread by the command line (oop.command.blas_threads), in
fresh processes: no BLAS thread pool, the environment left as the user gave it, a user's
own thread count kept, and BLAS still computing."""

from __future__ import annotations

import os
import subprocess
import sys

_PROBE = """
import os, sys
from oop.command.blas_threads import THREAD_VARS, import_numpy_one_blas_thread
now = import_numpy_one_blas_thread()
import numpy as np
threads = len(os.listdir("/proc/self/task"))
env = {v: os.environ.get(v) for v in THREAD_VARS}
a = np.arange(400.0).reshape(20, 20)
print(now, threads, env, float((a @ a.T).trace()) == float((a * a).sum()),
      import_numpy_one_blas_thread(), sep="|")
"""


def _run(extra_env: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in
           ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(extra_env, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", _PROBE], check=True, capture_output=True,
                          text=True, env=env).stdout.strip().split("|")


def test_numpy_loads_without_a_blas_thread_pool() -> None:
    now, threads, env, blas_ok, again = _run({})
    assert now == "True" and again == "False"  # imported now; a second call does nothing
    assert threads == "1"  # the main thread only: OpenBLAS started no pool
    assert env == str({"OPENBLAS_NUM_THREADS": None, "GOTO_NUM_THREADS": None,
                       "OMP_NUM_THREADS": None})  # children see the user's environment
    assert blas_ok == "True"  # a BLAS call still computes (on one thread)


def test_a_users_thread_count_is_kept() -> None:
    now, _threads, env, blas_ok, _ = _run({"OPENBLAS_NUM_THREADS": "2"})
    assert now == "False"
    assert "'OPENBLAS_NUM_THREADS': '2'" in env
    assert blas_ok == "True"
