"""The end of a run: its outcome from the Job and the digest, and the whole final status patch
(one clock, the history and its default limit, the Regressed verdict)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from llmbench.api.job import BaselineContext, RunContext
from llmbench.api.status import (
    BenchmarkStatus,
    KneeStatus,
    MaxUnderSloStatus,
    PointStatus,
    RegressionVerdict,
    RunDigest,
)
from llmbench.operator.finish import end_event, final_status, run_outcome, unfinished
from llmbench.operator.status import final_digest, termination_digest

AT = datetime(2026, 12, 1, 2, 41, 30, tzinfo=UTC)
JOB_DONE: dict[str, Any] = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
JOB_FAILED: dict[str, Any] = {"status": {"conditions": [{
    "type": "Failed", "status": "True", "reason": "DeadlineExceeded",
    "message": "Job was active longer than specified deadline"}]}}


def point(value: float, state: str = "Succeeded", reason: str | None = None) -> PointStatus:
    return PointStatus(name=f"m-openai-chat-concurrency{value:g}", value=value, state=state,
                       reason=reason, ttft_p99_ms=40.0 + value, ott=100.0 * value)


def digest(**kw: Any) -> RunDigest:
    base: dict[str, Any] = {
        "run": 3, "total": 3, "done": 3, "points": [point(1), point(2), point(4)],
        "knee": KneeStatus(reached=True, value=2, label="2", rule="ott-saturation"),
        "max_under_slo": MaxUnderSloStatus(value=4, ott=400.0, ttft_p99_ms=44.0),
        "valid": True, "finished": True,
    }
    return RunDigest(**{**base, **kw})


def kinds(conds: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in conds}


def test_a_run_whose_job_completed_with_every_point_succeeded() -> None:
    out = run_outcome(3, "Succeeded", JOB_DONE, digest(), 5)
    assert (out.phase, out.failed, out.message) == ("Succeeded", False, "run 3 finished")
    assert kinds(out.conditions) == {
        "MeasurementValid": ("True", "Valid"), "Succeeded": ("True", "RunSucceeded"),
        "Running": ("False", "Completed"),
    }
    assert all(c.observed_generation == 5 for c in out.conditions)
    early = run_outcome(3, "Succeeded", JOB_DONE, digest(done=2, stopped_after_knee=True), 5)
    assert early.message == "run 3 finished: stopped after the knee (2 of 3 points)"


def test_failure_reasons_from_the_most_specific_to_the_job() -> None:
    # the runner's own reason for the whole sweep
    whole = run_outcome(3, "Succeeded", JOB_DONE, digest(failed="target unreachable"), 5)
    assert (whole.phase, whole.message) == ("Failed", "run 3 failed: target unreachable")
    assert kinds(whole.conditions)["Succeeded"] == ("False", "RunFailed")
    assert kinds(whole.conditions)["Running"] == ("False", "RunFailed")
    # a failed point, although the Job succeeded
    points = digest(points=[point(1), point(2, "Failed", "timeout"), point(4, "Failed", "x")])
    one = run_outcome(3, "Succeeded", JOB_DONE, points, 5)
    assert one.message == (
        "run 3 failed: 2 point(s) failed; first: m-openai-chat-concurrency2: timeout")
    # the Job failed and the runner left no digest: the Job's condition says why
    job = run_outcome(3, "Failed", JOB_FAILED, None, 5)
    assert job.message == (
        "run 3 failed: DeadlineExceeded: Job was active longer than specified deadline")
    assert "MeasurementValid" not in kinds(job.conditions)
    # a Job that succeeded without a digest has nothing to show: failed
    silent = run_outcome(3, "Succeeded", JOB_DONE, None, 5)
    assert silent.message == "run 3 failed: the runner reported nothing"
    # a Job that failed after some points: the digest's validity is still reported
    late = run_outcome(3, "Failed", JOB_FAILED, digest(), 5)
    assert late.failed and kinds(late.conditions)["MeasurementValid"] == ("True", "Valid")


def test_the_operators_own_reason_and_the_kernels_oom_kill() -> None:
    # the operator ended the run itself (an image that never pulls): its reason wins
    pull = run_outcome(3, "Failed", {}, digest(failed="ignored"), 5,
                       reason="image cannot be pulled")
    assert pull.message == "run 3 failed: image cannot be pulled"
    # an OOM kill is added to the Job's "backoff", and only to a failed Job
    oom = "the runner container was OOMKilled (limits.memory 64Mi): raise spec.runner.limits.memory"
    job = run_outcome(3, "Failed", JOB_FAILED, None, 5, oom=oom)
    assert job.message == (
        "run 3 failed: DeadlineExceeded: Job was active longer than specified deadline; " + oom)
    assert run_outcome(3, "Succeeded", JOB_DONE, digest(), 5, oom=oom).message == "run 3 finished"


def status(**kw: Any) -> BenchmarkStatus:
    base: dict[str, Any] = {"run": 3, "phase": "Running", "observedGeneration": 5,
                            "job": "nightly-run-3", "startedTime": "2026-12-01T02:00:00Z",
                            "specHash": "h1"}
    return BenchmarkStatus.model_validate({**base, **kw})


def test_the_final_patch_carries_one_clock_and_the_history_entry() -> None:
    spec = {"schedule": "0 3 * * *", "target": {"url": "http://t:8000"}}
    final = final_status("nightly", 3, status(), spec, "Succeeded", JOB_DONE, digest(),
                         "csv\r\n", None, AT)
    f = final.patch.fields
    assert f["lastRunTime"] == "2026-12-01T02:41:30Z"
    assert f["nextRunTime"] == "2026-12-01T03:00:00Z"  # the next tick after the same "now"
    entry = f["history"][-1]
    assert entry["finishedTime"] == f["lastRunTime"] and entry["startedTime"] == (
        "2026-12-01T02:00:00Z")
    assert (entry["run"], entry["phase"], entry["valid"], entry["knee"]) == (
        3, "Succeeded", True, "2")
    assert entry["maxOttUnderSlo"] == 400.0 and entry["specHash"] == "h1"
    assert entry["configMap"] == "nightly-run-3" and entry["message"] == "run 3 finished"
    assert (f["phase"], f["progress"], f["summaryCSV"]) == ("Succeeded", "3/3", "csv\r\n")
    assert [c.type for c in final.patch.conditions] == [
        "MeasurementValid", "Succeeded", "Running", "Regressed"]
    assert kinds(final.patch.conditions)["Regressed"] == ("Unknown", "NoBaseline")
    assert f["regression"] is None and entry.get("regressed") is None
    assert final.dropped == []
    unscheduled = final_status("nightly", 3, status(), {}, "Succeeded", JOB_DONE, digest(),
                               None, None, AT)
    assert unscheduled.patch.fields["nextRunTime"] is None


def test_the_history_keeps_the_default_30_runs_and_names_the_rest_for_pruning() -> None:
    old = [{"run": r, "phase": "Succeeded"} for r in range(1, 31)]
    final = final_status("nightly", 31, status(run=31, history=old), {}, "Succeeded",
                         JOB_DONE, digest(run=31), None, None, AT)
    assert [h["run"] for h in final.patch.fields["history"]] == list(range(2, 32))
    assert final.dropped == [1]
    limited = final_status("nightly", 31, status(run=31, history=old), {"historyLimit": 3},
                           "Succeeded", JOB_DONE, digest(run=31), None, None, AT)
    assert [h["run"] for h in limited.patch.fields["history"]] == [29, 30, 31]
    assert limited.dropped == list(range(1, 29))


def test_a_regression_against_the_baseline_is_judged_and_kept() -> None:
    verdict = RegressionVerdict(baseline="run 2", baseline_run=2, regressed=True, compared=4,
                                message="p99 TTFT +40 % at 4")
    context = RunContext(benchmark="nightly", namespace="llm", run=3, url="http://t:8000",
                         baseline=BaselineContext(label="run 2", run=2),
                         artifacts="pvc/files/nightly/run-3")
    final = final_status("nightly", 3, status(), {}, "Succeeded", JOB_DONE,
                         digest(regression=verdict), None, context, AT)
    assert (final.regressed.status, final.regressed.reason) == ("True", "Regressed")
    assert final.patch.fields["regression"]["regressed"] is True
    entry = final.patch.fields["history"][-1]
    assert entry["regressed"] is True and entry["artifacts"] == "pvc/files/nightly/run-3"
    # a failed run is never judged, even with a verdict
    failed = final_status("nightly", 3, status(), {}, "Failed", JOB_FAILED,
                          digest(regression=verdict), None, context, AT)
    assert (failed.regressed.status, failed.regressed.reason) == ("Unknown", "RunFailed")
    assert failed.patch.fields["regression"] is None
    assert failed.patch.fields["history"][-1].get("regressed") is None


def test_only_the_current_unfinished_run_is_finished() -> None:
    assert unfinished(status(), 3)
    assert unfinished(status(phase="Pending"), 3)
    assert not unfinished(status(), 2)  # a late event of an older run
    assert not unfinished(status(phase="Succeeded"), 3)  # finished already: idempotent
    assert not unfinished(status(phase="Failed"), 3)


def test_a_run_that_ended_short_of_its_points_failed_unless_it_stopped_after_the_knee() -> None:
    short = run_outcome(3, "Succeeded", JOB_DONE, digest(done=2, points=[point(1), point(2)]), 5)
    assert short.failed and "ended with 2 of 3 planned points" in short.message
    assert kinds(short.conditions)["Succeeded"] == ("False", "RunFailed")
    knee = run_outcome(3, "Succeeded", JOB_DONE, digest(done=2, stopped_after_knee=True), 5)
    assert not knee.failed


def termination(d: RunDigest) -> dict[str, Any]:
    """A runner pod that ended with ``d`` as its termination message."""
    message = d.model_dump_json(by_alias=True, exclude_none=True)
    return {"status": {"containerStatuses": [{"state": {"terminated": {"message": message}}}]}}


def test_the_termination_message_fills_in_what_the_configmap_missed() -> None:
    stale = digest(done=1, points=[point(1)], finished=False)
    refused = RunDigest(run=3, finished=True, failed="results exceed the ConfigMap (1048700 "
                        "bytes; the API server takes at most 1048576)")
    crash = {"status": {"containerStatuses": [{"state": {"terminated": {
        "message": "Traceback (most recent call last): ..."}}}]}}
    ended = termination_digest([crash, termination(refused)])
    assert ended == refused  # a log tail is not a digest
    final = final_digest(stale, ended)
    assert final is not None and final.failed == refused.failed and final.points == stale.points
    out = run_outcome(3, "Failed", JOB_FAILED, final, 5)
    assert "results exceed the ConfigMap" in out.message
    # the ConfigMap fell behind: the later digest is the run's; a finished stored one stays
    later = digest(done=3, finished=True)
    assert final_digest(stale, later) == later
    assert final_digest(digest(), refused) == digest()
    assert final_digest(None, later) == later and final_digest(stale, None) == stale
    assert termination_digest([]) is None


def test_a_finished_run_with_an_invalid_measurement_ends_with_a_warning() -> None:
    ok = run_outcome(3, "Succeeded", JOB_DONE, digest(), 5)
    assert end_event(ok) == ("RunSucceeded", "run 3 finished", False)
    bad = run_outcome(3, "Succeeded", JOB_DONE, digest(
        valid=False, invalid_reasons=["foreign_traffic: 12 requests not ours"]), 5)
    reason, message, warning = end_event(bad)
    assert (reason, warning) == ("MeasurementInvalid", True)
    assert message.startswith("run 3 finished, but its measurement is invalid")
    assert "ValidityWarnings" in message and "12 requests not ours" in message
    failed = run_outcome(3, "Failed", JOB_FAILED, digest(), 5)
    assert end_event(failed)[0::2] == ("RunFailed", True)


def test_history_mode_keeps_the_judged_figures_in_the_history_entry() -> None:
    figures = {"sweep/peak_ott": 412.3456, "4/ttft_p99": 0.012345}
    spec = {"baseline": {"mode": "history"}}
    context = RunContext(benchmark="nightly", namespace="llm", run=3, url="http://t:8000",
                         no_baseline="insufficient history: 2 valid run(s) ...",
                         no_baseline_reason="InsufficientHistory")
    final = final_status("nightly", 3, status(), spec, "Succeeded", JOB_DONE,
                         digest(figures=figures), None, context, AT)
    entry = final.patch.fields["history"][-1]
    assert entry["figures"] == {"sweep/peak_ott": 412.35, "4/ttft_p99": 0.0123}  # as status rounds
    assert kinds(final.patch.conditions)["Regressed"] == ("Unknown", "InsufficientHistory")
    fixed = final_status("nightly", 3, status(), {}, "Succeeded", JOB_DONE,
                         digest(figures=figures), None, None, AT)
    assert "figures" not in fixed.patch.fields["history"][-1]  # fixed mode's status as before
