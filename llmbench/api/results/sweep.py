"""A sweep: ``analyze_export_genai_perf.json`` as :class:`SweepAnalysis` and its parts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, computed_field, model_validator

from ..figures import PointFigures
from .files import ResultModel
from .point import PointResult, Stat
from .telemetry import GPU_SUMMARY_COLUMNS

__all__ = [
    "CostSummary",
    "GpuRow",
    "KneeSummary",
    "PARETO_BASES",
    "ParetoBasis",
    "ParetoPoint",
    "ParetoSummary",
    "PointMetrics",
    "REASONING_FIGURES",
    "SCHEDULE_FIGURES",
    "RunInfo",
    "SearchProbe",
    "SearchSummary",
    "SloVerdict",
    "Spread",
    "SweepAnalysis",
    "SweepPoint",
    "WorkloadSummary",
]

#: PointMetrics' latencies from the scheduled send (open loop), beside the figures.
SCHEDULE_FIGURES = ("ttft_p99_from_schedule_ms", "e2e_p99_from_schedule_ms")

#: PointMetrics' reasoning figures (some answer reasoned), beside the figures.
REASONING_FIGURES = ("ttfa_p99_ms", "reasoning_tokens_avg")


class PointMetrics(ResultModel, PointFigures):
    """The figures of one sweep point (:class:`~llmbench.api.figures.PointFigures`: what the
    knee and SLO rules read, the digest and ``llmbench compare`` hand on) and the counts the
    goodput ratio comes from.

    ``goodput_ratio`` is derived (written, never read back: it follows from the other two).
    ``joules_per_output_token`` is written once per point, as the point's
    (:class:`SweepPoint` fills it in when it reads a file), so the file keeps its keys.
    """

    model_config = ConfigDict(frozen=True)

    completed: int = 0
    good_requests: int | None = None
    failed: str | None = None
    #: open loop: p99 TTFT and request latency from the scheduled send (optional keys), which
    #: the SLO verdicts judge when present
    ttft_p99_from_schedule_ms: float | None = None
    e2e_p99_from_schedule_ms: float | None = None
    #: reasoning (optional keys): p99 time to the first answer token and the mean reasoning
    #: tokens per request, where some answer reasoned (TTFT is the first token of either kind)
    ttfa_p99_ms: float | None = None
    reasoning_tokens_avg: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        if isinstance(data, dict) and "goodput_ratio" in data:
            data = {k: v for k, v in data.items() if k != "goodput_ratio"}
        return data

    @model_validator(mode="after")
    def _all_keys_written(self) -> PointMetrics:
        # The defaults are for building one by hand; the file lists every figure, None or not,
        # but the energy figure beside the metrics (SweepPoint.joules_per_output_token).
        written = set(type(self).model_fields) - {"joules_per_output_token"}
        written -= {k for k in (*SCHEDULE_FIGURES, *REASONING_FIGURES) if getattr(self, k) is None}
        object.__setattr__(self, "__pydantic_fields_set__", written)
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def goodput_ratio(self) -> float | None:
        """Fraction of completed requests meeting every per-request SLO."""
        if self.good_requests is None or not self.completed:
            return None
        return self.good_requests / self.completed

    @classmethod
    def from_summary(cls, value: float, summary: PointResult) -> PointMetrics:
        """The knee/SLO figures of one measured point."""

        def p99(stat: Stat | None) -> float | None:
            return None if stat is None else stat.p99

        efficiency = summary.telemetry.efficiency if summary.telemetry is not None else None
        return cls(
            value=value,
            ttft_p99_ms=p99(summary.time_to_first_token),
            itl_p99_ms=p99(summary.inter_token_latency),
            e2e_p99_ms=p99(summary.request_latency),
            ott=summary.output_token_throughput.avg,
            rps=summary.request_throughput.avg,
            goodput=summary.goodput.avg if summary.goodput is not None else None,
            joules_per_output_token=(
                efficiency.joules_per_output_token if efficiency is not None else None
            ),
            completed=summary.window.completed_requests,
            good_requests=summary.goodput.good_requests if summary.goodput is not None else None,
            ttft_p99_from_schedule_ms=p99(summary.time_to_first_token_from_schedule),
            e2e_p99_from_schedule_ms=p99(summary.request_latency_from_schedule),
            ttfa_p99_ms=p99(summary.time_to_first_answer_token),
            reasoning_tokens_avg=(
                None if summary.reasoning_token_count is None
                else summary.reasoning_token_count.avg
            ),
        )


class Spread(ResultModel):
    """Mean, std, min, max of one metric over the repetitions of one point, and whether they
    landed too far apart to compare on (``unstable``)."""

    mean: float
    std: float
    min: float
    max: float
    n: int
    spread_pct: float
    unstable: bool

    @property
    def relative(self) -> float:
        """(max - min) / mean: how far apart the repetitions landed."""
        return self.spread_pct / 100


class GpuRow(ResultModel):
    """One GPU's row of GenAI-Perf's GPU table for one run (``None``: not measured).

    Kept in the sweep's analysis so ``analyze_export_genai_perf.csv`` (and the operator's
    ``status.summaryCSV``) is built from the analysis alone.
    """

    gpu: str
    power_p99_w: float | None
    energy_mj: float | None
    utilization_p99_pct: float | None
    memory_used_p99_gb: float | None
    power_limit_w: float | None
    memory_total_gb: float | None

    @classmethod
    def from_row(cls, row: dict[str, str | float | None]) -> GpuRow:
        """From a :meth:`TelemetrySummary.gpu_rows` row."""
        values = [row.get(c) for c in GPU_SUMMARY_COLUMNS]
        fields = list(cls.model_fields)
        return cls.model_validate(dict(zip(fields, [str(values[0]), *values[1:]], strict=True)))

    def row(self) -> dict[str, str | float | None]:
        """Keyed by :data:`GPU_SUMMARY_COLUMNS`, as :meth:`TelemetrySummary.gpu_rows`."""
        values = [getattr(self, f) for f in type(self).model_fields]
        return dict(zip(GPU_SUMMARY_COLUMNS, values, strict=True))


class RunInfo(ResultModel):
    """One run (repetition) of a point: its folder, status, why it failed and (an optional
    key, with GPU telemetry) its rows of GenAI-Perf's GPU table."""

    name: str
    status: str
    reason: str | None
    resumed: bool
    gpus: list[GpuRow] | None = None


