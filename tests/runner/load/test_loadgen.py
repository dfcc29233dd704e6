"""Open-loop schedules and the split of work across worker processes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from llmbench.runner.load.arrivals import schedule_offsets
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.sessions import session_plan
from llmbench.runner.load.workers import split_concurrency, split_indices


def test_constant_schedule_is_evenly_spaced() -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=40)
    assert list(itertools.islice(schedule_offsets(cfg), 4)) == [0, 25_000_000, 50_000_000,
                                                                75_000_000]


def test_poisson_schedule_has_the_rate_as_mean_and_is_seeded() -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=10, rate_mode="poisson", seed=3)
    a = list(itertools.islice(schedule_offsets(cfg), 20_001))
    b = list(itertools.islice(schedule_offsets(cfg), 20_001))
    assert a == b and a[0] == 0
    gaps = np.diff(a) / 1e9
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    # Exponential gaps: the standard deviation equals the mean.
    assert gaps.std() == pytest.approx(0.1, rel=0.05)


def test_work_split_across_workers_covers_every_request_once() -> None:
    cfg = LoadConfig(concurrency=5, request_count=17, warmup_request_count=3)
    parts = split_indices(cfg, 3)
    assert sorted(i for p in parts for i in p) == list(range(20))
    assert all(any(i < 3 for i in p) for p in parts)  # every worker warms up
    assert split_concurrency(5, 3) == [2, 2, 1]


def test_session_plan_is_seeded_and_bounded_as_genai_perf_draws_it() -> None:
    cfg = LoadConfig(
        mode="session_concurrency", num_sessions=400, session_turns_mean=3,
        session_turns_stddev=2, session_turn_delay_mean_ms=20, session_turn_delay_stddev_ms=30,
        seed=9,
    )
    plan = session_plan(cfg)
    assert plan == session_plan(cfg)  # the seed makes it repeatable
    assert len(plan.turns) == 400 and min(plan.turns) == 1  # at least one turn each
    assert np.mean(plan.turns) == pytest.approx(3.2, abs=0.4)  # clamped at 1, so a bit more
    assert [len(d) for d in plan.delays_ms] == [t - 1 for t in plan.turns]
    delays = [d for ds in plan.delays_ms for d in ds]
    assert min(delays) == 0 and all(isinstance(d, int) for d in delays)
    assert plan.total == sum(plan.turns)
    assert plan.first()[:3] == [0, plan.turns[0], plan.turns[0] + plan.turns[1]]
    fixed = session_plan(LoadConfig(num_sessions=2, session_turns_mean=3,
                                    session_turn_delay_mean_ms=15))
    assert fixed.turns == (3, 3) and fixed.delays_ms == ((15, 15), (15, 15))
