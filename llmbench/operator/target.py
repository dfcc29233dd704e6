"""Resolving ``spec.target``: the Service, the API key Secret, the serving pods and nodes,
and the dcgm-exporters on those nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from llmbench.api import Spec
from llmbench.api.status import Condition
from llmbench.operator.kube import NotFound
from llmbench.operator.placement import (
    DCGM_LABELS,
    exporter_urls,
    is_ready,
    label_selector,
    target_nodes,
)
from llmbench.operator.state import CONFIG, kube
from llmbench.operator.status import condition

__all__ = ["Resolved", "TargetNotReady", "discover_exporters", "resolve_target"]


class TargetNotReady(Exception):
    """A reference of ``spec.target`` does not resolve yet (reason: CamelCase)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Resolved:
    """The target as found: where to send, which pods and nodes serve it."""

    url: str
    namespace: str
    selector: dict[str, Any] | None
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]


async def resolve_target(spec: Spec, namespace: str) -> Resolved:
    """Checks every reference of ``spec.target`` and finds the serving pods and nodes.

    Raises :class:`TargetNotReady` naming the first missing object (Service, its port, the API
    key Secret or its key, Ready pods).
    """
    k = kube()
    t = spec.target
    target_ns = (t.service.namespace if t.service and t.service.namespace else None) or namespace
    selector: dict[str, Any] | None = dict(t.pod_selector) if t.pod_selector else None
    if t.service is not None:
        try:
            svc = await k.get_service(target_ns, t.service.name)
        except NotFound:
            raise TargetNotReady(
                "ServiceNotFound", f"Service {target_ns}/{t.service.name} does not exist"
            ) from None
        ports = [p.get("port") for p in (svc.get("spec") or {}).get("ports") or []]
        if t.service.port not in ports:
            raise TargetNotReady(
                "ServicePortNotFound",
                f"Service {target_ns}/{t.service.name} has no port {t.service.port} "
                f"(it has {', '.join(map(str, ports)) or 'none'}); set spec.target.service.port",
            )
        if selector is None and (svc.get("spec") or {}).get("selector"):
            selector = {"matchLabels": dict(svc["spec"]["selector"])}
    ref = t.api_key_secret_ref
    if ref is not None:
        try:
            has = await k.secret_has_key(namespace, ref.name, ref.key)
        except NotFound:
            raise TargetNotReady(
                "SecretNotFound", f"Secret {namespace}/{ref.name} does not exist"
            ) from None
        if not has:
            raise TargetNotReady(
                "SecretKeyNotFound", f"Secret {namespace}/{ref.name} has no key {ref.key!r}"
            )
    pods: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    if selector:
        sel = label_selector(selector)
        found = await k.list_pods(target_ns, sel)
        pods = [p for p in found if is_ready(p)]
        if not pods:
            raise TargetNotReady(
                "PodsNotReady",
                f"no Ready pod matches {sel!r} in namespace {target_ns} "
                f"({len(found)} found, none Ready)",
            )
        for node in target_nodes(pods):
            try:
                nodes.append(await k.get_node(node))
            except NotFound:
                continue
    return Resolved(t.base_url(namespace), target_ns, selector, pods, nodes)


async def discover_exporters(spec: Spec, resolved: Resolved) -> tuple[list[str], Condition]:
    """dcgm-exporter URLs for the target's nodes, and the ``TelemetryAvailable`` condition."""
    dcgm = spec.telemetry.dcgm
    if dcgm == "off":
        return [], condition("TelemetryAvailable", False, "Disabled", "spec.telemetry.dcgm: off")
    if dcgm != "auto":
        return [dcgm], condition("TelemetryAvailable", True, "Configured", dcgm)
    names = [n["metadata"]["name"] for n in resolved.nodes]
    if not names:
        return [], condition(
            "TelemetryAvailable", False, "NoTargetPods",
            "no target pods to find GPUs by: set spec.target.podSelector, or "
            "spec.telemetry.dcgm to the exporter's URL",
        )
    exporters: list[dict[str, Any]] = []
    for key, value in DCGM_LABELS:
        try:
            exporters += await kube().list_pods(None, f"{key}={value}")
        except ApiException as exc:
            if exc.status != 403:
                raise
            for ns in dict.fromkeys([resolved.namespace, *CONFIG.namespaces]):
                try:
                    exporters += await kube().list_pods(ns, f"{key}={value}")
                except ApiException:
                    continue
    urls = exporter_urls(exporters, names)
    if not urls:
        return [], condition(
            "TelemetryAvailable", False, "ExporterNotFound",
            f"no Ready dcgm-exporter pod (label app=nvidia-dcgm-exporter or "
            f"app.kubernetes.io/name=dcgm-exporter) on node(s) {', '.join(names)}; the run goes "
            "on without the GPU table",
        )
    return urls, condition(
        "TelemetryAvailable", True, "ExporterFound", f"{len(urls)} exporter(s): {', '.join(urls)}"
    )

