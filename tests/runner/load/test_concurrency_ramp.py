"""Concurrency ramps (``--ramp-up S --concurrency N``): the slots' start schedule (exact
values), the spec's rules, and the ramp as ``llmbench sim`` saw it: its own arrival and end
stamps give the requests in flight at each instant, which must climb 1, 2, ..., N at the
planned steps, with every request started inside the ramp warm-up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from llmbench.api import Spec, SpecError
from llmbench.runner.load.arrivals import slot_start_offsets
from llmbench.runner.load.result import SlotStarts
from llmbench.runner.point.config import point_config
from llmbench.runner.point.profile import ramp_result
from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records


def test_slots_start_one_at_a_time_at_even_steps() -> None:
    assert slot_start_offsets(5, 2.0) == [0, 500_000_000, 1_000_000_000, 1_500_000_000,
                                          2_000_000_000]
    assert slot_start_offsets(3, 0.3) == [0, 150_000_000, 300_000_000]
    assert slot_start_offsets(4, 1.0) == [0, 333_333_333, 666_666_667, 1_000_000_000]
    assert slot_start_offsets(4, None) == [0, 0, 0, 0]  # no ramp: all at once
    assert slot_start_offsets(1, 3.0) == [0]  # one slot has nothing to ramp


def test_the_reported_ramp_is_the_plan_against_the_first_sends() -> None:
    t0 = 7_000_000_000
    starts = SlotStarts(
        t0, (t0, t0 + 500_000_000, t0 + 1_000_000_000),
        (t0 + 100_000, t0 + 502_000_000, None),  # the third slot never sent (a stop)
    )
    r = ramp_result(starts, 1.0)
    assert (r.seconds, r.slots, r.step_s, r.started_slots) == (1.0, 3, 0.5, 2)
    assert r.last_slot_s == 0.502 and r.max_lag_ms == 2.0
    none = ramp_result(SlotStarts(t0, (t0,), (None,)), 2.0)
    assert (none.step_s, none.started_slots, none.last_slot_s, none.max_lag_ms) == (
        0.0, 0, None, None)


BASE = {"target": {"url": "http://sim:8000", "model": "m"}}


def test_a_concurrency_ramp_is_a_valid_spec_and_adds_no_fixed_warmup() -> None:
    spec = Spec.from_manifest({**BASE, "load": {
        "concurrency": 8, "rampUpSeconds": 4, "warmupRequestCount": 3, "requestCount": 50,
    }})
    cfg = point_config(spec)
    assert (cfg.load.mode, cfg.load.concurrency, cfg.load.ramp_up_s) == ("concurrency", 8, 4.0)
    # the ramp's warm-up is counted as it happens (by time), not planned like a rate's
    assert (cfg.load.warmup_request_count, cfg.load.request_count) == (3, 50)
    sweep = Spec.from_manifest({**BASE, "load": {"rampUpSeconds": 2},
                                "sweep": {"type": "concurrency", "values": [1, 4, 16]}})
    assert point_config(sweep, 16).load.ramp_up_s == 2.0


@pytest.mark.parametrize(
    ("load", "extra", "field"),
    [
        ({"concurrency": 4, "rampUpSeconds": 0}, {},
         "spec.load.rampUpSeconds: 0: must be greater than 0"),
        ({"concurrency": 4, "rampUpSeconds": -1}, {},
         "spec.load.rampUpSeconds: -1: must be greater than 0"),
        ({"concurrency": 4, "rampUpSeconds": 5, "workers": 2}, {},
         "spec.load.rampUpSeconds: load.rampUpSeconds ramps one sender's"),
        ({"rampUpSeconds": 5, "sessions": {"count": 4, "concurrency": 2}}, {},
         "spec.load.rampUpSeconds: load.rampUpSeconds ramps one sender's"),
        ({"concurrency": 4, "rampUpSeconds": 5}, {"runner": {"replicas": 2}},
         "spec.load.rampUpSeconds: load.rampUpSeconds ramps one runner's load"),
        ({"concurrency": 4, "rampUpSeconds": 900}, {"runner": {"timeoutSeconds": 600}},
         "spec.load.rampUpSeconds: load.rampUpSeconds must be shorter than runner.timeoutSeconds"),
    ],
)
def test_bad_concurrency_ramps_name_the_field(load: dict, extra: dict, field: str) -> None:
    with pytest.raises(SpecError) as exc:
        Spec.from_manifest({**BASE, "load": load, **extra})
    assert field in str(exc.value)


@pytest.fixture(scope="module")
def sims() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


def in_flight(arrivals: np.ndarray, ends: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many requests the sim held at each instant of ``at`` (arrived, not yet ended)."""
    return np.array([int(((arrivals <= t) & (ends > t)).sum()) for t in at])


