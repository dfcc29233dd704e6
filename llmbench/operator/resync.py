"""Runs that died are noticed: every Running benchmark is checked again every resync.

Watch events alone cannot end every run: a Job deleted by hand sends one ``DELETED`` event
and nothing after; a runner pod that cannot start (its image never pulls, a Secret key is
missing, the scheduler never finds a node) stays ``Pending`` without another event; a quota
that refuses the pod leaves the Job without pods and says so only in an Event; and kopf never
retries an event handler, so a final status write that failed leaves the run ``Running``. So
the operator-level loop (:mod:`.loop`) calls :func:`check_run` for each Running benchmark
every ``--resync-interval`` seconds. What a run's objects mean is :func:`run_problem` and
:func:`pod_problem`, pure functions; a dead run ends ``Failed`` with the cause (the pod's or
the controller's own message) through :func:`~llmbench.operator.finish.finish_run`, which
releases the Lease; a live run's Lease is renewed, and its results ConfigMap labelled
``llmbench.io/active`` if it is not (a run started by an operator from before that label, which
the ConfigMap watch selects on, would otherwise never report progress after an upgrade).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from llmbench.api import Spec, SpecError
from llmbench.api.job import run_name
from llmbench.operator.baseline import stack_changes
from llmbench.operator.build import LABEL_ACTIVE, owns
from llmbench.operator.finish import finish_run, own_job, run_pods
from llmbench.operator.kube import NotFound
from llmbench.operator.lease import renew_lease
from llmbench.operator.placement import stack_snapshot
from llmbench.operator.reconcile import reconcile, target_cause
from llmbench.operator.results import context_of
from llmbench.operator.schedule import parse_time
from llmbench.operator.state import Operator
from llmbench.operator.status import Patch, image_pull_failure, job_outcome, status_of
from llmbench.operator.target import TargetNotReady, resolve_target
from llmbench.operator.trigger import target_decision, target_digest
from llmbench.operator.write import write_status

__all__ = [
    "CANNOT_START", "check_run", "check_target", "end_dead_run", "pod_problem", "run_problem",
]

#: Container waiting reasons the kubelet retries for ever without the pod ever failing (the
#: Job would wait until its deadline): a missing Secret or key, a bad command or mount.
CANNOT_START = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
#: The kubelet's own cache not yet synced (it waits 1 s for its watch of the pod's Secrets and
#: ConfigMaps, then says ``failed to sync secret cache: timed out waiting for the condition``):
#: not a cause, it tries again and the next message says what is missing, or the pod starts.
_CACHE_NOT_SYNCED = re.compile(r"failed to sync \S+ cache")
#: How much of a controller's message a condition carries.
_MESSAGE_LIMIT = 900


def pod_problem(pod: Mapping[str, Any], at: datetime, unschedulable_seconds: float) -> str | None:
    """Why the runner pod ``pod`` will never run, or None: its image cannot be pulled, its
    container cannot be created (the kubelet's reason and message; not while the kubelet only
    says its own cache of the pod's Secrets is not synced yet), or the scheduler has not
    placed it for more than ``unschedulable_seconds`` (the scheduler's message)."""
    name = (pod.get("metadata") or {}).get("name", "")
    pull = image_pull_failure(pod)
    if pull is not None:
        return pull
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in CANNOT_START:
            message = (waiting.get("message") or "").strip()
            if _CACHE_NOT_SYNCED.match(message):
                continue
            return (f"the runner pod {name} cannot start: {waiting['reason']}"
                    f"{': ' + message if message else ''}")[:_MESSAGE_LIMIT]
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") != "PodScheduled" or c.get("status") != "False":
            continue
        since = c.get("lastTransitionTime") or (pod.get("metadata") or {}).get(
            "creationTimestamp")
        if c.get("reason") == "Unschedulable" and since and (
            at - parse_time(str(since))
        ).total_seconds() > unschedulable_seconds:
            return (f"the runner pod {name} stayed unschedulable for more than "
                    f"{unschedulable_seconds:g} s: {c.get('message') or 'no node fits'}"
                    )[:_MESSAGE_LIMIT]
    return None


def run_problem(
    job_name: str, job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]],
    failed_creates: Sequence[Mapping[str, Any]], at: datetime, unschedulable_seconds: float,
) -> str | None:
    """Why a Running run is dead, or None while it may still finish: its Job is gone, one of
    its runner ``pods`` will never run (:func:`pod_problem`), or the Job has no pod and the
    Job controller reported ``failed_creates`` (``FailedCreate`` Events: a quota, an
    admission webhook or policy refusing the pod; the newest one's message is the cause)."""
    if job is None:
        return (f"the runner Job {job_name} is gone (deleted while its run was Running); "
                "what it measured stays in the results ConfigMap")
    for pod in pods:
        why = pod_problem(pod, at, unschedulable_seconds)
        if why is not None:
            return why
    if not pods and failed_creates:
        newest = max(failed_creates, key=lambda e: str(e.get("lastTimestamp") or e.get(
            "eventTime") or ""))
        return (f"the Job controller cannot create the runner pod of {job_name}: FailedCreate: "
                f"{(newest.get('message') or '').strip()}")[:_MESSAGE_LIMIT]
    return None


