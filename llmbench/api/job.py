"""The contract between the operator and its runner Job: the results ConfigMap's keys and the
context the operator resolved for the runner.

Why a module of its own in the API package: the operator writes it and the runner reads it, but
neither may import the other (the runner never imports the operator or a Kubernetes client), so
the names live where both may look. A run's ConfigMap holds:

========================  =========  ==========================================================
key                       written by what
========================  =========  ==========================================================
``spec.json``             operator   the benchmark's ``spec`` (manifest keys) for this run
``context.json``          operator   :class:`RunContext`: URL, model, telemetry, target pods
``digest.json``           runner     :class:`~llmbench.api.status.RunDigest`, after each point
``summary.csv``           runner     ``analyze_export_genai_perf.csv`` of the points so far
``checkpoint.json``       runner     the sweep's checkpoint (a retried pod resumes from it)
``point.<name>.json``     runner     one finished point's ``profile_export_genai_perf.json``
========================  =========  ==========================================================

The runner's service account may ``get``/``update``/``patch`` this one ConfigMap and nothing
else, so its pod learns the spec from the same object it writes to.
"""

from __future__ import annotations

import re

from pydantic import Field

from .status import StatusModel

__all__ = [
    "CHECKPOINT_KEY",
    "CONTEXT_KEY",
    "DIGEST_KEY",
    "ENV_API_KEY",
    "ENV_NODE_NAME",
    "POINT_PREFIX",
    "SPEC_KEY",
    "SUMMARY_KEY",
    "TERMINATION_LIMIT",
    "RunContext",
    "point_key",
    "point_name_of",
    "results_configmap_name",
    "run_name",
]

SPEC_KEY = "spec.json"
CONTEXT_KEY = "context.json"
DIGEST_KEY = "digest.json"
SUMMARY_KEY = "summary.csv"
CHECKPOINT_KEY = "checkpoint.json"
POINT_PREFIX = "point."
#: The environment variable that carries the API key (from ``secretKeyRef``) into the runner.
ENV_API_KEY = "LLMBENCH_API_KEY"
#: The environment variable that carries the runner pod's node (downward API ``spec.nodeName``)
#: into the digest (``runnerNode``); optional.
ENV_NODE_NAME = "LLMBENCH_NODE_NAME"
#: Bytes the kubelet keeps of a termination message.
TERMINATION_LIMIT = 4096

_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")


def run_name(benchmark: str, run: int) -> str:
    """``<benchmark>-run-<n>``: the Job, ConfigMap, ServiceAccount, Role and RoleBinding name.

    Deterministic, so ``409 AlreadyExists`` means "created before" and an operator restarted
    mid-run never starts a second Job. Kept within 63 characters (the Job name becomes a pod
    label value).
    """
    suffix = f"-run-{run}"
    return benchmark[: 63 - len(suffix)].rstrip("-.") + suffix


def results_configmap_name(benchmark: str, run: int) -> str:
    """The results ConfigMap of a run (same name as its Job)."""
    return run_name(benchmark, run)


def point_key(point: str) -> str:
    """The ConfigMap key of a finished point (keys allow only ``[-._a-zA-Z0-9]``)."""
    return POINT_PREFIX + _KEY_CHARS.sub("_", point) + ".json"


def point_name_of(key: str) -> str | None:
    """The (sanitised) point name a key holds, None for another key."""
    if key.startswith(POINT_PREFIX) and key.endswith(".json"):
        return key[len(POINT_PREFIX) : -len(".json")]
    return None


class RunContext(StatusModel):
    """What the operator resolved for the runner: what to measure and whose GPUs count."""

    benchmark: str
    namespace: str
    run: int = 1
    url: str = Field(description="Base URL of the target (Service address or spec.target.url).")
    model: str | None = None
    api_key_env: str | None = Field(
        default=None, description="Env var holding the API key, when the spec names a Secret."
    )
    dcgm_urls: list[str] = Field(default_factory=list, description="dcgm-exporter /metrics URLs.")
    server_metrics: str = Field(
        default="auto", description="'auto' (<url>/metrics), 'off', or a URL."
    )
    target_pods: list[str] = Field(default_factory=list, description="The inference pods.")
    target_namespace: str | None = None
