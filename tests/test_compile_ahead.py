"""Kernels compiled ahead on another core (oop.compile_ahead): the helper compiles what it is
asked for into numba's on-disk cache and the asking process then loads it instead of
compiling; a helper that dies leaves the kernel to the asking process; a cached kernel
starts no helper; the Paned-WID emission is asked for with exactly the argument types it
is later called with. Helper runs use fresh processes with a cache folder of their own."""

from __future__ import annotations

import json
import os
import pickle
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import oop
from oop import compile_ahead
from oop.kernel_cache import literal_twins
from oop.limits import usable_cores
from oop.window import Sliding, Tumbling, WindowAggregate, agg
from oop.window import paned_kernels as PK

_TINY = '''
import numba as nb

@nb.njit(cache=True)
def add(a, b):
    return a + b


@nb.njit(cache=True)
def mul(a, b):
    return a * b
'''

_TWO = '''
import json, time
from oop import compile_ahead as ca
import tiny
asked = [ca.request(tiny.add, (1, 2.5)), ca.request(tiny.mul, (2, 3.5))]
job_add, job_mul = list(ca._helper.state)
deadline = time.time() + 120
while {ca._helper.state.get(j) for j in (job_add, job_mul)} == {"asked"}:
    assert time.time() < deadline
    time.sleep(0.02)
first = [j[1] for j in (job_add, job_mul) if ca._helper.state.get(j) != "asked"]
ca.wait(tiny.add)  # asked first, needed first: the helper is busy with the other one
took = ca._helper.state.get(job_add)
ca.wait(tiny.mul)
values = [tiny.add(1, 2.5), tiny.mul(2, 3.5)]
print(json.dumps({"asked": asked, "first": first, "took": took, "values": values,
                  "waited": ca.waited_s(),
                  "add": [sum(tiny.add.stats.cache_hits.values()),
                          sum(tiny.add.stats.cache_misses.values())],
                  "mul": [sum(tiny.mul.stats.cache_hits.values()),
                          sum(tiny.mul.stats.cache_misses.values())]}))
'''

_DRIVER = '''
import json, sys, time
from oop import compile_ahead as ca
import tiny
asked = ca.request(tiny.add, (1, 2.5))
if asked and sys.argv[1] == "kill":
    ca._helper.proc.kill()
elif asked:  # let the helper start it (a job it has not started is taken back)
    job = next(iter(ca._helper.state))
    deadline = time.time() + 120
    while ca._helper.state.get(job) == "asked" and time.time() < deadline:
        time.sleep(0.02)
ca.wait(tiny.add)
value = tiny.add(1, 2.5)
print(json.dumps({"asked": asked, "helper": ca._helper is not None, "value": value,
                  "hits": sum(tiny.add.stats.cache_hits.values()),
                  "misses": sum(tiny.add.stats.cache_misses.values())}))
'''


