"""The checkpoint codec (oop.checkpoint.codec) and the plan fingerprint.

The codec round-trips every kind of value operator snapshots hold, refuses
what it does not know (naming the path in the state), and on decoding never
resolves classes outside ``oop.`` nor builds numpy arrays of Python objects
from raw bytes. The fingerprint tells queries apart, ignores batch sizes,
and is the same in another process.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import oop
from oop import agg
from oop.checkpoint import plan_fingerprint
from oop.errors import CheckpointError
from oop.window.kinds import Sliding, Tumbling

sys.path.insert(0, str(Path(__file__).parent))
from _ckpt_plans import PLANS, src, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# ---- the codec ---------------------------------------------------------------------------
def test_unsupported_type_is_named_with_its_path(tmp_path):
    from oop.checkpoint import encode

    class Opaque:
        pass

    with pytest.raises(CheckpointError, match=r"Opaque at states\['window'\]\['ring'\]\['x'\]"):
        encode({"states": {"window": {"ring": {"x": Opaque()}}}}, root="")


def test_codec_round_trip_of_every_supported_kind():
    import collections
    import json
    import math
    from fractions import Fraction

    from sortedcontainers import SortedDict, SortedList, SortedSet

    from oop.checkpoint import decode, encode
    from oop.stream.late import LatePolicy

    s = {"a": [1, 2**70, -2**64, 10**5000, 1.5, float("nan"), float("-inf"), True, None, "x",
               b"\x00\xff"],
         (1, "k"): (1, [2]), 3: {4, 5}, "fs": frozenset(["a"]),
         "d": collections.deque([1, 2], maxlen=5),
         "np": np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2], "f": np.float32(1.25),
         "u": np.uint64(2**64 - 1), "b": np.bool_(True), "dt": np.dtype("<f8"),
         "ts": np.array(["2020-01-01"], dtype="datetime64[ms]"),
         "obj": np.array([1, "a", None], dtype=object),
         "st": np.zeros(3, dtype=[("x", "<i8"), ("y", "<f4")]),
         "rb": pa.record_batch({"x": [1, 2], "s": ["a", None]}),
         "tb": pa.table({"x": pa.array([], pa.int64())}),
         "arr": pa.array(["a", "b", "a"]).dictionary_encode(),
         "ch": pa.chunked_array([[1], [2, 3]]), "sc": pa.scalar(5, pa.int16()),
         "sch": pa.schema([("a", pa.timestamp("ms"))]), "ty": pa.list_(pa.string()),
         "enum": LatePolicy.SIDE_OUTPUT, "sl": SortedList([3, 1]), "ss": SortedSet([2, 1]),
         "sd": SortedDict({2: "b", 1: "a"}), "fr": Fraction(1, 3), "p": oop.Punctuation("ts", 5),
         "gp": oop.GroupPunctuation("ts", pa.record_batch({"k": [1, 2]}), np.array([3, 4])),
         "jp": oop.JointPunctuation((("ts", 1), ("ts_right", 2))), "kind": Tumbling(50),
         "empty": np.zeros((0, 3)), "nested": [[np.arange(3)], {"q": ()}]}
    tree, arrays = encode(s)
    back = decode(json.loads(json.dumps(tree, allow_nan=False)),
                  {k: bytes(v) for k, v in arrays.items()})
    assert back.keys() == s.keys()
    for k, a in s.items():
        b = back[k]
        assert type(b) is type(a), k
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist(), k
            assert b.flags.writeable and b.flags.aligned, k
        elif k == "a":
            assert a[:5] == b[:5] and math.isnan(b[5]) and a[6:] == b[6:]
        elif k == "gp":
            assert a.keys.equals(b.keys) and a.values.tolist() == b.values.tolist()
        elif k == "nested":
            assert b[0][0].tolist() == [0, 1, 2] and b[1] == {"q": ()}
        elif hasattr(a, "equals"):
            assert a.equals(b), k
        else:
            assert a == b, k
    assert back["d"].maxlen == 5 and type(back[(1, "k")]) is tuple


@pytest.mark.parametrize("node", [
    {"$": "enum", "cls": "os.system", "v": 1},
    {"$": "obj", "cls": "subprocess.Popen", "v": {}},
    {"$": "obj", "cls": "oop.os.system", "v": {}},
    {"$": "obj", "cls": "oop.plan.executor.Executor", "v": {}},
    {"$": "enum", "cls": "oop.plan.executor.Checkpoint", "v": 1},
    {"$": "ndarray", "dtype": "O", "shape": [1], "ref": "a0"},
    {"$": "ndarray", "dtype": [["x", "O"]], "shape": [1], "ref": "a0"},
    {"$": "reg", "t": "builtins.eval", "v": "1"},
    {"$": "nope"},
    {"$": "arrow", "k": "batch", "ref": "a0"},
])
def test_decode_refuses_what_could_run_code_or_forge_pointers(node):
    from oop.checkpoint import decode

    with pytest.raises(CheckpointError):
        decode(node, {"a0": b"\0" * 8})


def _same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b


_keys = st.one_of(st.integers(-2**70, 2**70), st.text(max_size=5), st.booleans(),
                  st.tuples(st.integers(), st.text(max_size=3)))
_leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**80, 2**80), st.floats(),
                    st.text(max_size=8), st.binary(max_size=8),
                    st.builds(lambda v, dt: np.asarray(v).astype(dt),
                              st.lists(st.integers(-100, 100), max_size=6),
                              st.sampled_from(["<i8", "<i4", ">i2", "<f8", "u1", "?", "<m8[ms]"])))
_states = st.recursive(_leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.tuples(kids, kids), st.dictionaries(_keys, kids, max_size=4),
    st.frozensets(_keys, max_size=4)), max_leaves=25)


@given(_states)
def test_codec_round_trips_random_states(state):
    import json

    from oop.checkpoint import decode, encode

    tree, arrays = encode(state)
    back = decode(json.loads(json.dumps(tree, allow_nan=False)),
                  {k: bytes(v) for k, v in arrays.items()})
    assert _same_value(state, back)


# ---- fingerprint ---------------------------------------------------------------------
def _fp(make) -> str:
    ex, _ = make().executor()
    return plan_fingerprint(ex)


def test_fingerprint_same_query_same_batch_size_does_not_matter():
    t = table()

    def q(bs=16, size=50, delay=20, aggs=(agg.count(), agg.sum("val")), sel=True, kind=None):
        s = src(t, batch_size=bs, delay=delay)
        if sel:
            s = s.select(pc.field("val") > 5)
        return s.window(kind or Tumbling(size), list(aggs), by="key")

    base = _fp(q)
    assert _fp(q) == base
    assert _fp(lambda: q(bs=64)) == base
    assert _fp(lambda: q(size=60)) != base
    assert _fp(lambda: q(kind=Sliding(50, 10))) != base
    assert _fp(lambda: q(delay=30)) != base
    assert _fp(lambda: q(sel=False)) != base
    assert _fp(lambda: q(aggs=(agg.count(), agg.max("val")))) != base
    assert _fp(lambda: q(aggs=(agg.count(), agg.sum("fval")))) != base
    other_pred = lambda: src(t).select(pc.field("val") > 6).window(  # noqa: E731
        Tumbling(50), [agg.count(), agg.sum("val")], by="key")
    assert _fp(other_pred) != base


def test_fingerprint_of_callables_follows_their_code():
    t = table()

    def with_fn(k):
        return src(t).select(lambda b: pc.greater(b.column("val"), k))

    assert _fp(lambda: with_fn(5)) == _fp(lambda: with_fn(5))
    assert _fp(lambda: with_fn(5)) != _fp(lambda: with_fn(6))
    assert _fp(lambda: src(t, "x")) != _fp(lambda: src(t, "y"))
    assert _fp(lambda: oop.from_arrow(t, time="ts", unit="ms")) != \
        _fp(lambda: oop.from_arrow(t, time="ts", unit="us"))
    assert _fp(lambda: oop.from_arrow(t, time="ts", late="drop")) != \
        _fp(lambda: oop.from_arrow(t, time="ts", late="side"))


_FINGERPRINTS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from _ckpt_plans import PLANS, table
    from oop.checkpoint import plan_fingerprint
    t = table()
    print(json.dumps({n: plan_fingerprint(mk(t).executor()[0]) for n, mk in PLANS.items()}))
""")


def test_fingerprint_is_the_same_in_another_process():
    import json

    t = table()
    here = {n: plan_fingerprint(mk(t).executor()[0]) for n, mk in PLANS.items()}
    assert len(set(here.values())) == len(here)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    p = subprocess.run([sys.executable, "-c", _FINGERPRINTS, str(Path(__file__).parent)],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == here
