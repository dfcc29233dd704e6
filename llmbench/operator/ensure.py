"""Making sure run N exists: the spec checked, the target resolved, the runner Job checked by
the API server (a server-side dry run), the endpoint's Lease taken, telemetry and the baseline
found, then the run's objects created.

Creating what exists answers 409 and counts as done when the benchmark owns it
(:meth:`Kube.create`), so this runs again safely after a restart at any moment. Each way it can
end is a status patch built by a pure function here: refused spec (``Failed``), target not
ready (``Pending``), endpoint busy (``Queued``), objects created (``Running``), or an object
the API server refuses (``Failed``, the Lease released: the same request would be refused
again, so nothing retries it until the spec changes).

Why the dry run comes before the Lease: a Job the API server will not take (a quota, an
admission policy, a field it refuses) must not hold the endpoint, even for a moment, while
other benchmarks queue behind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from llmbench.api import Spec, SpecError, SpecIssue
from llmbench.api.job import BaselineContext, RunContext, run_name
from llmbench.api.status import BenchmarkStatus, Condition, StackStatus, dump
from llmbench.operator import baseline as baselines
from llmbench.operator.admission import refusal
from llmbench.operator.build import (
    Placement,
    artifacts_location,
    run_objects,
    run_problem,
    runner_job,
)
from llmbench.operator.kube import NotFound, Refused
from llmbench.operator.lease import acquire_lease, release_lease
from llmbench.operator.placement import stack_snapshot
from llmbench.operator.schedule import measured_hash, rfc3339
from llmbench.operator.state import Operator
from llmbench.operator.status import Patch, condition, status_of
from llmbench.operator.target import (
    Resolved,
    TargetNotReady,
    discover_exporters,
    ready_condition,
    resolve_target,
)
from llmbench.operator.trigger import stack_digest
from llmbench.operator.write import post_event, write_status

__all__ = [
    "Outcome",
    "ensure_run",
    "invalid_spec_patch",
    "queued_patch",
    "refused_patch",
    "resolve_baseline",
    "run_context",
    "run_spec",
    "running_patch",
    "target_warning_due",
    "telemetry_warning_due",
    "waiting_patch",
]

#: ``created`` (or refused for good: nothing to retry), or why the run waits: ``target`` (a
#: reference does not resolve: retried with backoff) or ``queued`` (the Lease is held).
Outcome = Literal["created", "target", "queued"]


def run_spec(body: Mapping[str, Any], run: int) -> Spec:
    """The benchmark's spec, checked as the API server cannot (Python-only rules, and whether
    run ``run`` can have its Job under this name); :class:`SpecError` says what to fix."""
    meta = body["metadata"]
    spec = Spec.from_manifest(body, namespace=meta["namespace"])
    problem = run_problem(meta["name"], run, spec)
    if problem is not None:
        raise SpecError([SpecIssue("metadata.name", problem)])
    return spec


def invalid_spec_patch(error: SpecError, generation: int, at: datetime) -> Patch:
    """A refused spec ends the run as ``Failed`` with ``Accepted=False`` (no retry: the spec
    must change, which starts a new run)."""
    return Patch(
        {"phase": "Failed", "message": str(error), "lastRunTime": rfc3339(at)},
        [
            condition("Accepted", False, "InvalidSpec", str(error), generation),
            condition("Succeeded", False, "InvalidSpec", str(error), generation),
        ],
    )


def refused_patch(error: Refused, generation: int, at: datetime) -> Patch:
    """The API server refused one of the run's objects for good: the run ends ``Failed``
    with ``Accepted=False`` and the server's words (no retry: the same request would be
    refused again; a new spec starts a new run)."""
    msg = f"the API server refused the run's objects ({error.code}): {error.message}"
    return Patch(
        {"phase": "Failed", "message": msg, "lastRunTime": rfc3339(at), "job": None},
        [
            condition("Accepted", False, "Refused", msg, generation),
            condition("Succeeded", False, "Refused", msg, generation),
            condition("Running", False, "Refused", msg, generation),
        ],
    )


def waiting_patch(error: TargetNotReady, accepted: Condition, generation: int) -> Patch:
    """A reference of the target does not resolve: ``Pending``, ``TargetReady=False``."""
    return Patch(
        {"phase": "Pending", "message": f"{error.reason}: {error}"},
        [accepted, condition("TargetReady", False, error.reason, str(error), generation)],
    )


def target_warning_due(status: BenchmarkStatus, error: TargetNotReady) -> bool:
    """Whether a ``TargetNotReady`` Warning is due: the reason changed (or the target was
    ready before). A benchmark retrying every few seconds for the same missing Service posts
    it once, not once a retry; a new reason (the Service appeared, its pods are not Ready)
    posts again."""
    have = next((c for c in status.conditions if c.type == "TargetReady"), None)
    return have is None or (have.status, have.reason) != ("False", error.reason)


def telemetry_warning_due(telemetry: Condition) -> bool:
    """Whether a run starts without the GPU telemetry it asked for (``TelemetryAvailable=False``
    for any reason but ``spec.telemetry.dcgm: off``, which is a choice, not a problem)."""
    return telemetry.status == "False" and telemetry.reason != "Disabled"


def queued_patch(
    holder: str, url: str, accepted: Condition, ready: Condition, generation: int
) -> Patch:
    """Another benchmark holds the endpoint's Lease: ``Queued`` behind it."""
    msg = f"waiting for benchmark {holder}, which holds the Lease of {url}"
    return Patch(
        {"phase": "Queued", "queuedBehind": holder, "message": msg},
        [accepted, ready, condition("Running", False, "Queued", msg, generation)],
    )


