"""The kopf handlers: thin glue between events and the pure decisions of this package.

Every handler reads the benchmark as the API server has it *now* and decides from that
(:func:`llmbench.operator.status.decide`), so nothing depends on the order events arrive in,
and a restarted operator continues where the last one stopped. Children (ConfigMaps, Jobs,
runner pods) are watched statelessly with ``kopf.on.event``: the operator never patches them.
Status writes for one benchmark are serialised in this process (a lock per benchmark), each
computed from a fresh read, so two handlers never overwrite each other's conditions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from pydantic import ValidationError

from llmbench.api import GROUP, PLURAL, VERSION, Spec, SpecError, SpecIssue
from llmbench.api.job import (
    CONTEXT_KEY,
    DIGEST_KEY,
    SUMMARY_KEY,
    BaselineContext,
    RunContext,
    run_name,
)
from llmbench.api.status import Condition, RunDigest, StackStatus, dump
from llmbench.operator import baseline as baselines
from llmbench.operator.build import (
    DEFAULT_RUNNER_IMAGE,
    LABEL_BENCHMARK,
    LABEL_MANAGED_BY,
    LABEL_RUN,
    MANAGED_BY,
    REPLICAS_ANNOTATION,
    Placement,
    artifacts_location,
    holder_identity,
    run_objects,
    run_problem,
    target_lease,
)
from llmbench.operator.kube import PRUNED_KINDS, Kube, NotFound
from llmbench.operator.placement import (
    DCGM_LABELS,
    exporter_urls,
    is_ready,
    label_selector,
    stack_snapshot,
    target_nodes,
)
from llmbench.operator.schedule import (
    Clock,
    ScheduleError,
    due_tick,
    measured_hash,
    next_tick,
    parse_time,
    rfc3339,
)
from llmbench.operator.status import (
    Decision,
    bounded_status,
    condition,
    decide,
    digest_patch,
    history_entry,
    image_pull_failure,
    job_failure_message,
    job_outcome,
    now,
    oom_killed,
    runner_nodes,
    runner_pod_conditions,
    set_condition,
    shard_conditions,
    validity_condition,
    with_history,
)

__all__ = ["CONFIG", "OperatorConfig", "TargetNotReady", "reconcile"]

log = logging.getLogger("llmbench.operator")


@dataclass
class OperatorConfig:
    """What ``llmbench operator`` was started with."""

    runner_image: str = DEFAULT_RUNNER_IMAGE
    #: Namespaces searched for dcgm-exporter pods when a cluster-wide list is forbidden.
    namespaces: list[str] = field(default_factory=list)
    #: Seconds between retries while a benchmark waits for its target or the Lease.
    retry_delay: float = 3.0
    #: What "now" is for schedules (tests shift it instead of sleeping for minutes).
    clock: Clock = field(default_factory=Clock)


CONFIG = OperatorConfig()
_KUBE: Kube | None = None
_LOCKS: dict[tuple[str, str], asyncio.Lock] = {}
_CHILDREN = {LABEL_MANAGED_BY: MANAGED_BY}


def kube() -> Kube:
    """The API client: in-cluster service account, else ``KUBECONFIG``."""
    global _KUBE
    if _KUBE is None:
        try:
            k8s_config.load_incluster_config()
            api = k8s.ApiClient()
        except k8s_config.ConfigException:
            api = k8s_config.new_client_from_config()
        _KUBE = Kube(api)
    return _KUBE


def _lock(namespace: str, name: str) -> asyncio.Lock:
    return _LOCKS.setdefault((namespace, name), asyncio.Lock())


# ----------------------------------------------------------------------------------------------
# kopf settings
# ----------------------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Timeouts on every watch and request (a silently stalled watch is kopf's known failure
    mode), progress kept in our own annotations (status is ours and schema-checked), no
    cluster-wide CRD scanning (which would need cluster-wide rights), no peering objects."""
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.scanning.disabled = True
    settings.peering.standalone = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="llmbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="llmbench.io", key="last-handled-configuration"
    )
    # Only warnings from kopf's own log become Events (not "handler succeeded" on every
    # ConfigMap update); the transitions this module posts itself are always sent.
    settings.posting.level = logging.WARNING


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own connection: the same credentials as :func:`kube`."""
    return kopf.login_via_client(**kwargs)


# ----------------------------------------------------------------------------------------------
# status writing
# ----------------------------------------------------------------------------------------------


async def _write(
    namespace: str,
    name: str,
    fields: Mapping[str, Any],
    conditions: list[Condition] = (),  # type: ignore[assignment]
    body: Mapping[str, Any] | None = None,
) -> None:
    """Patches ``fields`` and sets ``conditions`` on top of the current ones."""
    current = body if body is not None else await kube().get_benchmark(namespace, name)
    status = dict(fields)
    conds = list((current.get("status") or {}).get("conditions") or [])
    for c in conditions:
        conds = set_condition(conds, c)
    if conditions:
        status["conditions"] = conds
    cm = status.get("resultsConfigMap") or (current.get("status") or {}).get("resultsConfigMap")
    await kube().patch_status(namespace, name, bounded_status(status, cm))


def _event(body: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
    """A Kubernetes Event on the benchmark (kopf posts it in the background)."""
    kopf.event(
        cast(Any, dict(body)), type="Warning" if warning else "Normal", reason=reason,
        message=message,
    )


# ----------------------------------------------------------------------------------------------
# target resolution
# ----------------------------------------------------------------------------------------------


class TargetNotReady(Exception):
    """A reference of ``spec.target`` does not resolve yet (reason: CamelCase)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Resolved:
    """The target as found: where to send, which pods and nodes serve it."""

    url: str
    namespace: str
    selector: dict[str, Any] | None
    pods: list[dict[str, Any]]
    nodes: list[dict[str, Any]]


