"""oop.metrics.ThreadClock: a thread's CPU time, read from another thread."""

from __future__ import annotations

import threading
import time

from oop.metrics import ThreadClock


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_reads_the_measured_thread_not_the_reader() -> None:
    clock = ThreadClock()
    assert clock.seconds == 0.0  # not started
    go, done = threading.Event(), threading.Event()

    def work() -> None:
        clock.start()
        _spin(0.05)
        go.set()
        done.wait()
        clock.stop()

    t = threading.Thread(target=work)
    t.start()
    go.wait()
    mine = time.thread_time()
    seen = clock.seconds  # read here, on another thread
    assert 0.04 <= seen < 1.0
    _spin(0.05)  # this thread's CPU does not count
    assert clock.seconds < seen + 0.03
    assert time.thread_time() - mine >= 0.04
    done.set()
    t.join()
    final = clock.seconds  # kept by stop(): the thread and its clock are gone
    assert final >= seen
    assert clock.seconds == final
