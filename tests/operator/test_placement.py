"""Which pods are the target, which exporters serve their nodes, what the nodes' labels say."""

from __future__ import annotations

from typing import Any

import pytest

from llmbench.operator.placement import (
    exporter_urls,
    is_ready,
    label_selector,
    node_info,
    redact_args,
    stack_snapshot,
    target_nodes,
)


def pod(name: str, node: str, *, ready: bool = True, labels: dict[str, str] | None = None,
        ports: list[dict[str, Any]] | None = None, ip: str = "10.0.0.1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "vllm:1",
                                                    "args": ["--model", "m"],
                                                    "ports": ports or []}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"imageID": "docker.io/vllm@sha256:abc"}],
        },
    }


DCGM = {"app": "nvidia-dcgm-exporter"}


def test_label_selector_strings() -> None:
    assert label_selector({"matchLabels": {"b": "2", "a": "1"}}) == "a=1,b=2"
    assert label_selector({"app": "vllm"}) == "app=vllm"
    sel = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]},
                                {"key": "gpu", "operator": "Exists"},
                                {"key": "old", "operator": "DoesNotExist"}]}
    assert label_selector(sel) == "tier in (x,y),gpu,!old"


def test_readiness_and_nodes() -> None:
    pods = [pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("d", "n3", ready=False)]
    assert [p["metadata"]["name"] for p in pods if is_ready(p)] == ["a", "b", "c"]
    assert target_nodes(p for p in pods if is_ready(p)) == ["n1", "n2"]
    deleting = pod("e", "n1")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_ready(deleting)


def test_only_exporters_on_target_nodes_count_once_per_node() -> None:
    exporters = [
        pod("dcgm-1", "n1", labels=DCGM, ports=[{"name": "metrics", "containerPort": 9500}]),
        pod("dcgm-1b", "n1", labels=DCGM, ip="10.0.0.9"),
        pod("dcgm-2", "n2", labels={"app.kubernetes.io/name": "dcgm-exporter"}, ip="10.0.0.2"),
        pod("dcgm-3", "n3", labels=DCGM, ip="10.0.0.3"),
        pod("other", "n2", labels={"app": "x"}, ip="10.0.0.4"),
        pod("dcgm-nr", "n4", labels=DCGM, ready=False),
    ]
    assert exporter_urls(exporters, ["n2", "n1", "n4"]) == [
        "http://10.0.0.2:9400/metrics",
        "http://10.0.0.1:9500/metrics",
    ]


def test_node_info_reads_gpu_feature_discovery_labels() -> None:
    node = {"metadata": {"name": "gpu-a", "labels": {
        "topology.kubernetes.io/zone": "z1", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8", "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
        "nvidia.com/cuda.runtime-version.full": "12.4"}}}
    info = node_info(node)
    assert (info.name, info.zone, info.gpu_product, info.gpu_count) == (
        "gpu-a", "z1", "NVIDIA-H100-80GB-HBM3", "8")
    assert (info.driver_version, info.cuda_version) == ("550.54.15", "12.4")
    assert node_info({"metadata": {"name": "cpu"}}).gpu_product is None


def test_stack_snapshot_has_image_digest_args_and_nodes() -> None:
    stack = stack_snapshot([pod("a", "n1")], [{"metadata": {"name": "n1"}}], ["http://x/metrics"])
    assert stack.target_image == "vllm:1"
    assert stack.target_image_id == "docker.io/vllm@sha256:abc"
    assert stack.target_args == ["--model", "m"]
    assert [n.name for n in stack.nodes] == ["n1"]
    assert stack.telemetry_urls == ["http://x/metrics"]


R = "<redacted>"


@pytest.mark.parametrize("args,shown", [
    (["--api-key", "sk-1", "--port", "8000"], ["--api-key", R, "--port", "8000"]),
    (["--api-key=sk-1"], [f"--api-key={R}"]),
    (["--hf-token", "hf_1", "--DB-PASSWORD=p", "--client_secret", "s"],
     ["--hf-token", R, f"--DB-PASSWORD={R}", "--client_secret", R]),
    (["env", "HF_TOKEN=hf_1", "vllm"], ["env", f"HF_TOKEN={R}", "vllm"]),
    (["--header", "Authorization: Bearer sk-9"], ["--header", f"Authorization: Bearer {R}"]),
    # a flag without a value keeps the next flag
    (["--use-token", "--port", "1"], ["--use-token", "--port", "1"]),
    # the same inside a shell string
    (["sh", "-c", "vllm serve m --api-key sk-1  --port 8000 -H 'Authorization: Bearer sk-2'"],
     ["sh", "-c", f"vllm serve m --api-key {R}  --port 8000 -H 'Authorization: Bearer {R}'"]),
    (["vllm", "serve", "m", "--port", "8000"], ["vllm", "serve", "m", "--port", "8000"]),
    # settings named like a secret whose values are figures, and token counts, stay
    (["--time-to-first-token", "80ms", "--inter-token-latency=10", "--max-num-batched-tokens",
      "2048", "--tokenizer", "org/tok", "--hf-token", "1234abcd"],
     ["--time-to-first-token", "80ms", "--inter-token-latency=10", "--max-num-batched-tokens",
      "2048", "--tokenizer", "org/tok", "--hf-token", R]),
])
def test_secret_like_target_arguments_are_redacted(args: list[str], shown: list[str]) -> None:
    assert redact_args(args) == shown


def test_the_stack_snapshot_never_holds_a_targets_api_key() -> None:
    p = pod("a", "n1")
    p["spec"]["containers"][0]["command"] = ["vllm", "serve"]
    p["spec"]["containers"][0]["args"] = ["m", "--api-key", "sk-live-1", "--port", "8000"]
    stack = stack_snapshot([p], [], [])
    assert stack.target_args == ["vllm", "serve", "m", "--api-key", R, "--port", "8000"]
    assert "sk-live-1" not in stack.model_dump_json()
