"""Connections before the clock: every slot's connection is open and served before the first
measured send, opened together; a request that must connect says so, and its TTFT holds no
connect. Real loopback servers throughout."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from scripted_server import CLOSE, STREAM_HEAD, ScriptedServer, Step, stream_events

from llmbench.runner.client.transport import Client, ConnectError, Target
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.engine import run_load
from llmbench.runner.load.result import LoadResult
from llmbench.runner.point.metrics import summarize
from llmbench.runner.report.console import notes

BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'


def _stream(tokens: int, head: bytes = STREAM_HEAD) -> list[Step]:
    return [head, *(b"%x\r\n%s\r\n" % (len(e), e) for e in stream_events(tokens)),
            b"0\r\n\r\n"]


def _run(server: ScriptedServer, **settings: object) -> LoadResult:
    cfg = LoadConfig(request_timeout_s=20.0, warmup_request_count=0, **settings)  # type: ignore[arg-type]
    target = Target.from_url(server.url, "/v1/chat/completions")
    return asyncio.run(run_load(target, [BODY], cfg))


def test_every_slot_connection_is_served_before_the_first_measured_send() -> None:
    gets_at_first_post: list[int] = []
    server = ScriptedServer(lambda n, _r: _stream(3))

    def script(n: int, _request: bytes) -> list[Step]:
        if n == 0:
            gets_at_first_post.append(server.gets)
        return _stream(3)

    server.script = script
    server.start()
    try:
        result = _run(server, concurrency=6, request_count=12)
    finally:
        server.stop()
    assert gets_at_first_post == [6]  # one answered GET /v1/models per slot, all before
    assert len(result.records) == 12 and all(r.ok for r in result.records)
    assert all(r.connect_ns is None for r in result.records)  # none paid a connect
    assert summarize(result.records, streaming=True).connects is None


def test_a_request_that_reconnects_says_so_and_its_ttft_holds_no_connect() -> None:
    head = STREAM_HEAD.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    server = ScriptedServer(lambda _n, _r: [*_stream(2, head), CLOSE]).start()  # every time
    try:
        result = _run(server, concurrency=1, request_count=4)
    finally:
        server.stop()
    recs = sorted(result.records, key=lambda r: r.index)
    assert all(r.ok for r in recs)
    assert recs[0].connect_ns is None  # on the verified connection
    for prev, rec in zip(recs, recs[1:], strict=False):
        assert rec.connect_ns is not None and rec.connect_ns > 0
        assert prev.last_token_ns is not None
        # the clock started after the connect: the connect is not in this request's TTFT
        assert rec.sent_ns - prev.last_token_ns >= rec.connect_ns
    summary = summarize(recs, streaming=True)
    connects = summary.connects
    assert connects is not None and connects.requests == 3
    assert any(line.startswith("3 requests had to open a connection first") and
               "not counted in TTFT" in line for line in notes(summary))
    assert connects.ms.min > 0 and connects.ms.unit == "ms"
    assert recs[1].to_json()["connect_ns"] == recs[1].connect_ns
    assert "connect_ns" not in recs[0].to_json()


def test_slot_connections_open_together_not_one_after_another() -> None:
    """A server that takes 0.2 s to answer each connection's first request: 16 slots set up
    in about 0.2 s, not 3.2 s."""

    async def main() -> float:
        handlers: list[asyncio.Task[object] | None] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.current_task())
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(0.2)
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")  # any answer
            await reader.read()  # hold the connection until the client closes it
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = Client(Target.from_url(f"http://127.0.0.1:{port}", "/v1/chat/completions"))
        began = time.monotonic()
        conns = await client.open_verified(16)
        took = time.monotonic() - began
        assert len(conns) == 16 and all(c.usable for c in conns)
        client.close()
        await asyncio.gather(*(t for t in handlers if t is not None))
        server.close()
        await server.wait_closed()
        return took

    assert asyncio.run(main()) < 1.6


def test_a_server_that_accepts_but_never_answers_fails_verification_naming_the_url() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel completes handshakes; nothing ever accepts or answers
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    async def main() -> None:
        client = Client(Target.from_url(url, "/v1/chat/completions"), connect_timeout=0.5)
        try:
            await client.open_verified(2)
        finally:
            client.close()

    try:
        with pytest.raises(ConnectError, match=f"{url} accepted a connection but did not answer"):
            asyncio.run(main())
    finally:
        listener.close()
