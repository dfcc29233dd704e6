"""HTTP plumbing: the connection protocol, request parsing, responses and error envelopes.

Why it is written on raw ``asyncio.Protocol``: the simulator shares a small machine with the
client it measures, so every microsecond it spends per token is stolen from the client. A
web framework costs tens of microseconds per event; here a token is one pre-built byte
template, one timer callback and one ``transport.write``. HTTP support is the small subset
benchmark clients use: HTTP/1.1 keep-alive, ``Content-Length`` request bodies, responses
with ``Content-Length`` (JSON) or ``Transfer-Encoding: chunked`` (SSE, like uvicorn).

``Conn`` hands each complete request to its ``Host`` (the ``SimServer``) and holds the running
generation (a ``Stream``: ``generation.Gen``) so a closed or slow client can stop or hold it.
Both are protocols declared here, so this bottom module imports neither the server nor the
generation that use it.
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter_ns
from typing import Any, Protocol

__all__ = [
    "DONE_CHUNK",
    "SSE_HEAD",
    "Conn",
    "HTTPError",
    "Host",
    "Stream",
    "dumps",
    "error_body",
    "http_response",
    "text_of_content",
]


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required",
            413: "Payload Too Large", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented"}
_ERROR_TYPES = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError",
                405: "MethodNotAllowed", 411: "BadRequestError", 413: "BadRequestError",
                429: "RateLimitError", 431: "BadRequestError", 500: "InternalServerError",
                501: "NotImplementedError"}
SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
_DONE = b"data: [DONE]\n\n"
DONE_CHUNK = b"%x\r\n%b\r\n0\r\n\r\n" % (len(_DONE), _DONE)
dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_MAX_HEAD = 65536
_MAX_BODY = 64 * 1024 * 1024


def http_response(status: int, body: bytes, content_type: bytes = b"application/json",
                  close: bool = False) -> bytes:
    head = b"HTTP/1.1 %d %b\r\ncontent-type: %b\r\ncontent-length: %d\r\n%b\r\n" % (
        status, _REASONS.get(status, "Status").encode(), content_type, len(body),
        b"connection: close\r\n" if close else b"")
    return head + body


def error_body(status: int, message: str) -> bytes:
    """OpenAI's error envelope (which current vLLM also uses)."""
    return dumps({"error": {"message": message, "type": _ERROR_TYPES.get(status, "Error"),
                            "param": None, "code": status}}).encode()


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def text_of_content(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise HTTPError(400, "message content must be a string or a list of parts")


class Stream(Protocol):
    """What a connection needs of the response it is streaming (``generation.Gen``)."""

    held: bool

    def abort(self, status: str) -> None:
        """The client went away: stop and record ``status``."""

    def resume(self) -> None:
        """The client drained its buffer: send what is due now."""


class Host(Protocol):
    """What a connection needs of the server it belongs to (``server.SimServer``)."""

    _conns: set[Conn]

    def _dispatch(self, conn: Conn, method: bytes, path: bytes, body: bytes,
                  arrival: int) -> None:
        """Answers one complete request read from ``conn``."""


class Conn(asyncio.Protocol):
    """One client connection: parses requests, runs one response at a time (keep-alive).

    Pipelined requests wait in ``buf`` until the current response is complete.
    """

    __slots__ = ("sim", "transport", "buf", "busy", "closed", "close_after", "gen",
                 "head_ns", "head_end", "body_len", "method", "path", "query", "keep", "auth",
                 "processing", "paused")

    def __init__(self, sim: Host) -> None:
        self.sim = sim
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.close_after = False
        self.gen: Stream | None = None
        self.head_ns = 0
        self.head_end = -1
        self.body_len = 0
        self.method = b""
        self.path = b""
        self.query = b""
        self.keep = True
        self.auth: bytes | None = None
        self.processing = False
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sim._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.sim._conns.discard(self)
        gen = self.gen
        if gen is not None:
            self.gen = None
            gen.abort("client_closed")

    def pause_writing(self) -> None:
        # The client reads slower than we write: hold the stream (tokens keep "being
        # generated" on schedule) so memory stays bounded, like uvicorn awaiting drain.
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        gen = self.gen
        if gen is not None and gen.held:
            gen.held = False
            gen.resume()

    def data_received(self, data: bytes) -> None:
        now = perf_counter_ns()
        self.buf += data
        if not self.busy:
            self._process(now)

    def eof_received(self) -> bool | None:
        # A half-closed client still gets its response; close when it is written.
        self.close_after = True
        if not self.busy and self.transport is not None:
            self.transport.close()
        return True

    def _process(self, now: int) -> None:
        if self.processing:  # re-entered via finish() of a synchronous response
            return
        self.processing = True
        try:
            self._process_loop(now)
        finally:
            self.processing = False

    def _process_loop(self, now: int) -> None:
        buf = self.buf
        while not self.busy and not self.closed:
            if self.head_end < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        self._fatal(431, "request head too large")
                    return
                self.head_ns = now
                try:
                    self._parse_head(bytes(buf[:end]))
                except HTTPError as err:
                    self._fatal(err.status, err.message)
                    return
                self.head_end = end + 4
            total = self.head_end + self.body_len
            if len(buf) < total:
                return
            body = bytes(buf[self.head_end:total])
            del buf[:total]
            self.head_end = -1
            self.busy = True
            self.sim._dispatch(self, self.method, self.path, body, self.head_ns)
            now = perf_counter_ns()

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise HTTPError(400, "malformed request line")
        self.method = parts[0]
        self.path, _, self.query = parts[1].partition(b"?")
        self.keep = parts[2] != b"HTTP/1.0"
        self.body_len = 0
        self.auth = None
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            key = key.strip().lower()
            if key == b"content-length":
                try:
                    self.body_len = int(value)
                except ValueError:
                    raise HTTPError(400, "bad content-length") from None
                if not 0 <= self.body_len <= _MAX_BODY:
                    raise HTTPError(413, "request body too large")
            elif key == b"connection":
                v = value.strip().lower()
                if v == b"close":
                    self.keep = False
                elif v == b"keep-alive":
                    self.keep = True
            elif key == b"transfer-encoding":
                raise HTTPError(411, "chunked request bodies are not supported; "
                                     "send Content-Length")
            elif key == b"authorization":
                self.auth = value.strip()
            elif key == b"expect" and value.strip().lower() == b"100-continue":
                # curl asks before sending bodies over 1 KiB; say go at once.
                if self.transport is not None:
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _fatal(self, status: int, message: str) -> None:
        """Protocol-level error: the stream position is unknown, so answer and close."""
        if self.transport is not None and not self.closed:
            self.transport.write(http_response(status, error_body(status, message), close=True))
            self.transport.close()
        self.closed = True

    # response side ---------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Writes a complete response and moves on to the next pipelined request."""
        if self.closed or self.transport is None:
            return
        if not self.keep:
            # Mark "connection: close" in the head for HTTP/1.0 and "Connection: close".
            payload = payload.replace(b"\r\n", b"\r\nconnection: close\r\n", 1)
        self.transport.write(payload)
        self.finish()

    def finish(self) -> None:
        self.busy = False
        self.gen = None
        if self.closed or self.transport is None:
            return
        if not self.keep or self.close_after:
            self.transport.close()
            self.closed = True
            return
        if self.buf:
            self._process(perf_counter_ns())
