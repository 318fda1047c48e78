"""Part folders encoded on lanes (``PartsSink.write_on_threads``): the same files, in the
same order, as one thread writes; nothing visible or recorded before it is durable; a
lane's failure is one SinkError and leaves no part behind.

A pipelined run (``oop replay --threads N``, N > 1) writes its part folder this way
(:class:`oop.plan.background.BackgroundSink` writes to it directly).
"""

from __future__ import annotations

import errno
import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oop
from oop.errors import SinkError
from oop.io.parts import PartsSink, committed_parts
from oop.plan.background import BackgroundSink


def batch(start: int, rows: int) -> pa.RecordBatch:
    r = np.arange(start, start + rows)
    return pa.record_batch({"ts": pa.array(r, pa.int64()), "v": pa.array(r * 0.5),
                            "k": pa.array([f"k{j % 7}" for j in r])})


def folder_state(folder: Path) -> tuple[list[str], list[int], list[dict[str, Any]]]:
    parts = committed_parts(folder)
    return ([p.name for _, p in parts], [pq.read_metadata(p).num_rows for _, p in parts],
            pq.read_table(folder).to_pylist() if parts else [])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(0, 90), min_size=1, max_size=12),
       per_part=st.integers(1, 60), lanes=st.integers(1, 3),
       commits=st.sets(st.integers(0, 11), max_size=4), lane_bytes=st.sampled_from([1, 1 << 20]))
def test_lanes_write_the_same_parts_as_one_thread(tmp_path_factory: pytest.TempPathFactory,
                                                  sizes: list[int], per_part: int, lanes: int,
                                                  commits: set[int], lane_bytes: int) -> None:
    runs = []
    for threaded in (False, True):
        folder = tmp_path_factory.mktemp("lanes")
        sink = PartsSink(folder, max_rows_per_part=per_part)
        if threaded:
            sink.write_on_threads(lanes, lane_bytes)
        sink.open(batch(0, 1).schema)
        points, start = [], 0
        for i, n in enumerate(sizes):
            sink.write(batch(start, n))
            start += n
            if i in commits:
                points.append(sink.commit())
        sink.close()
        runs.append((points, folder_state(folder), sorted(os.listdir(folder))))
    assert runs[0] == runs[1]
    rows = runs[1][1][2]
    assert [r["ts"] for r in rows] == list(range(sum(sizes)))  # every row, once, in order


class SlowFile(io.FileIO):
    """A real file whose close takes a while and is recorded (the lane finishes it)."""

    closed_at: dict[str, float] = {}

    def close(self) -> None:
        if not self.closed:
            time.sleep(0.05)
            SlowFile.closed_at[str(self.name)] = time.monotonic()
        super().close()


