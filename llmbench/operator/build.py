"""The objects one run of a benchmark owns, built as plain manifests by pure functions.

Why pure: what the operator creates is the product's security and placement surface (who may
write what, where the runner lands, what it can see), so each object is a function of the
benchmark and what was resolved about its target, tested field by field without a cluster.
Names are deterministic (:func:`llmbench.api.job.run_name`), so creating an object that exists
answers ``409 AlreadyExists`` and a restarted operator never starts a second Job.

A run owns: the results ConfigMap, a ServiceAccount, a Role allowing ``get``/``update``/
``patch`` on that one ConfigMap (``resourceNames``) and nothing else, its RoleBinding, and the
runner Job (one for the whole sweep). All carry an ``ownerReference`` to the benchmark, so
deleting the benchmark deletes them (Kubernetes' garbage collector).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from llmbench.api import API_VERSION, KIND, Spec
from llmbench.api.job import (
    CONTEXT_KEY,
    ENV_API_KEY,
    ENV_SHARD_INDEX,
    SPEC_KEY,
    STACK_KEY,
    RunContext,
    run_name,
)
from llmbench.api.rules import issues_from_validation_error
from llmbench.api.spec.runner import SIDECARS_OFF, RunnerPod
from llmbench.api.status import StackStatus, dump

__all__ = [
    "ARTIFACT_DIR",
    "DEFAULT_RUNNER_IMAGE",
    "PERSIST_MOUNT",
    "artifacts_location",
    "INDEX_ANNOTATION",
    "REPLICAS_ANNOTATION",
    "LABEL_ACTIVE",
    "LABEL_BENCHMARK",
    "LABEL_MANAGED_BY",
    "LABEL_RUN",
    "MANAGED_BY",
    "RUNNER_CONTAINER",
    "RUNNER_UID",
    "SA_DIR",
    "DEFAULT_RUNNER_POD",
    "Placement",
    "PodSettings",
    "child_labels",
    "default_deadline",
    "lease_name",
    "owner_reference",
    "owns",
    "pod_settings",
    "results_configmap",
    "runner_pod_defaults",
    "run_objects",
    "runner_job",
    "runner_role",
    "runner_role_binding",
    "run_problem",
    "runner_service_account",
    "holder_identity",
    "target_lease",
]

MANAGED_BY = "llmbench-operator"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_BENCHMARK = "llmbench.io/benchmark"
LABEL_RUN = "llmbench.io/run"
#: On a results ConfigMap while its run is in progress; the operator removes it when the run
#: ends. The operator's ConfigMap watch selects it server-side, so a restarted operator lists
#: only the runs in progress, not every run's results kept by spec.historyLimit.
LABEL_ACTIVE = "llmbench.io/active"
RUNNER_CONTAINER = "runner"
#: The runner image's non-root user (distroless "nonroot").
RUNNER_UID = 65532
DEFAULT_RUNNER_IMAGE = "ghcr.io/llmbench/llmbench:0.1.0"
ARTIFACT_DIR = "/results"
#: Where ``spec.artifacts.pvc`` is mounted in the runner pod (its subPath, if any, is the root).
PERSIST_MOUNT = "/artifacts"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: Exit codes of ``llmbench job`` that retrying cannot fix (bad spec, failed run).
_FINAL_EXIT_CODES = [1, 2]
#: The pod annotation an Indexed Job's controller sets to the pod's completion index.
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: The runner pods' annotation with their Job's shard count (replicas > 1): the operator reads
#: a run's shape from any one of its pods.
REPLICAS_ANNOTATION = "llmbench.io/replicas"


def owner_reference(benchmark: Mapping[str, Any]) -> dict[str, Any]:
    """The benchmark as the controlling owner: deletion cascades to everything it owns."""
    meta = benchmark["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owns(benchmark: Mapping[str, Any], child: Mapping[str, Any], name: str | None) -> bool:
    """Whether ``child`` is the benchmark's own object named ``name`` (its ``status.job`` or
    ``status.resultsConfigMap``): its controlling owner has the benchmark's uid.

    Why not the labels: anyone who may create a Job in the namespace can label one for any
    benchmark; only the name (taken by the operator's own create) and the owner's uid (set by
    the operator, checked on a 409) say the operator made it.
    """
    meta = child.get("metadata") or {}
    if name is None or meta.get("name") != name:
        return False
    uid = benchmark["metadata"].get("uid")
    return any(
        ref.get("controller") and ref.get("uid") == uid for ref in meta.get("ownerReferences") or []
    )


def job_pods(
    pods: Sequence[Mapping[str, Any]], job: Mapping[str, Any] | None
) -> list[Mapping[str, Any]]:
    """The pods among ``pods`` (listed by the run's labels) that the run's ``job`` made: their
    controlling owner has the Job's uid. None without a Job (or a Job without a uid).

    Why: a user who may create pods can label one for any benchmark; such a pod must neither
    end the run (an image that never pulls, an OOM kill) nor describe it (nodes, conditions,
    termination message). ``job`` must itself be the run's own (:func:`owns`).
    """
    uid = ((job or {}).get("metadata") or {}).get("uid")
    if not uid:
        return []
    return [
        p for p in pods
        if any(ref.get("controller") and ref.get("kind") == "Job" and ref.get("uid") == uid
               for ref in (p.get("metadata") or {}).get("ownerReferences") or [])
    ]


def child_labels(benchmark: str, run: int) -> dict[str, str]:
    """Labels on every child: the operator watches children by these, statelessly."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_BENCHMARK: benchmark,
        LABEL_RUN: str(run),
        "app.kubernetes.io/name": "llmbench-runner",
    }


def _meta(benchmark: Mapping[str, Any], run: int) -> dict[str, Any]:
    name = benchmark["metadata"]["name"]
    return {
        "name": run_name(name, run),
        "namespace": benchmark["metadata"]["namespace"],
        "labels": child_labels(name, run),
        "ownerReferences": [owner_reference(benchmark)],
    }


def run_problem(benchmark: str, run: int, spec: Spec) -> str | None:
    """Why run ``run`` of ``benchmark`` cannot have its runner Job, None when it can: several
    runner pods need an Indexed Job, and the API server rejects one whose last pod's hostname
    (``<job>-<replicas - 1>``) would exceed a DNS label's 63 characters."""
    name = run_name(benchmark, run)
    replicas = spec.runner.replicas
    longest = 63 - len(f"-{replicas - 1}")
    if replicas > 1 and len(name) > longest:
        return (
            f"spec.runner.replicas {replicas} needs an Indexed Job, whose name ({name}, "
            f"{len(name)} characters) may have at most {longest}: shorten the benchmark's name"
        )
    return None


def results_configmap(
    benchmark: Mapping[str, Any],
    run: int,
    spec: Spec,
    context: RunContext,
    stack: StackStatus | None = None,
) -> dict[str, Any]:
    """The run's results ConfigMap, seeded with the spec, the resolved context and the
    target's stack (so a later run judged against this one can name what changed)."""
    data = {
        SPEC_KEY: json.dumps(spec.to_dict(), sort_keys=True),
        CONTEXT_KEY: json.dumps(context.model_dump(by_alias=True, exclude_none=True)),
    }
    if stack is not None:
        data[STACK_KEY] = json.dumps(dump(stack))
    meta = _meta(benchmark, run)
    meta["labels"][LABEL_ACTIVE] = "true"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def runner_service_account(benchmark: Mapping[str, Any], run: int) -> dict[str, Any]:
    """The runner's identity: its token can do only what :func:`runner_role` grants."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(benchmark, run)}


def runner_role(benchmark: Mapping[str, Any], run: int) -> dict[str, Any]:
    """``get``/``update``/``patch`` on the run's own ConfigMap, by name, and nothing else."""
    meta = _meta(benchmark, run)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [meta["name"]],
                "verbs": ["get", "update", "patch"],
            }
        ],
    }


