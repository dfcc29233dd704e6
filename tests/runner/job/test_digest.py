"""The run digest: per-point figures, knee, max under SLO, validity, and the 4 KiB fallback.

A 9-point, 8-GPU concurrency sweep (1..256, the size the issue names) is built from a point
result ``llmbench profile`` wrote against ``llmbench sim --dcgm`` (one GPU, copied to eight),
with chosen figures per point and a validity warning on every point, so the full digest is
well over the termination message's 4096 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmbench.api import Spec
from llmbench.api.job import TERMINATION_LIMIT
from llmbench.api.results import (
    ClientHealth,
    ErrorKind,
    Errors,
    Figure,
    PointResult,
    ValiditySignal,
    read_result,
)
from llmbench.api.status import ParetoStatus, RunDigest, WorkloadStatus, dump
from llmbench.runner.job.digest import (
    build_digest,
    point_warnings,
    rule_name,
    termination_message,
)
from llmbench.runner.sweep.analysis import analysis
from llmbench.runner.sweep.run import DONE, FAILED, PointRun, SweepResult

DATA = Path(__file__).resolve().parents[1] / "point" / "data" / "telemetry_goodput.json"
VALUES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
#: (p99 TTFT ms, OTT tok/s) per point: TTFT doubles at 16, OTT saturates from 32 on.
CURVE = [(40, 100), (41, 200), (42, 400), (50, 800), (95, 1500), (200, 1550), (400, 1560),
         (800, 1565), (1600, 1570)]
GPUS = 8


def base() -> PointResult:
    return read_result(PointResult, DATA)


def eight_gpu_point(ttft: float, ott: float, *, foreign: bool = True) -> PointResult:
    s = base()
    assert s.telemetry is not None and s.time_to_first_token is not None
    (gpu,) = s.telemetry.gpus.values()
    s.telemetry.gpus = {
        f"node-a:gpu{i}": gpu.model_copy(update={"gpu_id": f"node-a:gpu{i}", "index": str(i)})
        for i in range(GPUS)
    }
    s.time_to_first_token = s.time_to_first_token.model_copy(update={"p99": float(ttft)})
    s.output_token_throughput = Figure(unit="tokens/sec", avg=float(ott))
    if foreign:
        s.telemetry.validity = [
            ValiditySignal(
                signal="foreign_traffic", severity="error",
                message="the server completed 140 requests in the window, the client 100: 40 "
                "came from someone else, so latency and throughput include their load",
                numbers={"excess": 40},
            ),
            ValiditySignal(signal="server_queueing", severity="warning",
                           message="requests waited in the server's queue", numbers={}),
        ]
    return s


def spec(slo: float | None = 90.0) -> Spec:
    doc: dict[str, object] = {
        "target": {"url": "http://127.0.0.1:9", "model": "m"},
        "sweep": {"type": "concurrency", "values": [float(v) for v in VALUES]},
    }
    if slo is not None:
        doc["slo"] = {"ttftP99Ms": slo}
    return Spec.from_manifest(doc)


def sweep_result(tmp_path: Path, **kw: bool) -> SweepResult:
    sp = spec()
    res = SweepResult(sp, tmp_path, "m", "concurrency", [float(v) for v in VALUES])
    for v, (ttft, ott) in zip(VALUES, CURVE, strict=True):
        res.runs.append(PointRun(f"m-chat-concurrency{v}", float(v), 1, DONE, None,
                                 eight_gpu_point(ttft, ott, **kw)))
    return res


def test_nine_points_eight_gpus(tmp_path: Path) -> None:
    res = sweep_result(tmp_path)
    data = analysis(res)
    d = build_digest(res, run=3, data=data, finished=True, runner_node="node-a")
    assert (d.run, d.total, d.done, d.finished, d.failed) == (3, 9, 9, True, None)
    assert [p.value for p in d.points] == VALUES
    one = base().telemetry
    assert one is not None
    (gpu,) = one.gpus.values()
    for p in d.points:
        assert p.state == "Succeeded" and p.gpus == GPUS
        assert p.gpu_power_w == pytest.approx(GPUS * (gpu.power_w.avg or 0))
        assert p.gpu_energy_j == pytest.approx(GPUS * (gpu.energy_j or 0))
        assert p.gpu_utilization_pct == pytest.approx(gpu.utilization_pct.avg)
        # foreign traffic invalidates; server queueing is what load looks like
        assert p.valid is False and len(p.warnings) == 1
        assert p.warnings[0].startswith("foreign_traffic: the server completed 140")
    assert d.valid is False and len(d.invalid_reasons) == 9
    # the knee and the SLO verdict are the sweep analysis's own
    assert data.knee is not None and d.knee is not None
    assert d.knee.reached and d.knee.value == data.knee.value
    assert d.knee.label == f"{data.knee.value:g}" and d.knee.message == data.knee_message
    assert d.knee.rule is not None
    assert set(d.knee.rule.split(",")) <= {"ttft-2x", "ott-saturation"}
    m = d.max_under_slo
    assert m is not None
    assert (m.value, m.ott, m.ttft_p99_ms) == (8, 800, 50)
    assert (m.first_failing_value, m.first_failing_metric) == (16, "ttft_p99")
    assert "max OTT under SLO" in m.message
    # the status's field names
    doc = dump(d)
    assert {"maxUnderSLO", "invalidReasons", "runnerNode"} <= set(doc)
    assert {"ttftP99Ms", "gpuPowerW", "sloMet"} <= set(doc["points"][0])
    assert doc["runnerNode"] == "node-a"


def test_termination_message_fits_4_kib(tmp_path: Path) -> None:
    res = sweep_result(tmp_path)
    d = build_digest(res, analysis(res), run=1, finished=True)
    full = json.dumps(dump(d), separators=(",", ":"))
    assert len(full.encode()) > TERMINATION_LIMIT  # the case that needs trimming
    msg = termination_message(d)
    assert len(msg.encode()) <= TERMINATION_LIMIT
    back = RunDigest.model_validate_json(msg)
    # the headline survives: progress, knee, max under SLO, validity, the last points
    assert (back.total, back.done, back.finished, back.valid) == (9, 9, True, False)
    assert back.knee == d.knee and back.max_under_slo == d.max_under_slo
    assert back.points and back.points[-1].value == 256
    assert all(p.warnings == [] for p in back.points)
    assert [p.value for p in back.points] == VALUES[-len(back.points):]
    assert d.points[0].warnings  # the input digest is left as it was


def test_small_digest_is_sent_whole(tmp_path: Path) -> None:
    res = sweep_result(tmp_path, foreign=False)
    res.runs = res.runs[:2]
    d = build_digest(res, analysis(res))
    msg = termination_message(d)
    assert RunDigest.model_validate_json(msg) == d


def test_pathological_texts_still_fit(tmp_path: Path) -> None:
    res = sweep_result(tmp_path)
    for r in res.runs:
        r.status, r.reason = FAILED, "x" * 5000
    d = build_digest(res, analysis(res), finished=True, failed="y" * 10_000)
    d.knee.message = "k" * 10_000 if d.knee is not None else ""
    msg = termination_message(d)
    assert len(msg.encode()) <= TERMINATION_LIMIT
    back = RunDigest.model_validate_json(msg)
    assert back.failed and back.failed.startswith("yyy") and back.done == 9


def test_two_axis_digest_keeps_each_workloads_figures_in_4_kib(tmp_path: Path) -> None:
    res = sweep_result(tmp_path)
    d = build_digest(res, analysis(res), run=1, finished=True)
    # the most a two-axis status holds: 16 workloads with 300-character verdicts, a frontier
    # of 40 long point names
    d.workloads = [
        WorkloadStatus.model_validate({"workload": f"isl{i}-osl{i}", "knee": 8.0,
                                       "maxUnderSLO": 4.0, "maxOtt": 1500.0 + i,
                                       "message": "m" * 300})
        for i in range(16)
    ]
    d.pareto = ParetoStatus(basis="gpu", frontier=[f"model-openai-chat-concurrency{i}-isl"
                                                   f"{i}-osl{i}" for i in range(40)])
    msg = termination_message(d)
    assert len(msg.encode()) <= TERMINATION_LIMIT
    back = RunDigest.model_validate_json(msg)
    assert back.workloads is not None
    assert [(w.workload, w.max_under_slo, w.max_ott) for w in back.workloads] == [
        (f"isl{i}-osl{i}", 4.0, 1500.0 + i) for i in range(16)
    ]
    assert back.total == 9 and back.done == 9


def test_failed_run_reasons(tmp_path: Path) -> None:
    res = sweep_result(tmp_path)
    res.runs = res.runs[:2]
    for r in res.runs:
        r.status, r.reason, r.summary = FAILED, "ProfileError: cannot reach it", None
    d = build_digest(res, analysis(res), finished=True)
    assert d.failed == "no point succeeded: ProfileError: cannot reach it"
    assert [p.state for p in d.points] == ["Failed", "Failed"]
    assert d.points[0].reason == "ProfileError: cannot reach it" and d.points[0].valid is None
    assert d.valid is None
    res.stopped_on_failure = True
    d = build_digest(res, analysis(res), finished=True)
    assert d.failed is not None and "onPointFailure: stop" in d.failed
    # not finished: no verdict on the run yet
    assert build_digest(res, analysis(res)).failed is None


def test_point_warnings_error_rate_and_loop_lag() -> None:
    s = base()
    s.telemetry = None
    assert point_warnings(s) == []
    s.window = s.window.model_copy(update={"measured_requests": 100})
    s.errors = Errors(total=2, by_type={"http_500": ErrorKind(count=2, sample="boom")})
    s.client = ClientHealth(workers=1, loop_lag_ms=None, warnings=["loop lag p90 3 ms"])
    assert point_warnings(s) == [
        "client_lag: loop lag p90 3 ms",
        "error_rate: 2 of 100 requests failed (2.0 % > 1 %)",
    ]


def test_rule_names() -> None:
    assert rule_name("ttft_p99") == "ttft-2x"
    assert rule_name("ott_plateau") == "ott-saturation"
    assert rule_name("ott-saturation") == "ott-saturation"
    assert rule_name("ttft-2x") == "ttft-2x"


def test_the_verdict_against_a_baseline_is_llmbench_compares(tmp_path: Path) -> None:
    """The digest judges the run as ``llmbench compare`` judges two sweeps: same rows, same
    verdicts; a baseline figure the run lacks is ``missing``."""
    from llmbench.api.job import BaselineContext
    from llmbench.runner.sweep.compare import compare_sweeps, figures_from_points

    res = sweep_result(tmp_path, foreign=False)
    data = analysis(res)
    own = build_digest(res, run=2, data=data)
    assert own.regression is None  # no baseline: no verdict
    # the baseline: this very run, but p99 TTFT at concurrency 4 was 30 ms, not 42 ms
    slower_at_4 = [p.model_copy(update={"ttft_p99_ms": 30.0}) if p.value == 4 else p
                   for p in own.points]
    assert own.max_under_slo is not None
    base = BaselineContext(label="run 1", run=1, points=slower_at_4,
                           max_ott_under_slo=own.max_under_slo.ott)
    tolerances = {"ttft_p99": 10.0, "max_ott_under_slo": 5.0, "j_per_token": 10.0}
    d = build_digest(res, run=2, data=data, baseline=base, tolerances=tolerances)
    v = d.regression
    assert v is not None and v.regressed and (v.baseline, v.baseline_run) == ("run 1", 1)
    (row,) = v.rows
    assert (row.scope, row.metric, row.baseline, row.value) == ("concurrency 4", "ttft_p99",
                                                                30.0, 42.0)
    assert row.change_pct == pytest.approx(40.0) and row.tolerance_pct == 10.0
    assert v.message.startswith("1 figure(s) regressed against run 1; first: concurrency 4 "
                                "ttft_p99 30")
    # the same rows compare_sweeps gives for the two digests' figures
    rows = compare_sweeps(figures_from_points(base.points, base.max_ott_under_slo, "concurrency"),
                          figures_from_points(own.points, own.max_under_slo.ott, "concurrency"),
                          tolerances)
    assert [(r.scope, r.metric) for r in rows if r.verdict == "regression"] == [
        ("concurrency 4", "ttft_p99")]
    # GPU energy per output token is judged where both runs have it (J/token from the analysis)
    assert all(p.joules_per_output_token is not None for p in own.points)
    assert v.compared == sum(1 for r in rows if r.tolerance_pct is not None)
    within = build_digest(res, run=2, data=data, baseline=base.model_copy(
        update={"points": own.points}), tolerances=tolerances)
    assert within.regression is not None and not within.regression.regressed
    assert within.regression.message.endswith("within tolerance of run 1")
    # a point only the baseline measured is listed, not judged (as llmbench compare does)
    extra = [*own.points, own.points[-1].model_copy(update={"value": 512.0, "name": "c512"})]
    gone = build_digest(res, run=2, data=data, baseline=base.model_copy(
        update={"points": extra}), tolerances=tolerances)
    assert gone.regression is not None and gone.regression.regressed is False


def test_a_finished_digest_carries_its_figures_and_a_history_verdict(tmp_path: Path) -> None:
    """``spec.baseline.mode: history``: the finished digest keeps the judged figures (the
    next runs' history), and a baseline made of a history is judged by its noise bands."""
    from llmbench.api.job import BaselineContext, HistoryFigures

    res = sweep_result(tmp_path, foreign=False)
    data = analysis(res)
    tolerances = {"ttft_p99": 10.0}
    assert build_digest(res, data, tolerances=tolerances).figures is None  # not finished
    own = build_digest(res, data, finished=True, tolerances=tolerances)
    assert own.figures == {f"{p.value:g}/ttft_p99": p.ttft_p99_ms for p in own.points}
    faster = {k: v / 2 for k, v in own.figures.items()}  # the history's TTFT was half
    base = BaselineContext(label="history", band_k=3.0, history=[
        HistoryFigures(run=r, figures=faster) for r in (1, 2, 3)])
    d = build_digest(res, data, finished=True, baseline=base, tolerances=tolerances)
    v = d.regression
    assert v is not None and v.regressed and v.history_runs == [1, 2, 3]
    assert v.compared == len(own.points) and all(r.upper is not None for r in v.rows)