async def resolve_target(spec: Spec, namespace: str) -> Resolved:
    """Checks every reference of ``spec.target`` and finds the serving pods and nodes.

    Raises :class:`TargetNotReady` naming the first missing object (Service, its port, the API
    key Secret or its key, Ready pods).
    """
    k = kube()
    t = spec.target
    target_ns = (t.service.namespace if t.service and t.service.namespace else None) or namespace
    selector: dict[str, Any] | None = dict(t.pod_selector) if t.pod_selector else None
    if t.service is not None:
        try:
            svc = await k.get_service(target_ns, t.service.name)
        except NotFound:
            raise TargetNotReady(
                "ServiceNotFound", f"Service {target_ns}/{t.service.name} does not exist"
            ) from None
        ports = [p.get("port") for p in (svc.get("spec") or {}).get("ports") or []]
        if t.service.port not in ports:
            raise TargetNotReady(
                "ServicePortNotFound",
                f"Service {target_ns}/{t.service.name} has no port {t.service.port} "
                f"(it has {', '.join(map(str, ports)) or 'none'}); set spec.target.service.port",
            )
        if selector is None and (svc.get("spec") or {}).get("selector"):
            selector = {"matchLabels": dict(svc["spec"]["selector"])}
    ref = t.api_key_secret_ref
    if ref is not None:
        try:
            has = await k.secret_has_key(namespace, ref.name, ref.key)
        except NotFound:
            raise TargetNotReady(
                "SecretNotFound", f"Secret {namespace}/{ref.name} does not exist"
            ) from None
        if not has:
            raise TargetNotReady(
                "SecretKeyNotFound", f"Secret {namespace}/{ref.name} has no key {ref.key!r}"
            )
    pods: list[dict[str, Any]] = []
    nodes: list[dict[str, Any]] = []
    if selector:
        sel = label_selector(selector)
        found = await k.list_pods(target_ns, sel)
        pods = [p for p in found if is_ready(p)]
        if not pods:
            raise TargetNotReady(
                "PodsNotReady",
                f"no Ready pod matches {sel!r} in namespace {target_ns} "
                f"({len(found)} found, none Ready)",
            )
        for node in target_nodes(pods):
            try:
                nodes.append(await k.get_node(node))
            except NotFound:
                continue
    return Resolved(t.base_url(namespace), target_ns, selector, pods, nodes)


