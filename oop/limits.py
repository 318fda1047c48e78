"""How much memory operator state may take: one budget per plan, checked before allocating.

Operators keep state (window lanes, key dictionaries, buffered tuples) whose size
the feed decides: a row stamped a year ahead of the rest, a key that never
repeats, a punctuation bound of a year. Every operator that grows a large
structure asks its :class:`StateBudget` first (:meth:`StateBudget.grow`, with
the operator's whole state size after the growth); the budget raises
:class:`~oop.errors.StateLimitError` -- one line naming the operator, the size,
the limit and what to do -- instead of letting the allocation exhaust memory.

The budget is shared by every operator of a plan (the sum over operators and
threads is what is limited). Operators take the budget that is current when
they are opened:

* inside ``with oop.limits.state_budget(bytes):`` -- that budget (``None``:
  no limit); the CLI's ``--max-state BYTES`` maps to this;
* otherwise the process-wide budget of :func:`default_state_limit` bytes
  (half of the memory this process may use).

An operator may also have its own ``max_state_bytes`` (window and adaptive
window operators), checked besides the shared one.

>>> with state_budget(1 << 20) as b:
...     b.grow(("op", 1), "window", 4096)
...     b.used
4096
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import resource
import threading
import weakref
from typing import Any, Callable, Iterator

from oop.errors import StateLimitError

__all__ = ["StateBudget", "default_state_limit", "state_budget", "current_budget", "guard_for",
           "fmt_bytes", "STATE_FRACTION", "ADVICE", "usable_cores"]

#: the share of the process's memory limit that operator state may take by default
STATE_FRACTION = 0.5

#: what to do about a StateLimitError (the end of every message)
ADVICE = ("raise --max-state (oop.limits.state_budget), add an --max-ahead guard against "
          "rows far ahead of the rest, use shorter windows, or fewer keys")

_NO_LIMIT = (1 << 62)  # cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX)


def _read(path: str) -> str | None:
    """The text of ``path``, or None when it cannot be read (tests monkeypatch this)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16 << 30


def _parse_limit(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip()
    if not t or t == "max":
        return None
    try:
        v = int(t)
    except ValueError:
        return None
    return v if 0 < v < _NO_LIMIT else None


def _cgroup_limits() -> list[int]:
    """Memory limits of this process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``),
    the process's own cgroup and the mount root both looked at."""
    out: list[int] = []
    v2_dirs, v1_dirs = ["/sys/fs/cgroup"], ["/sys/fs/cgroup/memory"]
    own = _read("/proc/self/cgroup") or ""
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/") or parts[2] == "/":
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_dirs.insert(0, "/sys/fs/cgroup" + parts[2])
        elif "memory" in parts[1].split(","):
            v1_dirs.insert(0, "/sys/fs/cgroup/memory" + parts[2])
    for d in v2_dirs:
        v = _parse_limit(_read(d + "/memory.max"))
        if v is not None:
            out.append(v)
            break
    for d in v1_dirs:
        v = _parse_limit(_read(d + "/memory.limit_in_bytes"))
        if v is not None:
            out.append(v)
            break
    return out


def default_state_limit() -> int:
    """Bytes of state a plan may keep by default: ``STATE_FRACTION`` (half) of the smallest of
    physical memory, the cgroup memory limit (v2 ``memory.max`` or v1
    ``memory.limit_in_bytes``, when set) and ``RLIMIT_AS`` (when set)."""
    limits = [_physical_memory(), *_cgroup_limits()]
    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            limits.append(int(soft))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        pass
    return int(min(limits) * STATE_FRACTION)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, at most ``os.cpu_count()``)."""
    n = os.cpu_count() or 1
    try:
        n = min(n, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        pass
    return max(1, n)


def fmt_bytes(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} B"


class StateBudget:
    """A byte limit on the state of all operators that share it (thread-safe).

    Each operator reports its whole state size (``grow`` before allocating,
    ``report`` after shrinking); the budget keeps the last figure per
    operator and checks the total. Operators that are garbage-collected drop
    out of the total.
    """

    def __init__(self, limit: int | None, source: str = "state budget") -> None:
        self.limit = None if limit is None else int(limit)
        self.source = source
        self._lock = threading.Lock()
        self._sizes: dict[Any, int] = {}
        # keys of collected operators: appended by a weakref callback, which the garbage
        # collector may run inside a locked section (so it must not take the lock)
        self._gone: list[Any] = []

    @property
    def used(self) -> int:
        with self._lock:
            self._drop_gone()
            return sum(self._sizes.values())

    def _drop_gone(self) -> None:  # under the lock
        while self._gone:
            self._sizes.pop(self._gone.pop(), None)

    def _key(self, owner: Any) -> Any:
        if isinstance(owner, (tuple, str, int)):
            return owner
        key = id(owner)
        if key not in self._sizes:
            try:
                weakref.finalize(owner, self._forget, key)
            except TypeError:  # pragma: no cover - not weak-referenceable
                pass
        return key

    def _forget(self, key: Any) -> None:
        self._gone.append(key)  # atomic; applied at the next locked call

    def grow(self, owner: Any, name: str, nbytes: int, what: str = "",
             own_limit: int | None = None) -> None:
        """``owner``'s state is about to become ``nbytes``: raise StateLimitError (nothing
        recorded) when that passes ``own_limit`` or the budget's total limit; else record it."""
        nbytes = int(nbytes)
        detail = f" ({what})" if what else ""
        if own_limit is not None and nbytes > own_limit:
            raise StateLimitError(
                f"{name}: state would grow to {fmt_bytes(nbytes)}{detail}, over its "
                f"max_state_bytes limit of {fmt_bytes(own_limit)}; {ADVICE}")
        key = self._key(owner)
        with self._lock:
            self._drop_gone()
            others = sum(v for k, v in list(self._sizes.items()) if k != key)
            if self.limit is not None and others + nbytes > self.limit:
                raise StateLimitError(
                    f"{name}: state would grow to {fmt_bytes(nbytes)}{detail}"
                    + (f" (+ {fmt_bytes(others)} held by other operators)" if others else "")
                    + f", over the {self.source} of {fmt_bytes(self.limit)}; {ADVICE}")
            self._sizes[key] = nbytes

    def report(self, owner: Any, nbytes: int) -> None:
        """``owner``'s state is now ``nbytes`` (after a purge: frees budget for the others)."""
        key = self._key(owner)
        with self._lock:
            self._drop_gone()
            self._sizes[key] = int(nbytes)

    def release(self, owner: Any) -> None:
        self._forget(self._key(owner))


