"""Reconcile: from the benchmark as it is now to its current run.

:func:`reconcile` is the one entry point for "look at this benchmark again" (create, spec
change, operator start, a waiting benchmark's retry, a due schedule tick, the end of a run
under a newer spec): it reads the benchmark under its lock, decides with pure functions
(:func:`~llmbench.operator.status.decide`, :func:`tick_decision`,
:func:`only_schedule_changed`, :func:`start_patch`), writes what they say, and hands the run
to :func:`~llmbench.operator.ensure.ensure_run`. Anything that must look at every benchmark
again (a periodic resync) calls it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from llmbench.api.job import run_name
from llmbench.api.status import BenchmarkStatus, dump
from llmbench.operator.ensure import ensure_run
from llmbench.operator.lease import release_lease
from llmbench.operator.results import read_context
from llmbench.operator.schedule import (
    ScheduleError,
    due_tick,
    measured_hash,
    next_run_fields,
    parse_time,
    rfc3339,
)
from llmbench.operator.state import Operator
from llmbench.operator.status import (
    Decision,
    Patch,
    condition,
    decide,
    history_entry,
    history_limit,
    status_of,
    with_history,
)
from llmbench.operator.write import post_event, write_status

__all__ = [
    "Cause",
    "TickAction",
    "missed_tick_patch",
    "only_schedule_changed",
    "reconcile",
    "replace_run",
    "replaced_patch",
    "retry",
    "schedule_tick",
    "start_patch",
    "target_cause",
    "tick_cause",
    "tick_decision",
    "tick_handled",
]

#: What a due schedule tick does: start a run, skip the tick, or replace the run in progress.
TickAction = Literal["start", "skip", "replace"]


def tick_decision(action: str, policy: str | None) -> TickAction:
    """What a due schedule tick does, given what :func:`decide` says without it.

    With no run in progress (``done``, or ``start``) the tick starts a new run. With one in
    progress (``ensure``, ``wait``), ``spec.concurrencyPolicy`` says: ``Forbid`` (the default)
    skips the tick, ``Replace`` ends the run in progress and starts the tick's run.
    """
    if action not in ("ensure", "wait"):
        return "start"
    return "replace" if policy == "Replace" else "skip"


@dataclass(frozen=True)
class Cause:
    """Why a run of an unchanged spec is due (a schedule tick, the target changing), and how
    each way it can go reads: the same ``concurrencyPolicy`` and Lease rules for both."""

    #: The new run's message, e.g. ``scheduled run (tick 2026-12-01T02:00:00Z)``.
    start: str
    #: What replaces a run in progress (``concurrencyPolicy: Replace``).
    replacing: str
    #: Why it does not run now (``Forbid``), given the run in progress.
    skipped: str
    skip_event: str
    #: Status fields written with the start (``lastScheduleTime``, ``targetDigest``).
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Status fields written with a skip: a tick counts as handled; a target change does not
    #: (it runs once the run in progress ends).
    skip_fields: Mapping[str, Any] = field(default_factory=dict)


def tick_cause(spec: Mapping[str, Any], tick: datetime) -> Cause:
    """A due schedule tick."""
    sched = {"lastScheduleTime": rfc3339(tick), **next_run_fields(spec, tick)}
    return Cause(
        start=f"scheduled run (tick {rfc3339(tick)})",
        replacing=f"the scheduled run of {rfc3339(tick)}",
        skipped=f"schedule tick {rfc3339(tick)} skipped: run {{run}} is still in progress "
        "(concurrencyPolicy Forbid)",
        skip_event="TickSkipped", fields=sched, skip_fields=sched,
    )


def target_cause(digest: str, change: str) -> Cause:
    """The target's stack changed (``spec.trigger.onTargetChange``): ``change`` in words."""
    return Cause(
        start=f"the target changed: {change}",
        replacing=f"the run for the target change ({change})",
        skipped=f"the target changed ({change}); run {{run}} is still in progress "
        "(concurrencyPolicy Forbid): the change runs when it ends",
        skip_event="TargetChangeWaits", fields={"targetDigest": digest},
    )