async def discover_exporters(spec: Spec, resolved: Resolved) -> tuple[list[str], Condition]:
    """dcgm-exporter URLs for the target's nodes, and the ``TelemetryAvailable`` condition."""
    dcgm = spec.telemetry.dcgm
    if dcgm == "off":
        return [], condition("TelemetryAvailable", False, "Disabled", "spec.telemetry.dcgm: off")
    if dcgm != "auto":
        return [dcgm], condition("TelemetryAvailable", True, "Configured", dcgm)
    names = [n["metadata"]["name"] for n in resolved.nodes]
    if not names:
        return [], condition(
            "TelemetryAvailable", False, "NoTargetPods",
            "no target pods to find GPUs by: set spec.target.podSelector, or "
            "spec.telemetry.dcgm to the exporter's URL",
        )
    exporters: list[dict[str, Any]] = []
    for key, value in DCGM_LABELS:
        try:
            exporters += await kube().list_pods(None, f"{key}={value}")
        except ApiException as exc:
            if exc.status != 403:
                raise
            for ns in dict.fromkeys([resolved.namespace, *CONFIG.namespaces]):
                try:
                    exporters += await kube().list_pods(ns, f"{key}={value}")
                except ApiException:
                    continue
    urls = exporter_urls(exporters, names)
    if not urls:
        return [], condition(
            "TelemetryAvailable", False, "ExporterNotFound",
            f"no Ready dcgm-exporter pod (label app=nvidia-dcgm-exporter or "
            f"app.kubernetes.io/name=dcgm-exporter) on node(s) {', '.join(names)}; the run goes "
            "on without the GPU table",
        )
    return urls, condition(
        "TelemetryAvailable", True, "ExporterFound", f"{len(urls)} exporter(s): {', '.join(urls)}"
    )


# ----------------------------------------------------------------------------------------------
# the Lease: one benchmark per endpoint
# ----------------------------------------------------------------------------------------------


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def acquire_lease(body: Mapping[str, Any], target_key: str) -> str | None:
    """Takes the endpoint's Lease; returns the holder when another benchmark has it.

    A Lease whose holder no longer exists, or has finished, is taken over (its release was
    lost, e.g. the operator stopped between the end of a run and the release).
    """
    k = kube()
    lease = target_lease(body, target_key, _micro_now())
    me = holder_identity(body)
    for _ in range(3):
        if await k.create(lease):
            return None
        try:
            existing = await k.get_lease(lease["metadata"]["namespace"], lease["metadata"]["name"])
        except NotFound:
            continue
        holder = (existing.get("spec") or {}).get("holderIdentity") or ""
        if holder == me:
            return None
        ns, _, name = holder.partition("/")
        try:
            other = await k.get_benchmark(ns, name)
        except NotFound:
            other = None
        if other is not None and (other.get("status") or {}).get("phase") not in (
            "Succeeded", "Failed",
        ):
            return holder
        await k.delete_lease(lease["metadata"]["namespace"], lease["metadata"]["name"], holder)
    return None


async def release_lease(body: Mapping[str, Any], target_key: str) -> None:
    """Frees the endpoint for the next queued benchmark."""
    lease = target_lease(body, target_key, _micro_now())
    await kube().delete_lease(
        lease["metadata"]["namespace"], lease["metadata"]["name"], holder_identity(body)
    )


# ----------------------------------------------------------------------------------------------
# reconcile: from the resource to a running Job
# ----------------------------------------------------------------------------------------------


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


