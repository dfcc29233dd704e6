"""Creating what a run owns: spec check, target, Lease, telemetry, baseline, objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmbench.api import Spec, SpecError, SpecIssue
from llmbench.api.job import BaselineContext, RunContext, run_name
from llmbench.api.status import dump
from llmbench.operator import baseline as baselines
from llmbench.operator.build import Placement, artifacts_location, run_objects, run_problem
from llmbench.operator.kube import NotFound
from llmbench.operator.lease import acquire_lease
from llmbench.operator.placement import stack_snapshot
from llmbench.operator.schedule import measured_hash
from llmbench.operator.state import CONFIG, kube
from llmbench.operator.status import condition, now
from llmbench.operator.target import TargetNotReady, discover_exporters, resolve_target
from llmbench.operator.write import post_event, write_status

__all__ = ["ensure_run", "resolve_baseline"]


async def ensure_run(body: dict[str, Any], run: int, generation: int) -> str:
    """Creates what run ``run`` owns: ``created``, or why it waits (``target``, ``queued``;
    the reason is in status)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = body.get("status") or {}
    try:
        spec = Spec.from_manifest(body, namespace=namespace)
        problem = run_problem(name, run, spec)
        if problem is not None:
            raise SpecError([SpecIssue("metadata.name", problem)])
    except SpecError as exc:
        await write_status(
            namespace, name,
            {"phase": "Failed", "message": str(exc), "lastRunTime": now()},
            [
                condition("Accepted", False, "InvalidSpec", str(exc), generation),
                condition("Succeeded", False, "InvalidSpec", str(exc), generation),
            ],
            body=body,
        )
        post_event(body, "InvalidSpec", str(exc), warning=True)
        return "created"
    accepted = condition("Accepted", True, "Valid", "the spec is valid", generation)
    try:
        resolved = await resolve_target(spec, namespace)
    except TargetNotReady as exc:
        await write_status(
            namespace, name,
            {"phase": "Pending", "message": f"{exc.reason}: {exc}"},
            [accepted, condition("TargetReady", False, exc.reason, str(exc), generation)],
            body=body,
        )
        return "target"
    ready = condition(
        "TargetReady", True, "Resolved",
        f"{resolved.url}; {len(resolved.pods)} Ready pod(s) on "
        f"{', '.join(n['metadata']['name'] for n in resolved.nodes) or 'unknown nodes'}",
        generation,
    )
    holder = await acquire_lease(body, resolved.url)
    if holder is not None:
        msg = f"waiting for benchmark {holder}, which holds the Lease of {resolved.url}"
        if status.get("queuedBehind") != holder or status.get("phase") != "Queued":
            post_event(body, "Queued", msg)
        await write_status(
            namespace, name,
            {"phase": "Queued", "queuedBehind": holder, "message": msg},
            [accepted, ready, condition("Running", False, "Queued", msg, generation)],
            body=body,
        )
        return "queued"
    urls, telemetry = await discover_exporters(spec, resolved)
    judged_by, no_baseline = await resolve_baseline(body, spec, run)
    context = RunContext(
        benchmark=name,
        namespace=namespace,
        run=run,
        url=resolved.url,
        model=spec.target.model,
        api_key_env="LLMBENCH_API_KEY" if spec.target.api_key_secret_ref else None,
        dcgm_urls=urls,
        server_metrics=spec.telemetry.server_metrics,
        target_pods=[p["metadata"]["name"] for p in resolved.pods],
        target_namespace=resolved.namespace,
        baseline=judged_by,
        no_baseline=no_baseline,
        artifacts=artifacts_location(spec, name, run),
    )
    stack = stack_snapshot(resolved.pods, resolved.nodes, urls)
    taints = [t for n in resolved.nodes for t in (n.get("spec") or {}).get("taints") or []]
    where = Placement(resolved.selector, resolved.namespace, taints)
    created = []
    for obj in run_objects(body, run, spec, context, where, image=CONFIG.runner_image,
                           stack=stack):
        if await kube().create(obj):
            created.append(obj["kind"])
    job = run_name(name, run)
    fields: dict[str, Any] = {
        "job": job,
        "resultsConfigMap": job,
        "queuedBehind": None,
        "stack": dump(stack),
        "message": f"run {run}: runner Job {job}",
    }
    if status.get("phase") in (None, "Pending", "Queued"):
        fields["phase"] = "Running"
        fields["startedTime"] = now()
        fields["progress"] = f"0/{len(spec.points()) * spec.repetitions}"
    await write_status(namespace, name, fields, [accepted, ready, telemetry], body=body)
    if "Job" in created:
        post_event(body, "JobCreated", f"runner Job {job} created for run {run}")
    return "created"


async def resolve_baseline(
    body: Mapping[str, Any], spec: Spec, run: int
) -> tuple[BaselineContext | None, str | None]:
    """The figures run ``run`` is judged against (``spec.baseline``), or why there are none."""
    meta = body["metadata"]
    status = body.get("status") or {}
    choice = baselines.choose(
        spec.baseline, status.get("history") or [], measured_hash(body.get("spec") or {}), run
    )
    if choice.run is None:
        return choice.context, choice.reason
    try:
        cm = await kube().get_configmap(meta["namespace"], run_name(meta["name"], choice.run))
    except NotFound:
        return None, f"run {choice.run}'s results ConfigMap is gone"
    found = baselines.from_configmap(choice.run, cm.get("data") or {})
    return (None, found) if isinstance(found, str) else (found, None)


