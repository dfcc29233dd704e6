"""Status decisions: conditions, phase, what a run's digest and its Job say.

Pure functions from what the API server returned to the status patch to send, so that every
handler computes status from the current objects (never from the order events arrived in) and
the rules are tested without a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llmbench.api import Spec
from llmbench.api.job import SUMMARY_KEY
from llmbench.api.status import (
    SUMMARY_CSV_LIMIT,
    SUMMARY_CSV_MOVED,
    BenchmarkStatus,
    Condition,
    HistoryEntry,
    RunDigest,
    dump,
)
from llmbench.operator.build import INDEX_ANNOTATION

__all__ = [
    "MAX_STATUS_BYTES",
    "Patch",
    "bounded_status",
    "Decision",
    "condition",
    "decide",
    "digest_patch",
    "history_entry",
    "history_limit",
    "image_pull_failure",
    "final_digest",
    "missing_points",
    "oom_killed",
    "termination_digest",
    "with_history",
    "job_outcome",
    "current_runner_pods",
    "runner_nodes",
    "runner_pod_conditions",
    "shard_conditions",
    "set_condition",
    "status_of",
]

#: The most a benchmark's whole status may hold (JSON bytes), history and conditions included;
#: what does not fit stays in the results ConfigMaps and status says where. Far below etcd's
#: 1.5 MiB object limit, so a spec of up to its own bounds always fits beside it, and small
#: enough that listing 1000 benchmarks stays cheap for the operator and for ``kubectl``.
MAX_STATUS_BYTES = 64 * 1024


def status_of(body: Mapping[str, Any]) -> BenchmarkStatus:
    """A benchmark's ``status``, typed (none yet: an empty one).

    The CRD's status schema is generated from :class:`BenchmarkStatus`, so the API server holds
    nothing this cannot read; a status written by an incompatible version fails here, loudly,
    rather than being taken for a new benchmark.
    """
    return BenchmarkStatus.model_validate(body.get("status") or {})


@dataclass(frozen=True)
class Patch:
    """A status patch as the decisions return it: ``fields`` merged into status (None deletes
    a key, lists are replaced whole) and ``conditions`` set on top of the current ones."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    conditions: Sequence[Condition] = ()


def condition(
    type_: str, status: bool | None, reason: str, message: str = "", generation: int | None = None
) -> Condition:
    """A condition from a boolean (None = Unknown)."""
    value: Literal["True", "False", "Unknown"] = (
        "Unknown" if status is None else "True" if status else "False"
    )
    return Condition(
        type=type_, status=value, reason=reason, message=message[:1024],
        observed_generation=generation,
    )


def set_condition(
    conditions: Sequence[Mapping[str, Any]], new: Condition, at: str
) -> list[dict[str, Any]]:
    """``conditions`` with ``new`` in place of its type; ``lastTransitionTime`` moves (to
    ``at``, RFC 3339) only when the status flips (API conventions), so ``kubectl describe``
    shows when it really changed."""
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions:
        if c.get("type") != new.type:
            out.append(dict(c))
            continue
        found = True
        item = dump(new)
        item["lastTransitionTime"] = (
            c.get("lastTransitionTime") if c.get("status") == new.status else None
        ) or at
        out.append(item)
    if not found:
        item = dump(new)
        item["lastTransitionTime"] = at
        out.append(item)
    return out


def job_outcome(job: Mapping[str, Any] | None) -> Literal["Running", "Succeeded", "Failed"] | None:
    """What a runner Job says: None (no Job), Running, Succeeded or Failed (with the terminal
    conditions Kubernetes sets; ``SuccessCriteriaMet``/``FailureTarget`` count as final)."""
    if job is None:
        return None
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "Succeeded"
        if c.get("type") in ("Failed", "FailureTarget"):
            return "Failed"
    return "Running"


def job_failure_message(job: Mapping[str, Any]) -> str:
    """The Job's own reason for failing (deadline, backoff limit, pod failure policy)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Failed", "FailureTarget") and c.get("status") == "True":
            return f"{c.get('reason', 'Failed')}: {c.get('message', '')}".strip(": ")
    return "the runner Job failed"


#: Waiting reasons after which the kubelet will not get the runner image by itself: it has
#: tried and backs off (a transient registry error gets that one retry), or it never can.
IMAGE_PULL_FAILURES = ("ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def image_pull_failure(pod: Mapping[str, Any]) -> str | None:
    """Why the runner pod's image cannot be pulled, or None: a run whose image never arrives
    would otherwise stay Running until its deadline (the Job does not count pull errors)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_FAILURES:
            message = (waiting.get("message") or "").strip()
            return (f"the runner image {cs.get('image', '')} cannot be pulled: "
                    f"{waiting['reason']}{': ' + message if message else ''} — fix "
                    "spec.runner.image (or the operator's --runner-image) or make the image "
                    "available to the node")[:900]
    return None


