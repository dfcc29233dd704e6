"""The per-endpoint Lease: one benchmark at a time measures one target.

A benchmark takes the Lease of its resolved URL before its runner Job exists and releases it
when the run ends (:mod:`.finish`) or is replaced (:mod:`.reconcile`). As in client-go's
leader election, the Lease has ``leaseDurationSeconds`` and ``renewTime``: while the run is
alive the resync (:mod:`.resync`) renews it, so a Lease nobody renewed for a whole duration
(its holder's run died in a way nobody saw, its release was lost) is taken over by the next
queued benchmark. Whether an existing Lease blocks a benchmark is :func:`lease_verdict`, a
pure function; the API calls are :func:`acquire_lease`, :func:`renew_lease` and
:func:`release_lease`.

A benchmark the Lease blocks is ``Queued`` and waits in memory (:class:`~.state.Queues`)
without polling: :func:`release_lease` wakes its queue, and so does the deletion of the holder;
otherwise :func:`check_queue` looks at the Lease once per Lease (not once per queued benchmark)
when it can have expired or at the resync interval (:func:`next_check_in`), and wakes the
queue when :func:`queue_check` says the Lease no longer holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from llmbench.operator.build import holder_identity, lease_name, target_lease
from llmbench.operator.kube import NotFound
from llmbench.operator.schedule import parse_time
from llmbench.operator.state import LeaseKey, Operator
from llmbench.operator.status import status_of

__all__ = [
    "acquire_lease", "check_queue", "lease_expired", "lease_time", "lease_verdict",
    "next_check_in", "queue_check", "release_lease", "renew_lease",
]

Verdict = Literal["ours", "held", "stale"]
#: Seconds after a Lease's expiry before its queue looks (:func:`lease_expired` is strict).
_EXPIRY_MARGIN = 1.0


def lease_time(at: datetime) -> str:
    """A Lease's ``MicroTime`` (``2026-12-01T02:00:00.123456Z``)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_expired(spec: Mapping[str, Any], at: datetime) -> bool:
    """Whether a Lease's ``renewTime`` (else ``acquireTime``) is more than its
    ``leaseDurationSeconds`` before ``at``. A Lease without a duration (taken by an operator
    older than renewal) never expires: its holder's phase alone decides."""
    duration = spec.get("leaseDurationSeconds")
    last = spec.get("renewTime") or spec.get("acquireTime")
    if not duration or not last:
        return False
    return (at - parse_time(str(last))).total_seconds() > float(duration)


def lease_verdict(
    holder: str, me: str, holder_body: Mapping[str, Any] | None, expired: bool = False
) -> Verdict:
    """What an existing Lease held by ``holder`` means for benchmark ``me``: ``ours`` (taken
    by an earlier attempt of this benchmark), ``held`` (another benchmark is running or
    waiting to run on it: queue behind it) or ``stale``: take it over. Stale: its holder is
    gone (``holder_body`` None) or has finished (the release was lost, e.g. the operator
    stopped between the end of a run and the release), or nobody renewed it for a whole
    lease duration (``expired``: its holder's run is not alive)."""
    if holder == me:
        return "ours"
    if expired:
        return "stale"
    if holder_body is not None and status_of(holder_body).phase not in ("Succeeded", "Failed"):
        return "held"
    return "stale"


def next_check_in(
    spec: Mapping[str, Any], at: datetime, resync_interval: float, not_before: float = 0.0
) -> float:
    """Seconds from ``at`` until a queue looks at its Lease (``spec``) again: just after the
    Lease can have expired (its ``renewTime``, else ``acquireTime``, plus
    ``leaseDurationSeconds``; not before ``not_before`` seconds, when this operator may count
    an expiry at all) or after ``resync_interval`` (a release nobody saw), whichever is first;
    at least a second.

    Example: a Lease renewed 100 s ago with a 120 s duration is looked at in 21 s with a
    30 s resync, a fresh one in 30 s.
    """
    duration = spec.get("leaseDurationSeconds")
    last = spec.get("renewTime") or spec.get("acquireTime")
    if not duration or not last:
        return max(1.0, resync_interval)
    expires_in = float(duration) - (at - parse_time(str(last))).total_seconds() + _EXPIRY_MARGIN
    return max(1.0, min(resync_interval, max(expires_in, not_before)))


