"""numba's start-up probes answered without scipy and cffi (oop.command.numba_probes), in a
fresh process: the kernels still load and compute, and the libraries stay importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PROBE = """
import sys
import numpy as np
from oop.command.numba_probes import import_numba, skip_blas_probe, skip_cffi_probe
imported = import_numba()
no_scipy = "scipy" not in sys.modules
answered = skip_blas_probe() and skip_cffi_probe()
from oop.window import kernels as K
rows = np.zeros(8, np.int64); f = np.zeros(8); codes = np.array([1, 2, 1], np.int64)
units = np.zeros(3, np.int64); vals = np.array([1.0, 2.0, 3.0])
new, _ = K.upd_rows_sums1(rows, (np.zeros(1, np.int64),), 0, (f,), (vals,), 1, codes, units, 8, 0,
                          np.inf)
loaded = sorted(m for m in ("scipy", "scipy.linalg", "cffi", "yaml") if m in sys.modules)
again = (import_numba(), skip_blas_probe(), skip_cffi_probe())
import scipy  # blocked only while the probes ran
print(imported, no_scipy, answered, loaded, int(new), rows[:3].tolist(), f[:3].tolist(),
      again, bool(scipy.__version__), sep="|")
"""


def test_kernels_run_without_scipy_or_cffi() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], check=True, capture_output=True,
                         text=True).stdout.strip().split("|")
    # numba imported without scipy; both probes answered; no probed library loaded
    assert out[:4] == ["True", "True", "True", "[]"]
    # the kernel still runs: 2 new cells, counts and sums per code
    assert out[4:7] == ["2", "[0, 2, 1]", "[0.0, 4.0, 2.0]"]
    assert out[7] == "(False, False, False)"  # idempotent: nothing left to answer
    assert out[8] == "True"  # scipy imports normally afterwards


_LATE = """
import sys
import numba, scipy  # numba imported the usual way: scipy's top is loaded
from oop.command.numba_probes import skip_blas_probe
print(skip_blas_probe(), "scipy.linalg" in sys.modules)
"""


def test_blas_probe_still_answered_after_a_plain_numba_import() -> None:
    out = subprocess.run([sys.executable, "-c", _LATE], check=True, capture_output=True,
                         text=True).stdout.split()
    assert out == ["True", "False"]


_CONFIG = """
import sys
from oop.command.numba_probes import import_numba
import_numba()
import numba
print("yaml" in sys.modules, numba.config.DEBUG_CACHE)
"""


def test_a_numba_config_file_is_still_read(tmp_path: Path) -> None:
    """PyYAML is kept when the current folder holds a numba config file: numba reads it."""
    (tmp_path / ".numba_config.yaml").write_text("debug_cache: 1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _CONFIG], check=True, capture_output=True,
                         text=True, cwd=tmp_path, env=env).stdout.split()
    assert out == ["True", "1"]


_EXT = """
import sys
from oop.command.numba_probes import declares_numba_extensions, import_numba
declared = declares_numba_extensions()
import_numba()
import numba.core.entrypoints as ep
print(declared, ep._already_initialized)
"""


def _run_ext(cwd: Path, extra_path: Path | None = None) -> list[str]:
    paths = [str(extra_path)] if extra_path is not None else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *sys.path])}
    return subprocess.run([sys.executable, "-c", _EXT], check=True, capture_output=True,
                          text=True, cwd=cwd, env=env).stdout.split()


def test_numba_extension_scan_skipped_only_when_nothing_declares_one(tmp_path: Path) -> None:
    # no distribution here declares numba_extensions: numba's scan is marked done
    assert _run_ext(tmp_path) == ["False", "True"]
    # a distribution that declares one: numba scans (and loads it) as usual
    site = tmp_path / "site"
    info = site / "numba_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text("[numba_extensions]\ninit = numba_plugin:init\n")
    assert _run_ext(tmp_path, site) == ["True", "False"]


_LEAN = """
import sys
import numpy as np
from oop.kernel_cache import load_cached_kernels_lean
from oop.command.numba_probes import skip_probes_at_compile
set_up = load_cached_kernels_lean()
skip_probes_at_compile()
from oop.window import kernels as K
rows = np.zeros(8, np.int64); f = np.zeros(8); codes = np.array([1, 2, 1], np.int64)
units = np.zeros(3, np.int64); vals = np.array([1.0, 2.0, 3.0])
new, _ = K.upd_rows_sums1(rows, (np.zeros(1, np.int64),), 0, (f,), (vals,), 1, codes, units, 8, 0,
                          np.inf)
