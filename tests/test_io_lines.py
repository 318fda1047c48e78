"""CSV records with quoted newlines on live feeds (:mod:`oop.io.lines`, :mod:`oop.io.live`).

A record ends at a newline outside quotes whatever the chunking: the quote-parity kernel
equals its byte-walking reference (also scanned in pieces with the parity carried), and
Hypothesis-generated RFC 4180 CSV (fields with commas, quotes and newlines) fed in arbitrary
chunk sizes -- to :class:`LineChunks`, through :class:`StreamSource`, and to ``oop replay``
on standard input -- gives the rows ``pyarrow.csv.read_csv`` gives for the whole text.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from oop.io.lines import LineChunks, record_ends, record_ends_reference
from oop.io.live import StreamSource
from oop.io.protocol import END, IDLE

ROOT = Path(__file__).resolve().parents[1]

# a field: starts with "x" (so pyarrow infers a string column), then any of , " newline space
FIELD = st.text(alphabet='xy ,"\n', max_size=8).map(lambda s: "x" + s)


def quote(field: str, always: bool) -> str:
    """RFC 4180: a field holding a comma, quote or newline is quoted, its quotes doubled."""
    if always or any(c in field for c in ',"\n'):
        return '"' + field.replace('"', '""') + '"'
    return field


@st.composite
def csv_text(draw: Any) -> tuple[bytes, int]:
    """(a CSV document with a header and 1-3 columns, its number of columns)."""
    ncols = draw(st.integers(1, 3))
    rows = draw(st.lists(st.lists(FIELD, min_size=ncols, max_size=ncols), min_size=1,
                         max_size=30))
    always = draw(st.booleans())
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    lines = [",".join(f"c{i}" for i in range(ncols))]
    lines += [",".join(quote(f, always) for f in row) for row in rows]
    text = eol.join(lines) + (eol if draw(st.booleans()) else "")
    return text.encode(), ncols


def chunks(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` cut into pieces of the given sizes (cycled)."""
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i:i + n])
        i, k = i + n, k + 1
    return out


def whole(data: bytes) -> pa.Table:
    """The reference: pyarrow reading the whole text at once."""
    return pacsv.read_csv(io.BytesIO(data),
                          parse_options=pacsv.ParseOptions(newlines_in_values=True))


SIZES = st.lists(st.integers(1, 40), min_size=1, max_size=6)


# ---- the kernel ------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200).map(lambda b: bytes(b'a",\n'[x % 4] for x in b)),
       odd=st.booleans(), sizes=SIZES)
def test_record_ends_equal_the_reference_in_one_piece_and_in_chunks(data: bytes, odd: bool,
                                                                    sizes: list[int]) -> None:
    ends, parity = record_ends(data, odd)
    want, want_parity = record_ends_reference(data, odd)
    assert ends.tolist() == want and parity == want_parity
    got, base, carry = [], 0, odd  # scanned piece by piece with the parity carried
    for piece in chunks(data, sizes):
        e, carry = record_ends(piece, carry)
        got += (e + base).tolist()
        base += len(piece)
    assert got == want and carry == want_parity


# ---- LineChunks and StreamSource -------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(doc=csv_text(), sizes=SIZES)
def test_line_chunks_in_any_chunking_read_what_read_csv_reads(doc: tuple[bytes, int],
                                                              sizes: list[int]) -> None:
    data, _ = doc
    lc = LineChunks("csv")
    parts = [lc.feed(p) for p in chunks(data, sizes)] + [lc.feed(b"", final=True)]
    tables = [t for t in parts if t is not None]
    got = pa.concat_tables(tables) if tables else None
    want = whole(data)
    assert got is not None and got.to_pylist() == want.to_pylist()
    assert got.schema == want.schema


class Pieces(io.RawIOBase):
    """A binary stream (like a pipe) whose ``read1`` returns the given pieces one by one."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def drain(src: StreamSource, max_rows: int) -> pa.Table:
    src.open()
    batches = []
    while (got := src.poll(max_rows, timeout=5.0)) is not END:
        assert got is not IDLE, "the feed stalled"
        batches.append(got)
    src.close()
    return pa.Table.from_batches(batches)


@settings(max_examples=40, deadline=None)
@given(doc=csv_text(), sizes=SIZES, max_rows=st.integers(1, 50))
def test_a_stream_source_in_any_chunking_reads_what_read_csv_reads(
        doc: tuple[bytes, int], sizes: list[int], max_rows: int) -> None:
    data, _ = doc
    got = drain(StreamSource(Pieces(chunks(data, sizes)), "csv", name="pieces"), max_rows)
    assert got.to_pylist() == whole(data).to_pylist()


# ---- oop replay on standard input --------------------------------------------------------
def test_replay_on_stdin_and_a_csv_file_keeps_keys_with_newlines_whole(tmp_path: Path) -> None:
    """String keys holding newlines, commas and quotes, written by pyarrow, through stdin and
    from the CSV file: the windows are those of the same rows read from Parquet. Most
    newlines of the text are inside quotes, so the reads of standard input (64 KiB; one
    read per parse with --batch-size 100) and the file's 1 MiB blocks end inside quoted
    fields."""
    n = 60_000
    keys = ['plain', 'two\nlines', 'a,b', 'say "hi"\r\nthere', '\n', "long" + "\nline" * 60]
    table = pa.table({"ts": pa.array([i * 7 for i in range(n)], pa.int64()),
                      "k": [keys[i % len(keys)] for i in range(n)],
                      "v": pa.array([i % 13 for i in range(n)], pa.int64())})
    pacsv.write_csv(table, tmp_path / "in.csv")
    assert (tmp_path / "in.csv").stat().st_size > 3 << 20  # 4 blocks
    pq.write_table(table, tmp_path / "in.parquet")
    query = ["--time", "ts", "--time-unit", "ms", "--key", "k", "--window", "tumbling:1s",
             "--agg", "count", "--agg", "sum:v", "--punctuation", "bounded:1s", "--quiet",
             "--batch-size", "100"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def replay(source: str, out: str) -> list[tuple[Any, ...]]:
        with (tmp_path / "in.csv").open("rb") as stdin:
            p = subprocess.run([sys.executable, "-m", "oop.cli", "replay", "--input", source,
                                *query, "--out", str(tmp_path / out)], stdin=stdin, env=env,
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        t = pq.read_table(tmp_path / out).select(["k", "window_start", "count", "sum_v"])
        return sorted(zip(*(c.to_pylist() for c in t.columns)), key=repr)

    want = replay(str(tmp_path / "in.parquet"), "p.parquet")
    assert {r[0] for r in want} == set(keys) and sum(r[2] for r in want) == n
    assert replay("-", "s.parquet") == want
    assert replay(str(tmp_path / "in.csv"), "c.parquet") == want
