"""Load generation: one process's run of a load point, in whichever mode it is.

:func:`run_load` opens the connections before the clock starts, starts the mode's senders
(:mod:`~llmbench.runner.load.slots` for the closed loop, :mod:`~llmbench.runner.load.open_loop`
for a rate or a trace, :mod:`~llmbench.runner.load.sessions` for multi-turn sessions) on one
shared :class:`~llmbench.runner.load.state.RunState`, watches the event loop's lag, stops on
request, and decodes the kept responses only once the load is over. Several processes:
:mod:`~llmbench.runner.load.workers`.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from time import perf_counter_ns
from typing import Any

from llmbench.runner.client import eventloop
from llmbench.runner.client.transport import Client, Target
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.open_loop import open_loop
from llmbench.runner.load.result import LoadResult, Progress
from llmbench.runner.load.sessions import SessionCursor, session_plan, session_slot
from llmbench.runner.load.slots import SlotRamp, closed_slot, preconnect
from llmbench.runner.load.stalls import mark_stalls, watch_loop_lag
from llmbench.runner.load.state import RunState

__all__ = ["run_load"]


async def run_load(
    target: Target,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    *,
    indices: Sequence[int] | None = None,
    concurrency: int | None = None,
    progress: Progress | None = None,
    start_at_ns: int | None = None,
    worker: int = 0,
    stop: asyncio.Event | None = None,
) -> LoadResult:
    """Runs one process's share of the load and returns its records, post-processed.

    ``indices`` are the global request numbers this process sends (all of them by default);
    a request's body is ``bodies[index % len(bodies)]`` and indices below
    ``cfg.warmup_request_count`` are warm-up. Setting ``stop`` (Ctrl-C, SIGTERM) ends
    sending; the requests in flight are recorded as ``interrupted`` with what had arrived.
    """
    warm = cfg.warmup_request_count
    if indices is None:
        total = warm + cfg.request_count if cfg.request_count is not None else None
        if total is None or (cfg.ramp_up_s and cfg.mode == "concurrency"):
            # a closed-loop ramp's warm-up has no count: its slots end the budget themselves
            indices = _Unbounded()
        else:
            indices = range(cfg.shard, total, cfg.shards)
    slots = concurrency if concurrency is not None else cfg.concurrency
    progress = progress or Progress()
    stop = stop or asyncio.Event()
    client = Client(target)
    state = RunState(cfg, indices)
    # The cyclic garbage collector stops the loop for milliseconds once many objects exist
    # (every stored read is one); nothing on the measured path makes cycles, so collection
    # waits until the load is over.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    stalls: list[tuple[int, int, int]] = []
    ramp: SlotRamp | None = None
    try:
        work: asyncio.Future[Any]
        if cfg.mode == "concurrency":
            conns = await preconnect(client, slots)
            await _wait_until(start_at_ns)
            if cfg.ramp_up_s:
                ramp = SlotRamp(cfg, slots, perf_counter_ns())
            work = asyncio.gather(
                *(
                    closed_slot(client, conns[i], bodies, cfg, state, progress, worker, ramp, i)
                    for i in range(slots)
                )
            )
        elif cfg.mode == "session_concurrency":
            plan = session_plan(cfg)
            slots = min(slots, max(1, len(plan.turns)))
            conns = await preconnect(client, slots)
            await _wait_until(start_at_ns)
            cursor = SessionCursor(plan)
            work = asyncio.gather(
                *(
                    session_slot(client, conns[i], bodies, cfg, state, progress, worker, cursor)
                    for i in range(slots)
                )
            )
        else:
            for conn in await preconnect(client, min(slots, 64)):
                client.release(conn)
            await _wait_until(start_at_ns)
            work = asyncio.gather(open_loop(client, bodies, cfg, state, progress, worker))
        stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        lag: list[float] = []
        probe = asyncio.ensure_future(watch_loop_lag(lag, stalls))
        await asyncio.wait((work, stopper), return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        probe.cancel()
        progress.loop_lag_ms.extend(lag)
        if not work.done():
            # Interrupted: stop sending; the slots record what their requests had received.
            state.stopped = True
            work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        if not work.cancelled():
            # gather() reports a cancelled child as a CancelledError exception, not as
            # cancellation of its own: that is our stop, not a failure.
            failure = work.exception()
            if failure is not None and not isinstance(failure, asyncio.CancelledError):
                raise failure
    finally:
        client.close()
        state.buffer.close()  # the packer's thread ends (a failed run decodes nothing)
        if gc_was_enabled:
            gc.enable()
    records = state.finish()
    progress.stalls.extend(stalls)
    return LoadResult(
        records=records,
        unrecorded_errors=dict(state.unrecorded),
        stop_reason=state.stop_reason,
        retry_after_waits=state.retry_waits,
        retry_after_wait_s=state.retry_wait_ns / 1e9,
        spilled_requests=state.buffer.spilled,
        longest_stall=mark_stalls(records, stalls, worker),
        loop_lag_ms=lag,
        event_loop=eventloop.running_loop_kind(),
        sent_bodies=state.sent_bodies,
        sessions_abandoned=state.sessions_abandoned,
        slot_starts=ramp.starts() if ramp is not None else None,
    )


class _Unbounded(Sequence[int]):
    """Request numbers without end, for duration-bounded runs."""

    def __len__(self) -> int:
        return 1 << 62

    def __getitem__(self, i: Any) -> Any:
        return i


async def _wait_until(t_ns: int | None) -> None:
    if t_ns is None:
        return
    delay = (t_ns - perf_counter_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
