"""A real redis-server for tests, started on a free port of 127.0.0.1 and stopped after.

Under pytest-xdist another worker may take the port between choosing it and the bind;
then our server exits and a PING would reach theirs. The server is therefore asked for
its process id, and on a mismatch (or no answer) a new port is tried.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(client: Any, proc: subprocess.Popen) -> bool:
    import redis

    for _ in range(200):
        if proc.poll() is not None:  # exited: the port was taken
            return False
        try:
            return client.info("server")["process_id"] == proc.pid
        except redis.ConnectionError:
            time.sleep(0.025)
    return False


@contextmanager
def redis_server(attempts: int = 5) -> Iterator[tuple[int, Any]]:
    """``(port, client)`` of a redis-server this test process started and owns."""
    import redis

    assert SERVER is not None, "redis-server is not installed (apt-get install redis-server)"
    for _ in range(attempts):
        port = free_port()
        proc = subprocess.Popen([SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save",
                                 "", "--appendonly", "no", "--daemonize", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            if _answers(client, proc):
                yield port, client
                return
        finally:
            client.close()
            proc.kill()
            proc.wait(5)
    raise RuntimeError(f"no redis-server of ours answered on a free port in {attempts} tries")
