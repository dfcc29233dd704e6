"""What a platform team sees and sets on the operator, on the project's cluster: Warning
Events from ``llmbench-operator`` where a run has a problem (target not ready, no telemetry,
an invalid measurement), the runner pod's knobs (pull secrets, labels, annotations, priority,
node selector) on the Job's pod template, and a sweep's live progress (``currentPoint``, the
``PROGRESS`` column, the runner's heartbeat).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.release import Release, installed
from tests.e2e.test_operator import (
    GPU_TOLERATION,
    Target,
    benchmark,
    cond,
    diag,
    sim_service,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e


#: The chart's runner pod defaults this module's operator is installed with.
CHART_RUNNER = {"runner.podLabels": {"team": "platform", "cost-center": "42"},
                "runner.nodeSelector": {"kubernetes.io/os": "linux"}}


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    """The chart's operator for this module's tests, with runner pod defaults."""
    yield from installed(crd_installed, **CHART_RUNNER)


def events(k8s: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events about benchmark ``name`` (core/v1, as ``kubectl get events`` lists them)."""
    out = k8s.kubectl("get", "events", "-n", namespace, "--field-selector",
                      f"involvedObject.kind=LLMBenchmark,involvedObject.name={name}",
                      "-o", "json").stdout
    return list(json.loads(out)["items"])


def reasons(evs: list[dict[str, Any]]) -> list[str]:
    return [e["reason"] for e in evs]


def llmbench_sim(k8s: Any, namespace: str, labels: dict[str, str], *args: str) -> None:
    """``llmbench sim`` (the built image) as a pod on a GPU node labelled ``labels``."""
    k8s.apply({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sim", "namespace": namespace, "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-a"},
            "tolerations": [GPU_TOLERATION],
            "containers": [{
                "name": "sim", "image": k8s.image("llmbench"),
                "args": ["sim", "--host", "0.0.0.0", "--port", "8000", "--model", "e2e-model",
                         "--ttft-ms", "5", "--itl-ms", "1", *args],
                "ports": [{"containerPort": 8000}],
                "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1},
            }],
        },
    })
    k8s.wait_for("the sim pod to be Ready", lambda: any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (k8s.get("pod", "sim", namespace) or {}).get("status", {}).get("conditions") or []
    ), 90, diag=lambda: k8s.describe(namespace))


