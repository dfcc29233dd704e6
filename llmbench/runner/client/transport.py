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
from typing import cast
from urllib.parse import urlsplit

_HEAD, _LENGTH, _CHUNKED, _EOF, _DONE = range(5)


class ConnectError(Exception):
    """The target could not be reached; the message names the URL."""


@dataclass(slots=True)
class Exchange:
    """One request/response on a connection: arrival-stamped body pieces and the outcome.

    ``sent_ns`` is taken when the request's first byte is handed to the socket of an open
    connection; ``connect_ns`` is the time this request spent opening that connection first
    (0: it went on one already open, the rule in a closed loop; a failed connect keeps its
    attempt's start in ``sent_ns``). ``error`` is set once and never overwritten, so the
    abort that follows a timeout or a stop cannot turn it into a ``disconnect``.
    """

    sent_ns: int = 0
    connect_ns: int = 0
    size: int = 0
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    chunked: bool = False
    error: str | None = None
    error_message: str | None = None
    done: asyncio.Future[None] | None = None

    def received(self) -> int:
        """Bytes of the response body (framing included) that arrived, counted as they came
        (one addition per read, instead of a walk over the pieces per request in a wave)."""
        return self.size
@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go, with the request head pre-encoded once (no per-request formatting)."""

    host: str
    port: int
    path: str
    tls: bool
    base_url: str
    head_prefix: bytes
    #: ``GET <prefix>/v1/models``, sent once on each new slot connection before the clock:
    #: any answer proves the server accepted the connection and serves on it
    verify_request: bytes = b""

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
        try:
            port = parts.port or (443 if tls else 80)
        except ValueError:  # urlsplit's "Port out of range 0-65535"
            raise ValueError(
                f"--url {base_url!r}: the port must be a number from 1 to 65535"
            ) from None
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
        models = (prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix) + "/v1/models"
        verify = [f"GET {models} HTTP/1.1", *lines[1:3]]
        verify += [f"{key}: {value}" for key, value in (headers or {}).items()]
        verify_request = ("\r\n".join(verify) + "\r\n\r\n").encode("latin-1")
        return cls(parts.hostname, port, full_path, tls, base, head, verify_request)

    def request_bytes(self, body: bytes) -> bytes:
        """The complete request; only the Content-Length varies per body."""
        return b"".join((self.head_prefix, str(len(body)).encode(), b"\r\n\r\n", body))


class Connection(asyncio.Protocol):
    """One keep-alive connection running one exchange at a time.

    The end of a response is found while its bytes arrive (Content-Length counted down, chunk
    sizes followed, end of file), so no request waits for its timeout because the end of a body
    was missed; de-chunking and parsing wait until the response is complete (:func:`dechunk`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.usable = False
        self._loop = loop
        self._ex: Exchange | None = None
        self._state = _DONE
        self._head = b""
        self._left = 0  # _LENGTH: body bytes due; _CHUNKED: payload + CRLF bytes to skip
        self._line = b""  # _CHUNKED: a size or trailer line cut by a read boundary
        self._trailers = False  # _CHUNKED: past the last chunk, reading trailer lines
        self._keep_alive = True
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0

    # asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        self.transport = cast(asyncio.Transport, transport)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        self.usable = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        if self._ex is None:
            return
        if self._state == _EOF:
            self._finish()
        else:
            where = "before the response head" if self._state == _HEAD else "mid-response"
            self._fail("disconnect", f"connection closed {where}" + (f": {exc}" if exc else ""))

    def data_received(self, data: bytes) -> None:
        ts = perf_counter_ns()
        ex = self._ex
        if ex is None:
            return
        if self._state == _HEAD:
            data = self._read_head(data)
            ex = self._ex
            if ex is None or not data:
                return
        state = self._state
        if state == _CHUNKED:
            # Stored framed, as they came; here only the end of the body is looked for.
            ex.pieces.append((ts, data))
            ex.size += len(data)
            left = self._left
            if left >= len(data):
                self._left = left - len(data)  # the common case: inside a chunk's payload
            elif self._scan_chunked(data, left):
                self._finish()
        elif state == _LENGTH:
            take = data[: self._left]
            ex.pieces.append((ts, take))
            ex.size += len(take)
            self._left -= len(take)
            if self._left <= 0:
                self._finish()
        elif state == _EOF:
            ex.pieces.append((ts, data))
            ex.size += len(data)

    # exchange ----------------------------------------------------------------------
    def start(self, payload: bytes, ex: Exchange, timeout: float | None = None) -> None:
        """Writes ``payload``; ``ex.done`` resolves when the response is complete or failed.

        The timeout is one timer handle on the loop, cancelled when the response completes:
        cheaper per request than ``wait_for`` around a shielded future, which costs a task,
        a future and their callbacks on the loop that stamps the other streams' reads.
        """
        assert self.transport is not None and self._loop is not None
        ex.done = self._loop.create_future()
        self._ex = ex
        self._state = _HEAD
        self._head = b""
        if timeout is not None:
            self._timeout = timeout
            self._timer = self._loop.call_later(timeout, self._on_timeout)
        if not self.usable:  # its close already reported: nothing can be sent on it
            ex.sent_ns = perf_counter_ns()
            self._fail("disconnect", "connection closed before the request was sent")
            return
        try:
            ex.sent_ns = perf_counter_ns()
            self.transport.write(payload)
        except RuntimeError as exc:
            # uvloop raises on a transport closed under us whose close the loop has not yet
            # reported (asyncio drops the write): the server went away, not the run
            self._fail("disconnect", f"connection closed before the request was sent: {exc}")

    def abort(self, kind: str = "interrupted", message: str = "the run stopped") -> None:
        """Drops the connection; an exchange still running ends with ``kind`` (never later
        re-labelled by the ``connection_lost`` the abort causes)."""
        if self._ex is not None:
            self._fail(kind, message, abort=True)
        elif self.transport is not None:
            self.transport.abort()
        self.usable = False

    # internals ---------------------------------------------------------------------
    def _on_timeout(self) -> None:
        self._timer = None
        if self._ex is not None:
            self._fail("timeout", f"no complete response after {self._timeout:g} s", abort=True)

    def _read_head(self, data: bytes) -> bytes:
        """Collects the response head; returns the body bytes that followed it in ``data``."""
        head = self._head + data if self._head else data
        while True:
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self._head = head
                return b""
            rest = head[end + 4 :]
            self._head = b""
            if not self._parse_head(head[:end]):
                head = rest  # an interim 1xx response: the real head follows
                continue
            return rest

    def _parse_head(self, head: bytes) -> bool:
        """Reads status and headers and picks the body framing; False for a 1xx response."""
        ex = self._ex
        assert ex is not None
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        try:
            ex.status = int(status_line[1])
        except (IndexError, ValueError):
            self._fail("protocol", f"bad status line {lines[0][:80]!r}")
            return True
        if 100 <= ex.status < 200:
            return False
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
            self._left = 0
            self._line = b""
            self._trailers = False
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                self._fail("protocol", f"bad Content-Length {headers['content-length'][:40]!r}")
                return True
            self._state = _LENGTH
            if self._left <= 0:
                self._finish()
        else:
            self._state = _EOF
            self._keep_alive = False
        return True

    def _scan_chunked(self, data: bytes, pos: int) -> bool:
        """Follows the chunk framing through ``data`` from ``pos``; True at the body's end.

        Handles what HTTP/1.1 allows even if inference servers rarely send it: chunk
        extensions (``1a;name=value``), trailer fields after the last chunk, and size lines
        or CRLFs cut anywhere by a read boundary.
        """
        n = len(data)
        self._left = 0
        if not self._line and not self._trailers:
            # The common shape, kept to a few operations per chunk (a whole response can
            # arrive in one read): "<hex>\r\n<payload>\r\n", no extension, not the last.
            find = data.find
            while True:
                nl = find(b"\r\n", pos)
                if nl < 0:
                    break
                try:
                    size = int(data[pos:nl], 16)
                except ValueError:
                    break  # an extension or a bad line: the general loop below says which
                if size <= 0:
                    break  # the last chunk, or a negative size: the general loop decides
                pos = nl + size + 4  # the size line's CRLF, the payload, its CRLF
                if pos >= n:
                    self._left = pos - n
                    return False
        while pos < n:
            nl = data.find(b"\n", pos)
            if nl < 0:
                self._line += data[pos:]
                return False
            line = data[pos:nl]
            if self._line:
                line, self._line = self._line + line, b""
            pos = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if self._trailers:
                if not line:
                    return True  # the empty line after the last chunk (and any trailers)
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)
                if size < 0:
                    raise ValueError
            except ValueError:
                self._fail("protocol", f"bad chunk size line {line[:40]!r}")
                return False
            if size == 0:
                self._trailers = True
                continue
            pos += size + 2  # the payload and its CRLF
            if pos > n:
                self._left = pos - n
                return False
        return False

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _finish(self) -> None:
        ex = self._ex
        self._ex = None
        self._state = _DONE
        self._cancel_timer()
        if not self._keep_alive:
            self.usable = False
            if self.transport is not None:
                self.transport.close()
        if ex is not None and ex.done is not None and not ex.done.done():
            ex.done.set_result(None)

    def _fail(self, kind: str, message: str, abort: bool = False) -> None:
        ex = self._ex
        self._ex = None  # detached first: the connection_lost this causes finds no exchange
        self._state = _DONE
        self._cancel_timer()
        self.usable = False
        if self.transport is not None:
            if abort:
                self.transport.abort()
            else:
                self.transport.close()
        if ex is not None:
            if ex.error is None:
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
                if size < 0:
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
                    lambda: Connection(loop), self.target.host, self.target.port, ssl=self._ssl
                ),
                self.connect_timeout,
            )
        except (OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise ConnectError(f"cannot connect to {self.target.base_url}: {reason}") from exc
        self._all.add(conn)
        return conn

    async def open_verified(self, n: int, timeout: float | None = None) -> list[Connection]:
        """``n`` connections, opened together and each verified by one answered request
        (:attr:`Target.verify_request`), before the clock starts.

        Why verified: a completed TCP handshake only means the server's kernel queued the
        connection; a server that has not yet accepted it would read a wave's first requests
        late, and that wait would land in their TTFT. Why together: opened one after the other,
        the slots' setup grows with their number while the server sits idle. Any HTTP status
        counts (a server without ``/v1/models`` answers 404 on an accepted connection); a
        connection the server closes after answering is left for the first request to reopen
        (its record then carries ``connect_ns``).

        Raises:
            ConnectError: a connection could not be opened or its verify request got no
                answer within ``timeout`` (default: the connect timeout); names the URL.
        """
        conns = await asyncio.gather(*(self._open_one(timeout) for _ in range(n)))
        return list(conns)

    async def _open_one(self, timeout: float | None) -> Connection:
        conn = await self.connect()
        ex = Exchange()
        conn.start(self.target.verify_request, ex, timeout or self.connect_timeout)
        assert ex.done is not None
        await ex.done
        if ex.error is not None and ex.error != "disconnect":
            raise ConnectError(
                f"{self.target.base_url} accepted a connection but did not answer "
                f"GET /v1/models on it: {ex.error_message}"
            )
        if not conn.usable:
            self._all.discard(conn)
        return conn

    def idle(self) -> Connection | None:
        """An idle keep-alive connection, or None (the exchange then opens one)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
            self._all.discard(conn)
        return None

    def release(self, conn: Connection) -> None:
        if conn.usable:
            self._idle.append(conn)
        else:
            self._all.discard(conn)

    async def exchange(
        self, conn: Connection | None, body: bytes, timeout: float | None, ex: Exchange
    ) -> Connection | None:
        """Sends ``body`` and waits for the whole response, filling ``ex``.

        Returns the connection to reuse (None when it closed). ``ex.sent_ns`` is taken
        when the first byte is handed to the socket of an open connection, so TTFT never holds
        a connect; when a new connection must be opened first, the time that took is
        ``ex.connect_ns``, reported as its own statistic. A failed connect is
        ``ex.error == "connect"``. When the caller is cancelled (the
        run stops), ``ex`` keeps what arrived and says ``interrupted``; the caller owns ``ex``
        and records it before the cancellation goes on.
        """
        payload = self.target.request_bytes(body)
        if conn is None or not conn.usable:
            began = perf_counter_ns()
            try:
                conn = await self.connect()
            except ConnectError as exc:
                ex.sent_ns = began
                ex.error, ex.error_message = "connect", str(exc)
                return None
            except asyncio.CancelledError:
                ex.sent_ns = began
                ex.error, ex.error_message = "interrupted", "the run stopped before sending"
                raise
            ex.connect_ns = perf_counter_ns() - began
        conn.start(payload, ex, timeout)
        done = ex.done
        assert done is not None
        try:
            await done
        except asyncio.CancelledError:
            conn.abort(
                "interrupted",
                f"the run stopped with the request in flight ({ex.received()} bytes received)",
            )
            raise
        if conn.usable:
            return conn
        self._all.discard(conn)  # closed: a long run against Connection: close keeps none
        return None

    def close(self) -> None:
        for conn in list(self._all):
            if conn.transport is not None:
                conn.transport.close()
        self._all.clear()
        self._idle.clear()
