"""The run digest: what the runner hands the operator after every point, in a few KiB.

Why pure functions over the sweep's own analysis: the operator mirrors this into ``status``
(``kubectl get llmb`` prints it), so its knee, max-under-SLO and per-point figures must be the
very numbers ``llmbench analyze`` prints and writes to ``analyze_export_genai_perf.csv`` for
the same points. :func:`build_digest` therefore reads
:func:`~llmbench.runner.sweep.analysis.analysis` (the knee of :mod:`..sweep.knee`, the SLO
verdict of ``max_under_slo``) and adds what a status needs on top: GPU figures summed over the
kept GPUs, and validity per point from the point results (foreign traffic, client dispatch or
event-loop lag, stale GPU samples, an error rate above 1 %: the ``MeasurementValid`` reasons).

:func:`termination_message` is the fallback channel: when the ConfigMap cannot be written, the
kubelet keeps at most :data:`~llmbench.api.job.TERMINATION_LIMIT` bytes of the container's
termination message, so the digest is trimmed (warnings first, then early points, then long
texts) until it fits, and stays valid JSON of :class:`~llmbench.api.status.RunDigest`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from llmbench.api.job import TERMINATION_LIMIT, BaselineContext
from llmbench.api.results import PointResult, SweepAnalysis
from llmbench.api.spec import MAX_STORED_POINTS, Tolerances
from llmbench.api.status import (
    KneeStatus,
    MaxUnderSloStatus,
    ParetoStatus,
    PointStatus,
    RunDigest,
    SearchStatus,
    ShardLoadStatus,
    WorkloadStatus,
    dump,
)
from llmbench.runner.sweep import knee as knee_rules
from llmbench.runner.sweep.compare import regression_verdict
from llmbench.runner.sweep.noise import history_verdict, judged_figures
from llmbench.runner.sweep.run import DONE, PointRun, SweepResult

__all__ = [
    "ERROR_RATE_LIMIT",
    "INVALIDATING_SIGNALS",
    "build_digest",
    "failed_reason",
    "knee_status",
    "max_under_slo_status",
    "point_statuses",
    "point_warnings",
    "rule_name",
    "termination_message",
    "workload_statuses",
]

#: Telemetry validity signals that make a point's numbers untrustworthy (``MeasurementValid``).
#: Server queueing, a full KV cache or token-count mismatches are what high load looks like;
#: they stay in the point's full result, not in the digest.
INVALIDATING_SIGNALS = ("foreign_traffic", "dispatch_lag", "stale_gpu_samples")
#: Errors / measured requests above this make a point invalid.
ERROR_RATE_LIMIT = 0.01
#: A warning or reason in the digest is cut to this many characters.
TEXT_LIMIT = 240
#: The digest's run-level list of invalid reasons holds at most this many lines.
MAX_REASONS = 20

#: The knee module's rule ids -> the status's rule names.
_RULES = {"ttft_p99": "ttft-2x", "ott_plateau": "ott-saturation"}


def rule_name(rule: str) -> str:
    """The status's name of a knee rule: ``ttft-2x`` or ``ott-saturation``."""
    if rule in _RULES.values():
        return rule
    if rule in _RULES:
        return _RULES[rule]
    low = rule.lower()
    if "ttft" in low:
        return "ttft-2x"
    if "ott" in low or "throughput" in low:
        return "ott-saturation"
    return rule


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _mean(values: Sequence[float | None]) -> float | None:
    nums = [float(v) for v in values if v is not None]
    return sum(nums) / len(nums) if nums else None


def _sum(values: Sequence[float | None]) -> float | None:
    nums = [float(v) for v in values if v is not None]
    return sum(nums) if nums else None


