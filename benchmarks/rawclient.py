"""The reference: the least a streaming client can do on this machine.

One keep-alive socket per slot, a pre-built request, and in ``data_received`` only a clock
read, a substring search for the first non-empty ``"content":"`` and a check for the end of
the chunked body. No SSE or JSON parsing at all. Whatever rate and TTFT this reports is what
the machine itself allows; ``llmbench`` is judged against it in the same run.

Run: ``python benchmarks/rawclient.py --url http://127.0.0.1:8000 --concurrency 64
--requests 2000 --osl 200 [--isl 200] [--loop uvloop]`` → one JSON line with tokens/s and TTFT
statistics. ``--loop uvloop`` is the floor llmbench is held to on Linux: the least a client
can do, on the fastest event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections.abc import Awaitable, Callable
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

from llmbench.sim import output_words

_CONTENT = b'"content":"'
_END = b"0\r\n\r\n"
#: Prompt length in single-token words (``--isl``); 16 matches llmbench's shortest prompts.
PROMPT_TOKENS = [16]


class _Slot(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] | None = None
        self.first = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        ts = perf_counter_ns()
        if not self.first:
            i = data.find(_CONTENT)
            while i >= 0:
                if data[i + len(_CONTENT) : i + len(_CONTENT) + 1] != b'"':
                    self.first = ts
                    break
                i = data.find(_CONTENT, i + 1)
        if data.endswith(_END) and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("closed"))


def request_bytes(url: str, model: str, osl: int, prompt: str) -> bytes:
    parts = urlsplit(url)
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": osl,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


async def run(url: str, model: str, concurrency: int, requests: int, osl: int) -> dict[str, Any]:
    parts = urlsplit(url)
    # The same kind of prompt llmbench sends (16 single-token words), so the server does the
    # same work for both clients and only the clients differ.
    words = output_words()
    prompt = "".join(words[i % len(words)] for i in range(PROMPT_TOKENS[0]))
    payload = request_bytes(url, model, osl, prompt)
    loop = asyncio.get_running_loop()
    slots = []
    for _ in range(concurrency):
        _, slot = await loop.create_connection(_Slot, parts.hostname, parts.port)
        slots.append(slot)
    left = [requests]
    ttfts: list[float] = []
    ends: list[int] = []
    stamps: list[tuple[int, int]] = []

    async def drive(slot: _Slot) -> None:
        while left[0] > 0:
            left[0] -= 1
            slot.done = loop.create_future()
            slot.first = 0
            assert slot.transport is not None
            sent = perf_counter_ns()
            slot.transport.write(payload)
            await slot.done
            ends.append(perf_counter_ns())
            ttfts.append((slot.first - sent) / 1e6)
            stamps.append((sent, slot.first))

    start = perf_counter_ns()
    await asyncio.gather(*(drive(s) for s in slots))
    elapsed = (max(ends) - start) / 1e9
    for s in slots:
        assert s.transport is not None
        s.transport.close()
    return {
        "concurrency": concurrency,
        "requests": len(ttfts),
        "tokens_per_s": len(ttfts) * osl / elapsed,
        "ttft_mean_ms": statistics.fmean(ttfts),
        "ttft_p99_ms": statistics.quantiles(ttfts, n=100)[98] if len(ttfts) > 1 else ttfts[0],
        "elapsed_s": elapsed,
        # (send, first token) perf_counter_ns per request: joined to the sim's own records
        "stamps": stamps,
    }


Runner = Callable[[str, str, int, int, int], Awaitable[dict[str, Any]]]


def main(runner: Runner = run, description: str | None = None) -> None:
    """Command line shared by the reference clients: one JSON line of results."""
    p = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="llmbench-sim")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--osl", type=int, default=200)
    p.add_argument("--isl", type=int, default=16, help="prompt tokens (raw client only)")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    a = p.parse_args()
    PROMPT_TOKENS[0] = a.isl
    factory = asyncio.new_event_loop
    if a.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as loop:
        result = loop.run(runner(a.url, a.model, a.concurrency, a.requests, a.osl))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
