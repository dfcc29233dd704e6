"""What the target's objects mean: a Service's port and selector, Ready pods, the
``TargetReady`` and ``TelemetryAvailable`` conditions."""

from __future__ import annotations

from typing import Any

import pytest

from llmbench.api import ServiceRef
from llmbench.operator.target import (
    Resolved,
    TargetNotReady,
    exporter_namespaces,
    exporters_found,
    ready_condition,
    ready_pods,
    service_selector,
    telemetry_without_lookup,
)

SVC: dict[str, Any] = {"spec": {"ports": [{"port": 8000}, {"port": 9000}],
                                "selector": {"app": "vllm"}}}


def test_the_service_must_have_the_port_and_gives_its_selector() -> None:
    ref = ServiceRef(name="vllm", port=8000)
    assert service_selector(ref, "llm", SVC, None) == {"matchLabels": {"app": "vllm"}}
    mine = {"matchLabels": {"role": "decode"}}
    assert service_selector(ref, "llm", SVC, mine) is mine  # spec.target.podSelector wins
    assert service_selector(ref, "llm", {"spec": {"ports": [{"port": 8000}]}}, None) is None
    with pytest.raises(TargetNotReady) as err:
        service_selector(ServiceRef(name="vllm", port=8080), "llm", SVC, None)
    assert err.value.reason == "ServicePortNotFound"
    assert str(err.value) == ("Service llm/vllm has no port 8080 (it has 8000, 9000); "
                              "set spec.target.service.port")


def ready(name: str, ok: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ok else "False"}]}}


def test_only_ready_pods_count() -> None:
    assert [p["metadata"]["name"] for p in ready_pods(
        [ready("a"), ready("b", False)], "app=vllm", "llm")] == ["a"]
    with pytest.raises(TargetNotReady) as err:
        ready_pods([ready("b", False)], "app=vllm", "llm")
    assert err.value.reason == "PodsNotReady"
    assert str(err.value) == ("no Ready pod matches 'app=vllm' in namespace llm "
                              "(1 found, none Ready)")


def test_target_ready_names_the_url_pods_and_nodes() -> None:
    found = Resolved("http://vllm.llm.svc:8000", "llm", None, [ready("a"), ready("b")],
                     [{"metadata": {"name": "gpu-a"}}])
    c = ready_condition(found, 3)
    assert (c.status, c.reason, c.observed_generation) == ("True", "Resolved", 3)
    assert c.message == "http://vllm.llm.svc:8000; 2 Ready pod(s) on gpu-a"
    nowhere = Resolved("http://10.0.0.5:8000", "llm", None, [], [])
    assert ready_condition(nowhere, 3).message.endswith("0 Ready pod(s) on unknown nodes")


def test_telemetry_without_looking_for_exporters() -> None:
    urls, c = telemetry_without_lookup("off", ["gpu-a"]) or ([], None)
    assert urls == [] and c is not None and (c.status, c.reason) == ("False", "Disabled")
    urls, c = telemetry_without_lookup("http://dcgm:9400/metrics", []) or ([], None)
    assert urls == ["http://dcgm:9400/metrics"] and c is not None and c.reason == "Configured"
    urls, c = telemetry_without_lookup("auto", []) or ([], None)
    assert urls == [] and c is not None and c.reason == "NoTargetPods"
    assert telemetry_without_lookup("auto", ["gpu-a"]) is None  # look them up


def exporter(node: str, ip: str) -> dict[str, Any]:
    return {"metadata": {"name": f"dcgm-{node}", "labels": {"app": "nvidia-dcgm-exporter"}},
            "spec": {"nodeName": node, "containers": [{"ports": [
                {"name": "metrics", "containerPort": 9400}]}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def test_exporters_on_the_targets_nodes_only() -> None:
    urls, c = exporters_found([exporter("gpu-a", "10.1.0.2"), exporter("gpu-z", "10.1.0.9")],
                              ["gpu-a"])
    assert urls == ["http://10.1.0.2:9400/metrics"]
    assert (c.status, c.reason) == ("True", "ExporterFound")
    assert c.message == "1 exporter(s): http://10.1.0.2:9400/metrics"
    none, c = exporters_found([exporter("gpu-z", "10.1.0.9")], ["gpu-a", "gpu-b"])
    assert none == [] and (c.status, c.reason) == ("False", "ExporterNotFound")
    assert "on node(s) gpu-a, gpu-b; the run goes on without the GPU table" in c.message


def test_a_namespaced_operator_lists_exporters_only_where_it_was_told() -> None:
    assert exporter_namespaces("llm", [], ["gpu-operator"]) is None  # all namespaces
    assert exporter_namespaces("llm", ["llm", "b"], ["gpu-operator", "b"]) == [
        "gpu-operator", "b", "llm"]
    assert exporter_namespaces("llm", ["llm"], []) == ["llm"]