def run_context(
    body: Mapping[str, Any], run: int, spec: Spec, resolved: Resolved, dcgm_urls: list[str],
    baseline: BaselineContext | None, no_baseline: str | None,
    no_baseline_reason: str | None = None,
) -> RunContext:
    """What the runner is told about the run (``context.json`` of its ConfigMap)."""
    meta = body["metadata"]
    return RunContext(
        benchmark=meta["name"],
        namespace=meta["namespace"],
        run=run,
        url=resolved.url,
        model=spec.target.model,
        api_key_env="LLMBENCH_API_KEY" if spec.target.api_key_secret_ref else None,
        dcgm_urls=dcgm_urls,
        server_metrics=spec.telemetry.server_metrics,
        target_pods=[p["metadata"]["name"] for p in resolved.pods],
        target_namespace=resolved.namespace,
        baseline=baseline,
        no_baseline=no_baseline,
        no_baseline_reason=no_baseline_reason,
        artifacts=artifacts_location(spec, meta["name"], run),
    )


def running_patch(
    name: str, run: int, spec: Spec, status: BenchmarkStatus, stack: StackStatus,
    conditions: list[Condition], at: datetime,
) -> Patch:
    """The run's objects exist: status names its Job and what it measures; a run that was
    waiting becomes ``Running`` now (a run found again after a restart keeps its start)."""
    job = run_name(name, run)
    fields: dict[str, Any] = {
        "job": job,
        "resultsConfigMap": job,
        "queuedBehind": None,
        "stack": dump(stack),
        "message": f"run {run}: runner Job {job}",
    }
    if stack_digest(stack) is not None:  # what spec.trigger.onTargetChange compares with
        fields["targetDigest"] = stack_digest(stack)
    if status.phase in (None, "Pending", "Queued"):
        fields["phase"] = "Running"
        fields["startedTime"] = rfc3339(at)
        fields["progress"] = f"0/{spec.point_runs()}"
    return Patch(fields, conditions)


