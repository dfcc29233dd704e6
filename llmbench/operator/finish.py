"""A run's end: its Job finished, so status gets the final figures, phase, conditions and a
history entry; the oldest runs beyond ``spec.historyLimit`` are pruned, the endpoint's Lease
is released, and a spec changed during the run runs next.

What the run's end means is decided by pure functions from the Job and the runner's digest:
:func:`run_outcome` (phase, reasons, failure message) and :func:`final_status` (the whole
patch, the Regressed verdict, the runs to prune). :func:`finish_run` reads and applies them;
it is idempotent, so the Job's every later event changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from llmbench.api.job import RunContext, run_name
from llmbench.api.status import BenchmarkStatus, Condition, RunDigest, dump
from llmbench.operator import baseline as baselines
from llmbench.operator.build import (
    LABEL_ACTIVE,
    LABEL_BENCHMARK,
    LABEL_RUN,
    job_pods,
    owner_of,
    owns,
)
from llmbench.operator.kube import PRUNED_KINDS, NotFound
from llmbench.operator.lease import release_lease
from llmbench.operator.reconcile import reconcile
from llmbench.operator.results import context_of, read_digest
from llmbench.operator.schedule import next_run_fields, rfc3339
from llmbench.operator.state import Operator
from llmbench.operator.status import (
    Patch,
    condition,
    digest_patch,
    final_digest,
    history_entry,
    history_limit,
    job_failure_message,
    job_outcome,
    missing_points,
    oom_killed,
    status_of,
    termination_digest,
    validity_condition,
    with_history,
)
from llmbench.operator.write import post_event, write_status

__all__ = [
    "Final",
    "RunOutcome",
    "end_event",
    "final_status",
    "finish_run",
    "job_event",
    "keeps_figures",
    "run_outcome",
    "unfinished",
]


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended, from its Job and its digest."""

    phase: Literal["Succeeded", "Failed"]
    #: ``run N finished`` (with why it stopped early) or ``run N failed: <why>``.
    message: str
    #: ``MeasurementValid`` (when the runner reported points), ``Succeeded``, ``Running``.
    conditions: list[Condition]

    @property
    def failed(self) -> bool:
        return self.phase == "Failed"


def run_outcome(
    run: int, job_state: str, job: Mapping[str, Any], digest: RunDigest | None,
    generation: int | None, reason: str | None = None, oom: str | None = None,
) -> RunOutcome:
    """The end of run ``run`` (its Job ``Succeeded`` or ``Failed``, as ``job_state``).

    The run failed when its Job did, when the runner says the sweep failed as a whole or a
    point failed, or when a Job that succeeded left no digest (nothing to show for it). The
    reason is the most specific one known: the runner's, then the first failed point's, then
    the Job's own condition. ``reason`` replaces all of them when the operator ended the run
    itself (a runner image that cannot be pulled); ``oom`` (the kernel's OOM kill of a runner
    container) is added to a failed Job's reason, since the Job only says "backoff".
    """
    failed_points = [p for p in (digest.points if digest else []) if p.state == "Failed"]
    missing = missing_points(digest)
    failed = (
        job_state == "Failed"
        or (digest is not None and digest.failed is not None)
        or bool(failed_points)
        or missing is not None
    )
    conds: list[Condition] = []
    if digest is not None:
        valid = validity_condition(digest, generation)
        if valid is not None:
            conds.append(valid)
    elif job_state == "Succeeded":
        failed = True
    if failed:
        why = reason or (digest.failed if digest is not None and digest.failed else None) or (
            f"{len(failed_points)} point(s) failed; first: {failed_points[0].name}: "
            f"{failed_points[0].reason}"
            if failed_points
            else job_failure_message(job)
            if job_state == "Failed"
            else missing or "the runner reported nothing"
        )
        if oom and job_state == "Failed" and reason is None:
            why = f"{why}; {oom}"
        return RunOutcome("Failed", f"run {run} failed: {why}", conds + [
            condition("Succeeded", False, "RunFailed", why, generation),
            condition("Running", False, "RunFailed", why, generation),
        ])
    early = (
        f": stopped after the knee ({digest.done} of {digest.total} points)"
        if digest is not None and digest.stopped_after_knee
        else ""
    )
    return RunOutcome("Succeeded", f"run {run} finished{early}", conds + [
        condition("Succeeded", True, "RunSucceeded", f"run {run} finished", generation),
        condition("Running", False, "Completed", f"run {run} finished", generation),
    ])


