"""pyarrow.compute loaded on first use (oop.io.compute_deferral), in fresh processes: the
import binds a stand-in, the first attribute loads the real module, both then answer the
same objects; an integer-key replay never loads it, and its output is unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

_PROBE = """
import sys, threading
from oop.io.compute_deferral import defer_arrow_compute
deferred = defer_arrow_compute()
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import compute as pc2
before = "pyarrow._compute" in sys.modules
results = []
def first_use():
    results.append(pc.sum(pa.array([1, 2, 3])).as_py())
threads = [threading.Thread(target=first_use) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
after = "pyarrow._compute" in sys.modules
real = sys.modules["pyarrow.compute"]
from pyarrow.compute import field
same = pc.cast is real.cast and pc2 is pc and field is real.field and pa.compute is real
cast = pa.array([1, 300]).cast(pa.int16()).type
print(deferred, before, results, after, same, cast, defer_arrow_compute(), sep="|")
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", code, *args], check=True,
                          capture_output=True, text=True, env=env)


def test_stand_in_loads_on_first_use() -> None:
    out = _run(_PROBE).stdout.strip().split("|")
    assert out[0] == "True" and out[1] == "False"  # deferred; the import loaded nothing
    assert out[2] == "[6, 6, 6, 6]"  # four threads racing the first use all computed
    assert out[3:6] == ["True", "True", "int16"]  # loaded once, same objects, casts work
    assert out[6] == "False"  # a second call: already loaded, nothing to defer


_REPLAY = """
import sys
from oop.cli import main
rc = main(sys.argv[1:])
print(rc, "pyarrow._compute" in sys.modules)
"""


def test_integer_key_replay_never_loads_compute(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"ts": pa.array([5, 1200, 300, 2500, 1999], pa.int64()),
                             "k": pa.array([1, 2, 1, 1, 2], pa.int16()),
                             "v": [1.0, 2.0, 3.0, 4.0, 5.0]}), src)
    out = tmp_path / "out.parquet"
    p = _run(_REPLAY, "replay", "--input", str(src), "--time", "ts", "--key", "k",
             "--window", "tumbling:1s", "--agg", "count", "--agg", "sum:v",
             "--punctuation", "bounded:5s", "--out", str(out), "--quiet", "--threads", "1")
    assert p.stdout.split() == ["0", "False"]
    t = pq.read_table(out)
    assert t.schema.field("k").type == pa.int16()  # the key keeps its type without a cast
    got = sorted(zip(t["k"].to_pylist(), t["window_start"].to_pylist(),
                     t["count"].to_pylist(), t["sum_v"].to_pylist()))
    assert got == [(1, 0, 2, 4.0), (1, 2000, 1, 4.0), (2, 1000, 2, 7.0)]
