"""The operator's process state: one :class:`Operator` object kept in kopf's ``memo``.

Why one object, and why in the memo: every handler needs the same few things (the flags the
operator was started with, the API client, a lock per benchmark, the clock, who is backing
off), and module globals mutated from the command line make each handler depend on import
order and on a process-wide singleton no test can replace. ``llmbench operator`` hands its
:class:`OperatorConfig` to ``kopf.run(memo=...)``; the startup handler turns it into the
:class:`Operator` (:func:`start`), and kopf gives every handler a shallow copy of that memo,
so all of them share the one object (:func:`of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from llmbench.api.spec.runner import RunnerPod
from llmbench.operator.admission import Guard
from llmbench.operator.build import DEFAULT_RUNNER_IMAGE, DEFAULT_RUNNER_POD
from llmbench.operator.kube import Kube, NotFound
from llmbench.operator.schedule import Clock

__all__ = ["CONFIG_KEY", "STATE_KEY", "LeaseKey", "Operator", "OperatorConfig", "Queues", "backoff",
           "connect", "of", "seen", "start"]

#: A benchmark: (namespace, name).
Key = tuple[str, str]
#: An endpoint Lease: (namespace, name).
LeaseKey = tuple[str, str]

#: The memo key ``llmbench operator`` puts its :class:`OperatorConfig` under.
CONFIG_KEY = "config"
#: The memo key of the :class:`Operator` the startup handler builds.
STATE_KEY = "operator"


@dataclass(frozen=True)
class OperatorConfig:
    """What ``llmbench operator`` was started with (its flags)."""

    runner_image: str = DEFAULT_RUNNER_IMAGE
    #: The runner pods' defaults (``--runner-pod-defaults``: the chart's ``runner.*`` values),
    #: under each benchmark's ``spec.runner`` (:func:`~llmbench.operator.build.pod_settings`).
    runner_pod: RunnerPod = field(default_factory=lambda: DEFAULT_RUNNER_POD)
    #: The watched namespaces (empty: every namespace).
    namespaces: tuple[str, ...] = ()
    #: A namespaced operator's dcgm-exporter namespaces (``--exporter-namespace``).
    exporter_namespaces: tuple[str, ...] = ()
    #: First wait (s) before a benchmark whose target is not ready tries again.
    retry_delay: float = 3.0
    #: Seconds to shift "now" by, read from this file (tests move schedules instead of sleeping).
    clock_offset_file: str | None = None
    #: Admission: the policy that checks creators, allowed images, trusted namespaces.
    guard: Guard = field(default_factory=Guard)
    #: Seconds between two checks of every Running benchmark (:mod:`.resync`).
    resync_interval: float = 30.0
    #: Seconds a runner pod may stay unschedulable before its run fails.
    unschedulable_seconds: float = 600.0
    #: The namespace of the operators' leader-election Lease (None: no election, this
    #: operator acts at once) and its name (:mod:`.leader`).
    leader_namespace: str | None = None
    leader_name: str = "llmbench-operator"

    @property
    def lease_duration(self) -> int:
        """``leaseDurationSeconds`` of the endpoint Leases: four resyncs (each renews the
        Leases of the live runs), at least two minutes, so a lost renewal or two, or an
        operator restart, never lets a queued benchmark take a live run's endpoint."""
        return max(120, int(4 * self.resync_interval))


def backoff(retry_delay: float, tries: int) -> float:
    """Seconds a benchmark whose target is not ready waits after ``tries`` earlier waits: the
    retry delay, doubled each time, at most ten times it (3, 6, 12, 24, 30, 30, ... s).

    Example: ``backoff(3.0, 0) == 3.0`` and ``backoff(3.0, 5) == 30.0``.
    """
    return float(min(retry_delay * 2**tries, retry_delay * 10))


@dataclass
class _Waiter:
    lease: LeaseKey
    #: Monotonic time it first queued on this Lease: its place in the queue.
    since: float
    woken: bool = False


@dataclass
class _Watched:
    #: The holder the queue last saw (``<namespace>/<name>``).
    holder: str
    #: Monotonic time of the next look at the Lease (:func:`~.lease.check_queue`).
    check_at: float


