"""A loopback HTTP/1.1 server that answers with scripted raw bytes, for fault tests.

Why not ``http.server``: the faults worth testing live below it (a chunk extension, trailers,
a body cut by a read boundary, a stream that stops without its end, a server that dies). A
script returns, per request, the steps to play on the socket: ``bytes`` are written (each with
its own ``send`` and ``TCP_NODELAY``, so separate steps usually arrive as separate reads),
a ``float`` sleeps that many seconds, :data:`CLOSE` closes the connection.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

CLOSE = object()

Step = bytes | float | object
Script = Callable[[int, bytes], Iterable[Step]]


@dataclass
class ScriptedServer:
    """Serves ``script(n, request)`` for the n-th request (from 0) on 127.0.0.1.

    ``inflight_max`` is the most requests it was answering at once, counted between reading a
    request and playing its last step. A ``GET`` (the client's ``/v1/models``: preflight, and
    the check that each slot's new connection is served before the clock starts) is answered
    here with a list of ``models``, counted in ``gets`` and not in ``n``, so scripts number
    only the requests they are about.
    """

    script: Script
    port: int = 0
    models: tuple[str, ...] = ("m",)
    gets: int = 0
    requests: int = 0
    inflight: int = 0
    inflight_max: int = 0
    _sock: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _conns: list[socket.socket] = field(default_factory=list)
    _stopped: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedServer:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(512)
        sock.settimeout(0.1)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._spawn(self._accept)
        return self

    def stop(self) -> None:
        """Closes the listening socket and every connection: the server is dead."""
        with self._lock:
            self._stopped = True
        if self._sock is not None:
            self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        for t in self._threads:
            t.join(timeout=5)

    def _models_response(self) -> bytes:
        body = json.dumps(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
        ).encode()
        return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stopped:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopped:  # accepted while stop() ran: dead servers answer nothing
                    conn.close()
                    return
                self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while not self._stopped:
                request, buf = _read_request(conn, buf)
                if request is None:
                    return
                if request.startswith(b"GET "):
                    with self._lock:
                        self.gets += 1
                    conn.sendall(self._models_response())
                    continue
                with self._lock:
                    n = self.requests
                    self.requests += 1
                    self.inflight += 1
                    self.inflight_max = max(self.inflight_max, self.inflight)
                try:
                    for step in self.script(n, request):
                        if step is CLOSE:
                            return
                        if isinstance(step, float):
                            time.sleep(step)
                        else:
                            assert isinstance(step, bytes)
                            conn.sendall(step)
                finally:
                    with self._lock:
                        self.inflight -= 1
        except OSError:
            return
        finally:
            conn.close()


def _read_request(conn: socket.socket, buf: bytes) -> tuple[bytes | None, bytes]:
    """One request (head and Content-Length body) from ``conn``; None when the peer closed."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, b""
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None, b""
        rest += data
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


def chunked(*payloads: bytes, last: bytes = b"0\r\n\r\n") -> bytes:
    """A chunked body of ``payloads`` and the given last-chunk bytes."""
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + last


def sse(*events: bytes) -> list[bytes]:
    """SSE ``data:`` events, each with its blank line."""
    return [b"data: " + e + b"\n\n" for e in events]


def delta(text: str) -> bytes:
    return b'{"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}' % (
        text.encode()
    )


FINISH = b'{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}'
USAGE = b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}'
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def stream_events(tokens: int, *, finish: bool = True, usage: bool = True,
                  done: bool = True) -> list[bytes]:
    """The SSE events of a chat stream of ``tokens`` one-word deltas."""
    events = [delta(f" w{i}") for i in range(tokens)]
    if finish:
        events.append(FINISH)
    if usage:
        events.append(USAGE % tokens)
    out = sse(*events)
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def every_split(raw: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``raw`` cut in two at every position."""
    for i in range(len(raw) + 1):
        yield raw[:i], raw[i:]
