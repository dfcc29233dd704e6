"""The kopf handlers: thin glue between events and the pure decisions of this package.

Every handler reads the benchmark as the API server has it *now* and decides from that
(:func:`llmbench.operator.status.decide`), so nothing depends on the order events arrive in,
and a restarted operator continues where the last one stopped. Children (ConfigMaps, Jobs,
runner pods) are watched statelessly with ``kopf.on.event``: the operator never patches them.
Status writes for one benchmark are serialised in this process (a lock per benchmark), each
computed from a fresh read, so two handlers never overwrite each other's conditions.
"""

from __future__ import annotations

from typing import Any

import kopf

from llmbench.api import GROUP, PLURAL, VERSION
from llmbench.operator import exporter, finish, progress
from llmbench.operator import reconcile as reconciling
from llmbench.operator.build import LABEL_MANAGED_BY, MANAGED_BY
from llmbench.operator.settings import configure as configure_kopf

__all__: list[str] = []

_CHILDREN = {LABEL_MANAGED_BY: MANAGED_BY}


# ----------------------------------------------------------------------------------------------
# kopf settings
# ----------------------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """kopf's settings (:func:`llmbench.operator.settings.configure`)."""
    configure_kopf(settings)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own connection: the same credentials as :func:`kube`."""
    return kopf.login_via_client(**kwargs)


@kopf.on.startup()
async def start_metrics(**_: Any) -> None:
    """Serves ``/metrics`` on ``--metrics-port``."""
    await exporter.start_metrics()


@kopf.on.cleanup()
async def stop_metrics(**_: Any) -> None:
    """Stops the ``/metrics`` server."""
    await exporter.stop_metrics()


# ----------------------------------------------------------------------------------------------
# the benchmark
# ----------------------------------------------------------------------------------------------


def _scheduled(spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("schedule")) and not spec.get("suspend")


@kopf.timer(GROUP, VERSION, PLURAL, interval=1.0, when=_scheduled)
async def on_schedule(
    namespace: str | None, name: str, spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta,
    **_: Any,
) -> None:
    """Runs the latest due tick of a scheduled benchmark (at most one catch-up after an
    outage; none when it is older than ``startingDeadlineSeconds``). Only scheduled,
    unsuspended benchmarks have this timer, and it makes no API call until a tick is due."""
    await reconciling.schedule_tick(namespace, name, spec, status, meta)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def on_benchmark(namespace: str | None, name: str, **_: Any) -> None:
    """Create, spec change, and operator start: the same reconcile."""
    await reconciling.reconcile(namespace or "default", name)


def _waiting(status: kopf.Status, **_: Any) -> bool:
    return status.get("phase") in ("Pending", "Queued")


@kopf.timer(GROUP, VERSION, PLURAL, interval=1.0, when=_waiting)
async def retry_waiting(namespace: str | None, name: str, **_: Any) -> None:
    """A waiting benchmark tries again when its backoff is due: a reference was created, the
    Lease was released or its holder deleted. Only waiting benchmarks have this timer, so its
    cost does not grow with finished ones."""
    await reconciling.retry(namespace, name)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def on_benchmark_event(
    body: kopf.Body, type: str | None, namespace: str | None, name: str, **_: Any  # noqa: A002
) -> None:
    """The Prometheus gauges of the benchmark, from the event's body (no API call)."""
    exporter.record(body, type, namespace, name)


# ----------------------------------------------------------------------------------------------
# children: the results ConfigMap, the Job, the runner pod
# ----------------------------------------------------------------------------------------------


@kopf.on.event("", "v1", "configmaps", labels=_CHILDREN)
async def on_results(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002 - kopf's name
    """The runner wrote a point: mirror its digest into status (within a second or two)."""
    await progress.results_event(body, type)


@kopf.on.event("batch", "v1", "jobs", labels=_CHILDREN)
async def on_job(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002 - kopf's name
    """A runner Job finished: final status, release the Lease, then any newer spec runs."""
    await finish.job_event(body, type)


@kopf.on.event("", "v1", "pods", labels=_CHILDREN)
async def on_runner_pod(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002
    """``RunnerScheduled`` (with the scheduler's reason) and ``Running`` from the runner pod.

    With several runner pods (``spec.runner.replicas``) every event recomputes both from all
    the run's pods (one list call), so the conditions and ``stack.runnerNodes`` describe every
    shard instead of the pod that happened to change last."""
    await progress.runner_pod_event(body, type)
