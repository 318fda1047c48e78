"""A fingerprint of a plan's semantics, to refuse resuming another query's checkpoint.

:func:`plan_description` renders every node of an executor's plan, in
topological order, as one canonical line: operator class, name, the
constructor arguments the operator recorded (``Operator._ctor``) and the
positions of its parents. :func:`plan_fingerprint` is the SHA-256 of those
lines.

Rendering is canonical and free of memory addresses: dataclasses (window
kinds, aggregates, punctuation configs, join configs) field by field, enums
by name, Arrow expressions and types by their text, functions by qualified
name plus a hash of their bytecode, constants and closure values. Arguments
that may change between runs of the same query are left out: a source's
``feed`` callable, ``connector`` and ``sink`` (where rows come from and go),
and any ``batch_size`` / thread-count argument (KeyedJoin's ``partitions``
too: its restore resumes on the checkpoint's count). A
source's time column, unit, punctuation config, schema and late policy are kept.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import types
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["plan_description", "plan_fingerprint", "describe_difference", "EXCLUDED_ARGS"]

#: constructor arguments that do not change a plan's results or state layout (or whose
#: change the operator's restore takes care of: KeyedJoin's ``partitions`` resume on the
#: checkpoint's count)
EXCLUDED_ARGS = frozenset({"feed", "connector", "sink", "batch_size", "threads", "n_threads",
                           "num_threads", "partitions"})

_MAX_DEPTH = 12


def _code_hash(code: types.CodeType, depth: int) -> str:
    h = hashlib.sha256(code.co_code)
    for c in code.co_consts:
        h.update((_code_hash(c, depth + 1) if isinstance(c, types.CodeType)
                  else canonical(c, depth + 1)).encode())
    h.update(repr(code.co_names).encode())
    return h.hexdigest()[:16]


def _function(fn: Any, depth: int) -> str:
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return f"<fn {name}>"
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            cells.append(canonical(cell.cell_contents, depth + 1))
        except ValueError:  # an empty cell
            cells.append("<empty>")
    defaults = canonical(getattr(fn, "__defaults__", None), depth + 1)
    return f"<fn {name} code={_code_hash(code, depth)} closure=[{', '.join(cells)}] " \
           f"defaults={defaults}>"


def canonical(x: Any, depth: int = 0) -> str:  # noqa: C901 - one dispatch on type
    """A deterministic text for ``x`` (no memory addresses)."""
    if depth > _MAX_DEPTH:
        return "<deep>"
    d = depth + 1
    if x is None or isinstance(x, (bool, int, float, str, bytes)) and not isinstance(x, enum.Enum):
        return repr(x)
    if isinstance(x, enum.Enum):
        return f"{type(x).__qualname__}.{x.name}"
    if isinstance(x, type):
        return f"<class {x.__module__}.{x.__qualname__}>"
    if dataclasses.is_dataclass(x):
        fs = ", ".join(f"{f.name}={canonical(getattr(x, f.name, None), d)}"
                       for f in dataclasses.fields(x))
        return f"{type(x).__qualname__}({fs})"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(canonical(v, d) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    if isinstance(x, dict):
        items = sorted((canonical(k, d), canonical(v, d)) for k, v in x.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(x, (set, frozenset)):
        return "{" + ", ".join(sorted(canonical(v, d) for v in x)) + "}"
    if isinstance(x, pc.Expression):
        return f"<expr {x}>"
    if isinstance(x, (pa.DataType, pa.Field)):
        return f"<arrow {x}>"
    if isinstance(x, pa.Schema):
        return "<schema " + ", ".join(f"{f.name}: {f.type}" for f in x) + ">"
    if isinstance(x, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        return f"<arrow {x.type} {x.to_pylist() if not isinstance(x, pa.Scalar) else x.as_py()}>"
    if isinstance(x, np.ndarray):
        c = np.ascontiguousarray(x)
        digest = hashlib.sha256(c.tobytes() if not c.dtype.hasobject else repr(c.tolist()).encode())
        return f"<ndarray {c.dtype.str} {list(c.shape)} {digest.hexdigest()[:16]}>"
    if isinstance(x, np.generic):
        return f"{x.dtype.str}:{x.item()!r}"
    if isinstance(x, functools.partial):
        return f"<partial {canonical(x.func, d)} {canonical(x.args, d)} {canonical(x.keywords, d)}>"
    if isinstance(x, (types.FunctionType, types.MethodType)) or callable(x) and \
            hasattr(x, "__code__"):
        return _function(x, depth)
    py_func = getattr(x, "py_func", None)  # a numba dispatcher: its Python function
    if callable(x) and isinstance(py_func, types.FunctionType):
        return f"<jit {_function(py_func, depth)}>"
    if isinstance(x, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"<builtin {getattr(x, '__module__', '')}.{x.__qualname__}>"
    name = f"{type(x).__module__}.{type(x).__qualname__}"
    state = getattr(x, "__dict__", None)
    if isinstance(state, dict):
        return f"<{name} {canonical({k: v for k, v in state.items()}, d)}>"
    return f"<{name}>"


def _arguments(op: Any) -> str:
    ctor = op.__dict__.get("_ctor")
    if ctor is None:
        return "<no recorded constructor>"
    args, kw = ctor
    try:
        bound = inspect.signature(type(op)).bind_partial(*args, **kw)
        named = dict(bound.arguments)
        for pname, param in inspect.signature(type(op)).parameters.items():
            if param.kind is inspect.Parameter.VAR_KEYWORD and pname in named:
                named.update(named.pop(pname))
    except (TypeError, ValueError):
        named = {**{f"#{i}": a for i, a in enumerate(args)}, **kw}
    return ", ".join(f"{k}={canonical(v)}" for k, v in sorted(named.items())
                     if k not in EXCLUDED_ARGS)


def plan_description(executor: Any) -> list[str]:
    """One canonical line per node of ``executor``'s plan, parents first."""
    index = {n.id: i for i, n in enumerate(executor.nodes)}
    lines = []
    for i, n in enumerate(executor.nodes):
        op = n.op
        parents = [index[p.id] for p in n.parents]
        lines.append(f"{i} {type(op).__module__}.{type(op).__qualname__} name={op.name!r} "
                     f"parents={parents} args({_arguments(op)})")
    return lines


