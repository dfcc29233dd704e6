"""A lean HTTP/1.1 client on ``asyncio.Protocol``, built for measuring, not for convenience.

Why not httpx on the hot path: every layer between the socket and our clock delays the
timestamp and burns CPU that the other in-flight streams then wait for. This client does
only what a benchmark needs: it takes ``time.perf_counter_ns()`` at the top of
``data_received`` (the moment the bytes reach Python), strips HTTP framing, and stores the
raw body pieces with their arrival times. SSE and JSON parsing happen after the request
finished (see ``llmbench.runner.client.responses``), outside the measured path, so a busy client
does not stretch the numbers it reports. ``benchmarks/client_ceiling.py`` compares it with
httpx and with a bare socket reader.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from time import perf_counter_ns
from urllib.parse import urlsplit

_HEAD, _LENGTH, _CHUNKED, _EOF, _DONE = range(5)
_LAST_CHUNK = b"\r\n0\r\n\r\n"


class ConnectError(Exception):
    """The target could not be reached; the message names the URL."""


@dataclass(slots=True)
class Exchange:
    """One request/response on a connection: arrival-stamped body pieces and the outcome."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    chunked: bool = False
    error: str | None = None
    error_message: str | None = None
    done: asyncio.Future[None] | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go, with the request head pre-encoded once (no per-request formatting)."""

    host: str
    port: int
    path: str
    tls: bool
    base_url: str
    head_prefix: bytes

    @classmethod
    def from_url(cls, base_url: str, path: str, headers: dict[str, str] | None = None) -> Target:
        """Builds a target from ``http(s)://host:port`` and an endpoint path.

        A URL without a scheme (``localhost:8000``, as GenAI-Perf accepts) means ``http``.
        """
        if "://" not in base_url:
            base_url = "http://" + base_url
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url {base_url!r} is not an http(s) URL; use e.g. http://host:8000")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        prefix = parts.path.rstrip("/")
        # "http://h/v1" with endpoint "/v1/chat/completions" must not become "/v1/v1/...".
        full_path = prefix + path if prefix and not path.startswith(prefix + "/") else path
        host_header = parts.hostname if parts.port is None else f"{parts.hostname}:{port}"
        lines = [
            f"POST {full_path} HTTP/1.1",
            f"Host: {host_header}",
            "User-Agent: llmbench",
            "Accept: text/event-stream, application/json",
            "Content-Type: application/json",
        ]
        for key, value in (headers or {}).items():
            lines.append(f"{key}: {value}")
        head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
        base = f"{parts.scheme}://{host_header}{prefix}"
        return cls(parts.hostname, port, full_path, tls, base, head)

    def request_bytes(self, body: bytes) -> bytes:
        """The complete request; only the Content-Length varies per body."""
        return b"".join((self.head_prefix, str(len(body)).encode(), b"\r\n\r\n", body))


class Connection(asyncio.Protocol):
    """One keep-alive connection running one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.usable = False
        self._ex: Exchange | None = None
        self._state = _DONE
        self._head = b""
        self._left = 0
        self._tail = b""
        self._keep_alive = True

    # asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.usable = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        ex = self._ex
        if ex is None:
            return
        if self._state == _EOF:
            self._finish()
        else:
            where = "before the response head" if self._state == _HEAD else "mid-response"
            self._fail("disconnect", f"connection closed {where}" + (f": {exc}" if exc else ""))

    def data_received(self, data: bytes) -> None:
        ts = perf_counter_ns()
        if self._ex is None:
            return
        if self._state == _HEAD:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            data = self._head[end + 4 :]
            self._parse_head(self._head[:end])
            self._head = b""
            if self._ex is None or not data:
                return
        state = self._state
        if state == _CHUNKED:
            # Store the framed bytes as they are; de-chunking waits until the response is
            # complete (dechunk()). Here only the end must be seen: the last chunk is
            # "0\r\n\r\n" after the previous chunk's "\r\n" (no trailers from inference
            # servers), and JSON SSE payloads never hold a bare "\r\n0\r\n\r\n".
            self._ex.pieces.append((ts, data))
            tail = data[-7:] if len(data) >= 7 else (self._tail + data)[-7:]
            self._tail = tail
            if tail == _LAST_CHUNK:
                self._finish()
        elif state == _LENGTH:
            take = data[: self._left]
            self._ex.pieces.append((ts, take))
            self._left -= len(take)
            if self._left <= 0:
                self._finish()
        elif state == _EOF:
            self._ex.pieces.append((ts, data))

    # exchange ----------------------------------------------------------------------
    def start(self, payload: bytes, ex: Exchange) -> None:
        """Writes ``payload`` and makes ``ex.done`` resolve when the response is complete."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        ex.done = loop.create_future()
        self._ex = ex
        self._state = _HEAD
        self._head = b""
        self.transport.write(payload)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.usable = False

    # internals ---------------------------------------------------------------------
    def _parse_head(self, head: bytes) -> None:
        ex = self._ex
        assert ex is not None
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        try:
            ex.status = int(status_line[1])
        except (IndexError, ValueError):
            self._fail("protocol", f"bad status line {lines[0][:80]!r}")
            return
        headers = ex.headers
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        self._keep_alive = headers.get("connection", "").lower() != "close" and status_line[
            0
        ].endswith(b"1.1")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNKED
            ex.chunked = True
            self._tail = b"\r\n"  # an empty body is "0\r\n\r\n" right after the head
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self._state = _LENGTH
            if self._left == 0:
                self._finish()
        else:
            self._state = _EOF
            self._keep_alive = False

    def _finish(self) -> None:
        ex = self._ex
        self._ex = None
        self._state = _DONE
        if not self._keep_alive:
            self.usable = False
            if self.transport is not None:
                self.transport.close()
        if ex is not None and ex.done is not None and not ex.done.done():
            ex.done.set_result(None)

    def _fail(self, kind: str, message: str) -> None:
        ex = self._ex
        self._ex = None
        self._state = _DONE
        self.usable = False
        if self.transport is not None:
            self.transport.close()
        if ex is not None:
            ex.error = kind
            ex.error_message = message
            if ex.done is not None and not ex.done.done():
                ex.done.set_result(None)


def dechunk(pieces: list[tuple[int, bytes]]) -> tuple[list[tuple[int, bytes]], str | None]:
    """Removes chunked framing from arrival-stamped pieces, keeping each byte's arrival time.

    Returns the body pieces and an error text when the framing is broken or incomplete.
    """
    out: list[tuple[int, bytes]] = []
    left = 0  # payload bytes still due in the current chunk
    skip = 0  # CRLF bytes still due after a chunk's payload
    size_line = b""
    for ts, data in pieces:
        if size_line:
            # A size line cut by a read boundary, possibly between its "\r" and "\n".
            data, size_line = size_line + data, b""
        pos, n = 0, len(data)
        parts: list[bytes] = []
        while pos < n:
            if left:
                piece = data[pos : pos + left]
                parts.append(piece)
                pos += len(piece)
                left -= len(piece)
                if not left:
                    skip = 2
            elif skip:
                step = min(skip, n - pos)
                pos += step
                skip -= step
            else:
                nl = data.find(b"\r\n", pos)
                if nl < 0:
                    size_line += data[pos:]
                    break
                line = data[pos:nl]
                pos = nl + 2
                try:
                    size = int(line, 16)
                except ValueError:
                    try:  # chunk extensions ("1a;name=value") are legal, if rare
                        size = int(line.split(b";", 1)[0], 16)
                    except ValueError:
                        return out, f"bad chunk size line {line[:40]!r}"
                if size == 0:
                    if parts:
                        out.append((ts, b"".join(parts)))
                    return out, None
                left = size
        if parts:
            out.append((ts, b"".join(parts)))
    return out, "chunked body ended without its last chunk"


def body_pieces(ex: Exchange) -> tuple[list[tuple[int, bytes]], str | None]:
    """The response body as arrival-stamped pieces, whatever the framing."""
    if ex.chunked:
        return dechunk(ex.pieces)
    return ex.pieces, None


class Client:
    """Opens connections to one target and runs exchanges on them.

    Each closed-loop slot keeps its own connection (so N slots hold N sockets and nothing
    is shared or locked); open-loop dispatch takes an idle connection or opens one.
    """

    def __init__(self, target: Target, connect_timeout: float = 10.0) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if target.tls else None
        self._idle: list[Connection] = []
        self._all: set[Connection] = set()

    async def connect(self) -> Connection:
        """A new connection; failures raise :class:`ConnectError` naming the URL."""
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    Connection, self.target.host, self.target.port, ssl=self._ssl
                ),
                self.connect_timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectError(f"cannot connect to {self.target.base_url}: {exc}") from exc
        self._all.add(conn)
        return conn

    async def acquire(self) -> Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
        return await self.connect()

    def release(self, conn: Connection) -> None:
        if conn.usable:
            self._idle.append(conn)
        else:
            self._all.discard(conn)

    async def exchange(
        self, conn: Connection | None, body: bytes, timeout: float | None
    ) -> tuple[Exchange, int, Connection | None]:
        """Sends ``body`` and waits for the whole response.

        Returns the exchange, the send timestamp and the connection to reuse (None when it
        closed). The send timestamp is taken immediately before the bytes are written; when
        a new connection must be opened first, it is taken before connecting, because the
        user of the server pays for that connect too.
        """
        ex = Exchange()
        payload = self.target.request_bytes(body)
        sent = perf_counter_ns()
        if conn is None or not conn.usable:
            try:
                conn = await self.connect()
            except ConnectError as exc:
                ex.error, ex.error_message = "connect", str(exc)
                return ex, sent, None
        conn.start(payload, ex)
        assert ex.done is not None
        try:
            if timeout is None:
                await ex.done
            else:
                await asyncio.wait_for(asyncio.shield(ex.done), timeout)
        except TimeoutError:
            conn.abort()
            ex.error, ex.error_message = "timeout", f"no complete response after {timeout:g} s"
        except asyncio.CancelledError:
            conn.abort()
            raise
        return ex, sent, (conn if conn.usable else None)

    def close(self) -> None:
        for conn in list(self._all):
            if conn.transport is not None:
                conn.transport.close()
        self._all.clear()
        self._idle.clear()
