"""Reconcile: from the resource to its current run (start, ensure, schedule ticks, retries)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from llmbench.api.job import run_name
from llmbench.operator.ensure import ensure_run
from llmbench.operator.kube import NotFound
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
from llmbench.operator.state import CONFIG, kube, lock
from llmbench.operator.status import Decision, condition, decide, history_entry, now, with_history
from llmbench.operator.write import post_event, write_status

__all__ = ["reconcile", "replace_run", "retry", "schedule_tick"]


#: When a waiting benchmark may try again (monotonic seconds), and how often it has tried.
_BACKOFF: dict[tuple[str, str], tuple[float, int]] = {}


def _back_off(namespace: str, name: str) -> None:
    """Doubles the wait before the next attempt, from the retry delay up to ten times it."""
    _, tries = _BACKOFF.get((namespace, name), (0.0, 0))
    delay = min(CONFIG.retry_delay * 2**tries, CONFIG.retry_delay * 10)
    _BACKOFF[(namespace, name)] = (asyncio.get_running_loop().time() + delay, tries + 1)


def _due(namespace: str, name: str) -> bool:
    until, _ = _BACKOFF.get((namespace, name), (0.0, 0))
    return asyncio.get_running_loop().time() >= until


async def reconcile(
    namespace: str, name: str, tick: datetime | None = None
) -> None:
    """Brings the benchmark's current run into existence (see :func:`decide`).

    A benchmark that must wait (target not ready, endpoint busy) is left ``Pending`` or
    ``Queued``; :func:`retry_waiting` tries it again with backoff. ``tick`` is a schedule tick
    that is due (:func:`on_schedule`): it starts a new run of an unchanged spec, or, with a run
    in progress, is skipped (``concurrencyPolicy: Forbid``) or replaces it (``Replace``).
    """
    k = kube()
    async with lock(namespace, name):
        try:
            body = await k.get_benchmark(namespace, name)
        except NotFound:
            _BACKOFF.pop((namespace, name), None)
            return
        meta = body["metadata"]
        spec = body.get("spec") or {}
        generation = int(meta.get("generation") or 1)
        status = body.get("status") or {}
        d = decide(meta, status)
        sched: dict[str, Any] = {}
        if tick is not None:
            sched = {"lastScheduleTime": rfc3339(tick), **next_run_fields(spec, tick)}
            if d.action in ("ensure", "wait") and spec.get("concurrencyPolicy") != "Replace":
                msg = (f"schedule tick {rfc3339(tick)} skipped: run {d.run} is still in progress "
                       "(concurrencyPolicy Forbid)")
                await write_status(namespace, name, {**sched, "message": msg}, body=body)
                post_event(body, "TickSkipped", msg)
                return
            if d.action in ("ensure", "wait"):
                await replace_run(body, d.run, tick)
            d = Decision("start", int(status.get("run") or 0) + 1,
                         f"scheduled run (tick {rfc3339(tick)})")
        elif (
            d.action == "start"
            and status.get("run")
            and status.get("specHash") == measured_hash(spec)
        ):
            # Only when or how often it runs changed (schedule, suspend, history): no run.
            await write_status(
                namespace, name,
                {"observedGeneration": generation, **next_run_fields(spec, CONFIG.clock.now())},
                body=body,
            )
            return
        if d.action == "done":
            return
        if d.action == "wait":
            if status.get("message") != d.message:
                await write_status(namespace, name, {"message": d.message}, body=body)
            return
        if d.action == "start":
            if not sched:
                sched = next_run_fields(spec, CONFIG.clock.now())
            await write_status(
                namespace, name,
                {
                    "run": d.run, "phase": "Pending", "observedGeneration": generation,
                    "job": None, "progress": None, "points": [], "knee": None,
                    "maxUnderSLO": None, "summaryCSV": None, "queuedBehind": None,
                    "startedTime": None, "message": d.message or f"run {d.run} starting",
                    "resultsConfigMap": run_name(name, d.run),
                    "specHash": measured_hash(spec), **sched,
                },
                [
                    condition("Running", False, "Pending", f"run {d.run} is being prepared",
                              generation),
                    condition("Succeeded", None, "Running", f"run {d.run} has not finished",
                              generation),
                ],
                body=body,
            )
            post_event(
                body, "RunStarting", f"run {d.run} starting ({d.message or 'new benchmark'})"
            )
            body = await k.get_benchmark(namespace, name)
        elif status.get("job") is None and status.get("observedGeneration") != generation:
            await write_status(namespace, name, {"observedGeneration": generation}, body=body)
            body = await k.get_benchmark(namespace, name)
        run = int((body.get("status") or {}).get("run") or d.run)
        outcome = await ensure_run(body, run, generation)
        if outcome == "created":
            _BACKOFF.pop((namespace, name), None)
        elif outcome == "target":
            _back_off(namespace, name)
        # "queued": try again at the next tick, so the Lease is taken soon after its release


async def replace_run(body: Mapping[str, Any], run: int, tick: datetime) -> None:
    """``concurrencyPolicy: Replace``: the run in progress ends as Failed (its Job deleted,
    what it measured kept in its ConfigMap) so that the tick's run can start."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = body.get("status") or {}
    await kube().delete("Job", namespace, run_name(name, run))
    why = f"replaced by the scheduled run of {rfc3339(tick)} (concurrencyPolicy Replace)"
    entry = history_entry(
        run, "Failed", None, started=status.get("startedTime"), finished=now(), valid=None,
        config_map=run_name(name, run), message=f"run {run}: {why}",
    )
    limit = int((body.get("spec") or {}).get("historyLimit") or 30)
    history, _ = with_history(status.get("history") or [], entry, limit)
    await write_status(namespace, name, {"history": history}, body=body)
    post_event(body, "RunReplaced", f"run {run} {why}", warning=True)
    context = await read_context(namespace, name, run)
    if context is not None:
        await release_lease(body, context.url)


