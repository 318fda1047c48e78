"""Parsing a byte stream of CSV or NDJSON lines chunk by chunk with pyarrow.

A live feed (standard input, a socket) delivers bytes in arbitrary pieces.
:class:`LineChunks` keeps the incomplete last line, parses every complete line
it has with ``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` and returns
a table. The first chunk fixes the schema (the header line for CSV; the
inferred or given column types), so every later chunk has the same schema; a
column that is all null in the first chunk is read as string.

Limits: a CSV quoted field must not contain a newline (chunks are cut at
newlines). Cost: one pyarrow parse per chunk; no per-row Python.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from oop.errors import ConfigError

__all__ = ["LineChunks", "LINE_FORMATS"]

LINE_FORMATS = ("csv", "ndjson")


def _nulls_as_string(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.string() if pa.types.is_null(f.type) else f.type)
                      for f in schema])


class LineChunks:
    """Incremental CSV/NDJSON parser: :meth:`feed` bytes, get tables of complete lines."""

    def __init__(self, fmt: str, schema: pa.Schema | None = None) -> None:
        if fmt not in LINE_FORMATS:
            raise ConfigError(f"line format {fmt!r} is not one of {LINE_FORMATS}")
        self.fmt = fmt
        self.schema = schema
        self._header: bytes | None = None
        self._rest = b""

    def feed(self, data: bytes, final: bool = False) -> pa.Table | None:
        """Parse the complete lines of what was kept plus ``data`` (all of it if ``final``)."""
        data = self._rest + data
        cut = len(data) - 1 if final else data.rfind(b"\n")
        self._rest = data[cut + 1:]
        body = data[: cut + 1]
        if self.fmt == "csv" and self._header is None:
            body = self._take_header(body)
        if not body.strip():
            return None
        return self._csv(body) if self.fmt == "csv" else self._ndjson(body)

    def _take_header(self, body: bytes) -> bytes:
        i = body.find(b"\n")
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
            table = pacsv.read_csv(io.BytesIO(text))
            self.schema = _nulls_as_string(table.schema)
            if self.schema == table.schema:
                return table
        types = {f.name: f.type for f in self.schema}
        opts = pacsv.ConvertOptions(column_types=types, include_columns=self.schema.names)
        return pacsv.read_csv(io.BytesIO(text), convert_options=opts)

    def _ndjson(self, body: bytes) -> pa.Table:
        if self.schema is None:
            table = pajson.read_json(io.BytesIO(body))
            self.schema = _nulls_as_string(table.schema)
            if self.schema == table.schema:
                return table
        opts = pajson.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore")
        return pajson.read_json(io.BytesIO(body), parse_options=opts)
