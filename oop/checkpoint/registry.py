"""The types a checkpoint may hold beyond plain data, and paths into a state.

:func:`register` allows instances of one exact class, with a function to turn
one into encodable data and one to rebuild it (used for punctuations,
sortedcontainers, ``Fraction`` ...). Classes named by a checkpoint file
(enums, plain dataclasses) are resolved by :func:`resolve_oop_class`, which
imports nothing outside ``oop.`` and returns only classes defined there.
"""

from __future__ import annotations

import dataclasses
import importlib
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

from oop.errors import CheckpointError

__all__ = ["register", "format_path", "resolve_oop_class", "StatePath", "Attr"]

#: a path into the state, innermost last: a linked list (parent, key) formatted on error
StatePath = tuple[Any, ...] | None

def format_path(path: StatePath) -> str:
    """``states['window']['ring']`` from a linked path (the root name bare)."""
    keys: list[Any] = []
    while path is not None:
        path, key = path
        keys.append(key)
    keys.reverse()
    if not keys:
        return "<root>"
    head = keys[0] if isinstance(keys[0], str) and keys[0].isidentifier() else f"[{keys[0]!r}]"
    tail = (f".{k}" if isinstance(k, Attr) else f"[{k!r}]" for k in keys[1:])
    return str(head) + "".join(tail)


class Attr(str):
    """A path step that is an attribute (rendered ``.name``)."""


# ---- the registry -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Entry:
    """One allowed class: its tag in the tree and its two conversions."""

    cls: type
    tag: str
    to_tree: Callable[[Any], Any]
    from_tree: Callable[[Any], Any]


BY_CLASS: dict[type, Entry] = {}
BY_TAG: dict[str, Entry] = {}


def register(cls: type, to_tree: Callable[[Any], Any], from_tree: Callable[[Any], Any],
             tag: str | None = None) -> None:
    """Allow instances of exactly ``cls`` in checkpoints.

    ``to_tree(obj)`` returns a value that is itself encodable (it is encoded
    recursively); ``from_tree(value)`` rebuilds the object from the decoded
    value. ``tag`` defaults to ``module.QualName``.
    """
    t = tag or f"{cls.__module__}.{cls.__qualname__}"
    e = Entry(cls, t, to_tree, from_tree)
    BY_CLASS[cls] = e
    BY_TAG[t] = e


def register_builtins() -> None:
    from oop.stream.elements import (EndOfStream, GroupPunctuation, JointPunctuation,
                                     Punctuation)

    register(Fraction, lambda f: [f.numerator, f.denominator], lambda v: Fraction(*v), "Fraction")
    register(Decimal, str, Decimal, "Decimal")
    register(complex, lambda c: [c.real, c.imag], lambda v: complex(*v), "complex")
    register(bytearray, bytes, bytearray, "bytearray")
    register(Punctuation, lambda p: [p.attr, p.value], lambda v: Punctuation(*v), "Punctuation")
    register(GroupPunctuation, lambda p: [p.attr, p.keys, p.values],
             lambda v: GroupPunctuation(*v), "GroupPunctuation")
    register(JointPunctuation, lambda p: p.bounds, JointPunctuation, "JointPunctuation")
    register(EndOfStream, lambda p: None, lambda v: EndOfStream(), "EndOfStream")
    try:
        import sortedcontainers as sc
    except ImportError:  # pragma: no cover - a declared dependency
        return
    register(sc.SortedList, list, sc.SortedList, "SortedList")
    register(sc.SortedSet, list, sc.SortedSet, "SortedSet")
    register(sc.SortedDict, lambda d: list(d.items()), sc.SortedDict, "SortedDict")


# ---- resolving classes by name (oop. only) ------------------------------------------
def resolve_oop_class(name: Any, path: StatePath) -> type:
    """The class ``oop.mod.Qual`` by import + getattr; refuses anything outside ``oop.``."""
    if not isinstance(name, str) or not name.startswith("oop."):
        raise CheckpointError(f"checkpoint names class {name!r} at {format_path(path)}; only "
                              "classes of oop modules are loaded")
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        modname = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(modname)
        except ImportError:
            continue
        if not (obj.__name__ == "oop" or obj.__name__.startswith("oop.")):
            break
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if isinstance(obj, type) and obj.__module__.startswith("oop."):
            return obj
        break
    raise CheckpointError(f"checkpoint names class {name!r} at {format_path(path)} which this "
                          "oop does not have (a checkpoint of another oop version?)")


def qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for k in cls.__mro__:
        s = k.__dict__.get("__slots__", ())
        names.extend([s] if isinstance(s, str) else s)
    return [n for n in names if n not in ("__dict__", "__weakref__")]