def end_event(outcome: RunOutcome) -> tuple[str, str, bool]:
    """The Event that ends a run: (reason, message, warning).

    ``RunFailed`` (Warning) for a failed run; ``MeasurementInvalid`` (Warning) for a run that
    finished but whose measurement is not to be trusted (``MeasurementValid=False``: a Normal
    ``RunSucceeded`` would hide it from everyone who triages by Warnings); else
    ``RunSucceeded`` (Normal).
    """
    if outcome.failed:
        return "RunFailed", outcome.message, True
    invalid = next((c for c in outcome.conditions
                    if c.type == "MeasurementValid" and c.status == "False"), None)
    if invalid is not None:
        why = f"{outcome.message}, but its measurement is invalid ({invalid.reason}): "
        return "MeasurementInvalid", why + invalid.message, True
    return "RunSucceeded", outcome.message, False


@dataclass(frozen=True)
class Final:
    """The final status of a run, and what follows from it."""

    patch: Patch
    outcome: RunOutcome
    #: The ``Regressed`` condition (also in ``patch``): an Event when True.
    regressed: Condition
    #: Runs that fell out of ``spec.historyLimit``: their objects are deleted.
    dropped: list[int]


def final_status(
    name: str, run: int, status: BenchmarkStatus, spec: Mapping[str, Any], job_state: str,
    job: Mapping[str, Any], digest: RunDigest | None, csv: str | None,
    context: RunContext | None, at: datetime, reason: str | None = None, oom: str | None = None,
) -> Final:
    """The status patch that ends run ``run``: the digest's figures, phase and message,
    ``MeasurementValid``/``Succeeded``/``Running``/``Regressed``, the regression verdict, the
    history with this run last, and ``nextRunTime``; every time in it is ``at``."""
    gen = status.observed_generation
    fields: dict[str, Any] = {
        "lastRunTime": rfc3339(at), "currentPoint": None, **next_run_fields(spec, at)
    }
    if digest is not None:
        fields.update(digest_patch(digest, csv))
    outcome = run_outcome(run, job_state, job, digest, gen, reason, oom)
    fields.update(phase=outcome.phase, message=outcome.message)
    verdict = next((c.status for c in outcome.conditions if c.type == "MeasurementValid"), None)
    regressed = baselines.regressed_condition(
        run=run, failed=outcome.failed, valid=verdict, digest=digest,
        baseline=context.baseline if context is not None else None,
        no_baseline=context.no_baseline if context is not None else None,
        stack=status.stack, generation=gen,
        no_baseline_reason=context.no_baseline_reason if context is not None else None,
    )
    judged = regressed.status != "Unknown"
    fields["regression"] = (
        dump(digest.regression) if judged and digest and digest.regression else None
    )
    entry = history_entry(
        run, outcome.phase, digest,
        started=status.started_time, finished=fields["lastRunTime"],
        valid=None if verdict in (None, "Unknown") else verdict == "True",
        config_map=run_name(name, run), message=outcome.message,
        regressed=regressed.status == "True" if judged else None,
        spec_hash=status.spec_hash,
        artifacts=context.artifacts if context is not None else None,
        figures=digest.figures if digest is not None and keeps_figures(spec) else None,
    )
    history = [dump(h) for h in status.history]
    fields["history"], dropped = with_history(history, entry, history_limit(spec))
    return Final(Patch(fields, [*outcome.conditions, regressed]), outcome, regressed, dropped)


def keeps_figures(spec: Mapping[str, Any]) -> bool:
    """Whether history entries keep the run's judged figures: only ``spec.baseline.mode:
    history`` reads them, and a fixed-mode status stays as small as it was (read raw: a run
    ends under the spec as it is now)."""
    return ((spec.get("baseline") or {}).get("mode")) == "history"


