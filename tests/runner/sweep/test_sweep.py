"""Sweep values, per-point folders, checkpoint/resume, failures, repetitions, stop after knee.

A fake point runner stands in for the load generator here (it returns summaries with chosen
figures, and records which points ran); test_analyze.py runs the real thing against the sim.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from results_factory import flat, point_result

from llmbench.api import Spec, parse_sweep_list, sweep_values
from llmbench.api.results import ErrorKind, Errors, PointResult
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.point.preflight import ProfileError
from llmbench.runner.point.profile import ProfileResult
from llmbench.runner.sweep.analysis import analysis
from llmbench.runner.sweep.run import (
    CHECKPOINT,
    CheckpointError,
    PointRun,
    aggregate,
    run_sweep,
)

# --- values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("concurrency", "1:256", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
        ("concurrency", "3:20", [3, 4, 8, 16, 20]),
        ("concurrency", "4:4", [4]),
        ("concurrency", "1:10:3", [1, 4, 7, 10]),
        ("request_rate", "2:12:2", [2, 4, 6, 8, 10, 12]),
        ("request_rate", "0.5:1.5:0.5", [0.5, 1.0, 1.5]),
        ("request_rate", "1:8", [1, 2, 3, 4, 5, 6, 7, 8]),
        ("input_sequence_length", "100:800", [100, 200, 300, 400, 500, 600, 700, 800]),
        ("output_sequence_length", "1:4", [1, 2, 3, 4]),
    ],
)
def test_ranges(kind: str, text: str, expected: list[float]) -> None:
    assert sweep_values(kind, text, None) == expected


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("concurrency", "8:1", "--sweep-range '8:1': start 8 is greater than end 1"),
        ("concurrency", "", "--sweep-range '': expected start:end or start:end:step"),
        ("concurrency", "1:", "--sweep-range '1:': expected start:end or start:end:step"),
        ("concurrency", "a:8", "--sweep-range 'a:8': 'a' is not a number"),
        ("concurrency", "0:8", "--sweep-range '0:8': concurrency values must be at least 1"),
        ("concurrency", "1.5:8", "concurrency values must be whole numbers, got 1.5"),
        ("concurrency", "1:8:0", "--sweep-range '1:8:0': step must be greater than 0"),
        ("request_rate", "0:1", "request_rate values must be greater than 0"),
        ("latency", "1:8", "--sweep-type 'latency': expected one of concurrency, request_rate"),
    ],
)
def test_bad_ranges_name_the_flag(kind: str, text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        sweep_values(kind, text, None)
    assert message in str(err.value)


def test_lists() -> None:
    assert parse_sweep_list("2, 4,6") == [2, 4, 6]
    for bad, msg in [("2,x", "'x' is not a number"), ("", "expected comma-separated"),
                     ("1,,2", "expected comma-separated")]:
        with pytest.raises(ValueError) as err:
            parse_sweep_list(bad)
        assert str(err.value).startswith("--sweep-list") and msg in str(err.value)
    with pytest.raises(ValueError, match="--sweep-list '1,1': values repeat"):
        sweep_values("concurrency", None, [1, 1])
    with pytest.raises(ValueError, match="must be whole numbers"):
        sweep_values("concurrency", None, [1.5])


# --- running with a fake point runner -----------------------------------------------------


def summary(ttft: float, ott: float, completed: int = 10) -> PointResult:
    return point_result(
        ttft=flat("ms", ttft), itl=flat("ms", 1.0), e2e=flat("ms", ttft + 10), ott=ott,
        rps=ott / 10, completed=completed,
    )


class FakeRunner:
    """Knee at concurrency 4 (OTT +2.5 % from 4 to 8; TTFT doubles only at 8); records every
    point it ran."""

    CURVE = {1: (10, 100), 2: (10, 200), 4: (11, 400), 8: (40, 410), 16: (90, 405),
             32: (200, 400)}

    def __init__(self, fail: set[int] | None = None, stop_at: int | None = None) -> None:
        self.ran: list[tuple[int, Path]] = []
        self.fail = fail or set()
        self.stop_at = stop_at

    async def __call__(self, cfg: Any, stop: asyncio.Event) -> ProfileResult:
        c = cfg.load.concurrency
        if c in self.fail:
            raise ProfileError(f"cannot reach {cfg.url} (--url): connection refused")
        self.ran.append((c, cfg.artifact_dir))
        ttft, ott = self.CURVE[c]
        s = summary(ttft, ott)
        if self.stop_at == c:
            stop.set()
            s.interrupted = True
            return ProfileResult(s, [], cfg.artifact_dir)
        cfg.artifact_dir.mkdir(parents=True, exist_ok=True)
        (cfg.artifact_dir / GENAI_PERF_JSON).write_text(s.to_json())
        return ProfileResult(s, [], cfg.artifact_dir)


def make_spec(values: str = "1,2,4,8,16,32", **sweep: Any) -> Spec:
    return Spec.from_manifest({
        "target": {"url": "http://127.0.0.1:9", "model": "m/odel"},
        "sweep": {"type": "concurrency", "values": [float(v) for v in values.split(",")],
                  **sweep},
    })


def sweep(spec: Spec, run_dir: Path, runner: FakeRunner, **kw: Any) -> Any:
    msgs: list[str] = []
    res = asyncio.run(run_sweep(spec, run_dir, model="m/odel", run_point=runner,
                                notify=msgs.append, **kw))
    return res, msgs


def test_points_run_in_order_into_genai_perf_folders(tmp_path: Path) -> None:
    runner = FakeRunner()
    res, _ = sweep(make_spec(), tmp_path, runner)
    assert [c for c, _ in runner.ran] == [1, 2, 4, 8, 16, 32]
    assert runner.ran[0][1] == tmp_path / "m_odel-openai-chat-concurrency1"
    ckpt = json.loads((tmp_path / CHECKPOINT).read_text())
    assert ckpt["complete"] and len(ckpt["points"]) == 6
    assert [m.value for m in res.metrics()] == [1, 2, 4, 8, 16, 32]


def test_resume_repeats_no_finished_point(tmp_path: Path) -> None:
    first = FakeRunner(stop_at=8)
    res, _ = sweep(make_spec(), tmp_path, first)
    assert res.interrupted
    assert [c for c, _ in first.ran] == [1, 2, 4, 8]
    second = FakeRunner()
    res, msgs = sweep(make_spec(), tmp_path, second)
    assert [c for c, _ in second.ran] == [8, 16, 32]  # 8 was interrupted: it runs again
    assert any(
        m.startswith(f"resuming from {tmp_path / CHECKPOINT}: 3 of 6 points already done")
        and m.endswith("continuing with m_odel-openai-chat-concurrency8")
        for m in msgs
    )
    assert res.resumed == [f"m_odel-openai-chat-concurrency{c}" for c in (1, 2, 4)]
    assert [m.value for m in res.metrics()] == [1, 2, 4, 8, 16, 32]
    third = FakeRunner()
    _, msgs = sweep(make_spec(), tmp_path, third)
    assert third.ran == [] and "nothing re-run" in msgs[-1]
    fourth = FakeRunner()
    sweep(make_spec(), tmp_path, fourth, restart=True)
    assert [c for c, _ in fourth.ran] == [1, 2, 4, 8, 16, 32]  # --restart ignores the checkpoint


def test_corrupt_and_foreign_checkpoints_are_reported(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT).write_text('{"version": 1, "points": ')
    with pytest.raises(CheckpointError, match="is corrupt .* delete it or pass --restart"):
        sweep(make_spec(), tmp_path, FakeRunner())
    (tmp_path / CHECKPOINT).write_text('["not", "a", "checkpoint"]')
    with pytest.raises(CheckpointError, match="not a version-1 llmbench checkpoint"):
        sweep(make_spec(), tmp_path, FakeRunner())
    other = tmp_path / "other"
    sweep(make_spec("1,2"), other, FakeRunner())
    with pytest.raises(CheckpointError, match="belongs to a different sweep"):
        sweep(make_spec("1,2,4"), other, FakeRunner())


def test_failed_point_recorded_and_sweep_continues(tmp_path: Path) -> None:
    runner = FakeRunner(fail={2})
    res, msgs = sweep(make_spec("1,2,4"), tmp_path, runner)
    assert [c for c, _ in runner.ran] == [1, 4]
    failed = res.failed_runs
    assert len(failed) == 1 and "connection refused" in (failed[0].reason or "")
    assert any("FAILED" in m for m in msgs)
    ckpt = json.loads((tmp_path / CHECKPOINT).read_text())
    assert ckpt["points"]["m_odel-openai-chat-concurrency2"]["status"] == "failed"
    # a resume retries the failed point only
    again = FakeRunner()
    sweep(make_spec("1,2,4"), tmp_path, again)
    assert [c for c, _ in again.ran] == [2]


def test_on_point_failure_stop(tmp_path: Path) -> None:
    runner = FakeRunner(fail={2})
    res, _ = sweep(make_spec("1,2,4", onPointFailure="stop"), tmp_path, runner)
    assert [c for c, _ in runner.ran] == [1] and res.stopped_on_failure


def test_point_with_no_completed_request_fails_with_error_counts(tmp_path: Path) -> None:
    async def all_errors(cfg: Any, stop: asyncio.Event) -> ProfileResult:
        s = summary(1, 0, completed=0)
        s.errors = Errors(total=3, by_type={"http_500": ErrorKind(count=3, sample="boom")})
        return ProfileResult(s, [], cfg.artifact_dir)

    res = asyncio.run(run_sweep(make_spec("1"), tmp_path, model="m", run_point=all_errors))
    assert res.runs[0].status == "failed"
    assert res.runs[0].reason == "no request completed (http_500 x3: boom)"


def test_stop_after_knee_runs_one_point_past_it(tmp_path: Path) -> None:
    """The OTT plateau shows at 8 and puts the knee at 4: 8 is the point past it, stop."""
    runner = FakeRunner()
    res, _ = sweep(make_spec(stopAfterKnee=True), tmp_path, runner)
    assert [c for c, _ in runner.ran] == [1, 2, 4, 8]
    assert res.stopped_after_knee
    data = analysis(res)
    assert data.knee is not None and data.knee.value == 4 and data.knee.rules == ["ott_plateau"]


class TtftKneeRunner(FakeRunner):
    """OTT keeps growing; p99 TTFT doubles at 4 (the knee), and one more point runs."""

    CURVE = {1: (10, 100), 2: (12, 200), 4: (25, 380), 8: (60, 700), 16: (130, 720),
             32: (300, 730)}


def test_stop_after_a_ttft_knee_runs_one_point_past_it(tmp_path: Path) -> None:
    runner = TtftKneeRunner()
    res, _ = sweep(make_spec(stopAfterKnee=True), tmp_path, runner)
    assert [c for c, _ in runner.ran] == [1, 2, 4, 8]
    assert res.stopped_after_knee
    data = analysis(res)
    assert data.knee is not None and data.knee.value == 4 and data.knee.rules == ["ttft_p99"]


def test_repetitions_folders_and_spread(tmp_path: Path) -> None:
    spec = make_spec("1,2")
    spec.repetitions = 2
    runner = FakeRunner()
    res, _ = sweep(spec, tmp_path, runner)
    assert [p.name for _, p in runner.ran] == [
        "m_odel-openai-chat-concurrency1-rep1", "m_odel-openai-chat-concurrency1-rep2",
        "m_odel-openai-chat-concurrency2-rep1", "m_odel-openai-chat-concurrency2-rep2",
    ]
    assert len(res.points()) == 2


def test_aggregate_flags_spread_above_ten_percent() -> None:
    runs = [PointRun(f"p{i}", 4, i, "done", None, summary(10, ott)) for i, ott in
            enumerate((100, 100, 130))]
    mean, spreads = aggregate(runs)
    assert mean.ott == pytest.approx(110)
    s = spreads["ott"]
    assert (s.min, s.max, s.n) == (100, 130, 3)
    assert s.relative == pytest.approx(30 / 110) and s.unstable
    assert not spreads["ttft_p99_ms"].unstable
    failed = [PointRun("x", 4, 1, "failed", "down")]
    assert aggregate(failed)[0].failed == "down"
