"""Runs that died are noticed, and nothing is left that hangs without the operator.

On the project's cluster (real kubelets: a missing Secret is a real
``CreateContainerConfigError``, a quota a real ``FailedCreate`` of the Job controller), with
the chart's operator. Its resync runs every 2 s here (``resyncSeconds``; 30 s by default) and
a runner pod may stay unschedulable 10 s (``unschedulableSeconds``) before the run fails.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.release import Release, installed
from tests.e2e.test_operator import Target, benchmark, cond, diag, status, wait_phase

pytestmark = pytest.mark.e2e

KOPF_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
METRICS_PORT = 9090
#: A sweep long enough to still be running when the test breaks it (about a minute).
LONG = {"load": {"requestCount": 4000, "warmupRequestCount": 0},
        "sweep": {"type": "concurrency", "values": [1]}, "telemetry": {"dcgm": "off"}}


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    """The chart's operator with a fast resync and a short unschedulable deadline."""
    yield from installed(crd_installed, name="live", resyncSeconds=2, unschedulableSeconds=10)


def leases_of(k8s: Any, namespace: str, name: str) -> list[str]:
    out = k8s.kubectl("get", "leases", "-n", namespace, "-l", f"llmbench.io/benchmark={name}",
                      "-o", "name").stdout
    return out.split()


def running(k8s: Any, namespace: str, name: str, op: Release) -> dict[str, Any]:
    """The benchmark Running with its runner pod up (its container started)."""
    wait_phase(k8s, namespace, name, op, ("Running",), 120)

    def started() -> bool:
        return any(cs.get("state", {}).get("running")
                   for p in k8s.pods(namespace, f"llmbench.io/benchmark={name}")
                   for cs in (p.get("status") or {}).get("containerStatuses") or [])

    k8s.wait_for(f"{name}'s runner container to run", started, 120, diag=diag(k8s, namespace, op))
    return status(k8s, namespace, name)


def failed_with(k8s: Any, namespace: str, name: str, op: Release, *words: str) -> dict[str, Any]:
    """The run ``Failed`` (within a minute), its Lease released, ``Succeeded=False`` and the
    message naming each of ``words``."""
    st = wait_phase(k8s, namespace, name, op, ("Succeeded", "Failed"), 90)
    assert st["phase"] == "Failed", json.dumps(st, indent=1)
    c = cond(st, "Succeeded")
    assert c["status"] == "False", c
    for word in words:
        assert word in c["message"] and word in st["message"], (word, c, st["message"])
    k8s.wait_for(f"{name}'s Lease to be released", lambda: not leases_of(k8s, namespace, name),
                 30, diag=diag(k8s, namespace, op))
    return st


# ----------------------------------------------------------------------------------------------
# no traps: no kopf finalizer, so deletion completes with the operator gone
# ----------------------------------------------------------------------------------------------


def test_scheduled_and_waiting_benchmarks_delete_with_the_operator_uninstalled(
    crd_installed: Any, namespace: str
) -> None:
    k8s = crd_installed
    missing = {"service": {"name": "absent", "port": 8000}}  # never resolves: stays Pending
    k8s.apply(benchmark("waiting", namespace, missing))
    k8s.apply(benchmark("scheduled", namespace, missing, schedule="*/5 * * * *"))
    for op in installed(k8s, name="gone"):
        for name in ("waiting", "scheduled"):
            wait_phase(k8s, namespace, name, op, ("Pending",), 60)
        # a few of the loop's seconds: it must not add anything to the objects either
        time.sleep(3)
        for name in ("waiting", "scheduled"):
            meta = k8s.get("llmbenchmark", name, namespace)["metadata"]
            assert KOPF_FINALIZER not in (meta.get("finalizers") or []), meta
    # the operator is uninstalled (its pod gone): deletion must not wait for it
    k8s.kubectl("delete", "llmbenchmark", "waiting", "scheduled", "-n", namespace,
                "--timeout=30s", timeout=45)
    assert k8s.get("llmbenchmark", "waiting", namespace) is None
    assert k8s.get("llmbenchmark", "scheduled", namespace) is None
    k8s.apply(benchmark("in-namespace", namespace, missing, schedule="*/5 * * * *"))
    k8s.kubectl("delete", "namespace", namespace, "--timeout=90s", timeout=120)
    assert k8s.get("namespace", namespace) is None


# ----------------------------------------------------------------------------------------------
# runs that died: the resync notices, fails the run with the cause, releases the Lease
# ----------------------------------------------------------------------------------------------


def test_a_deleted_job_fails_the_run_and_frees_the_endpoint(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("lost", namespace, target.ref, **LONG))
    running(k8s, namespace, "lost", operator)
    assert leases_of(k8s, namespace, "lost")
    k8s.apply(benchmark("next", namespace, target.ref, telemetry={"dcgm": "off"}))
    wait_phase(k8s, namespace, "next", operator, ("Queued",), 60)
    k8s.kubectl("delete", "job", "lost-run-1", "-n", namespace, "--wait=false")
    failed_with(k8s, namespace, "lost", operator, "lost-run-1", "is gone")
    st = wait_phase(k8s, namespace, "next", operator, ("Succeeded", "Failed"), 180)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)


