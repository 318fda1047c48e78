"""A safe encoding of operator snapshots: a tagged JSON tree plus binary arrays.

:func:`encode` turns a snapshot (nested dicts, lists, tuples, sets, scalars,
numpy arrays, Arrow data, a few known classes) into ``(tree, arrays)``:
``tree`` is JSON-serializable, ``arrays`` maps a reference to raw bytes
(numpy data, Arrow IPC streams). :func:`decode` rebuilds the snapshot.

Decoding never unpickles and never calls a constructor chosen by the data,
except through the explicit registry (:func:`register`) and, for plain
dataclasses defined under ``oop.``, ``object.__new__`` plus field
assignment. Enums are resolved by name only from ``oop.`` modules. Numpy
arrays with object dtype are stored elementwise, never as raw pointers.

Tree nodes: JSON ``null``/bools/strings/ints/finite floats stand for
themselves, a JSON list is a Python list, and a JSON object is a tagged node
``{"$": tag, ...}``. Shared references inside a snapshot are not preserved
(each occurrence decodes to its own copy).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import enum
import math
from typing import Any

import numpy as np
import pyarrow as pa

from oop.checkpoint.registry import (BY_CLASS, BY_TAG, Attr, StatePath, format_path, qualname,
                                     register, register_builtins, resolve_oop_class, slot_names)
from oop.errors import CheckpointError

__all__ = ["encode", "decode", "register", "format_path"]

#: ints beyond this magnitude are stored as hex text (exact, and not subject to the
#: int/str digit limit nor to JSON readers that parse numbers as doubles)
_SAFE_INT = 2**53

_Tree = Any
_Arrays = dict[str, Any]


# ---- encoding -----------------------------------------------------------------------
def _dtype_tree(dt: np.dtype, path: StatePath) -> Any:
    if dt.hasobject:
        raise CheckpointError(f"numpy dtype {dt} at {format_path(path)} holds Python objects")
    return dt.descr if dt.fields is not None else dt.str


def _ipc(obj: pa.RecordBatch | pa.Table) -> memoryview:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, obj.schema) as w:
        w.write(obj)
    return memoryview(sink.getvalue())


class _Encoder:
    def __init__(self) -> None:
        self.arrays: _Arrays = {}
        self._stack: set[int] = set()

    def blob(self, data: Any) -> str:
        ref = f"a{len(self.arrays)}"
        self.arrays[ref] = data
        return ref

    def enc(self, x: Any, path: StatePath) -> _Tree:  # noqa: C901 - one dispatch on type
        t = type(x)
        if x is None or t is bool or t is str:
            return x
        if t is int:
            return x if -_SAFE_INT <= x <= _SAFE_INT else {"$": "int", "v": hex(x)}
        if t is float:
            return x if math.isfinite(x) else {"$": "float", "v": repr(x)}
        if t is list or t is tuple or t is set or t is frozenset or t is dict \
                or t is collections.deque:
            if id(x) in self._stack:
                raise CheckpointError(f"the state refers to itself at {format_path(path)}")
            self._stack.add(id(x))
            try:
                return self._container(x, t, path)
            finally:
                self._stack.discard(id(x))
        if isinstance(x, np.ndarray):
            return self._ndarray(x, path)
        if isinstance(x, np.generic):
            dt = x.dtype
            if dt.hasobject:
                return self.enc(x.item(), path)
            return {"$": "npscalar", "dtype": _dtype_tree(dt, path),
                    "b": base64.b64encode(np.asarray(x).tobytes()).decode()}
        if isinstance(x, np.dtype):
            return {"$": "dtype", "v": _dtype_tree(x, path)}
        if t is bytes:
            return {"$": "bytes", "v": base64.b64encode(x).decode()}
        arrow = self._arrow(x)
        if arrow is not None:
            return arrow
        e = BY_CLASS.get(t)
        if e is not None:
            return {"$": "reg", "t": e.tag, "v": self.enc(e.to_tree(x), (path, Attr(e.tag)))}
        if isinstance(x, enum.Enum):
            if not t.__module__.startswith("oop."):
                raise CheckpointError(f"enum {qualname(t)} at {format_path(path)} is not an oop "
                                      "enum; register it with oop.checkpoint.codec.register")
            return {"$": "enum", "cls": qualname(t), "v": self.enc(x.value, path)}
        if dataclasses.is_dataclass(x) and t.__module__.startswith("oop."):
            return self._dataclass(x, t, path)
        raise CheckpointError(
            f"cannot checkpoint a {qualname(t)} at {format_path(path)}; make the operator's "
            "snapshot() return plain data or register the type with "
            "oop.checkpoint.codec.register"
        )

    def _container(self, x: Any, t: type, path: StatePath) -> _Tree:
        if t is list:
            return [self.enc(v, (path, i)) for i, v in enumerate(x)]
        if t is tuple:
            return {"$": "tuple", "v": [self.enc(v, (path, i)) for i, v in enumerate(x)]}
        if t is dict:
            if all(type(k) is str for k in x):
                return {"$": "dict", "v": {k: self.enc(v, (path, k)) for k, v in x.items()}}
            return {"$": "pdict", "v": [[self.enc(k, (path, k)), self.enc(v, (path, k))]
                                        for k, v in x.items()]}
        if t is collections.deque:
            return {"$": "deque", "maxlen": x.maxlen,
                    "v": [self.enc(v, (path, i)) for i, v in enumerate(x)]}
        items = list(x)
        try:
            items.sort()
        except TypeError:
            pass
        return {"$": t.__name__, "v": [self.enc(v, (path, i)) for i, v in enumerate(items)]}

    def _ndarray(self, a: np.ndarray, path: StatePath) -> _Tree:
        if a.dtype.hasobject:
            if a.dtype.fields is not None:
                raise CheckpointError(f"structured numpy array with object fields at "
                                      f"{format_path(path)} cannot be checkpointed")
            flat = a.ravel(order="C")
            return {"$": "objarray", "shape": list(a.shape),
                    "v": [self.enc(v, (path, i)) for i, v in enumerate(flat.tolist())]}
        c = np.ascontiguousarray(a)
        return {"$": "ndarray", "dtype": _dtype_tree(a.dtype, path), "shape": list(a.shape),
                "ref": self.blob(memoryview(c.reshape(-1).view(np.uint8)) if c.size else b"")}

    def _arrow(self, x: Any) -> _Tree | None:
        if isinstance(x, pa.RecordBatch):
            return {"$": "arrow", "k": "batch", "ref": self.blob(_ipc(x))}
        if isinstance(x, pa.Table):
            return {"$": "arrow", "k": "table", "ref": self.blob(_ipc(x))}
        if isinstance(x, pa.ChunkedArray):
            return {"$": "arrow", "k": "chunked",
                    "ref": self.blob(_ipc(pa.table({"c": x})))}
        if isinstance(x, pa.Array):
            return {"$": "arrow", "k": "array",
                    "ref": self.blob(_ipc(pa.record_batch([x], names=["c"])))}
        if isinstance(x, pa.Scalar):
            one = pa.record_batch([pa.array([x], type=x.type)], names=["c"])
            return {"$": "arrow", "k": "scalar", "ref": self.blob(_ipc(one))}
        if isinstance(x, pa.Schema):
            return {"$": "arrow", "k": "schema", "ref": self.blob(_ipc(x.empty_table()))}
        if isinstance(x, pa.Field):
            empty = pa.schema([x]).empty_table()
            return {"$": "arrow", "k": "field", "ref": self.blob(_ipc(empty))}
        if isinstance(x, pa.DataType):
            return {"$": "arrow", "k": "type",
                    "ref": self.blob(_ipc(pa.schema([pa.field("c", x)]).empty_table()))}
        return None

    def _dataclass(self, x: Any, t: type, path: StatePath) -> _Tree:
        if id(x) in self._stack:
            raise CheckpointError(f"the state refers to itself at {format_path(path)}")
        self._stack.add(id(x))
        names = [f.name for f in dataclasses.fields(x)]
        extra = [n for n in (vars(x) if hasattr(x, "__dict__") else {}) if n not in names]
        try:
            return {"$": "obj", "cls": qualname(t),
                    "v": {n: self.enc(getattr(x, n), (path, Attr(n))) for n in names + extra
                          if hasattr(x, n)}}
        finally:
            self._stack.discard(id(x))


def encode(state: Any, root: str = "state") -> tuple[_Tree, _Arrays]:
    """``(tree, arrays)`` for ``state``; raises :class:`CheckpointError` naming an
    unsupported type and its path (``root['window']['ring']...``; ``root=""`` makes the
    first key the bare head, e.g. ``states['window']``)."""
    e = _Encoder()
    tree = e.enc(state, (None, root) if root else None)
    return tree, e.arrays


# ---- decoding -----------------------------------------------------------------------
def _dtype_from(v: Any, path: StatePath) -> np.dtype:
    try:
        dt = np.dtype([tuple(f) for f in v] if isinstance(v, list) else str(v))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"bad numpy dtype {v!r} at {format_path(path)}: {exc}") from None
    if dt.hasobject:
        raise CheckpointError(f"refusing numpy dtype {dt} (Python objects) at {format_path(path)}")
    return dt


def _read_ipc(data: Any, path: StatePath) -> pa.Table:
    try:
        t = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        t.validate(full=True)
    except (pa.ArrowException, ValueError) as exc:
        raise CheckpointError(f"bad Arrow data at {format_path(path)}: {exc}") from None
    return t


class _Decoder:
    def __init__(self, arrays: _Arrays) -> None:
        self.arrays = arrays

    def blob(self, ref: Any, path: StatePath) -> Any:
        if not isinstance(ref, str) or ref not in self.arrays:
            raise CheckpointError(f"checkpoint misses array {ref!r} for {format_path(path)}")
        return self.arrays[ref]

    def dec(self, x: Any, path: StatePath) -> Any:  # noqa: C901 - one dispatch on tag
        if x is None or isinstance(x, (bool, str, int, float)):
            return x
        if isinstance(x, list):
            return [self.dec(v, (path, i)) for i, v in enumerate(x)]
        if not isinstance(x, dict) or "$" not in x:
            raise CheckpointError(f"malformed checkpoint node at {format_path(path)}")
        tag, v = x["$"], x.get("v")
        if tag == "tuple":
            return tuple(self.dec(e, (path, i)) for i, e in enumerate(v))
        if tag == "dict":
            return {k: self.dec(e, (path, k)) for k, e in v.items()}
        if tag == "pdict":
            out = {}
            for k, e in v:
                key = self.dec(k, path)
                out[key] = self.dec(e, (path, key))
            return out
        if tag in ("set", "frozenset"):
            items = [self.dec(e, (path, i)) for i, e in enumerate(v)]
            return set(items) if tag == "set" else frozenset(items)
        if tag == "deque":
            return collections.deque((self.dec(e, (path, i)) for i, e in enumerate(v)),
                                     maxlen=x.get("maxlen"))
        if tag == "float":
            if v not in ("nan", "inf", "-inf"):
                raise CheckpointError(f"bad float {v!r} at {format_path(path)}")
            return float(v)
        if tag == "bytes":
            return base64.b64decode(v)
        if tag == "int":
            return int(v, 16)
        if tag == "npscalar":
            dt = _dtype_from(x["dtype"], path)
            return np.frombuffer(base64.b64decode(x["b"]), dtype=dt, count=1)[0]
        if tag == "dtype":
            return _dtype_from(v, path)
        if tag == "ndarray":
            dt = _dtype_from(x["dtype"], path)
            shape = tuple(int(s) for s in x["shape"])
            data = self.blob(x["ref"], path)
            try:
                return np.frombuffer(data, dtype=dt).reshape(shape).copy()
            except ValueError as exc:
                raise CheckpointError(f"bad array at {format_path(path)}: {exc}") from None
        if tag == "objarray":
            flat = [self.dec(e, (path, i)) for i, e in enumerate(v)]
            a = np.empty(len(flat), dtype=object)
            a[:] = flat
            return a.reshape(tuple(int(s) for s in x["shape"]))
        if tag == "arrow":
            return self._arrow(x["k"], _read_ipc(self.blob(x["ref"], path), path), path)
        if tag == "reg":
            e = BY_TAG.get(x.get("t"))
            if e is None:
                raise CheckpointError(f"checkpoint holds a {x.get('t')!r} at {format_path(path)} "
                                      "that this oop cannot load")
            return e.from_tree(self.dec(v, path))
        if tag == "enum":
            cls = resolve_oop_class(x["cls"], path)
            if not issubclass(cls, enum.Enum):
                raise CheckpointError(f"{x['cls']} at {format_path(path)} is not an enum")
            return cls(self.dec(v, path))
        if tag == "obj":
            return self._obj(x["cls"], v, path)
        raise CheckpointError(f"unknown checkpoint node {tag!r} at {format_path(path)}")

    @staticmethod
    def _arrow(kind: str, t: pa.Table, path: StatePath) -> Any:
        if kind == "batch":
            return t.combine_chunks().to_batches()[0] if t.num_rows else \
                pa.RecordBatch.from_pylist([], schema=t.schema)
        if kind == "table":
            return t
        if kind == "chunked":
            return t.column(0)
        if kind == "array":
            return t.column(0).combine_chunks()
        if kind == "scalar":
            return t.column(0)[0]
        if kind == "schema":
            return t.schema
        if kind == "field":
            return t.schema.field(0)
        if kind == "type":
            return t.schema.field(0).type
        raise CheckpointError(f"unknown Arrow kind {kind!r} at {format_path(path)}")

    def _obj(self, name: Any, v: Any, path: StatePath) -> Any:
        cls = resolve_oop_class(name, path)
        if not dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum):
            raise CheckpointError(f"{name} at {format_path(path)} is not a plain oop dataclass")
        obj = object.__new__(cls)
        allowed = {f.name for f in dataclasses.fields(cls)} | set(slot_names(cls))
        for k, e in v.items():
            if k not in allowed and not hasattr(obj, "__dict__"):
                raise CheckpointError(f"{name} has no attribute {k!r} ({format_path(path)})")
            object.__setattr__(obj, k, self.dec(e, (path, Attr(k))))
        return obj


def decode(tree: _Tree, arrays: _Arrays, root: str = "state") -> Any:
    """The state :func:`encode` encoded. Raises :class:`CheckpointError` on malformed input."""
    try:
        return _Decoder(arrays).dec(tree, (None, root) if root else None)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise CheckpointError(f"malformed checkpoint ({type(exc).__name__}: {exc})") from None


register_builtins()
