"""What the load generator reports: live counters while it runs, a result when it is done.

:class:`Progress` is what the progress display and the stability check poll; a
:class:`LoadResult` is one process's (or pod's) records and figures, and
:func:`merge_results` makes one result of several (worker processes, runner shards).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.load.stalls import Stall

__all__ = ["LoadResult", "Progress", "SlotStarts", "merge_results"]


class Progress:
    """Counters the progress display polls; plain ints, because the hot path only increments.

    ``loop_lag_ms`` collects how late the event loop woke a periodic timer during the run: a
    read waiting for a busy loop is stamped that much late, so this is the client's own
    measure of how far it can be trusted. ``stalls`` are the wake-ups later than
    :data:`~llmbench.runner.load.stalls.STALL_MS`, as (start, end) ``perf_counter_ns``
    intervals with the CPU time (ns) the loop's thread used across them.
    """

    def __init__(self) -> None:
        self.sent = 0
        self.done = 0
        self.errors = 0
        self.loop_lag_ms: list[float] = []
        self.stalls: list[tuple[int, int, int]] = []


@dataclass(frozen=True, slots=True)
class SlotStarts:
    """A closed-loop ramp's slot starts (``perf_counter_ns``): the load's start, when each slot
    was planned to send its first request, and when it did (None: it never sent)."""

    start_ns: int
    planned_ns: tuple[int, ...]
    sent_ns: tuple[int | None, ...]


@dataclass(slots=True)
class LoadResult:
    """What one run of the load generator hands back besides the records.

    ``unrecorded_errors``: measured requests that failed and were counted but not kept as
    records (beyond ``error_records_kept`` per type).
    ``stop_reason``: why the run ended before its budget (the target stayed unreachable).
    ``retry_after_waits`` / ``retry_after_wait_s``: how often and how long (slot-seconds) the
    slots held back because the target answered ``Retry-After``.
    ``spilled_requests``: finished responses parked in a file because the buffer was full.
    """

    records: list[RequestRecord]
    unrecorded_errors: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    retry_after_waits: int = 0
    retry_after_wait_s: float = 0.0
    spilled_requests: int = 0
    longest_stall: Stall | None = None
    loop_lag_ms: list[float] = field(default_factory=list)
    event_loop: str = "asyncio"
    #: Session runs: the body each turn really sent (its history included), by request number.
    sent_bodies: dict[int, bytes] = field(default_factory=dict)
    #: Session runs: sessions ended early because a turn failed (no answer to continue from).
    sessions_abandoned: int = 0
    #: Closed-loop ramps: the plan and when each slot sent its first request.
    slot_starts: SlotStarts | None = None


def merge_results(results: Sequence[LoadResult]) -> LoadResult:
    """One result from the workers' results: records by send time, counts summed, the first
    stop reason, the longest stall."""
    records = sorted((r for part in results for r in part.records), key=lambda r: r.sent_ns)
    unrecorded: Counter[str] = Counter()
    for part in results:
        unrecorded.update(part.unrecorded_errors)
    stalls = [p.longest_stall for p in results if p.longest_stall is not None]
    return LoadResult(
        records=records,
        unrecorded_errors=dict(unrecorded),
        stop_reason=next((p.stop_reason for p in results if p.stop_reason), None),
        retry_after_waits=sum(p.retry_after_waits for p in results),
        retry_after_wait_s=sum(p.retry_after_wait_s for p in results),
        spilled_requests=sum(p.spilled_requests for p in results),
        longest_stall=max(stalls, key=lambda st: st.ms) if stalls else None,
        loop_lag_ms=[x for p in results for x in p.loop_lag_ms],
        event_loop=results[0].event_loop if results else "asyncio",
    )
