"""One active operator: Lease-based leader election, with client-go's semantics.

Why: two operators (a second install, a replacement pod while the old one still runs on a
lost node) would both create Jobs, take Leases and write status. As in client-go's
``leaderelection``, the candidates share one ``coordination.k8s.io`` Lease with
``holderIdentity``, ``leaseDurationSeconds`` and ``renewTime``: the holder renews it every
:attr:`Election.retry_period` seconds; a standby takes it over only once it has not been
renewed for a whole :attr:`Election.duration`; a leader that could not renew it for
:attr:`Election.renew_deadline` (shorter than the duration) stops at once, so it never acts
after another may have taken over.

A standby waits before kopf starts (:func:`stand_by`, called by ``llmbench operator``), so
no watch and no handler runs until it leads; it answers the liveness endpoint meanwhile
(kopf serves it only once its startup handlers finished), so the standby pod stays alive
and Ready. The leader's renewals run in kopf (:func:`keep`, from the startup handler).
Whether a Lease may be taken is :func:`election_verdict`, a pure function.
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import os
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from llmbench.operator.kube import Kube, NotFound
from llmbench.operator.lease import lease_expired, lease_time
from llmbench.operator.state import OperatorConfig

__all__ = ["IDENTITY", "Election", "election_verdict", "exit_now", "identity", "keep", "lead",
           "of", "release", "stand_by", "try_lead"]

log = logging.getLogger("llmbench.operator")

Verdict = Literal["mine", "held", "free"]


@dataclass(frozen=True)
class Election:
    """Where the operators' Lease is and who this operator is; client-go's default timings."""

    namespace: str
    name: str
    identity: str
    #: Seconds a Lease not renewed stays its holder's (``leaseDurationSeconds``).
    duration: int = 15
    #: Seconds a leader goes on without a renewal before it stops.
    renew_deadline: float = 10.0
    #: Seconds between two renewals, and between two tries of a standby.
    retry_period: float = 2.0


def identity() -> str:
    """This operator's ``holderIdentity``: its pod's name and a random suffix (a restarted
    container is a new candidate, never mistaken for the old leader)."""
    return f"{os.environ.get('HOSTNAME') or 'llmbench-operator'}_{uuid.uuid4().hex[:8]}"


#: This process's identity (one process, one candidate).
IDENTITY = identity()


def of(config: OperatorConfig) -> Election | None:
    """The election ``--leader-election-namespace`` asks for, or None (no election)."""
    namespace = config.leader_namespace
    return Election(namespace, config.leader_name, IDENTITY) if namespace else None


def election_verdict(spec: Mapping[str, Any], me: str, at: datetime) -> Verdict:
    """What the operators' Lease means for candidate ``me`` at ``at``: ``mine`` (renew it),
    ``free`` (nobody holds it, or its holder has not renewed it for a whole duration: take
    it over) or ``held`` (another operator leads: stand by)."""
    holder = spec.get("holderIdentity")
    if holder == me:
        return "mine"
    if not holder or lease_expired(spec, at):
        return "free"
    return "held"


def _now() -> datetime:
    """Wall-clock time (never the operator's test clock: Lease times are compared across
    processes)."""
    return datetime.now(UTC)


async def try_lead(kube: Kube, election: Election) -> bool:
    """One attempt: creates, renews or takes over the Lease; whether this operator leads."""
    at = lease_time(_now())
    spec = {"holderIdentity": election.identity, "leaseDurationSeconds": election.duration,
            "acquireTime": at, "renewTime": at}
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": election.name, "namespace": election.namespace},
             "spec": spec}
    try:  # read first: a renewal is a get and a patch, no create answered 409
        existing = await kube.get_lease(election.namespace, election.name)
    except NotFound:
        return await kube.create(lease)
    current = existing.get("spec") or {}
    verdict = election_verdict(current, election.identity, _now())
    if verdict == "held":
        return False
    if verdict == "mine":
        patch: dict[str, Any] = {"renewTime": at}
    else:
        patch = {**spec, "leaseTransitions": int(current.get("leaseTransitions") or 0) + 1}
        log.info("taking over the operators' Lease %s/%s from %r", election.namespace,
                 election.name, current.get("holderIdentity"))
    version = existing["metadata"]["resourceVersion"]
    return await kube.patch_lease(election.namespace, election.name, version, patch)


async def lead(kube: Kube, election: Election) -> None:
    """Waits until this operator leads (a standby tries every ``retry_period`` seconds)."""
    waiting = False
    while True:
        try:
            if await try_lead(kube, election):
                log.info("leading as %s (Lease %s/%s)", election.identity, election.namespace,
                         election.name)
                return
        except Exception as exc:  # the API server is unreachable: keep trying
            log.warning("leader election: %s", exc)
        if not waiting:
            log.info("standing by: another operator holds the Lease %s/%s", election.namespace,
                     election.name)
            waiting = True
        await asyncio.sleep(election.retry_period)


async def keep(kube: Kube, election: Election, stop: Callable[[], None]) -> None:
    """Renews the Lease every ``retry_period`` seconds while leading; calls ``stop`` (which
    must end the process) once no renewal succeeded for ``renew_deadline`` seconds or
    another operator holds the Lease."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    first = True
    while True:
        if not first:
            await asyncio.sleep(election.retry_period)
        first = False
        try:
            ok = await try_lead(kube, election)
        except Exception as exc:
            log.warning("leader election: renewing failed: %s", exc)
            ok = False
        if ok:
            last = loop.time()
            continue
        lost = await _lost(kube, election)
        if lost or loop.time() - last >= election.renew_deadline:
            log.error("lost the operators' Lease %s/%s: stopping", election.namespace,
                      election.name)
            stop()
            return


async def _lost(kube: Kube, election: Election) -> bool:
    """Whether another operator holds the Lease now."""
    try:
        lease = await kube.get_lease(election.namespace, election.name)
    except Exception:
        return False
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return bool(holder) and holder != election.identity


async def release(kube: Kube, election: Election) -> None:
    """Gives the Lease up on a clean stop (client-go's ``ReleaseOnCancel``), so a standby takes
    over at its next try instead of after a whole duration."""
    try:
        lease = await kube.get_lease(election.namespace, election.name)
        if (lease.get("spec") or {}).get("holderIdentity") == election.identity:
            await kube.patch_lease(election.namespace, election.name,
                                   lease["metadata"]["resourceVersion"],
                                   {"holderIdentity": None, "renewTime": None})
    except Exception as exc:  # it expires by itself
        log.warning("leader election: releasing the Lease failed: %s", exc)


def exit_now() -> None:
    """Ends the process at once (a leader that lost its Lease must not act another moment);
    the pod's container restarts as a standby."""
    logging.shutdown()
    os._exit(1)


class _Healthy(http.server.BaseHTTPRequestHandler):
    """A standby's liveness answer: the process runs (it leads nothing yet)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b'{"standby": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """One line per probe would drown the log."""


def stand_by(kube: Kube, election: Election, liveness: str | None) -> None:
    """Blocks until this operator leads, serving ``liveness`` (kopf's endpoint URL, e.g.
    ``http://0.0.0.0:8080/healthz``) meanwhile; kopf takes the port over after."""
    server = None
    if liveness:
        where = urllib.parse.urlsplit(liveness)
        server = http.server.ThreadingHTTPServer((where.hostname or "0.0.0.0", where.port or 80),
                                                 _Healthy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        asyncio.run(lead(kube, election))
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
