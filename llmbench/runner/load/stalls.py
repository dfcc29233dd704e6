"""The client's own trust signal: how late its event loop woke, and which requests a stall hit.

A read waiting for a busy loop is stamped when the loop comes back, not when the bytes came,
so a periodic probe measures how far the run's timestamps can be trusted; afterwards every
record whose send-to-last-byte span overlapped a stall is marked with it.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter_ns, thread_time_ns

from llmbench.runner.client.records import RequestRecord

__all__ = ["LAG_PROBE_S", "STALL_MS", "Stall", "mark_stalls", "watch_loop_lag"]


@dataclass(slots=True)
class Stall:
    """The longest event-loop stall of a run and the requests whose timestamps it overlapped.

    ``cpu_ms`` is the CPU time the loop's thread used across it: close to ``ms`` when the
    runner itself was busy, far below when the process was not scheduled (a machine too
    loaded to measure on)."""

    ms: float
    start_ns: int
    worker: int
    overlapped_requests: int
    cpu_ms: float = 0.0


#: Period of the event-loop lag probe; one timer, so it costs the loop nothing measurable.
LAG_PROBE_S = 0.02
#: A probe wake-up this late (ms) is a stall: the requests it overlapped are marked, because
#: every read that arrived during it was stamped when the loop came back, not when it came.
STALL_MS = 50.0
_MAX_STALLS = 10_000


async def watch_loop_lag(
    samples: list[float], stalls: list[tuple[int, int, int]] | None = None
) -> None:
    """Appends, every ``LAG_PROBE_S``, how many ms late the loop woke up; runs until cancelled.

    Wake-ups later than :data:`STALL_MS` also go to ``stalls`` as the interval the loop was
    away and the thread CPU time used meanwhile, so the requests in flight across it can be
    named afterwards and the stall told apart from a process that was not scheduled.
    """
    period_ns = int(LAG_PROBE_S * 1e9)
    stall_ns = int(STALL_MS * 1e6)
    while True:
        start = perf_counter_ns()
        cpu = thread_time_ns()
        await asyncio.sleep(LAG_PROBE_S)
        now = perf_counter_ns()
        lag = max(0, now - start - period_ns)
        samples.append(lag / 1e6)
        if stalls is not None and lag >= stall_ns and len(stalls) < _MAX_STALLS:
            stalls.append((now - lag, now, thread_time_ns() - cpu))


def mark_stalls(
    records: Sequence[RequestRecord], stalls: Sequence[tuple[int, int, int]], worker: int = 0
) -> Stall | None:
    """Marks each record whose send-to-last-byte span overlaps a loop stall with the longest
    such stall (``loop_stall_ms``); returns the longest stall and how many requests it hit.

    Those requests' timestamps are unreliable: their reads were stamped when the loop came
    back. Stalls come from one probe, so they are disjoint and in time order.
    """
    if not stalls:
        return None
    starts = [s for s, _, _ in stalls]
    ends = [e for _, e, _ in stalls]
    longest = max(range(len(stalls)), key=lambda i: ends[i] - starts[i])
    hit = 0
    for rec in records:
        if rec.worker != worker:
            continue
        last = rec.last_token_ns or (rec.chunk_ns[-1] if rec.chunk_ns else rec.sent_ns)
        lo, hi = bisect_right(ends, rec.sent_ns), bisect_left(starts, last)
        if lo >= hi:
            continue
        worst = max(ends[i] - starts[i] for i in range(lo, hi))
        rec.loop_stall_ms = worst / 1e6
        if lo <= longest < hi:
            hit += 1
    ms = (ends[longest] - starts[longest]) / 1e6
    return Stall(ms, starts[longest], worker, hit, stalls[longest][2] / 1e6)
