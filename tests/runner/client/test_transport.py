"""HTTP framing: chunked bodies survive any split into reads, with arrival times kept."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbench.runner.client import eventloop
from llmbench.runner.client.transport import Client, Exchange, Target, dechunk


def _chunked(payloads: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


PAYLOADS = [b'data: {"choices":[{"delta":{"content":" a"}}]}\n\n' * k for k in (1, 3, 1, 2)]


def test_whole_body_in_one_read() -> None:
    body, err = dechunk([(7, _chunked(PAYLOADS))])
    assert err is None
    assert body == [(7, b"".join(PAYLOADS))]


def test_missing_last_chunk_is_reported() -> None:
    raw = _chunked(PAYLOADS)[:-5]
    body, err = dechunk([(1, raw)])
    assert err is not None and "last chunk" in err
    assert b"".join(p for _, p in body) == b"".join(PAYLOADS)


def test_bad_size_line_is_reported() -> None:
    _, err = dechunk([(1, b"zz\r\nabc\r\n0\r\n\r\n")])
    assert err is not None and "chunk size" in err


@settings(max_examples=300, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_split_gives_the_same_body_and_stamps_bytes_by_their_read(cuts: list[int]) -> None:
    raw = _chunked(PAYLOADS)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    bounds = list(zip([0, *points], [*points, len(raw)], strict=True))
    pieces = [(i, raw[a:b]) for i, (a, b) in enumerate(bounds)]
    body, err = dechunk(pieces)
    assert err is None
    assert b"".join(p for _, p in body) == b"".join(PAYLOADS)
    # Each payload byte carries the stamp of the read it arrived in.
    is_payload = _payload_mask(raw)
    expected = {i: sum(is_payload[a:b]) for i, (a, b) in enumerate(bounds)}
    got = {i: 0 for i in expected}
    for ts, part in body:
        got[ts] += len(part)
    assert got == expected


def _payload_mask(raw: bytes) -> list[bool]:
    """Which bytes of a chunked body are payload (not size lines or CRLFs)."""
    mask = [False] * len(raw)
    pos = 0
    while True:
        nl = raw.index(b"\r\n", pos)
        size = int(raw[pos:nl], 16)
        if size == 0:
            return mask
        for i in range(nl + 2, nl + 2 + size):
            mask[i] = True
        pos = nl + 2 + size + 2


def test_target_builds_paths_and_host_headers() -> None:
    t = Target.from_url("localhost:8000", "/v1/chat/completions", {"Authorization": "Bearer k"})
    assert (t.host, t.port, t.path, t.tls) == ("localhost", 8000, "/v1/chat/completions", False)
    req = t.request_bytes(b"{}")
    assert req.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:8000\r\n")
    assert req.endswith(b"Content-Length: 2\r\n\r\n{}")
    v1 = Target.from_url("https://api.example.test/v1", "/v1/completions")
    assert (v1.port, v1.path, v1.tls) == (443, "/v1/completions", True)


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_a_request_on_a_connection_the_server_closed_is_a_disconnect_not_a_crash(
    kind: str,
) -> None:
    """A keep-alive connection can close between being picked and being written to (a server
    killed mid-run); uvloop then raises on write. The exchange must end as a counted error."""

    async def main() -> Exchange:
        async def serve(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = Client(Target.from_url(f"http://127.0.0.1:{port}", "/v1/completions"))
        conn = await client.connect()
        for _ in range(200):  # until the loop has seen the close (bounded: 2 s)
            if not conn.usable:
                break
            await asyncio.sleep(0.01)
        ex = Exchange()
        conn.start(b"POST /v1/completions HTTP/1.1\r\n\r\n", ex, 5.0)
        assert ex.done is not None
        await asyncio.wait_for(ex.done, 5)
        client.close()
        server.close()
        await server.wait_closed()
        return ex

    ex = eventloop.run(main(), kind)
    assert ex.error == "disconnect"
    assert ex.error_message is not None
    assert ex.error_message.startswith("connection closed before the request was sent")