class SweepPoint(ResultModel):
    """One swept value: aggregated figures, spreads, cost and (with SLOs) the verdict."""

    name: str
    value: float
    label: str
    status: Literal["ok", "failed"]
    reason: str | None
    runs: list[RunInfo]
    metrics: PointMetrics
    spreads: dict[str, Spread]
    unstable: list[str]
    cost_per_million_output_tokens: float | None
    #: ``metrics.joules_per_output_token``, where the file has always kept it
    joules_per_output_token: float | None
    isl: float | None
    achieved_request_rate: float | None
    meets_slo: bool | None = None
    violations: list[str] | None = None
    #: measured p99 input / output sequence length (mean over repetitions): GenAI-Perf's
    #: ``ISL`` and ``p99 Output Sequence Length (tokens)`` columns (optional keys).
    isl_p99: float | None = None
    osl_p99: float | None = None
    #: several runner pods drove the point (``spec.runner.replicas``): how many, and each
    #: pod's achieved load against its share (last repetition), e.g. ``"1.98/2"``
    replicas: int | None = None
    shard_load: list[str] | None = None
    #: two-axis sweeps: the point's workload label (``isl128-osl512``); optional keys with
    #: the Pareto inputs: the mean over repetitions of the per-request output tokens/s after
    #: the first token (GenAI-Perf's ``output_token_throughput_per_user`` avg, 1000 / the
    #: request's ITL in ms), and the kept GPUs' count (none without DCGM telemetry)
    workload: str | None = None
    tokens_per_user: float | None = None
    gpus: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _energy_into_metrics(cls, data: Any) -> Any:
        # The file keeps the energy figure beside the metrics; the metrics carry it too, so
        # everything that reads a point's figures finds all of them in one PointFigures.
        if isinstance(data, dict) and isinstance(data.get("metrics"), dict):
            metrics = data["metrics"]
            if metrics.get("joules_per_output_token") is None:
                energy = data.get("joules_per_output_token")
                data = {**data, "metrics": {**metrics, "joules_per_output_token": energy}}
        return data