def unfinished(status: BenchmarkStatus, run: int) -> bool:
    """Whether run ``run`` is the benchmark's current run and has not ended yet."""
    return status.run == run and status.phase not in ("Succeeded", "Failed")


async def job_event(op: Operator, body: Mapping[str, Any], type: str) -> None:  # noqa: A002
    """A runner Job changed: when it finished, the run ends (``type``: kopf's event type)."""
    owner = owner_of(body)
    if type == "DELETED" or owner is None:
        return
    outcome = job_outcome(body)
    if outcome not in ("Succeeded", "Failed"):
        return
    namespace, name, run = owner
    await finish_run(op, namespace, name, run, dict(body), outcome)


async def own_job(
    op: Operator, benchmark: Mapping[str, Any], status: BenchmarkStatus, run: int
) -> dict[str, Any] | None:
    """The run's Job if it exists and is the benchmark's own (:func:`owns`), else None."""
    namespace, name = benchmark["metadata"]["namespace"], benchmark["metadata"]["name"]
    job_name = status.job or run_name(name, run)
    try:
        job: dict[str, Any] = await op.kube.get_job(namespace, job_name)
    except NotFound:
        return None
    return job if owns(benchmark, job, job_name) else None


async def run_pods(
    op: Operator, namespace: str, name: str, run: int, job: Mapping[str, Any] | None
) -> list[Mapping[str, Any]]:
    """The run's runner pods: listed by its labels, kept when its ``job`` made them."""
    if not job:
        return []
    pods = await op.kube.list_pods(namespace, f"{LABEL_BENCHMARK}={name},{LABEL_RUN}={run}")
    return job_pods(pods, job)


async def finish_run(
    op: Operator, namespace: str, name: str, run: int, job: dict[str, Any], outcome: str,
    reason: str | None = None,
) -> None:
    """Ends run ``run`` from its finished Job. Idempotent: a second call changes nothing.
    ``reason``: why the run failed when the Job cannot say (see :func:`run_outcome`); ``job``
    empty when the operator ends the run itself, else it must be the run's own Job
    (:func:`~llmbench.operator.build.owns`: a Job merely labelled for the run is ignored)."""
    async with op.locked(namespace, name) as body:
        if body is None:
            return
        status = status_of(body)
        if not unfinished(status, run) or (job and not owns(body, job, status.job)):
            return
        at = op.clock.now()
        digest: RunDigest | None = None
        csv = None
        cm: dict[str, Any] | None = None
        try:  # one read: the digest, and the context with the Lease and the baseline
            cm = await op.kube.get_configmap(namespace, run_name(name, run))
            digest, csv = read_digest(cm)
        except NotFound:
            pass
        context = context_of(cm)
        oom = None
        if outcome == "Failed" or digest is None or not digest.finished:
            # the pods' termination messages: the kernel's word beats "backoff", and the
            # runner's last digest is there when the ConfigMap did not take it
            pods = await run_pods(op, namespace, name, run,
                                  job or await own_job(op, body, status, run))
            digest = final_digest(digest, termination_digest(pods))
            if outcome == "Failed" and reason is None:
                oom = oom_killed(pods)
        final = final_status(name, run, status, body.get("spec") or {}, outcome, job, digest,
                             csv, context, at, reason, oom)
        await write_status(op, body, final.patch, at)
    if cm is not None:  # no longer watched: the operator's memory does not grow with history
        await op.kube.drop_label(namespace, run_name(name, run), LABEL_ACTIVE)
    for old_run in final.dropped:  # spec.historyLimit: the oldest runs' objects go
        for kind in PRUNED_KINDS:
            await op.kube.delete(kind, namespace, run_name(name, old_run))
    if context is not None:
        await release_lease(op, body, context.url)
    reason, message, warning = end_event(final.outcome)
    await post_event(op, body, reason, message, warning)
    if final.regressed.status == "True":
        await post_event(op, body, "Regressed", final.regressed.message, warning=True)
    if int(body["metadata"].get("generation") or 1) != status.observed_generation:
        await reconcile(op, namespace, name)
