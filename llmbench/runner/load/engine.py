"""Load generation: closed-loop concurrency and open-loop request rate, in one or more processes.

Closed loop (``--concurrency N``): N slots, each with its own keep-alive connection, send
back-to-back, so N requests are in flight from the first send until the request budget is
spent; warm-up and measured requests come from one counter, so the server never drains
between them. Open loop (``--request-rate R``): sends follow a constant or Poisson schedule
regardless of responses; each record keeps its scheduled and actual send time so dispatch lag
is visible. When one event loop cannot keep up, ``workers > 1`` splits the slots across
processes with their own loops; records are merged afterwards (``perf_counter_ns`` is the
system-wide monotonic clock on Linux, so timestamps from different processes compare).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing as mp
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from time import perf_counter_ns
from typing import Any

import numpy as np

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Client, ConnectError, Connection, Exchange, Target


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How requests are issued; validated by the CLI and the spec model before it gets here."""

    mode: str = "concurrency"  # concurrency | request_rate
    concurrency: int = 1
    request_rate: float | None = None
    rate_mode: str = "constant"  # constant | poisson
    max_concurrency: int | None = None
    request_count: int | None = 100
    measurement_duration_s: float | None = None
    warmup_request_count: int = 0
    seed: int = 0
    request_timeout_s: float | None = 600.0
    workers: int = 1
    endpoint_type: str = "chat"
    buffer_mb: float = 128.0


class Progress:
    """Counters the progress display polls; plain ints, because the hot path only increments.

    ``loop_lag_ms`` collects how late the event loop woke a periodic timer during the run: a
    read waiting for a busy loop is stamped that much late, so this is the client's own
    measure of how far it can be trusted.
    """

    def __init__(self) -> None:
        self.sent = 0
        self.done = 0
        self.errors = 0
        self.loop_lag_ms: list[float] = []


#: Period of the event-loop lag probe; one timer, so it costs the loop nothing measurable.
LAG_PROBE_S = 0.02


async def watch_loop_lag(samples: list[float]) -> None:
    """Appends, every ``LAG_PROBE_S``, how many ms late the loop woke up; runs until cancelled."""
    period_ns = int(LAG_PROBE_S * 1e9)
    while True:
        start = perf_counter_ns()
        await asyncio.sleep(LAG_PROBE_S)
        samples.append(max(0, perf_counter_ns() - start - period_ns) / 1e6)


