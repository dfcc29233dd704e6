"""Open-loop schedules and the split of work across worker processes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from llmbench.runner.load.engine import (
    LoadConfig,
    schedule_offsets,
    split_concurrency,
    split_indices,
)


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
