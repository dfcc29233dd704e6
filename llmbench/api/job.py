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
``stack.json``            operator   :class:`~llmbench.api.status.StackStatus` at the start
``shard.<p>.ready.<i>``   shard i    ``spec.runner.replicas`` > 1: shard i prepared point p
                                     (JSON: its process ``boot`` id, the ``after`` attempt it
                                     finished last, realtime ``t``, ``node``)
``shard.<p>.start``       shard 0    the attempt of point p every shard begins: ``attempt``,
                                     realtime start instant ``at`` (a little ahead), the
                                     ``boots`` taking part, when each ready was ``seen``
``shard.<p>.rec.<a>.<i>`` shard i    shard i's records of attempt a of point p (``data``:
                                     packed records, see :mod:`llmbench.runner.load.shards`)
========================  =========  ==========================================================

The ``shard.`` keys live only while their point runs: shard 0 removes them once the point's
merged result is written (``<p>`` is the point name with every character outside
``[-_a-zA-Z0-9]`` made ``_``, so one point's prefix never covers another's).

The runner's service account may ``get``/``update``/``patch`` this one ConfigMap and nothing
else, so its pod learns the spec from the same object it writes to.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import Field

from .status import PointStatus, StackStatus, StatusModel

__all__ = [
    "CHECKPOINT_KEY",
    "CONTEXT_KEY",
    "DIGEST_KEY",
    "ENV_API_KEY",
    "ENV_NODE_NAME",
    "ENV_SHARD_INDEX",
    "NAME_HASH_CHARS",
    "POINT_PREFIX",
    "PROGRESS_KEY",
    "SHARD_PREFIX",
    "SPEC_KEY",
    "STACK_KEY",
    "SUMMARY_KEY",
    "TERMINATION_LIMIT",
    "BaselineContext",
    "HistoryFigures",
    "RunContext",
    "point_key",
    "point_name_of",
    "results_configmap_name",
    "run_name",
    "shard_key",
]

SPEC_KEY = "spec.json"
CONTEXT_KEY = "context.json"
DIGEST_KEY = "digest.json"
SUMMARY_KEY = "summary.csv"
CHECKPOINT_KEY = "checkpoint.json"
STACK_KEY = "stack.json"
#: The point under way (:class:`~llmbench.api.status.CurrentPoint`), rewritten by the runner at
#: most every ~10 s and removed when the point ends; the operator copies it to
#: ``status.currentPoint``.
PROGRESS_KEY = "progress.json"
POINT_PREFIX = "point."
SHARD_PREFIX = "shard."
#: The environment variable that carries the API key (from ``secretKeyRef``) into the runner.
ENV_API_KEY = "LLMBENCH_API_KEY"
#: The environment variable that carries the runner pod's node (downward API ``spec.nodeName``)
#: into the digest (``runnerNode``); optional.
ENV_NODE_NAME = "LLMBENCH_NODE_NAME"
#: The environment variable an Indexed Job sets in each pod: the runner shard's index (0 leads).
ENV_SHARD_INDEX = "JOB_COMPLETION_INDEX"
#: Bytes the kubelet keeps of a termination message.
TERMINATION_LIMIT = 4096

_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")
_SHARD_CHARS = re.compile(r"[^-_a-zA-Z0-9]")


#: Hex digits of the benchmark name's SHA-256 a shortened child name carries.
NAME_HASH_CHARS = 8


def run_name(benchmark: str, run: int) -> str:
    """``<benchmark>-run-<n>``: the Job, ConfigMap, ServiceAccount, Role and RoleBinding name.

    Deterministic, so ``409 AlreadyExists`` means "created before" (by this benchmark: the
    operator compares the owner's uid) and an operator restarted mid-run never starts a
    second Job. Kept within 63 characters (the Job name becomes a pod label value): a name too
    long for that is cut and carries the first :data:`NAME_HASH_CHARS` hex digits of its
    SHA-256 (``<prefix>-<hash>-run-<n>``), so two benchmarks whose names share their first 57
    characters still get distinct children.

    Why a hash of the name alone (not the namespace, not the uid): children live in their
    benchmark's namespace, where the name is unique; and the name must stay derivable from
    the benchmark's name and run number, which is all ``llmbench results`` and a user's
    ``kubectl get job`` know. A recreated benchmark meeting its predecessor's not yet
    collected children, or a name forged to match a hashed one, is caught by the owner uid
    check instead (never adopted).
    """
    suffix = f"-run-{run}"
    if len(benchmark) + len(suffix) <= 63:
        return benchmark + suffix
    digest = hashlib.sha256(benchmark.encode()).hexdigest()[:NAME_HASH_CHARS]
    keep = 63 - len(suffix) - len(digest) - 1
    return f"{benchmark[:keep].rstrip('-.')}-{digest}{suffix}"


def results_configmap_name(benchmark: str, run: int) -> str:
    """The results ConfigMap of a run (same name as its Job)."""
    return run_name(benchmark, run)


def point_key(point: str) -> str:
    """The ConfigMap key of a finished point (keys allow only ``[-._a-zA-Z0-9]``)."""
    return POINT_PREFIX + _KEY_CHARS.sub("_", point) + ".json"


def shard_key(point: str, *parts: str | int) -> str:
    """A shard-protocol key of a point: ``shard.<p>.<part>...`` (see the module's table)."""
    return SHARD_PREFIX + ".".join([_SHARD_CHARS.sub("_", point), *map(str, parts)])


def point_name_of(key: str) -> str | None:
    """The (sanitised) point name a key holds, None for another key."""
    if key.startswith(POINT_PREFIX) and key.endswith(".json"):
        return key[len(POINT_PREFIX) : -len(".json")]
    return None


class HistoryFigures(StatusModel):
    """One earlier run's judged figures (``status.history[].figures``)."""

    run: int
    figures: dict[str, float] = Field(default_factory=dict)


class BaselineContext(StatusModel):
    """The figures a run is judged against, resolved by the operator (from the baseline run's
    ConfigMap or from ``spec.baseline.values``); the runner compares and reports the verdict."""

    label: str = Field(description="'run 3' or 'spec.baseline.values'.")
    run: int | None = None
    max_ott_under_slo: float | None = None
    peak_ott: float | None = Field(
        default=None, description="Given only by fixed values; else the points' highest OTT."
    )
    points: list[PointStatus] = Field(default_factory=list)
    stack: StackStatus | None = Field(default=None, description="The baseline run's stack.")
    history: list[HistoryFigures] = Field(
        default_factory=list,
        description="baseline.mode history: the last valid runs' figures, oldest first (the "
        "noise band is made of them; points and maxOttUnderSlo are then unused).",
    )
    band_k: float | None = Field(
        default=None, description="baseline.mode history: the band's half-width in scaled MADs."
    )


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
    baseline: BaselineContext | None = Field(
        default=None, description="What to judge the run against (none: no verdict)."
    )
    no_baseline: str | None = Field(default=None, description="Why there is no baseline.")
    no_baseline_reason: str | None = Field(
        default=None,
        description="The Regressed condition's reason when there is no baseline "
        "(InsufficientHistory; absent: NoBaseline).",
    )
    artifacts: str | None = Field(
        default=None, description="Where the run's folder is kept (spec.artifacts.pvc).",
    )