def point_warnings(summary: PointResult) -> list[str]:
    """Why one measured run's numbers should not be trusted (empty: nothing known against them).

    The reasons ``MeasurementValid`` lists: foreign traffic, client dispatch lag, the client's
    event loop lagging, stale GPU samples, and an error rate above 1 %.
    """
    out: list[str] = []
    if summary.telemetry is not None:
        for sig in summary.telemetry.validity:
            if sig.signal in INVALIDATING_SIGNALS:
                out.append(_clip(f"{sig.signal}: {sig.message}"))
    if summary.client is not None:
        out += [_clip(f"client_lag: {w}") for w in summary.client.warnings]
    if summary.shards is not None:
        out += [_clip(f"shard_skew: {w}") for w in summary.shards.warnings]
    measured = summary.window.measured_requests
    if measured and summary.errors.total / measured > ERROR_RATE_LIMIT:
        rate = summary.errors.total / measured
        out.append(
            f"error_rate: {summary.errors.total} of {measured} requests failed "
            f"({rate * 100:.1f} % > {ERROR_RATE_LIMIT * 100:g} %)"
        )
    return out


def _gpu_figures(
    runs: Sequence[PointRun],
) -> tuple[float | None, float | None, float | None, int | None]:
    """Mean over a point's repetitions of: power and energy summed over the kept GPUs, mean
    utilisation, and the GPU count; all None when no repetition has GPU telemetry."""
    power: list[float | None] = []
    energy: list[float | None] = []
    util: list[float | None] = []
    count: list[float | None] = []
    for r in runs:
        s = r.summary
        if r.status != DONE or s is None or s.telemetry is None or not s.telemetry.gpus:
            continue
        gpus = list(s.telemetry.gpus.values())
        power.append(_sum([g.power_w.avg for g in gpus]))
        energy.append(_sum([g.energy_j for g in gpus]))
        util.append(_mean([g.utilization_pct.avg for g in gpus]))
        count.append(float(len(gpus)))
    gpus_mean = _mean(count)
    return (
        _mean(power),
        _mean(energy),
        _mean(util),
        round(gpus_mean) if gpus_mean is not None else None,
    )


def point_statuses(result: SweepResult, data: SweepAnalysis) -> list[PointStatus]:
    """One :class:`PointStatus` per swept value reached (repetitions averaged, as the CSV)."""
    out = []
    for sp, runs in zip(data.points, result.by_value(), strict=True):
        ok = sp.status == "ok"
        warnings: list[str] = []
        for r in runs:
            if r.status == DONE and r.summary is not None:
                for w in point_warnings(r.summary):
                    text = w if len(runs) == 1 else f"rep{r.repetition}: {w}"
                    if text not in warnings:
                        warnings.append(text)
        power, energy, util, gpus = _gpu_figures(runs)
        out.append(
            PointStatus.of(
                sp.metrics,
                name=sp.name,
                state="Succeeded" if ok else "Failed",
                reason=None if ok else _clip(sp.reason or "failed"),
                slo_met=sp.meets_slo,
                valid=(not warnings) if ok else None,
                warnings=warnings,
                gpu_power_w=power,
                gpu_energy_j=energy,
                gpu_utilization_pct=util,
                gpus=gpus,
                **_shard_fields(runs),
                **({"workload": sp.workload} if sp.workload is not None else {}),
            )
        )
    return out


def _shard_fields(runs: Sequence[PointRun]) -> dict[str, Any]:
    """A several-pod point's replica count, repeats, start spread and per-pod load (the last
    repetition's); nothing for a single runner's point, whose status stays as it was."""
    shards = [r.summary.shards for r in runs if r.summary is not None and r.summary.shards]
    if not shards:
        return {}
    last = shards[-1]
    closed = all(s.mean_in_flight is not None for s in last.shards) and not any(
        s.dispatch_lag_p99_ms is not None for s in last.shards
    )
    return {
        "replicas": last.replicas,
        "repeated": sum(s.attempts - 1 for s in shards) or None,
        "start_spread_ms": last.start_spread_ms,
        "shard_load": [
            ShardLoadStatus(
                shard=s.shard, target=s.target, requests=s.requests,
                achieved=s.mean_in_flight if closed else s.achieved_rps,
            )
            for s in last.shards
        ],
    }