async def schedule_tick(
    namespace: str | None, name: str, spec: Mapping[str, Any], status: Mapping[str, Any],
    meta: Mapping[str, Any],
) -> None:
    """Runs the latest due tick of a scheduled benchmark (at most one catch-up after an
    outage; none when it is older than ``startingDeadlineSeconds``). Only scheduled,
    unsuspended benchmarks have this timer, and it makes no API call until a tick is due."""
    ns = namespace or "default"
    last = status.get("lastScheduleTime") or meta.get("creationTimestamp")
    if not last:
        return
    try:
        run_tick, latest = due_tick(
            str(spec["schedule"]), spec.get("timeZone"), parse_time(str(last)),
            CONFIG.clock.now(), spec.get("startingDeadlineSeconds"),
        )
    except ScheduleError:  # never fires: Accepted=False says so; nothing to tick
        return
    if latest is None:
        return
    async with lock(ns, name):  # the tick may have been handled since this body was read
        body = await kube().get_benchmark(ns, name)
        fresh = (body.get("status") or {}).get("lastScheduleTime")
        if fresh and parse_time(str(fresh)) >= latest:
            return
        if run_tick is None:
            msg = (f"schedule tick {rfc3339(latest)} missed by more than "
                   f"startingDeadlineSeconds ({spec.get('startingDeadlineSeconds')}); not run")
            await write_status(ns, name, {"lastScheduleTime": rfc3339(latest), "message": msg,
                                          **next_run_fields(body.get("spec") or {}, latest)},
                               body=body)
            post_event(body, "TickMissed", msg, warning=True)
            return
    await reconcile(ns, name, tick=run_tick)


async def retry(namespace: str | None, name: str) -> None:
    """A waiting benchmark tries again when its backoff is due: a reference was created, the
    Lease was released or its holder deleted. Only waiting benchmarks have this timer, so its
    cost does not grow with finished ones."""
    ns = namespace or "default"
    if _due(ns, name):
        await reconcile(ns, name)

