"""The closed loop (``--concurrency N``): N slots, each sending on its own connection.

Each slot sends back-to-back on its keep-alive connection, opened before the clock starts,
so N requests are in flight from the first send until the request budget is spent; warm-up
and measured requests come from the run's one counter, so the server never drains between
them. A failed request costs its slot what :func:`~llmbench.runner.load.faults.after_failure`
says before the next one.

A ramp (``--ramp-up S`` with ``--concurrency N``, AIPerf's ``--concurrency-ramp-duration``)
starts the slots one by one, linearly from 1 to N over S seconds
(:func:`~llmbench.runner.load.arrivals.slot_start_offsets`): every request started before
S is warm-up, and the request budget counts from the first one after it, so the point is
measured at N in flight only. :class:`SlotRamp` keeps the plan and when each slot really
sent its first request. The connections are all opened before the clock, idle until their
slot starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import perf_counter_ns

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.transport import Client, Connection, Exchange
from llmbench.runner.load.arrivals import sleep_until, slot_start_offsets
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.faults import after_failure
from llmbench.runner.load.result import Progress, SlotStarts
from llmbench.runner.load.state import RunState

__all__ = ["SlotRamp", "closed_slot", "preconnect"]


class SlotRamp:
    """One process's closed-loop ramp, shared by its slots: when each slot may start, when the
    ramp ends (the measurement starts), the first measured request number, and when each slot
    really sent its first request (``active_ns``, ``perf_counter_ns``; None: never sent)."""

    def __init__(self, cfg: LoadConfig, slots: int, start_ns: int) -> None:
        self.start_ns = start_ns
        self.starts_ns = [start_ns + o for o in slot_start_offsets(slots, cfg.ramp_up_s)]
        self.end_ns = start_ns + round((cfg.ramp_up_s or 0.0) * 1e9)
        self.budget = cfg.request_count
        self.first_measured: int | None = None
        self.active_ns: list[int | None] = [None] * slots

    def warmup(self, k: int, now_ns: int) -> bool:
        """Whether request ``k`` (past the requested warm-up), started at ``now_ns``, is
        inside the ramp (warm-up); the first one after it opens the measured budget."""
        if now_ns < self.end_ns:
            return True
        if self.first_measured is None:
            self.first_measured = k
        return False

    def starts(self) -> SlotStarts:
        """The plan and what happened, for the result."""
        return SlotStarts(self.start_ns, tuple(self.starts_ns), tuple(self.active_ns))

    def spent(self, k: int) -> bool:
        """Whether measured request ``k`` is past the budget (numbers rise with time, so
        every later one is too)."""
        return (
            self.budget is not None and self.first_measured is not None
            and k >= self.first_measured + self.budget
        )


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
    ramp: SlotRamp | None = None,
    slot: int = 0,
) -> None:
    """One slot: sends the run's next request as soon as its last one ended, on its own
    connection (reopened by the client when the server closes it), until the run's counter
    is spent or the run stops. With a ``ramp`` it starts at its planned time, and the
    requests it starts inside the ramp are warm-up."""
    nb = len(bodies)
    warm = cfg.warmup_request_count
    timeout = cfg.request_timeout_s
    failures = 0
    if ramp is not None:
        await sleep_until(ramp.starts_ns[slot])
    while True:
        k = state.take()
        if k is None:
            return
        warmup = k < warm
        if ramp is not None and not warmup:
            warmup = ramp.warmup(k, perf_counter_ns())
            if not warmup and ramp.spent(k):
                return
        rec = RequestRecord(index=k, warmup=warmup, worker=worker)
        ex = Exchange()
        progress.sent += 1
        try:
            conn = await client.exchange(conn, bodies[k % nb], timeout, ex)
        except asyncio.CancelledError:
            state.add(rec, ex)
            raise
        if ramp is not None and ramp.active_ns[slot] is None and ex.sent_ns:
            ramp.active_ns[slot] = ex.sent_ns
        if not warmup and state.tx is None:
            state.tx = ex.sent_ns
        state.add(rec, ex)
        progress.done += 1
        if ex.error is None and ex.status == 200:
            failures = 0
            state.reached()
            continue
        progress.errors += 1
        failures = await after_failure(state, ex, cfg, failures)