@dataclass
class Queues:
    """The benchmarks ``Queued`` behind an endpoint Lease, in memory, and when each Lease is
    looked at next: a queued benchmark makes no API call until it is woken.

    Why: a queued benchmark that tried again every second cost a whole reconcile (the
    benchmark, its Service and pods, the Lease, its holder, a status patch) a second, so the
    operator's API traffic grew with the queue. Now the queue is woken (:meth:`wake`) when
    this operator releases the Lease or its holder is deleted; otherwise one look at the Lease
    per Lease (not per queued benchmark), when it can have expired or at the resync interval,
    says whether to wake it (:func:`~.lease.queue_check`). Woken benchmarks take their turns
    in the order they queued (:meth:`turns`): the first one takes the Lease, the others queue
    behind the new holder.

    Example::

        q = Queues()
        q.join(("llm", "b"), ("llm", "lease"), "llm/a", now=1.0, check_at=31.0)
        q.wake(("llm", "lease"))  # -> [("llm", "b")]
    """

    _waiters: dict[Key, _Waiter] = field(default_factory=dict)
    _leases: dict[LeaseKey, _Watched] = field(default_factory=dict)

    def join(self, key: Key, lease: LeaseKey, holder: str, now: float, check_at: float) -> None:
        """``key`` waits for ``lease``, held by ``holder``; the Lease is looked at again at
        ``check_at`` (monotonic). Queued again on the same Lease, it keeps its place."""
        old = self._waiters.get(key)
        since = old.since if old is not None and old.lease == lease else now
        if old is not None and old.lease != lease:
            self.leave(key)
        self._waiters[key] = _Waiter(lease, since)
        watched = self._leases.get(lease)
        if watched is None or watched.holder != holder:
            self._leases[lease] = _Watched(holder, check_at)
        else:
            watched.check_at = min(watched.check_at, check_at)

    def leave(self, key: Key) -> None:
        """``key`` no longer waits (it runs, it is gone, it waits for something else)."""
        waiter = self._waiters.pop(key, None)
        if waiter is not None and not any(w.lease == waiter.lease for w in self._waiters.values()):
            self._leases.pop(waiter.lease, None)

    def queued(self, key: Key) -> bool:
        """Whether ``key`` waits in a queue and was not woken: it makes no API call."""
        waiter = self._waiters.get(key)
        return waiter is not None and not waiter.woken

    def wake(self, lease: LeaseKey) -> list[Key]:
        """Wakes every benchmark queued on ``lease``; returns them in queue order."""
        order = self._queue(lease)
        for key in order:
            self._waiters[key].woken = True
        watched = self._leases.get(lease)
        if watched is not None:  # looked at again once the woken ones queue again
            watched.check_at = math.inf
        return order

    def wake_holder(self, holder: str) -> list[Key]:
        """Wakes the queues behind ``holder`` (``<namespace>/<name>``: it was deleted)."""
        leases = [lease for lease, w in self._leases.items() if w.holder == holder]
        return [key for lease in leases for key in self.wake(lease)]

    def turns(self, keys: list[Key]) -> list[list[Key]]:
        """``keys`` (benchmarks about to try again) grouped into turns: the woken ones of one
        Lease in one group, in queue order (they must try one after another, the first to
        queue first), every other one alone."""
        groups: dict[LeaseKey, list[Key]] = {}
        alone: list[list[Key]] = []
        for key in keys:
            waiter = self._waiters.get(key)
            if waiter is None:
                alone.append([key])
            else:
                groups.setdefault(waiter.lease, []).append(key)
        ordered = [sorted(g, key=lambda k: (self._waiters[k].since, k)) for g in groups.values()]
        return ordered + alone

    def checks_due(self, now: float) -> list[tuple[LeaseKey, str]]:
        """The Leases (and the holder their queue saw) to look at at monotonic time ``now``."""
        return [(lease, w.holder) for lease, w in self._leases.items() if now >= w.check_at]

    def checked(self, lease: LeaseKey, check_at: float) -> None:
        """The Lease was looked at and still holds its queue: the next look at ``check_at``."""
        watched = self._leases.get(lease)
        if watched is not None:
            watched.check_at = check_at

    def _queue(self, lease: LeaseKey) -> list[Key]:
        keys = [k for k, w in self._waiters.items() if w.lease == lease]
        return sorted(keys, key=lambda k: (self._waiters[k].since, k))


