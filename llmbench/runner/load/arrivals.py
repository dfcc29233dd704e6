"""When a run sends: the arrival times of a request rate or of a replayed trace, and when
the closed loop's slots start.

Pure and lazy (a generator of offsets from the load's start), so the schedule is the same
whatever the load generator does, costs no memory at a high rate, and is tested without a
server. A constant rate is evenly spaced; a Poisson one has exponential gaps, a gamma one
(``--request-rate-mode gamma --burstiness K``, vLLM's arrivals) gamma gaps of shape K and
mean 1/rate (CV 1/sqrt(K): K = 1 is Poisson, K < 1 burstier), both from a generator seeded
by ``--random-seed``; ``--fixed-schedule`` sends the trace's offsets.

A ramp (``--ramp-up S``) grows the rate linearly from 0 to its target over S seconds: the
target's own process is re-timed so its cumulative count follows the ramp's,
``R t^2 / 2S`` before S and ``R (t - S/2)`` after (a time change that keeps the gaps' shape).
The ramp's sends are warm-up (:func:`ramp_arrivals` counts them), so the point is measured
at the target rate only. A closed loop's ramp starts its slots one by one instead
(:func:`slot_start_offsets`); what it sends inside the ramp is warm-up too, counted as it
happens (:class:`~llmbench.runner.load.slots.SlotRamp`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from time import perf_counter_ns

import numpy as np

from llmbench.runner.load.config import LoadConfig

__all__ = [
    "expected_cv", "ramp_arrivals", "schedule_offsets", "sleep_until", "slot_start_offsets",
]

#: Random gaps are drawn this many at a time (one generator call per block).
_BLOCK = 1024


def schedule_offsets(cfg: LoadConfig) -> Iterator[int]:
    """Send offsets (ns) of an open-loop schedule, without end: evenly spaced, exponential
    gaps (Poisson arrivals) or gamma gaps, ramped when ``cfg.ramp_up_s`` is set.

    Produced lazily, so a duration-bounded run at a high rate holds no schedule in memory.
    A fixed schedule (``cfg.schedule_ns``) is sent as given, and ends with it.
    """
    if cfg.schedule_ns is not None:
        yield from cfg.schedule_ns
        return
    if not cfg.ramp_up_s:
        yield from _target_offsets(cfg)
        return
    ramp_ns = cfg.ramp_up_s * 1e9
    for u in _target_offsets(cfg):
        # u: when the target-rate process sends; the ramp sends its u-th request at t with
        # R t^2 / 2S = R u (before the ramp's end, u < S/2), else t = u + S/2.
        yield int(math.sqrt(2.0 * ramp_ns * u)) if u < ramp_ns / 2 else int(u + ramp_ns / 2)


def _target_offsets(cfg: LoadConfig) -> Iterator[int]:
    """The target rate's own offsets (ns): constant, Poisson or gamma gaps."""
    assert cfg.request_rate and cfg.request_rate > 0
    mean_gap = 1e9 / cfg.request_rate
    if cfg.rate_mode in ("poisson", "gamma"):
        rng = np.random.default_rng(cfg.seed)
        shape = (cfg.burstiness or 1.0) if cfg.rate_mode == "gamma" else None
        t = 0.0
        while True:
            yield int(t)
            gaps = (
                rng.exponential(mean_gap, _BLOCK) if shape is None
                else rng.gamma(shape, mean_gap / shape, _BLOCK)
            )
            for gap in gaps:
                t += gap
                yield int(t)
    i = 0
    while True:
        yield int(cfg.phase_ns + i * mean_gap)
        i += 1


def ramp_arrivals(cfg: LoadConfig) -> int:
    """How many sends the schedule places inside the ramp (0 without one): the warm-up the
    ramp adds, so the measured requests all go out at the target rate."""
    if not cfg.ramp_up_s or cfg.schedule_ns is not None:
        return 0
    end = cfg.ramp_up_s * 1e9
    n = 0
    for offset in schedule_offsets(cfg):
        if offset >= end:
            return n
        n += 1
    return n  # pragma: no cover - the schedule of a rate has no end


def expected_cv(cfg: LoadConfig) -> float | None:
    """The requested gaps' coefficient of variation (std / mean): 0 constant, 1 Poisson,
    1/sqrt(K) gamma; None for a replayed trace."""
    if cfg.schedule_ns is not None or cfg.request_rate is None:
        return None
    if cfg.rate_mode == "poisson":
        return 1.0
    if cfg.rate_mode == "gamma":
        return 1.0 / math.sqrt(cfg.burstiness or 1.0)
    return 0.0


def slot_start_offsets(concurrency: int, ramp_up_s: float | None) -> list[int]:
    """When each of ``concurrency`` slots sends its first request (ns after the load's start).

    Without a ramp all start at 0. With one the slots start one at a time at even steps, slot
    ``i`` at ``S * i / (N - 1)``: one in flight at 0, the N-th at S (AIPerf's linear ramp, +1
    every ``S / (N - 1)`` seconds). One slot starts at 0 and has nothing to ramp.

    Example::

        slot_start_offsets(5, 2.0)   # [0, 500_000_000, 1_000_000_000, 1_500_000_000, 2_000_000_000]
    """
    if not ramp_up_s or concurrency <= 1:
        return [0] * concurrency
    step = ramp_up_s * 1e9 / (concurrency - 1)
    return [round(i * step) for i in range(concurrency)]


async def sleep_until(deadline_ns: int) -> None:
    """Sleeps until the monotonic clock reaches ``deadline_ns``, never less (a timer of the
    loop may fire up to a millisecond early)."""
    while True:
        left = deadline_ns - perf_counter_ns()
        if left <= 0:
            return
        await asyncio.sleep(left / 1e9)
