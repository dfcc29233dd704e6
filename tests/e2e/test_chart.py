"""The Helm chart on the project's cluster: ``helm install`` for real, the operator started
from the chart's Deployment on a real node from the built image (its entrypoint with the
chart's args, the pod's ServiceAccount token, so the chart's RBAC is all it has), and a small
sweep through it to ``Succeeded``; once watching every namespace (the default values but the
image), once watching one.

The target and benchmark helpers are tests/e2e/test_operator.py's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.charts.helm import CHART
from tests.e2e.release import Release, image_values, operator_values
from tests.e2e.test_operator import (
    Target,
    benchmark,
    cond,
    exporter_pod,
    ready_pods,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def bench_namespace(k8s: Any) -> Iterator[str]:
    """A second namespace: the benchmarks and their target live apart from the operator."""
    name = f"e2e-bench-{uuid.uuid4().hex[:8]}"
    k8s.kubectl("create", "namespace", name)
    k8s.wait_for(f"ServiceAccount default in {name}",
                 lambda: k8s.get("serviceaccount", "default", name), 30)
    try:
        yield name
    finally:
        k8s.kubectl("delete", "namespace", name, "--wait=false", check=False)


def release(k8s: Any, namespace: str) -> Release:
    return Release(k8s, f"chart-{uuid.uuid4().hex[:6]}", namespace)


def sweep_through(
    k8s: Any, rel: Release, namespace: str, exporter_namespace: str | None = None
) -> dict[str, Any]:
    """The target, a two-point sweep against it, and its status once Succeeded; with
    ``exporter_namespace``, a dcgm-exporter-format pod on the target's node there."""
    target = Target(k8s, namespace)
    pod = target.deploy()
    if exporter_namespace:
        k8s.apply(exporter_pod(k8s, exporter_namespace, pod["metadata"]["name"], target.node,
                               gpu_namespace=namespace))
        k8s.wait_for(
            "the dcgm exporter to be Ready",
            lambda: ready_pods(k8s, exporter_namespace, "app=nvidia-dcgm-exporter"), 60,
            diag=lambda: k8s.describe(exporter_namespace),
        )
    k8s.apply(benchmark(
        "sweep", namespace, target.ref,
        sweep={"type": "concurrency", "values": [1, 2]},
        load={"requestCount": 8, "warmupRequestCount": 0},
    ))
    # wait_phase wants an Operator for its diagnostics; it reads only .tail()
    st = wait_phase(k8s, namespace, "sweep", rel, ("Succeeded", "Failed"), 240)  # type: ignore[arg-type]
    assert st["phase"] == "Succeeded", (st, rel.tail())
    return st


def test_default_values_install_an_operator_for_every_namespace_that_runs_a_sweep(
    crd_installed: Any, namespace: str, bench_namespace: str
) -> None:
    k8s = crd_installed
    rel = release(k8s, namespace)
    rel.install(**image_values(k8s))  # the built image; every other value the default
    try:
        assert f"rollout status deployment/{rel.fullname}" in rel.notes
        assert "kubectl get llmb -A -w" in rel.notes
        role = k8s.get("clusterrole", rel.fullname)
        assert role is not None and any("nodes" in r["resources"] for r in role["rules"])
        binding = k8s.get("clusterrolebinding", rel.fullname)
        assert binding is not None and binding["subjects"] == [
            {"kind": "ServiceAccount", "name": rel.fullname, "namespace": namespace}
        ]
        pod = rel.ready()
        spec = pod["spec"]
        assert spec["serviceAccountName"] == rel.fullname
        assert spec["containers"][0]["args"][:2] == ["operator", "--all-namespaces"]
        assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True

        st = sweep_through(k8s, rel, bench_namespace)
        assert st["progress"] == "2/2"
        assert [p["value"] for p in st["points"]] == [1, 2]
        assert cond(st, "Succeeded")["status"] == "True"
        rel.assert_nothing_forbidden()
        job = k8s.get("job", "sweep-run-1", bench_namespace)
        assert job is not None
        runner = job["spec"]["template"]["spec"]["containers"][0]
        assert runner["image"] == k8s.image("llmbench")  # --runner-image: the operator's
        # the chart's admission policy: a tenant who may only create benchmarks may name the
        # operator's runner image, not another
        tenant = f"tenant-{bench_namespace}"
        k8s.kubectl("create", "role", "bench", "-n", bench_namespace, "--verb=create",
                    "--resource=llmbenchmarks.llmbench.io")
        k8s.kubectl("create", "rolebinding", "bench", "-n", bench_namespace, "--role=bench",
                    f"--user={tenant}")
        for image, refused in ((k8s.image("llmbench"), False), ("evil.io/runner:1", True)):
            doc = json.dumps(benchmark("tenant", bench_namespace, {"url": "http://x.invalid:1"},
                                       runner={"image": image}))
            out = k8s.kubectl(f"--as={tenant}", "create", "--dry-run=server", "-f", "-",
                              input=doc, check=False)
            assert (f"ValidatingAdmissionPolicy '{rel.fullname}'" in out.stderr) is refused, (
                out.stderr)
            assert (f"spec.runner.image: {tenant} may not create pods" in out.stderr) is refused
    finally:
        rel.uninstall()
    assert k8s.get("clusterrole", rel.fullname) is None
    assert k8s.get("clusterrolebinding", rel.fullname) is None


