"""Reading one file of a known format in chunks, and checking it against a reference schema.

:func:`open_file` returns a file's Arrow schema and an iterator of record
batches starting after ``skip`` rows, never the whole file:

* Parquet: ``ParquetFile.iter_batches``; ``skip`` drops whole row groups by
  their metadata, then slices the first batch (cost: the row groups read);
* CSV: ``pyarrow.csv.open_csv`` streaming reader with ``block_size``; skipped
  rows are read and dropped (cost: parsing them). The column types of later
  files are the first file's (text has no types: a column that is all integers
  in one file is still read as the first file's float);
* NDJSON: blocks of bytes cut at a newline, each parsed by
  ``pyarrow.json.read_json`` with the schema inferred from the first block
  (later fields ignored); skipped rows are parsed and dropped;
* Arrow IPC: the file format (magic ``ARROW1``) reads record batches by index
  and skips whole batches by their row counts; the stream format reads and drops.

:func:`conformer` checks a file schema against the first file's and returns
the per-batch conversion: extra columns dropped, lossless integer widening and
string/large_string (binary/large_binary) cast; anything else is a
:class:`~oop.errors.SchemaMismatchError` naming the file and columns.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pyarrow.types as pat

from oop.errors import ConfigError, SchemaMismatchError

__all__ = ["FORMATS", "EXTENSIONS", "format_of", "open_file", "parquet_file", "conformer", "Conform"]

EXTENSIONS: dict[str, str] = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".ndjson": "ndjson",
    ".jsonl": "ndjson", ".json": "ndjson", ".arrow": "arrow", ".arrows": "arrow",
    ".ipc": "arrow", ".feather": "arrow",
}
FORMATS = ("parquet", "csv", "ndjson", "arrow")
_NDJSON_BLOCK = 1 << 20  # bytes parsed at a time
_CSV_BLOCK = 1 << 20

Batches = Iterator[pa.RecordBatch]
Conform = Callable[[pa.RecordBatch], pa.RecordBatch]


def format_of(path: Path, fmt: str | None) -> str | None:
    """The format to read ``path`` with: ``fmt`` if given, else by its extension (None: unknown)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ConfigError(f"format {fmt!r} is not one of {', '.join(FORMATS)}; "
                              "pass one of them")
        return fmt
    return EXTENSIONS.get(path.suffix.lower())


def open_file(path: Path, fmt: str, skip: int, chunk_rows: int,
              types: pa.Schema | None = None) -> tuple[pa.Schema, Batches]:
    """The file's schema and its batches after ``skip`` rows (at most ``chunk_rows`` for
    Parquet; other formats give the reader's own chunks). ``types`` (the first file's
    schema) fixes the types of the columns that CSV and NDJSON text would otherwise
    infer per file; Parquet reads only the columns of ``types``. Arrow errors propagate."""
    if fmt == "csv":
        return _csv(path, skip, types)
    if fmt == "ndjson":
        return _ndjson(path, skip, types)
    return _parquet(path, skip, chunk_rows, types) if fmt == "parquet" else _arrow(path, skip)


def _text_types(types: pa.Schema | None) -> dict[str, pa.DataType]:
    """The column types to impose on text formats (null-typed columns left to inference)."""
    return {f.name: f.type for f in types or [] if not pat.is_null(f.type)}


def _drop(batches: Batches, skip: int) -> Batches:
    """Drop the first ``skip`` rows of a batch iterator (slicing the batch that straddles)."""
    for b in batches:
        if skip >= b.num_rows:
            skip -= b.num_rows
            continue
        yield b.slice(skip) if skip else b
        skip = 0


# ---- Parquet -------------------------------------------------------------
_READ_BUFFER = 1 << 20


def parquet_file(path: str | Path) -> pq.ParquetFile:
    """``path`` opened for streaming its batches in bounded memory.

    ``pre_buffer=False``: with pyarrow's default (pre-buffering on), ``iter_batches``
    keeps every column chunk it fetched until the file is closed, so memory grows
    with the file -- 150 MiB held at the end of a 10M-row, 157 MB file (peak RSS
    248 MiB against 100 MiB without; a 3M-row file: 140 against 100). Pre-buffering
    coalesces reads for object stores; local files read as fast without it.
    ``buffer_size``: column chunks are read through a 1 MiB buffer instead of whole
    (less system time and ~15 MiB less peak RSS on the 50M-row sliding benchmark).
    """
    return pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER)


def _parquet(path: Path, skip: int, chunk_rows: int,
             types: pa.Schema | None) -> tuple[pa.Schema, Batches]:
    pf = parquet_file(path)
    names = pf.schema_arrow.names
    columns = None if types is None else [n for n in types.names if n in names]
    meta = pf.metadata
    first, skipped = 0, 0
    while first < meta.num_row_groups and skipped + meta.row_group(first).num_rows <= skip:
        skipped += meta.row_group(first).num_rows
        first += 1

    def gen() -> Batches:
        try:
            if first < meta.num_row_groups:
                groups = list(range(first, meta.num_row_groups))
                # one thread: decoding the columns on Arrow's pool threads costs ~16 MiB
                # of resident memory (their stacks and allocator heaps) for little speed
                # at these batch sizes
                batches = pf.iter_batches(batch_size=chunk_rows, row_groups=groups,
                                          columns=columns, use_threads=False)
                yield from _drop(batches, skip - skipped)
        finally:
            pf.close()

    return pf.schema_arrow, gen()


