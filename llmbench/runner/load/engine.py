"""Load generation: closed-loop concurrency and open-loop request rate, in one or more processes.

Closed loop (``--concurrency N``): N slots, each with its own keep-alive connection, send
back-to-back, so N requests are in flight from the first send until the request budget is
spent; warm-up and measured requests come from one counter, so the server never drains
between them. Open loop (``--request-rate R``): sends follow a constant or Poisson schedule
regardless of responses; each record keeps its scheduled and actual send time so dispatch lag
is visible. Multi-turn sessions (``--num-sessions``, ``--session-concurrency N``): N sessions
in flight, each sending its turns one after another with the chat history so far (its user
turns and the replies it got), the next turn a planned delay after the previous answer.
When one event loop cannot keep up, ``workers > 1`` splits the slots across processes
with their own loops; records are merged afterwards (``perf_counter_ns`` is the
system-wide monotonic clock on Linux, so timestamps from different processes compare).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing as mp
import signal
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from time import perf_counter_ns
from typing import Any

from llmbench.runner.client import eventloop
from llmbench.runner.client.transport import Client, Target
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.open_loop import open_loop
from llmbench.runner.load.result import LoadResult, Progress, merge_results
from llmbench.runner.load.sessions import SessionCursor, session_plan, session_slot
from llmbench.runner.load.slots import closed_slot, preconnect
from llmbench.runner.load.stalls import mark_stalls, watch_loop_lag
from llmbench.runner.load.state import RunState


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
        if total is None:
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
    try:
        work: asyncio.Future[Any]
        if cfg.mode == "concurrency":
            conns = await preconnect(client, slots)
            await _wait_until(start_at_ns)
            work = asyncio.gather(
                *(
                    closed_slot(client, conns[i], bodies, cfg, state, progress, worker)
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


# --- several processes ----------------------------------------------------------------

_shared_counters: Any = None
_shared_stop: Any = None


def _init_worker(counters: Any, stop_flag: Any) -> None:
    # Shared memory can reach a worker only through inheritance, i.e. these initargs.
    global _shared_counters, _shared_stop
    _shared_counters = counters
    _shared_stop = stop_flag
    # The parent decides when to stop; a Ctrl-C in the terminal must not kill a worker
    # before it hands back what it measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_main(
    target: Target,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    indices: list[int],
    concurrency: int,
    start_at_ns: int,
    worker: int,
    event_loop: str,
) -> LoadResult:
    """Entry point of one worker process: its own event loop (of the parent's kind), its
    share of the slots. Returns its records and figures."""

    async def main() -> LoadResult:
        progress = Progress()
        stop = asyncio.Event()
        task = asyncio.ensure_future(
            run_load(
                target,
                bodies,
                cfg,
                indices=indices,
                concurrency=concurrency,
                progress=progress,
                start_at_ns=start_at_ns,
                worker=worker,
                stop=stop,
            )
        )
        last = (0, 0, 0)
        while not task.done():
            await asyncio.wait({task}, timeout=0.2)
            now = (progress.sent, progress.done, progress.errors)
            if _shared_counters is not None:
                for j in range(3):
                    _shared_counters[3 * worker + j] += now[j] - last[j]
            last = now
            if _shared_stop is not None and _shared_stop.value:
                stop.set()
        return task.result()

    return eventloop.run(main(), event_loop)


def split_indices(cfg: LoadConfig, workers: int) -> list[list[int]]:
    """Request numbers per worker: round-robin, so each gets warm-up and measured requests.

    A runner shard (``cfg.shards > 1``) splits only its own numbers, so pods x workers
    together send every number once.
    """
    assert cfg.request_count is not None
    total = cfg.warmup_request_count + cfg.request_count
    mine = list(range(cfg.shard, total, cfg.shards))
    return [mine[w::workers] for w in range(workers)]


def split_concurrency(concurrency: int, workers: int) -> list[int]:
    """Slots per worker, differing by at most one."""
    base, extra = divmod(concurrency, workers)
    return [base + (1 if w < extra else 0) for w in range(workers)]


def worker_configs(cfg: LoadConfig, workers: int) -> list[LoadConfig]:
    """Each worker's settings: its share of the request rate and of ``--max-concurrency``
    (so W workers together hold the cap, not W times it), and a seed of its own.

    A constant rate R split W ways interleaves: worker w sends at ``phase + w/R + k*W/R``, so
    the union is the single sender's schedule ``phase + n/R`` rather than W sends at once
    every W/R. (Poisson needs no phase: independent Poisson processes of rate R/W add up to
    one of rate R.)
    """
    rate = cfg.request_rate / workers if cfg.request_rate else cfg.request_rate
    gap_ns = 1e9 / cfg.request_rate if cfg.request_rate else 0.0
    caps: list[int | None] = (
        list(split_concurrency(cfg.max_concurrency, workers))
        if cfg.max_concurrency
        else [None] * workers
    )
    return [
        replace(
            cfg,
            request_rate=rate,
            max_concurrency=caps[w],
            seed=cfg.seed + w,
            phase_ns=cfg.phase_ns + round(w * gap_ns),
        )
        for w in range(workers)
    ]


async def run_load_workers(
    target: Target,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    *,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    start_at_ns: int | None = None,
) -> LoadResult:
    """Runs ``cfg.workers`` processes and merges their results (records sorted by send time).

    Progress counters of all workers are summed into ``progress``; setting ``stop`` makes
    every worker stop sending and return what it measured. ``start_at_ns`` (perf_counter)
    is when they all begin (default: 3 s from now, time for the processes to import).
    """
    if cfg.request_count is None:
        raise ValueError("--workers > 1 needs --request-count: a duration bound is per process")
    workers = cfg.workers
    if cfg.mode == "concurrency":
        workers = max(1, min(workers, cfg.concurrency))
    elif cfg.max_concurrency:
        workers = max(1, min(workers, cfg.max_concurrency))
    progress = progress or Progress()
    stop = stop or asyncio.Event()
    ctx = mp.get_context("spawn")
    counters = ctx.Array("q", 3 * workers, lock=False)
    stop_flag = ctx.Value("b", 0, lock=False)
    # Workers need a moment to import; they all start at one instant of the shared clock.
    start_at = start_at_ns if start_at_ns is not None else perf_counter_ns() + int(3e9)
    wcfgs = worker_configs(cfg, workers)
    if cfg.mode == "concurrency":
        conc = split_concurrency(cfg.concurrency, workers)
    else:
        conc = [c.max_concurrency or max(1, cfg.concurrency // workers) for c in wcfgs]
    idx = split_indices(cfg, workers)
    kind = eventloop.running_loop_kind()
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker, initargs=(counters, stop_flag)
    ) as pool:
        futs = [
            loop.run_in_executor(
                pool,
                _worker_main,
                target,
                list(bodies),
                wcfgs[w],
                idx[w],
                conc[w],
                start_at,
                w,
                kind,
            )
            for w in range(workers)
        ]
        while not all(f.done() for f in futs):
            await asyncio.wait(futs, timeout=0.25)
            vals = list(counters)
            progress.sent, progress.done, progress.errors = (
                sum(vals[0::3]),
                sum(vals[1::3]),
                sum(vals[2::3]),
            )
            if stop.is_set():
                stop_flag.value = 1
        results = [f.result() for f in futs]
    merged = merge_results(results)
    progress.loop_lag_ms.extend(merged.loop_lag_ms)
    return merged