names = ("numba.np.arraymath", "numba.typed.typeddict", "numba.cpython.mathimpl")
registries = sorted(m for m in names if m in sys.modules)
import usermod  # a user's cached function (not oop's): numba's own load, registries and all
user = usermod.twice(np.arange(3)).tolist()
after_user = sorted(m for m in names if m in sys.modules)
import numba as nb

@nb.njit  # not cached: compiled here, after the lean loads
def fresh(n):
    out = np.empty(n, np.float64)
    for i in range(n):
        out[i] = np.sqrt(i)
    return out

compiled = fresh(4).tolist()
after = sorted(m for m in ("numba.np.arraymath", "scipy.linalg", "cffi") if m in sys.modules)
print(set_up, load_cached_kernels_lean(), int(new), rows[:3].tolist(), f[:3].tolist(),
      registries, compiled, after, user, after_user, sep="|")
"""

_USERMOD = """
import numba as nb

@nb.njit(cache=True)
def twice(a):
    return a * 2
"""


def test_cached_kernels_load_without_the_registries(tmp_path: Path) -> None:
    """An oop kernel loaded from numba's cache runs without numba's registries; a user's
    cached function loads the way numba loads it; a later compile in the same process
    loads the registries (without the BLAS and cffi probes) and works."""
    (tmp_path / "usermod.py").write_text(_USERMOD)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}

    def run() -> list[str]:
        return subprocess.run([sys.executable, "-c", _LEAN], check=True, capture_output=True,
                              text=True, env=env).stdout.strip().split("|")

    every = "['numba.cpython.mathimpl', 'numba.np.arraymath', 'numba.typed.typeddict']"
    first = run()  # empty cache: upd_rows_sums1 and twice are compiled (and cached)
    assert first[0:2] == ["True", "False"]  # set up once, then idempotent
    second = run()  # both loaded from the cache
    for out in (first, second):
        assert out[2:5] == ["2", "[0, 2, 1]", "[0.0, 4.0, 2.0]"]  # same counts and sums
        assert out[6] == str([0.0, 1.0, 2 ** 0.5, 3 ** 0.5])  # the fresh kernel computes
        assert out[8] == "[0, 2, 4]"  # the user's function computes
        assert out[9] == every  # ... and its load (or compile) refreshed numba's contexts
    assert first[5] == every  # compiling the oop kernel loaded them
    assert first[7] == "['numba.np.arraymath']"  # ... without the BLAS and cffi probes
    # the user's function, loaded numba's way before any compile, ran numba's probes
    assert second[7] == "['cffi', 'numba.np.arraymath', 'scipy.linalg']"
    assert second[5] == "[]"  # the cached oop kernel ran with none of them loaded


_HASHMOD = """
import numba as nb

@nb.njit(cache=True)
def text_hash(s):
    return hash(s)  # siphash with Python's hash secret: an LLVM symbol numba adds at import
"""

_HASHED = """
import sys
import oop.kernel_cache as kc
kc._is_oop_kernel = lambda cache: True  # load this user function as oop's kernels load
kc.load_cached_kernels_lean()
import hashmod
before = "numba.cpython.hashing" in sys.modules
print(before, hashmod.text_hash("window") == hash("window"), sep="|")
"""


def test_a_lean_load_links_what_the_cached_code_calls(tmp_path: Path) -> None:
    """Cached code that calls a symbol numba registers at a module's import (the hash
    secret of ``numba.cpython.hashing``) still links: loading the cached environment
    imports the modules whose code was inlined. A missing symbol would kill the process."""
    (tmp_path / "hashmod.py").write_text(_HASHMOD)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    runs = [subprocess.run([sys.executable, "-c", _HASHED], check=True, capture_output=True,
                           text=True, env=env).stdout.strip() for _ in range(2)]
    assert runs == ["False|True", "False|True"]  # compiled, then loaded lean: same hash
