"""Every kopf handler of the operator, in one place, each a short delegate.

Importing this module registers them (``llmbench operator`` does; so does ``kopf run -m
llmbench.operator.handlers``). The logic lives in plain async functions named for what they
do (:mod:`.reconcile`, :mod:`.finish`, :mod:`.progress`, :mod:`.exporter`), which decide with
pure functions; the handlers only pick the shared :class:`~llmbench.operator.state.Operator`
out of kopf's ``memo`` and pass it on.

Every handler reads the benchmark as the API server has it *now* and decides from that, so
nothing depends on the order events arrive in, and a restarted operator continues where the
last one stopped. Children (ConfigMaps, Jobs, runner pods) are watched statelessly with
``kopf.on.event``: the operator never patches them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import kopf

from llmbench.api import GROUP, PLURAL, VERSION
from llmbench.operator import exporter, finish, leader, loop, progress, reconcile, state
from llmbench.operator.build import LABEL_MANAGED_BY, MANAGED_BY
from llmbench.operator.settings import configure as configure_kopf

__all__: list[str] = []

_CHILDREN = {LABEL_MANAGED_BY: MANAGED_BY}


# ----------------------------------------------------------------------------------------------
# the operator
# ----------------------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """kopf's settings, the operator's state built once and kept in the memo, with
    ``--leader-election-namespace`` the leader's renewals (``llmbench operator`` waited until
    it leads before starting kopf), and the operator-level loop (:mod:`.loop`: schedule
    ticks, waiting benchmarks, the resync)."""
    configure_kopf(settings)
    op = state.start(memo)
    election = leader.of(op.config)
    if election is not None:
        op.tasks.append(asyncio.create_task(
            leader.keep(op.kube, election, leader.exit_now), name="llmbench-leader"))
    op.tasks.append(asyncio.create_task(loop.run(op), name="llmbench-loop"))


@kopf.on.cleanup()
async def stop_loop(memo: kopf.Memo, **_: Any) -> None:
    """Stops the operator-level loop and the renewals, and gives the leader's Lease up."""
    op = state.of(memo)
    for task in op.tasks:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    election = leader.of(op.config)
    if election is not None:
        await leader.release(op.kube, election)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own connection: the same credentials as :func:`llmbench.operator.state.connect`."""
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


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def on_benchmark(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    """Create, spec change, and operator start: the same reconcile."""
    await reconcile.reconcile(state.of(memo), namespace or "default", name)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def on_benchmark_event(
    body: kopf.Body, type: str | None, namespace: str | None, name: str,  # noqa: A002
    memo: kopf.Memo, **_: Any,
) -> None:
    """What the operator-level loop knows of the benchmark (its schedule, its phase), and
    its Prometheus gauges, from the event's body (no API call). No kopf timer or daemon on
    benchmarks: they would put kopf's finalizer on them (see :mod:`.loop`)."""
    state.of(memo).observe(body, type)
    exporter.record(body, type, namespace, name)


# ----------------------------------------------------------------------------------------------
# children: the results ConfigMap, the Job, the runner pod
# ----------------------------------------------------------------------------------------------


@kopf.on.event("", "v1", "configmaps", labels=_CHILDREN)
async def on_results(
    body: kopf.Body, type: str, memo: kopf.Memo, **_: Any  # noqa: A002 - kopf's name
) -> None:
    """The runner wrote a point: mirror its digest into status (within a second or two)."""
    await progress.results_event(state.of(memo), body, type)


@kopf.on.event("batch", "v1", "jobs", labels=_CHILDREN)
async def on_job(
    body: kopf.Body, type: str, memo: kopf.Memo, **_: Any  # noqa: A002 - kopf's name
) -> None:
    """A runner Job finished: final status, release the Lease, then any newer spec runs."""
    await finish.job_event(state.of(memo), body, type)


@kopf.on.event("", "v1", "pods", labels=_CHILDREN)
async def on_runner_pod(
    body: kopf.Body, type: str, memo: kopf.Memo, **_: Any  # noqa: A002 - kopf's name
) -> None:
    """``RunnerScheduled`` and ``Running`` from the run's runner pod(s)."""
    await progress.runner_pod_event(state.of(memo), body, type)
