"""Several runner pods (``spec.runner.replicas``): the Indexed Job the operator builds, and the
conditions it derives from all the shards' pods at once."""

from __future__ import annotations

from typing import Any

import pytest

from llmbench.api import Spec
from llmbench.api.job import ENV_SHARD_INDEX
from llmbench.operator.build import (
    INDEX_ANNOTATION,
    LABEL_BENCHMARK,
    LABEL_RUN,
    REPLICAS_ANNOTATION,
    Placement,
    run_problem,
    runner_job,
)
from llmbench.operator.status import (
    current_runner_pods,
    runner_nodes,
    shard_conditions,
)
from tests.operator.test_build import BENCH as BUILD_BENCH

# test_build's benchmark, with a slot for every shard (replicas up to 16 at concurrency 16)
BENCH: dict[str, Any] = {
    **BUILD_BENCH, "spec": {**BUILD_BENCH["spec"], "sweep": {"type": "concurrency",
                                                             "values": [16, 32]}},
}
WHERE = Placement({"matchLabels": {"app": "vllm"}}, "llm", [])


def spec(**runner: Any) -> Spec:
    return Spec.from_manifest({**BENCH["spec"], "runner": runner}, namespace="llm")


def test_one_replica_is_the_plain_job_of_before() -> None:
    job = runner_job(BENCH, 1, spec(backoffLimit=2), WHERE)["spec"]
    assert job["backoffLimit"] == 2
    for key in ("completionMode", "completions", "parallelism", "backoffLimitPerIndex",
                "maxFailedIndexes"):
        assert key not in job
    pod = job["template"]["spec"]
    assert "topologySpreadConstraints" not in pod
    # no shard count: only the default annotations (no service-mesh sidecar)
    assert REPLICAS_ANNOTATION not in job["template"]["metadata"]["annotations"]
    assert ENV_SHARD_INDEX not in {e["name"] for e in pod["containers"][0]["env"]}


def test_replicas_make_an_indexed_job_of_that_many_pods_at_once() -> None:
    job = runner_job(BENCH, 1, spec(replicas=3, backoffLimit=2), WHERE)["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] == 3
    # Each shard has its own retries; one shard out of them fails the Job at once (the others
    # would wait for it at the barrier); the global limit only matters on old clusters.
    assert job["backoffLimitPerIndex"] == 2
    assert job["maxFailedIndexes"] == 0
    assert job["backoffLimit"] == 6
    rules = job["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob" and rules[0]["onExitCodes"]["values"] == [1, 2]
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    assert job["template"]["metadata"]["annotations"][REPLICAS_ANNOTATION] == "3"


def test_each_shard_reads_its_index_from_the_downward_api() -> None:
    c = runner_job(BENCH, 1, spec(replicas=4), WHERE)["spec"]["template"]["spec"]["containers"][0]
    (index,) = [e for e in c["env"] if e["name"] == ENV_SHARD_INDEX]
    assert index["valueFrom"] == {
        "fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}
    }
    # Every shard runs the same command against the same ConfigMap.
    assert c["args"][:3] == ["job", "--configmap", "sweep-run-1"]


@pytest.mark.parametrize("mode", ["SameNode", "SameZone", "Any"])
def test_shards_keep_the_placement_rules_and_only_prefer_distinct_nodes(mode: str) -> None:
    one = runner_job(BENCH, 1, spec(), WHERE)["spec"]["template"]["spec"]
    s = Spec.from_manifest(
        {**BENCH["spec"], "placement": mode, "runner": {"replicas": 3}}, namespace="llm"
    )
    pod = runner_job(BENCH, 1, s, WHERE)["spec"]["template"]["spec"]
    single = runner_job(
        BENCH, 1, Spec.from_manifest({**BENCH["spec"], "placement": mode}, namespace="llm"),
        WHERE,
    )["spec"]["template"]["spec"]
    assert pod.get("affinity") == single.get("affinity")
    assert pod.get("tolerations") == one.get("tolerations")
    (spread,) = pod["topologySpreadConstraints"]
    assert spread == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {LABEL_BENCHMARK: "sweep", LABEL_RUN: "1"}},
    }


