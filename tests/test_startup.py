"""Startup cost: ``import oop`` and ``oop --help`` load no engine; every public name still imports.

``oop/__init__.py`` and ``oop/punctuation/__init__.py`` resolve their names on
first use (PEP 562). These tests run fresh interpreters and inspect
``sys.modules``: what a user waits for before the first result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: ``oop.__all__`` when the package still imported everything eagerly
PUBLIC_NAMES = (
    "Stream from_arrow from_batches from_iter from_connector from_socket from_pandas "
    "from_parquet Punctuation GroupPunctuation JointPunctuation EndOfStream END_OF_STREAM "
    "LatePolicy Ordered BoundedDelay BoundedTuples External Idle Adaptive Granular "
    "parse_punctuation Select Project Apply DupElim Meld Tumbling Sliding Landmark "
    "RowSliding PartitionedRows Session SlideByTuple agg sql OopError ConfigError EmptyInputError "
    "LateTupleError NullTimeError PunctuationOrderError SchemaMismatchError TimeTypeError "
    "UnknownColumnError"
).split()

#: the engine's heavy dependencies: none may load before a command runs
HEAVY = ("numba", "pandas", "pyarrow", "pyarrow.acero", "numpy", "pyspark", "sqlglot")


def _modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter using this checkout; the HEAVY modules it loaded."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_oop_loads_no_engine() -> None:
    assert _modules_after("import oop; oop.__version__; dir(oop)") == []


@pytest.mark.parametrize("argv", [["--help"], ["replay", "--help"], ["sql", "--help"],
                                  ["experiments", "--help"], ["experiments", "run", "--help"],
                                  ["--version"]])
def test_cli_help_loads_no_engine(argv: list[str]) -> None:
    code = ("import contextlib, io, sys\nfrom oop.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    try:\n"
            f"        main({argv!r})\n"
            "    except SystemExit as e:\n"
            "        assert e.code == 0, e.code\n"
            "assert out.getvalue().strip()\n")
    assert _modules_after(code) == []


def test_public_names_are_exported() -> None:
    import oop

    assert sorted(oop.__all__) == sorted(PUBLIC_NAMES)
    assert set(PUBLIC_NAMES) <= set(dir(oop))


def test_every_public_name_imports_fresh() -> None:
    """``from oop import X`` for every X, in a fresh interpreter: the defining module's object."""
    code = (
        "import importlib, oop\n"
        "for name in oop.__all__:\n"
        "    ns = {}\n"
        "    exec(f'from oop import {name}', ns)\n"
        "    module, attr = oop._LAZY[name]\n"
        "    want = importlib.import_module(module)\n"
        "    want = want if attr is None else getattr(want, attr)\n"
        "    assert ns[name] is want, name\n"
        "    assert getattr(oop, name) is want, name\n"
        "assert callable(oop.sql)\n"
        "from oop.window import agg\n"
        "assert oop.agg is agg and oop.agg.count().name == 'count'\n"
    )
    _modules_after(code)


def test_subpackages_load_on_attribute_access() -> None:
    code = ("import oop\nassert oop.window.Tumbling is oop.Tumbling\n"
            "assert oop.punctuation.External is oop.External\n"
            "assert oop.operators.base.StreamInfo is not None\n")
    assert "numba" in _modules_after(code)


def test_unknown_name_is_an_attribute_error() -> None:
    import oop
    import oop.punctuation

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        oop.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from oop import nope", {})
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        oop.punctuation.nope  # noqa: B018


def test_punctuation_names_resolve() -> None:
    import oop.punctuation as P

    for name in P.__all__:
        assert getattr(P, name) is not None, name
    assert P.parse_punctuation("bounded:5s+idle:1s") is not None


def _replay_probe(tmp_path: Path, window: str, out: str) -> list[str]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    n = 3000
    ts = np.arange(n, dtype=np.int64) * 10 - rng.integers(0, 500, n)
    pq.write_table(pa.table({"ts": ts, "key": rng.integers(0, 7, n), "v": rng.random(n)}),
                   tmp_path / "in.parquet")
    argv = ["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts", "--key", "key",
            "--window", window, "--agg", "count", "--agg", "sum:v", "--agg", "max:v",
            "--punctuation", "bounded:1s", "--out", out, "--quiet"]
    code = ("import contextlib, io, sys\nfrom oop.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main({argv!r}) == 0\n"
            "assert out.getvalue() or " + repr(out) + " != '-'\n")
    return _modules_after(code)


@pytest.mark.parametrize("window,out", [("tumbling:1s", "parts/"), ("sliding:2s,1s", "-"),
                                        ("tumbling:1s", "o.ndjson"), ("sliding:2s,1s", "o.arrow")])
def test_replay_never_imports_pandas(tmp_path: Path, window: str, out: str) -> None:
    target = out if out == "-" else str(tmp_path / out) + ("/" if out.endswith("/") else "")
    loaded = _replay_probe(tmp_path, window, target)
    assert "pandas" not in loaded and "numba" in loaded


def test_pandas_still_works_after_the_probe() -> None:
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from oop.io.pandas_probe import skip_pandas_probe\n"
        "assert skip_pandas_probe()\n"
        "a = pa.array(np.arange(4)); assert a.to_numpy(zero_copy_only=False).sum() == 6\n"
        "assert 'pandas' not in sys.modules\n"
        "df = pa.table({'x': a}).to_pandas()\n"
        "assert list(df['x']) == [0, 1, 2, 3]\n"
        "assert pa.Table.from_pandas(df).column('x').to_pylist() == [0, 1, 2, 3]\n"
        "assert not skip_pandas_probe()  # pandas is here now: nothing to do\n"
    )
    assert "pandas" in _modules_after(code)


def test_compile_notice_says_it_once_per_block() -> None:
    import io

    import numba as nb

    from oop.cli import COMPILE_NOTE, compile_notice

    @nb.njit  # not cached: compiles on first call in every process
    def inner(x):  # type: ignore[no-untyped-def]
        return x + 1

    @nb.njit
    def outer(x):  # type: ignore[no-untyped-def]
        return inner(x) * 2

    err = io.StringIO()
    with compile_notice(err):
        assert outer(1) == 4  # compiles outer and, nested, inner
        assert outer(2.5) == 7.0  # a new specialization: still one notice
    assert err.getvalue() == COMPILE_NOTE + "\n"
    err = io.StringIO()
    with compile_notice(err):
        assert outer(3) == 8  # compiled already: nothing to say
    assert err.getvalue() == ""


def test_replay_says_compiling_only_on_a_cold_cache(tmp_path: Path) -> None:
    """A first run in an empty numba cache says it compiles (once); the next run is silent."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from oop.cli import COMPILE_NOTE

    n = 500
    pq.write_table(pa.table({"ts": np.arange(n, dtype=np.int64) * 7, "v": np.ones(n)}),
                   tmp_path / "in.parquet")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
    argv = [sys.executable, "-m", "oop.cli", "replay", "--input", str(tmp_path / "in.parquet"),
            "--time", "ts", "--window", "tumbling:1s", "--agg", "count",
            "--punctuation", "bounded:1s", "--out", str(tmp_path / "o.csv"), "--quiet"]
    said = []
    for _ in range(2):
        r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        said.append(r.stderr.count(COMPILE_NOTE))
    assert said == [1, 0]