def only_schedule_changed(status: BenchmarkStatus, spec: Mapping[str, Any]) -> bool:
    """A new generation that changes only when or how runs happen (schedule, suspend, history,
    baseline, artefacts), not what they measure: the measured settings' digest is the current
    run's, so no run starts."""
    return bool(status.run) and status.spec_hash == measured_hash(spec)


def start_patch(
    name: str, decision: Decision, generation: int, spec: Mapping[str, Any],
    schedule_fields: Mapping[str, Any],
) -> Patch:
    """The status patch that starts run ``decision.run``, written *before* anything is
    created, so that an operator restarted at any moment finds the same run again.

    The previous run's results leave status (they stay in its ConfigMap and history);
    ``schedule_fields`` are ``nextRunTime`` and, for a tick, ``lastScheduleTime``.
    """
    run = decision.run
    return Patch(
        {
            "run": run, "phase": "Pending", "observedGeneration": generation,
            "job": None, "progress": None, "currentPoint": None, "points": [], "knee": None,
            "maxUnderSLO": None, "summaryCSV": None, "queuedBehind": None,
            "startedTime": None, "message": decision.message or f"run {run} starting",
            "resultsConfigMap": run_name(name, run),
            "specHash": measured_hash(spec), **schedule_fields,
        },
        [
            condition("Running", False, "Pending", f"run {run} is being prepared", generation),
            condition("Succeeded", None, "Running", f"run {run} has not finished", generation),
        ],
    )


def replaced_patch(
    name: str, status: BenchmarkStatus, spec: Mapping[str, Any], run: int, by: str,
    at: datetime,
) -> tuple[Patch, str]:
    """``concurrencyPolicy: Replace``: run ``run`` goes into the history as Failed, and why
    (``by``: :attr:`Cause.replacing`)."""
    why = f"replaced by {by} (concurrencyPolicy Replace)"
    entry = history_entry(
        run, "Failed", None, started=status.started_time, finished=rfc3339(at), valid=None,
        config_map=run_name(name, run), message=f"run {run}: {why}",
    )
    history, _ = with_history([dump(h) for h in status.history], entry, history_limit(spec))
    return Patch({"history": history}), why


def tick_handled(status: BenchmarkStatus, latest: datetime) -> bool:
    """Whether tick ``latest`` was handled since the event that woke the timer was read."""
    fresh = status.last_schedule_time
    return bool(fresh) and parse_time(str(fresh)) >= latest


def missed_tick_patch(spec: Mapping[str, Any], latest: datetime) -> Patch:
    """A tick older than ``startingDeadlineSeconds``: recorded as handled, not run."""
    msg = (f"schedule tick {rfc3339(latest)} missed by more than "
           f"startingDeadlineSeconds ({spec.get('startingDeadlineSeconds')}); not run")
    return Patch({"lastScheduleTime": rfc3339(latest), "message": msg,
                  **next_run_fields(spec, latest)})


