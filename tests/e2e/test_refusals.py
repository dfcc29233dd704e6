"""Refusals end a run, visibly and for good; children are the benchmark's own (issue 21).

On the project's API server, with the chart's operator in its pod: a Job the API server
refuses (a ResourceQuota that allows no Job: the server-side dry run sees it before the
endpoint's Lease is taken) and an object refused after the Lease was taken (a quota that
allows no more ConfigMaps) each end the run ``Failed`` with ``Accepted=False`` and the API
server's words, hold no Lease, and are not retried until the spec changes. Two benchmarks whose
names share their first 57 characters get distinct children. A Job forged by a user who may
create Jobs, named or labelled for a benchmark, neither becomes its run nor ends it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.release import Release
from tests.e2e.test_operator import (  # noqa: F401 - ``operator`` is a fixture
    benchmark,
    cond,
    diag,
    operator,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e

#: A URL target: nothing to resolve, so the run goes straight to its objects.
NOWHERE = {"url": "http://nothing.invalid:9"}
OFF = {"dcgm": "off", "serverMetrics": "off"}


def quota(namespace: str, hard: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "refuse", "namespace": namespace},
        "spec": {"hard": hard},
    }


def with_quota(k8s: Any, namespace: str, hard: dict[str, str]) -> None:
    """Applies the quota and waits for the quota controller to count usage (until then the
    quota admission refuses everything it covers, with another message)."""
    k8s.apply(quota(namespace, hard))
    k8s.wait_for(
        "the quota's usage to be counted",
        lambda: set(((k8s.get("resourcequota", "refuse", namespace) or {}).get("status") or {})
                    .get("used") or {}) >= set(hard),
        30,
    )


def leases_held_by(k8s: Any, namespace: str, holder: str) -> list[str]:
    out = json.loads(k8s.kubectl("get", "leases", "-n", namespace, "-o", "json").stdout)
    return [item["metadata"]["name"] for item in out["items"]
            if (item.get("spec") or {}).get("holderIdentity") == holder]


def test_a_job_the_api_server_refuses_fails_the_run_before_the_lease_and_is_not_retried(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    with_quota(k8s, namespace, {"count/jobs.batch": "0"})
    k8s.apply(benchmark("refused", namespace, NOWHERE, telemetry=OFF))
    st = wait_phase(k8s, namespace, "refused", operator, ("Failed",), 60)
    accepted = cond(st, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "Refused"), accepted
    assert "exceeded quota" in accepted["message"], accepted
    assert "exceeded quota" in st["message"]
    # the dry run refused the Job before anything existed: no Lease, no results ConfigMap
    assert leases_held_by(k8s, namespace, f"{namespace}/refused") == []
    assert k8s.get("configmap", "refused-run-1", namespace) is None

    # with the quota gone the same spec is not tried again ...
    k8s.kubectl("delete", "resourcequota", "refuse", "-n", namespace)
    time.sleep(8)
    again = status(k8s, namespace, "refused")
    assert (again["phase"], again["run"]) == ("Failed", 1), again
    assert k8s.get("job", "refused-run-1", namespace) is None
    # ... until the spec changes: a new generation is a new run, and its Job is made
    k8s.apply(benchmark("refused", namespace, NOWHERE, telemetry=OFF,
                        load={"requestCount": 4, "warmupRequestCount": 0}))
    k8s.wait_for("run 2's Job", lambda: k8s.get("job", "refused-run-2", namespace), 60,
                 diag=diag(k8s, namespace, operator))


def test_an_object_refused_after_the_lease_fails_the_run_and_releases_the_lease(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    used = len(json.loads(k8s.kubectl("get", "configmaps", "-n", namespace, "-o",
                                      "json").stdout)["items"])
    with_quota(k8s, namespace, {"count/configmaps": str(used)})
    k8s.apply(benchmark("nocm", namespace, NOWHERE, telemetry=OFF))
    st = wait_phase(k8s, namespace, "nocm", operator, ("Failed",), 60)
    accepted = cond(st, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "Refused"), accepted
    assert "configmaps" in accepted["message"] and "exceeded quota" in accepted["message"]
    assert leases_held_by(k8s, namespace, f"{namespace}/nocm") == []
    assert k8s.get("job", "nocm-run-1", namespace) is None
    time.sleep(5)
    assert status(k8s, namespace, "nocm")["run"] == 1


def owner_uid(obj: dict[str, Any]) -> str:
    (ref,) = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
    return str(ref["uid"])


def test_names_sharing_their_first_57_characters_get_distinct_children(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    names = ["p" * 57 + "-one", "p" * 57 + "-two"]
    k8s.apply(benchmark(names[0], namespace, NOWHERE, telemetry=OFF))
    # the second's runner fits no node: its run stays in progress
    k8s.apply(benchmark(names[1], namespace, NOWHERE, telemetry=OFF,
                        runner={"requests": {"cpu": "500", "memory": "128Mi"},
                                "limits": {"cpu": "500", "memory": "128Mi"}}))
    jobs = []
    for name in names:
        st = k8s.wait_for(f"{name}'s Job in status", lambda n=name: status(k8s, namespace, n)
                          .get("job"), 60, diag=diag(k8s, namespace, operator))
        job = k8s.get("job", st, namespace)
        assert job is not None and len(st) <= 63
        assert owner_uid(job) == k8s.get("llmb", name, namespace)["metadata"]["uid"]
        jobs.append(st)
    assert len(set(jobs)) == 2, jobs
    # a run in progress has its ConfigMap watched; an ended one's is not (item 4)
    cm = k8s.get("configmap", jobs[1], namespace)
    assert cm is not None and cm["metadata"]["labels"]["llmbench.io/active"] == "true"
    wait_phase(k8s, namespace, names[0], operator, ("Succeeded", "Failed"), 180)
    k8s.wait_for(
        "the ended run's ConfigMap to lose llmbench.io/active",
        lambda: "llmbench.io/active" not in (k8s.get("configmap", jobs[0], namespace) or {})
        .get("metadata", {}).get("labels", {"llmbench.io/active": "?"}),
        30, diag=diag(k8s, namespace, operator),
    )


#: A tenant who may create Jobs (and read them) in the namespace, nothing of llmbench's.
MALLORY = "mallory"


def job_creator(k8s: Any, namespace: str) -> None:
    k8s.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "jobs", "namespace": namespace},
         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"],
                    "verbs": ["create", "get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "jobs", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jobs"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": MALLORY}]},
    ])


def forged_job(k8s: Any, namespace: str, name: str, benchmark: str) -> dict[str, Any]:
    """A Job that finishes at once, labelled as run 1 of ``benchmark``'s runner."""
    labels = {"app.kubernetes.io/managed-by": "llmbench-operator",
              "llmbench.io/benchmark": benchmark, "llmbench.io/run": "1",
              "app.kubernetes.io/name": "llmbench-runner"}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"labels": labels},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "runner", "image": k8s.image("llmbench"),
                "command": ["python", "-c", "print('forged')"],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}},
    }