def test_a_missing_secret_fails_the_run_with_the_kubelets_message(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.kubectl("create", "secret", "generic", "key", "-n", namespace, "--from-literal=token=x")
    k8s.apply(benchmark("nokey", namespace,
                        {**target.ref, "apiKeySecretRef": {"name": "key", "key": "token"}},
                        **LONG))
    running(k8s, namespace, "nokey", operator)
    k8s.kubectl("delete", "secret", "key", "-n", namespace)
    (pod,) = k8s.pods(namespace, "llmbench.io/benchmark=nokey")
    k8s.kubectl("delete", "pod", pod["metadata"]["name"], "-n", namespace, "--grace-period=0",
                "--wait=false")  # its replacement cannot start: the Secret is gone
    failed_with(k8s, namespace, "nokey", operator, "CreateContainerConfigError", '"key"')


def test_a_quota_that_refuses_the_runner_pod_fails_the_run(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply({"apiVersion": "v1", "kind": "ResourceQuota",
               "metadata": {"name": "one-pod", "namespace": namespace},
               "spec": {"hard": {"pods": "1"}}})  # the inference pod has it
    k8s.wait_for("the quota to count the inference pod",
                 lambda: (k8s.get("resourcequota", "one-pod", namespace) or {})
                 .get("status", {}).get("used", {}).get("pods") == "1", 30)
    k8s.apply(benchmark("quota", namespace, target.ref, telemetry={"dcgm": "off"}))
    failed_with(k8s, namespace, "quota", operator, "FailedCreate", "exceeded quota")


def test_a_run_in_progress_without_the_active_label_is_watched_again(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """A run an operator from before ``llmbench.io/active`` started (an upgrade mid-run): its
    ConfigMap lacks the label the operator's ConfigMap watch selects (so no progress would
    reach status); the resync puts it back."""
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("older", namespace, target.ref, **LONG))
    running(k8s, namespace, "older", operator)
    k8s.kubectl("label", "configmap", "older-run-1", "-n", namespace, "llmbench.io/active-")

    def label() -> str | None:
        cm = k8s.get("configmap", "older-run-1", namespace) or {}
        return (cm.get("metadata", {}).get("labels") or {}).get("llmbench.io/active")

    k8s.wait_for("the resync to label the ConfigMap again", lambda: label() == "true", 30,
                 diag=diag(k8s, namespace, operator))


def test_a_runner_unschedulable_past_the_deadline_fails_the_run(
    k8s: Any, namespace: str, operator: Release
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply(benchmark("huge", namespace, target.ref, telemetry={"dcgm": "off"},
                        runner={"requests": {"cpu": "500", "memory": "128Mi"},
                                "limits": {"cpu": "500", "memory": "128Mi"}}))
    st = failed_with(k8s, namespace, "huge", operator, "Insufficient cpu", "unschedulable")
    assert cond(st, "RunnerScheduled")["status"] == "False"


# ----------------------------------------------------------------------------------------------
# one active operator: two replicas elect a leader; the other takes over when it dies
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def pair(crd_installed: Any) -> Iterator[Release]:
    """The chart with two replicas (leader-elected), each serving /metrics."""
    yield from installed(crd_installed, name="pair", replicas=2, **{"metrics.port": METRICS_PORT})


def test_two_operators_elect_one_and_the_standby_takes_over_when_it_dies(
    crd_installed: Any, namespace: str, pair: Release
) -> None:
    k8s, op = crd_installed, pair
    missing = {"service": {"name": "absent", "port": 8000}}

    def ready_pods() -> list[dict[str, Any]]:
        pods = [p for p in k8s.pods(op.namespace, op.selector)
                if not p["metadata"].get("deletionTimestamp") and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (p.get("status") or {}).get("conditions") or [])]
        return pods if len(pods) == 2 else []

    def holder() -> str:
        lease = k8s.get("lease", op.fullname, op.namespace) or {}
        return str((lease.get("spec") or {}).get("holderIdentity") or "").split("_")[0]

    def log_of(pod: str) -> str:
        return str(k8s.kubectl("logs", pod, "-n", op.namespace, check=False).stdout)

    pods = k8s.wait_for("both operator pods Ready", ready_pods, 90, diag=op.diag)
    names = {p["metadata"]["name"] for p in pods}
    leader = k8s.wait_for("a leader", lambda: holder() in names and holder(), 60, diag=op.diag)
    (standby,) = names - {leader}
    k8s.apply(benchmark("first", namespace, missing))
    wait_phase(k8s, namespace, "first", op, ("Pending",), 60)
    assert "leading as" in log_of(leader)
    standby_log = log_of(standby)
    assert "standing by" in standby_log and "leading as" not in standby_log, standby_log
    assert "first" not in standby_log, standby_log  # the standby never acted
    # the standby answers a scrape (no benchmark's series: it watches nothing) instead of
    # refusing it: it is Ready behind the metrics Service, where a refusal reads up == 0
    ip = next(p["status"]["podIP"] for p in pods if p["metadata"]["name"] == standby)
    with urllib.request.urlopen(f"http://{ip}:{METRICS_PORT}/metrics", timeout=5) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        families = list(text_string_to_metric_families(r.read().decode()))
    assert not [s for f in families for s in f.samples if "benchmark" in s.labels], families
    # the leader crashes (no clean stop, so no release): the standby takes over once the
    # Lease expires (15 s) and acts on what was created meanwhile
    k8s.kubectl("delete", "pod", leader, "-n", op.namespace, "--grace-period=0", "--force",
                "--wait=false")
    k8s.apply(benchmark("second", namespace, missing))
    k8s.wait_for("the standby to lead", lambda: holder() == standby, 60, diag=op.diag)
    wait_phase(k8s, namespace, "second", op, ("Pending",), 60)
    assert "leading as" in log_of(standby)