def knee_status(data: SweepAnalysis) -> KneeStatus:
    """The knee as the status shows it: value, label, the rule that fired, the sentence."""
    k = data.knee
    if k is None:
        return KneeStatus(reached=False, message=data.knee_message)
    return KneeStatus(
        reached=True,
        value=k.value,
        label=f"{k.value:g}",
        rule=",".join(dict.fromkeys(rule_name(r) for r in k.rules)) or None,
        message=data.knee_message,
    )


def max_under_slo_status(data: SweepAnalysis) -> MaxUnderSloStatus | None:
    """Max OTT under SLO and the first failing point with the metric(s) it broke; None when
    the spec sets no SLO."""
    slo = data.slo
    if slo is None:
        return None
    out = MaxUnderSloStatus(message="; ".join(slo.messages))
    search = data.search
    if search is not None:
        out.search = SearchStatus(
            answer=search.answer,
            first_failing=search.first_failing,
            resolution=search.resolution_text,
            probes=[f"{p.value:g}:{'pass' if p.meets_slo else 'fail'}" for p in search.probes],
            grid_points=search.grid_points,
            converged=search.converged,
        )
    if slo.best_index is not None:
        best = data.points[slo.best_index]
        out.value = best.value
        out.ott = slo.max_ott
        out.ttft_p99_ms = best.metrics.ttft_p99_ms
    if slo.first_failure_index is not None:
        first = data.points[slo.first_failure_index]
        out.first_failing_value = first.value
        if first.status != "ok":
            out.first_failing_metric = "failed"
        else:
            broken = knee_rules.evaluate_slo(first.metrics, slo.limits)
            out.first_failing_metric = ",".join(v.metric for v in broken) or None
    return out


def failed_reason(result: SweepResult) -> str | None:
    """Why the run failed as a whole: no point succeeded, or a failed point stopped it."""
    if result.stopped_on_failure:
        last = result.failed_runs[-1] if result.failed_runs else None
        why = f": {last.name}: {last.reason}" if last is not None else ""
        return _clip(f"the sweep stopped on a failed point (onPointFailure: stop){why}")
    if result.runs and not any(r.status == DONE for r in result.runs):
        reasons = list(dict.fromkeys(r.reason or "failed" for r in result.runs))
        return _clip("no point succeeded: " + "; ".join(reasons))
    return None


def build_digest(
    result: SweepResult,
    data: SweepAnalysis,
    *,
    run: int = 1,
    finished: bool = False,
    failed: str | None = None,
    runner_node: str | None = None,
    baseline: BaselineContext | None = None,
    tolerances: dict[str, float] | None = None,
) -> RunDigest:
    """The digest of a sweep so far from ``data``, its analysis (the one the CSV and the
    report are made of, so the status cannot tell another story).

    ``finished`` says the sweep ended (every point, the knee stop, or a stop on failure);
    ``failed`` is the whole run's failure (default :func:`failed_reason` once finished).
    With a ``baseline`` the digest carries the regression verdict against it (``tolerances``
    in percent by ``llmbench compare``'s metric keys; ``spec.baseline``'s defaults when not
    given): against the history's noise bands when the baseline is a history
    (``spec.baseline.mode: history``). A finished digest carries the judged ``figures``, which
    later runs' bands are made of.
    """
    points = point_statuses(result, data)
    measured = errors = 0
    for r in result.runs:
        if r.summary is not None:
            measured += r.summary.window.measured_requests
            errors += r.summary.errors.total
    succeeded = [p for p in points if p.state == "Succeeded"]
    reasons = [f"{p.name}: {w}" for p in succeeded for w in p.warnings]
    if failed is None and finished:
        failed = failed_reason(result)
    judged = Tolerances().percentages() if tolerances is None else tolerances
    digest = RunDigest(
        run=run,
        total=len(result.values) * len(result.workloads) * result.spec.repetitions,
        done=len(result.runs),
        points=points,
        knee=knee_status(data),
        valid=all(p.valid for p in succeeded) if succeeded else None,
        invalid_reasons=reasons[:MAX_REASONS],
        error_rate=errors / measured if measured else None,
        finished=finished,
        failed=_clip(failed) if failed else None,
        runner_node=runner_node,
        stopped_after_knee=result.stopped_after_knee or None,
        replicas=result.spec.runner.replicas if result.spec.runner.replicas > 1 else None,
        regression=(
            None if baseline is None
            else history_verdict(baseline, data, judged) if baseline.history
            else regression_verdict(baseline, data, judged)
        ),
        figures=judged_figures(data, judged) if finished else None,
    )
    # set after construction: the field's alias (maxUnderSLO) is the constructor's keyword
    digest.max_under_slo = max_under_slo_status(data)
    digest.workloads = workload_statuses(data)
    if data.pareto is not None:
        digest.pareto = ParetoStatus(basis=data.pareto.basis,
                                     frontier=data.pareto.frontier[:MAX_STORED_POINTS])
    return digest


