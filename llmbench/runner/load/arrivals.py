"""When an open-loop run sends: the arrival times of a request rate or of a replayed trace.

Pure and lazy (a generator of offsets from the load's start), so the schedule is the same
whatever the load generator does, costs no memory at a high rate, and is tested without a
server. A constant rate is evenly spaced; a Poisson one has exponential gaps from a
generator seeded by ``--random-seed``; ``--fixed-schedule`` sends the trace's offsets.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from llmbench.runner.load.config import LoadConfig

__all__ = ["schedule_offsets"]


def schedule_offsets(cfg: LoadConfig) -> Iterator[int]:
    """Send offsets (ns) of an open-loop schedule, without end: evenly spaced, or exponential
    gaps (Poisson arrivals) from a generator seeded by ``--random-seed``.

    Produced lazily, so a duration-bounded run at a high rate holds no schedule in memory.
    A fixed schedule (``cfg.schedule_ns``) is sent as given, and ends with it.
    """
    if cfg.schedule_ns is not None:
        yield from cfg.schedule_ns
        return
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
        yield int(cfg.phase_ns + i * mean_gap)
        i += 1