def _schedule_fields(spec: Mapping[str, Any], now_: datetime) -> dict[str, Any]:
    """``nextRunTime`` of a scheduled, unsuspended benchmark (None removes it)."""
    sched = spec.get("schedule")
    if not sched or spec.get("suspend"):
        return {"nextRunTime": None}
    try:
        return {"nextRunTime": rfc3339(next_tick(sched, spec.get("timeZone"), now_))}
    except ScheduleError:  # the spec check reports it (Accepted=False)
        return {"nextRunTime": None}


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
    async with _lock(namespace, name):
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
            sched = {"lastScheduleTime": rfc3339(tick), **_schedule_fields(spec, tick)}
            if d.action in ("ensure", "wait") and spec.get("concurrencyPolicy") != "Replace":
                msg = (f"schedule tick {rfc3339(tick)} skipped: run {d.run} is still in progress "
                       "(concurrencyPolicy Forbid)")
                await _write(namespace, name, {**sched, "message": msg}, body=body)
                _event(body, "TickSkipped", msg)
                return
            if d.action in ("ensure", "wait"):
                await _replace_run(body, d.run, tick)
            d = Decision("start", int(status.get("run") or 0) + 1,
                         f"scheduled run (tick {rfc3339(tick)})")
        elif (
            d.action == "start"
            and status.get("run")
            and status.get("specHash") == measured_hash(spec)
        ):
            # Only when or how often it runs changed (schedule, suspend, history): no run.
            await _write(
                namespace, name,
                {"observedGeneration": generation, **_schedule_fields(spec, CONFIG.clock.now())},
                body=body,
            )
            return
        if d.action == "done":
            return
        if d.action == "wait":
            if status.get("message") != d.message:
                await _write(namespace, name, {"message": d.message}, body=body)
            return
        if d.action == "start":
            if not sched:
                sched = _schedule_fields(spec, CONFIG.clock.now())
            await _write(
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
            _event(body, "RunStarting", f"run {d.run} starting ({d.message or 'new benchmark'})")
            body = await k.get_benchmark(namespace, name)
        elif status.get("job") is None and status.get("observedGeneration") != generation:
            await _write(namespace, name, {"observedGeneration": generation}, body=body)
            body = await k.get_benchmark(namespace, name)
        run = int((body.get("status") or {}).get("run") or d.run)
        outcome = await _ensure_run(body, run, generation)
        if outcome == "created":
            _BACKOFF.pop((namespace, name), None)
        elif outcome == "target":
            _back_off(namespace, name)
        # "queued": try again at the next tick, so the Lease is taken soon after its release


async def _ensure_run(body: dict[str, Any], run: int, generation: int) -> str:
    """Creates what run ``run`` owns: ``created``, or why it waits (``target``, ``queued``;
    the reason is in status)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    status = body.get("status") or {}
    try:
        spec = Spec.from_manifest(body, namespace=namespace)
        problem = run_problem(name, run, spec)
        if problem is not None:
            raise SpecError([SpecIssue("metadata.name", problem)])
    except SpecError as exc:
        await _write(
            namespace, name,
            {"phase": "Failed", "message": str(exc), "lastRunTime": now()},
            [
                condition("Accepted", False, "InvalidSpec", str(exc), generation),
                condition("Succeeded", False, "InvalidSpec", str(exc), generation),
            ],
            body=body,
        )
        _event(body, "InvalidSpec", str(exc), warning=True)
        return "created"
    accepted = condition("Accepted", True, "Valid", "the spec is valid", generation)
    try:
        resolved = await resolve_target(spec, namespace)
    except TargetNotReady as exc:
        await _write(
            namespace, name,
            {"phase": "Pending", "message": f"{exc.reason}: {exc}"},
            [accepted, condition("TargetReady", False, exc.reason, str(exc), generation)],
            body=body,
        )
        return "target"
    ready = condition(
        "TargetReady", True, "Resolved",
        f"{resolved.url}; {len(resolved.pods)} Ready pod(s) on "
        f"{', '.join(n['metadata']['name'] for n in resolved.nodes) or 'unknown nodes'}",
        generation,
    )
    holder = await acquire_lease(body, resolved.url)
    if holder is not None:
        msg = f"waiting for benchmark {holder}, which holds the Lease of {resolved.url}"
        if status.get("queuedBehind") != holder or status.get("phase") != "Queued":
            _event(body, "Queued", msg)
        await _write(
            namespace, name,
            {"phase": "Queued", "queuedBehind": holder, "message": msg},
            [accepted, ready, condition("Running", False, "Queued", msg, generation)],
            body=body,
        )
        return "queued"
    urls, telemetry = await discover_exporters(spec, resolved)
    judged_by, no_baseline = await resolve_baseline(body, spec, run)
    context = RunContext(
        benchmark=name,
        namespace=namespace,
        run=run,
        url=resolved.url,
        model=spec.target.model,
        api_key_env="LLMBENCH_API_KEY" if spec.target.api_key_secret_ref else None,
        dcgm_urls=urls,
        server_metrics=spec.telemetry.server_metrics,
        target_pods=[p["metadata"]["name"] for p in resolved.pods],
        target_namespace=resolved.namespace,
        baseline=judged_by,
        no_baseline=no_baseline,
        artifacts=artifacts_location(spec, name, run),
    )
    stack = stack_snapshot(resolved.pods, resolved.nodes, urls)
    taints = [t for n in resolved.nodes for t in (n.get("spec") or {}).get("taints") or []]
    where = Placement(resolved.selector, resolved.namespace, taints)
    created = []
    for obj in run_objects(body, run, spec, context, where, image=CONFIG.runner_image,
                           stack=stack):
        if await kube().create(obj):
            created.append(obj["kind"])
    job = run_name(name, run)
    fields: dict[str, Any] = {
        "job": job,
        "resultsConfigMap": job,
        "queuedBehind": None,
        "stack": dump(stack),
        "message": f"run {run}: runner Job {job}",
    }
    if status.get("phase") in (None, "Pending", "Queued"):
        fields["phase"] = "Running"
        fields["startedTime"] = now()
        fields["progress"] = f"0/{len(spec.points()) * spec.repetitions}"
    await _write(namespace, name, fields, [accepted, ready, telemetry], body=body)
    if "Job" in created:
        _event(body, "JobCreated", f"runner Job {job} created for run {run}")
    return "created"


async def resolve_baseline(
    body: Mapping[str, Any], spec: Spec, run: int
) -> tuple[BaselineContext | None, str | None]:
    """The figures run ``run`` is judged against (``spec.baseline``), or why there are none."""
    meta = body["metadata"]
    status = body.get("status") or {}
    choice = baselines.choose(
        spec.baseline, status.get("history") or [], measured_hash(body.get("spec") or {}), run
    )
    if choice.run is None:
        return choice.context, choice.reason
    try:
        cm = await kube().get_configmap(meta["namespace"], run_name(meta["name"], choice.run))
    except NotFound:
        return None, f"run {choice.run}'s results ConfigMap is gone"
    found = baselines.from_configmap(choice.run, cm.get("data") or {})
    return (None, found) if isinstance(found, str) else (found, None)


async def _replace_run(body: Mapping[str, Any], run: int, tick: datetime) -> None:
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
    await _write(namespace, name, {"history": history}, body=body)
    _event(body, "RunReplaced", f"run {run} {why}", warning=True)
    context = await _run_context(namespace, name, run)
    if context is not None:
        await release_lease(body, context.url)


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
    async with _lock(ns, name):  # the tick may have been handled since this body was read
        body = await kube().get_benchmark(ns, name)
        fresh = (body.get("status") or {}).get("lastScheduleTime")
        if fresh and parse_time(str(fresh)) >= latest:
            return
        if run_tick is None:
            msg = (f"schedule tick {rfc3339(latest)} missed by more than "
                   f"startingDeadlineSeconds ({spec.get('startingDeadlineSeconds')}); not run")
            await _write(ns, name, {"lastScheduleTime": rfc3339(latest), "message": msg,
                                    **_schedule_fields(body.get("spec") or {}, latest)},
                         body=body)
            _event(body, "TickMissed", msg, warning=True)
            return
    await reconcile(ns, name, tick=run_tick)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def on_benchmark(namespace: str | None, name: str, **_: Any) -> None:
    """Create, spec change, and operator start: the same reconcile."""
    await reconcile(namespace or "default", name)


def _waiting(status: kopf.Status, **_: Any) -> bool:
    return status.get("phase") in ("Pending", "Queued")


@kopf.timer(GROUP, VERSION, PLURAL, interval=1.0, when=_waiting)
async def retry_waiting(namespace: str | None, name: str, **_: Any) -> None:
    """A waiting benchmark tries again when its backoff is due: a reference was created, the
    Lease was released or its holder deleted. Only waiting benchmarks have this timer, so its
    cost does not grow with finished ones."""
    ns = namespace or "default"
    if _due(ns, name):
        await reconcile(ns, name)


# ----------------------------------------------------------------------------------------------
# children: the results ConfigMap, the Job, the runner pod
# ----------------------------------------------------------------------------------------------


def _owner(body: Mapping[str, Any]) -> tuple[str, str, int] | None:
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    try:
        return meta["namespace"], labels[LABEL_BENCHMARK], int(labels[LABEL_RUN])
    except (KeyError, ValueError):
        return None


def _digest(cm: Mapping[str, Any]) -> tuple[RunDigest | None, str | None]:
    data = cm.get("data") or {}
    raw = data.get(DIGEST_KEY)
    if not raw:
        return None, data.get(SUMMARY_KEY)
    try:
        return RunDigest.model_validate_json(raw), data.get(SUMMARY_KEY)
    except ValidationError:
        log.warning("unreadable %s in ConfigMap %s", DIGEST_KEY, cm["metadata"]["name"])
        return None, data.get(SUMMARY_KEY)


async def _apply_digest(
    namespace: str, name: str, run: int, digest: RunDigest, csv: str | None
) -> None:
    async with _lock(namespace, name):
        try:
            body = await kube().get_benchmark(namespace, name)
        except NotFound:
            return
        status = body.get("status") or {}
        if status.get("run") != run or status.get("phase") != "Running":
            return
        gen = status.get("observedGeneration")
        conds = [c for c in [validity_condition(digest, gen)] if c is not None]
        await _write(namespace, name, digest_patch(digest, csv), conds, body=body)


@kopf.on.event("", "v1", "configmaps", labels=_CHILDREN)
async def on_results(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002 - kopf's name
    """The runner wrote a point: mirror its digest into status (within a second or two)."""
    owner = _owner(body)
    if type == "DELETED" or owner is None:
        return
    digest, csv = _digest(body)
    if digest is not None:
        await _apply_digest(owner[0], owner[1], owner[2], digest, csv)


@kopf.on.event("batch", "v1", "jobs", labels=_CHILDREN)
async def on_job(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002 - kopf's name
    """A runner Job finished: final status, release the Lease, then any newer spec runs."""
    owner = _owner(body)
    if type == "DELETED" or owner is None:
        return
    outcome = job_outcome(body)
    if outcome not in ("Succeeded", "Failed"):
        return
    namespace, name, run = owner
    await finish_run(namespace, name, run, dict(body), outcome)


async def finish_run(
    namespace: str, name: str, run: int, job: dict[str, Any], outcome: str,
    reason: str | None = None,
) -> None:
    """Idempotent: a second call for a finished run changes nothing. ``reason``: why the run
    failed when the Job cannot say (a runner image that cannot be pulled)."""
    k = kube()
    async with _lock(namespace, name):
        try:
            body = await k.get_benchmark(namespace, name)
        except NotFound:
            return
        status = body.get("status") or {}
        if status.get("run") != run or status.get("phase") in ("Succeeded", "Failed"):
            return
        gen = status.get("observedGeneration")
        digest: RunDigest | None = None
        csv = None
        cm: dict[str, Any] | None = None
        try:  # one read: the digest, and the context with the Lease and the baseline
            cm = await k.get_configmap(namespace, run_name(name, run))
            digest, csv = _digest(cm)
        except NotFound:
            pass
        fields: dict[str, Any] = {
            "lastRunTime": now(), **_schedule_fields(body.get("spec") or {}, CONFIG.clock.now())
        }
        conds: list[Condition] = []
        failed_points = [p for p in (digest.points if digest else []) if p.state == "Failed"]
        failed = (
            outcome == "Failed"
            or (digest is not None and digest.failed is not None)
            or bool(failed_points)
        )
        if digest is not None:
            fields.update(digest_patch(digest, csv))
            valid = validity_condition(digest, gen)
            if valid is not None:
                conds.append(valid)
        elif outcome == "Succeeded":
            failed = True
        if failed:
            why = reason or (digest.failed if digest is not None and digest.failed else None) or (
                f"{len(failed_points)} point(s) failed; first: {failed_points[0].name}: "
                f"{failed_points[0].reason}"
                if failed_points
                else job_failure_message(job)
                if outcome == "Failed"
                else "the runner reported nothing"
            )
            if outcome == "Failed" and reason is None:  # the kernel's word beats "backoff"
                pods = await k.list_pods(
                    namespace, f"{LABEL_BENCHMARK}={name},{LABEL_RUN}={run}")
                oom = oom_killed(pods)
                why = f"{why}; {oom}" if oom else why
            fields.update(phase="Failed", message=f"run {run} failed: {why}")
            conds += [
                condition("Succeeded", False, "RunFailed", why, gen),
                condition("Running", False, "RunFailed", why, gen),
            ]
        else:
            early = (
                f": stopped after the knee ({digest.done} of {digest.total} points)"
                if digest is not None and digest.stopped_after_knee
                else ""
            )
            fields.update(phase="Succeeded", message=f"run {run} finished{early}")
            conds += [
                condition("Succeeded", True, "RunSucceeded", f"run {run} finished", gen),
                condition("Running", False, "Completed", f"run {run} finished", gen),
            ]
        verdict = next((c.status for c in conds if c.type == "MeasurementValid"), None)
        context = _context_of(cm)
        regressed = baselines.regressed_condition(
            run=run, failed=failed, valid=verdict, digest=digest,
            baseline=context.baseline if context is not None else None,
            no_baseline=context.no_baseline if context is not None else None,
            stack=_stack(status), generation=gen,
        )
        conds.append(regressed)
        judged = regressed.status != "Unknown"
        fields["regression"] = (
            dump(digest.regression) if judged and digest and digest.regression else None
        )
        entry = history_entry(
            run, "Failed" if failed else "Succeeded", digest,
            started=status.get("startedTime"), finished=fields["lastRunTime"],
            valid=None if verdict in (None, "Unknown") else verdict == "True",
            config_map=run_name(name, run), message=str(fields["message"]),
            regressed=regressed.status == "True" if judged else None,
            spec_hash=status.get("specHash"),
            artifacts=context.artifacts if context is not None else None,
        )
        limit = int((body.get("spec") or {}).get("historyLimit") or 30)
        fields["history"], dropped = with_history(status.get("history") or [], entry, limit)
        await _write(namespace, name, fields, conds, body=body)
    for old_run in dropped:  # spec.historyLimit: the oldest runs' objects go
        for kind in PRUNED_KINDS:
            await k.delete(kind, namespace, run_name(name, old_run))
    if context is not None:
        await release_lease(body, context.url)
    _event(body, "RunFailed" if failed else "RunSucceeded", str(fields["message"]), failed)
    if regressed.status == "True":
        _event(body, "Regressed", regressed.message, warning=True)
    if int(body["metadata"].get("generation") or 1) != gen:
        await reconcile(namespace, name)


def _context_of(cm: Mapping[str, Any] | None) -> RunContext | None:
    """``context.json`` of a run's ConfigMap (None when the map or the key is gone)."""
    try:
        return RunContext.model_validate_json((cm or {})["data"][CONTEXT_KEY])
    except (KeyError, TypeError, ValidationError):
        return None


async def _run_context(namespace: str, name: str, run: int) -> RunContext | None:
    """``context.json`` of run ``run`` (None when its ConfigMap or the key is gone)."""
    try:
        return _context_of(await kube().get_configmap(namespace, run_name(name, run)))
    except NotFound:
        return None


def _stack(status: Mapping[str, Any]) -> StackStatus | None:
    try:
        return StackStatus.model_validate(status["stack"]) if status.get("stack") else None
    except ValidationError:
        return None


@kopf.on.event("", "v1", "pods", labels=_CHILDREN)
async def on_runner_pod(body: kopf.Body, type: str, **_: Any) -> None:  # noqa: A002
    """``RunnerScheduled`` (with the scheduler's reason) and ``Running`` from the runner pod.

    With several runner pods (``spec.runner.replicas``) every event recomputes both from all
    the run's pods (one list call), so the conditions and ``stack.runnerNodes`` describe every
    shard instead of the pod that happened to change last."""
    owner = _owner(body)
    if type == "DELETED" or owner is None:
        return
    namespace, name, run = owner
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    try:
        replicas = int(annotations.get(REPLICAS_ANNOTATION) or 1)
    except ValueError:
        replicas = 1
    async with _lock(namespace, name):
        try:
            bench = await kube().get_benchmark(namespace, name)
        except NotFound:
            return
        status = bench.get("status") or {}
        if status.get("run") != run or status.get("phase") != "Running":
            return
        gen = status.get("observedGeneration")
        stack = dict(status.get("stack") or {})
        containers = (body.get("spec") or {}).get("containers") or []
        image = containers[0].get("image") if containers else None
        fields: dict[str, Any] = {}
        if replicas > 1:
            selector = f"{LABEL_BENCHMARK}={name},{LABEL_RUN}={run}"
            pods = await kube().list_pods(namespace, selector)
            conds = shard_conditions(pods, replicas, gen)
            nodes = runner_nodes(pods)
            node = nodes[0] if nodes and nodes[0] else None
            if nodes != stack.get("runnerNodes"):
                stack["runnerNodes"] = nodes
                fields["stack"] = stack
        else:
            conds = runner_pod_conditions(body, gen)
            node = (body.get("spec") or {}).get("nodeName")
        have = {c.get("type"): (c.get("status"), c.get("message")) for c in
                status.get("conditions") or []}
        changed = [c for c in conds if have.get(c.type) != (c.status, c.message)]
        if node and (stack.get("runnerNode"), stack.get("runnerImage")) != (node, image):
            stack.update(runnerNode=node, runnerImage=image)
            fields["stack"] = stack
        if changed or fields:
            await _write(namespace, name, fields, changed, body=bench)
    pull = image_pull_failure(body)
    if pull is not None:  # the Job would wait for the image until its deadline
        await finish_run(namespace, name, run, {}, "Failed", reason=pull)
        await kube().delete("Job", namespace, run_name(name, run))
