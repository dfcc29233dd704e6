"""How the load answers a failing target: connect back-off, ``Retry-After``, and what a
failed request costs its slot.

A dead target is not hammered (connects back off, doubling, jittered so the slots do not
retry in lockstep) and an overloaded one asking for a pause gets it (``Retry-After`` of a
429/503, capped at ``LoadConfig.retry_after_max_s``); the waits are counted, so they show
in the result.
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from llmbench.runner.client.transport import Exchange
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.state import RunState

__all__ = [
    "CONNECT_BACKOFF_FIRST_S",
    "CONNECT_BACKOFF_MAX_S",
    "after_failure",
    "connect_backoff_s",
    "retry_after_s",
]


#: Connect retries back off from the first to the last delay, doubling, with jitter so the
#: slots do not retry in lockstep.
CONNECT_BACKOFF_FIRST_S = 0.05
CONNECT_BACKOFF_MAX_S = 2.0


def connect_backoff_s(failures: int) -> float:
    """Seconds to wait after ``failures`` connect failures in a row: doubling from
    :data:`CONNECT_BACKOFF_FIRST_S` to :data:`CONNECT_BACKOFF_MAX_S`, times a jitter in
    [0.5, 1), so a dead target is not hammered and slots do not retry in lockstep."""
    base = min(CONNECT_BACKOFF_MAX_S, CONNECT_BACKOFF_FIRST_S * 2.0 ** min(failures - 1, 16))
    return base * (0.5 + random.random() / 2)


def retry_after_s(ex: Exchange, cap: float) -> float | None:
    """The ``Retry-After`` of a 429/503 answer in seconds (delta or HTTP date), capped at
    ``cap``; None when the answer asks for no wait."""
    if ex.status not in (429, 503):
        return None
    value = ex.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not seconds > 0:
        return None
    return min(seconds, cap)


async def after_failure(state: RunState, ex: Exchange, cfg: LoadConfig, failures: int) -> int:
    """What a failed request costs its slot before the next one: a failed connect backs off
    (the run of failures grows, bounded and jittered); any other failure means the target was
    reached, so the run resets and a ``Retry-After`` is honoured. Returns the new run length."""
    if ex.error == "connect":
        failures += 1
        state.connect_failed(ex)
        await asyncio.sleep(connect_backoff_s(failures))
        return failures
    state.reached()
    wait = retry_after_s(ex, cfg.retry_after_max_s)
    if wait is not None:
        await state.hold(wait)
    return 0