_default: StateBudget | None = None
_current: contextvars.ContextVar[StateBudget | None] = contextvars.ContextVar("oop_state_budget",
                                                                              default=None)


def current_budget() -> StateBudget:
    """The budget operators opened now share: the innermost :func:`state_budget`, else the
    process-wide default (:func:`default_state_limit` bytes, computed once)."""
    b = _current.get()
    if b is not None:
        return b
    global _default
    if _default is None:
        _default = StateBudget(default_state_limit(),
                               "default state limit (half of this process's memory limit)")
    return _default


@contextlib.contextmanager
def state_budget(limit: int | None) -> Iterator[StateBudget]:
    """Operators opened inside share a budget of ``limit`` bytes (None: unlimited).

    >>> import oop.limits as L
    >>> with L.state_budget(None) as b:
    ...     L.current_budget() is b
    True
    """
    b = StateBudget(limit, "--max-state limit" if limit is not None else "state budget")
    token = _current.set(b)
    try:
        yield b
    finally:
        _current.reset(token)


def weak_guard(fn: Callable[[int, str], None] | None) -> Callable[[int, str], None] | None:
    """``fn`` as a structure of its owner keeps it: a bound method (the owner's own check) is
    held through a weak reference to the owner, anything else as it is.

    Held strongly, owner -> structure -> method -> owner is a reference cycle: a dropped
    operator and its whole state (a window ring is megabytes) then wait for the cyclic
    garbage collector instead of going at once, and the next run's state is fresh memory
    (page faults) instead of the memory just freed. Once the owner is gone the check does
    nothing.

    >>> class Owner:
    ...     def check(self, nbytes, what=""):
    ...         raise MemoryError(nbytes)
    >>> o = Owner(); g = weak_guard(o.check); del o
    >>> g(8, "lanes")  # owner gone: nothing to check
    """
    if fn is None or not inspect.ismethod(fn):
        return fn
    ref = weakref.WeakMethod(fn)

    def guard(nbytes: int, what: str = "") -> None:
        check = ref()
        if check is not None:
            check(nbytes, what)
    return guard


def guard_for(owner: Any, name: str, budget: StateBudget, own_limit: int | None,
              rest: Callable[[], int]) -> Callable[[int, str], None]:
    """A growth check for one structure of ``owner``: called with the structure's size after
    the growth; the rest of the owner's state (``rest()``) is added."""
    def guard(nbytes: int, what: str = "") -> None:
        budget.grow(owner, name, rest() + nbytes, what, own_limit)
    return guard
