"""The same closed loop as rawclient.py, written the obvious way with httpx.

It exists to justify a choice: ``llmbench`` measures with its own small asyncio HTTP client
because this one, doing no SSE or JSON parsing at all, already ingests less (see
``client_ceiling.py``). Prints one JSON line like rawclient.py.
"""

from __future__ import annotations

import asyncio
import statistics
from time import perf_counter_ns

import httpx
import rawclient

from llmbench.sim import output_words


async def run(url: str, model: str, concurrency: int, requests: int, osl: int) -> dict[str, float]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "".join(output_words()[:16])}],
        "max_tokens": osl,
        "ignore_eos": True,
        "stream": True,
    }
    left = [requests]
    ttfts: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:

        async def drive() -> None:
            while left[0] > 0:
                left[0] -= 1
                sent = perf_counter_ns()
                first = 0
                async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
                    async for piece in resp.aiter_bytes():
                        if not first and b'"content":"' in piece.replace(b'"content":""', b""):
                            first = perf_counter_ns()
                ttfts.append((first - sent) / 1e6)

        start = perf_counter_ns()
        await asyncio.gather(*(drive() for _ in range(concurrency)))
        elapsed = (perf_counter_ns() - start) / 1e9
    return {
        "concurrency": concurrency,
        "requests": len(ttfts),
        "tokens_per_s": len(ttfts) * osl / elapsed,
        "ttft_mean_ms": statistics.fmean(ttfts),
        "elapsed_s": elapsed,
    }


if __name__ == "__main__":
    rawclient.main(run, __doc__.splitlines()[0])
