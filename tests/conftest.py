"""Shared test settings: Hypothesis profiles (``ci`` is the default, ``dev`` is faster), and
one numba cache per pytest-xdist worker.

The suite runs on two xdist workers (``addopts`` in pyproject.toml). numba's on-disk cache is
not safe for two processes compiling *different* specializations of one function at the same
moment: both pick the same data-file name, and the index can end up pointing at the other
process's machine code (numba issue 4807, open). So each worker -- and every subprocess it
starts, which inherits the environment -- compiles into its own ``NUMBA_CACHE_DIR``
(``.pytest_cache/numba-gw0``, ...; kept between runs, so a second run is warm). A serial run
(``-n 0``) keeps numba's default in-tree cache.
"""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]


def _worker_numba_cache() -> None:
    """Point this xdist worker's numba cache (and its subprocesses') at its own directory."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = os.environ.get("NUMBA_CACHE_DIR") or str(ROOT / ".pytest_cache")
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(base, f"numba-{worker}")
    if "numba" in sys.modules:  # a plugin imported numba first: make it re-read the variable
        from numba.core.config import reload_config

        reload_config()


_worker_numba_cache()

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