async def ensure_run(
    op: Operator, body: dict[str, Any], run: int, generation: int, at: datetime
) -> Outcome:
    """Creates what run ``run`` owns: ``created``, or why it waits (the reason is in status)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = status_of(body)
    try:
        spec = run_spec(body, run)
        refused = await refusal(op.kube, op.config.guard, spec, namespace, op.config.runner_image)
        if refused is not None:
            raise refused
    except SpecError as exc:
        await write_status(op, body, invalid_spec_patch(exc, generation, at), at)
        await post_event(op, body, "InvalidSpec", str(exc), warning=True)
        return "created"
    accepted = condition("Accepted", True, "Valid", "the spec is valid", generation)
    try:
        resolved = await resolve_target(op.kube, spec, namespace)
    except TargetNotReady as exc:
        await write_status(op, body, waiting_patch(exc, accepted, generation), at)
        if target_warning_due(status, exc):
            await post_event(op, body, "TargetNotReady", f"{exc.reason}: {exc}", warning=True)
        return "target"
    ready = ready_condition(resolved, generation)
    taints = [t for n in resolved.nodes for t in (n.get("spec") or {}).get("taints") or []]
    where = Placement(resolved.selector, resolved.namespace, taints)
    try:  # once: a queued run was checked before it queued (the real create still is)
        if status.phase != "Queued":
            job = runner_job(body, run, spec, where, image=op.config.runner_image,
                             pod=op.config.runner_pod)
            await op.kube.create(job, dry_run=True)
    except Refused as exc:
        await refuse(op, body, exc, generation, at)
        return "created"
    holder = await acquire_lease(op, body, resolved.url, at)
    if holder is not None:
        queued = queued_patch(holder, resolved.url, accepted, ready, generation)
        if status.queued_behind != holder or status.phase != "Queued":
            await post_event(op, body, "Queued", queued.fields["message"])
        await write_status(op, body, queued, at)
        return "queued"
    urls, telemetry = await discover_exporters(
        op.kube, spec, resolved, op.config.namespaces, op.config.exporter_namespaces
    )
    judged_by, no_baseline, code = await resolve_baseline(op, body, spec, run)
    context = run_context(body, run, spec, resolved, urls, judged_by, no_baseline, code)
    stack = stack_snapshot(resolved.pods, resolved.nodes, urls)
    created = []
    try:
        for obj in run_objects(body, run, spec, context, where, image=op.config.runner_image,
                               pod=op.config.runner_pod, stack=stack):
            if await op.kube.create(obj):
                created.append(obj["kind"])
    except Refused as exc:
        await release_lease(op, body, resolved.url)
        await refuse(op, body, exc, generation, at)
        return "created"
    patch = running_patch(name, run, spec, status, stack, [accepted, ready, telemetry], at)
    await write_status(op, body, patch, at)
    if "Job" in created:
        await post_event(
            op, body, "JobCreated", f"runner Job {run_name(name, run)} created for run {run}"
        )
        if telemetry_warning_due(telemetry):
            await post_event(op, body, "TelemetryUnavailable",
                             f"run {run}: {telemetry.reason}: {telemetry.message}", warning=True)
    return "created"


async def refuse(
    op: Operator, body: Mapping[str, Any], error: Refused, generation: int, at: datetime
) -> None:
    """Ends the run as the API server's refusal says (:func:`refused_patch`), with an Event."""
    patch = refused_patch(error, generation, at)
    await write_status(op, body, patch, at)
    await post_event(op, body, "Refused", patch.fields["message"], warning=True)


async def resolve_baseline(
    op: Operator, body: Mapping[str, Any], spec: Spec, run: int
) -> tuple[BaselineContext | None, str | None, str | None]:
    """The figures run ``run`` is judged against (``spec.baseline``), or why there are none
    and the ``Regressed`` reason for it. A history's newest run lends its stack, so the
    verdict names what changed since."""
    meta = body["metadata"]
    history = [dump(h) for h in status_of(body).history]
    choice = baselines.choose(spec.baseline, history, measured_hash(body.get("spec") or {}), run)
    newest = choice.context.history[-1].run if choice.context and choice.context.history else None
    read = choice.run if choice.run is not None else newest
    if read is None:
        return choice.context, choice.reason, choice.code
    try:
        cm = await op.kube.get_configmap(meta["namespace"], run_name(meta["name"], read))
    except NotFound:
        if choice.context is not None:
            return choice.context, None, None
        return None, f"run {choice.run}'s results ConfigMap is gone", None
    if choice.context is not None:
        stack = baselines.stack_of(cm.get("data") or {})
        return choice.context.model_copy(update={"stack": stack}), None, None
    found = baselines.from_configmap(read, cm.get("data") or {})
    return (None, found, None) if isinstance(found, str) else (found, None, None)
