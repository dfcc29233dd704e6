"""A run in progress: the runner's digest mirrored into status after each point, and the
runner pods' ``RunnerScheduled``/``Running`` conditions and nodes; a runner pod that will
never run (:func:`~llmbench.operator.resync.pod_problem`) ends the run at once.

Both come from watch events of the run's children and apply only while that run is the
benchmark's current one and ``Running`` (:func:`running`), so a late event of an old run
changes nothing. The patches are pure functions of the status and the child objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmbench.api.status import BenchmarkStatus, RunDigest, StackStatus, dump
from llmbench.operator.build import (
    REPLICAS_ANNOTATION,
    job_pods,
    owner_of,
    owns,
)
from llmbench.operator.finish import own_job, run_pods
from llmbench.operator.results import read_digest
from llmbench.operator.resync import end_dead_run, pod_problem
from llmbench.operator.state import Operator
from llmbench.operator.status import (
    Patch,
    digest_patch,
    runner_nodes,
    runner_pod_conditions,
    shard_conditions,
    status_of,
    validity_condition,
)
from llmbench.operator.write import write_status

__all__ = [
    "apply_digest",
    "digest_status",
    "replicas_of",
    "results_event",
    "runner_patch",
    "runner_pod_event",
    "running",
]


def running(status: BenchmarkStatus, run: int) -> bool:
    """Whether run ``run`` is the benchmark's current run and is ``Running``."""
    return status.run == run and status.phase == "Running"


def digest_status(status: BenchmarkStatus, digest: RunDigest, csv: str | None) -> Patch:
    """The runner's latest digest as status: figures, progress, ``MeasurementValid``."""
    valid = validity_condition(digest, status.observed_generation)
    return Patch(digest_patch(digest, csv), [valid] if valid is not None else [])


def replicas_of(pod: Mapping[str, Any]) -> int:
    """How many runner pods the pod's run has (its Job's shard count annotation; 1 without)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(REPLICAS_ANNOTATION) or 1)
    except ValueError:
        return 1


def runner_patch(
    status: BenchmarkStatus, pod: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
    replicas: int,
) -> Patch:
    """What the runner pod ``pod`` (and, with ``replicas`` > 1, all the run's ``pods``) says:
    the conditions that changed, and the stack's runner node(s) and image when they moved.
    An empty patch: nothing to write."""
    gen = status.observed_generation
    stack = status.stack or StackStatus()
    containers = (pod.get("spec") or {}).get("containers") or []
    image = containers[0].get("image") if containers else None
    fields: dict[str, Any] = {}
    if replicas > 1:
        conds = shard_conditions(pods, replicas, gen)
        nodes = runner_nodes(pods)
        node = nodes[0] if nodes and nodes[0] else None
        if nodes != stack.runner_nodes:
            stack = stack.model_copy(update={"runner_nodes": nodes})
            fields["stack"] = dump(stack)
    else:
        conds = runner_pod_conditions(pod, gen)
        node = (pod.get("spec") or {}).get("nodeName")
    have = {c.type: (c.status, c.message) for c in status.conditions}
    changed = [c for c in conds if have.get(c.type) != (c.status, c.message)]
    if node and (stack.runner_node, stack.runner_image) != (node, image):
        stack = stack.model_copy(update={"runner_node": node, "runner_image": image})
        fields["stack"] = dump(stack)
    return Patch(fields, changed)


async def apply_digest(
    op: Operator, namespace: str, name: str, run: int, digest: RunDigest, csv: str | None,
    cm: Mapping[str, Any],
) -> None:
    """Mirrors run ``run``'s digest into status if that run is still the one running and
    ``cm`` is its own results ConfigMap (not one merely labelled for it)."""
    async with op.locked(namespace, name) as body:
        if body is None:
            return
        status = status_of(body)
        if not running(status, run) or not owns(body, cm, status.results_config_map):
            return
        await write_status(op, body, digest_status(status, digest, csv), op.clock.now())


async def results_event(op: Operator, body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """The runner wrote a point: mirror its digest into status (within a second or two)."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    digest, csv = read_digest(body)
    if digest is not None:
        await apply_digest(op, owner[0], owner[1], owner[2], digest, csv, body)


async def runner_pod_event(op: Operator, body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """``RunnerScheduled`` (with the scheduler's reason) and ``Running`` from a runner pod.

    With several runner pods (``spec.runner.replicas``) every event recomputes both from all
    the run's pods (one list call), so the conditions and ``stack.runnerNodes`` describe every
    shard instead of the pod that happened to change last."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    namespace, name, run = owner
    replicas = replicas_of(body)
    async with op.locked(namespace, name) as bench:
        if bench is None:
            return
        status = status_of(bench)
        if not running(status, run):
            return
        job = await own_job(op, bench, status, run)
        if not job_pods([body], job):  # labelled for the run by someone else: not its pod
            return
        pods = await run_pods(op, namespace, name, run, job) if replicas > 1 else []
        patch = runner_patch(status, body, pods, replicas)
        if patch.conditions or patch.fields:
            await write_status(op, bench, patch, op.clock.now())
    why = pod_problem(body, op.clock.now(), op.config.unschedulable_seconds)
    if why is not None:  # the Job would wait for a pod that never runs until its deadline
        await end_dead_run(op, namespace, name, run, why)
