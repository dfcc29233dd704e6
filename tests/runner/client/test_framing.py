"""The end of every response is found as its bytes arrive, however the reads cut them.

A missed end costs a request its whole timeout and a wrong one cuts a stream short, so each
framing HTTP/1.1 allows (chunk extensions, trailers, Content-Length, Connection: close, a body
ended by close) is fed cut at every position (and at every pair of positions), then played
over a real loopback socket split at every position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from scripted_server import CLOSE, ScriptedServer, Step, chunked

from llmbench.runner.client.transport import (
    Client,
    Connection,
    Exchange,
    Target,
    body_pieces,
    dechunk,
)

HEAD_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)

#: name -> (raw response, body, whether the connection stays usable)
CASES: dict[str, tuple[bytes, bytes, bool]] = {
    "chunk extensions": (
        HEAD_CHUNKED + b"5;name=value\r\nhello\r\n1a ; x=\"y\"\r\n" + b"z" * 26 + b"\r\n"
        b"0;last=1\r\n\r\n",
        b"hello" + b"z" * 26,
        True,
    ),
    "trailers": (
        HEAD_CHUNKED
        + chunked(b"abc", b"\r\n0\r\n\r\n", last=b"0\r\nX-Checksum: 1\r\nX-B: 2\r\n\r\n"),
        b"abc\r\n0\r\n\r\n",
        True,
    ),
    "content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n"
        b'{"choices":[],"x":"0\r\n"}',
        b'{"choices":[],"x":"0\r\n"}',
        True,
    ),
    "connection close with a length": (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
        b"hello",
        False,
    ),
    "interim 100 continue": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"ok",
        True,
    ),
    "empty chunked body": (HEAD_CHUNKED + b"0\r\n\r\n", b"", True),
}


class _Transport(asyncio.Transport):
    """Records what the connection does to its socket."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def _splits(n: int, pairs: bool) -> Iterator[list[int]]:
    for i in range(n + 1):
        yield [i]
    if pairs:
        for i in range(n + 1):
            for j in range(i, n + 1):
                yield [i, j]


def _feed(raw: bytes, cuts: list[int]) -> tuple[Connection, Exchange, list[bool]]:
    """Plays ``raw`` into a connection in the pieces ``cuts`` make; returns whether the
    exchange was done after each non-empty piece."""
    loop = asyncio.new_event_loop()
    try:
        conn = Connection(loop)
        conn.connection_made(_Transport())
        ex = Exchange()
        conn.start(b"POST / HTTP/1.1\r\n\r\n", ex)
        assert ex.done is not None
        bounds = [0, *cuts, len(raw)]
        done_after = []
        for a, b in zip(bounds, bounds[1:], strict=False):
            if a < b:
                conn.data_received(raw[a:b])
                done_after.append(ex.done.done())
        return conn, ex, done_after
    finally:
        loop.close()


@pytest.mark.parametrize("case", list(CASES))
def test_the_end_is_found_at_the_last_byte_for_every_cut(case: str) -> None:
    raw, body, reusable = CASES[case]
    for cuts in _splits(len(raw), pairs=len(raw) < 200):
        conn, ex, done_after = _feed(raw, cuts)
        assert done_after[-1], (case, cuts)
        assert not any(done_after[:-1]), (case, cuts)  # never before the last byte
        assert ex.error is None, (case, cuts, ex.error_message)
        pieces, err = body_pieces(ex)
        assert err is None
        assert b"".join(p for _, p in pieces) == body, (case, cuts)
        assert conn.usable is reusable
        transport = conn.transport
        assert isinstance(transport, _Transport) and transport.closed is (not reusable)


def test_a_body_ended_by_close_completes_at_the_close() -> None:
    raw = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\": 1}"
    for i in range(len(raw) + 1):
        conn, ex, done_after = _feed(raw, [i])
        assert not any(done_after)
        conn.connection_lost(None)
        assert ex.error is None
        assert b"".join(p for _, p in body_pieces(ex)[0]) == b'{"a": 1}'


def test_a_cut_before_the_end_is_a_disconnect_not_a_success() -> None:
    raw = CASES["trailers"][0]
    for i in range(len(raw)):
        conn, ex, done_after = _feed(raw[:i], [])
        conn.connection_lost(None)
        assert ex.error == "disconnect", i
        assert ex.error_message is not None
        where = "before the response head" if i < len(HEAD_CHUNKED) else "mid-response"
        assert where in ex.error_message


@pytest.mark.parametrize("size_line", [b"-5", b"zz", b"", b"5g"])
def test_a_bad_chunk_size_line_is_a_protocol_error_not_a_hang(size_line: bytes) -> None:
    raw = HEAD_CHUNKED + b"3\r\nabc\r\n" + size_line + b"\r\nhello\r\n0\r\n\r\n"
    for i in range(len(raw) + 1):
        conn, ex, done_after = _feed(raw, [i])
        assert ex.error == "protocol", (size_line, i)
        assert ex.error_message is not None and "bad chunk size line" in ex.error_message
        assert not conn.usable
    _, err = dechunk([(1, raw[len(HEAD_CHUNKED) :])])  # and the decoder agrees
    assert err is not None and "bad chunk size line" in err


def _cut_at(raw: bytes, cut: int) -> list[Step]:
    return [raw[:cut], 0.002, raw[cut:]] if 0 < cut < len(raw) else [raw]


@pytest.mark.parametrize("case", list(CASES))
def test_over_a_socket_split_at_every_position_no_request_waits_for_its_timeout(
    case: str,
) -> None:
    raw, body, reusable = CASES[case]

    def script(n: int, request: bytes) -> list[Step]:
        steps = _cut_at(raw, n % (len(raw) + 1))
        return steps if reusable else [*steps, CLOSE]

    server = ScriptedServer(script).start()

    async def main() -> list[Exchange]:
        client = Client(Target.from_url(server.url, "/v1/completions"))
        conn: Connection | None = None
        out = []
        for _ in range(len(raw) + 1):
            ex = Exchange()
            conn = await client.exchange(conn, b"{}", 5.0, ex)
            out.append(ex)
            assert (conn is not None) is reusable
        client.close()
        return out

    try:
        exchanges = asyncio.run(main())
    finally:
        server.stop()
    for i, ex in enumerate(exchanges):
        assert ex.error is None, (case, i, ex.error_message)
        assert ex.status == 200
        assert b"".join(p for _, p in body_pieces(ex)[0]) == body, (case, i)
    # Keep-alive cases used one connection for every request.
    assert server.requests == len(raw) + 1