def schedule_offsets(cfg: LoadConfig) -> Iterator[int]:
    """Send offsets (ns) of an open-loop schedule, without end: evenly spaced, or exponential
    gaps (Poisson arrivals) from a generator seeded by ``--random-seed``.

    Produced lazily, so a duration-bounded run at a high rate holds no schedule in memory.
    """
    assert cfg.request_rate and cfg.request_rate > 0
    mean_gap = 1e9 / cfg.request_rate
    if cfg.rate_mode == "poisson":
        rng = np.random.default_rng(cfg.seed)
        t = 0.0
        while True:
            yield int(t)
            for gap in rng.exponential(mean_gap, 1024):
                t += gap
                yield int(t)
    i = 0
    while True:
        yield int(i * mean_gap)
        i += 1


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
) -> list[RequestRecord]:
    """Runs one process's share of the load and returns its records, post-processed.

    ``indices`` are the global request numbers this process sends (all of them by default);
    a request's body is ``bodies[index % len(bodies)]`` and indices below
    ``cfg.warmup_request_count`` are warm-up. Setting ``stop`` (Ctrl-C, SIGTERM) ends
    sending, abandons the requests in flight and returns the records of those that completed.
    """
    warm = cfg.warmup_request_count
    if indices is None:
        total = warm + cfg.request_count if cfg.request_count is not None else None
        indices = range(total) if total is not None else _Unbounded()
    slots = concurrency if concurrency is not None else cfg.concurrency
    progress = progress or Progress()
    stop = stop or asyncio.Event()
    client = Client(target)
    state = _State(cfg, indices)
    # The cyclic garbage collector stops the loop for milliseconds once many objects exist
    # (every stored read is one); nothing on the measured path makes cycles, so collection
    # waits until the load is over.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        work: asyncio.Future[Any]
        if cfg.mode == "concurrency":
            conns = await _preconnect(client, slots)
            await _wait_until(start_at_ns)
            work = asyncio.gather(
                *(
                    _closed_slot(client, conns[i], bodies, cfg, state, progress, worker)
                    for i in range(slots)
                )
            )
        else:
            for conn in await _preconnect(client, min(slots, 64)):
                client.release(conn)
            await _wait_until(start_at_ns)
            work = asyncio.gather(_open_loop(client, bodies, cfg, state, progress, worker))
        stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        probe = asyncio.ensure_future(watch_loop_lag(progress.loop_lag_ms))
        await asyncio.wait((work, stopper), return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        probe.cancel()
        if not work.done():
            # Interrupted: stop sending, abandon what is in flight, keep what completed.
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
    state.decode(len(state.raw))
    return state.records


class _Unbounded(Sequence[int]):
    """Request numbers without end, for duration-bounded runs."""

    def __len__(self) -> int:
        return 1 << 62

    def __getitem__(self, i: Any) -> Any:
        return i


class _State:
    def __init__(self, cfg: LoadConfig, indices: Sequence[int]) -> None:
        self.cfg = cfg
        self.indices = indices
        self.next = 0
        self.tx: int | None = None  # first measured send, for duration-bounded runs
        self.stopped = False
        self.raw: list[tuple[RequestRecord, Exchange, int]] = []
        self.records: list[RequestRecord] = []
        self.buffered = 0

    def add(self, rec: RequestRecord, ex: Exchange, sent: int) -> None:
        """Keeps a finished exchange undecoded; decodes the oldest when over the memory budget.

        Decoding waits for the end of the run because it costs CPU the live streams would
        wait for; the budget (``LoadConfig.buffer_mb``) bounds the memory that waiting costs.
        """
        self.raw.append((rec, ex, sent))
        self.buffered += sum(len(p) for _, p in ex.pieces)
        if self.buffered > self.cfg.buffer_mb * 2**20:
            self.decode(len(self.raw) // 2 + 1)

    def decode(self, n: int) -> None:
        """Turns the ``n`` oldest finished exchanges into records and frees their bytes."""
        endpoint = self.cfg.endpoint_type
        for rec, ex, sent in self.raw[:n]:
            fill_record(rec, ex, sent, endpoint)
            self.buffered -= sum(len(p) for _, p in ex.pieces)
            self.records.append(rec)
        del self.raw[:n]

    def take(self) -> int | None:
        """The next request number to send, or None when the budget is spent."""
        if self.stopped or self.next >= len(self.indices):
            return None
        k = self.indices[self.next]
        cfg = self.cfg
        if cfg.measurement_duration_s is not None and k >= cfg.warmup_request_count:
            if (
                self.tx is not None
                and perf_counter_ns() - self.tx >= cfg.measurement_duration_s * 1e9
            ):
                return None
        self.next += 1
        return k


async def _preconnect(client: Client, n: int) -> list[Connection]:
    """Opens the slots' connections before the clock starts, so no measured send pays a connect."""
    return [await client.connect() for _ in range(n)]


async def _wait_until(t_ns: int | None) -> None:
    if t_ns is None:
        return
    delay = (t_ns - perf_counter_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)


async def _closed_slot(
    client: Client,
    conn: Connection | None,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    state: _State,
    progress: Progress,
    worker: int,
) -> None:
    nb = len(bodies)
    warm = cfg.warmup_request_count
    timeout = cfg.request_timeout_s
    while True:
        k = state.take()
        if k is None:
            return
        rec = RequestRecord(index=k, warmup=k < warm, worker=worker)
        progress.sent += 1
        ex, sent, conn = await client.exchange(conn, bodies[k % nb], timeout)
        if k >= warm and state.tx is None:
            state.tx = sent
        state.add(rec, ex, sent)
        progress.done += 1
        if ex.error is not None or ex.status != 200:
            progress.errors += 1


async def _open_loop(
    client: Client,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    state: _State,
    progress: Progress,
    worker: int,
) -> None:
    nb = len(bodies)
    warm = cfg.warmup_request_count
    limit = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
    offsets = schedule_offsets(cfg)
    inflight: set[asyncio.Task[None]] = set()
    t0 = perf_counter_ns()

    async def one(k: int, scheduled: int) -> None:
        rec = RequestRecord(index=k, warmup=k < warm, worker=worker, scheduled_ns=scheduled)
        try:
            conn: Connection | None = await client.acquire()
        except ConnectError as exc:
            ex = Exchange(error="connect", error_message=str(exc))
            state.add(rec, ex, perf_counter_ns())
            progress.errors += 1
            return
        progress.sent += 1
        ex, sent, conn = await client.exchange(conn, bodies[k % nb], cfg.request_timeout_s)
        if conn is not None:
            client.release(conn)
        state.add(rec, ex, sent)
        progress.done += 1
        if ex.error is not None or ex.status != 200:
            progress.errors += 1

    async def guarded(k: int, scheduled: int) -> None:
        try:
            await one(k, scheduled)
        finally:
            if limit is not None:
                limit.release()

    try:
        for offset in offsets:
            scheduled = t0 + offset
            delay = (scheduled - perf_counter_ns()) / 1e9
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
            task = asyncio.ensure_future(guarded(k, scheduled))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        if inflight:
            await asyncio.gather(*inflight)
    except asyncio.CancelledError:
        for t in list(inflight):
            t.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        raise


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
) -> tuple[list[RequestRecord], list[float]]:
    """Entry point of one worker process: its own event loop, its share of the slots.

    Returns the records and the loop-lag samples of this worker.
    """

    async def main() -> tuple[list[RequestRecord], list[float]]:
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
        return task.result(), progress.loop_lag_ms

    return asyncio.run(main())


def split_indices(cfg: LoadConfig, workers: int) -> list[list[int]]:
    """Request numbers per worker: round-robin, so each gets warm-up and measured requests."""
    assert cfg.request_count is not None
    total = cfg.warmup_request_count + cfg.request_count
    return [list(range(w, total, workers)) for w in range(workers)]


def split_concurrency(concurrency: int, workers: int) -> list[int]:
    """Slots per worker, differing by at most one."""
    base, extra = divmod(concurrency, workers)
    return [base + (1 if w < extra else 0) for w in range(workers)]


async def run_load_workers(
    target: Target,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    *,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
) -> list[RequestRecord]:
    """Runs ``cfg.workers`` processes and merges their records (sorted by send time).

    Progress counters of all workers are summed into ``progress``; setting ``stop`` makes
    every worker stop sending and return what completed.
    """
    if cfg.request_count is None:
        raise ValueError("--workers > 1 needs --request-count: a duration bound is per process")
    workers = cfg.workers
    if cfg.mode == "concurrency":
        workers = max(1, min(workers, cfg.concurrency))
    progress = progress or Progress()
    stop = stop or asyncio.Event()
    ctx = mp.get_context("spawn")
    counters = ctx.Array("q", 3 * workers, lock=False)
    stop_flag = ctx.Value("b", 0, lock=False)
    # Workers need a moment to import; they all start at one instant of the shared clock.
    start_at = perf_counter_ns() + int(3e9)
    conc = split_concurrency(cfg.concurrency, workers)
    idx = split_indices(cfg, workers)
    wcfg = cfg
    if cfg.mode == "request_rate" and cfg.request_rate:
        wcfg = replace(cfg, request_rate=cfg.request_rate / workers, seed=cfg.seed)
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
                wcfg if w == 0 else replace(wcfg, seed=wcfg.seed + w),
                idx[w],
                conc[w],
                start_at,
                w,
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
    for _, lag in results:
        progress.loop_lag_ms.extend(lag)
    merged = [r for part, _ in results for r in part]
    merged.sort(key=lambda r: r.sent_ns)
    return merged


def expected_total(cfg: LoadConfig) -> int | None:
    """Requests the run will send, for the progress bar; None when bounded by time."""
    if cfg.request_count is None:
        return None
    return cfg.warmup_request_count + cfg.request_count
