"""The closed loop (``--concurrency N``): N slots, each sending on its own connection.

Each slot sends back-to-back on its keep-alive connection, opened before the clock starts,
so N requests are in flight from the first send until the request budget is spent; warm-up
and measured requests come from the run's one counter, so the server never drains between
them. A failed request costs its slot what :func:`~llmbench.runner.load.faults.after_failure`
says before the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.transport import Client, Connection, Exchange
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.faults import after_failure
from llmbench.runner.load.result import Progress
from llmbench.runner.load.state import RunState

__all__ = ["closed_slot", "preconnect"]


async def preconnect(client: Client, n: int) -> list[Connection]:
    """Opens the slots' connections together and verifies each with one answered request
    (:meth:`~llmbench.runner.client.transport.Client.open_verified`) before the clock starts,
    so no measured send pays a connect or waits for the server to accept its connection."""
    return await client.open_verified(n)


async def closed_slot(
    client: Client,
    conn: Connection | None,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    state: RunState,
    progress: Progress,
    worker: int,
) -> None:
    """One slot: sends the run's next request as soon as its last one ended, on its own
    connection (reopened by the client when the server closes it), until the run's counter
    is spent or the run stops."""
    nb = len(bodies)
    warm = cfg.warmup_request_count
    timeout = cfg.request_timeout_s
    failures = 0
    while True:
        k = state.take()
        if k is None:
            return
        rec = RequestRecord(index=k, warmup=k < warm, worker=worker)
        ex = Exchange()
        progress.sent += 1
        try:
            conn = await client.exchange(conn, bodies[k % nb], timeout, ex)
        except asyncio.CancelledError:
            state.add(rec, ex)
            raise
        if k >= warm and state.tx is None:
            state.tx = ex.sent_ns
        state.add(rec, ex)
        progress.done += 1
        if ex.error is None and ex.status == 200:
            failures = 0
            state.reached()
            continue
        progress.errors += 1
        failures = await after_failure(state, ex, cfg, failures)
