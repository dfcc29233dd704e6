"""One run's shared bookkeeping: the request counter, the kept exchanges, the fault state.

Every slot of a process (closed loop, sessions) or the open-loop dispatcher takes its request
numbers from one :class:`RunState`, so warm-up and measured requests come from one counter
and a stop, an unreachable target or a ``Retry-After`` is seen by all of them at once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from time import perf_counter_ns

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.transport import Exchange
from llmbench.runner.load.buffer import ResponseBuffer, default_buffer_bytes
from llmbench.runner.load.config import LoadConfig

__all__ = ["RunState"]


class RunState:
    """The run's shared bookkeeping: the request counter, finished exchanges, fault state."""

    def __init__(self, cfg: LoadConfig, indices: Sequence[int]) -> None:
        self.cfg = cfg
        self.indices = indices
        self.next = 0
        self.tx: int | None = None  # first measured send, for duration-bounded runs
        self.stopped = False
        self.stop_reason: str | None = None
        self.buffer = ResponseBuffer(
            int(cfg.buffer_mb * 2**20)
            if cfg.buffer_mb is not None
            else default_buffer_bytes(cfg.workers)
        )
        self.kept_errors: Counter[str] = Counter()
        self.unrecorded: Counter[str] = Counter()
        self.unreachable_since: tuple[int, str, str] | None = None  # (ns, wall time, error)
        self.hold_until = 0  # open loop: no send before this (connect back-off), in ns
        self.retry_until = 0  # open loop: no send before this (Retry-After), in ns
        self.open_failures = 0
        self.retry_waits = 0
        self.retry_wait_ns = 0
        self.sent_bodies: dict[int, bytes] = {}
        self.sessions_abandoned = 0

    def add(self, rec: RequestRecord, ex: Exchange) -> None:
        """Keeps a finished exchange, undecoded, in the :class:`ResponseBuffer`.

        A failed request (refused connect, HTTP error, broken connection) is kept as a record
        only up to ``error_records_kept`` per type, so a dead or failing target answering in
        a tight loop cannot fill the memory; the count stays exact. A stop's ``interrupted``
        requests, one per slot at most, are always kept.
        """
        kind = ex.error or (f"http_{ex.status}" if ex.status != 200 else None)
        if kind is not None and kind != "interrupted":
            if self.kept_errors[kind] >= self.cfg.error_records_kept:
                if not rec.warmup:
                    self.unrecorded[kind] += 1
                return
            self.kept_errors[kind] += 1
        self.buffer.keep(rec, ex)

    def finish(self) -> list[RequestRecord]:
        """Decodes every finished exchange into its record, after the load is over."""
        return self.buffer.decode(self.cfg.endpoint_type)

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

    def reached(self) -> None:
        """The target answered: it is not unreachable (any more)."""
        self.unreachable_since = None

    def connect_failed(self, ex: Exchange) -> None:
        """Notes a failed connect; ends the run when connects have failed for
        ``unreachable_after_s`` with no success in between."""
        now = perf_counter_ns()
        if self.unreachable_since is None:
            wall = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.unreachable_since = (now, wall, ex.error_message or "connect failed")
            return
        since, wall, error = self.unreachable_since
        if now - since >= self.cfg.unreachable_after_s * 1e9 and not self.stopped:
            self.stopped = True
            self.stop_reason = f"target unreachable since {wall}: {error}"

    async def hold(self, seconds: float) -> None:
        """Waits ``seconds`` for a ``Retry-After``, counting the slot-time spent."""
        start = perf_counter_ns()
        self.retry_waits += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self.retry_wait_ns += perf_counter_ns() - start
