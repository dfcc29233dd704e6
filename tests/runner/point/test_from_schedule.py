"""Latency from the scheduled send (coordinated omission): in open loop every TTFT and request
latency is also reported from the request's scheduled send, with goodput judged from there.

``llmbench sim`` answers each request in ~30 ms but at most 2 are let in flight
(``--max-concurrency 2``) while the schedule asks for 200/s, so the client falls behind and
holds sends: the service time (from the actual send) stays the sim's, while a user's wait
(from the schedule) grows by the dispatch lag. The sim's own records (arrival, first token)
are the ground truth for the service time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records


@pytest.fixture(scope="module")
def sims() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


SHORT = ("--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "4",
         "--extra-inputs", "ignore_eos:true")


def test_open_loop_latency_from_the_schedule(sims: SimFactory, tmp_path: Path) -> None:
    url = sims("--ttft-ms", "30", "--itl-ms", "1")
    code, result, point = profile_point(
        tmp_path, url, "--request-rate", "200", "--max-concurrency", "2",
        "--request-count", "60", "--goodput", "ttft:100", *SHORT,
    )
    assert code == 0
    ttft, sched = result.time_to_first_token, result.time_to_first_token_from_schedule
    e2e, e2e_sched = result.request_latency, result.request_latency_from_schedule
    assert ttft is not None and sched is not None and e2e is not None and e2e_sched is not None
    lag = result.dispatch.lag_ms if result.dispatch is not None else None
    assert lag is not None and lag.avg > 100  # the client fell behind the schedule
    # from the schedule = service time + dispatch lag, request by request
    assert sched.avg == pytest.approx(ttft.avg + lag.avg, rel=1e-6)
    assert e2e_sched.avg == pytest.approx(e2e.avg + lag.avg, rel=1e-6)
    assert sched.p99 > ttft.p99 + 100
    # the service time is the sim's: its own first-token - arrival
    recs = [r for r in sim_records(url) if r["first_token_ns"]]
    server = np.median([(r["first_token_ns"] - r["arrival_ns"]) / 1e6 for r in recs[-60:]])
    assert ttft.p50 == pytest.approx(server, abs=10)
    # goodput judged from the schedule: every request waited past 100 ms but a few first ones
    goodput = result.goodput
    assert goodput is not None and goodput.latency_from == "schedule"
    per_req = [json.loads(line) for line in
               (point / "profile_export_llmbench_requests.jsonl").read_text().splitlines()]
    measured = [r for r in per_req if not r.get("warmup")]
    waited = [(r["first_token_ns"] - r["scheduled_ns"]) / 1e6 for r in measured]
    assert goodput.good_requests == sum(1 for w in waited if w <= 100)
    assert goodput.good_requests < 30
    # written under our key of the GenAI-Perf JSON
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    assert doc["llmbench"]["time_to_first_token_from_schedule"]["p99"] == sched.p99
    assert "time_to_first_token_from_schedule" not in doc  # GenAI-Perf's metric keys untouched


def test_closed_loop_has_no_schedule_figures(sims: SimFactory, tmp_path: Path) -> None:
    url = sims("--ttft-ms", "5", "--itl-ms", "1")
    code, result, _ = profile_point(
        tmp_path, url, "--concurrency", "2", "--request-count", "10", "--goodput", "ttft:100",
        *SHORT,
    )
    assert code == 0
    assert result.time_to_first_token_from_schedule is None
    assert result.request_latency_from_schedule is None
    assert result.goodput is not None and result.goodput.latency_from == "send"


def test_slo_verdicts_judge_open_loop_points_from_the_schedule() -> None:
    from llmbench.api.results import PointMetrics
    from llmbench.runner.sweep.knee import evaluate_slo, latency_from

    closed = PointMetrics(value=4, ttft_p99_ms=80, e2e_p99_ms=300)
    late = PointMetrics(value=4, ttft_p99_ms=80, e2e_p99_ms=300,
                        ttft_p99_from_schedule_ms=450, e2e_p99_from_schedule_ms=670)
    limits = {"ttft_p99": 100.0, "e2e_p99": 500.0}
    assert evaluate_slo(closed, limits) == []
    broken = evaluate_slo(late, limits)  # the service time meets both; a user's wait does not
    assert [(v.metric, v.value) for v in broken] == [("ttft_p99", 450), ("e2e_p99", 670)]
    assert latency_from([closed]) == "send" and latency_from([closed, late]) == "schedule"
