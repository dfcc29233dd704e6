"""A two-axis sweep (``--sweep-workloads``) end to end against ``llmbench sim`` over HTTP.

The simulator's decode step grows with the sequences running (``--itl-ms 5 --itl-ms-per-seq
5``: 10, 15 and 25 ms at concurrency 1, 2 and 4), so per-user speed falls and throughput
rises with concurrency: a true trade-off. Two workloads share the 60 ms TTFT: 24 output
tokens (request latency ~290, ~405, ~635 ms) and 6 (~110, ~135, ~185 ms). With a p99 request
latency limit of 370 ms the long workload meets the SLO only at concurrency 1 and the short
one everywhere: the verdicts differ per workload (latencies only grow on a busy machine, so
the wider margin sits on the passing side). The long workload's OTT beats the short
one's at every concurrency by a wide margin (its 60 ms TTFT is spread over 4x the tokens),
so every long-workload point is on the Pareto frontier, and a short-workload point can be on
it only where its per-user speed came out above the long one's at the same concurrency
(equal in the simulator's design: only measurement noise separates them).
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.cli import main
from llmbench.runner.job.digest import build_digest
from llmbench.runner.report.html import build_report
from llmbench.runner.sweep.analysis import ANALYZE_CSV, ANALYZE_JSON
from llmbench.runner.sweep.noise import judged_figures
from llmbench.runner.sweep.run import CHECKPOINT
from llmbench.runner.sweep.saved import load_sweep
from tests.sim_process import running_sim

SIM_ARGS = ["--ttft-ms", "60", "--itl-ms", "5", "--itl-ms-per-seq", "5",
            "--dcgm", "--dcgm-gpus", "2", "--dcgm-pod", "vllm-0", "--dcgm-namespace", "llm"]
LONG, SHORT = "isl16-osl24", "isl16-osl6"
NAME = "llmbench-sim-openai-chat-concurrency{c}-{w}"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM_ARGS) as url:
        yield url


def argv(url: str, out: Path) -> list[str]:
    return ["analyze", "-u", url, "--sweep-list", "1,2,4",
            "--sweep-workloads", "16:24,16:6", "--request-count", "16",
            "--warmup-request-count", "4", "--extra-inputs", "ignore_eos:true",
            "--slo", "e2e_p99:370", "--server-metrics-url", url + "/dcgm/metrics",
            "--gpu-pod", "vllm-0", "--telemetry-interval", "0.1", "--artifact-dir", str(out)]


@pytest.fixture(scope="module")
def grid(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grid") / "run"
    assert main(argv(sim_url, out)) == 0
    return out


def test_each_workload_gets_its_own_verdicts(grid: Path) -> None:
    data = json.loads((grid / ANALYZE_JSON).read_text())
    assert [p["name"] for p in data["points"]] == [
        NAME.format(c=c, w=w) for w in (LONG, SHORT) for c in (1, 2, 4)
    ]
    by = {w["label"]: w for w in data["workloads"]}
    assert list(by) == [LONG, SHORT]
    assert by[LONG]["points"] == [NAME.format(c=c, w=LONG) for c in (1, 2, 4)]
    # the long workload breaks the latency limit from concurrency 2, the short one never
    assert by[LONG]["slo"]["best"] == NAME.format(c=1, w=LONG)
    assert by[LONG]["slo"]["first_failure"] == NAME.format(c=2, w=LONG)
    assert by[SHORT]["slo"]["best"] == NAME.format(c=4, w=SHORT)
    assert by[SHORT]["slo"]["first_failure"] is None
    # throughput still grows (by a quarter or more) and TTFT stays: no knee within either
    for w in (LONG, SHORT):
        assert by[w]["knee"] is None
        assert by[w]["knee_message"].startswith("knee not reached up to concurrency 4")
    assert data["knee"] is None
    # each point ran with its workload's lengths
    for p in data["points"]:
        osl = 24 if p["workload"] == LONG else 6
        assert p["osl_p99"] == osl and p["isl"] == 16


def test_pareto_frontier_per_gpu(grid: Path) -> None:
    data = json.loads((grid / ANALYZE_JSON).read_text())
    pareto = data["pareto"]
    assert pareto["basis"] == "gpu"  # the simulated exporter's 2 GPUs were kept
    points = {p["name"]: p for p in data["points"]}
    par = {p["name"]: p for p in pareto["points"]}
    assert list(par) == list(points)
    for name, p in par.items():
        assert points[name]["gpus"] == 2
        assert p["tokens_per_second"] == pytest.approx(points[name]["metrics"]["ott"] / 2)
        assert p["tokens_per_user"] == points[name]["tokens_per_user"]
    for c in (1, 2, 4):
        long, short = par[NAME.format(c=c, w=LONG)], par[NAME.format(c=c, w=SHORT)]
        # the simulator's ground truth: the decode step alone sets per-user speed (1000 / ITL)
        assert long["tokens_per_user"] == pytest.approx(1000 / (5 + 5 * c), rel=0.25)
        assert long["tokens_per_second"] > 1.1 * short["tokens_per_second"]
        assert long["frontier"]
        assert short["frontier"] == (short["tokens_per_user"] > long["tokens_per_user"])
    assert pareto["frontier"] == [n for n, p in par.items() if p["frontier"]]


def test_summary_csv_report_and_digest(grid: Path) -> None:
    with (grid / ANALYZE_CSV).open(newline="") as f:
        rows = list(csv.reader(f))
    table = rows[: rows.index([])]
    head = table[0]
    for col in ("Workload", "Output Tokens/s per User", "Output Tokens/s per GPU",
                "Pareto Frontier", "Meets SLO"):
        assert col in head
    cells = [dict(zip(head, r, strict=True)) for r in table[1:]]
    assert [c["Workload"] for c in cells] == [LONG] * 3 + [SHORT] * 3
    assert [c["Meets SLO"] for c in cells] == ["yes", "no", "no", "yes", "yes", "yes"]
    assert all(c["Pareto Frontier"] == "yes" for c in cells[:3])

    page = (grid / "report.html").read_text()
    assert (grid / "plots" / "pareto.png").is_file()
    # the one-axis curves drawn per workload, not one line through the grid
    for w in (LONG, SHORT):
        assert (grid / "plots" / f"ott_vs_ttft_p99-{w}.png").is_file()
    assert not (grid / "plots" / "ott_vs_ttft_p99.png").exists()
    # `llmbench report DIR` re-renders it from the saved files alone, workloads kept apart
    again = build_report(grid, grid.parent / "again.html").read_text()
    assert "Pareto frontier (output tokens/s per GPU" in again
    assert f"{LONG}: max OTT under SLO" in again
    assert "Pareto frontier (output tokens/s per GPU" in page

    # what the runner pod hands the operator: per-workload verdicts and the frontier, bounded
    result, data = load_sweep(grid)
    digest = build_digest(result, data, run=1, finished=True)
    assert digest.total == 6 and digest.done == 6
    assert [p.workload for p in digest.points] == [LONG] * 3 + [SHORT] * 3
    assert digest.workloads is not None
    assert [(w.workload, w.max_under_slo) for w in digest.workloads] == [(LONG, 1.0),
                                                                         (SHORT, 4.0)]
    assert digest.pareto is not None and digest.pareto.basis == "gpu"
    assert data.pareto is not None and digest.pareto.frontier == data.pareto.frontier
    # a later run's noise band is made of these: each workload's points apart
    figures = judged_figures(data, {"ott": 5.0})
    assert sorted(k for k in figures if k != "sweep/peak_ott") == sorted(
        f"{c}@{w}/ott" for w in (LONG, SHORT) for c in (1, 2, 4)
    )


def test_an_interrupted_grid_resumes_with_the_missing_cell_only(
    grid: Path, sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    shutil.copytree(grid, out)
    # killed while the short workload's concurrency 2 ran: its entry never reached the
    # checkpoint (the same load value of the other workload did)
    missing = NAME.format(c=2, w=SHORT)
    ckpt = json.loads((out / CHECKPOINT).read_text())
    assert ckpt["points"][NAME.format(c=2, w=LONG)]["workload"] == LONG
    del ckpt["points"][missing]
    ckpt["complete"] = False
    (out / CHECKPOINT).write_text(json.dumps(ckpt))
    mtime = {n: (out / n / "profile_export.json").stat().st_mtime_ns for n in ckpt["points"]}
    capsys.readouterr()
    assert main([*argv(sim_url, out), "--no-plots"]) == 0
    err = capsys.readouterr().err
    # the message comes at the first gap (4 done before it); the 6th is taken from the folder
    assert "4 of 6 points already done" in err and f"continuing with {missing}" in err
    assert all((out / n / "profile_export.json").stat().st_mtime_ns == t for n, t in mtime.items())
    data = json.loads((out / ANALYZE_JSON).read_text())
    assert [p["name"] for p in data["points"]] == [
        NAME.format(c=c, w=w) for w in (LONG, SHORT) for c in (1, 2, 4)
    ]
    assert data["workloads"][1]["slo"]["best"] == NAME.format(c=4, w=SHORT)
