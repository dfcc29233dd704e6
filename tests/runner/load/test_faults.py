"""The load generator under faults, against scripted loopback servers: honest error types,
bounded memory when the target dies, Retry-After, a stop mid-stream, caps across workers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from scripted_server import (
    CLOSE,
    STREAM_HEAD,
    ScriptedServer,
    Step,
    chunked,
    stream_events,
)

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.transport import Target
from llmbench.runner.load import buffer, faults
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.engine import run_load
from llmbench.runner.load.result import LoadResult
from llmbench.runner.load.workers import run_load_workers
from llmbench.runner.point.metrics import summarize

BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'


def _stream(tokens: int, *, gap: float = 0.0, **kw: bool) -> list[Step]:
    """A chat stream as one chunk per event, ``gap`` seconds apart."""
    steps: list[Step] = [STREAM_HEAD]
    for event in stream_events(tokens, **kw):
        if gap:
            steps.append(gap)
        steps.append(b"%x\r\n%s\r\n" % (len(event), event))
    steps.append(b"0\r\n\r\n")
    return steps


def _config(**settings: Any) -> LoadConfig:
    """A LoadConfig whose requests give up after 20 s unless a test says otherwise: a request
    stranded by a racing server (or a port reused by another process once a test's server is
    dead) then fails this test in seconds instead of holding the suite for the default 600."""
    settings.setdefault("request_timeout_s", 20.0)
    return LoadConfig(**settings)


def _run(
    server: ScriptedServer, cfg: LoadConfig, during: Callable[[], Any] | None = None
) -> LoadResult:
    async def main() -> LoadResult:
        target = Target.from_url(server.url, "/v1/chat/completions")
        if during is None:
            return await run_load(target, [BODY], cfg)
        stop = asyncio.Event()
        task = asyncio.ensure_future(run_load(target, [BODY], cfg, stop=stop))
        await during_async(during, stop)
        return await task

    return asyncio.run(main())


async def during_async(during: Callable[[], Any], stop: asyncio.Event) -> None:
    result = during()
    if isinstance(result, Coroutine):
        await result
    stop.set()


def _serve(script: Callable[[int, bytes], list[Step]]) -> ScriptedServer:
    return ScriptedServer(script).start()


def test_a_request_that_hits_its_timeout_is_a_timeout_not_a_disconnect() -> None:
    def script(n: int, _: bytes) -> list[Step]:
        if n == 0:  # the head and one token, then nothing for longer than the timeout
            return [*_stream(3)[:2], 1.5]
        return _stream(3)

    server = _serve(script)
    try:
        result = _run(server, _config(concurrency=1, request_count=2, request_timeout_s=0.3))
    finally:
        server.stop()
    first, second = sorted(result.records, key=lambda r: r.index)
    assert first.error_type == "timeout"
    assert first.error_message == "no complete response after 0.3 s"
    assert first.first_token_ns is not None  # what arrived before is kept
    # The next request on a new connection is unaffected.
    assert second.ok and second.output_tokens == 3


@pytest.mark.parametrize(
    ("ends", "error"),
    [
        ({"finish": False, "usage": False, "done": False}, "incomplete_stream"),
        ({"finish": True, "usage": True, "done": False}, None),
        ({"finish": False, "usage": True, "done": False}, None),
        ({"finish": True, "usage": False, "done": False}, None),
        ({"finish": False, "usage": False, "done": True}, None),
    ],
)
def test_a_stream_cut_before_its_end_is_incomplete_and_left_out_of_latencies(
    ends: dict[str, bool], error: str | None
) -> None:
    # Every other request is whole; the others end (cleanly framed) as ``ends`` says.
    server = _serve(lambda n, _: _stream(4, **ends) if n % 2 else _stream(4))
    try:
        result = _run(server, _config(concurrency=2, request_count=10))
    finally:
        server.stop()
    kinds = Counter(r.error_type for r in result.records)
    assert kinds == ({error: 5, None: 5} if error else {None: 10})
    cut = [r for r in result.records if r.error_type is not None]
    if error is not None:
        assert cut[0].first_token_ns is not None  # what arrived is kept
        assert "without a finish_reason, a usage chunk or [DONE]" in (cut[0].error_message or "")
    summary = summarize(result.records, streaming=True)
    assert summary.request_count.avg == (5 if error else 10)
    assert summary.time_to_first_token is not None
    assert summary.errors.total == (5 if error else 0)


def test_a_stop_records_the_requests_in_flight_as_interrupted_with_what_arrived() -> None:
    server = _serve(lambda n, _: _stream(200, gap=0.02) if n >= 4 else _stream(2))

    async def wait_for_streams() -> None:
        for _ in range(400):  # bounded: until the long streams are under way
            if server.requests >= 8:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)

    try:
        result = _run(server, _config(concurrency=4, request_count=1000), wait_for_streams)
    finally:
        server.stop()
    assert len(result.records) == 8
    cut = [r for r in result.records if r.error_type == "interrupted"]
    assert len(cut) == 4
    for rec in cut:
        assert rec.first_token_ns is not None and len(rec.chunk_ns) >= 2
        assert "bytes received" in (rec.error_message or "")
    summary = summarize(result.records, streaming=True)
    assert summary.errors.by_type["interrupted"].count == 4
    assert summary.request_count.avg == 4


def test_retry_after_holds_the_slot_and_the_wait_is_reported() -> None:
    arrivals: list[float] = []

    def script(n: int, _: bytes) -> list[Step]:
        arrivals.append(time.monotonic())
        if n < 2:
            wait = b"1" if n == 0 else b"3600"  # the second one asks for an hour: capped
            return [b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: " + wait
                    + b"\r\nContent-Length: 4\r\n\r\nslow"]
        return _stream(2)

    server = _serve(script)
    try:
        result = _run(
            server, _config(concurrency=1, request_count=4, retry_after_max_s=0.5)
        )
    finally:
        server.stop()
    assert [r.error_type for r in sorted(result.records, key=lambda r: r.index)] == [
        "http_429", "http_429", None, None,
    ]
    # The slot waited before its next request: the server saw the gaps.
    assert arrivals[1] - arrivals[0] >= 0.5  # Retry-After: 1, capped at 0.5 s
    assert arrivals[2] - arrivals[1] >= 0.5
    assert result.retry_after_waits == 2
    assert 1.0 <= result.retry_after_wait_s < 60


def test_a_dead_target_ends_the_point_with_bounded_records_and_keeps_what_was_measured() -> None:
    server = _serve(lambda n, _: _stream(2, gap=0.005))
    port = server.port

    def kill() -> None:
        for _ in range(1000):  # bounded: until some requests completed
            if server.requests >= 40:
                break
            time.sleep(0.01)
        server.stop()

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        cfg = _config(concurrency=8, request_count=None, measurement_duration_s=60,
                         unreachable_after_s=1.0, error_records_kept=5)
        result = _run_to(port, cfg)
    finally:
        killer.join()
    assert result.stop_reason is not None
    assert result.stop_reason.startswith("target unreachable since ")
    assert f"cannot connect to http://127.0.0.1:{port}" in result.stop_reason
    kinds = Counter(r.error_type for r in result.records)
    assert kinds[None] >= 30  # what completed before the kill is kept
    # Connect failures back off: a handful per slot in the second it took, not thousands;
    # beyond five records they are only counted.
    assert kinds["connect"] == 5
    failures = kinds["connect"] + result.unrecorded_errors.get("connect", 0)
    assert 8 <= failures <= 8 * 12
    summary = summarize(result.records, streaming=True, unrecorded_errors=result.unrecorded_errors)
    assert summary.errors.by_type["connect"].count == failures
    assert summary.errors.by_type["connect"].unrecorded == failures - 5


def _run_to(port: int, cfg: LoadConfig) -> LoadResult:
    async def main() -> LoadResult:
        return await run_load(Target.from_url(f"http://127.0.0.1:{port}", "/v1/x"), [BODY], cfg)

    return asyncio.run(main())


def test_connect_backoff_doubles_to_its_cap_with_jitter() -> None:
    delays = [faults.connect_backoff_s(n) for n in range(1, 12)]
    first, cap = faults.CONNECT_BACKOFF_FIRST_S, faults.CONNECT_BACKOFF_MAX_S
    assert first / 2 <= delays[0] < first
    assert all(cap / 2 <= d < cap for d in delays[7:])


def test_max_concurrency_is_split_across_workers_as_seen_by_the_server() -> None:
    server = _serve(lambda n, _: _stream(5, gap=0.04))
    cfg = _config(mode="request_rate", request_rate=200, max_concurrency=4, workers=2,
                     concurrency=4, request_count=40)

    async def main() -> LoadResult:
        target = Target.from_url(server.url, "/v1/chat/completions")
        return await run_load_workers(target, [BODY], cfg)

    try:
        result = asyncio.run(main())
    finally:
        server.stop()
    assert all(r.ok for r in result.records) and len(result.records) == 40
    assert {r.worker for r in result.records} == {0, 1}
    # 200 requests/s of 0.2 s each want 40 in flight; the cap of 4 holds across both workers.
    assert server.inflight_max == 4


def test_responses_beyond_the_buffer_are_never_decoded_while_requests_are_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded_at: list[int] = []
    real_fill = buffer.fill_record

    def spy(rec: RequestRecord, ex: Any, endpoint_type: str) -> None:
        decoded_at.append(time.perf_counter_ns())
        real_fill(rec, ex, endpoint_type)

    monkeypatch.setattr(buffer, "fill_record", spy)
    server = _serve(lambda n, _: _stream(40))
    try:
        # A 16 KiB budget: a few responses fit, the rest go to the spill file.
        result = _run(server, _config(concurrency=8, request_count=300, buffer_mb=1 / 64))
    finally:
        server.stop()
    assert result.spilled_requests > 250
    assert len(result.records) == 300 and all(r.ok for r in result.records)
    assert {r.output_tokens for r in result.records} == {40}
    assert {len(r.chunk_ns) for r in result.records} == {40}
    last_byte = max(r.last_token_ns or 0 for r in result.records)
    assert min(decoded_at) > last_byte  # every decode ran after the load
    # The runner's own probe saw no stall while the buffer overflowed.
    assert result.longest_stall is None or result.longest_stall.ms < 250
    assert max(result.loop_lag_ms, default=0) < 250


def test_a_loop_stall_is_named_with_the_requests_it_overlapped() -> None:
    server = _serve(lambda n, _: _stream(20, gap=0.01))

    async def block_the_loop() -> None:
        await asyncio.sleep(0.5)
        time.sleep(0.4)  # the runner's loop cannot run: every read waits
        await asyncio.sleep(0.3)

    try:
        result = _run(server, _config(concurrency=4, request_count=10_000), block_the_loop)
    finally:
        server.stop()
    stall = result.longest_stall
    assert stall is not None and stall.ms >= 350
    assert stall.overlapped_requests >= 4  # every slot had a request in flight across it
    marked = [r for r in result.records if r.loop_stall_ms is not None]
    assert len(marked) >= stall.overlapped_requests
    assert max(r.loop_stall_ms or 0 for r in marked) == pytest.approx(stall.ms)


def test_a_small_body_in_a_connection_close_reply_ends_cleanly() -> None:
    def script(n: int, _: bytes) -> list[Step]:
        return [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                chunked(*stream_events(2)), CLOSE]

    server = _serve(script)
    try:
        result = _run(server, _config(concurrency=2, request_count=6, request_timeout_s=5))
    finally:
        server.stop()
    assert all(r.ok for r in result.records), [r.error_message for r in result.records]


def test_error_records_are_capped_per_type_with_exact_counts() -> None:
    server = _serve(lambda n, _: [b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom"])
    try:
        result = _run(server, _config(concurrency=2, request_count=50, error_records_kept=5))
    finally:
        server.stop()
    assert [r.error_type for r in result.records] == ["http_500"] * 5
    assert result.unrecorded_errors == {"http_500": 45}
    summary = summarize(result.records, streaming=True, unrecorded_errors=result.unrecorded_errors)
    assert summary.errors.total == 50 and summary.window.measured_requests == 50
    kind = summary.errors.by_type["http_500"]
    assert (kind.count, kind.unrecorded, kind.sample) == (50, 45, "boom")


def test_open_loop_holds_its_schedule_for_retry_after_and_for_a_dead_target() -> None:
    arrivals: list[float] = []

    def script(n: int, _: bytes) -> list[Step]:
        arrivals.append(time.monotonic())
        if n == 2:
            return [b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\n"
                    b"Content-Length: 0\r\n\r\n"]
        return _stream(2)

    server = _serve(script)
    try:
        cfg = _config(mode="request_rate", request_rate=50, concurrency=4, request_count=12)
        result = _run(server, cfg)
    finally:
        server.stop()
    assert len(result.records) == 12
    # Nothing was sent for the second the target asked for (after those already in flight).
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    assert max(gaps) >= 0.9
    assert result.retry_after_waits == 1 and result.retry_after_wait_s > 0.5
    dispatch = [r for r in result.records if r.scheduled_ns is not None]
    assert max(r.sent_ns - (r.scheduled_ns or 0) for r in dispatch) > 0.5e9  # lag shows it

    dying = _serve(lambda n, _: _stream(2))
    killer = threading.Thread(target=lambda: (_wait_for_requests(dying, 10), dying.stop()))
    killer.start()
    cfg = _config(mode="request_rate", request_rate=200, concurrency=4, request_count=None,
                     measurement_duration_s=60, unreachable_after_s=0.5)
    try:
        result = _run_to(dying.port, cfg)
    finally:
        killer.join()
    assert result.stop_reason is not None and "target unreachable since" in result.stop_reason
    # Backed off: far fewer connect attempts than the 100 that 200/s would make in 0.5 s.
    failed = Counter(r.error_type for r in result.records)["connect"]
    assert 1 <= failed + result.unrecorded_errors.get("connect", 0) < 40


def _wait_for_requests(server: ScriptedServer, n: int) -> None:
    for _ in range(1000):  # bounded
        if server.requests >= n:
            return
        time.sleep(0.01)