def test_a_name_too_long_for_an_indexed_job_is_refused_before_anything_is_created() -> None:
    assert run_problem("sweep", 1, spec(replicas=3)) is None
    long = "b" * 60
    assert run_problem(long, 1, spec()) is None  # one runner: a plain Job, 63 characters
    # <name>-run-1-2 must be a DNS label (the API server's check, measured on 1.35).
    assert run_problem("b" * 55, 1, spec(replicas=3)) is None
    problem = run_problem("b" * 56, 1, spec(replicas=3))
    assert problem is not None and "at most 61" in problem
    assert run_problem("b" * 55, 1, spec(replicas=11)) is not None  # -10: one more character


def pod(index: int, *, node: str | None = None, phase: str = "Pending", created: str = "T1",
        scheduled: tuple[str, str, str] | None = None, name: str | None = None) -> dict[str, Any]:
    conds = []
    if node is not None:
        conds.append({"type": "PodScheduled", "status": "True"})
    elif scheduled is not None:
        status, reason, message = scheduled
        conds.append({"type": "PodScheduled", "status": status, "reason": reason,
                      "message": message})
    return {
        "metadata": {"name": name or f"sweep-run-1-{index}-x", "creationTimestamp": created,
                     "annotations": {INDEX_ANNOTATION: str(index)}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conds},
    }


def by_type(conds: list[Any]) -> dict[str, Any]:
    return {c.type: c for c in conds}


def test_all_shards_scheduled_and_running() -> None:
    pods = [pod(0, node="node-b", phase="Running"), pod(1, node="node-a", phase="Running"),
            pod(2, node="node-b", phase="Running")]
    c = by_type(shard_conditions(pods, 3, 4))
    assert (c["RunnerScheduled"].status, c["RunnerScheduled"].message) == (
        "True", "3/3 runner pods scheduled on node-a, node-b")
    assert c["RunnerScheduled"].observed_generation == 4
    assert (c["Running"].status, c["Running"].message) == (
        "True", "the sweep is running: 3/3 runner pods running")
    assert runner_nodes(pods) == ["node-b", "node-a", "node-b"]


def test_the_same_pods_in_any_event_order_give_the_same_conditions() -> None:
    pods = [pod(0, node="node-a", phase="Running"), pod(1, node="node-a"),
            pod(2, scheduled=("False", "Unschedulable", "0/3 nodes: pod affinity"))]
    first = shard_conditions(pods, 3, 1)
    assert shard_conditions(list(reversed(pods)), 3, 1) == first
    c = by_type(first)
    assert c["RunnerScheduled"].status == "False"
    assert c["RunnerScheduled"].reason == "Unschedulable"
    assert c["RunnerScheduled"].message == (
        "2/3 runner pods scheduled (on node-a); sweep-run-1-2-x: 0/3 nodes: pod affinity")
    assert c["Running"].message == "the sweep is running: 1/3 runner pods running"


def test_shards_not_created_yet_count_as_not_scheduled() -> None:
    c = by_type(shard_conditions([pod(0, node="node-a")], 3, 1))
    assert (c["RunnerScheduled"].status, c["RunnerScheduled"].reason) == ("False", "Pending")
    assert c["RunnerScheduled"].message == "1/3 runner pods scheduled (on node-a)"
    assert "Running" not in c


def test_a_retried_shard_is_its_replacement_not_the_pod_that_died() -> None:
    dead = pod(1, node="node-a", phase="Failed", created="2026-01-01T00:00:00Z", name="old")
    new = pod(1, node="node-b", phase="Running", created="2026-01-01T00:05:00Z", name="new")
    pods = [pod(0, node="node-a", phase="Running", created="2026-01-01T00:00:00Z"), new, dead]
    assert current_runner_pods(pods)[1]["metadata"]["name"] == "new"
    assert runner_nodes(pods) == ["node-a", "node-b"]
    c = by_type(shard_conditions(pods, 2, 1))
    assert c["RunnerScheduled"].message == "2/2 runner pods scheduled on node-a, node-b"
    assert c["Running"].message == "the sweep is running: 2/2 runner pods running"


def test_finished_shards_are_counted_not_forgotten() -> None:
    pods = [pod(0, node="n", phase="Succeeded"), pod(1, node="n", phase="Running")]
    c = by_type(shard_conditions(pods, 2, 1))
    assert c["Running"].status == "True"
    assert c["Running"].message == "the sweep is running: 1/2 runner pods running, 1 finished"