def termination_digest(pods: Sequence[Mapping[str, Any]]) -> RunDigest | None:
    """The runner's digest from its termination message (the kubelet keeps 4 KiB of it), the
    most advanced of the run's pods; None when no pod left a readable one. The runner writes
    it when it ends, and when the ConfigMap refuses a write, so it can be newer than the
    ConfigMap's."""
    found: list[RunDigest] = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            message = ((cs.get("state") or {}).get("terminated") or {}).get("message")
            if not message:
                continue
            try:
                found.append(RunDigest.model_validate_json(message))
            except ValueError:  # a crash's log tail (FallbackToLogsOnError), not a digest
                continue
    return max(found, key=lambda d: (d.finished, d.done), default=None)


def final_digest(stored: RunDigest | None, ended: RunDigest | None) -> RunDigest | None:
    """The digest a run ends with: the ConfigMap's (``stored``: every point's figures), told
    by the termination message's (``ended``) what it missed: why the runner failed, or, when
    the ConfigMap fell behind, the later digest itself."""
    if ended is None or (stored is not None and stored.finished):
        return stored
    if stored is None or ended.done > stored.done and not ended.failed:
        return ended
    if ended.failed and not stored.failed:
        return stored.model_copy(update={"failed": ended.failed, "finished": True})
    return stored


def missing_points(digest: RunDigest | None) -> str | None:
    """Why a run whose Job succeeded still failed because points are missing, or None: it
    ended with fewer points than planned and did not stop after the knee (its results did
    not all reach the ConfigMap, or the runner stopped early)."""
    if digest is None or digest.done >= digest.total or digest.stopped_after_knee:
        return None
    return (f"the run ended with {digest.done} of {digest.total} planned points (and did not "
            "stop after the knee): the missing points' results are nowhere")