def test_ramped_slots_reach_the_server_at_their_steps(sims: SimFactory, tmp_path: Path) -> None:
    # requests of ~50 ms; 4 slots over 1.5 s: one more in flight every 0.5 s
    url = sims("--ttft-ms", "40", "--itl-ms", "2", "--seed", "5")  # its records: this run's
    code, result, _ = profile_point(
        tmp_path, url, "--concurrency", "4", "--ramp-up", "1.5", "--request-count", "40",
        "--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "4",
        "--extra-inputs", "ignore_eos:true",
    )
    assert code == 0
    ramp = result.ramp
    assert ramp is not None
    assert (ramp.seconds, ramp.slots, ramp.step_s, ramp.started_slots) == (1.5, 4, 0.5, 4)
    recs = sim_records(url)
    arrivals = np.asarray([r["arrival_ns"] for r in recs], float)
    ends = np.asarray([r["last_token_ns"] for r in recs], float)
    t0 = arrivals.min()
    arrivals, ends = (arrivals - t0) / 1e9, (ends - t0) / 1e9
    # the sim's own view: at most i + 1 in flight before slot i + 1's step, all 4 after it
    for i, plan in enumerate((0.5, 1.0, 1.5)):
        before = np.linspace(plan - 0.5 + 0.02, plan - 0.02, 40)
        assert in_flight(arrivals, ends, before).max() == i + 1
        # the slot's first request reached the sim at its step (a busy machine: 60 ms)
        first_at = min(a for a in arrivals if in_flight(arrivals, ends, np.array([a]))[0]
                       == i + 2)
        assert first_at == pytest.approx(plan, abs=0.06)
    assert ramp.last_slot_s == pytest.approx(1.5, abs=0.06)
    assert ramp.max_lag_ms is not None and 0 <= ramp.max_lag_ms < 60
    # measured from the ramp's end, at 4 in flight; everything before it is warm-up
    assert result.window.measured_requests == 40
    assert result.window.start_ns is not None
    start = (result.window.start_ns - t0) / 1e9
    assert start == pytest.approx(1.5, abs=0.06)
    assert result.window.warmup_requests == int((arrivals < start - 1e-4).sum())
    assert len(recs) == 40 + result.window.warmup_requests
    # the sim held the 4 slots' requests the whole measured time (until the last sends):
    # never a 5th, and on time average more than 3 (a missing slot would hold at most 3; the
    # rest is each slot's gap between its answer and its next send, a few ms of a busy loop)
    last = np.sort(arrivals)[-4]
    held = np.clip(np.minimum(ends, last) - np.maximum(arrivals, start), 0, None).sum()
    assert 3.5 < held / (last - start) <= 4
    assert in_flight(arrivals, ends, np.linspace(start, last, 200)).max() == 4


def test_a_timed_point_is_measured_for_its_duration_after_the_ramp(
    sims: SimFactory, tmp_path: Path
) -> None:
    url = sims("--ttft-ms", "40", "--itl-ms", "2", "--seed", "6")  # its records: this run's
    code, result, _ = profile_point(
        tmp_path, url, "--concurrency", "3", "--ramp-up", "0.6", "--measurement-duration",
        "0.8", "--warmup-request-count", "2", "--synthetic-input-tokens-mean", "8",
        "--output-tokens-mean", "4", "--extra-inputs", "ignore_eos:true",
    )
    assert code == 0
    assert result.ramp is not None and result.ramp.started_slots == 3
    arrivals = np.asarray([r["arrival_ns"] for r in sim_records(url)], float)
    t0 = arrivals.min()
    assert result.window.start_ns is not None
    start = (result.window.start_ns - t0) / 1e9
    assert start == pytest.approx(0.6, abs=0.06)  # the clock of the duration starts at S
    rel = (arrivals - t0) / 1e9
    # the ramp's sends (far more than the 2 asked for) are the warm-up; the measured ones go
    # out inside [S, S + 0.8 s]
    assert result.window.warmup_requests == int((rel < start - 1e-4).sum()) > 2
    measured = rel[rel >= start - 1e-4]
    assert len(measured) == result.window.measured_requests
    assert measured.max() < start + 0.8 + 0.06