def test_commit_and_prepare_wait_for_the_lanes(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    sink = PartsSink(folder, max_rows_per_part=100, opener=lambda p, m: SlowFile(p, "wb"))
    sink.write_on_threads(2)
    sink.open(batch(0, 1).schema)
    for i in range(5):
        sink.write(batch(i * 100, 100))
    point = sink.prepare()
    done = time.monotonic()
    # every part the point counts is closed (fsynced first) before prepare returned
    assert point == {"parts": 5, "rows": 500}
    assert len(SlowFile.closed_at) == 5 and max(SlowFile.closed_at.values()) <= done
    assert committed_parts(folder) == []  # prepare renames nothing
    assert sink.commit() == {"parts": 5, "rows": 500}
    sink.close()
    assert folder_state(folder)[1] == [100] * 5
    assert sink.cpu_s > 0.0


class FullDisk(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_on_a_lane_is_one_sink_error_and_leaves_nothing(tmp_path: Path) -> None:
    """From the third part opened on, the disk is full: the run fails with one one-line
    SinkError naming a part that met the full disk (the two lanes open parts 2 and 3 in
    either order), and the folder is left empty."""
    opened: list[str] = []
    full: list[str] = []  # the parts that got the full disk
    lock = threading.Lock()

    def opener(path: str, mode: str) -> Any:
        with lock:
            opened.append(path)
            if len(opened) < 3:
                return open(path, mode)
            full.append(Path(path).name)
            return FullDisk()

    folder = tmp_path / "out"
    folder.mkdir()
    sink = PartsSink(folder, fmt="csv", opener=opener, max_rows_per_part=100)
    out = BackgroundSink(sink)  # a part folder: written directly, encoded on 2 lanes
    assert out.direct
    bs = [batch(i * 100, 100) for i in range(6)]
    with pytest.raises(SinkError, match="ENOSPC") as e:
        oop.from_batches(bs, time="ts").sink(out)
    msg = str(e.value)
    assert "\n" not in msg and any(name in msg for name in full)
    assert not any(Path(path).name in msg for path in opened[:2])  # not a part written well
    assert os.listdir(folder) == []


def test_background_sink_over_lanes_equals_a_plain_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 30_000
    ts = np.sort(rng.integers(0, 60_000, n)) + rng.integers(-500, 500, n)
    t = pa.table({"ts": ts, "k": rng.integers(0, 50, n), "v": rng.random(n)})

    def query() -> oop.Stream:
        s = oop.from_arrow(t, time="ts", unit="ms", punctuation=oop.BoundedDelay(600),
                           batch_size=700)
        return s.window(oop.Tumbling("1s"), [oop.agg.count(), oop.agg.sum("v")], by="k")

    want = query().run().table
    folder = tmp_path / "out"
    folder.mkdir()
    query().sink(BackgroundSink(PartsSink(folder, max_rows_per_part=400)))
    got = pq.read_table(folder)
    assert len(committed_parts(folder)) == -(-want.num_rows // 400)
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("lanes", [0, 2])
def test_a_part_is_fsynced_when_the_next_finishes_and_before_any_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lanes: int) -> None:
    """A finished part's write-back starts at once and its fsync waits for the next part
    (or the commit): at most one finished part is not yet fsynced, and every part is
    fsynced before it is recorded (prepare) or renamed (commit)."""
    import oop.io.parts as parts_mod

    synced: list[str] = []
    real = parts_mod.fsync

    def recording(f: Any) -> None:
        real(f)
        synced.append(Path(getattr(f, "name", "") or "").name)

    monkeypatch.setattr(parts_mod, "fsync", recording)
    folder = tmp_path / "out"
    sink = PartsSink(folder, max_rows_per_part=100)
    if lanes:
        sink.write_on_threads(lanes)
    sink.open(batch(0, 1).schema)
    for i in range(11):  # 550 rows: parts 0-4 finished on the way, part 5 open
        sink.write(batch(i * 50, 50))
        sink._wait()
        finished = (i + 1) * 50 // 100
        assert len(sink._unsynced) == min(finished, 1)
    point = sink.prepare()  # part 5 finished, every part fsynced, nothing renamed
    assert point == {"parts": 6, "rows": 550} and not sink._unsynced
    assert committed_parts(folder) == []
    sink.commit()
    sink.close()
    names, rows, table = folder_state(folder)
    assert names == [f"part-{k:05d}.parquet" for k in range(6)]
    assert rows == [100] * 5 + [50]
    assert [r["ts"] for r in table] == list(range(550))
    assert len(synced) >= 6  # each part once (and the folder's own fsyncs)


def test_abort_closes_a_part_not_yet_fsynced(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    sink = PartsSink(folder, max_rows_per_part=100)
    sink.open(batch(0, 1).schema)
    sink.write(batch(0, 150))  # part 0 finished (written back, not fsynced), part 1 open
    assert len(sink._unsynced) == 1
    sink.abort()
    assert not sink._unsynced and committed_parts(folder) == []
    assert [p.name for p in folder.iterdir()] == []
