"""Several processes, one load point: ``--workers N`` splits the slots across event loops.

When one event loop cannot keep up, each worker process runs :func:`run_load` on its own
loop (of the parent's kind) with its share of the slots, of the request numbers (round
robin, so each has warm-up and measured requests) and of the rate; they all start at one
instant of the shared clock and their records are merged afterwards (``perf_counter_ns`` is
the system-wide monotonic clock on Linux, so timestamps from different processes compare).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import signal
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from time import perf_counter_ns
from typing import Any

from llmbench.runner.client import eventloop
from llmbench.runner.client.transport import Target
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.engine import run_load
from llmbench.runner.load.result import LoadResult, Progress, merge_results

__all__ = ["run_load_workers", "split_concurrency", "split_indices", "worker_configs"]

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