def _drive(tmp_path: Path, mode: str, cache: str | None = None, **env: str) -> dict[str, Any]:
    """Run the driver in ``tmp_path`` with numba's cache in ``cache`` (default: an absolute
    path to ``tmp_path/cache``)."""
    (tmp_path / "tiny.py").write_text(_TINY)
    (tmp_path / "driver.py").write_text(_TWO if mode == "two" else _DRIVER)
    full = dict(os.environ)
    full.pop(compile_ahead.ENV, None)
    full.update(NUMBA_CACHE_DIR=cache or str(tmp_path / "cache"),
                PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
                **env)
    out = subprocess.run([sys.executable, str(tmp_path / "driver.py"), mode], env=full,
                         cwd=tmp_path, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def two_cores() -> None:
    if usable_cores() < 2:
        pytest.skip("the helper only runs where a process may use two cores")


def test_the_helper_compiles_and_this_process_loads_it(tmp_path: Path, two_cores: None) -> None:
    first = _drive(tmp_path, "plain")
    assert first == {"asked": True, "helper": True, "value": 3.5, "hits": 1, "misses": 0}
    # now cached: asking again starts no helper, and the call loads it
    again = _drive(tmp_path, "plain")
    assert again == {"asked": False, "helper": False, "value": 3.5, "hits": 1, "misses": 0}


def test_a_relative_cache_folder_is_the_same_folder_for_the_helper(tmp_path: Path,
                                                                   two_cores: None) -> None:
    # the helper starts in the package's folder; numba's cache must still be tmp_path/cache
    first = _drive(tmp_path, "plain", cache="cache")
    assert (first["asked"], first["hits"], first["misses"]) == (True, 1, 0)
    assert list((tmp_path / "cache").rglob("*.nbi"))


def test_a_helper_that_dies_leaves_the_kernel_to_this_process(tmp_path: Path,
                                                              two_cores: None) -> None:
    out = _drive(tmp_path, "kill")
    assert out["asked"] and out["value"] == 3.5
    # killed before it could answer: compiled here (a kill after its answer is a cache hit)
    assert out["hits"] + out["misses"] == 1


def test_the_helper_serves_the_last_asked_first_and_this_process_takes_the_first(
        tmp_path: Path, two_cores: None) -> None:
    out = _drive(tmp_path, "two")
    assert out["asked"] == [True, True] and out["values"] == [3.5, 7.0]
    assert out["first"] == ["mul"]  # the helper began with the last asked
    assert out["took"] == "taken" and out["add"] == [0, 1]  # compiled here
    assert out["mul"] == [1, 0]  # compiled by the helper, loaded here
    assert out["waited"] > 0  # the run waited for the started one (and not for the other)


def test_switched_off_it_asks_nothing(tmp_path: Path) -> None:
    out = _drive(tmp_path, "plain", OOP_COMPILE_AHEAD="0")
    assert out == {"asked": False, "helper": False, "value": 3.5, "hits": 0, "misses": 1}


def test_enabled_follows_the_variable_and_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_ahead, "usable_cores", lambda: 2)
    monkeypatch.delenv(compile_ahead.ENV, raising=False)
    assert compile_ahead.enabled()
    monkeypatch.setenv(compile_ahead.ENV, "0")
    assert not compile_ahead.enabled()
    monkeypatch.setenv(compile_ahead.ENV, "1")
    monkeypatch.setattr(compile_ahead, "usable_cores", lambda: 1)
    assert not compile_ahead.enabled()


# ---- the Paned-WID emission: asked for with the types it is called with ----------------

def _feed(key: str) -> pa.Table:
    rng = np.random.default_rng(3)
    n = 3000
    ts = np.arange(n) * 7 - rng.integers(0, 900, n)
    keys = rng.integers(0, 5, n)
    cols: dict[str, Any] = {"ts": ts, "v": rng.integers(0, 100, n), "x": rng.random(n)}
    if key == "str":
        cols["k"] = pa.array([f"k{k}" for k in keys])
    elif key == "int":
        cols["k"] = keys.astype(np.int64)
    else:
        cols["k"] = keys.astype(np.int64)
        cols["k2"] = pa.array([f"s{k % 2}" for k in keys])
    return pa.table(cols)


_SHAPES = {
    "count+int sum, string key": ("str", [agg.count(), agg.sum("v")], 1),
    "count+int sum, int64 key (key values written by the kernel)":
        ("int", [agg.count(), agg.sum("v")], 1),
    "count+float mean+std, two key columns": ("two", [agg.count(), agg.mean("x"),
                                                      agg.std("x")], 1),
    "count alone, int64 key": ("int", [agg.count()], 1),
    "median, distinct, heavy hitters (row count alone, then one kernel each)":
        ("str", [agg.median("x"), agg.distinct("v"), agg.heavy_hitters("v", 2)], 4),
    "count, 0.9-quantile of an int column": ("int", [agg.count(), agg.quantile("v", 0.9)], 2),
    "min (select lanes: not asked)": ("str", [agg.count(), agg.min("v")], 0),
}

#: the emission kernels, wrapped to record the types each is called with
_EMISSION = ("paned_emit", "paned_emit_fused", "paned_emit_ints", "paned_emit_rows",
             "paned_emit_hash", "paned_quantiles", "paned_distinct", "paned_heavy")


class _Spy:
    def __init__(self, real: Any, calls: list) -> None:
        self.real, self.calls = real, calls

    def __call__(self, *args: Any) -> Any:
        self.calls.append((self.real, compile_ahead._signature(self.real, args)))
        return self.real(*args)


