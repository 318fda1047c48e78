"""Wall-clock idleness (``+idle-wall:DUR``): a silent live input stops holding back a union."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

import oop
from oop.io.protocol import END, IDLE
from oop.punctuation import BoundedDelay, IdleWall
from oop.stream.timecol import TimeSpec
from oop.window import Tumbling, agg


def test_idle_wall_follows_the_clock_only_after_the_wall_time(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("oop.punctuation.cadence._time.monotonic", lambda: now[0])
    g = IdleWall(BoundedDelay(5), seconds=2.0).build(TimeSpec("ts", "ms"))
    assert g.on_batch(None, np.array([50], dtype=np.int64)) == 45
    now[0] += 1.0
    assert g.on_idle(500) is None  # quiet for 1 s < 2 s: still holding back
    now[0] += 1.5
    assert g.on_idle(500) == 500  # quiet for 2.5 s: follows the data-time clock
    assert g.on_idle(500) is None  # no duplicate
    snap = g.snapshot()
    g2 = IdleWall(BoundedDelay(5), seconds=2.0).build(TimeSpec("ts", "ms"))
    g2.restore(snap)
    assert g2.on_idle(400) is None  # never backwards after a restore


class _Silent:
    """A live connector that never delivers a row until stopped."""

    name, live, resumable = "quiet", True, False
    schema = pa.schema([("ts", pa.int64()), ("v", pa.int64())])

    def __init__(self) -> None:
        self.stopped = False

    def open(self) -> pa.Schema:
        return self.schema

    def poll(self, max_rows: int, timeout: float = 0.1):
        if self.stopped:
            return END
        time.sleep(min(timeout, 0.02))
        return IDLE

    def offset(self) -> None:
        return None

    def seek(self, offset: object) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        pass


def test_a_silent_input_of_a_union_stops_holding_it_back():
    quiet = _Silent()
    busy_rows = pa.table({"ts": np.arange(0, 20_000, 10, dtype=np.int64),
                          "v": np.ones(2000, dtype=np.int64)})

    class Slow:
        """The busy input: one batch per poll, a little wall time apart."""

        name, live, resumable = "busy", True, False

        def __init__(self) -> None:
            self.batches = busy_rows.to_batches(max_chunksize=100)

        def open(self) -> pa.Schema:
            return busy_rows.schema

        def poll(self, max_rows: int, timeout: float = 0.1):
            time.sleep(0.02)
            return self.batches.pop(0) if self.batches else END

        def offset(self) -> None:
            return None

        def seek(self, offset: object) -> None:
            pass

        def close(self) -> None:
            pass

    punct = IdleWall(BoundedDelay(0), seconds=0.1)
    a = oop.from_connector(Slow(), time="ts", punctuation=punct, name="busy")
    b = oop.from_connector(quiet, time="ts", punctuation=punct, name="quiet")
    out, rows_while_silent = [], 0
    deadline = time.monotonic() + 20
    for batch in a.meld(b).window(Tumbling(1000), [agg.count()]).iter_batches():
        out.append(batch)
        if not quiet.stopped:
            rows_while_silent += batch.num_rows
        if rows_while_silent >= 5 or time.monotonic() > deadline:
            quiet.stop()  # the union's windows closed while the quiet input was still open
    got = pa.Table.from_batches(out)
    assert rows_while_silent >= 5
    assert got.column("count").to_pylist()[:5] == [100] * 5
