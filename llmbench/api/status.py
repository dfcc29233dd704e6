"""The ``LLMBenchmark`` status and the run digest the runner Job hands back to the operator.

Why here, beside the spec: three parties read these shapes and must agree byte for byte. The
runner writes a :class:`RunDigest` into its results ConfigMap after each point (and, shortened,
into its termination message); the operator copies it into :class:`BenchmarkStatus` and adds
what only it knows (phase, conditions, stack, queue); the CRD declares the status schema from
these same models, so the API server keeps every field the operator writes (kopf and the API
server prune undeclared status fields) and ``kubectl get llmb`` has columns to print.

Everything is optional and ``None`` is left out when dumped (:func:`dump`): a merge patch with
a missing key keeps the old value, and the API server prunes nulls of non-nullable fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .figures import PointFigures

__all__ = [
    "PHASES",
    "SUMMARY_CSV_LIMIT",
    "SUMMARY_CSV_MOVED",
    "BenchmarkStatus",
    "Condition",
    "HistoryEntry",
    "ConditionStatus",
    "CurrentPoint",
    "KneeStatus",
    "MaxUnderSloStatus",
    "NodeInfo",
    "ParetoStatus",
    "Phase",
    "PointStatus",
    "RegressionVerdict",
    "RunDigest",
    "SearchStatus",
    "ShardLoadStatus",
    "StackStatus",
    "VerdictRow",
    "WorkloadStatus",
    "dump",
]

Phase = Literal["Pending", "Queued", "Running", "Succeeded", "Failed"]
PHASES: tuple[str, ...] = ("Pending", "Queued", "Running", "Succeeded", "Failed")
ConditionStatus = Literal["True", "False", "Unknown"]


#: Characters of ``status.summaryCSV`` at most (a sweep of ~60 points): above it, status holds
#: :data:`SUMMARY_CSV_MOVED` and the CSV stays only in the results ConfigMap (key
#: ``summary.csv``). Why keep a copy in status at all in v1alpha1: ``kubectl get -o jsonpath``
#: and GitOps UIs show it without a second read; why bounded: status must stay small and the
#: figures are in ``status.points`` anyway (docs/versioning.md: it leaves status in v1beta1).
SUMMARY_CSV_LIMIT = 16 * 1024
#: What ``status.summaryCSV`` says when the CSV is over :data:`SUMMARY_CSV_LIMIT`.
SUMMARY_CSV_MOVED = (
    "(over 16 KiB: in the results ConfigMap status.resultsConfigMap names, key summary.csv; "
    "llmbench results -o csv prints it)"
)


def _camel(name: str) -> str:
    """``e2e_p99_ms`` -> ``e2eP99Ms``, as the spec's SLO field is spelled (not ``e2EP99Ms``)."""
    return to_camel(name).replace("e2E", "e2e")