def _asked_and_called(monkeypatch: pytest.MonkeyPatch
                      ) -> tuple[list[tuple[Any, tuple]], list[tuple[Any, tuple]]]:
    """Two lists that fill as the run goes: the (kernel, signature) pairs asked of the helper
    (which is asked nothing: :func:`~oop.compile_ahead.request` is replaced) and those of the
    emission kernels' calls."""
    requested: list[tuple[Any, tuple]] = []
    called: list[tuple[Any, tuple]] = []

    def request(kernel: Any, args: tuple, callee: Any = None) -> bool:
        real = getattr(kernel, "real", kernel)
        requested.append((real, compile_ahead._signature(real, args)))
        return False

    monkeypatch.setattr(compile_ahead, "request", request)
    for name in _EMISSION:
        monkeypatch.setattr(PK, name, _Spy(getattr(PK, name), called))
    return requested, called


def _asking_nothing(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The kernels asked of the helper, filled as the run goes (the helper is asked nothing:
    :func:`~oop.compile_ahead.request` is replaced)."""
    requested: list[Any] = []
    monkeypatch.setattr(compile_ahead, "request",
                        lambda kernel, args, callee=None: requested.append(kernel) or False)
    return requested


@pytest.mark.parametrize("shape", list(_SHAPES))
def test_the_emission_is_asked_for_with_the_types_it_is_called_with(
        shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel asked for is then called with exactly those types, in the order asked."""
    key, aggs, n_asked = _SHAPES[shape]
    requested, called = _asked_and_called(monkeypatch)
    by = ["k", "k2"] if key == "two" else "k"
    s = oop.from_arrow(_feed(key), time="ts", unit="ms", punctuation=oop.BoundedDelay("1s"))
    res = s.window(Sliding("4s", "1s"), aggs, by=by, method="paned").run()
    assert res.table.num_rows > 0
    assert len(requested) == n_asked
    assert requested == list(dict.fromkeys(called))[:n_asked]
    assert set(called) == set(requested) or n_asked == 0


def test_a_tumbling_window_of_the_automatic_method_asks_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    requested = _asking_nothing(monkeypatch)
    s = oop.from_arrow(_feed("str"), time="ts", unit="ms", punctuation=oop.BoundedDelay("1s"))
    s.window(Tumbling("1s"), [agg.count()], by="k").run()
    assert requested == []  # WID: no pane emission to compile


@pytest.mark.parametrize("every, method", [(3000, "wid"), (1, "paned")])
def test_the_automatic_method_asks_only_when_it_picks_panes(
        every: int, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sliding window of the automatic method asks on the first batch, once the cost model
    picked Paned-WID: a feed it runs as WID (fewer tuples per slide than groups per pane:
    here one tuple every 3 s) starts no helper."""
    requested = _asking_nothing(monkeypatch)
    chosen: list[str] = []
    real = WindowAggregate._set_method
    monkeypatch.setattr(WindowAggregate, "_set_method",
                        lambda self, m, info, *a: chosen.append(m) or real(self, m, info, *a))
    feed = _feed("str")
    if every > 1:
        feed = feed.slice(0, 20).set_column(0, "ts", pa.array(np.arange(20) * every))
    s = oop.from_arrow(feed, time="ts", unit="ms", punctuation=oop.BoundedDelay("1s"))
    s.window(Sliding("4s", "1s"), [agg.count(), agg.sum("v")], by="k").run()
    assert chosen == [method]
    assert len(requested) == (1 if method == "paned" else 0)


@pytest.mark.parametrize("keys, layout", [(100_000, "hash"), (50, "dense")])
def test_the_first_batch_asks_for_the_emission_of_the_cell_store_it_gets(
        keys: int, layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The automatic method and layout ask, on the first batch, for the emission kernel of
    the store that batch gets: sparse keys (a pane holds ~1 % of 100k keys) the hash cells'
    (:func:`~oop.window.paned_kernels.paned_emit_hash`), dense keys the ring's; and the
    kernel asked for is the one then called, with the same types."""
    requested, called = _asked_and_called(monkeypatch)
    rng = np.random.default_rng(5)
    n = 30_000
    feed = pa.table({"ts": np.arange(n) - rng.integers(0, 500, n),
                     "k": rng.integers(0, keys, n), "x": rng.random(n)})
    s = oop.from_arrow(feed, time="ts", unit="ms", punctuation=oop.BoundedDelay("1s"))
    res = s.window(Sliding("10s", "1s"), [agg.count(), agg.sum("x")], by="k").run()
    assert res.table.num_rows > 0
    emission = "paned_emit_hash" if layout == "hash" else "paned_emit_fused"
    assert [k.py_func.__name__ for k, _ in requested] == [emission]
    assert {k.py_func.__name__ for k, _ in called} == {emission}  # the store it got
    assert requested == list(dict.fromkeys(called))


_FIRST_RUN = '''
import json, sys, numpy as np, pyarrow as pa
import oop
from oop.window import Sliding, agg
import oop.window.paned_kernels as PK
rng = np.random.default_rng(0)
n = $n
feed = pa.table({"ts": np.arange(n) * $every - rng.integers(0, 2_000, n),
                 "src": $keys, "len": rng.integers(40, 1_500, n)})
s = oop.from_arrow(feed, time="ts", unit="ms", punctuation=oop.BoundedDelay("2s"))
res = s.window(Sliding($window), [agg.count(), agg.sum("len")], by="src").run()
stats = [PK.$kernel.stats]
print(json.dumps({"rows": res.table.to_pylist(),
                  "hits": sum(sum(x.cache_hits.values()) for x in stats),
                  "misses": sum(sum(x.cache_misses.values()) for x in stats),
                  "callee_misses": sum(PK.$callee.stats.cache_misses.values())}))
'''
#: the README's kind of query (three keys: the dense ring), and sparse keys (hash cells)
_FIRST_RUNS = {
    "dense": dict(n=4000, every=10, keys='rng.choice(["a", "b", "c"], n)', window='"4s", "2s"',
                  kernel="emit_kernel(2, 0)", callee="_add_sub_panes"),
    "hash": dict(n=60_000, every=1, keys="rng.integers(0, 1_000_000, n)", window='"10s", "1s"',
                 kernel="paned_emit_hash", callee="_sort_head"),
}


@pytest.mark.parametrize("layout", list(_FIRST_RUNS))
def test_a_first_run_loads_the_emission_the_helper_compiled(layout: str, tmp_path: Path,
                                                            two_cores: None) -> None:
    """A first run (empty cache): the emission kernel is a cache hit in the running process
    (the helper compiled it), and the rows are those of a run in this process (warm
    kernels). The README's kind of query (a dense ring), and sparse keys (hash cells)."""
    script = string.Template(_FIRST_RUN).substitute(_FIRST_RUNS[layout])
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(compile_ahead.ENV, None)
    out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["hits"], got["misses"]) == (1, 0)
    # the emission's callee was compiled here, before the helper was asked, and the
    # helper loaded it: one specialization in the cache (a second would mean the
    # signature compiled here was not the one the emission kernel calls it with)
    callee = _FIRST_RUNS[layout]["callee"]
    assert got["callee_misses"] == 1
    assert len(list((tmp_path / "cache").rglob(f"*{callee}*.nbc"))) == 1
    assert literal_twins(tmp_path / "cache") == []
    ns: dict[str, Any] = {}
    exec(script.replace("print(json.dumps(", "_ = (("), ns)  # the same query, here
    assert got["rows"] == ns["res"].table.to_pylist()


def _index(path: Path, sigs: list[str]) -> None:
    """A numba cache index in numba 0.6x's layout: a pickled version, then the pickled
    (stamp, overloads), each overload keyed by (signature, target, ...)."""
    with open(path, "wb") as f:
        pickle.dump("0.6x", f)
        f.write(pickle.dumps(((0.0, 0), {(sig, "cpu", None): f"{i}.nbc"
                                          for i, sig in enumerate(sigs)})))


def test_literal_twins_names_a_kernel_compiled_for_a_literal_and_its_type(
        tmp_path: Path) -> None:
    _index(tmp_path / "k.twin-1.py311.nbi", ["(Literal[int](0), float64)", "(int64, float64)"])
    _index(tmp_path / "k.two_types-2.py311.nbi", ["(int64, float64)", "(int32, float64)"])
    _index(tmp_path / "k.literal_only-3.py311.nbi", ["(Literal[int](0), float64)"])
    assert literal_twins(tmp_path) == ["k.twin-1.py311.nbi"]


def test_a_revising_window_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    requested = _asking_nothing(monkeypatch)
    s = oop.from_arrow(_feed("str"), time="ts", unit="ms", punctuation=oop.BoundedDelay("1s"))
    res = s.window(Sliding("4s", "1s"), [agg.count()], by="k", method="paned", late="update",
                   allowed_lateness="1s").run()
    assert res.table.num_rows > 0 and requested == []  # revisions emit window by window


def test_the_commands_say_they_compile_when_only_the_helper_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose other kernels are cached compiles nothing itself but waits for the
    helper: the commands' note is said then too, once."""
    import io

    from oop.cli import COMPILE_NOTE, compile_notice
    from oop.window import kernels as K

    sent: list[tuple] = []

    class _Fake:
        def send(self, job: tuple) -> None:
            sent.append(job)

    monkeypatch.setattr(compile_ahead, "enabled", lambda: True)
    monkeypatch.setattr(compile_ahead, "_cached", lambda kernel, sig: False)
    monkeypatch.setattr(compile_ahead, "_the_helper", lambda: _Fake())
    err = io.StringIO()
    with compile_notice(err):
        assert compile_ahead.request(PK.pane_ids, (np.zeros(3, np.int64), 0, 1))
        assert compile_ahead.request(K.upd_sum, (np.zeros(1, np.int64),) * 4)
    assert err.getvalue().count(COMPILE_NOTE) == 1 and len(sent) == 2
    assert compile_ahead.request(PK.pane_ids, (np.zeros(3, np.int64), 0, 1))
    assert err.getvalue().count(COMPILE_NOTE) == 1  # outside the block: nothing said


def test_a_job_that_cannot_be_sent_is_left_to_the_run() -> None:
    """A signature that does not pickle neither fails the run nor makes it wait."""
    helper = compile_ahead._Helper()
    try:
        job = ("oop.window.paned_kernels", "pane_ids", (lambda: 0,))
        helper.send(job)
        assert helper.state[job] == "taken"
        helper.take("oop.window.paned_kernels", "pane_ids")  # returns at once
        ok = ("oop.window.paned_kernels", "pane_ids", ())  # the pipe still works after it
        helper.send(ok)
        assert helper.state[ok] in ("asked", "started", "done")
    finally:
        helper.close()
    assert helper.proc.returncode is not None  # stopped


@pytest.mark.parametrize("threads,asks", [("1", False), ("2", True)])
def test_replay_with_one_thread_keeps_its_compiling_to_one_core(
        threads: str, asks: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    from oop.cli import main

    sent: list[tuple] = []

    class _Fake:
        def send(self, job: tuple) -> None:
            sent.append(job)

    monkeypatch.setattr(compile_ahead, "_allowed", [True])
    monkeypatch.setattr(compile_ahead, "usable_cores", lambda: 2)
    monkeypatch.setattr(compile_ahead, "_cached", lambda kernel, sig: False)
    monkeypatch.setattr(compile_ahead, "_the_helper", lambda: _Fake())
    pq.write_table(_feed("str"), tmp_path / "in.parquet")
    rc = main(["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts",
               "--time-unit", "ms", "--key", "k", "--punctuation", "bounded:1s",
               "--window", "sliding:4s,1s", "--agg", "count", "--out",
               str(tmp_path / "out.parquet"), "--quiet", "--threads", threads])
    assert rc == 0 and (tmp_path / "out.parquet").exists()
    assert bool(sent) == asks


def test_metrics_count_this_runs_wait_for_the_helper_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``compile_wait_s`` is the run's own wait: waits of earlier runs in the same process
    (here 5 s, never growing) do not count."""
    import pyarrow.parquet as pq

    from oop.cli import main

    monkeypatch.setattr(compile_ahead, "waited_s", lambda: 5.0)
    pq.write_table(_feed("str"), tmp_path / "in.parquet")
    rc = main(["replay", "--input", str(tmp_path / "in.parquet"), "--time", "ts",
               "--time-unit", "ms", "--key", "k", "--punctuation", "bounded:1s",
               "--window", "sliding:4s,1s", "--agg", "count", "--out",
               str(tmp_path / "out.parquet"), "--quiet", "--metrics", str(tmp_path / "m.json")])
    assert rc == 0
    assert json.loads((tmp_path / "m.json").read_text())["compile_wait_s"] == 0.0
