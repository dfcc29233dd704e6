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
    benchmark,
    cond,
    diag,
    sim_service,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def operator(crd_installed: Any) -> Iterator[Release]:
    """The chart's operator for this module's tests."""
    yield from installed(crd_installed)


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
