"""Parsing a byte stream of CSV or NDJSON lines chunk by chunk with pyarrow.

A live feed (standard input, a socket) delivers bytes in arbitrary pieces.
:class:`LineChunks` keeps the incomplete last line, parses every complete line
it has with ``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` and returns
a table. The first chunk fixes the schema (the header line for CSV; the
inferred or given column types), so every later chunk has the same schema; a
column that is all null in the first chunk is read as string.

A CSV record ends at a newline outside quotes: a quoted field may hold
newlines (and commas, and quotes doubled as ``""``), however the bytes are
chunked. Rule (:func:`record_ends`): a newline ends a record when the number of
``"`` before it, since the start of the feed, is even -- RFC 4180 quoting, where
a field holding a quote, comma or newline is quoted and its quotes doubled. The
parity of the bytes kept for the next chunk is carried, so every byte is
scanned once. Limit: a ``"`` inside an unquoted field (not RFC 4180; pyarrow
reads it as a literal) flips the parity, so lines wait for the next quote or
the end of the feed (late, never lost or cut).

Cost: one pyarrow parse per chunk; no per-row Python; a chunk without quotes
is cut with one ``rfind``; with quotes, two numpy scans of the new bytes.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from oop.errors import ConfigError

__all__ = ["LineChunks", "LINE_FORMATS", "record_ends", "record_ends_reference"]

LINE_FORMATS = ("csv", "ndjson")
_QUOTE, _NL = ord('"'), ord("\n")


def record_ends(data: bytes, odd: bool = False) -> tuple[np.ndarray, bool]:
    """``(positions of the newlines of data outside quotes, quote parity at its end)``.

    ``odd``: an odd number of ``"`` came before ``data`` (it starts inside a quoted field).
    A newline at position p ends a record when ``odd + (quotes in data[:p])`` is even.

    >>> record_ends(b'a,"x\\ny"\\nb\\n')
    (array([7, 9]), False)
    """
    a = np.frombuffer(data, np.uint8)
    nl = np.flatnonzero(a == _NL)
    quotes = np.flatnonzero(a == _QUOTE)
    before = np.searchsorted(quotes, nl) + int(odd)  # quotes before each newline
    return nl[before % 2 == 0], bool((len(quotes) + int(odd)) % 2)


def record_ends_reference(data: bytes, odd: bool = False) -> tuple[list[int], bool]:
    """Slow obviously-correct :func:`record_ends`: walk the bytes, flip on every quote."""
    ends: list[int] = []
    for i, byte in enumerate(data):
        if byte == _QUOTE:
            odd = not odd
        elif byte == _NL and not odd:
            ends.append(i)
    return ends, odd


def _nulls_as_string(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type) else f.type)
                      for f in schema])


def _parse_options(text: bytes) -> pacsv.ParseOptions:
    """Quoted fields may hold newlines (pyarrow's slower chunking only when quotes occur)."""
    return pacsv.ParseOptions(newlines_in_values=b'"' in text)


class LineChunks:
    """Incremental CSV/NDJSON parser: :meth:`feed` bytes, get tables of complete lines."""

    def __init__(self, fmt: str, schema: pa.Schema | None = None) -> None:
        if fmt not in LINE_FORMATS:
            raise ConfigError(f"line format {fmt!r} is not one of {LINE_FORMATS}")
        self.fmt = fmt
        self.schema = schema
        self._header: bytes | None = None
        self._rest = b""
        self._odd = False  # an odd number of quotes in _rest: it ends inside a quoted field

    def feed(self, data: bytes, final: bool = False) -> pa.Table | None:
        """Parse the complete records of what was kept plus ``data`` (all of it if ``final``)."""
        kept = len(self._rest)
        cut = self._last_end(data)
        data = self._rest + data
        if final:
            cut = len(data) - 1
        elif cut >= 0:
            cut += kept
        else:  # no record ends in data: keep it all (its parity is carried)
            self._rest = data
            return None
        self._rest = data[cut + 1:]
        self._odd = self.fmt == "csv" and self._rest.count(b'"') % 2 == 1
        body = data[: cut + 1]
        if self.fmt == "csv" and self._header is None:
            body = self._take_header(body)
        if not body.strip():
            return None
        return self._csv(body) if self.fmt == "csv" else self._ndjson(body)

    def _last_end(self, data: bytes) -> int:
        """Position in ``data`` of its last record end, or -1 (carries the quote parity)."""
        if self.fmt != "csv" or (not self._odd and b'"' not in data):
            return data.rfind(b"\n")
        ends, self._odd = record_ends(data, self._odd)
        return int(ends[-1]) if len(ends) else -1

    def _take_header(self, body: bytes) -> bytes:
        ends, _ = record_ends(body)
        i = int(ends[0]) if len(ends) else -1
        if i < 0:
            if body.strip():
                self._header = body + b"\n"
            return b""
        self._header = body[: i + 1]
        return body[i + 1:]

    def _csv(self, body: bytes) -> pa.Table:
        assert self._header is not None
        text = self._header + body
        if self.schema is None:
            table = pacsv.read_csv(io.BytesIO(text), parse_options=_parse_options(text))
            self.schema = _nulls_as_string(table.schema)
            if self.schema == table.schema:
                return table
        types = {f.name: f.type for f in self.schema}
        opts = pacsv.ConvertOptions(column_types=types, include_columns=self.schema.names)
        return pacsv.read_csv(io.BytesIO(text), parse_options=_parse_options(text),
                              convert_options=opts)

    def _ndjson(self, body: bytes) -> pa.Table:
        if self.schema is None:
            table = pajson.read_json(io.BytesIO(body))
            self.schema = _nulls_as_string(table.schema)
            if self.schema == table.schema:
                return table
        opts = pajson.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore")
        return pajson.read_json(io.BytesIO(body), parse_options=opts)
