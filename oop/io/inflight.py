"""A bound on the bytes handed to a writing thread and not yet written.

:class:`InFlight` is the back-pressure of the writing stages of a pipelined run
(:class:`oop.plan.background.BackgroundSink`, the lanes of
:meth:`oop.io.parts.PartsSink.write_on_threads`): the producer :meth:`~InFlight.acquire`\\ s
a batch's bytes before queueing it and waits while more than ``limit`` are in flight; the
writing thread :meth:`~InFlight.release`\\ s them once written. One batch of any size is
always let through, so a batch larger than the limit cannot block forever.
"""

from __future__ import annotations

import threading

__all__ = ["InFlight"]


class InFlight:
    """Bytes queued and not yet written, at most ``limit`` (see module doc)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0
        self._cv = threading.Condition()

    def acquire(self, nbytes: int) -> None:
        """Count ``nbytes`` in, first waiting while they would pass the limit (unless
        nothing is in flight)."""
        with self._cv:
            while self.bytes and self.bytes + nbytes > self.limit:
                self._cv.wait()
            self.bytes += nbytes

    def release(self, nbytes: int) -> None:
        """Count ``nbytes`` out (written) and wake a waiting producer."""
        with self._cv:
            self.bytes -= nbytes
            self._cv.notify_all()