def create_as(k8s: Any, user: str, obj: dict[str, Any]) -> None:
    k8s.kubectl("create", "--as", user, "-f", "-", input=json.dumps(obj))


def test_a_job_forged_under_the_runs_name_is_not_adopted(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    job_creator(k8s, namespace)
    create_as(k8s, MALLORY, forged_job(k8s, namespace, "victim-run-1", "victim"))
    k8s.apply(benchmark("victim", namespace, NOWHERE, telemetry=OFF))
    st = wait_phase(k8s, namespace, "victim", operator, ("Failed",), 60)
    accepted = cond(st, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "Refused"), accepted
    assert "Job" in accepted["message"] and "not owned by this benchmark" in accepted["message"]
    assert st.get("job") is None
    assert leases_held_by(k8s, namespace, f"{namespace}/victim") == []


def test_a_job_forged_with_the_runs_labels_does_not_end_it(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    job_creator(k8s, namespace)
    # a runner no node can fit: its run stays Running, its Job unfinished
    k8s.apply(benchmark("victim", namespace, NOWHERE, telemetry=OFF,
                        runner={"requests": {"cpu": "500", "memory": "128Mi"},
                                "limits": {"cpu": "500", "memory": "128Mi"}}))
    wait_phase(k8s, namespace, "victim", operator, ("Running",), 60)
    create_as(k8s, MALLORY, forged_job(k8s, namespace, "forged", "victim"))
    k8s.wait_for(
        "the forged Job to complete",
        lambda: any(c["type"] == "Complete" and c["status"] == "True" for c in
                    ((k8s.get("job", "forged", namespace) or {}).get("status") or {})
                    .get("conditions") or []),
        120, diag=diag(k8s, namespace, operator),
    )
    time.sleep(5)  # the operator has seen the Job's events by now
    st = status(k8s, namespace, "victim")
    assert (st["phase"], st["job"]) == ("Running", "victim-run-1"), st
    assert not st.get("history"), st


def pod_creator(k8s: Any, namespace: str) -> None:
    """MALLORY may create pods (and read them) in the namespace, nothing of llmbench's."""
    k8s.apply([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "pods", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods"],
                    "verbs": ["create", "get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "pods", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": MALLORY}]},
    ])


def test_a_pod_forged_with_the_runs_labels_neither_fails_nor_describes_it(
    k8s: Any, namespace: str, operator: Release,  # noqa: F811
) -> None:
    """A pod labelled as the run's runner, whose image never pulls: before pods were matched
    by their owner, its pod event (and the resync) ended the run with its pull error."""
    pod_creator(k8s, namespace)
    k8s.apply(benchmark("victim", namespace, NOWHERE, telemetry=OFF,
                        runner={"requests": {"cpu": "500", "memory": "128Mi"},
                                "limits": {"cpu": "500", "memory": "128Mi"}}))
    wait_phase(k8s, namespace, "victim", operator, ("Running",), 60)
    job = forged_job(k8s, namespace, "forged", "victim")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "forged", "namespace": namespace,
                        "labels": job["metadata"]["labels"]},
           "spec": {**job["spec"]["template"]["spec"]}}
    pod["spec"]["containers"] = [{**pod["spec"]["containers"][0],
                                  "image": "localhost/llmbench:no-such-tag"}]
    create_as(k8s, MALLORY, pod)

    def waiting() -> str:
        statuses = ((k8s.get("pod", "forged", namespace) or {}).get("status") or {}).get(
            "containerStatuses") or [{}]
        return str(((statuses[0].get("state") or {}).get("waiting") or {}).get("reason"))

    k8s.wait_for("the forged pod's pull to fail",
                 lambda: waiting() in ("ErrImagePull", "ImagePullBackOff"),
                 120, diag=diag(k8s, namespace, operator))
    time.sleep(40)  # its events and one resync (resyncSeconds 30) have come by now
    st = status(k8s, namespace, "victim")
    assert (st["phase"], st["job"]) == ("Running", "victim-run-1"), st
    scheduled = cond(st, "RunnerScheduled")
    assert scheduled.get("status") != "True", scheduled
    assert "forged" not in json.dumps(st), st