class KneeSummary(ResultModel):
    """The first point where a knee rule fired, the rules and their numbers."""

    index: int
    value: float
    rules: list[str]
    details: list[str]
    name: str


class SloVerdict(ResultModel):
    """Max OTT under SLO (the best point) and the first point that failed.

    ``latency_from``: TTFT and request latency limits were judged from the scheduled send
    (``schedule``, open-loop points) or the actual send (``send``); an optional key.
    """

    limits: dict[str, float]
    best_index: int | None
    best: str | None
    max_ott: float | None
    first_failure_index: int | None
    first_failure: str | None
    messages: list[str]
    latency_from: Literal["schedule", "send"] | None = None


class SearchProbe(ResultModel):
    """One probe of an adaptive search, in the order it ran."""

    value: float
    label: str
    name: str
    phase: Literal["doubling", "bisection"]
    meets_slo: bool
    violations: list[str]


class SearchSummary(ResultModel):
    """An adaptive max-load-under-SLO search (``spec.sweep.search``): the answer, every probe
    with its verdict, and what a grid of the same resolution would have cost.

    ``answer`` is the highest load that met every SLO (None: the range's start already broke
    it); ``first_failing`` the lowest that did not (None: the SLO held to the range's end).
    ``converged``: the two are within the resolution, or the search hit an end of the range.
    """

    goal: str
    low: float
    high: float
    resolution: float | None
    relative_resolution: float | None
    answer: float | None
    answer_name: str | None
    first_failing: float | None
    converged: bool
    probes: list[SearchProbe]
    grid_points: int
    message: str

    @property
    def resolution_text(self) -> str:
        """The resolution as people read it: ``1`` (absolute) or ``5 %`` (of the value)."""
        if self.resolution is not None:
            return f"{self.resolution:g}"
        return f"{(self.relative_resolution or 0.0) * 100:g} %"


class WorkloadSummary(ResultModel):
    """One workload (ISL/OSL pair) of a two-axis sweep: its points and the one-axis verdicts
    over them (``knee.index`` and ``slo``'s indices count within the workload's points)."""

    label: str
    input_tokens: int
    output_tokens: int
    points: list[str]
    knee: KneeSummary | None
    knee_message: str
    slo: SloVerdict | None


#: What the Pareto view's throughput is divided by: the kept GPUs of every point (``gpu``), or
#: nothing, the run's whole target (``run``: some point had no DCGM telemetry).
ParetoBasis = Literal["gpu", "run"]
PARETO_BASES: tuple[str, ...] = ("gpu", "run")


class ParetoPoint(ResultModel):
    """One measured point of the Pareto view."""

    name: str
    workload: str | None
    value: float
    tokens_per_user: float
    tokens_per_second: float
    frontier: bool


class ParetoSummary(ResultModel):
    """Output tokens/s per GPU (or per run) against output tokens/s per user, every measured
    point, the non-dominated ones marked ``frontier``.

    ``per_user`` is the definition of the x axis, ``basis`` of the y axis' divisor, both in
    words in ``message`` so no reader has to guess which was meant.
    """

    basis: ParetoBasis
    points: list[ParetoPoint]
    frontier: list[str]
    message: str


class CostSummary(ResultModel):
    """The deployment's price, for cost per million output tokens."""

    price_per_hour: float | None
    currency: str


class SweepAnalysis(ResultModel):
    """Everything a sweep means: ``analyze_export_genai_perf.json``.

    ``spec`` is the benchmark's spec as a manifest (``Spec.to_dict()``): this module imports no
    other llmbench module, and readers validate it with ``Spec.from_manifest``.
    """

    model: str
    sweep_type: str
    values: list[float]
    repetitions: int
    spec: dict[str, Any]
    points: list[SweepPoint]
    knee: KneeSummary | None
    knee_message: str
    slo: SloVerdict | None
    cost: CostSummary
    interrupted: bool
    stopped_after_knee: bool
    stopped_on_failure: bool
    resumed: list[str]
    failed_points: list[str]
    #: the adaptive search, when the sweep ran one (an optional key)
    search: SearchSummary | None = None
    #: a two-axis sweep (``spec.sweep.workloads``): the verdicts per workload and the Pareto
    #: view over the grid (optional keys)
    workloads: list[WorkloadSummary] | None = None
    pareto: ParetoSummary | None = None
