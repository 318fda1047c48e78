"""``RedisStreamSource``: a Redis stream read with XREAD, one entry per row.

URL: ``redis://HOST[:PORT]/STREAMKEY`` (port 6379 by default; ``?db=N``
selects a database). Each entry's fields are the row's columns; values are
decoded as UTF-8 text and typed by ``schema=`` when given, otherwise by the
first batch: a column whose values all parse as integers is int64, as numbers
float64, else string. Later batches are cast to that schema; a value that
does not parse is a :class:`~oop.errors.SourceError` naming the entry id, the
field and the value. A field missing from an entry is null; fields not in the
schema are ignored.

``poll`` issues ``XREAD COUNT max_rows BLOCK timeout`` after the last id read
and returns IDLE when nothing came. ``offset()`` is the last entry id read
(``"ms-seq"``); ``seek(id)`` continues after it. live, resumable.

Cost: one round trip per poll; building the columns loops over the entries in
Python (redis-py hands them over as Python objects), then casts with pyarrow.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, SourceError
from oop.io.protocol import IDLE, END, Offset, Poll

__all__ = ["RedisStreamSource", "parse_redis_url"]

_ID = re.compile(r"^\d+-\d+$")
Entries = list[tuple[bytes, dict[bytes, bytes]]]


def parse_redis_url(url: str) -> tuple[str, int, int, str]:
    """``(host, port, db, key)`` of ``redis://host:port/key?db=N``; SourceError if malformed."""
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
        db = int(parse_qs(parts.query).get("db", ["0"])[0])
    except ValueError as e:
        raise SourceError(f"redis URL {url!r}: {e}; write redis://HOST:PORT/STREAMKEY") from e
    key = parts.path.lstrip("/")
    if parts.scheme != "redis" or not parts.hostname or not key:
        raise SourceError(f"redis URL {url!r} is not redis://HOST:PORT/STREAMKEY; "
                          "give the scheme redis, a host and a stream key")
    return parts.hostname, port, db, key


def _infer(values: pa.Array) -> pa.DataType:
    """int64 if every value parses as an integer, float64 if as a number, else string."""
    for t in (pa.int64(), pa.float64()):
        try:
            pc.cast(values, t)
            return t
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return pa.string()


class RedisStreamSource:
    """A Redis stream as a live, resumable feed (see module doc)."""

    live = True
    resumable = True

    def __init__(self, url: str, *, schema: pa.Schema | None = None, start_id: str = "0-0",
                 name: str | None = None, connect_timeout: float = 2.0) -> None:
        self.url = url
        self.host, self.port, self.db, self.key = parse_redis_url(url)
        self.schema = schema
        self.name = name or f"redis stream {self.key!r} at {self.host}:{self.port}"
        self.connect_timeout = connect_timeout
        self._last = self._check_id(start_id)
        self._client: Any = None
        self._stopped = False

    # ---- contract ------------------------------------------------------
    def open(self) -> pa.Schema | None:
        """Connect and PING; the declared schema (None: inferred from the first batch)."""
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        if self._client is None:  # two quick retries: a refused connection fails in ~0.1 s
            self._client = redis.Redis(host=self.host, port=self.port, db=self.db,
                                       socket_connect_timeout=self.connect_timeout,
                                       retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 2))
            self._call(self._client.ping)
        return self.schema

    def poll(self, max_rows: int, timeout: float = 0.1) -> Poll:
        """Up to ``max_rows`` entries after the last id; IDLE when none came within ``timeout``."""
        if max_rows < 1:
            raise ConfigError(f"source {self.name!r}: max_rows={max_rows} must be at least 1")
        if self._stopped:
            return END
        if self._client is None:
            self.open()
        block = max(1, int(timeout * 1000)) if timeout > 0 else None
        reply = self._call(lambda: self._client.xread({self.key: self._last}, count=max_rows,
                                                      block=block))
        entries = self._entries(reply)
        if not entries:
            return IDLE
        batch = self._batch(entries)
        self._last = entries[-1][0].decode()
        return batch

    def offset(self) -> Offset:
        return self._last

    def seek(self, offset: Offset) -> None:
        """Continue after entry id ``offset`` (``"ms-seq"`` from :meth:`offset`)."""
        self._last = self._check_id(offset)

    def stop(self) -> None:
        """End the feed at the next poll (thread-safe; ``--stop-after-idle``, signals)."""
        self._stopped = True

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # ---- helpers -------------------------------------------------------
    def _check_id(self, entry_id: Any) -> str:
        if not isinstance(entry_id, str) or not _ID.match(entry_id):
            raise ConfigError(f"source {self.name!r}: offset {entry_id!r} is not a stream "
                              "entry id 'ms-seq' (from RedisStreamSource.offset())")
        return entry_id

    def _call(self, fn: Any) -> Any:
        import redis

        try:
            return fn()
        except redis.ConnectionError as e:
            raise SourceError(f"source {self.name!r}: cannot reach redis at {self.host}:"
                              f"{self.port} ({str(e).splitlines()[0]}); start redis-server "
                              "or fix the URL") from e
        except redis.ResponseError as e:
            raise SourceError(f"source {self.name!r}: redis refused XREAD on {self.key!r} "
                              f"({e}); is the key a stream?") from e

    def _entries(self, reply: Any) -> Entries:
        if not reply:
            return []
        return [e for _key, stream_entries in reply for e in stream_entries]

    def _batch(self, entries: Entries) -> pa.RecordBatch:
        names = self.schema.names if self.schema is not None else self._field_names(entries)
        texts = {n: pa.array([_text(f.get(n.encode())) for _, f in entries], pa.string())
                 for n in names}
        if self.schema is None:
            self.schema = pa.schema([(n, _infer(texts[n])) for n in names])
        cols = [self._cast(texts[f.name], f, entries) for f in self.schema]
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)

    @staticmethod
    def _field_names(entries: Entries) -> list[str]:
        seen: dict[str, None] = {}
        for _, fields in entries:
            for k in fields:
                seen.setdefault(k.decode(), None)
        return list(seen)

    def _cast(self, values: pa.Array, field: pa.Field, entries: Entries) -> pa.Array:
        if field.type == pa.string():
            return values
        try:
            return pc.cast(values, field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for (entry_id, _), v in zip(entries, values.to_pylist()):
                try:
                    pc.cast(pa.array([v], pa.string()), field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SourceError(
                        f"source {self.name!r}: entry {entry_id.decode()} field {field.name!r} "
                        f"value {v!r} does not parse as {field.type}; fix the producer or "
                        "pass schema=") from None
            raise


def _text(v: bytes | None) -> str | None:
    return None if v is None else v.decode("utf-8", errors="replace")