class StatusModel(BaseModel):
    """camelCase keys like the spec; unknown keys ignored, so an older status still reads."""

    model_config = ConfigDict(
        extra="ignore", alias_generator=_camel, validate_by_alias=True, validate_by_name=True
    )


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON mapping of a status object: manifest keys, ``None`` left out."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(StatusModel):
    """A Kubernetes API convention condition (metav1.Condition's fields); ``lastTransitionTime``
    moves only on a flip. In the CRD, ``status.conditions`` is a map keyed by ``type``."""

    type: str = Field(description="The condition, CamelCase, e.g. Succeeded.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(description="Why, one CamelCase word.")
    message: str = Field(default="", description="Why, for people.")
    last_transition_time: str | None = Field(
        default=None, description="When status last changed (RFC 3339 UTC)."
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation the condition was set for."
    )


class ShardLoadStatus(StatusModel):
    """What one runner pod of a several-pod point achieved against its share."""

    shard: int = Field(description="The runner pod's completion index.")
    target: float = Field(description="Its share: slots (closed loop) or requests/s.")
    achieved: float | None = Field(
        default=None, description="Mean requests in flight (closed loop) or completed/s."
    )
    requests: int = Field(default=0, description="Measured requests it sent.")


class PointStatus(StatusModel, PointFigures):
    """One finished point of the sweep (repetitions averaged): what a user sizes from."""

    # The swept value and its figures (ttftP99Ms, ott, ...) are PointFigures' fields; this
    # docstring is the CRD's description.

    name: str = Field(description="The point's artefact folder name.")
    state: Literal["Succeeded", "Failed"] = Field(description="Succeeded or Failed.")
    reason: str | None = Field(default=None, description="Why the point failed.")
    slo_met: bool | None = Field(default=None, description="Every SLO met (None: no SLO).")
    gpu_power_w: float | None = Field(default=None, description="Mean power, summed over GPUs.")
    gpu_energy_j: float | None = Field(default=None, description="Energy in the window, summed.")
    gpu_utilization_pct: float | None = Field(default=None, description="Mean over GPUs.")
    gpus: int | None = Field(default=None, description="GPUs whose metrics were kept.")
    valid: bool | None = Field(default=None, description="No validity warning on this point.")
    warnings: list[str] = Field(default_factory=list, description="Validity warnings, short.")
    replicas: int | None = Field(
        default=None, description="Runner pods that drove the point (absent: one)."
    )
    repeated: int | None = Field(
        default=None,
        description="Times the point was run again because a runner pod's data was incomplete.",
    )
    start_spread_ms: float | None = Field(
        default=None, description="Spread of the runner pods' first sends (ms)."
    )
    shard_load: list[ShardLoadStatus] = Field(
        default_factory=list, description="Each runner pod's achieved load against its share."
    )
    workload: str | None = Field(
        default=None, description="Two-axis sweeps: the point's workload, e.g. isl128-osl512."
    )


class KneeStatus(StatusModel):
    """Where throughput stops paying for latency, and the rule that said so."""

    reached: bool = Field(default=False, description="A knee rule fired within the sweep.")
    value: float | None = Field(default=None, description="The swept value at the knee.")
    label: str | None = Field(default=None, description="The value as printed, e.g. '16'.")
    rule: str | None = Field(default=None, description="'ott-saturation' or 'ttft-2x'.")
    message: str = Field(default="", description="The rule and the values that fired it.")


class SearchStatus(StatusModel):
    """An adaptive max-load-under-SLO search (``spec.sweep.search``): its answer and probes."""

    answer: float | None = Field(default=None, description="Highest load meeting every SLO.")
    first_failing: float | None = Field(
        default=None, description="Lowest probed load that broke the SLO."
    )
    resolution: str = Field(default="", description="'1' or '5 %' (of the value).")
    probes: list[str] = Field(
        default_factory=list, description="The probes in order, 'value:pass' or 'value:fail'."
    )
    grid_points: int | None = Field(
        default=None, description="Points a grid of the same resolution would have run."
    )
    converged: bool = Field(default=False, description="The resolution (or a range end) reached.")


class MaxUnderSloStatus(StatusModel):
    """The highest-throughput point that meets every SLO, and the first one that does not."""

    value: float | None = Field(default=None, description="Its swept value.")
    ott: float | None = Field(default=None, description="Its output token throughput (tok/s).")
    ttft_p99_ms: float | None = Field(default=None, description="Its p99 TTFT (ms).")
    first_failing_value: float | None = Field(
        default=None, description="The first swept value that missed an SLO."
    )
    first_failing_metric: str | None = Field(
        default=None, description="The SLO it missed first, e.g. ttftP99Ms."
    )
    message: str = Field(default="", description="The same, in words.")
    search: SearchStatus | None = Field(
        default=None, description="The adaptive search that found it, when the sweep ran one."
    )


class WorkloadStatus(StatusModel):
    """One workload of a two-axis sweep (``spec.sweep.workloads``): its knee and its max load
    under SLO, as a one-axis sweep of its own would report them."""

    workload: str = Field(description="The workload's label, e.g. isl128-osl512.")
    knee: float | None = Field(default=None, description="The load value at its knee.")
    max_under_slo: float | None = Field(
        default=None, alias="maxUnderSLO",
        description="Its highest-throughput load value meeting every SLO.",
    )
    max_ott: float | None = Field(default=None, description="That point's OTT (tok/s).")
    message: str = Field(default="", description="Knee and SLO verdict in words, short.")


class ParetoStatus(StatusModel):
    """Two-axis sweeps: the points on the Pareto frontier of output tokens/s per GPU (or per
    run) against output tokens/s per user."""

    basis: Literal["gpu", "run"] = Field(
        description="gpu: throughput over the kept GPUs; run: over the whole target (some "
        "point had no GPU telemetry)."
    )
    frontier: list[str] = Field(
        default_factory=list, max_length=40,
        description="The non-dominated points' names, highest per-user speed last.",
    )


class VerdictRow(StatusModel):
    """One figure that broke its tolerance (or went missing) against the baseline."""

    scope: str = Field(description="'sweep' or the swept value's label, e.g. '16'.")
    metric: str = Field(description="llmbench compare's metric key, e.g. ttft_p99.")
    baseline: float | None = Field(default=None, description="The baseline's figure.")
    value: float | None = Field(default=None, description="This run's figure.")
    change_pct: float | None = Field(default=None, description="(value - baseline) / baseline.")
    tolerance_pct: float | None = Field(default=None, description="Allowed bad-way change.")
    verdict: str = Field(description="'regression' or 'missing' (the run lacks the figure).")
    lower: float | None = Field(
        default=None, description="baseline.mode history: the noise band's lower bound."
    )
    upper: float | None = Field(
        default=None, description="baseline.mode history: the noise band's upper bound."
    )


class RegressionVerdict(StatusModel):
    """The run against its baseline, through ``llmbench compare``'s rows and verdicts."""

    baseline: str = Field(description="What was compared with: 'run 3' or 'spec.baseline.values'.")
    baseline_run: int | None = Field(default=None, description="The baseline's run number.")
    regressed: bool = Field(default=False, description="A figure broke its tolerance.")
    compared: int = Field(default=0, description="Figures that had a tolerance and both values.")
    rows: list[VerdictRow] = Field(
        default_factory=list,
        description="The figures that regressed (at most 20); mode history: every judged "
        "figure with its band, the regressed ones first.",
    )
    message: str = Field(default="", description="The verdict in words.")
    history_runs: list[int] = Field(
        default_factory=list,
        description="baseline.mode history: the runs whose noise band the run was judged by "
        "(baseline is the median).",
    )


class RunDigest(StatusModel):
    """What the runner reports after each point: written to the results ConfigMap whole and,
    trimmed to fit 4 KiB, to the termination message when the ConfigMap cannot be written."""

    run: int = Field(default=1, description="The run number this digest belongs to.")
    total: int = Field(default=0, description="Points (x repetitions) the sweep will run.")
    done: int = Field(default=0, description="Points finished (failed included).")
    points: list[PointStatus] = Field(default_factory=list)
    knee: KneeStatus | None = None
    max_under_slo: MaxUnderSloStatus | None = Field(default=None, alias="maxUnderSLO")
    valid: bool | None = Field(default=None, description="Every point's measurement valid.")
    invalid_reasons: list[str] = Field(default_factory=list)
    error_rate: float | None = Field(default=None, description="Errors / requests, all points.")
    finished: bool = Field(default=False, description="The sweep ended (all points or stopped).")
    failed: str | None = Field(default=None, description="Why the run failed as a whole.")
    runner_node: str | None = None
    stopped_after_knee: bool | None = None
    replicas: int | None = Field(
        default=None, description="Runner pods driving each point (absent: one)."
    )
    regression: RegressionVerdict | None = Field(
        default=None, description="Against the baseline the operator passed (none: no baseline)."
    )
    figures: dict[str, float] | None = Field(
        default=None,
        description="The judged figures of a finished run by 'scope/metric' (sweep/peak_ott, "
        "16/ttft_p99): what a later run's noise band (baseline.mode history) is made of.",
    )
    workloads: list[WorkloadStatus] | None = Field(
        default=None, max_length=16,
        description="Two-axis sweeps: each workload's knee and max under SLO.",
    )
    pareto: ParetoStatus | None = Field(
        default=None, description="Two-axis sweeps: the Pareto frontier's points."
    )


class NodeInfo(StatusModel):
    """A node that hosts a target pod, with its GPU labels (NVIDIA GPU feature discovery)."""

    name: str = Field(description="The node's name.")
    zone: str | None = Field(default=None, description="topology.kubernetes.io/zone.")
    gpu_product: str | None = Field(default=None, description="nvidia.com/gpu.product.")
    gpu_count: str | None = Field(default=None, description="nvidia.com/gpu.count.")
    driver_version: str | None = Field(
        default=None, description="nvidia.com/cuda.driver.major (.minor.rev)."
    )
    cuda_version: str | None = Field(
        default=None, description="nvidia.com/cuda.runtime.major (.minor)."
    )


class StackStatus(StatusModel):
    """What was measured: the serving image by digest, its args, nodes, and the runner."""

    target_pods: list[str] = Field(
        default_factory=list, description="The Ready inference pods the run measured."
    )
    target_image: str | None = Field(default=None, description="Their container's image.")
    target_image_id: str | None = Field(default=None, description="containerStatuses imageID.")
    target_args: list[str] = Field(
        default_factory=list, description="Their container's args (secret-like values redacted)."
    )
    nodes: list[NodeInfo] = Field(default_factory=list, description="The nodes that host them.")
    runner_node: str | None = Field(
        default=None, description="The runner pod's node (several runners: shard 0's)."
    )
    runner_nodes: list[str] = Field(
        default_factory=list,
        description="spec.runner.replicas > 1: each runner shard's node, in index order.",
    )
    runner_image: str | None = Field(default=None, description="The runner pod's image.")
    telemetry_urls: list[str] = Field(
        default_factory=list, description="The dcgm-exporter URLs the runner scraped."
    )


class HistoryEntry(StatusModel):
    """One finished run, newest last in ``status.history``; its results stay in ``configMap``."""

    run: int = Field(description="The run number.")
    phase: Phase = Field(description="Succeeded or Failed.")
    started_time: str | None = Field(default=None, description="When its Job was created.")
    finished_time: str | None = Field(default=None, description="When it ended.")
    points: int | None = Field(default=None, description="Points that ran.")
    knee: str | None = Field(default=None, description="The knee's value as printed, if reached.")
    max_ott_under_slo: float | None = Field(default=None, description="Max OTT under SLO.")
    ttft_p99_ms: float | None = Field(default=None, description="p99 TTFT at that point.")
    valid: bool | None = Field(default=None, description="MeasurementValid of the run.")
    regressed: bool | None = Field(
        default=None, description="Regressed of the run (None: not judged, e.g. no baseline)."
    )
    spec_hash: str | None = Field(
        default=None, description="The measured settings' digest: runs with equal ones compare."
    )
    config_map: str | None = Field(default=None, description="The run's results ConfigMap.")
    figures: dict[str, float] | None = Field(
        default=None,
        description="baseline.mode history: the run's judged figures by 'scope/metric', "
        "which later runs' noise bands are made of.",
    )
    artifacts: str | None = Field(
        default=None, description="The run's folder on spec.artifacts.pvc: pvc/<claim>/<path>.",
    )
    message: str | None = Field(default=None, description="How the run ended.")


class CurrentPoint(StatusModel):
    """The point under way, as the runner last reported it (every ~10 s): how far it is and
    when it and the sweep should end. A request-bound point counts requests (warm-up
    included), a time-bound one seconds."""

    name: str = Field(description="The point's artefact folder name.")
    value: float = Field(description="The swept value (concurrency, request rate, ...).")
    number: int = Field(description="Its place in the sweep, from 1 (repetitions counted).")
    total: int = Field(description="Points (x repetitions) the sweep runs.")
    requests_done: int = Field(
        default=0, description="Requests finished so far (warm-up and errors included)."
    )
    requests_target: int | None = Field(
        default=None, description="Requests the point sends (absent: it is bound by time)."
    )
    errors: int = Field(default=0, description="Requests that failed so far.")
    seconds_done: float = Field(default=0.0, description="Seconds since the point started.")
    seconds_target: float | None = Field(
        default=None, description="Seconds the point measures for (a time-bound point)."
    )
    percent: float | None = Field(
        default=None, description="Done of the target, 0 to 100 (absent: no target known)."
    )
    started: str = Field(description="When the point started (RFC 3339 UTC).")
    updated: str = Field(description="When the runner wrote this (RFC 3339 UTC).")
    point_eta: str | None = Field(
        default=None, description="When the point should end at its pace so far (RFC 3339)."
    )
    sweep_eta: str | None = Field(
        default=None,
        description="When the sweep should end: this point's end plus the points left at "
        "the mean duration of the points this runner pod measured (RFC 3339).",
    )


class BenchmarkStatus(StatusModel):
    """``status`` of an ``LLMBenchmark``."""

    phase: Phase | None = Field(
        default=None, description="Pending, Queued, Running, Succeeded or Failed (the current run)."
    )
    observed_generation: int | None = Field(
        default=None, description="The spec generation the current run measures."
    )
    run: int | None = Field(default=None, description="Run number; each new run adds one.")
    progress: str | None = Field(
        default=None,
        description="Points finished of the sweep's, and how far the point under way is: "
        "'3/6 41%' (the PROGRESS column).",
    )
    current_point: CurrentPoint | None = Field(
        default=None, description="The point under way (absent between points and after the run)."
    )
    points: list[PointStatus] = Field(
        default_factory=list, description="The current run's finished points, in sweep order."
    )
    knee: KneeStatus | None = None
    max_under_slo: MaxUnderSloStatus | None = Field(default=None, alias="maxUnderSLO")
    workloads: list[WorkloadStatus] | None = Field(
        default=None, max_length=16,
        description="Two-axis sweeps (spec.sweep.workloads): each workload's knee and max "
        "load under SLO, in the spec's order.",
    )
    pareto: ParetoStatus | None = Field(
        default=None,
        description="Two-axis sweeps: the points on the Pareto frontier of output tokens/s "
        "per GPU against output tokens/s per user.",
    )
    summary_csv: str | None = Field(
        default=None, alias="summaryCSV",
        description="analyze_export_genai_perf.csv of the current run, up to 16 KiB (above: a "
        "note, the CSV being in the results ConfigMap, key summary.csv).",
    )
    results_config_map: str | None = Field(
        default=None, description="The owned ConfigMap holding the full results of the run."
    )
    job: str | None = Field(default=None, description="The runner Job of the current run.")
    stack: StackStatus | None = None
    queued_behind: str | None = Field(default=None, description="The benchmark holding the Lease.")
    started_time: str | None = Field(default=None, description="When the runner Job was created.")
    last_run_time: str | None = Field(default=None, description="When the last run finished.")
    message: str | None = Field(default=None, description="What is happening now, in words.")
    last_schedule_time: str | None = Field(
        default=None, description="The latest schedule tick handled (run, skipped or missed)."
    )
    next_run_time: str | None = Field(default=None, description="The next schedule tick.")
    spec_hash: str | None = Field(
        default=None,
        description="Digest of the measured settings of the current run (the spec without "
        "its scheduling fields): a spec change that leaves it equal starts no run.",
    )
    target_digest: str | None = Field(
        default=None,
        description="spec.trigger.onTargetChange: digest of the target pods' image IDs and "
        "arguments as the last run (or the first look) found them; a different one starts a "
        "run.",
    )
    regression: RegressionVerdict | None = Field(
        default=None, description="The last finished run against its baseline."
    )
    history: list[HistoryEntry] = Field(
        default_factory=list, description="The last runs (spec.historyLimit), oldest first."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Accepted, TargetReady, TelemetryAvailable, RunnerScheduled, Running, "
        "MeasurementValid, Succeeded, Regressed (a map keyed by type).",
    )
