"""The operator's process state: its configuration, the API client, a lock per benchmark."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from llmbench.operator.build import DEFAULT_RUNNER_IMAGE
from llmbench.operator.kube import Kube
from llmbench.operator.schedule import Clock

__all__ = ["CONFIG", "OperatorConfig", "kube", "lock"]


@dataclass
class OperatorConfig:
    """What ``llmbench operator`` was started with."""

    runner_image: str = DEFAULT_RUNNER_IMAGE
    #: Namespaces searched for dcgm-exporter pods when a cluster-wide list is forbidden.
    namespaces: list[str] = field(default_factory=list)
    #: Seconds between retries while a benchmark waits for its target or the Lease.
    retry_delay: float = 3.0
    #: What "now" is for schedules (tests shift it instead of sleeping for minutes).
    clock: Clock = field(default_factory=Clock)


CONFIG = OperatorConfig()
_KUBE: Kube | None = None
_LOCKS: dict[tuple[str, str], asyncio.Lock] = {}


def kube() -> Kube:
    """The API client: in-cluster service account, else ``KUBECONFIG``."""
    global _KUBE
    if _KUBE is None:
        try:
            k8s_config.load_incluster_config()
            api = k8s.ApiClient()
        except k8s_config.ConfigException:
            api = k8s_config.new_client_from_config()
        _KUBE = Kube(api)
    return _KUBE


def lock(namespace: str, name: str) -> asyncio.Lock:
    return _LOCKS.setdefault((namespace, name), asyncio.Lock())

