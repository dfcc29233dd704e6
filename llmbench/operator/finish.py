"""A run's end: its Job finished; final status, history, the Lease, the next run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from llmbench.api.job import run_name
from llmbench.api.status import Condition, RunDigest, StackStatus, dump
from llmbench.operator import baseline as baselines
from llmbench.operator.build import owner_of
from llmbench.operator.kube import PRUNED_KINDS, NotFound
from llmbench.operator.lease import release_lease
from llmbench.operator.reconcile import reconcile
from llmbench.operator.results import context_of, read_digest
from llmbench.operator.schedule import next_run_fields
from llmbench.operator.state import CONFIG, kube, lock
from llmbench.operator.status import (
    condition,
    digest_patch,
    history_entry,
    job_failure_message,
    job_outcome,
    now,
    validity_condition,
    with_history,
)
from llmbench.operator.write import post_event, write_status

__all__ = ["finish_run", "job_event"]


async def job_event(body: Mapping[str, Any], type: str) -> None:  # noqa: A002 - kopf's name
    """A runner Job finished: final status, release the Lease, then any newer spec runs."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    outcome = job_outcome(body)
    if outcome not in ("Succeeded", "Failed"):
        return
    namespace, name, run = owner
    await finish_run(namespace, name, run, dict(body), outcome)


async def finish_run(
    namespace: str, name: str, run: int, job: dict[str, Any], outcome: str
) -> None:
    """Idempotent: a second call for a finished run changes nothing."""
    k = kube()
    async with lock(namespace, name):
        try:
            body = await k.get_benchmark(namespace, name)
        except NotFound:
            return
        status = body.get("status") or {}
        if status.get("run") != run or status.get("phase") in ("Succeeded", "Failed"):
            return
        gen = status.get("observedGeneration")
        digest: RunDigest | None = None
        csv = None
        cm: dict[str, Any] | None = None
        try:  # one read: the digest, and the context with the Lease and the baseline
            cm = await k.get_configmap(namespace, run_name(name, run))
            digest, csv = read_digest(cm)
        except NotFound:
            pass
        fields: dict[str, Any] = {
            "lastRunTime": now(), **next_run_fields(body.get("spec") or {}, CONFIG.clock.now())
        }
        conds: list[Condition] = []
        failed_points = [p for p in (digest.points if digest else []) if p.state == "Failed"]
        failed = (
            outcome == "Failed"
            or (digest is not None and digest.failed is not None)
            or bool(failed_points)
        )
        if digest is not None:
            fields.update(digest_patch(digest, csv))
            valid = validity_condition(digest, gen)
            if valid is not None:
                conds.append(valid)
        elif outcome == "Succeeded":
            failed = True
        if failed:
            why = (digest.failed if digest is not None and digest.failed else None) or (
                f"{len(failed_points)} point(s) failed; first: {failed_points[0].name}: "
                f"{failed_points[0].reason}"
                if failed_points
                else job_failure_message(job)
                if outcome == "Failed"
                else "the runner reported nothing"
            )
            fields.update(phase="Failed", message=f"run {run} failed: {why}")
            conds += [
                condition("Succeeded", False, "RunFailed", why, gen),
                condition("Running", False, "RunFailed", why, gen),
            ]
        else:
            early = (
                f": stopped after the knee ({digest.done} of {digest.total} points)"
                if digest is not None and digest.stopped_after_knee
                else ""
            )
            fields.update(phase="Succeeded", message=f"run {run} finished{early}")
            conds += [
                condition("Succeeded", True, "RunSucceeded", f"run {run} finished", gen),
                condition("Running", False, "Completed", f"run {run} finished", gen),
            ]
        verdict = next((c.status for c in conds if c.type == "MeasurementValid"), None)
        context = context_of(cm)
        regressed = baselines.regressed_condition(
            run=run, failed=failed, valid=verdict, digest=digest,
            baseline=context.baseline if context is not None else None,
            no_baseline=context.no_baseline if context is not None else None,
            stack=stack_of(status), generation=gen,
        )
        conds.append(regressed)
        judged = regressed.status != "Unknown"
        fields["regression"] = (
            dump(digest.regression) if judged and digest and digest.regression else None
        )
        entry = history_entry(
            run, "Failed" if failed else "Succeeded", digest,
            started=status.get("startedTime"), finished=fields["lastRunTime"],
            valid=None if verdict in (None, "Unknown") else verdict == "True",
            config_map=run_name(name, run), message=str(fields["message"]),
            regressed=regressed.status == "True" if judged else None,
            spec_hash=status.get("specHash"),
            artifacts=context.artifacts if context is not None else None,
        )
        limit = int((body.get("spec") or {}).get("historyLimit") or 30)
        fields["history"], dropped = with_history(status.get("history") or [], entry, limit)
        await write_status(namespace, name, fields, conds, body=body)
    for old_run in dropped:  # spec.historyLimit: the oldest runs' objects go
        for kind in PRUNED_KINDS:
            await k.delete(kind, namespace, run_name(name, old_run))
    if context is not None:
        await release_lease(body, context.url)
    post_event(body, "RunFailed" if failed else "RunSucceeded", str(fields["message"]), failed)
    if regressed.status == "True":
        post_event(body, "Regressed", regressed.message, warning=True)
    if int(body["metadata"].get("generation") or 1) != gen:
        await reconcile(namespace, name)


def stack_of(status: Mapping[str, Any]) -> StackStatus | None:
    try:
        return StackStatus.model_validate(status["stack"]) if status.get("stack") else None
    except ValidationError:
        return None


