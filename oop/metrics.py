"""Per-operator metrics (DESIGN §6).

Every operator owns one :class:`OperatorMetrics`. Counters are plain ints
updated once per batch or punctuation (never per tuple in Python). State size
is *deterministic accounting* reported by the operator itself (items and
bytes), so runs compare exactly across machines; the peak is kept too.

Latency is wall time from the moment the punctuation that released a result
entered the engine (at its source) to the moment the result left this
operator. Samples are kept in a bounded reservoir so long runs stay bounded.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator

import numpy as np

__all__ = ["CompileTime", "OperatorMetrics", "StateSize", "ThreadClock", "compile_timer"]

_MAX_LATENCY_SAMPLES = 100_000


class ThreadClock:
    """The CPU seconds of one thread, read from any thread; no cost on the thread itself.

    :meth:`start` is called on the measured thread (once); :attr:`seconds` reads that
    thread's CPU clock (``pthread_getcpuclockid``) from wherever it is asked, and
    :meth:`stop` (on any thread, while the measured one still runs, or on it at its end)
    keeps the final value. Why not ``time.thread_time()`` around each piece of work: on
    this VM that is a system call, and a thread that holds the GIL can be switched out at
    its return -- a writing lane did so ~1,500 times a run, and the driving and reading
    threads waited for the GIL meanwhile (py-spy ``--gil``: 0.28 s of a 2.3 s run).
    """

    def __init__(self) -> None:
        self._clock: int | None = None
        self._base = 0.0
        self._final: float | None = None

    def start(self) -> None:
        """Measure the calling thread from now on."""
        self._clock = time.pthread_getcpuclockid(threading.get_ident())
        self._base = time.clock_gettime(self._clock)

    @property
    def seconds(self) -> float:
        """CPU seconds since :meth:`start` (0 before it; the final value after :meth:`stop`)."""
        if self._final is not None:
            return self._final
        if self._clock is None:
            return 0.0
        try:
            return time.clock_gettime(self._clock) - self._base
        except OSError:  # the thread has ended without stop(): its clock is gone
            return 0.0

    def stop(self) -> None:
        """Keep the value now (call it before the measured thread ends)."""
        if self._final is None:
            self._final = self.seconds


@dataclass(frozen=True, slots=True)
class StateSize:
    """State held by an operator: number of items (tuples, partial aggregates) and bytes."""

    items: int = 0
    bytes: int = 0

    def __add__(self, other: "StateSize") -> "StateSize":
        return StateSize(self.items + other.items, self.bytes + other.bytes)


@dataclass
class OperatorMetrics:
    """Counters of one operator. ``late`` maps a policy name to a count."""

    name: str
    tuples_in: int = 0
    tuples_out: int = 0
    batches_in: int = 0
    batches_out: int = 0
    punctuations_in: int = 0
    punctuations_out: int = 0
    state_items: int = 0
    state_bytes: int = 0
    peak_state_items: int = 0
    peak_state_bytes: int = 0
    late: dict[str, int] = field(default_factory=dict)
    #: operator-specific counters (e.g. DupElim's ``duplicates``)
    counters: dict[str, int] = field(default_factory=dict)
    #: operator-specific current estimates (e.g. an adaptive generator's ``delay_estimate``)
    gauges: dict[str, float] = field(default_factory=dict)
    latency_ns: list[int] = field(default_factory=list, repr=False)

    def record_state(self, size: StateSize) -> None:
        """Set the current state size and fold it into the peak. O(1)."""
        self.state_items = size.items
        self.state_bytes = size.bytes
        if size.items > self.peak_state_items:
            self.peak_state_items = size.items
        if size.bytes > self.peak_state_bytes:
            self.peak_state_bytes = size.bytes

    def count_late(self, policy: str, n: int) -> None:
        if n:
            self.late[policy] = self.late.get(policy, 0) + int(n)

    def count(self, counter: str, n: int) -> None:
        """Add ``n`` to an operator-specific counter. O(1)."""
        if n:
            self.counters[counter] = self.counters.get(counter, 0) + int(n)

    @property
    def late_total(self) -> int:
        return sum(self.late.values())

    def record_latency(self, ns: int) -> None:
        if len(self.latency_ns) < _MAX_LATENCY_SAMPLES:
            self.latency_ns.append(int(ns))

    def latency_summary(self) -> dict[str, float]:
        """p50 / p99 / max latency in milliseconds (empty dict with no samples)."""
        if not self.latency_ns:
            return {}
        a = np.asarray(self.latency_ns, dtype=np.float64) / 1e6
        return {
            "latency_p50_ms": float(np.percentile(a, 50)),
            "latency_p99_ms": float(np.percentile(a, 99)),
            "latency_max_ms": float(a.max()),
        }

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain data (copies), for a checkpoint; ``name`` is not included.

        Latency samples are an int64 numpy array (compact in a durable checkpoint).
        """
        d: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if f.name == "latency_ns":
                v = np.asarray(v, dtype=np.int64)
            elif isinstance(v, dict):
                v = dict(v)
            d[f.name] = v
        return d

    def restore(self, state: dict[str, Any]) -> None:
        """Load a :meth:`snapshot`: a resumed run counts on from the checkpointed totals."""
        for f in fields(self):
            if f.name == "name" or f.name not in state:
                continue
            v = state[f.name]
            if f.name == "latency_ns":
                v = np.asarray(v, dtype=np.int64).tolist()
            elif isinstance(v, dict):
                v = dict(v)
            setattr(self, f.name, v)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("latency_ns")
        d.update(self.latency_summary())
        return d


@dataclass
class CompileTime:
    """Seconds spent compiling numba kernels inside a :func:`compile_timer` block."""

    seconds: float = 0.0


@contextmanager
def compile_timer() -> Iterator[CompileTime]:
    """Time numba's JIT compilation inside the block (numba's ``numba:compile`` events).

    A fresh install compiles each kernel on its first call (seconds in all);
    the on-disk cache makes later runs skip it. Run reports give this time
    apart so a first run's throughput is not mistaken for the engine's.

    >>> with compile_timer() as ct:
    ...     pass
    >>> ct.seconds
    0.0
    """
    from numba.core.event import install_timer

    ct = CompileTime()
    with install_timer("numba:compile", lambda dt: setattr(ct, "seconds", dt)):
        yield ct


def peak_rss_bytes() -> int:
    """This process's peak resident set size in bytes.

    Reads ``VmHWM`` from ``/proc/self/status`` (the high-water mark of this program's
    own memory, reset by ``exec``); ``getrusage``'s ``ru_maxrss`` is the fallback, but on
    Linux it survives ``exec`` and so includes the parent's size at ``fork``.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