async def check_run(op: Operator, namespace: str, name: str) -> None:
    """Looks at a Running benchmark's run: a finished Job whose end was not recorded (a lost
    status write) is recorded now; a dead run (:func:`run_problem`) ends ``Failed`` with its
    cause and its Job is deleted; a live run's Lease is renewed."""
    try:
        body = await op.kube.get_benchmark(namespace, name)
    except NotFound:
        return
    status = status_of(body)
    run = status.run
    if status.phase != "Running" or not run:
        return
    job_name = status.job or run_name(name, run)
    job = await own_job(op, body, status, run)  # a Job of that name not the run's: gone too
    outcome = job_outcome(job)
    if job is not None and outcome in ("Succeeded", "Failed"):
        await finish_run(op, namespace, name, run, job, str(outcome))  # the write kopf lost
        return
    pods: list[Mapping[str, Any]] = []
    failed_creates: list[dict[str, Any]] = []
    if job is not None:
        pods = await run_pods(op, namespace, name, run, job)
        if not pods:
            uid = (job.get("metadata") or {}).get("uid") or ""
            failed_creates = await op.kube.list_events(namespace, uid, "FailedCreate")
    at = op.clock.now()
    why = run_problem(job_name, job, pods, failed_creates, at, op.config.unschedulable_seconds)
    if why is not None:
        await end_dead_run(op, namespace, name, run, why)
        return
    cm_name = run_name(name, run)
    try:
        cm: dict[str, Any] | None = await op.kube.get_configmap(namespace, cm_name)
    except NotFound:
        cm = None
    if cm is not None and owns(body, cm, cm_name) and (
        (cm["metadata"].get("labels") or {}).get(LABEL_ACTIVE) != "true"
    ):  # started by an operator from before the label: watched from now on
        await op.kube.add_label(namespace, cm_name, LABEL_ACTIVE, "true")
    context = context_of(cm)
    if context is not None:
        await renew_lease(op, body, context.url)


async def end_dead_run(op: Operator, namespace: str, name: str, run: int, why: str) -> None:
    """Ends run ``run`` as ``Failed`` because ``why`` (the Lease released), and deletes its
    Job, which would otherwise wait for a pod that never runs until its deadline."""
    await finish_run(op, namespace, name, run, {}, "Failed", reason=why)
    await op.kube.delete("Job", namespace, run_name(name, run))


async def check_target(op: Operator, namespace: str, name: str) -> None:
    """``spec.trigger.onTargetChange``: looks at the target pods and, when their image ID or
    arguments differ from the last run's (:func:`~.trigger.target_decision`), starts a run
    through :func:`~.reconcile.reconcile` with the change in words; the first look only
    records the digest. A target that does not resolve now is looked at next resync."""
    async with op.lock(namespace, name):
        try:
            body = await op.kube.get_benchmark(namespace, name)
        except NotFound:
            return
        raw = body.get("spec") or {}
        if not (raw.get("trigger") or {}).get("onTargetChange") or raw.get("suspend"):
            return
        try:
            spec = Spec.from_manifest(body, namespace=namespace)
            resolved = await resolve_target(op.kube, spec, namespace)
        except (SpecError, TargetNotReady):  # Accepted=False / TargetReady=False say why
            return
        status = status_of(body)
        observed = target_digest(resolved.pods)
        action = target_decision(status.target_digest, observed)
        if action == "none" or observed is None:
            return
        if action == "record":
            await write_status(op, body, Patch({"targetDigest": observed}), op.clock.now())
            return
        now = stack_snapshot(resolved.pods, resolved.nodes)
        change = "; ".join(stack_changes(status.stack, now)) or (
            f"target digest {status.target_digest} -> {observed}")
    await reconcile(op, namespace, name, cause=target_cause(observed, change))