def workload_statuses(data: SweepAnalysis) -> list[WorkloadStatus] | None:
    """A two-axis sweep's per-workload knee and max under SLO, messages clipped (None for a
    one-axis sweep)."""
    if data.workloads is None:
        return None
    out = []
    for w in data.workloads:
        best = w.slo.best if w.slo is not None else None
        value = next((p.value for p in data.points if p.name == best), None)
        words = [w.knee_message, *(w.slo.messages if w.slo is not None else ())]
        out.append(WorkloadStatus.model_validate({
            "workload": w.label,
            "knee": w.knee.value if w.knee is not None else None,
            "maxUnderSLO": value,
            "maxOtt": w.slo.max_ott if w.slo is not None else None,
            "message": _clip("; ".join(words), 300),
        }))
    return out


def _size(digest: RunDigest) -> int:
    return len(_encode(digest).encode("utf-8"))


def _encode(digest: RunDigest) -> str:
    return json.dumps(dump(digest), separators=(",", ":"), ensure_ascii=True)


def termination_message(digest: RunDigest, limit: int = TERMINATION_LIMIT) -> str:
    """The digest as compact JSON of at most ``limit`` bytes (the kubelet's cap).

    Trimmed in this order until it fits: per-point warnings (``invalidReasons`` keeps the
    run's first few), points before the last few (the knee and max-under-SLO stay in their own
    fields), long texts, then every point. What remains is always a valid ``RunDigest``.
    """
    d = digest.model_copy(deep=True)
    if _size(d) <= limit:
        return _encode(d)
    for p in d.points:
        p.warnings = []
    d.invalid_reasons = d.invalid_reasons[:3]
    if d.regression is not None:
        d.regression.rows = d.regression.rows[:1]
    # the history's figures are read from the ConfigMap's digest; the fallback keeps none
    d.figures = None
    for keep in (6, 4, 2):
        if _size(d) <= limit:
            return _encode(d)
        d.points = d.points[-keep:]
    if _size(d) > limit:
        short = 120
        d.invalid_reasons = [_clip(r, short) for r in d.invalid_reasons[:1]]
        for p in d.points:
            p.reason = _clip(p.reason, short) if p.reason else None
        if d.knee is not None:
            d.knee.message = _clip(d.knee.message, 300)
        if d.max_under_slo is not None:
            d.max_under_slo.message = _clip(d.max_under_slo.message, 300)
        d.failed = _clip(d.failed, 300) if d.failed else None
        for w in d.workloads or ():  # two axes: the figures stay, the words go first
            w.message = ""
        if d.pareto is not None and _size(d) > limit:
            d.pareto.frontier = d.pareto.frontier[:4]
    if _size(d) > limit:
        d.points = []
        d.invalid_reasons = []
    if _size(d) > limit:  # only pathological inputs get here: keep the counters
        d = RunDigest(run=d.run, total=d.total, done=d.done, valid=d.valid,
                      finished=d.finished, failed=_clip(d.failed, 200) if d.failed else None)
    return _encode(d)