def test_a_namespaced_install_runs_sweeps_in_its_namespaces_only(
    crd_installed: Any, namespace: str, bench_namespace: str
) -> None:
    k8s = crd_installed
    rel = release(k8s, namespace)
    runner_image = k8s.pinned_image("llmbench")  # the same image by its content-keyed tag
    rel.install(**operator_values(k8s, watchNamespaces=[bench_namespace],
                                  exporterNamespaces=[namespace],
                                  **{"runner.image": runner_image}))
    try:
        assert f"kubectl get llmb -n {bench_namespace} -w" in rel.notes
        role = k8s.get("role", rel.fullname, bench_namespace)
        assert role is not None
        assert k8s.get("rolebinding", rel.fullname, bench_namespace) is not None
        cluster_role = k8s.get("clusterrole", f"{rel.fullname}-{namespace}")
        assert cluster_role is not None
        assert sorted(r["resources"][0] for r in cluster_role["rules"]) == [
            "nodes", "validatingadmissionpolicies"]  # no cluster-wide pod list
        exporters_role = k8s.get("role", f"{rel.fullname}-exporters", namespace)
        assert exporters_role is not None and exporters_role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
        # the chart's admission policy, bound to the watched namespace only
        policy_name = f"{rel.fullname}-{namespace}"
        assert k8s.get("validatingadmissionpolicy", policy_name) is not None
        binding = k8s.get("validatingadmissionpolicybinding", policy_name)
        assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0][
            "values"] == [bench_namespace]
        pod = rel.ready()
        assert pod["spec"]["containers"][0]["args"][:2] == [
            "operator", f"--namespace={bench_namespace}"
        ]
        # a benchmark outside the watched namespaces is left alone
        k8s.apply(benchmark("elsewhere", namespace, {"url": "http://nothing.invalid:9"}))

        # the exporter sits in a namespace the operator does not watch: found through the
        # Role the chart made in that exporter namespace (exporterNamespaces)
        st = sweep_through(k8s, rel, bench_namespace, exporter_namespace=namespace)
        assert st["progress"] == "2/2"
        telemetry = cond(st, "TelemetryAvailable")
        assert telemetry["status"] == "True" and telemetry["reason"] == "ExporterFound", telemetry
        job = k8s.get("job", "sweep-run-1", bench_namespace)
        assert job is not None
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == runner_image
        assert status(k8s, namespace, "elsewhere") == {}
        rel.assert_nothing_forbidden()
        assert k8s.get("job", "elsewhere-run-1", namespace) is None
    finally:
        rel.uninstall()
    assert k8s.get("clusterrole", f"{rel.fullname}-{namespace}") is None
    assert k8s.get("validatingadmissionpolicy", f"{rel.fullname}-{namespace}") is None
    assert k8s.get("validatingadmissionpolicybinding", f"{rel.fullname}-{namespace}") is None


def test_helm_install_with_invalid_values_fails_naming_the_value(
    crd_installed: Any, namespace: str
) -> None:
    k8s = crd_installed
    rel = release(k8s, namespace)
    out = rel.helm("install", rel.name, str(CHART), "--set", "replicas=x", "--set",
                   "image.tag=5", check=False)
    assert out.returncode != 0
    assert "at '/replicas': got string, want integer" in out.stderr, out.stderr
    assert "at '/image/tag': got number, want string" in out.stderr, out.stderr
    assert rel.helm("list", "--short").stdout.strip() == ""
    assert k8s.get("deployment", rel.fullname, namespace) is None


def test_the_runner_network_policy_is_admitted_and_selects_a_runner_pod(
    crd_installed: Any, namespace: str
) -> None:
    """Rendered with runner.networkPolicy on, the API server takes it, and a pod with the
    runner's labels is among the pods its selector picks. Enforcement is not tested: the test
    cluster's bridge CNI does not implement NetworkPolicy (docs/security.md)."""
    from tests.charts.helm import render

    k8s = crd_installed
    docs = render("np", namespace, **{
        "runner.networkPolicy.enabled": True, "watchNamespaces": [namespace],
        "runner.networkPolicy.apiServer.cidrs": ["10.96.0.1/32"],
        "runner.networkPolicy.targets": [{"to": [{"podSelector": {"matchLabels": {
            "app": "vllm"}}}], "ports": [{"protocol": "TCP", "port": 8000}]}]})
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    k8s.apply(policy)
    stored = k8s.get("networkpolicy", policy["metadata"]["name"], namespace)
    assert stored is not None and stored["spec"]["egress"] == policy["spec"]["egress"]
    selector = ",".join(f"{k}={v}" for k, v in
                        stored["spec"]["podSelector"]["matchLabels"].items())
    labels = {"app.kubernetes.io/name": "llmbench-runner",
              "app.kubernetes.io/managed-by": "llmbench-operator", "llmbench.io/benchmark": "b",
              "llmbench.io/run": "1"}
    k8s.apply({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "runner-like", "namespace": namespace, "labels": labels},
               "spec": {"containers": [{"name": "c", "image": k8s.image("llmbench"),
                                        "command": ["true"]}], "restartPolicy": "Never"}})
    picked = k8s.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "name").stdout
    assert picked.split() == ["pod/runner-like"], picked
