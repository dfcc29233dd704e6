"""The adaptive max-load-under-SLO search (``--search max-under-slo``, ``spec.sweep.search``).

The plan is checked as a pure function against every threshold of a range; the whole search
runs against ``llmbench sim`` with ``--max-num-seqs 6``: up to 6 requests in flight none
waits for a decode slot (TTFT ~60 ms), from 7 on one always does (TTFT >= 160 ms), so a p99
TTFT limit of 130 ms breaks at exactly 7. The sim's own records (arrival and admission per
request) are the ground truth for "queued" at the answer and at the first failing load.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmbench.api import Spec
from llmbench.api.results import PointResult, SweepAnalysis
from llmbench.cli import main
from llmbench.runner.job.digest import max_under_slo_status
from llmbench.runner.sweep.analysis import ANALYZE_CSV, ANALYZE_JSON
from llmbench.runner.sweep.search import SearchPlan, bounds, grid_points, next_probe, search_plan
from tests.sim_process import running_sim

SLOTS = 6
SIM_ARGS = ["--ttft-ms", "60", "--itl-ms", "2", "--max-num-seqs", str(SLOTS)]
LOAD = [
    "--request-count", "16", "--warmup-request-count", "4",
    "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "20",
    "--extra-inputs", "ignore_eos:true",
]


def run_plan(plan: SearchPlan, meets: float) -> list[tuple[float, bool]]:
    """The probes of a search whose SLO holds up to ``meets`` (inclusive)."""
    probes: list[tuple[float, bool]] = []
    while (v := next_probe(plan, probes)) is not None:
        assert v not in [p for p, _ in probes], f"probe {v} repeated"
        assert plan.low <= v <= plan.high
        probes.append((v, v <= meets))
        assert len(probes) < 100
    return probes


@pytest.mark.parametrize("threshold", range(1, 65))
def test_concurrency_search_finds_every_threshold_exactly(threshold: int) -> None:
    plan = SearchPlan(low=1, high=64, integer=True, resolution=1)
    probes = run_plan(plan, threshold)
    passed, failed = bounds(probes)
    assert passed == threshold
    assert failed == (None if threshold == 64 else threshold + 1)
    # doubling to the threshold, then bisecting an interval no wider than it
    assert len(probes) <= math.floor(math.log2(threshold)) + 2 + math.ceil(math.log2(threshold))
    assert all(float(v).is_integer() for v, _ in probes)


def test_search_ends_at_once_when_the_start_breaks_the_slo() -> None:
    plan = SearchPlan(low=4, high=64, integer=True, resolution=1)
    assert run_plan(plan, 2) == [(4, False)]


def test_coarser_resolution_stops_earlier() -> None:
    plan = SearchPlan(low=1, high=256, integer=True, resolution=8)
    probes = run_plan(plan, 100)
    passed, failed = bounds(probes)
    assert passed is not None and failed is not None
    assert passed <= 100 < failed and failed - passed <= 8
    assert grid_points(plan) == 32  # 1, 9, ..., 249


@pytest.mark.parametrize("threshold", [0.7, 3.3, 17.25, 41.0, 99.9])
def test_rate_search_lands_within_five_percent(threshold: float) -> None:
    plan = SearchPlan(low=0.5, high=100.0, integer=False, resolution=None)
    probes = run_plan(plan, threshold)
    passed, failed = bounds(probes)
    assert passed is not None and passed <= threshold
    assert failed is None or (threshold < failed and failed - passed <= 0.05 * passed + 1e-9)
    # the geometric grid of 5 % steps from 0.5 to 100 has 110 points
    assert grid_points(plan) == 110
    assert len(probes) <= math.log2(110) + 6


def test_plan_from_the_spec_defaults_the_resolution() -> None:
    base = {"target": {"url": "http://sim:8000", "model": "m"}, "slo": {"ttftP99Ms": 100}}
    conc = Spec.from_manifest({**base, "sweep": {"range": "2:40", "search": {}}})
    assert search_plan(conc) == SearchPlan(2, 40, True, 1.0)
    rate = Spec.from_manifest({
        **base, "load": {"mode": "request_rate", "requestRate": 1},
        "sweep": {"type": "request_rate", "values": [8, 0.5, 2], "search": {"resolution": 0.25}},
    })
    assert search_plan(rate) == SearchPlan(0.5, 8, False, 0.25)
    assert search_plan(Spec.from_manifest({**base, "sweep": {"range": "1:4"}})) is None


@pytest.mark.parametrize(
    ("sweep", "slo", "field"),
    [
        ({"type": "input_sequence_length", "range": "16:64", "search": {}}, {"ttftP99Ms": 9},
         "spec.sweep.search: sweep.search finds a load"),
        ({"range": "1:8", "search": {"resolution": 0}}, {"ttftP99Ms": 9},
         "spec.sweep.search.resolution: 0: must be greater than 0"),
        ({"range": "1:8", "search": {"resolution": 1.5}}, {"ttftP99Ms": 9},
         "spec.sweep.search.resolution: sweep.search.resolution of a concurrency sweep must be a "
         "whole number"),
        ({"range": "1:8", "search": {}}, {},
         "spec.sweep.search: sweep.search looks for the highest load meeting the SLO"),
        ({"range": "1:8", "search": {}, "stopAfterKnee": True}, {"ttftP99Ms": 9},
         "spec.sweep.stopAfterKnee: sweep.search picks the points itself"),
    ],
)
def test_bad_search_specs_name_the_field(sweep: dict, slo: dict, field: str) -> None:
    from llmbench.api import SpecError

    doc = {"target": {"url": "http://sim:8000", "model": "m"}, "sweep": sweep, "slo": slo}
    with pytest.raises(SpecError) as exc:
        Spec.from_manifest(doc)
    assert field in str(exc.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sweep-type", "input_sequence_length", "--sweep-range", "16:64", "--search",
          "max-under-slo", "--slo", "ttft_p99:100"], "--search: sweep.search finds a load"),
        (["--search", "max-under-slo", "--search-resolution", "0", "--slo", "ttft_p99:100"],
         "--search-resolution"),
        (["--search", "max-under-slo"], "--search: sweep.search looks for the highest load"),
        (["--search", "fastest"], "--search 'fastest': expected max-under-slo"),
        (["--search-resolution", "2", "--slo", "ttft_p99:100"],
         "--search-resolution: needs --search max-under-slo"),
    ],
)
def test_bad_search_flags_are_usage_errors_naming_the_flag(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc = main(["analyze", "-u", "http://127.0.0.1:9", "-m", "m", *flags,
               "--artifact-dir", str(tmp_path), "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM_ARGS) as url:
        yield url


def _queued(url: str, summary: PointResult) -> int:
    """Measured requests of a point that the sim kept waiting for a decode slot (its records:
    admitted more than 30 ms after arrival; an unqueued request is admitted at once)."""
    recs = httpx.get(url + "/sim/records").json()
    recs = recs["records"] if isinstance(recs, dict) else recs
    start, end = summary.window.start_ns, summary.window.end_ns
    assert start is not None and end is not None
    mine = [r for r in recs if start <= r["arrival_ns"] <= end and r["max_tokens"] != 1]
    assert len(mine) >= summary.window.completed_requests
    return sum(1 for r in mine if r["admitted_ns"] - r["arrival_ns"] > 30_000_000)


def test_search_lands_on_the_sims_slot_count(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["analyze", "-u", sim_url, "--sweep-range", "1:32", "--search", "max-under-slo",
            "--slo", "ttft_p99:130", *LOAD, "--artifact-dir", str(out), "--no-plots"]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 0, err
    data = SweepAnalysis.model_validate_json((out / ANALYZE_JSON).read_text())
    search = data.search
    assert search is not None
    assert search.answer == SLOTS and search.first_failing == SLOTS + 1, search.message
    assert search.converged
    assert search.grid_points == 32
    # 1, 2, 4, 8 (fails), then 6, 7: at most log2(grid points) + 2
    assert len(search.probes) <= math.log2(32) + 2
    assert [p.value for p in search.probes] == [1, 2, 4, 8, 6, 7]
    assert [p.phase for p in search.probes] == ["doubling"] * 4 + ["bisection"] * 2
    assert [p.meets_slo for p in search.probes] == [True, True, True, False, True, False]
    assert search.probes[-1].violations and "p99 TTFT" in search.probes[-1].violations[0]
    assert data.values == [1, 2, 4, 6, 7, 8]  # the points in load order
    assert "max load under SLO (ttft_p99 130): concurrency 6, first failing concurrency 7; " \
        "6 probes at resolution 1, where a grid of that resolution over the range needs 32 " \
        "points" in err.replace("\n", " ")

    # ground truth: the sim queued none of the answer's requests and some of the next load's
    def summary(c: int) -> PointResult:
        folder = out / f"llmbench-sim-openai-chat-concurrency{c}"
        return PointResult.model_validate_json(
            (folder / "profile_export_genai_perf.json").read_text()
        )

    assert _queued(sim_url, summary(SLOTS)) == 0
    assert _queued(sim_url, summary(SLOTS + 1)) > 0

    # the summary CSV: each probe's number and phase, the answer marked
    with (out / ANALYZE_CSV).open(newline="") as f:
        rows = list(csv.reader(f))
    by_conc = {r[1]: dict(zip(rows[0], r, strict=True)) for r in rows[1:7]}
    assert by_conc["6"]["Search Probe"] == "5 bisection"
    assert by_conc["6"]["Max Under SLO"] == "yes"
    assert by_conc["8"]["Search Probe"] == "4 doubling" and by_conc["8"]["Max Under SLO"] == ""

    # the operator's status: maxUnderSLO.search
    status = max_under_slo_status(data)
    assert status is not None and status.search is not None
    assert status.search.answer == SLOTS
    assert status.search.probes == ["1:pass", "2:pass", "4:pass", "8:fail", "6:pass", "7:fail"]
    assert status.search.resolution == "1" and status.search.grid_points == 32

    # the HTML report shows the probes
    from llmbench.runner.report.html import build_report

    html = build_report(out).read_text()
    assert "Max load under SLO: the search" in html
    assert "6 probes at resolution 1" in html

    # run again: the checkpoint replays the same probes and measures nothing
    before = len(httpx.get(sim_url + "/sim/records").json()["records"])
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "all 6 points were already done" in err
    assert len(httpx.get(sim_url + "/sim/records").json()["records"]) == before + 1  # preflight
    again = json.loads((out / ANALYZE_JSON).read_text())
    assert again["search"]["answer"] == SLOTS


def test_search_from_a_manifest_with_repetitions(sim_url: str, tmp_path: Path) -> None:
    import yaml

    manifest = tmp_path / "bench.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "llmbench.io/v1alpha1", "kind": "LLMBenchmark",
        "metadata": {"name": "search"},
        "spec": {
            "target": {"url": sim_url, "model": "llmbench-sim"},
            "workload": {"inputTokens": {"mean": 16}, "outputTokens": {"mean": 20},
                         "extraInputs": {"ignore_eos": True}},
            "load": {"requestCount": 16, "warmupRequestCount": 4},
            "sweep": {"type": "concurrency", "range": "4:12", "search": {"resolution": 2}},
            "repetitions": 2,
            "slo": {"ttftP99Ms": 130},
        },
    }))
    out = tmp_path / "run"
    assert main(["analyze", "-f", str(manifest), "--artifact-dir", str(out), "--no-plots"]) == 0
    data = SweepAnalysis.model_validate_json((out / ANALYZE_JSON).read_text())
    assert data.search is not None
    # 4 passes, 8 fails, 6 passes: 8 - 6 <= 2
    assert [p.value for p in data.search.probes] == [4, 8, 6]
    assert data.search.answer == SLOTS and data.search.grid_points == 5
    assert all(len(p.runs) == 2 for p in data.points)  # repetitions honoured