def _closing(reader: pacsv.CSVStreamingReader | ipc.RecordBatchStreamReader,
             skip: int) -> Batches:
    """The reader's batches after ``skip`` rows; the reader is closed when they end."""
    try:
        yield from _drop(reader, skip)
    finally:
        reader.close()


# ---- CSV -----------------------------------------------------------------
def _csv(path: Path, skip: int, types: pa.Schema | None) -> tuple[pa.Schema, Batches]:
    reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK),
                            # quoted fields may hold newlines, across blocks (cost ~2 %)
                            parse_options=pacsv.ParseOptions(newlines_in_values=True),
                            convert_options=pacsv.ConvertOptions(column_types=_text_types(types)))

    return reader.schema, _closing(reader, skip)


# ---- NDJSON --------------------------------------------------------------
def _blocks(f: io.BufferedReader) -> Iterator[bytes]:
    """Byte blocks of about ``_NDJSON_BLOCK`` that end at a newline (the last may not)."""
    rest = b""
    while True:
        data = f.read(_NDJSON_BLOCK)
        if not data:
            if rest.strip():
                yield rest
            return
        data = rest + data
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        rest = data[cut + 1:]
        if data[:cut].strip():
            yield data[: cut + 1]


def _ndjson(path: Path, skip: int, types: pa.Schema | None) -> tuple[pa.Schema, Batches]:
    f = open(path, "rb")
    blocks = _blocks(f)
    fixed = _text_types(types)
    try:
        first = next(blocks, None)
        head = pajson.read_json(io.BytesIO(first)) if first else pa.table({})
        schema = pa.schema([(n, fixed.get(n, t)) for n, t in zip(head.schema.names,
                                                                 head.schema.types)])
        opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        if schema != head.schema:
            head = pajson.read_json(io.BytesIO(first), parse_options=opts)  # type: ignore[arg-type]
    except BaseException:
        f.close()
        raise

    def chunks() -> Batches:
        yield from head.to_batches()
        for block in blocks:
            yield from pajson.read_json(io.BytesIO(block), parse_options=opts).to_batches()

    def gen() -> Batches:
        try:
            yield from _drop(chunks(), skip)
        finally:
            f.close()

    return head.schema, gen()


# ---- Arrow IPC (file or stream) -----------------------------------------
def _arrow(path: Path, skip: int) -> tuple[pa.Schema, Batches]:
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic == b"ARROW1":
        return _arrow_file(path, skip)
    reader = ipc.open_stream(pa.OSFile(str(path), "rb"))

    return reader.schema, _closing(reader, skip)


def _arrow_file(path: Path, skip: int) -> tuple[pa.Schema, Batches]:
    source = pa.memory_map(str(path), "r")
    reader = ipc.open_file(source)

    def gen() -> Batches:
        left = skip
        try:
            for i in range(reader.num_record_batches):
                b = reader.get_batch(i)  # memory-mapped: cheap to look at
                if left >= b.num_rows:
                    left -= b.num_rows
                    continue
                yield b.slice(left) if left else b
                left = 0
        finally:
            source.close()

    return reader.schema, gen()


# ---- schema conformance -------------------------------------------------
def _widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """True when every ``src`` value is exactly a ``dst`` value (cast allowed); a null-typed
    column (an empty CSV/NDJSON file's) fits any type."""
    if pat.is_null(src):
        return True
    if pat.is_integer(src) and pat.is_integer(dst):
        if pat.is_signed_integer(src) and not pat.is_signed_integer(dst):
            return False
        wider = dst.bit_width > src.bit_width
        same_sign = pat.is_signed_integer(src) == pat.is_signed_integer(dst)
        return wider if (same_sign or pat.is_signed_integer(dst)) else False
    strings = {pa.string(), pa.large_string()}
    binaries = {pa.binary(), pa.large_binary()}
    return (src in strings and dst in strings) or (src in binaries and dst in binaries)


def _same(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def conformer(ref: pa.Schema, got: pa.Schema, where: str) -> Conform:
    """The conversion of ``got`` batches to ``ref`` (see module doc); raises on a mismatch."""
    if len(got) == 0:  # an empty NDJSON file: no columns, no rows
        return _same
    names = set(got.names)
    missing = [n for n in ref.names if n not in names]
    if missing:
        extra = [n for n in got.names if n not in ref.names]
        hint = f" (it has {extra} instead: renamed?)" if extra else ""
        raise SchemaMismatchError(
            f"{where}: lacks column(s) {missing} of the first file's schema{hint}; "
            "every file must have the first file's columns"
        )
    bad = [f"{f.name}: {got.field(f.name).type} (first file: {f.type})" for f in ref
           if got.field(f.name).type != f.type and not _widens(got.field(f.name).type, f.type)]
    if bad:
        raise SchemaMismatchError(
            f"{where}: column type(s) differ from the first file's: {'; '.join(bad)}; "
            "rewrite the file with the first file's types"
        )
    casts = [f.type if got.field(f.name).type != f.type else None for f in ref]
    if got.names == ref.names and not any(casts):
        return _same  # already the first file's columns, in its order and types

    def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
        cols = [batch.column(n) if t is None else batch.column(n).cast(t)
                for n, t in zip(ref.names, casts)]
        return pa.RecordBatch.from_arrays(cols, schema=ref)

    return conform
