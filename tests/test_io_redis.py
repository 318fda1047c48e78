"""RedisStreamSource against a real redis-server started on a free port for this module."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from oop.errors import SourceError
from oop.io.protocol import IDLE, SourceConnector
from oop.io.redis_source import RedisStreamSource, parse_redis_url
from _redis_server import SERVER, free_port, redis_server

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(SERVER is None, reason="redis-server binary not installed "
                                                       "(Debian package redis-server)")


@pytest.fixture(scope="module")
def port():
    with redis_server() as (p, _client):
        yield p


@pytest.fixture
def stream(port, request):
    key = f"s-{request.node.name}"
    client = redis.Redis(host="127.0.0.1", port=port)
    yield client, key, f"redis://127.0.0.1:{port}/{key}"
    client.delete(key)
    client.close()


def add(client, key, rows):
    return [client.xadd(key, r).decode() for r in rows]


ROWS = [{"ts": i, "k": f"k{i % 3}", "v": i / 4} for i in range(10)]


def test_poll_rows_offsets_and_idle(stream):
    client, key, url = stream
    ids = add(client, key, ROWS)
    src = RedisStreamSource(url)
    assert isinstance(src, SourceConnector) and src.live and src.resumable
    assert src.open() is None
    first = src.poll(4, timeout=0.05)
    assert first.num_rows == 4 and src.offset() == ids[3]
    assert first.schema == pa.schema([("ts", pa.int64()), ("k", pa.string()), ("v", pa.float64())])
    rest = [src.poll(4, timeout=0.05) for _ in range(2)]
    assert [b.num_rows for b in rest] == [4, 2] and src.offset() == ids[-1]
    t0 = time.monotonic()
    assert src.poll(4, timeout=0.1) is IDLE
    assert time.monotonic() - t0 >= 0.09
    got = pa.Table.from_batches([first] + rest)
    assert got.to_pylist() == ROWS
    add(client, key, [{"ts": 10, "k": "x", "v": 2}])  # an int in a float column is cast
    assert src.poll(4, timeout=0.05).to_pylist() == [{"ts": 10, "k": "x", "v": 2.0}]
    src.close()


def test_seek_after_a_crash_gets_exactly_the_remaining_rows(stream):
    client, key, url = stream
    add(client, key, ROWS)
    src = RedisStreamSource(url)
    src.open()
    src.poll(3, timeout=0.05)
    off = src.offset()
    src.close()  # the crash
    again = RedisStreamSource(url)
    again.open()
    again.seek(off)
    assert again.poll(100, timeout=0.05).to_pylist() == ROWS[3:]
    assert again.poll(100, timeout=0.01) is IDLE


def test_declared_schema_and_bad_value(stream):
    client, key, url = stream
    add(client, key, [{"ts": 1, "v": "1.5"}, {"ts": 2, "v": "oops", "extra": 1}])
    schema = pa.schema([("ts", pa.int32()), ("v", pa.float64()), ("missing", pa.string())])
    src = RedisStreamSource(url, schema=schema)
    assert src.open() == schema
    assert src.poll(1, timeout=0.05).to_pylist() == [{"ts": 1, "v": 1.5, "missing": None}]
    with pytest.raises(SourceError, match=r"entry \d+-\d+ field 'v' value 'oops' does not parse"):
        src.poll(1, timeout=0.05)


def test_inferred_schema_then_bad_value_in_a_later_batch(stream):
    client, key, url = stream
    add(client, key, [{"n": 1}, {"n": 2}, {"n": "three"}])
    src = RedisStreamSource(url)
    src.open()
    assert src.poll(2, timeout=0.05).column("n").type == pa.int64()
    with pytest.raises(SourceError, match="field 'n' value 'three'"):
        src.poll(2, timeout=0.05)


def test_bad_url_and_refused_connection(port):
    for bad in ("http://127.0.0.1/x", "redis://127.0.0.1:1234", "redis://h:notaport/k"):
        with pytest.raises(SourceError, match="redis URL"):
            RedisStreamSource(bad)
    assert parse_redis_url("redis://h/k?db=2") == ("h", 6379, 2, "k")
    dead = free_port()
    with pytest.raises(SourceError, match=f"127.0.0.1:{dead}.*start redis-server") as e:
        RedisStreamSource(f"redis://127.0.0.1:{dead}/k").open()
    assert "\n" not in str(e.value)
