"""A first run's largest kernels compiled on another core while this process works on.

numba compiles a kernel in the thread that first calls it, holding the GIL, and
only when its on-disk cache (``cache=True``) has no machine code for the argument
types. So the first run of a query after an install compiles its kernels one after
another on one core: the README's quick start spends ~3.5 s of its ~5 s first run so
on a 2-core VM, ~2.5 s of it in Paned-WID's emission kernel
(:func:`~oop.window.paned_kernels.paned_emit_ints` there), which runs only at the
first punctuation.

:func:`request` lets an operator name such kernels and the arguments they will be
called with, in the order it will call them, as soon as it knows it will (the window
operator: while the plan is built, or on its first batch when the automatic method
picks Paned-WID there). When
numba's cache has no machine code for those types yet, a helper process (``python -m
oop.compile_ahead``, one per process, started on the first request) compiles them
with numba's own ``Dispatcher.compile``, which writes numba's on-disk cache as usual,
the last asked first. This process meanwhile compiles and runs everything else.
:func:`wait`, called before a kernel's first call, blocks while the helper compiles
it, and takes it back when the helper has not started it yet (numba then compiles it
here at once): so the two work from the two ends of the list and meet in the middle.
A kernel the helper has written then loads from the cache like in any later run.
:func:`request`'s ``callee`` moves a separately compiled callee of an asked kernel
(Paned-WID's window step, ~0.7 s) to this process: it starts the helper, compiles the
callee here while the helper starts Python and numba, and only then asks for the
caller, which the helper compiles with the callee loaded from the cache (the run is
idle at its first punctuation, waiting for the helper, so the helper's share is the
one to shorten).
Measured (fresh caches, 2-core VM): ``docs/benchmarks.md``, "Compiling ahead".

Nothing depends on the helper: if it fails, dies or is switched off, :func:`wait`
returns and numba compiles the kernel here, as without this module. The helper only
starts when this process may use more than one core (:func:`oop.limits.usable_cores`)
and ``OOP_COMPILE_AHEAD`` is not ``0``; it compiles nothing that is already cached,
so warm runs never start it. It is stopped when this process exits: no process
outlives the command. A compile it is in then is lost, never left half written (numba
writes a cache file under a temporary name and renames it).

The cache check reads numba's cache index (``Cache._index_key``,
``_cache_file._load_index``): private parts of numba 0.6x. With a numba whose cache
does not look like that, :func:`request` treats the kernel as cached and does
nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO, Callable, Iterator

from oop.limits import usable_cores

__all__ = ["request", "wait", "enabled", "allow", "on_ask", "waited_s", "ENV"]

#: set to ``0`` to compile every kernel in the process that uses it
ENV = "OOP_COMPILE_AHEAD"
#: longest wait for one helper compile before this process compiles the kernel itself
WAIT_S = 300.0

_log = logging.getLogger(__name__)


_allowed = [True]  # see allow


def allow(flag: bool) -> None:
    """Allow (the default) or forbid the helper in this process: ``oop replay --threads 1``
    asks for one core, so its kernels compile in the process itself."""
    _allowed[0] = flag


def enabled() -> bool:
    """Whether kernels may be compiled ahead: not forbidden (:func:`allow`),
    ``OOP_COMPILE_AHEAD`` is not ``0`` and this process may use more than one core."""
    return _allowed[0] and os.environ.get(ENV, "1") != "0" and usable_cores() > 1


def _signature(kernel: Any, args: tuple) -> tuple:
    """The numba argument types ``kernel`` compiles for when called with ``args``."""
    return tuple(kernel.typeof_pyval(a) for a in args)


def _cached(kernel: Any, sig: tuple) -> bool:
    """Whether ``kernel`` has machine code for ``sig`` in this process or in numba's on-disk
    cache (True when that cannot be told: then nothing is compiled ahead). O(index size)."""
    if sig in kernel.overloads:
        return True
    try:
        cache = kernel._cache
        key = cache._index_key(sig, kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # a cache of another shape, or none (cache=False): compile as usual
        return True


def _send(pipe: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(struct.pack("<Q", len(data)) + data)
    pipe.flush()


def _receive(pipe: BinaryIO) -> Any:
    """The next object on ``pipe``; None at its end."""
    head = pipe.read(8)
    if len(head) < 8:
        return None
    return pickle.loads(pipe.read(struct.unpack("<Q", head)[0]))


#: the folder holding this ``oop`` package: the helper starts there, so ``-m`` finds the same
#: sources (numba keys its cache by the source file) whatever this process's folder holds
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _helper_env() -> dict[str, str]:
    """This process's environment for the helper, with ``NUMBA_CACHE_DIR`` made absolute
    (the helper starts in another folder)."""
    env = dict(os.environ)
    if env.get("NUMBA_CACHE_DIR"):
        env["NUMBA_CACHE_DIR"] = os.path.abspath(env["NUMBA_CACHE_DIR"])
    return env


class _Helper:
    """The helper process and the jobs sent to it: ``(module, name, signature)`` each, in
    the order this process will need them.

    The helper serves the last asked first (:func:`_serve`); :meth:`take` lets this process
    compile a job itself when the helper has not started it, so each side works from its
    own end of the list. A reader thread collects the helper's answers."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child starts a helper of its own
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "oop.compile_ahead"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_helper_env(),
            cwd=_PACKAGE_ROOT)
        #: job -> asked | started (by the helper) | done | taken (back by this process)
        self.state: dict[tuple, str] = {}
        self.done: dict[tuple, threading.Event] = {}
        self.waited_s = 0.0  # seconds this process has waited for the helper
        self.lock = threading.Lock()
        threading.Thread(target=self._answers, name="oop-compile-ahead", daemon=True).start()
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the helper (at exit): no process outlives the command. A compile it is in
        is lost (numba renames a cache file into place only once it is written)."""
        if self.pid == os.getpid() and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def _tell(self, message: tuple) -> bool:
        """Send ``message`` to the helper (under ``lock``); False if it has gone or the
        message cannot be sent (a type that does not pickle)."""
        try:
            assert self.proc.stdin is not None
            _send(self.proc.stdin, message)
            return True
        except Exception:  # the run compiles it itself
            return False

    def send(self, job: tuple) -> None:
        """Ask the helper for ``job`` (once)."""
        with self.lock:
            if job in self.state:
                return
            self.state[job] = "asked"
            self.done[job] = threading.Event()
            if not self._tell(("job", job)):  # gone: this process compiles it
                self.state[job] = "taken"

    def _answers(self) -> None:
        assert self.proc.stdout is not None
        try:
            while (answer := _receive(self.proc.stdout)) is not None:
                kind, job, error = answer
                if error:
                    _log.debug("compile ahead of %s.%s failed: %s", job[0], job[1], error)
                with self.lock:
                    if self.state.get(job) in ("asked", "started"):
                        self.state[job] = "started" if kind == "start" else "done"
                    if kind == "done" and job in self.done:
                        self.done[job].set()
        except Exception as e:  # a garbled answer: treat the helper as gone
            _log.debug("compile-ahead helper answered badly: %s", e)
        with self.lock:  # the helper ended: nothing more will come
            for job, st in self.state.items():
                if st in ("asked", "started"):
                    self.state[job] = "taken"
                self.done[job].set()

    def take(self, module: str, name: str) -> None:
        """Before this process calls kernel ``module.name``: jobs for it the helper has not
        started are taken back (numba compiles them here, at once); started ones are waited
        for (at most :data:`WAIT_S` each)."""
        with self.lock:
            jobs = [j for j in self.state if j[:2] == (module, name)]
            for job in jobs:
                if self.state[job] == "asked":
                    self.state[job] = "taken"
                    self._tell(("take", job))
            waits = [self.done[j] for j in jobs if self.state[j] == "started"]
        t0 = time.perf_counter()
        for done in waits:
            if not done.wait(WAIT_S):
                _log.debug("compile ahead of %s.%s still running after %s s", module, name,
                           WAIT_S)
        if waits:
            with self.lock:
                self.waited_s += time.perf_counter() - t0


_helper: _Helper | None = None
_helper_lock = threading.Lock()


def _own_helper() -> _Helper | None:
    """The helper this process started, if any (a forked child's inherited one is not)."""
    helper = _helper
    return helper if helper is not None and helper.pid == os.getpid() else None


def _the_helper() -> _Helper | None:
    """This process's helper, started on first use; None if it cannot start."""
    global _helper
    with _helper_lock:
        if _own_helper() is None:
            try:
                _helper = _Helper()
            except OSError as e:
                _log.debug("no compile-ahead helper: %s", e)
                return None
        return _helper


_on_ask: list[Callable[[], None]] = []


@contextlib.contextmanager
def on_ask(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` each time the helper is asked for a kernel inside the block: a
    compile this process will wait for, though numba does not compile here (the commands
    say they are compiling then too: :func:`oop.cli.compile_notice`)."""
    _on_ask.append(callback)
    try:
        yield
    finally:
        _on_ask.remove(callback)


def _job(kernel: Any, args: tuple) -> tuple | None:
    """The helper's job for numba dispatcher ``kernel`` called with ``args``: ``(module,
    name, signature)``; None when compiling ahead is off (:func:`enabled`), the helper could
    not find the kernel by name, or it is cached. O(1) but for the cache index read."""
    py_func = getattr(kernel, "py_func", None)  # None: no dispatcher (NUMBA_DISABLE_JIT)
    if py_func is None or not enabled():
        return None
    module, name = py_func.__module__, py_func.__name__
    if getattr(sys.modules.get(module), name, None) is not kernel:
        return None  # the helper could not find it by name
    sig = _signature(kernel, args)
    return None if _cached(kernel, sig) else (module, name, sig)


def request(kernel: Any, args: tuple, callee: tuple[Any, tuple] | None = None) -> bool:
    """Have the helper compile numba dispatcher ``kernel`` (a module-level kernel of an
    importable module) for the types of ``args``, unless it is cached or compiling ahead
    is off (:func:`enabled`). True if the helper was asked. Call :func:`wait` before the
    kernel's first call. O(1) but for the cache index read.

    ``callee``: (dispatcher, signature) of a separately compiled function ``kernel`` calls,
    compiled here into numba's cache, after the helper is started and before it is asked
    (unless cached). The helper meanwhile starts Python and numba, and loads the callee
    from the cache instead of compiling it: the callee's compile moves from the helper,
    whose compiling a first run waits for, to this process, which has not reached its
    first punctuation yet."""
    job = _job(kernel, args)
    helper = _the_helper() if job is not None else None
    if helper is None or job is None:
        return False
    if callee is not None and not _cached(*callee):
        try:
            callee[0].compile(callee[1])
        except Exception as e:  # a wrong signature: the helper compiles the callee
            _log.debug("no early compile of %s: %s", callee[0], e)
    helper.send(job)
    for callback in list(_on_ask):
        callback()
    return True


def wait(kernel: Any) -> None:
    """Call before ``kernel``'s first call: blocks while the helper compiles it; what it has
    not started yet is taken back, and numba compiles it here (at once when nothing was
    asked). Afterwards numba finds what the helper compiled in its on-disk cache; if the
    helper failed, numba compiles it here. O(jobs asked)."""
    helper = _own_helper()
    if helper is not None:
        py_func = getattr(kernel, "py_func", None)
        if py_func is not None:
            helper.take(py_func.__module__, py_func.__name__)


def waited_s() -> float:
    """Seconds this process has waited for the helper's compiles so far: the part of a
    first run's wall time the helper's compiling took (``--metrics``' ``compile_wait_s``,
    beside ``jit_compile_s``, this process's own compiling). 0.0 without a helper."""
    helper = _own_helper()
    return helper.waited_s if helper is not None else 0.0


def _serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The helper's loop: compile the jobs read from ``stdin`` (numba writes its on-disk
    cache), the last asked first -- the asking process needs it last -- skipping those
    taken back (``("take", job)``); say ``("start", job, None)`` before each and
    ``("done", job, error or None)`` after it on ``stdout``. Returns at the end of
    ``stdin`` (the asking process has gone)."""
    import importlib

    import numba

    numba.njit(lambda x: x + 1)(1)  # numba's first-compile set-up (~0.5 s) before any job
    queue: list[tuple] = []
    cond = threading.Condition()
    closed = [False]

    def read() -> None:
        try:
            while (message := _receive(stdin)) is not None:
                kind, job = message
                with cond:
                    if kind == "job":
                        queue.append(job)
                    elif job in queue:
                        queue.remove(job)
                    cond.notify()
        finally:  # the asking process has gone (or sent what cannot be read): stop
            with cond:
                closed[0] = True
                cond.notify()

    threading.Thread(target=read, daemon=True).start()
    while True:
        with cond:
            while not queue and not closed[0]:
                cond.wait()
            if closed[0]:
                return
            job = queue.pop()
        _send(stdout, ("start", job, None))
        module, name, sig = job
        error = None
        try:
            getattr(importlib.import_module(module), name).compile(sig)
        except Exception as e:  # the asking process compiles it itself
            error = f"{type(e).__name__}: {e}"
        _send(stdout, ("done", job, error))


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
