"""From the target's pods and nodes to where the runner goes and whose GPUs it measures.

Pure functions over plain API objects (dicts as the API server returns them), so the rules
(which pods count as the target, which exporter serves which node, what a node's GPU labels
say) are tested without a cluster; :mod:`llmbench.operator.target` does the listing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llmbench.api.status import NodeInfo, StackStatus

__all__ = [
    "DCGM_LABELS",
    "DCGM_PORT",
    "exporter_urls",
    "is_ready",
    "label_selector",
    "node_info",
    "redact_args",
    "stack_snapshot",
    "target_nodes",
]

#: Labels dcgm-exporter pods carry (the GPU operator's, and the Helm chart's).
DCGM_LABELS: tuple[tuple[str, str], ...] = (
    ("app", "nvidia-dcgm-exporter"),
    ("app.kubernetes.io/name", "dcgm-exporter"),
)
#: dcgm-exporter's default port when its container names none ``metrics``.
DCGM_PORT = 9400


def label_selector(selector: Mapping[str, Any]) -> str:
    """A ``matchLabels``/``matchExpressions`` selector (or a bare label map) as the list API's
    ``labelSelector`` string."""
    match = selector.get("matchLabels")
    exprs = selector.get("matchExpressions") or []
    if match is None and not exprs:
        match = {k: v for k, v in selector.items() if isinstance(v, str)}
    parts = [f"{k}={v}" for k, v in sorted((match or {}).items())]
    for e in exprs:
        op, key, values = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


#: What stands for a redacted value in ``status.stack``, messages and events.
REDACTED = "<redacted>"
#: A flag or variable name that names a secret: ``--api-key``, anything with token, password
#: or secret in it (``--hf-token``, ``HF_TOKEN``, ``--db-password``, ``--client_secret``).
#: Generous on purpose (``--max-num-batched-tokens`` and ``--tokenizer`` lose their values
#: too): status is readable by everyone who may read the benchmark, a target's pod spec is not.
_SECRET_NAME = re.compile(r"api[-_]?key|token(?!s|izer)|passw(or)?d|secret", re.IGNORECASE)
#: Values no secret looks like, kept so that the stack diff still names a changed setting
#: (``--time-to-first-token 10ms -> 80ms``): a number with an optional unit, a boolean.
_PLAIN = re.compile(r"[0-9]{1,10}(\.[0-9]{1,6})?[a-z]{0,3}|true|false", re.IGNORECASE)
_BEARER = re.compile(r"(\bBearer\s+)[^\s\"']+", re.IGNORECASE)
_WORDS = re.compile(r"(\s+)")


def _redact_words(words: Sequence[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for word in words:
        if hide_next and not word.startswith("-"):
            out.append(word if _PLAIN.fullmatch(word) else REDACTED)
            hide_next = False
            continue
        hide_next = False
        name, eq, value = word.partition("=")
        if _SECRET_NAME.search(name):
            if eq:
                out.append(word if _PLAIN.fullmatch(value) else f"{name}={REDACTED}")
                continue
            hide_next = name.startswith("-")  # --api-key VALUE: the next word is the value
        out.append(_BEARER.sub(rf"\g<1>{REDACTED}", word))
    return out


def redact_args(args: Sequence[str]) -> list[str]:
    """A target container's command and args with every secret-like value replaced by
    :data:`REDACTED`: ``--api-key=K`` and ``--api-key K`` (also ``*token*``, ``*password*``,
    ``*secret*``; not ``*tokens*`` or ``*tokenizer*``), ``NAME_TOKEN=K``, ``Bearer K``, and the
    same inside a shell string (``sh -c "vllm serve --api-key K"``). A number (with a unit) or
    a boolean is no secret and stays: ``--time-to-first-token 80ms`` is a setting to diff.

    Example: ``redact_args(["--api-key", "k", "--port", "8000"])`` is
    ``["--api-key", "<redacted>", "--port", "8000"]``.
    """
    out = _redact_words(args)
    for i, arg in enumerate(out):
        if arg != REDACTED and _WORDS.search(arg.strip()):
            parts = _WORDS.split(arg)
            words = _redact_words(parts[0::2])
            parts[0::2] = words
            out[i] = "".join(parts)
    return out


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Running with the ``Ready`` condition true and not being deleted."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def target_nodes(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The nodes that host the given (ready) pods, in first-seen order."""
    out: list[str] = []
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and node not in out:
            out.append(node)
    return out


def _port(pod: Mapping[str, Any]) -> int:
    for c in (pod.get("spec") or {}).get("containers") or []:
        for port in c.get("ports") or []:
            if port.get("name") == "metrics" and port.get("containerPort"):
                return int(port["containerPort"])
    return DCGM_PORT


def is_exporter(pod: Mapping[str, Any]) -> bool:
    """Carries one of :data:`DCGM_LABELS`."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return any(labels.get(k) == v for k, v in DCGM_LABELS)


def exporter_urls(exporters: Iterable[Mapping[str, Any]], nodes: Sequence[str]) -> list[str]:
    """The ``/metrics`` URL of the ready dcgm-exporter on each node that hosts a target pod.

    Exporters on other nodes are left out: their GPUs do not serve the model. One URL per
    node (the first ready exporter), so a node's GPUs are never counted twice.
    """
    by_node: dict[str, str] = {}
    for pod in exporters:
        node = (pod.get("spec") or {}).get("nodeName")
        ip = (pod.get("status") or {}).get("podIP")
        if not node or node not in nodes or node in by_node or not ip or not is_ready(pod):
            continue
        if not is_exporter(pod):
            continue
        host = f"[{ip}]" if ":" in ip else ip
        by_node[node] = f"http://{host}:{_port(pod)}/metrics"
    return [by_node[n] for n in nodes if n in by_node]


def _driver(labels: Mapping[str, str]) -> str | None:
    full = labels.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full
    parts = [labels.get(f"nvidia.com/cuda.driver.{k}") for k in ("major", "minor", "rev")]
    return ".".join(p for p in parts if p) or None


def _cuda(labels: Mapping[str, str]) -> str | None:
    full = labels.get("nvidia.com/cuda.runtime-version.full")
    if full:
        return full
    parts = [labels.get(f"nvidia.com/cuda.runtime.{k}") for k in ("major", "minor")]
    return ".".join(p for p in parts if p) or None


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """A node's name, zone and NVIDIA GPU feature-discovery labels."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    return NodeInfo(
        name=meta.get("name", ""),
        zone=labels.get("topology.kubernetes.io/zone"),
        gpu_product=labels.get("nvidia.com/gpu.product"),
        gpu_count=labels.get("nvidia.com/gpu.count"),
        driver_version=_driver(labels),
        cuda_version=_cuda(labels),
    )


def stack_snapshot(
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    telemetry_urls: Sequence[str] = (),
) -> StackStatus:
    """What was measured: the first target pod's serving image (by digest) and args (secret-like
    values redacted: :func:`redact_args`), and every target node with its GPU labels."""
    image = image_id = None
    args: list[str] = []
    if pods:
        first = pods[0]
        containers = (first.get("spec") or {}).get("containers") or []
        if containers:
            image = containers[0].get("image")
            args = [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]
        statuses = (first.get("status") or {}).get("containerStatuses") or []
        if statuses:
            image_id = statuses[0].get("imageID") or None
    return StackStatus(
        target_pods=[p["metadata"]["name"] for p in pods],
        target_image=image,
        target_image_id=image_id,
        target_args=redact_args(args)[:64],
        nodes=[node_info(n) for n in nodes],
        telemetry_urls=list(telemetry_urls),
    )
