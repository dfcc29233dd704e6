"""Stable measurement windows: GenAI-Perf's ``--measurement-interval``/``--stability-percentage``.

perf_analyzer's time-window mode, on our load generator: the load runs without a request
budget while windows of ``interval`` follow one another from the first measured send; after
each window the last three are compared, and the load stops once they agree (max / min of
their request throughput and of their mean request latency both within ``1 + s / 100``) or
after ``max_windows`` windows. The default of GenAI-Perf, ``s = 999``, makes any three windows
agree, so ``-p 10000`` alone measures 30 s.

Two views of each window, on purpose:

* while the load runs, only the engine's counters are watched (:class:`WindowProgress` stamps
  every send and completion): throughput is the completions in the window, and mean latency
  follows from Little's law (time-averaged requests in flight / throughput). Nothing is
  decoded while the clock runs.
* afterwards, from the per-request records, perf_analyzer's rule: a window holds the requests
  sent and completed inside it. These exact figures are the ones reported, and the
  ``stable`` verdict is theirs.

The point's statistics cover the requests of the last three windows; every other request
(before them, and the ones cut off when the load stopped) is recorded like a warm-up request,
so no statistic counts it.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns

from llmbench.api.results import MeasurementWindow, Stability
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.load.result import Progress

__all__ = [
    "DEFAULT_STABILITY_PERCENTAGE",
    "StabilityConfig",
    "WindowProgress",
    "agree",
    "measure_windows",
    "settle_records",
    "watch_windows",
]

#: How many of the most recent windows must agree (perf_analyzer's stability window).
AGREEING_WINDOWS = 3
#: GenAI-Perf's default ``--stability-percentage``: any three windows agree.
DEFAULT_STABILITY_PERCENTAGE = 999.0
#: perf_analyzer's default ``--max-trials``: windows run at most.
DEFAULT_MAX_WINDOWS = 10


@dataclass(frozen=True, slots=True)
class StabilityConfig:
    """``interval_ms`` per window, the allowed spread in percent, and the most windows to run
    (perf_analyzer's ``--max-trials``, default 10)."""

    interval_ms: float
    percentage: float = DEFAULT_STABILITY_PERCENTAGE
    max_windows: int = DEFAULT_MAX_WINDOWS

    def __post_init__(self) -> None:
        if not self.interval_ms > 0:
            raise ValueError("--measurement-interval must be greater than 0")
        if not self.percentage > 0:
            raise ValueError("--stability-percentage must be greater than 0")
        if self.max_windows < AGREEING_WINDOWS:
            raise ValueError(f"at least {AGREEING_WINDOWS} windows are needed")


class WindowProgress(Progress):
    """The engine's progress counters, with a ``perf_counter_ns`` stamp for every send and
    completion (the engine only increments them; a multi-worker parent adds in steps)."""

    def __init__(self) -> None:
        self.sent_at: list[int] = []
        self.done_at: list[int] = []
        super().__init__()

    @property
    def sent(self) -> int:
        return len(self.sent_at)

    @sent.setter
    def sent(self, value: int) -> None:
        now = perf_counter_ns()
        self.sent_at.extend([now] * max(0, value - len(self.sent_at)))

    @property
    def done(self) -> int:
        return len(self.done_at)

    @done.setter
    def done(self, value: int) -> None:
        now = perf_counter_ns()
        self.done_at.extend([now] * max(0, value - len(self.done_at)))


def _in_flight_ns(sent: Sequence[int], done: Sequence[int], start: int, end: int) -> float:
    """The integral of (sent − done) over [start, end], in request-nanoseconds."""
    events = sorted(
        [(t, 1) for t in sent if t < end] + [(t, -1) for t in done if t < end]
    )
    level = 0
    area = 0.0
    last = start
    for t, step in events:
        if t > start:
            area += level * (t - last)
            last = t
        level += step
    return area + level * (end - last)


def agree(windows: Sequence[tuple[float, float | None]], percentage: float) -> bool:
    """Whether the last three ``(throughput, mean latency)`` windows agree within
    ``percentage``: max / min of each at most ``1 + percentage / 100``, none empty."""
    if len(windows) < AGREEING_WINDOWS:
        return False
    last = windows[-AGREEING_WINDOWS:]
    limit = 1 + percentage / 100
    for values in ([w[0] for w in last], [w[1] for w in last]):
        if any(v is None or not v > 0 for v in values):
            return False
        nums = [float(v) for v in values if v is not None]
        if max(nums) / min(nums) > limit:
            return False
    return True


def _spread_pct(values: Sequence[float | None]) -> float | None:
    nums = [v for v in values if v is not None]
    if len(nums) != len(values) or not nums or min(nums) <= 0:
        return None
    return (max(nums) / min(nums) - 1) * 100


@dataclass
class _Live:
    bounds: list[tuple[int, int]] = field(default_factory=list)
    figures: list[tuple[float, float | None]] = field(default_factory=list)


async def watch_windows(
    progress: WindowProgress,
    cfg: StabilityConfig,
    warmup: int,
    stop_load: asyncio.Event,
) -> list[tuple[int, int]]:
    """Runs windows back to back from the first measured send (send number ``warmup + 1``)
    and sets ``stop_load`` once the last three agree or ``max_windows`` ran; returns the
    windows' ``(start_ns, end_ns)``. Cancelled (the run was stopped), it returns nothing: the
    caller keeps the windows it can still read from the records."""
    live = _Live()
    interval = int(cfg.interval_ms * 1e6)
    while len(progress.sent_at) <= warmup:
        if stop_load.is_set():
            return []
        await asyncio.sleep(0.001)
    start = progress.sent_at[warmup]
    for k in range(cfg.max_windows):
        ws, we = start + k * interval, start + (k + 1) * interval
        delay = (we - perf_counter_ns()) / 1e9
        if delay > 0:
            try:
                await asyncio.wait_for(stop_load.wait(), delay)
            except TimeoutError:
                pass
        if stop_load.is_set():
            return live.bounds
        done = progress.done_at
        n = bisect_right(done, we) - bisect_right(done, ws)
        rate = n / (interval / 1e9)
        latency = (
            _in_flight_ns(progress.sent_at, done, ws, we) / n / 1e6 if n else None
        )
        live.bounds.append((ws, we))
        live.figures.append((rate, latency))
        if agree(live.figures, cfg.percentage):
            break
    stop_load.set()
    return live.bounds


def measure_windows(
    records: Sequence[RequestRecord], bounds: Sequence[tuple[int, int]], cfg: StabilityConfig
) -> Stability:
    """The exact figures of each window from the records (measured requests sent and
    completed in it), and whether the last three agree."""
    windows: list[MeasurementWindow] = []
    for ws, we in bounds:
        lat = [
            (r.last_token_ns - r.sent_ns) / 1e6
            for r in records
            if r.ok and not r.warmup and r.last_token_ns is not None
            and ws <= r.sent_ns and r.last_token_ns <= we
        ]
        windows.append(
            MeasurementWindow(
                start_ns=ws,
                end_ns=we,
                completed_requests=len(lat),
                request_throughput=len(lat) / ((we - ws) / 1e9),
                avg_request_latency_ms=sum(lat) / len(lat) if lat else None,
            )
        )
    figures = [(w.request_throughput, w.avg_request_latency_ms) for w in windows]
    last = windows[-AGREEING_WINDOWS:]
    return Stability(
        measurement_interval_ms=cfg.interval_ms,
        stability_percentage=cfg.percentage,
        max_windows=cfg.max_windows,
        stable=agree(figures, cfg.percentage),
        windows=windows,
        reported_windows=len(last),
        throughput_spread_pct=_spread_pct([w.request_throughput for w in last]),
        latency_spread_pct=_spread_pct([w.avg_request_latency_ms for w in last]),
    )


def settle_records(records: Sequence[RequestRecord], stability: Stability) -> None:
    """Keeps in the measurement only the requests of the reported (last three) windows: sent
    in them and, when they succeeded, completed in them. The others become warm-up records."""
    last = stability.windows[-stability.reported_windows:] if stability.windows else []
    if not last:
        for r in records:
            r.warmup = True
        return
    ws, we = last[0].start_ns, last[-1].end_ns
    for r in records:
        if r.warmup:
            continue
        inside = ws <= r.sent_ns < we
        if r.ok:
            inside = inside and r.last_token_ns is not None and r.last_token_ns <= we
        elif r.error_type == "interrupted":
            inside = False
        r.warmup = not inside
