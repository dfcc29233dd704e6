"""Open-loop schedules: evenly spaced, Poisson with the rate as mean, seeded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from llmbench.runner.load.arrivals import schedule_offsets
from llmbench.runner.load.config import LoadConfig


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
