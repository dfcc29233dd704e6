"""A run in progress: its digest mirrored into status, its runner pods' conditions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmbench.api.status import RunDigest
from llmbench.operator.build import LABEL_BENCHMARK, LABEL_RUN, REPLICAS_ANNOTATION, owner_of
from llmbench.operator.kube import NotFound
from llmbench.operator.results import read_digest
from llmbench.operator.state import kube, lock
from llmbench.operator.status import (
    digest_patch,
    runner_nodes,
    runner_pod_conditions,
    shard_conditions,
    validity_condition,
)
from llmbench.operator.write import write_status

__all__ = ["apply_digest", "results_event", "runner_pod_event"]


async def apply_digest(
    namespace: str, name: str, run: int, digest: RunDigest, csv: str | None
) -> None:
    async with lock(namespace, name):
        try:
            body = await kube().get_benchmark(namespace, name)
        except NotFound:
            return
        status = body.get("status") or {}
        if status.get("run") != run or status.get("phase") != "Running":
            return
        gen = status.get("observedGeneration")
        conds = [c for c in [validity_condition(digest, gen)] if c is not None]
        await write_status(namespace, name, digest_patch(digest, csv), conds, body=body)


async def results_event(body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """The runner wrote a point: mirror its digest into status (within a second or two)."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    digest, csv = read_digest(body)
    if digest is not None:
        await apply_digest(owner[0], owner[1], owner[2], digest, csv)


async def runner_pod_event(body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """``RunnerScheduled`` (with the scheduler's reason) and ``Running`` from the runner pod.

    With several runner pods (``spec.runner.replicas``) every event recomputes both from all
    the run's pods (one list call), so the conditions and ``stack.runnerNodes`` describe every
    shard instead of the pod that happened to change last."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    namespace, name, run = owner
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    try:
        replicas = int(annotations.get(REPLICAS_ANNOTATION) or 1)
    except ValueError:
        replicas = 1
    async with lock(namespace, name):
        try:
            bench = await kube().get_benchmark(namespace, name)
        except NotFound:
            return
        status = bench.get("status") or {}
        if status.get("run") != run or status.get("phase") != "Running":
            return
        gen = status.get("observedGeneration")
        stack = dict(status.get("stack") or {})
        containers = (body.get("spec") or {}).get("containers") or []
        image = containers[0].get("image") if containers else None
        fields: dict[str, Any] = {}
        if replicas > 1:
            selector = f"{LABEL_BENCHMARK}={name},{LABEL_RUN}={run}"
            pods = await kube().list_pods(namespace, selector)
            conds = shard_conditions(pods, replicas, gen)
            nodes = runner_nodes(pods)
            node = nodes[0] if nodes and nodes[0] else None
            if nodes != stack.get("runnerNodes"):
                stack["runnerNodes"] = nodes
                fields["stack"] = stack
        else:
            conds = runner_pod_conditions(body, gen)
            node = (body.get("spec") or {}).get("nodeName")
        have = {c.get("type"): (c.get("status"), c.get("message")) for c in
                status.get("conditions") or []}
        changed = [c for c in conds if have.get(c.type) != (c.status, c.message)]
        if node and (stack.get("runnerNode"), stack.get("runnerImage")) != (node, image):
            stack.update(runnerNode=node, runnerImage=image)
            fields["stack"] = stack
        if changed or fields:
            await write_status(namespace, name, fields, changed, body=bench)
