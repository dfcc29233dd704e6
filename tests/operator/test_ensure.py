"""Making sure a run exists: each way it can end as a status patch (refused spec, target not
ready, endpoint busy, objects created) and what the runner is told."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from llmbench.api import Spec, SpecError
from llmbench.api.status import BenchmarkStatus, StackStatus
from llmbench.operator.ensure import (
    invalid_spec_patch,
    queued_patch,
    refused_patch,
    run_context,
    run_spec,
    running_patch,
    target_warning_due,
    telemetry_warning_due,
    waiting_patch,
)
from llmbench.operator.kube import Refused
from llmbench.operator.status import condition, decide
from llmbench.operator.target import Resolved, TargetNotReady
from tests.operator.test_build import BENCH

AT = datetime(2026, 12, 1, 2, 0, 7, tzinfo=UTC)
ACCEPTED = condition("Accepted", True, "Valid", "the spec is valid", 2)


def kinds(conds: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in conds}


def test_a_spec_only_python_can_refuse_fails_the_run_for_good() -> None:
    bad = {**BENCH, "spec": {**BENCH["spec"], "sweep": {"type": "concurrency", "range": "8:1"}}}
    with pytest.raises(SpecError) as err:
        run_spec(bad, 1)
    patch = invalid_spec_patch(err.value, 2, AT)
    assert patch.fields["phase"] == "Failed" and patch.fields["lastRunTime"] == (
        "2026-12-01T02:00:07Z")
    assert "spec.sweep" in patch.fields["message"]
    assert kinds(patch.conditions) == {"Accepted": ("False", "InvalidSpec"),
                                       "Succeeded": ("False", "InvalidSpec")}
    # a name too long for the Job's pods is refused on metadata.name, naming the fix
    long = {**BENCH, "metadata": {**BENCH["metadata"], "name": "b" * 60},
            "spec": {**BENCH["spec"], "runner": {"replicas": 3},
                     "sweep": {"type": "concurrency", "values": [16, 32]}}}
    with pytest.raises(SpecError) as err:
        run_spec(long, 1)
    assert str(err.value).startswith("metadata.name: ") and "shorten" in str(err.value)
    assert run_spec(BENCH, 1).target.url == "http://10.0.0.5:8000"


def test_an_object_the_api_server_refuses_ends_the_run_until_the_spec_changes() -> None:
    words = ('jobs.batch "b-run-1" is forbidden: exceeded quota: refuse, requested: '
             "count/jobs.batch=1")
    patch = refused_patch(Refused(403, words), 2, AT)
    assert patch.fields["phase"] == "Failed" and patch.fields["job"] is None
    assert words in patch.fields["message"] and "(403)" in patch.fields["message"]
    assert kinds(patch.conditions) == {
        "Accepted": ("False", "Refused"), "Succeeded": ("False", "Refused"),
        "Running": ("False", "Refused"),
    }
    assert all(words in c.message for c in patch.conditions)
    # nothing retries it: Failed at the observed generation is done; a new generation runs
    status = {"run": 1, "phase": "Failed", "observedGeneration": 2}
    assert decide({"generation": 2}, status).action == "done"
    assert decide({"generation": 3}, status).action == "start"


def test_a_target_not_ready_is_pending_with_the_reason() -> None:
    exc = TargetNotReady("SecretNotFound", "Secret llm/vllm-key does not exist")
    patch = waiting_patch(exc, ACCEPTED, 2)
    assert patch.fields == {"phase": "Pending",
                            "message": "SecretNotFound: Secret llm/vllm-key does not exist"}
    assert kinds(patch.conditions) == {"Accepted": ("True", "Valid"),
                                       "TargetReady": ("False", "SecretNotFound")}


def test_a_busy_endpoint_queues_behind_the_holder() -> None:
    ready = condition("TargetReady", True, "Resolved", "x", 2)
    patch = queued_patch("llm/other", "http://10.0.0.5:8000", ACCEPTED, ready, 2)
    assert patch.fields["phase"] == "Queued" and patch.fields["queuedBehind"] == "llm/other"
    assert patch.fields["message"] == (
        "waiting for benchmark llm/other, which holds the Lease of http://10.0.0.5:8000")
    assert kinds(patch.conditions)["Running"] == ("False", "Queued")


def resolved() -> Resolved:
    pod = {"metadata": {"name": "vllm-0"}, "spec": {"nodeName": "gpu-a"}}
    return Resolved("http://10.0.0.5:8000", "llm", {"matchLabels": {"app": "vllm"}}, [pod],
                    [{"metadata": {"name": "gpu-a"}}])


def test_the_runner_is_told_the_target_its_pods_and_telemetry() -> None:
    spec = Spec.from_manifest(BENCH, namespace="llm")
    ctx = run_context(BENCH, 2, spec, resolved(), ["http://10.0.0.9:9400/metrics"], None,
                      "no earlier run")
    assert (ctx.benchmark, ctx.namespace, ctx.run, ctx.url) == (
        "sweep", "llm", 2, "http://10.0.0.5:8000")
    assert ctx.api_key_env == "LLMBENCH_API_KEY"  # the spec names a Secret
    assert ctx.target_pods == ["vllm-0"] and ctx.target_namespace == "llm"
    assert ctx.dcgm_urls == ["http://10.0.0.9:9400/metrics"]
    assert ctx.baseline is None and ctx.no_baseline == "no earlier run"


def test_created_objects_make_a_waiting_run_running_and_keep_a_found_one() -> None:
    spec = Spec.from_manifest(BENCH, namespace="llm")
    stack = StackStatus(target_pods=["vllm-0"])
    conds = [ACCEPTED]
    for waiting in (None, "Pending", "Queued"):
        patch = running_patch("sweep", 2, spec, BenchmarkStatus(phase=waiting), stack, conds, AT)
        f = patch.fields
        assert (f["phase"], f["startedTime"]) == ("Running", "2026-12-01T02:00:07Z"), waiting
        assert f["progress"] == f"0/{len(spec.points())}"
        assert (f["job"], f["resultsConfigMap"], f["queuedBehind"]) == (
            "sweep-run-2", "sweep-run-2", None)
        assert f["stack"]["targetPods"] == ["vllm-0"]
    # an operator restarted mid-run finds the run Running: its start and progress stay
    found = running_patch("sweep", 2, spec, BenchmarkStatus(phase="Running"), stack, conds, AT)
    assert not {"phase", "startedTime", "progress"} & set(found.fields)
    assert list(found.conditions) == conds


def test_target_not_ready_warns_once_per_reason_not_once_per_retry() -> None:
    missing = TargetNotReady("ServiceNotFound", "Service llm/vllm does not exist")
    fresh = BenchmarkStatus()
    assert target_warning_due(fresh, missing)
    waiting = BenchmarkStatus(conditions=[
        condition("TargetReady", False, "ServiceNotFound", "Service llm/vllm does not exist", 2)])
    assert not target_warning_due(waiting, missing)  # the next retry, same reason: silent
    assert target_warning_due(waiting, TargetNotReady("PodsNotReady", "no Ready pod"))
    was_ready = BenchmarkStatus(conditions=[condition("TargetReady", True, "Resolved", "ok", 2)])
    assert target_warning_due(was_ready, missing)


def test_telemetry_unavailable_warns_unless_it_was_turned_off() -> None:
    assert telemetry_warning_due(condition("TelemetryAvailable", False, "ExporterNotFound", "x"))
    assert telemetry_warning_due(condition("TelemetryAvailable", False, "NoTargetPods", "x"))
    assert not telemetry_warning_due(condition("TelemetryAvailable", False, "Disabled", "off"))
    assert not telemetry_warning_due(condition("TelemetryAvailable", True, "ExporterFound", "1"))
