"""Gamma (bursty) arrivals and rate ramps: the schedule against the requested distribution
(Kolmogorov-Smirnov against the exact gamma CDF), and the sends as ``llmbench sim`` recorded
them (its own arrival stamps are the ground truth) against the schedule."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from llmbench.api import Spec, SpecError
from llmbench.runner.load.arrivals import expected_cv, ramp_arrivals, schedule_offsets
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.point.config import point_config
from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records

N = 20_000
RATE = 50.0


def gaps_of(cfg: LoadConfig, n: int = N) -> np.ndarray:
    return np.diff(np.asarray(list(itertools.islice(schedule_offsets(cfg), n + 1)), float)) / 1e9


def ks_distance(sample: np.ndarray, cdf: Callable[[float], float]) -> float:
    """The largest gap between the sample's empirical CDF and ``cdf``."""
    xs = np.sort(sample)
    n = xs.size
    theory = np.array([cdf(float(x)) for x in xs])
    upper = np.arange(1, n + 1) / n - theory
    lower = theory - np.arange(0, n) / n
    return float(max(upper.max(), lower.max()))


#: Gamma CDFs with a closed form: shape 1/2 (a scaled chi-square of one degree) and 2.
GAMMA_CDF: dict[float, Callable[[float, float], float]] = {
    0.5: lambda x, theta: math.erf(math.sqrt(x / theta)),
    2.0: lambda x, theta: 1.0 - math.exp(-x / theta) * (1.0 + x / theta),
}


@pytest.mark.parametrize("shape", sorted(GAMMA_CDF))
def test_gamma_gaps_follow_the_requested_distribution(shape: float) -> None:
    cfg = LoadConfig(
        mode="request_rate", request_rate=RATE, rate_mode="gamma", burstiness=shape, seed=7
    )
    gaps = gaps_of(cfg)
    theta = 1.0 / RATE / shape
    # KS at the 1 % level: 1.63 / sqrt(n); the schedule is seeded, so this never flakes
    assert ks_distance(gaps, lambda x: GAMMA_CDF[shape](x, theta)) < 1.63 / math.sqrt(N)
    assert gaps.mean() == pytest.approx(1.0 / RATE, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(expected_cv(cfg), rel=0.05)
    assert list(itertools.islice(schedule_offsets(cfg), 50)) == list(
        itertools.islice(schedule_offsets(cfg), 50)
    )


def test_burstiness_one_is_the_poisson_schedule() -> None:
    poisson = LoadConfig(mode="request_rate", request_rate=RATE, rate_mode="poisson", seed=1)
    gamma1 = LoadConfig(
        mode="request_rate", request_rate=RATE, rate_mode="gamma", burstiness=1.0, seed=1
    )
    a, b = gaps_of(poisson, 5000), gaps_of(gamma1, 5000)
    assert ks_distance(b, lambda x: 1.0 - math.exp(-x * RATE)) < 1.63 / math.sqrt(5000)
    assert a.std() / a.mean() == pytest.approx(b.std() / b.mean(), rel=0.05)


def test_ramp_grows_the_rate_linearly_then_holds_it() -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=RATE, ramp_up_s=4.0)
    offsets = np.asarray(list(itertools.islice(schedule_offsets(cfg), 400)), float) / 1e9
    # the count by time t follows R t^2 / 2S during the ramp: 25 at 2 s, 100 at 4 s
    assert int((offsets < 2.0).sum()) == pytest.approx(RATE * 2.0**2 / 8.0, abs=1)
    assert ramp_arrivals(cfg) == int((offsets < 4.0).sum()) == 100
    after = np.diff(offsets[offsets >= 4.0])
    assert after == pytest.approx(1.0 / RATE, abs=1e-6)  # the target's even spacing
    # the rate inside the ramp grows: later gaps are shorter
    during = np.diff(offsets[offsets < 4.0])
    assert np.all(np.diff(during) < 0)


def test_gamma_ramp_keeps_the_shape_after_the_ramp() -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=RATE, rate_mode="gamma",
                     burstiness=0.5, seed=4, ramp_up_s=2.0)
    offsets = np.asarray(list(itertools.islice(schedule_offsets(cfg), N)), float) / 1e9
    after = np.diff(offsets[offsets >= 2.0])
    assert after.std() / after.mean() == pytest.approx(math.sqrt(2.0), rel=0.05)
    assert after.mean() == pytest.approx(1.0 / RATE, rel=0.03)


BASE = {"target": {"url": "http://sim:8000", "model": "m"}}


