"""The operator's one periodic task: schedule ticks, waiting benchmarks, and the resync.

Why one operator-level task and not kopf timers: a kopf timer (or daemon) on a resource makes
kopf put its finalizer on every object it applies to, so with the operator uninstalled
deleting a scheduled or waiting benchmark, or its namespace, hangs for ever. The benchmark
watch (``kopf.on.event``, which adds no finalizer) keeps a small copy of each benchmark in
:attr:`Operator.benchmarks <llmbench.operator.state.Operator.benchmarks>`; once a second
:func:`step` hands the scheduled ones to :func:`~.reconcile.schedule_tick` and the waiting
ones to :func:`~.reconcile.retry` (neither makes an API call until a tick or a backoff is
due, or, for a queued one, until its queue is woken: :class:`~.state.Queues`), looks at the
Leases benchmarks are queued behind when that is due (:func:`~.lease.check_queue`), and
every ``--resync-interval`` seconds hands each Running one to :func:`~.resync.check_run`.
Started by the startup handler, cancelled by the cleanup one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from llmbench.operator.lease import check_queue
from llmbench.operator.reconcile import retry, schedule_tick
from llmbench.operator.resync import check_run, check_target
from llmbench.operator.state import Operator

__all__ = ["FIRST_RESYNC", "TICK", "due_work", "in_turn", "run", "step"]

#: Seconds between two looks at the scheduled and waiting benchmarks.
TICK = 1.0
#: Seconds from the start to the first resync.
FIRST_RESYNC = 5.0

log = logging.getLogger("llmbench.operator")


def due_work(seen: Mapping[str, Any], resync: bool) -> tuple[str, ...]:
    """What the loop does for one benchmark (its :func:`~.state.seen` copy): ``tick`` (it is
    scheduled and not suspended), ``retry`` (it waits: ``Pending`` or ``Queued``), and, on a
    resync, ``check`` (it is ``Running``) and ``target`` (``spec.trigger.onTargetChange``,
    not suspended: has the target changed since the last run?)."""
    spec = seen.get("spec") or {}
    phase = (seen.get("status") or {}).get("phase")
    out: list[str] = []
    if spec.get("schedule") and not spec.get("suspend"):
        out.append("tick")
    if phase in ("Pending", "Queued"):
        out.append("retry")
    if resync and phase == "Running":
        out.append("check")
    if resync and (spec.get("trigger") or {}).get("onTargetChange") and not spec.get("suspend"):
        out.append("target")
    return tuple(out)


async def step(op: Operator, resync: bool) -> None:
    """One pass over the benchmarks the watch has seen; one's failure is logged and does not
    stop the others (it is tried again later). Waiting benchmarks woken on one Lease try in
    turn, first queued first (:meth:`~.state.Queues.turns`), so the first takes the Lease
    and the others queue behind it; the Leases whose look is due are looked at
    (:func:`~.lease.check_queue`: one request per Lease, however long its queue)."""
    calls: list[tuple[str, Awaitable[None]]] = []
    waiting: list[tuple[str, str]] = []
    for (namespace, name), seen in list(op.benchmarks.items()):
        what = f"benchmark {namespace}/{name}"
        for work in due_work(seen, resync):
            if work == "tick":
                calls.append((what, schedule_tick(op, namespace, name, seen)))
            elif work == "retry":
                waiting.append((namespace, name))
            elif work == "target":
                calls.append((what, check_target(op, namespace, name)))
            else:
                calls.append((what, check_run(op, namespace, name)))
    for turn in op.queues.turns(waiting):
        calls.append((f"benchmark {'/'.join(turn[0])}", in_turn(op, turn)))
    for lease, holder in op.queues.checks_due(asyncio.get_running_loop().time()):
        calls.append((f"Lease {'/'.join(lease)}", check_queue(op, lease, holder)))
    results = await asyncio.gather(*(c for _, c in calls), return_exceptions=True)
    for (what, _), result in zip(calls, results, strict=True):
        if isinstance(result, Exception):
            log.warning("%s: %s (tried again in a moment)", what, result)


async def in_turn(op: Operator, turn: list[tuple[str, str]]) -> None:
    """:func:`~.reconcile.retry` for each benchmark of ``turn``, one after another (a
    failure is logged and the next one goes on)."""
    for namespace, name in turn:
        try:
            await retry(op, namespace, name)
        except Exception as exc:  # noqa: BLE001 - one benchmark's failure stops no other
            log.warning("benchmark %s/%s: %s (tried again in a moment)", namespace, name, exc)


async def run(op: Operator) -> None:
    """The loop, until cancelled: a pass every :data:`TICK` seconds, a resync pass every
    ``--resync-interval`` seconds (the first one :data:`FIRST_RESYNC` seconds after start,
    once the watch has listed the benchmarks, so a restarted operator soon renews its runs'
    Leases and notices what died while it was away)."""
    loop = asyncio.get_running_loop()
    next_resync = loop.time() + min(FIRST_RESYNC, op.config.resync_interval)
    while True:
        now = loop.time()
        resync = now >= next_resync
        if resync:
            next_resync = now + op.config.resync_interval
        await step(op, resync)
        await asyncio.sleep(TICK)
