"""The per-endpoint Lease: one benchmark at a time measures one target.

A benchmark takes the Lease of its resolved URL before its runner Job exists and releases it
when the run ends (:mod:`.finish`) or is replaced (:mod:`.reconcile`). As in client-go's
leader election, the Lease has ``leaseDurationSeconds`` and ``renewTime``: while the run is
alive the resync (:mod:`.resync`) renews it, so a Lease nobody renewed for a whole duration
(its holder's run died in a way nobody saw, its release was lost) is taken over by the next
queued benchmark. Whether an existing Lease blocks a benchmark is :func:`lease_verdict`, a
pure function; the API calls are :func:`acquire_lease`, :func:`renew_lease` and
:func:`release_lease`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from llmbench.operator.build import holder_identity, lease_name, target_lease
from llmbench.operator.kube import NotFound
from llmbench.operator.schedule import parse_time
from llmbench.operator.state import Operator
from llmbench.operator.status import status_of

__all__ = [
    "acquire_lease", "lease_expired", "lease_time", "lease_verdict", "release_lease",
    "renew_lease",
]

Verdict = Literal["ours", "held", "stale"]


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


async def acquire_lease(
    op: Operator, body: Mapping[str, Any], target_key: str, at: datetime
) -> str | None:
    """Takes the endpoint's Lease; returns the holder when another benchmark has it."""
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
    """Frees the endpoint for the next queued benchmark (only if this benchmark holds it)."""
    await op.kube.delete_lease(
        body["metadata"]["namespace"], lease_name(target_key), holder_identity(body)
    )