def test_ramp_up_warmup_is_added_by_the_point() -> None:
    spec = Spec.from_manifest({**BASE, "load": {
        "mode": "request_rate", "requestRate": 20, "rampUpSeconds": 3,
        "warmupRequestCount": 5, "requestCount": 40,
    }})
    cfg = point_config(spec)
    assert cfg.load.ramp_up_s == 3.0
    assert cfg.load.warmup_request_count == 5 + 30  # R S / 2 sends inside the ramp
    assert cfg.load.request_count == 40


@pytest.mark.parametrize(
    ("load", "extra", "field"),
    [
        ({"mode": "request_rate", "requestRate": 5, "burstiness": 0.5}, {},
         "spec.load.burstiness: load.burstiness is the shape of gamma gaps"),
        ({"mode": "request_rate", "requestRate": 5, "requestRateMode": "gamma",
          "burstiness": 0}, {}, "spec.load.burstiness: 0: must be greater than 0"),
        ({"mode": "request_rate", "requestRate": 5, "rampUpSeconds": 5, "workers": 2}, {},
         "spec.load.rampUpSeconds: load.rampUpSeconds ramps one sender's"),
        ({"mode": "request_rate", "requestRate": 5, "rampUpSeconds": 5}, {"runner": {
            "replicas": 2}}, "spec.load.rampUpSeconds: load.rampUpSeconds ramps one runner's"),
    ],
)
def test_bad_arrival_settings_name_the_field(load: dict, extra: dict, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        Spec.from_manifest({**BASE, "load": load, **extra})
    assert field in str(exc.value)


@pytest.fixture(scope="module")
def sims() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


SIM = ("--ttft-ms", "5", "--itl-ms", "1")
SHORT = ("--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "4",
         "--extra-inputs", "ignore_eos:true")


def test_gamma_sends_reach_the_server_as_scheduled(sims: SimFactory, tmp_path: Path) -> None:
    url = sims(*SIM)
    code, result, _ = profile_point(
        tmp_path, url, "--request-rate", "80", "--request-rate-mode", "gamma",
        "--burstiness", "0.5", "--request-count", "400", "--random-seed", "11", *SHORT,
    )
    assert code == 0
    d = result.dispatch
    assert d is not None and d.scheduled_gaps is not None and d.achieved_gaps is not None
    requested = math.sqrt(2.0)  # CV of gamma shape 1/2
    assert d.scheduled_gaps.gaps == d.achieved_gaps.gaps == 399
    assert d.scheduled_gaps.mean_ms == pytest.approx(1000 / 80, rel=0.15)
    assert d.scheduled_gaps.cv == pytest.approx(requested, rel=0.2)
    # the client kept the schedule's shape: achieved against scheduled, and the server's view
    # (tolerances for a busy 2-core machine, where a late dispatcher bunches a few sends)
    assert d.achieved_gaps.cv == pytest.approx(d.scheduled_gaps.cv, rel=0.25)
    assert d.achieved_gaps.mean_ms == pytest.approx(d.scheduled_gaps.mean_ms, rel=0.05)
    arrivals = np.sort([r["arrival_ns"] for r in sim_records(url)][-400:]) / 1e6
    server = np.diff(arrivals)
    assert server.std() / server.mean() == pytest.approx(d.scheduled_gaps.cv, rel=0.3)


def test_ramped_rate_is_measured_after_the_ramp(sims: SimFactory, tmp_path: Path) -> None:
    url = sims(*SIM, "--seed", "2")  # a sim of its own: its records are this run's only
    code, result, _ = profile_point(
        tmp_path, url, "--request-rate", "40", "--ramp-up", "2", "--request-count", "60", *SHORT,
    )
    assert code == 0
    assert result.window.warmup_requests == 40  # R S / 2 sends inside the 2 s ramp
    recs = sim_records(url)
    arrivals = np.asarray([r["arrival_ns"] for r in recs], float)
    arrivals = (np.sort(arrivals) - arrivals.min()) / 1e9
    # the sim's own clock: 10 arrivals in the ramp's first second (R t^2 / 2S), 40 by 2 s
    assert int((arrivals < 1.0).sum()) == pytest.approx(10, abs=2)
    assert int((arrivals < 2.0).sum()) == pytest.approx(40, abs=2)
    d = result.dispatch
    assert d is not None and d.achieved_gaps is not None and d.scheduled_gaps is not None
    assert d.scheduled_gaps.mean_ms == pytest.approx(25.0) and d.scheduled_gaps.cv < 1e-6
    assert d.achieved_gaps.mean_ms == pytest.approx(25.0, rel=0.05)  # measured at 40/s
    assert d.achieved_gaps.cv < 0.5  # send jitter of a busy 2-core machine, not a ramp's
    assert result.window.start_ns is not None
    first_measured = (result.window.start_ns - np.min([r["arrival_ns"] for r in recs])) / 1e9
    assert first_measured > 1.9