async def reconcile(
    op: Operator, namespace: str, name: str, tick: datetime | None = None,
    cause: Cause | None = None,
) -> None:
    """Brings the benchmark's current run into existence (see :func:`decide`).

    A benchmark that must wait (target not ready, endpoint busy) is left ``Pending`` or
    ``Queued``; :func:`retry` tries it again with backoff, or when its queue is woken.
    ``tick`` is a schedule tick that is due (:func:`schedule_tick`), ``cause`` another reason
    for a run (the target changed: :func:`~.resync.check_target`): either starts a new run
    of an unchanged spec, or, with a run in progress, is skipped (``concurrencyPolicy:
    Forbid``) or replaces it (``Replace``).
    """
    async with op.locked(namespace, name) as body:
        if body is None:
            op.forget(namespace, name)
            return
        at = op.clock.now()
        meta = body["metadata"]
        spec = body.get("spec") or {}
        generation = int(meta.get("generation") or 1)
        status = status_of(body)
        d = decide(meta, status)
        if tick is not None:
            cause = tick_cause(spec, tick)
        if cause is not None:
            what = tick_decision(d.action, spec.get("concurrencyPolicy"))
            if what == "skip":
                msg = cause.skipped.format(run=d.run)
                if cause.skip_fields or status.message != msg:
                    await write_status(op, body, Patch({**cause.skip_fields, "message": msg}), at)
                    await post_event(op, body, cause.skip_event, msg)
                return
            if what == "replace":
                await replace_run(op, body, d.run, cause.replacing, at)
            d = Decision("start", (status.run or 0) + 1, cause.start)
        elif d.action == "start" and only_schedule_changed(status, spec):
            patch = Patch({"observedGeneration": generation, **next_run_fields(spec, at)})
            await write_status(op, body, patch, at)
            return
        if d.action == "done":
            return
        if d.action == "wait":
            if status.message != d.message:
                await write_status(op, body, Patch({"message": d.message}), at)
            return
        if d.action == "start":
            fields = {**next_run_fields(spec, at), **(cause.fields if cause else {})}
            patch = start_patch(name, d, generation, spec, fields)
            await write_status(op, body, patch, at)
            await post_event(
                op, body, "RunStarting", f"run {d.run} starting ({d.message or 'new benchmark'})"
            )
            body = await op.kube.get_benchmark(namespace, name)
        elif status.job is None and status.observed_generation != generation:
            await write_status(op, body, Patch({"observedGeneration": generation}), at)
            body = await op.kube.get_benchmark(namespace, name)
        run = status_of(body).run or d.run
        outcome = await ensure_run(op, body, run, generation, at)
        if outcome == "created":
            op.forget(namespace, name)
        elif outcome == "target":
            op.queues.leave((namespace, name))
            op.back_off(namespace, name, asyncio.get_running_loop().time())
        # "queued": acquire_lease put it in the Lease's queue; it makes no API call until the
        # queue is woken (the Lease released, its holder deleted, expired: see .lease)


async def replace_run(
    op: Operator, body: Mapping[str, Any], run: int, by: str, at: datetime
) -> None:
    """``concurrencyPolicy: Replace``: the run in progress ends as Failed (its Job deleted,
    what it measured kept in its ConfigMap) so that the new run (``by``) can start."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    await op.kube.delete("Job", namespace, run_name(name, run))
    patch, why = replaced_patch(name, status_of(body), body.get("spec") or {}, run, by, at)
    await write_status(op, body, patch, at)
    await post_event(op, body, "RunReplaced", f"run {run} {why}", warning=True)
    context = await read_context(op.kube, namespace, name, run)
    if context is not None:
        await release_lease(op, body, context.url)


async def schedule_tick(op: Operator, namespace: str, name: str, seen: Mapping[str, Any]) -> None:
    """Runs the latest due tick of a scheduled benchmark (at most one catch-up after an
    outage; none when it is older than ``startingDeadlineSeconds``). Makes no API call until
    a tick is due: ``seen`` is the timer's copy of the benchmark."""
    spec = seen.get("spec") or {}
    last = status_of(seen).last_schedule_time or (seen.get("metadata") or {}).get(
        "creationTimestamp"
    )
    if not last:
        return
    at = op.clock.now()
    try:
        run_tick, latest = due_tick(
            str(spec["schedule"]), spec.get("timeZone"), parse_time(str(last)),
            at, spec.get("startingDeadlineSeconds"),
        )
    except ScheduleError:  # never fires: Accepted=False says so; nothing to tick
        return
    if latest is None:
        return
    async with op.lock(namespace, name):  # the tick may have been handled since `seen`
        body = await op.kube.get_benchmark(namespace, name)
        if tick_handled(status_of(body), latest):
            return
        if run_tick is None:
            patch = missed_tick_patch(body.get("spec") or {}, latest)
            await write_status(op, body, patch, at)
            await post_event(op, body, "TickMissed", patch.fields["message"], warning=True)
            return
    await reconcile(op, namespace, name, tick=run_tick)


async def retry(op: Operator, namespace: str, name: str) -> None:
    """A waiting benchmark tries again when it is due (:meth:`~.state.Operator.due`): its
    target's backoff is over (a reference may have been created), or its queue was woken
    (the Lease released, its holder deleted, the Lease expired). A try that raises (the API
    server unreachable, say) backs off too, rather than trying again every tick."""
    now = asyncio.get_running_loop().time()
    if not op.due(namespace, name, now):
        return
    try:
        await reconcile(op, namespace, name)
    except Exception:
        op.back_off(namespace, name, now)
        raise
