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
