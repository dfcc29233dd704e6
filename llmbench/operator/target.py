"""Resolving ``spec.target``: the Service, the serving pods and nodes, and the dcgm-exporters
on those nodes.

The API key Secret is not read: the operator holds no right on Secrets (one ``get secrets``
would let it read every Secret it can see, only to check a key name). A missing Secret or key
surfaces from the runner pod as ``CreateContainerConfigError``, which the run's liveness check
reports.

The reads are here; what they mean (a Service without the port, no Ready pod, which
``TelemetryAvailable`` condition) is decided by the pure functions beside them, which the
tests call with plain API objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from llmbench.api import ServiceRef, Spec
from llmbench.api.status import Condition
from llmbench.operator.kube import Kube, NotFound
from llmbench.operator.placement import (
    DCGM_LABELS,
    exporter_urls,
    is_ready,
    label_selector,
    target_nodes,
)
from llmbench.operator.status import condition

__all__ = [
    "Resolved",
    "TargetNotReady",
    "discover_exporters",
    "exporter_namespaces",
    "exporters_found",
    "ready_condition",
    "ready_pods",
    "resolve_target",
    "service_selector",
    "telemetry_without_lookup",
]


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


def service_selector(
    service: ServiceRef, namespace: str, svc: Mapping[str, Any],
    selector: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """The pods to look for behind the Service ``svc`` (as read from ``namespace``): the
    spec's ``podSelector`` when given, else the Service's own selector.

    Raises :class:`TargetNotReady` (``ServicePortNotFound``) when the Service lacks the port.
    """
    ports = [p.get("port") for p in (svc.get("spec") or {}).get("ports") or []]
    if service.port not in ports:
        raise TargetNotReady(
            "ServicePortNotFound",
            f"Service {namespace}/{service.name} has no port {service.port} "
            f"(it has {', '.join(map(str, ports)) or 'none'}); set spec.target.service.port",
        )
    if selector is None and (svc.get("spec") or {}).get("selector"):
        return {"matchLabels": dict(svc["spec"]["selector"])}
    return selector


def ready_pods(
    found: Sequence[dict[str, Any]], selector: str, namespace: str
) -> list[dict[str, Any]]:
    """The Ready pods among those the selector found; :class:`TargetNotReady`
    (``PodsNotReady``) when there is none."""
    pods = [p for p in found if is_ready(p)]
    if not pods:
        raise TargetNotReady(
            "PodsNotReady",
            f"no Ready pod matches {selector!r} in namespace {namespace} "
            f"({len(found)} found, none Ready)",
        )
    return pods


async def resolve_target(kube: Kube, spec: Spec, namespace: str) -> Resolved:
    """Checks every reference of ``spec.target`` and finds the serving pods and nodes.

    Raises :class:`TargetNotReady` naming the first missing object (Service, its port, Ready
    pods).
    """
    t = spec.target
    target_ns = (t.service.namespace if t.service and t.service.namespace else None) or namespace
    selector: dict[str, Any] | None = t.pod_selector.to_dict() if t.pod_selector else None
    if t.service is not None:
        try:
            svc = await kube.get_service(target_ns, t.service.name)
        except NotFound:
            raise TargetNotReady(
                "ServiceNotFound", f"Service {target_ns}/{t.service.name} does not exist"
            ) from None
        selector = service_selector(t.service, target_ns, svc, selector)
    pods: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    if selector:
        sel = label_selector(selector)
        pods = ready_pods(await kube.list_pods(target_ns, sel), sel, target_ns)
        for node in target_nodes(pods):
            try:
                nodes.append(await kube.get_node(node))
            except NotFound:
                continue
    return Resolved(t.base_url(namespace), target_ns, selector, pods, nodes)


def ready_condition(resolved: Resolved, generation: int) -> Condition:
    """``TargetReady=True``: the URL, the Ready pods and their nodes."""
    return condition(
        "TargetReady", True, "Resolved",
        f"{resolved.url}; {len(resolved.pods)} Ready pod(s) on "
        f"{', '.join(n['metadata']['name'] for n in resolved.nodes) or 'unknown nodes'}",
        generation,
    )


def telemetry_without_lookup(
    dcgm: str, nodes: Sequence[str]
) -> tuple[list[str], Condition] | None:
    """The exporters and ``TelemetryAvailable`` when no exporter pod is to be looked for
    (``spec.telemetry.dcgm`` off, a URL, or no node to find GPUs on); None: look them up."""
    if dcgm == "off":
        return [], condition("TelemetryAvailable", False, "Disabled", "spec.telemetry.dcgm: off")
    if dcgm != "auto":
        return [dcgm], condition("TelemetryAvailable", True, "Configured", dcgm)
    if not nodes:
        return [], condition(
            "TelemetryAvailable", False, "NoTargetPods",
            "no target pods to find GPUs by: set spec.target.podSelector, or "
            "spec.telemetry.dcgm to the exporter's URL",
        )
    return None


def exporters_found(
    exporters: Sequence[Mapping[str, Any]], nodes: Sequence[str]
) -> tuple[list[str], Condition]:
    """The URLs of the Ready exporters on ``nodes``, and ``TelemetryAvailable`` saying so."""
    urls = exporter_urls(exporters, nodes)
    if not urls:
        return [], condition(
            "TelemetryAvailable", False, "ExporterNotFound",
            f"no Ready dcgm-exporter pod (label app=nvidia-dcgm-exporter or "
            f"app.kubernetes.io/name=dcgm-exporter) on node(s) {', '.join(nodes)}; the run goes "
            "on without the GPU table",
        )
    return urls, condition(
        "TelemetryAvailable", True, "ExporterFound", f"{len(urls)} exporter(s): {', '.join(urls)}"
    )


def exporter_namespaces(
    target: str, watched: Sequence[str], exporters: Sequence[str]
) -> list[str] | None:
    """Where to list dcgm-exporter pods: None (every namespace) for an operator that watches
    every namespace (its RBAC lists pods everywhere anyway); else the exporter namespaces it
    was given (``--exporter-namespace``, a Role each), the target's and the watched ones, so
    a namespaced operator never needs a cluster-wide pod list."""
    if not watched:
        return None
    return list(dict.fromkeys([*exporters, target, *watched]))


async def discover_exporters(
    kube: Kube, spec: Spec, resolved: Resolved, namespaces: Sequence[str],
    exporters_in: Sequence[str] = (),
) -> tuple[list[str], Condition]:
    """dcgm-exporter URLs for the target's nodes, and the ``TelemetryAvailable`` condition.

    Lists the exporter pods in the namespaces :func:`exporter_namespaces` names (cluster-wide
    for an all-namespaces operator); a namespace where listing is forbidden is skipped.
    """
    names = [n["metadata"]["name"] for n in resolved.nodes]
    fixed = telemetry_without_lookup(spec.telemetry.dcgm, names)
    if fixed is not None:
        return fixed
    exporters: list[dict[str, Any]] = []
    where = exporter_namespaces(resolved.namespace, namespaces, exporters_in)
    for key, value in DCGM_LABELS:
        for ns in [None] if where is None else where:
            try:
                exporters += await kube.list_pods(ns, f"{key}={value}")
            except ApiException as exc:
                if exc.status != 403:
                    raise
    return exporters_found(exporters, names)