def test_warnings_come_from_the_operator_once_per_reason(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """No Service yet: one TargetNotReady Warning however often the operator retries; no
    dcgm-exporter on the target's node: TelemetryUnavailable; a fifth of the requests
    failing: MeasurementInvalid instead of a Normal RunSucceeded."""
    labels = {"app": "sim", "bench": namespace}
    llmbench_sim(k8s, namespace, labels, "--error-rate-500", "0.2")
    k8s.apply(benchmark("warn", namespace, {"service": {"name": "vllm", "port": 8000}},
                        sweep={"type": "concurrency", "values": [2]},
                        load={"requestCount": 40, "warmupRequestCount": 0}))
    k8s.wait_for("TargetReady=False (ServiceNotFound)",
                 lambda: cond(status(k8s, namespace, "warn"), "TargetReady").get("reason")
                 == "ServiceNotFound", 60, diag=diag(k8s, namespace, operator))
    time.sleep(8)  # several retries (the e2e operator's first retry is after 0.5 s)
    evs = events(k8s, namespace, "warn")
    warned = [e for e in evs if e["reason"] == "TargetNotReady"]
    assert len(warned) == 1, reasons(evs)
    (ev,) = warned
    assert ev["type"] == "Warning" and "ServiceNotFound" in ev["message"]
    assert ev["source"]["component"] == ev["reportingComponent"] == "llmbench-operator"
    assert ev["reportingInstance"] == operator.pod()["metadata"]["name"]
    assert k8s.get("job", "warn-run-1", namespace) is None

    k8s.apply(sim_service(namespace, labels))
    st = wait_phase(k8s, namespace, "warn", operator, ("Succeeded", "Failed"), timeout=240)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert cond(st, "TelemetryAvailable")["reason"] == "ExporterNotFound"
    assert cond(st, "MeasurementValid")["status"] == "False", cond(st, "MeasurementValid")
    evs = k8s.wait_for("the run's last Event", lambda: (
        e := events(k8s, namespace, "warn")) and "MeasurementInvalid" in reasons(e) and e, 30,
        diag=diag(k8s, namespace, operator))
    by_reason = {e["reason"]: e for e in evs}
    assert "RunSucceeded" not in by_reason, reasons(evs)
    for reason in ("TelemetryUnavailable", "MeasurementInvalid"):
        assert by_reason[reason]["type"] == "Warning", by_reason[reason]
    assert "ExporterNotFound" in by_reason["TelemetryUnavailable"]["message"]
    assert "measurement is invalid" in by_reason["MeasurementInvalid"]["message"]
    assert by_reason["JobCreated"]["type"] == "Normal"
    # every Event about the benchmark is the operator's own, none kopf's
    assert {e["source"].get("component") for e in evs} == {"llmbench-operator"}, evs
    assert reasons(evs).count("TargetNotReady") == 1


def test_a_podlabel_the_operator_owns_is_refused_by_the_api_server(
    k8s: Any, namespace: str, operator: Release
) -> None:
    bad = benchmark("bad", namespace, {"url": "http://vllm:8000"},
                    runner={"podLabels": {"llmbench.io/run": "7"}})
    r = k8s.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0
    assert "keys starting with llmbench.io/" in r.stderr, r.stderr


def test_the_runner_pod_carries_its_knobs_and_pulls_with_its_secret(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """A private registry (none is reachable: the pull fails) is pulled with the benchmark's
    secret; labels, annotations, priority class and node selector reach the Job's pod
    template and the pod, over the chart's defaults, under the operator's own labels."""
    target = Target(k8s, namespace)
    target.deploy()
    k8s.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
               "metadata": {"name": "private-pull", "namespace": namespace},
               "stringData": {".dockerconfigjson": json.dumps({"auths": {
                   "registry.invalid": {"auth": "ZTJlOnNlY3JldA=="}}})}})
    priority = f"llmbench-{namespace}"
    k8s.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": priority}, "value": 10,
               "description": "e2e: the runner's priority class"})
    try:
        k8s.apply(benchmark("knobs", namespace, target.ref, telemetry={"dcgm": "off"}, runner={
            "image": "registry.invalid/llmbench/runner:e2e",
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "imagePullSecrets": ["private-pull"],
            "podLabels": {"team": "inference"},
            "podAnnotations": {"example.com/owner": "e2e"},
            "priorityClassName": priority,
            "nodeSelector": {"kubernetes.io/hostname": "gpu-node-a"},
        }))
        job = k8s.wait_for("the runner Job", lambda: k8s.get("job", "knobs-run-1", namespace),
                           60, diag=diag(k8s, namespace, operator))
        template = job["spec"]["template"]
        pod_spec = template["spec"]
        assert pod_spec["imagePullSecrets"] == [{"name": "private-pull"}]
        assert pod_spec["priorityClassName"] == priority
        assert pod_spec["nodeSelector"] == {"kubernetes.io/os": "linux",
                                            "kubernetes.io/hostname": "gpu-node-a"}
        assert pod_spec["affinity"]["podAffinity"]  # the placement stays
        labels = template["metadata"]["labels"]
        assert (labels["team"], labels["cost-center"]) == ("inference", "42")
        assert labels["llmbench.io/benchmark"] == "knobs"
        assert template["metadata"]["annotations"] == {
            "sidecar.istio.io/inject": "false", "linkerd.io/inject": "disabled",
            "example.com/owner": "e2e"}
        # the pod as the API server admitted it (priority resolved), and the pull it tried
        pulled = k8s.wait_for("the runner pod's pull to fail", lambda: [
            p for p in k8s.pods(namespace, "llmbench.io/benchmark=knobs")
            if any((cs.get("state") or {}).get("waiting", {}).get("reason")
                   in ("ErrImagePull", "ImagePullBackOff")
                   for cs in (p.get("status") or {}).get("containerStatuses") or [])
        ], 90, diag=diag(k8s, namespace, operator))[0]
        assert pulled["spec"]["imagePullSecrets"] == [{"name": "private-pull"}]
        assert pulled["spec"]["priority"] == 10
        assert pulled["spec"]["nodeName"] == "gpu-node-a"
        assert pulled["spec"]["containers"][0]["image"] == "registry.invalid/llmbench/runner:e2e"
        assert pulled["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
        # a pull that cannot succeed ends the run (it does not wait for the Job's deadline)
        st = wait_phase(k8s, namespace, "knobs", operator, ("Failed",), timeout=120)
        assert "registry.invalid/llmbench/runner:e2e" in st["message"], st["message"]
    finally:
        k8s.kubectl("delete", "priorityclass", priority, "--wait=false", check=False)


def test_a_sweep_in_progress_shows_its_current_point_and_the_runner_logs_a_heartbeat(
    k8s: Any, namespace: str, operator: Release
) -> None:
    """Points of ~25 s (slow decode): the runner's ~10 s record reaches status.currentPoint
    with done < target, and the PROGRESS column says how far the point is."""
    labels = {"app": "sim", "bench": namespace}
    llmbench_sim(k8s, namespace, labels, "--itl-ms", "25")
    k8s.apply(sim_service(namespace, labels))
    k8s.apply(benchmark("prog", namespace, {"service": {"name": "vllm", "port": 8000}},
                        telemetry={"dcgm": "off", "serverMetrics": "off"},
                        workload={"inputTokens": {"mean": 16}, "outputTokens": {"mean": 48}},
                        sweep={"type": "concurrency", "values": [2, 4]},
                        load={"requestCount": 40, "warmupRequestCount": 0}))
    seen: dict[str, Any] = {}

    def under_way() -> dict[str, Any] | None:
        st = status(k8s, namespace, "prog")
        cp = st.get("currentPoint")
        if cp and cp["requestsDone"] < cp["requestsTarget"]:
            row = k8s.kubectl("get", "llmb", "prog", "-n", namespace,
                              "--no-headers").stdout.split()
            seen.update(cp=cp, progress=st["progress"], row=row)
            return st
        assert st.get("phase") not in ("Succeeded", "Failed"), json.dumps(st, indent=1)
        return None

    k8s.wait_for("a currentPoint with done < target", under_way, 180, interval=1,
                 diag=diag(k8s, namespace, operator))
    cp = seen["cp"]
    assert cp["requestsTarget"] == 40 and cp["total"] == 2 and cp["number"] in (1, 2)
    assert cp["value"] == [2, 4][cp["number"] - 1]
    assert cp["started"] <= cp["updated"] and cp["pointEta"] and cp["sweepEta"]
    assert cp["pointEta"] <= cp["sweepEta"]
    done = cp["number"] - 1
    assert seen["progress"] == f"{done}/2 {cp['percent']:.0f}%", seen
    assert f"{done}/2" in seen["row"] and f"{cp['percent']:.0f}%" in seen["row"], seen["row"]

    st = wait_phase(k8s, namespace, "prog", operator, ("Succeeded", "Failed"), timeout=240)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert st["progress"] == "2/2" and "currentPoint" not in st
    log = k8s.kubectl("logs", "job/prog-run-1", "-n", namespace).stdout
    beats = [line for line in log.splitlines() if " heartbeat: point " in line]
    assert beats, log[-3000:]
    assert "requests (" in beats[0] and "ETA" in beats[0]
    figures = [line for line in log.splitlines() if ": p99 TTFT " in line]
    assert len(figures) == 2, log[-3000:]
    assert all("p99 ITL" in f and "OTT" in f and "RPS" in f and "errors 0" in f
               for f in figures), figures


def test_the_api_server_keeps_one_condition_per_type_and_explains_every_status_field(
    k8s: Any, namespace: str, operator: Release
) -> None:
    k8s.apply(benchmark("api", namespace, {"url": "http://nothing.invalid:8000"},
                        telemetry={"dcgm": "off", "serverMetrics": "off"}))
    k8s.wait_for("the operator's first status", lambda: status(k8s, namespace, "api").get(
        "conditions"), 60, diag=diag(k8s, namespace, operator))
    twice = {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "reason": "Valid", "message": "",
         "lastTransitionTime": "2026-12-02T03:00:00Z"},
        {"type": "Accepted", "status": "False", "reason": "Other", "message": "",
         "lastTransitionTime": "2026-12-02T03:00:00Z"}]}}
    r = k8s.kubectl("patch", "llmb", "api", "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", json.dumps(twice), check=False)
    assert r.returncode != 0 and "Duplicate value" in r.stderr, r.stderr
    no_reason = {"status": {"conditions": [
        {"type": "Accepted", "status": "True", "message": "",
         "lastTransitionTime": "2026-12-02T03:00:00Z"}]}}
    r = k8s.kubectl("patch", "llmb", "api", "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", json.dumps(no_reason), check=False)
    assert r.returncode != 0 and "reason" in r.stderr, r.stderr
    explained = k8s.kubectl("explain", "llmbenchmark.status.currentPoint.sweepEta").stdout
    assert "When the sweep should end" in explained, explained
