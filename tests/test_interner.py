"""StringInterner (the compiled string/binary key component) == the plain-Python reference.

* ids == ``intern_reference`` (first appearance over the batches, bytes as the identity,
  0 for nulls) for string, large_string, binary, large_binary and string_view arrays,
  sliced arrays (non-zero offsets) included, across batches that grow every table;
* dictionary arrays: the same value gets the same id as in a plain array;
* both stores give those ids: the Python dict of the first ``SMALL_IDS`` values and the
  compiled table, and the move from one to the other mid-stream (``SMALL_IDS`` drawn small);
  a feed with few values never calls the compiled kernel;
* snapshot / restore continues with the same ids, from either store;
* KeyEncoder over string keys gives the same codes as over the same keys as integers.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings, strategies as st

from oop.window.interner import StringInterner, intern_reference
from oop.window.keys import KeyEncoder

TEXT = st.text(alphabet="ab\u00e9\U0001f600\x00", max_size=6)  # NUL bytes and multi-byte UTF-8
TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.string_view()]


@st.composite
def batches(draw):
    typ = draw(st.sampled_from(TYPES))
    out = []
    for _ in range(draw(st.integers(1, 5))):
        vals = draw(st.lists(st.one_of(st.none(), TEXT), max_size=60))
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            vals = [None if v is None else v.encode() for v in vals]
        arr = pa.array(vals, typ)
        lo = draw(st.integers(0, len(arr)))
        out.append(arr.slice(lo, draw(st.integers(0, len(arr) - lo))))  # non-zero offsets
    return out


@settings(max_examples=150)
@given(bs=batches(), small=st.sampled_from([0, 3, 256]))
def test_ids_equal_the_reference(bs, small):
    si = StringInterner()
    si.SMALL_IDS = small
    got = [si.intern(a).tolist() for a in bs]
    assert got == intern_reference(bs)
    assert si.n_ids == len({v for a in bs for v in a.to_pylist() if v is not None})


@pytest.mark.parametrize("small", [0, 256])
@pytest.mark.parametrize("typ", [pa.string(), pa.large_binary()])
def test_both_paths_and_the_switches_between_them_equal_the_reference(typ, small):
    """Batches of >= 1024 rows: few distinct values go through dictionary_encode first, many
    row by row for 15 batches, then a probe; ids are the same either way."""
    rng = np.random.default_rng(9)
    bs = []
    for i in range(40):
        card = 20 if (i // 10) % 2 == 0 else 50_000  # low, high, low, high cardinality
        ids = rng.integers(0, card, 2000) + (0 if card == 20 else 1000)
        vals = [None if rng.random() < 0.02 else f"v{x}" for x in ids]
        arr = pa.array([v if v is None or typ == pa.string() else v.encode() for v in vals], typ)
        bs.append(arr.slice(3, 1990))
    si = StringInterner()
    si.SMALL_IDS = small
    assert [si.intern(a).tolist() for a in bs] == intern_reference(bs)


def test_tables_grow_and_every_value_is_kept():
    """Past the initial 512 ids / 4 KB arena / 1024 slots: re-hashing keeps every id."""
    vals = [f"value-{i}-" + "x" * (i % 50) for i in range(20_000)]
    si = StringInterner()
    first = si.intern(pa.array(vals[:7000])).tolist()
    second = si.intern(pa.array(vals[::-1])).tolist()
    assert first == list(range(7000))
    assert second[::-1][:7000] == first  # the old ids survive the re-hashing
    assert second[::-1][7000:] == [7000 + 19_999 - i for i in range(7000, 20_000)]  # new: in order
    assert [si.value(i) for i in (0, 6999, 7000, 19_999)] == \
        [vals[i].encode() for i in (0, 6999, 19_999, 7000)]


@settings(max_examples=50)
@given(vals=st.lists(st.one_of(st.none(), TEXT), max_size=40))
def test_dictionary_arrays_map_to_the_plain_ids(vals):
    si = StringInterner()
    plain = si.intern(pa.array(vals, pa.string()))
    dic = si.intern(pa.array(vals, pa.string()).dictionary_encode())
    valid = np.array([v is not None for v in vals], bool)
    assert (plain[valid] == dic[valid]).all()


@pytest.mark.parametrize("small", [0, 3, 256])
def test_snapshot_restore_continues_with_the_same_ids(small):
    """``small`` 3: the snapshot is taken from the dict and the restored interner moves to the
    table at the next batch; 0: from the table; 256: dict throughout."""
    a, b = pa.array(["x", "yy", None, "x"]), pa.array(["zz", "yy", "w"])
    si = StringInterner()
    si.SMALL_IDS = small
    si.intern(a)
    snap = si.snapshot()
    assert (snap["hashes"] is None) == (small > 0)
    expected = si.intern(b).tolist()
    again = StringInterner()
    again.SMALL_IDS = small
    again.restore(snap)
    assert again.intern(b).tolist() == expected == [2, 1, 3]
    assert [again.value(i) for i in range(4)] == [b"x", b"yy", b"zz", b"w"]


def test_few_values_never_call_the_compiled_kernel(monkeypatch):
    """Up to SMALL_IDS distinct values the dict serves every batch (a first run compiles no
    interner kernel); the batch that passes it moves the values into the table, ids kept."""
    import oop.window.interner as mod

    calls = []
    kernel = mod._intern

    def spy(*a):
        calls.append(a[4] - a[3])  # rows asked
        return kernel(*a)

    monkeypatch.setattr(mod, "_intern", spy)
    rng = np.random.default_rng(3)
    bs = [pa.array([f"k{x}" for x in rng.integers(0, 200, 5000)]) for _ in range(4)]
    bs.append(pa.array([f"k{x}" for x in rng.integers(0, 400, 5000)]))  # passes 256
    si = StringInterner()
    got = [si.intern(a).tolist() for a in bs[:4]]
    assert calls == [] and si.n_ids == 200
    got.append(si.intern(bs[4]).tolist())
    assert got == intern_reference(bs)
    assert calls[0] == 200  # the dict's values, moved in id order
    assert si.value(0) == bs[0][0].as_py().encode() and si.n_ids == 400


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary()])
def test_key_encoder_codes_for_strings_equal_codes_for_the_same_keys_as_ints(typ):
    rng = np.random.default_rng(4)
    enc_s, enc_i = KeyEncoder(["k"]), KeyEncoder(["k"])
    for _ in range(6):
        ids = rng.integers(0, 3000, 5000)
        ids[rng.random(5000) < 0.05] = -1  # nulls
        s = [None if i < 0 else (f"k{i}" if typ != pa.binary() else f"k{i}".encode()) for i in ids]
        n = [None if i < 0 else int(i) for i in ids]
        cs = enc_s.encode(pa.record_batch([pa.array(s, typ)], names=["k"]))
        ci = enc_i.encode(pa.record_batch([pa.array(n, pa.int64())], names=["k"]))
        assert (cs == ci).all()
    assert enc_s.keys(np.arange(enc_s.n_codes))[0].to_pylist()[:3] == \
        [None if v is None else (f"k{v}" if typ != pa.binary() else f"k{v}".encode())
         for v in enc_i.keys(np.arange(3))[0].to_pylist()]


def test_bench_keys_runs_small(capsys, monkeypatch):
    """experiments/bench_keys.py stays alive (no timing asserted: speed is for the benchmark)."""
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "bench_keys.py"
    spec = importlib.util.spec_from_file_location("bench_keys", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(sys, "argv", ["bench_keys.py", "--rows", "3000", "--repeat", "0"])
    mod.main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:2] == ["distinct", "keys"] and len(lines) == 4


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(),
                                 pa.dictionary(pa.int32(), pa.string())])
@pytest.mark.parametrize("snapshot_at", [None, 1, 3])
def test_one_string_key_column_takes_the_interner_ids_as_codes_until_a_null(typ, snapshot_at):
    """The direct string path (interner ids = codes, no hash table) gives the codes the
    int-key encoder gives for the same keys, decodes them, survives snapshot/restore, and
    leaves for the hash table at the first null (batch 3) without renumbering."""
    rng = np.random.default_rng(7)
    enc_s, enc_i = KeyEncoder(["k"]), KeyEncoder(["k"])
    for b in range(6):
        ids = rng.integers(0, 2000, 3000)
        if b >= 3:
            ids[rng.random(3000) < 0.05] = -1  # nulls from batch 3 on
        vals = [None if i < 0 else f"k{i}" for i in ids]
        if typ == pa.binary():
            vals = [None if v is None else v.encode() for v in vals]
        arr = pa.array(vals, pa.string() if pa.types.is_dictionary(typ) else typ)
        if pa.types.is_dictionary(typ):  # with dictionary entries no row uses
            d = pa.array(["zz", *sorted(set(v for v in vals if v is not None)), "zy"])
            idx = pc.index_in(arr, value_set=d)
            arr = pa.DictionaryArray.from_arrays(idx, d)
        if b == snapshot_at:
            other = KeyEncoder(["k"])
            other.restore(enc_s.snapshot())
            enc_s = other
        cs = enc_s.encode(pa.record_batch([arr], names=["k"]))
        assert enc_s._sdirect == (b < 3 and not pa.types.is_dictionary(typ))
        ci = enc_i.encode(pa.record_batch([pa.array([None if i < 0 else int(i) for i in ids],
                                                    pa.int64())], names=["k"]))
        assert (cs == ci).all()
        enc_s._check()
    back = enc_s.keys(np.arange(enc_s.n_codes))[0]
    if pa.types.is_dictionary(back.type):
        back = back.cast(back.type.value_type)
    want = [None if v is None else f"k{v}" for v in enc_i.keys(np.arange(enc_i.n_codes))[0].to_pylist()]
    if typ == pa.binary():
        want = [None if v is None else v.encode() for v in want]
    assert back.to_pylist() == want


@settings(max_examples=200)
@given(data=st.binary(min_size=0, max_size=48), cuts=st.lists(st.integers(0, 48), min_size=2,
                                                              max_size=2))
def test_word_hash_and_compare_equal_the_byte_loops(data, cuts):
    """The interner's word loads (whole words, the overlapping last word, the masked word of a
    short string, the byte loop at the end of a buffer) == byte-by-byte hashing and ``==``."""
    from oop.window.interner import _hash_bytes, _hash_bytes_ref, _same_bytes

    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    s, e = sorted(min(c, len(data)) for c in cuts)
    assert _hash_bytes(buf, s, e) == _hash_bytes_ref(buf, s, e)
    for j in range(0, len(data) - (e - s) + 1):  # every same-length window of the buffer
        assert _same_bytes(buf, s, buf, j, e - s) == (data[s:e] == data[j:j + e - s])
    other = np.frombuffer(bytes(data[s:e]) + b"\x00" * 3, np.uint8)  # a copy, with slack
    assert _same_bytes(buf, s, other, 0, e - s)
