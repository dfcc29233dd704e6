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

from llmbench.api.status import BenchmarkStatus, CurrentPoint, RunDigest, StackStatus, dump
from llmbench.operator.build import (
    REPLICAS_ANNOTATION,
    job_pods,
    owner_of,
    owns,
)
from llmbench.operator.finish import own_job, run_pods
from llmbench.operator.results import read_current_point, read_digest
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
    "live_point",
    "progress_text",
    "replicas_of",
    "results_event",
    "runner_patch",
    "runner_pod_event",
    "running",
]


def running(status: BenchmarkStatus, run: int) -> bool:
    """Whether run ``run`` is the benchmark's current run and is ``Running``."""
    return status.run == run and status.phase == "Running"


def live_point(digest: RunDigest | None, point: CurrentPoint | None) -> CurrentPoint | None:
    """The point under way, if ``point`` is one: a record of a point the digest already
    counts as ended is stale (the runner removes it just after writing that point's
    results) and shows nothing."""
    if point is None:
        return None
    done = digest.done if digest is not None else 0
    return point if point.number > done else None


def progress_text(done: int, total: int, point: CurrentPoint | None) -> str:
    """The ``PROGRESS`` column: ``3/6`` between points, ``3/6 41%`` while the 4th runs (its
    requests, or its seconds for a time-bound point, done of its target)."""
    text = f"{done}/{total}"
    if point is not None and point.percent is not None:
        text += f" {point.percent:.0f}%"
    return text


def digest_status(
    status: BenchmarkStatus, digest: RunDigest | None, csv: str | None,
    point: CurrentPoint | None = None,
) -> Patch:
    """The runner's latest digest and point under way as status: figures, progress,
    ``currentPoint``, ``MeasurementValid``."""
    live = live_point(digest, point)
    fields: dict[str, Any] = digest_patch(digest, csv) if digest is not None else {}
    if digest is not None:
        done, total = digest.done, digest.total
    else:
        done, total = 0, live.total if live is not None else 0
    if digest is not None or live is not None:
        fields["progress"] = progress_text(done, total, live)
    fields["currentPoint"] = dump(live) if live is not None else None
    valid = validity_condition(digest, status.observed_generation) if digest else None
    return Patch(fields, [valid] if valid is not None else [])


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
    op: Operator, namespace: str, name: str, run: int, digest: RunDigest | None,
    csv: str | None, cm: Mapping[str, Any],
) -> None:
    """Mirrors run ``run``'s digest and point under way into status if that run is still the
    one running and ``cm`` is its own results ConfigMap (not one merely labelled for it)."""
    async with op.locked(namespace, name) as body:
        if body is None:
            return
        status = status_of(body)
        if not running(status, run) or not owns(body, cm, status.results_config_map):
            return
        patch = digest_status(status, digest, csv, read_current_point(cm))
        await write_status(op, body, patch, op.clock.now())


async def results_event(op: Operator, body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """The runner wrote a point or its progress: mirror them into status (within a second
    or two)."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    digest, csv = read_digest(body)
    if digest is not None or read_current_point(body) is not None:
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
