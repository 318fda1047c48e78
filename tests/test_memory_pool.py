"""Arrow's pool choice for replay (oop.io.memory_pool): jemalloc unless the user chose."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from oop.io.memory_pool import ENV, use_lean_pool

_PROBE = "from oop.io.memory_pool import use_lean_pool; print(use_lean_pool())"


def _run(env_pool: str | None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_pool is not None:
        env[ENV] = env_pool
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


@pytest.mark.skipif(not _has_jemalloc(), reason="pyarrow built without jemalloc")
def test_switches_to_jemalloc() -> None:
    assert _run(None) == "jemalloc"


def test_keeps_the_users_choice() -> None:
    assert _run("system") == "system"


def test_returns_the_current_backend() -> None:
    assert use_lean_pool() == pa.default_memory_pool().backend_name


_EARLY = ("from oop.io.memory_pool import prefer_lean_pool; asked = prefer_lean_pool(); "
          "import pyarrow as pa; print(asked, pa.default_memory_pool().backend_name)")


def _run_early(code: str, env_pool: str | None) -> str:
    import os

    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_pool is not None:
        env[ENV] = env_pool
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True)
    assert "nsupported" not in out.stderr, out.stderr  # Arrow warns of an unknown backend
    return out.stdout.strip()


@pytest.mark.skipif(not (_has_jemalloc() and sys.platform.startswith("linux")),
                    reason="jemalloc is asked for on Linux builds that have it")
def test_prefer_before_import_makes_the_cpp_default_jemalloc() -> None:
    # the C++ default (what the Parquet reader and writer allocate from) is only chosen
    # from the environment when the library loads
    assert _run_early(_EARLY, None) == "True jemalloc"


def test_prefer_keeps_the_users_choice() -> None:
    assert _run_early(_EARLY, "system") == "False system"


def test_prefer_after_import_does_nothing() -> None:
    code = "import pyarrow; " + _EARLY
    plain = _run_early("import pyarrow as pa; print(pa.default_memory_pool().backend_name)",
                       None)
    assert _run_early(code, None) == f"False {plain}"


def test_tune_malloc_cuts_page_faults_of_large_array_churn() -> None:
    # glibc maps a block above its mmap threshold, and raises the threshold only to the
    # size of the block freed: arrays a little larger each time are each mapped and
    # faulted in anew; after tune_malloc they come from the heap, whose pages stay
    code = ("import resource, sys, numpy as np\n"
            "from oop.io.memory_pool import tune_malloc\n"
            "if sys.argv[1] == '1': assert tune_malloc()\n"
            "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for i in range(200): np.ones((600 << 7) + 1024 * i)\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n")
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    faults = [int(subprocess.run([sys.executable, "-c", code, arg], env=env, check=True,
                                 capture_output=True, text=True).stdout) for arg in "01"]
    assert faults[1] * 10 < faults[0], faults  # ~200 x 250 pages vs a heap of ~600 pages


def test_a_plan_run_tunes_malloc_unless_the_user_chose() -> None:
    """The Python API tunes glibc's malloc as the commands do (the executor, before the
    first batch); a program that set a malloc variable keeps its choice."""
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    code = ("import pyarrow as pa, oop\n"
            "from oop.io import memory_pool as mp\n"
            "before = mp.tune_malloc.cache_info().currsize\n"
            "t = pa.table({'ts': [1, 2, 3]})\n"
            "oop.from_arrow(t, time='ts', punctuation=oop.BoundedDelay(1)).run()\n"
            "after = mp.tune_malloc.cache_info().currsize\n"
            "print(before, after, mp.tune_malloc())\n")  # the answer the run's call made
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    runs = [subprocess.run([sys.executable, "-c", code], env=e, check=True, capture_output=True,
                           text=True).stdout.strip()
            for e in (env, {**env, "MALLOC_TRIM_THRESHOLD_": "131072"})]
    assert runs == ["0 1 True", "0 1 False"]
