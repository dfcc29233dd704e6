"""Reconcile's decisions: what a schedule tick does, when a spec change starts no run, the patch
that starts a run, a replaced run's history, missed and already handled ticks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmbench.api.status import BenchmarkStatus
from llmbench.operator.reconcile import (
    missed_tick_patch,
    only_schedule_changed,
    replaced_patch,
    start_patch,
    tick_cause,
    tick_decision,
    tick_handled,
)
from llmbench.operator.schedule import measured_hash
from llmbench.operator.status import Decision, decide

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "target": {"url": "http://10.0.0.5:8000"},
    "sweep": {"type": "concurrency", "range": "1:8"},
    "schedule": "*/5 * * * *",
}
RUNNING = {"run": 2, "phase": "Running", "observedGeneration": 1, "job": "b-run-2"}


@pytest.mark.parametrize(
    ("status", "generation", "policy", "expected"),
    [
        ({}, 1, None, "start"),  # a new benchmark: the tick's run is its first
        ({**RUNNING, "phase": "Succeeded"}, 1, None, "start"),  # done: a new run
        ({**RUNNING, "phase": "Failed"}, 2, "Forbid", "start"),  # spec changed since: start
        (RUNNING, 1, None, "skip"),  # Forbid is the default
        (RUNNING, 1, "Forbid", "skip"),
        ({**RUNNING, "phase": "Queued"}, 1, "Forbid", "skip"),  # waiting counts as in progress
        (RUNNING, 2, "Forbid", "skip"),  # a run waiting for its spec change ("wait")
        (RUNNING, 1, "Replace", "replace"),
        ({**RUNNING, "phase": "Pending"}, 1, "Replace", "replace"),
        (RUNNING, 2, "Replace", "replace"),
    ],
)
def test_a_tick_under_forbid_or_replace_with_a_run_in_progress_or_not(
    status: dict[str, Any], generation: int, policy: str | None, expected: str
) -> None:
    action = decide({"generation": generation}, status).action
    assert tick_decision(action, policy) == expected


def test_only_a_schedule_change_starts_no_run() -> None:
    status = BenchmarkStatus(run=3, phase="Succeeded", spec_hash=measured_hash(SPEC))
    for change in ({"schedule": "0 2 * * *"}, {"suspend": True}, {"historyLimit": 5},
                   {"concurrencyPolicy": "Replace"}, {"baseline": {"run": 1}}):
        assert only_schedule_changed(status, {**SPEC, **change}), change
    measured = {**SPEC, "sweep": {"type": "concurrency", "range": "1:16"}}
    assert not only_schedule_changed(status, measured)
    # a benchmark that never ran has no settings to compare with: it runs
    assert not only_schedule_changed(BenchmarkStatus(spec_hash=measured_hash(SPEC)), SPEC)


def test_the_start_patch_records_the_run_before_anything_exists() -> None:
    sched = {"nextRunTime": "2026-12-01T02:05:00Z", "lastScheduleTime": "2026-12-01T02:00:00Z"}
    patch = start_patch("nightly", Decision("start", 4, "scheduled run"), 7, SPEC, sched)
    f = patch.fields
    assert (f["run"], f["phase"], f["observedGeneration"]) == (4, "Pending", 7)
    assert f["resultsConfigMap"] == "nightly-run-4" and f["message"] == "scheduled run"
    assert f["specHash"] == measured_hash(SPEC)
    assert f["nextRunTime"] == sched["nextRunTime"] and f["lastScheduleTime"] == sched[
        "lastScheduleTime"]
    # the last run's results leave status (None deletes in a merge patch; lists are replaced)
    for key in ("job", "progress", "knee", "maxUnderSLO", "summaryCSV", "queuedBehind",
                "startedTime"):
        assert key in f and f[key] is None, key
    assert f["points"] == []
    conds = {c.type: c for c in patch.conditions}
    assert (conds["Running"].status, conds["Running"].reason) == ("False", "Pending")
    assert conds["Succeeded"].status == "Unknown"
    assert all(c.observed_generation == 7 for c in patch.conditions)
    plain = start_patch("nightly", Decision("start", 1), 1, SPEC, {})
    assert plain.fields["message"] == "run 1 starting"


def test_a_replaced_run_goes_into_the_history_as_failed_at_the_one_clock() -> None:
    history = [{"run": r, "phase": "Succeeded"} for r in range(1, 31)]  # the default limit: 30
    status = BenchmarkStatus.model_validate(
        {**RUNNING, "run": 31, "startedTime": "2026-12-01T01:55:00Z", "history": history}
    )
    at = T0 + timedelta(seconds=3)
    patch, why = replaced_patch("nightly", status, SPEC, 31, tick_cause(SPEC, T0).replacing, at)
    assert "replaced by the scheduled run of 2026-12-01T02:00:00Z" in why
    kept = patch.fields["history"]
    assert [h["run"] for h in kept] == list(range(2, 32))
    last = kept[-1]
    assert (last["phase"], last["startedTime"], last["finishedTime"]) == (
        "Failed", "2026-12-01T01:55:00Z", "2026-12-01T02:00:03Z")
    assert last["configMap"] == "nightly-run-31" and last["message"].startswith("run 31: ")
    short, _ = replaced_patch("nightly", status, {**SPEC, "historyLimit": 2}, 31, "x", at)
    assert [h["run"] for h in short.fields["history"]] == [30, 31]


def test_a_tick_already_handled_is_not_handled_again() -> None:
    assert not tick_handled(BenchmarkStatus(), T0)
    assert tick_handled(BenchmarkStatus(last_schedule_time="2026-12-01T02:00:00Z"), T0)
    assert tick_handled(BenchmarkStatus(last_schedule_time="2026-12-01T02:05:00Z"), T0)
    assert not tick_handled(BenchmarkStatus(last_schedule_time="2026-12-01T01:55:00Z"), T0)


def test_a_missed_tick_is_recorded_with_the_next_one_and_not_run() -> None:
    spec = {**SPEC, "startingDeadlineSeconds": 60}
    patch = missed_tick_patch(spec, T0)
    assert patch.fields["lastScheduleTime"] == "2026-12-01T02:00:00Z"
    assert patch.fields["nextRunTime"] == "2026-12-01T02:05:00Z"
    assert "missed by more than startingDeadlineSeconds (60)" in patch.fields["message"]
    assert not patch.conditions
    suspended = missed_tick_patch({**spec, "suspend": True}, T0)
    assert suspended.fields["nextRunTime"] is None