def plan_fingerprint(executor: Any) -> str:
    """SHA-256 (hex) over :func:`plan_description`: equal for the same query built twice."""
    return hashlib.sha256("\n".join(plan_description(executor)).encode()).hexdigest()


def describe_difference(ours: list[str], theirs: Any, limit: int = 160) -> str:
    """What differs between two plan descriptions, in a few words (for error messages)."""
    if not isinstance(theirs, list):
        return "the plan fingerprint differs"
    if len(ours) != len(theirs):
        return f"the plan has {len(ours)} operators, the checkpointed one {len(theirs)}"
    for a, b in zip(ours, theirs):
        if a != b:
            hint = _threads_hint(a, b)
            if hint:
                return hint
            k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            lo = max(0, k - 40)
            return (f"operator {a.split(' name=', 1)[-1].split(' ', 1)[0]} differs: "
                    f"...{a[lo: lo + limit // 2]}... here vs ...{b[lo: lo + limit // 2]}... "
                    "in the checkpoint")
    return "the plan fingerprint differs"


#: the key-partitioned operators (their one-thread operator is another class)
_PARTITIONED = ("oop.window.threaded.ThreadedWindow", "oop.adapt.threaded.ThreadedAdapt",
                "oop.join.keyed_join.KeyedJoin")


def _threads_hint(ours: str, theirs: str) -> str | None:
    """The difference in words when one side's operator runs on key partitions and the
    other's on one thread (a thread count across ``--threads 2`` / ``3``)."""
    here = any(f" {c} " in ours for c in _PARTITIONED)
    there = any(f" {c} " in theirs for c in _PARTITIONED)
    if here == there:
        return None
    name = ours.split(" name=", 1)[-1].split(" ", 1)[0]
    where = ("on key partitions", "on one thread")
    return (f"operator {name} ran {where[not there]} in the checkpoint, {where[not here]} "
            "here; resume with the thread count of the run that wrote it (oop replay / sql: "
            "--threads 3 or more for key partitions, 1 or 2 for one thread)")