def oom_killed(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The kernel's OOM kill of a runner container (now or in a retried pod), named with the
    limit and the fix, or None."""
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                if ((state.get("terminated") or {}).get("reason")) == "OOMKilled":
                    containers = (pod.get("spec") or {}).get("containers") or [{}]
                    limit = ((containers[0].get("resources") or {}).get("limits") or {}).get(
                        "memory", "?")
                    return (f"the runner container was OOMKilled (limits.memory {limit}): "
                            "raise spec.runner.limits.memory")
    return None


def runner_pod_conditions(pod: Mapping[str, Any], generation: int | None) -> list[Condition]:
    """``RunnerScheduled`` (with the scheduler's message when it cannot place the pod) and,
    once the pod runs, ``Running``."""
    status = pod.get("status") or {}
    out: list[Condition] = []
    for c in status.get("conditions") or []:
        if c.get("type") != "PodScheduled":
            continue
        if c.get("status") == "True":
            node = (pod.get("spec") or {}).get("nodeName", "")
            out.append(condition("RunnerScheduled", True, "Scheduled", f"on node {node}",
                                 generation))
        else:
            out.append(
                condition(
                    "RunnerScheduled", False, c.get("reason") or "Unschedulable",
                    c.get("message") or "the runner pod is not scheduled", generation,
                )
            )
    if status.get("phase") == "Running":
        out.append(condition("Running", True, "RunnerRunning", "the sweep is running", generation))
    return out


def _index(pod: Mapping[str, Any]) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def current_runner_pods(pods: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """The pod that stands for each shard now: per completion index (0 for a non-indexed Job),
    the newest (a retried shard's replacement, not the pod it replaced)."""
    out: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        i = _index(pod)
        old = out.get(i)
        key = (meta.get("creationTimestamp") or "", meta.get("name") or "")
        if old is None or key > (
            (old.get("metadata") or {}).get("creationTimestamp") or "",
            (old.get("metadata") or {}).get("name") or "",
        ):
            out[i] = pod
    return dict(sorted(out.items()))


def _scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def runner_nodes(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each shard's node in index order ("" for a shard not scheduled yet)."""
    return [
        str((p.get("spec") or {}).get("nodeName") or "")
        for p in current_runner_pods(pods).values()
    ]


def shard_conditions(
    pods: Sequence[Mapping[str, Any]], replicas: int, generation: int | None
) -> list[Condition]:
    """``RunnerScheduled`` and ``Running`` over every shard of a run (``replicas`` > 1), from
    all its pods at once so that one pod's event never overwrites what the others say:
    scheduled only when all ``replicas`` are (``3/3 runner pods scheduled on a, b``), else the
    scheduler's reason for the first one it cannot place; running once a shard runs, with the
    counts."""
    current = list(current_runner_pods(pods).values())
    placed = [p for p in current if (_scheduled(p) or {}).get("status") == "True"]
    out: list[Condition] = []
    nodes = sorted({str((p.get("spec") or {}).get("nodeName") or "") for p in placed} - {""})
    if len(placed) >= replicas:
        out.append(condition(
            "RunnerScheduled", True, "Scheduled",
            f"{len(placed)}/{replicas} runner pods scheduled on {', '.join(nodes)}", generation,
        ))
    else:
        stuck = next(
            (p for p in current if (_scheduled(p) or {}).get("status") == "False"), None
        )
        msg = f"{len(placed)}/{replicas} runner pods scheduled"
        if nodes:
            msg += f" (on {', '.join(nodes)})"
        if stuck is not None:
            c = _scheduled(stuck) or {}
            pod_name = (stuck.get("metadata") or {}).get("name", "")
            out.append(condition(
                "RunnerScheduled", False, c.get("reason") or "Unschedulable",
                f"{msg}; {pod_name}: {c.get('message') or 'not scheduled'}", generation,
            ))
        else:
            out.append(condition("RunnerScheduled", False, "Pending", msg, generation))
    phases = [(p.get("status") or {}).get("phase") for p in current]
    running, done = phases.count("Running"), phases.count("Succeeded")
    if running or done:
        msg = f"the sweep is running: {running}/{replicas} runner pods running"
        if done:
            msg += f", {done} finished"
        out.append(condition("Running", True, "RunnerRunning", msg, generation))
    return out


def _rounded(value: Any) -> Any:
    """Floats to 2 decimals, or 3 significant digits below 1 (J per token, a slow rate):
    status is read by people (``kubectl get``); the summary CSV and the ConfigMap keep the
    runner's full figures."""
    if isinstance(value, float):
        return round(value, 2) if abs(value) >= 1 else float(f"{value:.3g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def bounded_status(
    status: dict[str, Any], configmap: str | None, current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A status patch such that the benchmark's whole status (``current`` with the patch
    merged in) stays under :data:`MAX_STATUS_BYTES`.

    What goes first, until it fits: the summary CSV, then per-point warnings, then per-shard
    load (64 runner pods x many points) -- each stays in the results ConfigMap and status
    says where; then the messages of the oldest history entries, then the oldest entries
    themselves (their runs' ConfigMaps are kept, and pruned by ``spec.historyLimit`` as
    before, from the history the operator keeps). A field the patch shrinks is put into the
    patch (a merge patch replaces it whole); ``status`` itself is not changed.
    """
    base = dict(current or {})
    if _size({**base, **status}) <= MAX_STATUS_BYTES:
        return status
    out = dict(status)
    merged = {**base, **out}
    if merged.get("summaryCSV"):
        out["summaryCSV"] = (
            f"(too large for status: see ConfigMap {configmap}, key {SUMMARY_KEY})"
        )
    points = [dict(p) for p in merged.get("points") or []]
    for key in ("warnings", "shardLoad"):
        if _size({**base, **out}) <= MAX_STATUS_BYTES:
            break
        for p in points:
            p.pop(key, None)
        out["points"] = points
    excess = _size({**base, **out}) - MAX_STATUS_BYTES
    if excess > 0 and merged.get("history"):
        history = [dict(h) for h in merged["history"]]
        for h in history[:-1]:  # the newest keeps its message: it is the run just ended
            if excess <= 0:
                break
            excess -= len(json.dumps(h.pop("message", ""))) + len('"message":,')
        while excess > 0 and len(history) > 1:
            excess -= _size(history.pop(0)) + 1
        out["history"] = history
    return out


def digest_patch(digest: RunDigest, summary_csv: str | None) -> dict[str, Any]:
    """The status fields a runner digest sets: progress, points, knee, max under SLO, CSV (a
    CSV over :data:`~llmbench.api.status.SUMMARY_CSV_LIMIT` stays in the ConfigMap only)."""
    patch: dict[str, Any] = {
        "progress": f"{digest.done}/{digest.total}",
        "points": [_rounded(dump(p)) for p in digest.points],
    }
    if digest.knee is not None:
        patch["knee"] = _rounded(dump(digest.knee))
    if digest.max_under_slo is not None:
        patch["maxUnderSLO"] = _rounded(dump(digest.max_under_slo))
    if digest.workloads is not None:  # a two-axis sweep (at most 16, messages clipped)
        patch["workloads"] = [_rounded(dump(w)) for w in digest.workloads]
    if digest.pareto is not None:
        patch["pareto"] = dump(digest.pareto)
    if summary_csv is not None:
        patch["summaryCSV"] = (
            summary_csv if len(summary_csv) <= SUMMARY_CSV_LIMIT else SUMMARY_CSV_MOVED
        )
    return patch


def validity_condition(digest: RunDigest, generation: int | None) -> Condition | None:
    """``MeasurementValid`` from what the runner reported (None before any point finished)."""
    if not digest.points:
        return None
    if digest.valid is False or digest.invalid_reasons:
        reasons = "; ".join(digest.invalid_reasons) or "a point reported a validity warning"
        return condition("MeasurementValid", False, "ValidityWarnings", reasons, generation)
    if digest.error_rate is not None and digest.error_rate > 0.01:
        return condition(
            "MeasurementValid", False, "ErrorRate",
            f"{digest.error_rate:.1%} of requests failed (above 1 %)", generation,
        )
    return condition("MeasurementValid", True, "Valid", "no validity warning", generation)


@dataclass(frozen=True)
class Decision:
    """What reconciling a benchmark should do now."""

    #: ``done`` (finished for this generation), ``wait`` (a run is in progress; nothing to
    #: do), ``ensure`` (make sure run ``run`` exists), ``start`` (begin run ``run``).
    action: Literal["done", "wait", "ensure", "start"]
    run: int
    message: str = ""


def decide(meta: Mapping[str, Any], status: BenchmarkStatus | Mapping[str, Any]) -> Decision:
    """The next step for a benchmark from its generation and status alone (``status`` typed,
    or as the API server returns it).

    A run records its number and generation in status *before* it creates anything, so an
    operator restarted at any moment finds the same run again (``ensure``: creating what
    exists answers 409) instead of starting another. A spec changed during a run does not
    stop it: the run finishes, then the new spec runs (``start`` from the Job handler).
    """
    st = status if isinstance(status, BenchmarkStatus) else BenchmarkStatus.model_validate(status)
    generation = int(meta.get("generation") or 1)
    run = st.run or 0
    phase = st.phase
    observed = st.observed_generation
    if run == 0 or phase is None:
        return Decision("start", max(run, 0) + 1)
    if phase in ("Succeeded", "Failed"):
        if observed == generation:
            return Decision("done", run)
        return Decision("start", run + 1, "the spec changed; running it again")
    if observed != generation and phase == "Running" and st.job:
        return Decision(
            "wait", run, f"the spec changed during run {run}; it runs when this run finishes"
        )
    return Decision("ensure", run)


def history_entry(
    run: int,
    phase: Literal["Succeeded", "Failed"],
    digest: RunDigest | None,
    *,
    started: str | None,
    finished: str,
    valid: bool | None,
    config_map: str,
    message: str,
    regressed: bool | None = None,
    spec_hash: str | None = None,
    artifacts: str | None = None,
    figures: dict[str, float] | None = None,
) -> HistoryEntry:
    """One finished run as ``status.history`` lists it (figures rounded as status is;
    ``figures``: the judged ones, kept for ``spec.baseline.mode: history``)."""
    knee = digest.knee if digest is not None else None
    best = digest.max_under_slo if digest is not None else None
    return HistoryEntry(
        run=run,
        phase=phase,
        started_time=started,
        finished_time=finished,
        points=len(digest.points) if digest is not None else None,
        knee=knee.label if knee is not None and knee.reached else None,
        max_ott_under_slo=_rounded(best.ott) if best is not None else None,
        ttft_p99_ms=_rounded(best.ttft_p99_ms) if best is not None else None,
        valid=valid,
        regressed=regressed,
        spec_hash=spec_hash,
        config_map=config_map,
        figures=_rounded(figures) if figures else None,
        artifacts=artifacts,
        message=message[:256],
    )


def history_limit(spec: Mapping[str, Any]) -> int:
    """``spec.historyLimit`` of a manifest's spec, or the model's default (declared once, on
    :class:`llmbench.api.Spec`): read raw because a run ends even under a spec edited since."""
    return int(spec.get("historyLimit") or Spec.model_fields["history_limit"].default)


def with_history(
    history: Sequence[Mapping[str, Any]], entry: HistoryEntry, limit: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """``history`` with ``entry`` last (replacing an entry of the same run) and at most
    ``limit`` entries; also the run numbers dropped, whose objects are to be deleted."""
    kept = [dict(h) for h in history if h.get("run") != entry.run] + [dump(entry)]
    cut = max(0, len(kept) - limit)
    dropped = [int(h["run"]) for h in kept[:cut] if isinstance(h.get("run"), int)]
    return kept[cut:], dropped