def runner_role_binding(benchmark: Mapping[str, Any], run: int) -> dict[str, Any]:
    """Binds :func:`runner_role` to :func:`runner_service_account` (same name for all three)."""
    meta = _meta(benchmark, run)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta["name"]},
        "subjects": [
            {"kind": "ServiceAccount", "name": meta["name"], "namespace": meta["namespace"]}
        ],
    }


@dataclass(frozen=True)
class Placement:
    """Where the target runs, as the operator resolved it: what the runner's pod needs."""

    #: The label selector of the inference pods (``matchLabels``/``matchExpressions``).
    selector: Mapping[str, Any] | None = None
    #: Their namespace.
    namespace: str | None = None
    #: Taints of the nodes that host them, each tolerated by the runner.
    taints: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


_TOPOLOGY = {"SameNode": "kubernetes.io/hostname", "SameZone": "topology.kubernetes.io/zone"}


def affinity(placement_mode: str, where: Placement) -> dict[str, Any] | None:
    """Required pod affinity to the inference pods: same node, same zone, or none (``Any``)."""
    key = _TOPOLOGY.get(placement_mode)
    if key is None or not where.selector:
        return None
    term: dict[str, Any] = {"labelSelector": dict(where.selector), "topologyKey": key}
    if where.namespace:
        term["namespaces"] = [where.namespace]
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def tolerations(taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One toleration per distinct taint of the target's nodes (GPU taints, typically)."""
    out: list[dict[str, Any]] = []
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute", "PreferNoSchedule"):
            continue
        tol: dict[str, Any] = {"key": taint["key"], "effect": taint["effect"]}
        if taint.get("value"):
            tol.update(operator="Equal", value=taint["value"])
        else:
            tol["operator"] = "Exists"
        if tol not in out:
            out.append(tol)
    return out


#: The runner pod's settings when the operator is given none (``--runner-pod-defaults``): no
#: service-mesh sidecar.
DEFAULT_RUNNER_POD = RunnerPod(pod_annotations=dict(SIDECARS_OFF))


def runner_pod_defaults(text: str) -> RunnerPod:
    """``--runner-pod-defaults``: a JSON object with spec.runner's pod fields
    (``imagePullSecrets``, ``podLabels``, ``podAnnotations``, ``priorityClassName``,
    ``nodeSelector``), checked by the spec's own rules; it replaces :data:`DEFAULT_RUNNER_POD`
    (so give the sidecar annotations too, as the chart does).

    Raises ValueError naming the flag and what to fix.
    Example: ``runner_pod_defaults('{"priorityClassName": "batch-low"}')``.
    """
    try:
        return RunnerPod.model_validate(json.loads(text))
    except ValidationError as exc:
        issues = issues_from_validation_error(exc, RunnerPod, "runner")
        raise ValueError(f"--runner-pod-defaults: {'; '.join(map(str, issues))}") from None
    except ValueError as exc:  # not JSON
        raise ValueError(f"--runner-pod-defaults: not a JSON object: {exc}") from None


@dataclass(frozen=True)
class PodSettings:
    """The runner pod's pull secrets, labels, annotations, priority and node selector, the
    benchmark's ``spec.runner`` merged over the operator's defaults (the chart's values)."""

    image_pull_secrets: list[str]
    labels: dict[str, str]
    annotations: dict[str, str]
    priority_class_name: str | None
    node_selector: dict[str, str]


def pod_settings(runner: RunnerPod, defaults: RunnerPod = DEFAULT_RUNNER_POD) -> PodSettings:
    """What the benchmark sets wins, key by key, over what the operator was given: labels,
    annotations and the node selector are merged (the benchmark's value for a key replaces
    the default's), pull secrets are the defaults' then the benchmark's (each once), a
    priority class is the benchmark's, else the default's.

    The operator's own labels and annotations are added on top by :func:`runner_job` (the
    spec refuses such keys; the operator's defaults are checked by the same model).
    Example: defaults ``{"sidecar.istio.io/inject": "false"}`` and a benchmark's
    ``{"sidecar.istio.io/inject": "true"}`` give ``"true"``.
    """
    return PodSettings(
        image_pull_secrets=list(dict.fromkeys(
            [*(defaults.image_pull_secrets or []), *(runner.image_pull_secrets or [])])),
        labels={**(defaults.pod_labels or {}), **(runner.pod_labels or {})},
        annotations={**(defaults.pod_annotations or {}), **(runner.pod_annotations or {})},
        priority_class_name=runner.priority_class_name or defaults.priority_class_name,
        node_selector={**(defaults.node_selector or {}), **(runner.node_selector or {})},
    )


def artifacts_location(spec: Spec, name: str, run: int) -> str | None:
    """Where a run's folder lands on ``spec.artifacts.pvc``, for people: ``pvc/<claim>/
    <subPath>/<benchmark>/run-<n>`` (None without a claim). One run per folder, named like
    its results ConfigMap's run, so a run's files are found from ``status.history``."""
    pvc = spec.artifacts.pvc
    if pvc is None:
        return None
    parts = ["pvc", pvc.claim_name, *([pvc.sub_path] if pvc.sub_path else []), name,
             f"run-{run}"]
    return "/".join(parts)


def runner_job(
    benchmark: Mapping[str, Any],
    run: int,
    spec: Spec,
    where: Placement,
    *,
    image: str = DEFAULT_RUNNER_IMAGE,
    pod: RunnerPod = DEFAULT_RUNNER_POD,
) -> dict[str, Any]:
    """The one runner Job of a run (never a pod per point: see DESIGN.md "Result flow").

    The pod carries :func:`pod_settings` of ``spec.runner`` over ``pod`` (the operator's
    defaults): pull secrets, labels and annotations (the operator's own on top), priority
    class and node selector. The node selector narrows the placement, never replaces it: the
    pod affinity to the target's pods still applies.

    The pod requests no GPU, runs as non-root with a read-only root filesystem, no
    capabilities and the runtime's seccomp profile; it writes artefacts to an emptyDir (with
    ``spec.artifacts.pvc``, shard 0 writes its run folder to that claim instead, below
    ``<subPath>/<benchmark>/run-<n>``: see :func:`artifacts_location`) and gets the API key
    only through ``secretKeyRef``. Exit codes 1 and 2 (the run failed, the
    spec is unusable) fail the Job at once; anything else (a killed pod) is retried up to
    ``spec.runner.backoffLimit`` times and the retry resumes the sweep from the ConfigMap.

    ``spec.runner.replicas`` N > 1 makes it an Indexed Job of N pods running at once (the
    shards of one load, index in ``JOB_COMPLETION_INDEX``): each index is retried up to
    ``backoffLimit`` times on its own (``backoffLimitPerIndex``; the retry rejoins the run),
    one index out of retries fails the Job (``maxFailedIndexes: 0``: the others would wait
    for it forever), and ``backoffLimit`` N x retries bounds the total where the cluster
    predates per-index limits. The shards share the placement rules and prefer distinct nodes
    among those the rules allow (a soft topology spread: never a reason to stay Pending).
    """
    meta = _meta(benchmark, run)
    name = meta["name"]
    runner = spec.runner
    # The root filesystem is read-only: everything that writes a cache writes under /tmp.
    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"},
        {"name": "LLMBENCH_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    replicas = runner.replicas
    if replicas > 1:  # the Job controller adds the same; explicit, it is part of the contract
        env.append(
            {
                "name": ENV_SHARD_INDEX,
                "valueFrom": {
                    "fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}
                },
            }
        )
    ref = spec.target.api_key_secret_ref
    if ref is not None:
        env.append(
            {
                "name": ENV_API_KEY,
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    container: dict[str, Any] = {
        "name": RUNNER_CONTAINER,
        "image": runner.image or image,
        "args": [
            "job",
            "--configmap",
            name,
            "--namespace",
            meta["namespace"],
            "--service-account-dir",
            SA_DIR,
            "--artifact-dir",
            ARTIFACT_DIR,
            "--termination-log",
            "/dev/termination-log",
        ],
        "env": env,
        "resources": {
            "requests": runner.requests.model_dump(),
            "limits": runner.limits.model_dump(),
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "results", "mountPath": ARTIFACT_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pvc = spec.artifacts.pvc
    if pvc is not None:  # shard 0 writes the run's folder there (followers keep /results)
        mount: dict[str, Any] = {"name": "artifacts", "mountPath": PERSIST_MOUNT}
        if pvc.sub_path:
            mount["subPath"] = pvc.sub_path
        container["volumeMounts"].append(mount)
        container["args"] += ["--persist-dir",
                              f"{PERSIST_MOUNT}/{benchmark['metadata']['name']}/run-{run}"]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": name,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_UID,
            "runAsGroup": RUNNER_UID,
            "fsGroup": RUNNER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [{"name": "results", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
    }
    if pvc is not None:
        pod_spec["volumes"].append(
            {"name": "artifacts", "persistentVolumeClaim": {"claimName": pvc.claim_name}}
        )
    knobs = pod_settings(runner, pod)
    if knobs.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in knobs.image_pull_secrets]
    if knobs.priority_class_name:
        pod_spec["priorityClassName"] = knobs.priority_class_name
    if knobs.node_selector:
        pod_spec["nodeSelector"] = dict(knobs.node_selector)
    aff = affinity(spec.placement, where)
    if aff is not None:
        pod_spec["affinity"] = aff
    tols = tolerations(where.taints)
    if tols:
        pod_spec["tolerations"] = tols
    if replicas > 1:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": _TOPOLOGY["SameNode"],
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {
                    "matchLabels": {k: meta["labels"][k] for k in (LABEL_BENCHMARK, LABEL_RUN)}
                },
            }
        ]
    job_spec: dict[str, Any] = {
        "backoffLimit": runner.backoff_limit * replicas,
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": RUNNER_CONTAINER,
                        "operator": "In",
                        "values": list(_FINAL_EXIT_CODES),
                    },
                },
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            ]
        },
        "template": {
            "metadata": {"labels": {**knobs.labels, **meta["labels"]}},
            "spec": pod_spec,
        },
    }
    annotations = dict(knobs.annotations)
    if replicas > 1:
        annotations[REPLICAS_ANNOTATION] = str(replicas)
    if annotations:
        job_spec["template"]["metadata"]["annotations"] = annotations
    if replicas > 1:
        job_spec.update(
            completionMode="Indexed",
            completions=replicas,
            parallelism=replicas,
            backoffLimitPerIndex=runner.backoff_limit,
            maxFailedIndexes=0,
        )
    job_spec["activeDeadlineSeconds"] = runner.timeout_seconds or default_deadline(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


#: The default deadline's allowance per point and repetition, and for the run as a whole.
POINT_SECONDS, RUN_SECONDS = 1800, 600


def default_deadline(spec: Spec) -> int:
    """The runner Job's ``activeDeadlineSeconds`` when ``spec.runner.timeoutSeconds`` is not
    set: 30 minutes per point, workload and repetition (at least twice a time-bound point's ramp and
    measurement plus one request timeout), plus 10 minutes for the run. Generous on purpose: it only
    ends runs that hang (a target that accepts connections but never answers), which would
    otherwise hold the endpoint's Lease for ever.

    Example: a 3-point sweep run twice: ``600 + 6 * 1800 == 11400`` seconds.
    """
    measured = (spec.load.measurement_duration_seconds or 0.0) + (spec.load.ramp_up_seconds or 0.0)
    per_point = max(POINT_SECONDS, int(2 * measured + spec.target.request_timeout_seconds))
    return RUN_SECONDS + spec.point_runs() * per_point


def run_objects(
    benchmark: Mapping[str, Any],
    run: int,
    spec: Spec,
    context: RunContext,
    where: Placement,
    *,
    image: str = DEFAULT_RUNNER_IMAGE,
    pod: RunnerPod = DEFAULT_RUNNER_POD,
    stack: StackStatus | None = None,
) -> list[dict[str, Any]]:
    """Everything a run owns, in creation order (the Job last: it needs all the others)."""
    return [
        results_configmap(benchmark, run, spec, context, stack),
        runner_service_account(benchmark, run),
        runner_role(benchmark, run),
        runner_role_binding(benchmark, run),
        runner_job(benchmark, run, spec, where, image=image, pod=pod),
    ]


def lease_name(target_key: str) -> str:
    """The Lease that serialises benchmarks of one endpoint (one at a time per target)."""
    return "llmbench-target-" + hashlib.sha256(target_key.encode()).hexdigest()[:16]


def target_lease(benchmark: Mapping[str, Any], target_key: str, at: str) -> dict[str, Any]:
    """The Lease a benchmark holds while it runs against ``target_key`` (its resolved URL).

    Owned by the benchmark (not as controller: it is not a child of one run), so deleting the
    holder frees the endpoint even when the operator is down.
    """
    meta = benchmark["metadata"]
    owner = owner_reference(benchmark)
    owner["controller"] = False
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(target_key),
            "namespace": meta["namespace"],
            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_BENCHMARK: meta["name"]},
            "annotations": {"llmbench.io/target": target_key[:256]},
            "ownerReferences": [owner],
        },
        "spec": {"holderIdentity": holder_identity(benchmark), "acquireTime": at},
    }


def holder_identity(benchmark: Mapping[str, Any]) -> str:
    """``<namespace>/<name>``: what a queued benchmark's condition names."""
    meta = benchmark["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def owner_of(body: Mapping[str, Any]) -> tuple[str, str, int] | None:
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        return meta["namespace"], labels[LABEL_BENCHMARK], int(labels[LABEL_RUN])
    except (KeyError, ValueError):
        return None
