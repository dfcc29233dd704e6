"""Fixtures shared by the runner tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ServeHTTP = Callable[[type[BaseHTTPRequestHandler]], str]


@pytest.fixture
def serve_http() -> Iterator[ServeHTTP]:
    """Serves a handler class on 127.0.0.1 in a thread; returns its base URL.

    Every server started through the fixture is shut down when the test ends.
    """
    servers: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