def queue_check(
    spec: Mapping[str, Any] | None, holder: str, holder_body: Mapping[str, Any] | None,
    expired: bool,
) -> Literal["wake", "wait"]:
    """Whether the benchmarks queued behind ``holder`` try again now (``wake``): the Lease
    (``spec``) is gone or has another holder, or it is stale (:func:`lease_verdict`: the
    holder, ``holder_body`` as the watch last saw it, is gone or finished, or the Lease
    ``expired``). Else they go on waiting without an API call."""
    if spec is None or spec.get("holderIdentity") != holder:
        return "wake"
    return "wake" if lease_verdict(holder, "", holder_body, expired) == "stale" else "wait"


async def check_queue(op: Operator, lease: LeaseKey, holder: str) -> None:
    """One look at a Lease that benchmarks are queued behind (one GET, however long the
    queue): wakes the queue (:func:`queue_check`) or sets the next look
    (:func:`next_check_in`)."""
    namespace, name = lease
    try:
        spec: Mapping[str, Any] | None = (await op.kube.get_lease(namespace, name)).get(
            "spec") or {}
    except NotFound:
        spec = None
    holder_ns, _, holder_name = holder.partition("/")
    now = datetime.now(UTC)
    not_before = op.config.lease_duration - op.uptime()
    expired = not_before <= 0 and spec is not None and lease_expired(spec, now)
    if queue_check(spec, holder, op.benchmarks.get((holder_ns, holder_name)), expired) == "wake":
        op.queues.wake(lease)
        return
    wait = next_check_in(spec or {}, now, op.config.resync_interval, not_before)
    op.queues.checked(lease, asyncio.get_running_loop().time() + wait)


async def acquire_lease(
    op: Operator, body: Mapping[str, Any], target_key: str, at: datetime
) -> str | None:
    """Takes the endpoint's Lease; returns the holder when another benchmark has it, and
    queues the benchmark behind it (:meth:`~.state.Operator.queue_behind`)."""
    lease = target_lease(body, target_key, lease_time(at))
    # renewTime and expiry are wall-clock times (never the operator's test clock): they are
    # compared with what other operators wrote
    lease["spec"].update(leaseDurationSeconds=op.config.lease_duration,
                         renewTime=lease_time(datetime.now(UTC)))
    namespace, name = lease["metadata"]["namespace"], lease["metadata"]["name"]
    # An expired Lease counts only once this operator had a whole duration to renew it: right
    # after a restart, a live run's Lease may be old only because no operator ran.
    may_expire = op.uptime() >= op.config.lease_duration
    me = holder_identity(body)
    for _ in range(3):
        if await op.kube.create(lease):
            return None
        try:
            existing = await op.kube.get_lease(namespace, name)
        except NotFound:
            continue
        holder = (existing.get("spec") or {}).get("holderIdentity") or ""
        other: Mapping[str, Any] | None = None
        if holder != me:
            other_ns, _, other_name = holder.partition("/")
            try:
                other = await op.kube.get_benchmark(other_ns, other_name)
            except NotFound:
                other = None
        expired = may_expire and lease_expired(existing.get("spec") or {}, datetime.now(UTC))
        verdict = lease_verdict(holder, me, other, expired)
        if verdict == "ours":
            return None
        if verdict == "held":
            now = asyncio.get_running_loop().time()
            wait = next_check_in(existing.get("spec") or {}, datetime.now(UTC),
                                 op.config.resync_interval,
                                 op.config.lease_duration - op.uptime())
            op.queue_behind(body["metadata"]["namespace"], body["metadata"]["name"],
                            (namespace, name), holder, now, now + wait)
            return holder
        await op.kube.delete_lease(namespace, name, holder)
    return None


async def renew_lease(op: Operator, body: Mapping[str, Any], target_key: str) -> bool:
    """Renews the endpoint's Lease for a live run (only if this benchmark holds it)."""
    return await op.kube.renew_lease(
        body["metadata"]["namespace"], lease_name(target_key), holder_identity(body),
        lease_time(datetime.now(UTC)),
    )


async def release_lease(op: Operator, body: Mapping[str, Any], target_key: str) -> None:
    """Frees the endpoint for the next queued benchmark (only if this benchmark holds it),
    and wakes the benchmarks queued on it: they try again at the next tick, in turn."""
    namespace, name = body["metadata"]["namespace"], lease_name(target_key)
    await op.kube.delete_lease(namespace, name, holder_identity(body))
    op.queues.wake((namespace, name))
