"""Which Running runs are dead (pure): a gone Job, a pod that will never run, a refused pod."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from llmbench.operator.resync import pod_problem, run_problem

AT = datetime(2026, 12, 1, 2, 10, 0, tzinfo=UTC)


def pod(waiting: dict[str, str] | None = None, scheduled: dict[str, str] | None = None,
        image: str = "img:1") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if waiting is not None:
        status["containerStatuses"] = [{"image": image, "state": {"waiting": waiting}}]
    if scheduled is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", **scheduled}]
    return {"metadata": {"name": "b-run-1-x", "creationTimestamp": "2026-12-01T02:00:00Z"},
            "status": status}


def test_a_missing_secret_key_names_the_kubelets_reason_and_message() -> None:
    msg = 'couldn\'t find key token in Secret llm/key'
    why = pod_problem(pod({"reason": "CreateContainerConfigError", "message": msg}), AT, 600)
    assert why == f"the runner pod b-run-1-x cannot start: CreateContainerConfigError: {msg}"


def test_the_kubelets_unsynced_secret_cache_is_not_a_cause_yet() -> None:
    # the kubelet waits 1 s for its watch of the Secret, says so, and tries again: on a busy
    # node the first message of a pod whose Secret exists can be this one
    for kind in ("secret", "configmap"):
        msg = f"failed to sync {kind} cache: timed out waiting for the condition"
        assert pod_problem(pod({"reason": "CreateContainerConfigError", "message": msg}),
                           AT, 600) is None
    msg = 'secret "key" not found'  # its next try
    why = pod_problem(pod({"reason": "CreateContainerConfigError", "message": msg}), AT, 600)
    assert why == f"the runner pod b-run-1-x cannot start: CreateContainerConfigError: {msg}"


def test_an_image_that_cannot_be_pulled_is_the_pull_failure() -> None:
    why = pod_problem(pod({"reason": "ImagePullBackOff", "message": "Back-off pulling"}), AT, 9)
    assert why is not None and "img:1 cannot be pulled: ImagePullBackOff" in why


def test_a_pod_waiting_to_start_or_being_created_is_alive() -> None:
    assert pod_problem(pod({"reason": "ContainerCreating"}), AT, 600) is None
    assert pod_problem(pod(), AT, 600) is None


def test_unschedulable_counts_from_the_conditions_transition() -> None:
    cond = {"reason": "Unschedulable", "message": "0/3 nodes: Insufficient cpu",
            "lastTransitionTime": "2026-12-01T02:05:00Z"}
    assert pod_problem(pod(scheduled=cond), AT, 600) is None  # 300 s of 600
    why = pod_problem(pod(scheduled=cond), AT, 299)
    assert why == ("the runner pod b-run-1-x stayed unschedulable for more than 299 s: "
                   "0/3 nodes: Insufficient cpu")
    gated = {**cond, "reason": "SchedulingGated"}  # not the scheduler's refusal
    assert pod_problem(pod(scheduled=gated), AT, 1) is None


def test_a_gone_job_is_dead_and_a_job_without_pods_dies_of_failed_create() -> None:
    assert "runner Job b-run-1 is gone" in (run_problem("b-run-1", None, [], [], AT, 600) or "")
    job = {"metadata": {"uid": "u"}}
    assert run_problem("b-run-1", job, [], [], AT, 600) is None  # the controller is on it
    events = [
        {"message": "pods \"b-run-1-a\" is forbidden: exceeded quota: q, old",
         "lastTimestamp": "2026-12-01T02:00:00Z"},
        {"message": "pods \"b-run-1-b\" is forbidden: exceeded quota: q, requested: pods=1",
         "lastTimestamp": "2026-12-01T02:01:00Z"},
    ]
    why = run_problem("b-run-1", job, [], events, AT, 600)
    assert why == ("the Job controller cannot create the runner pod of b-run-1: FailedCreate: "
                   "pods \"b-run-1-b\" is forbidden: exceeded quota: q, requested: pods=1")
    # a pod exists (the quota let a later one through): an old FailedCreate is history
    assert run_problem("b-run-1", job, [pod({"reason": "ContainerCreating"})], events, AT,
                       600) is None
    stuck = pod({"reason": "CreateContainerConfigError", "message": "secret \"k\" not found"})
    assert "CreateContainerConfigError" in (run_problem("b-run-1", job, [stuck], [], AT, 600)
                                            or "")
