"""Shared test settings: Hypothesis profiles (``ci`` is the default, ``dev`` is faster), and
one numba cache per pytest-xdist worker.

The suite runs on two xdist workers (``addopts`` in pyproject.toml). numba's on-disk cache is
not safe for two processes compiling *different* specializations of one function at the same
moment: both pick the same data-file name, and the index can end up pointing at the other
process's machine code (numba issue 4807, open). Two measures:

* the workers themselves share one cache (``.pytest_cache/numba-shared``), and each names its
  data files with a token of its own (``_unique_data_names``): no two processes ever write the
  same data file, an index entry only ever names the file its writer compiled for that key, and
  a race on the index (atomic replace) can only lose an entry, which is then compiled again. On
  a cold cache the workers compiled most kernels twice (187 of 194 data files of the second
  worker's cache were also in the first's); now whichever worker needs one first compiles it.
* every subprocess a worker starts (the CLI tests), which inherits the environment and runs
  numba unpatched, compiles into its worker's own ``NUMBA_CACHE_DIR``
  (``.pytest_cache/numba-gw0``, ...), shared with no other running process but the worker's
  other children, as before.

Both are kept between runs, so a second run is warm. A serial run (``-n 0``) keeps numba's
default in-tree cache. The controlling process also byte-compiles oop (``_byte_compile_oop``).
"""

import os
import uuid
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]


def _unique_data_names() -> bool:
    """Make this process name its numba cache data files ``<function>.<token>-<n>.nbc``, the
    token (pid and random hex) its own: numba picks ``<function>.<n>.nbc``, the first ``n``
    its index does not list, so two processes reading the index at once chose the same file.
    False (nothing patched) if numba's cache file class is not the one this was written for."""
    from numba.core import caching

    cls = caching.IndexDataCacheFile
    token = f"{os.getpid()}x{uuid.uuid4().hex[:8]}"
    init = cls.__init__

    def __init__(self, cache_path, filename_base, source_stamp):  # type: ignore[no-untyped-def]
        init(self, cache_path, filename_base, source_stamp)
        self._data_name_pattern = f"{filename_base}.{token}-{{number:d}}.nbc"

    cls.__init__ = __init__
    try:
        named = cls("", "f", None)._data_name(1) == f"f.{token}-1.nbc"
    except Exception:  # another numba: its own names (and the per-worker directory) stay
        named = False
    if not named:
        cls.__init__ = init
    return named


def _worker_numba_cache() -> None:
    """Point this xdist worker's numba cache at the workers' shared directory (data files named
    uniquely per process) and its subprocesses' at the worker's own directory."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = os.environ.get("NUMBA_CACHE_DIR") or str(ROOT / ".pytest_cache")
    own = os.path.join(base, f"numba-{worker}")
    from oop.command.numba_probes import import_numba

    import_numba()  # the way oop imports it (no scipy version check)
    from numba.core import config

    os.environ["NUMBA_CACHE_DIR"] = own  # inherited by every subprocess of this worker
    config.reload_config()  # (a plugin may have imported numba first: re-read the variable)
    if _unique_data_names():
        config.CACHE_DIR = os.path.join(base, "numba-shared")  # this process only


def _byte_compile_oop() -> None:
    """Write oop's ``.pyc`` files once, in the controlling pytest process, before any worker
    or CLI subprocess starts. An editable install under ``PYTHONDONTWRITEBYTECODE=1`` (set on
    many CI images) has none, so every ``python -m oop.cli`` a test starts compiled oop's
    ~100 modules first (~0.4 s a start on a slow 2-core VM). ``compileall`` writes them
    whatever that variable says and skips the files already compiled."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    compileall.compile_dir(str(ROOT / "oop"), quiet=1)


_byte_compile_oop()
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