@dataclass
class Operator:
    """What every handler shares: the config, the API client, the clock, the locks, the waits.

    The clock is the one source of "now" for everything the operator writes (status times,
    the Lease's times, schedule ticks), read once per handler call, so one status patch never
    carries two clocks.
    """

    config: OperatorConfig
    kube: Kube
    clock: Clock
    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict, repr=False)
    #: (namespace, name) -> (monotonic time of the next attempt, waits so far).
    _waits: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict, repr=False)
    #: The benchmarks queued behind endpoint Leases (:class:`Queues`).
    queues: Queues = field(default_factory=Queues, repr=False)
    #: (namespace, name) -> what the operator-level loop needs of each benchmark (:func:`seen`),
    #: kept from the benchmark watch's events, so the loop makes no API call to find them.
    benchmarks: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)
    #: The monotonic time this operator started (an expired Lease is taken over only after
    #: this operator itself had a whole lease duration to renew it).
    started: float = field(default_factory=time.monotonic)
    #: The operator-level loop (:mod:`.loop`) and the leader's renewals (:mod:`.leader`),
    #: started and cancelled by the handlers.
    tasks: list[asyncio.Task[None]] = field(default_factory=list, repr=False)

    def lock(self, namespace: str, name: str) -> asyncio.Lock:
        """Serialises the status writes for one benchmark in this process: each handler reads,
        decides and writes under it, so two never overwrite each other's conditions."""
        return self._locks.setdefault((namespace, name), asyncio.Lock())

    @contextlib.asynccontextmanager
    async def locked(self, namespace: str, name: str) -> AsyncIterator[dict[str, Any] | None]:
        """The benchmark as the API server has it now (None: it is gone), read under its
        lock, which is held until the block ends: read, decide and write as one step."""
        async with self.lock(namespace, name):
            try:
                body: dict[str, Any] | None = await self.kube.get_benchmark(namespace, name)
            except NotFound:
                body = None
            yield body

    def back_off(self, namespace: str, name: str, now: float) -> None:
        """Records one more wait (target not ready) from monotonic time ``now``."""
        _, tries = self._waits.get((namespace, name), (0.0, 0))
        self._waits[(namespace, name)] = (now + backoff(self.config.retry_delay, tries), tries + 1)

    def due(self, namespace: str, name: str, now: float) -> bool:
        """Whether a waiting benchmark may try again at monotonic time ``now``: not while it
        is queued behind a Lease and not woken (:class:`Queues`), nor during its backoff."""
        if self.queues.queued((namespace, name)):
            return False
        until, _ = self._waits.get((namespace, name), (0.0, 0))
        return now >= until

    def queue_behind(
        self, namespace: str, name: str, lease: LeaseKey, holder: str, now: float,
        check_at: float,
    ) -> None:
        """The benchmark is ``Queued`` behind ``holder`` on ``lease`` (:meth:`Queues.join`);
        a backoff it had (target not ready) ends: the queue decides when it tries again."""
        self._waits.pop((namespace, name), None)
        self.queues.join((namespace, name), lease, holder, now, check_at)

    def forget(self, namespace: str, name: str) -> None:
        """Ends a benchmark's backoff and its place in a queue (its run was created, it waits
        for its target now, or it is gone)."""
        self._waits.pop((namespace, name), None)
        self.queues.leave((namespace, name))

    def uptime(self) -> float:
        """Seconds since this operator started."""
        return time.monotonic() - self.started

    def observe(self, body: Mapping[str, Any], event: str | None) -> None:
        """Keeps what the loop needs of a benchmark from its watch event (``DELETED``: drops
        it, its backoff, its place in a queue and its lock, and wakes the queue behind it:
        its Lease, which it owns, is deleted with it). A benchmark seen running or finished
        leaves its queue."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        if event == "DELETED":
            self.benchmarks.pop(key, None)
            self.forget(*key)
            self.queues.wake_holder(f"{key[0]}/{key[1]}")  # its Lease goes with it
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]
            return
        self.benchmarks[key] = seen(body)
        if (body.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            self.queues.leave(key)  # (an older event, Pending, may follow the queueing)


#: The spec fields a schedule tick is computed from (:func:`~.reconcile.schedule_tick`).
_SCHEDULE_FIELDS = ("schedule", "timeZone", "startingDeadlineSeconds", "suspend", "trigger")
#: The status fields the loop decides from: waiting, running, the last tick.
_STATUS_FIELDS = ("phase", "run", "lastScheduleTime")


def seen(body: Mapping[str, Any]) -> dict[str, Any]:
    """The few fields of a benchmark the operator-level loop decides from, in the shape of
    the benchmark (a small copy: no history, no points, however many benchmarks there are)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    return {
        "metadata": {k: meta[k] for k in ("namespace", "name", "creationTimestamp") if k in meta},
        "spec": {k: spec[k] for k in _SCHEDULE_FIELDS if k in spec},
        "status": {k: status[k] for k in _STATUS_FIELDS if k in status},
    }


def connect() -> Kube:
    """The API client: the pod's service account in a cluster, else ``KUBECONFIG`` (as set
    now, not when the client library was imported) or ``~/.kube/config``."""
    try:
        k8s_config.load_incluster_config()
        api = k8s.ApiClient()
    except k8s_config.ConfigException:
        api = k8s_config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
    return Kube(api)


def start(memo: MutableMapping[str, Any]) -> Operator:
    """Builds the :class:`Operator` from the config in ``memo`` (defaults when the operator
    was started by ``kopf run`` directly) and keeps it there, the config's only home after."""
    config = memo.pop(CONFIG_KEY, None)
    if not isinstance(config, OperatorConfig):
        config = OperatorConfig()
    op = Operator(config=config, kube=connect(), clock=Clock(config.clock_offset_file))
    memo[STATE_KEY] = op
    return op


def of(memo: MutableMapping[str, Any]) -> Operator:
    """The :class:`Operator` of a handler's ``memo`` (set by the startup handler)."""
    op = memo.get(STATE_KEY)
    if not isinstance(op, Operator):
        raise RuntimeError(
            "the operator's state is missing from kopf's memo: the startup handler of "
            "llmbench.operator.handlers did not run"
        )
    return op
