"""The open loop (``--request-rate R``, ``--fixed-schedule``): sends follow the schedule.

Requests go out at the times of :func:`~llmbench.runner.load.arrivals.schedule_offsets`
regardless of responses, each record keeping its scheduled and actual send time, so dispatch
lag is visible and an overloaded client cannot pass for a fast server. ``--max-concurrency``
caps the requests in flight; a target refusing connections or asking for ``Retry-After``
holds the dispatcher (the lag shows) instead of being sent into.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import perf_counter_ns

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.transport import Client, Exchange
from llmbench.runner.load.arrivals import schedule_offsets
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.faults import connect_backoff_s, retry_after_s
from llmbench.runner.load.result import Progress
from llmbench.runner.load.state import RunState

__all__ = ["open_loop"]


async def open_loop(
    client: Client,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    state: RunState,
    progress: Progress,
    worker: int,
) -> None:
    """Dispatches each request at its scheduled time (or as soon as a hold allows) as a task
    of its own on an idle pooled connection (or a new one), until the counter or the
    schedule ends, then waits for the requests in flight. Cancelled, it cancels them, and
    they record what had arrived."""
    nb = len(bodies)
    warm = cfg.warmup_request_count
    limit = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
    offsets = schedule_offsets(cfg)
    inflight: set[asyncio.Task[None]] = set()
    t0 = perf_counter_ns()

    async def one(k: int, scheduled: int) -> None:
        rec = RequestRecord(index=k, warmup=k < warm, worker=worker, scheduled_ns=scheduled)
        ex = Exchange()
        progress.sent += 1
        try:
            conn = await client.exchange(client.idle(), bodies[k % nb], cfg.request_timeout_s, ex)
        except asyncio.CancelledError:
            state.add(rec, ex)
            raise
        finally:
            if limit is not None:
                limit.release()
        if conn is not None:
            client.release(conn)
        state.add(rec, ex)
        progress.done += 1
        if ex.error is None and ex.status == 200:
            state.open_failures = 0
            state.reached()
            return
        progress.errors += 1
        now = perf_counter_ns()
        if ex.error == "connect":
            # Sends follow the schedule, but not into a target that refuses connections:
            # the dispatcher holds (the lag shows in dispatch lag) while connects back off.
            state.open_failures += 1
            state.connect_failed(ex)
            hold = int(connect_backoff_s(state.open_failures) * 1e9)
            state.hold_until = max(state.hold_until, now + hold)
            return
        state.open_failures = 0
        state.reached()
        wait = retry_after_s(ex, cfg.retry_after_max_s)
        if wait is not None and now + wait * 1e9 > state.retry_until:
            state.retry_until = now + int(wait * 1e9)
            state.retry_waits += 1

    try:
        for offset in offsets:
            scheduled = t0 + offset
            now = perf_counter_ns()
            ready = max(scheduled, now)
            if state.retry_until > ready:
                state.retry_wait_ns += state.retry_until - ready
            delay = (max(scheduled, state.hold_until, state.retry_until) - now) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            if limit is not None:
                await limit.acquire()
            k = state.take()
            if k is None:
                if limit is not None:
                    limit.release()
                break
            if k >= warm and state.tx is None:
                state.tx = perf_counter_ns()
            task = asyncio.ensure_future(one(k, scheduled))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        if inflight:
            await asyncio.gather(*inflight)
    except asyncio.CancelledError:
        for t in list(inflight):
            t.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        raise
