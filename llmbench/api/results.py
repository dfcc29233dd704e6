"""Typed results: one load point (``profile_export_genai_perf.json``), its telemetry section and
a sweep's analysis (``analyze_export_genai_perf.json``).

Why a model: these files are GenAI-Perf-compatible artefacts today and the operator's status and
ConfigMap API tomorrow, so every writer and every reader must agree on one declaration instead
of on string keys spread over a dozen modules. The field names are the JSON keys (all of them
are snake_case identifiers; ``populate_by_name`` lets an alias be added without breaking
callers should one ever not be).

Two rules keep the written JSON exactly what it was before the models existed:

* **required vs optional keys.** A field without a default is a key that is always written
  (``null`` when not measured). A field *with* a default is an optional key: it is written only
  when it was given (or assigned), never because of its default. :meth:`ResultModel.to_dict`
  dumps with ``exclude_unset``, so a file read back and written again is byte-identical, and a
  non-streaming point still has no ``inter_chunk_gap`` key while a streaming one without gaps
  has ``"inter_chunk_gap": null``.
* **text.** :meth:`ResultModel.to_json` formats with :func:`json.dumps` (floats as ``repr``), as
  the writers did.

Unknown keys are rejected (``extra="forbid"``): a key no model declares is either a writer that
forgot the model or a file from something else, and silently dropping it would lose data on the
way to the operator. :func:`read_result` turns every problem into a :class:`ResultFileError`
naming the file and the field.

This module imports nothing of llmbench, so the runner, the CLI and the operator can all use it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, computed_field, model_validator

__all__ = [
    "GPU_SUMMARY_COLUMNS",
    "ClientHealth",
    "CostSummary",
    "Count",
    "Dispatch",
    "Efficiency",
    "ErrorKind",
    "Errors",
    "Figure",
    "Gauge",
    "Goodput",
    "GpuFilterSettings",
    "GpuSeries",
    "GpuTelemetry",
    "KneeSummary",
    "PointMetrics",
    "PointResult",
    "ResultFileError",
    "ResultModel",
    "RunInfo",
    "ServerSeries",
    "ServerTelemetry",
    "SloVerdict",
    "Spread",
    "Stat",
    "SweepAnalysis",
    "SweepPoint",
    "TelemetrySummary",
    "TokenCounts",
    "ValiditySignal",
    "Window",
    "read_result",
    "validate_result",
]

M = TypeVar("M", bound="ResultModel")


class ResultModel(BaseModel):
    """The base of every result model: unknown keys are errors, dumps keep the file's keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: aliases as keys, optional keys only when they were set."""
        return self.model_dump(by_alias=True, exclude_unset=True)

    def to_json(self, indent: int | None = None) -> str:
        """The JSON text, formatted by :func:`json.dumps` as the artefacts always were."""
        return json.dumps(self.to_dict(), indent=indent)


class ResultFileError(ValueError):
    """A result file that is missing, not JSON, or not the model; the message names the file
    and, for a model mismatch, each offending field."""


def read_result(cls: type[M], path: Path) -> M:
    """``path`` parsed into ``cls``; :class:`ResultFileError` naming the file and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc})") from None
    return validate_result(cls, data, str(path))


def validate_result(cls: type[M], data: Any, source: str) -> M:
    """``data`` (parsed JSON) as ``cls``; :class:`ResultFileError` naming ``source`` and each
    offending field (the first five)."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ResultFileError(f"{source}: not a {cls.__name__}: {problems}{more}") from None


# ================================================================================================
# one load point: profile_export_genai_perf.json
# ================================================================================================


class Stat(ResultModel):
    """GenAI-Perf's statistics of one per-request metric; ``unit`` is absent for internal
    figures (dispatch and event-loop lag)."""

    unit: str | None = None
    avg: float
    min: float
    max: float
    p1: float
    p5: float
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float
    p95: float
    p99: float
    std: float


class Figure(ResultModel):
    """A single-valued metric (throughput); ``avg`` is ``None`` when the window was empty."""

    unit: str
    avg: float | None


class Count(ResultModel):
    """GenAI-Perf's ``request_count``: a whole number in the ``avg`` slot."""

    unit: str
    avg: int


class Goodput(Figure):
    """Requests per second meeting every SLO, the limits used and how many requests met them."""

    slo: dict[str, float]
    good_requests: int


class ErrorKind(ResultModel):
    """How often one error type happened and one sample message."""

    count: int
    sample: str


class Errors(ResultModel):
    """Errors by type; never dropped silently."""

    total: int
    by_type: dict[str, ErrorKind]


class TokenCounts(ResultModel):
    """Where ISL/OSL came from (``server``, ``tokenizer``, ...) and client/server mismatches."""

    output_tokens_source: dict[str, int]
    input_tokens_source: dict[str, int]
    output_tokens_mismatch: int
    input_tokens_mismatch: int


class Dispatch(ResultModel):
    """Open-loop runs: how late sends left against their schedule, and the rate achieved."""

    lag_ms: Stat
    achieved_request_rate: float | None


class Window(ResultModel):
    """The measurement window (T_x, T_y) and the requests in it."""

    start_ns: int | None
    end_ns: int | None
    duration_s: float
    measured_requests: int
    completed_requests: int
    warmup_requests: int


class ClientHealth(ResultModel):
    """How busy the measuring event loop was; warnings when its stamps may run late."""

    workers: int
    loop_lag_ms: Stat | None
    warnings: list[str]


# --- telemetry section ---------------------------------------------------------------------------

#: Columns of GenAI-Perf's GPU table (table 2 of ``analyze_export_genai_perf.csv``).
GPU_SUMMARY_COLUMNS = (
    "GPU",
    "UUID",
    "p99 GPU Power Usage (W)",
    "GPU Energy Consumption (MJ)",
    "p99 GPU Utilization (%)",
    "p99 GPU Memory Used (GB)",
)


class Gauge(ResultModel):
    """avg/p99/min/max of one scraped gauge over the window and the samples behind them."""

    avg: float | None
    p99: float | None
    min: float | None
    max: float | None
    n: int


class GpuSeries(ResultModel):
    """Per scrape: seconds since the window opened, power (W), utilisation (%)."""

    t_s: list[float]
    power_w: list[float | None]
    utilization_pct: list[float | None]


class GpuTelemetry(ResultModel):
    """One GPU over the window (DCGM). Units are in the names; ``None``: the metric was absent."""

    gpu_id: str
    index: str | None
    uuid: str | None
    hostname: str | None
    model_name: str | None
    pci_bus_id: str | None
    pod: str | None
    namespace: str | None
    container: str | None
    source_url: str
    power_w: Gauge
    energy_j: float | None
    energy_mj: float | None
    energy_counter_resets: int
    utilization_pct: Gauge
    memory_used_gb: Gauge
    memory_total_gb: float | None
    power_limit_w: float | None
    gr_engine_active: Gauge
    tensor_active: Gauge
    dram_active: Gauge
    scrapes: int
    distinct_samples: int
    effective_resolution_s: float | None
    stale: bool
    series: GpuSeries

    def summary_row(self) -> dict[str, str | float | None]:
        """This GPU's row of GenAI-Perf's GPU table, keyed by :data:`GPU_SUMMARY_COLUMNS`.

        The one builder of that row, for the per-point and the sweep CSV alike; values stay
        numbers (``None`` when absent) so the formatter decides how ``N/A`` reads.
        """
        values = (
            self.gpu_id,
            self.uuid,
            self.power_w.p99,
            self.energy_mj,
            self.utilization_pct.p99,
            self.memory_used_gb.p99,
        )
        return dict(zip(GPU_SUMMARY_COLUMNS, values, strict=True))


class ServerSeries(ResultModel):
    """Per scrape: seconds since the window opened, KV-cache usage, running, waiting."""

    t_s: list[float]
    kv_cache_usage: list[float | None]
    requests_running: list[float | None]
    requests_waiting: list[float | None]


class ServerTelemetry(ResultModel):
    """The inference server's own metrics over the window (one ``/metrics`` URL)."""

    url: str
    engine: str | None
    kv_cache_usage: Gauge
    requests_running: Gauge
    requests_waiting: Gauge
    requests_completed: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    ttft_mean_ms: float | None
    itl_mean_ms: float | None
    e2e_mean_ms: float | None
    queue_mean_ms: float | None
    scrapes: int
    #: canonical name -> the metric name the server exposed (vLLM renamed some).
    names: dict[str, str]
    series: ServerSeries


class GpuFilterSettings(ResultModel):
    """Which GPUs were kept (shell patterns for pods and namespaces); empty keeps all."""

    pods: list[str]
    namespaces: list[str]
    uuids: list[str]


class ValiditySignal(ResultModel):
    """A fact that casts doubt on the point's numbers.

    ``numbers`` differ per signal (each carries the figures behind its message, e.g. the
    per-GPU sample counts of ``stale_gpu_samples``), so they stay a mapping.
    """

    signal: str
    severity: Literal["warning", "error"]
    message: str
    numbers: dict[str, Any]


class Efficiency(ResultModel):
    """Energy per output token and throughput per watt over the kept GPUs (``None``: unknown)."""

    energy_j: float | None
    avg_power_w: float | None
    joules_per_output_token: float | None
    output_tokens_per_s_per_watt: float | None


class TelemetrySummary(ResultModel):
    """``profile_export_genai_perf.json["telemetry"]``: GPUs, servers, validity, efficiency."""

    window_s: float
    gpu_filter: GpuFilterSettings
    gpus: dict[str, GpuTelemetry]
    server: dict[str, ServerTelemetry]
    scrape_counts: dict[str, int]
    warnings: list[str]
    validity: list[ValiditySignal]
    efficiency: Efficiency | None = None

    def gpu_rows(self) -> list[dict[str, str | float | None]]:
        """GenAI-Perf's GPU table, one row per kept GPU (none without DCGM telemetry)."""
        return [g.summary_row() for g in self.gpus.values()]


# --- the point ----------------------------------------------------------------------------------


class PointResult(ResultModel):
    """Everything one load point measured: ``profile_export_genai_perf.json``.

    GenAI-Perf's keys and stat names first, then ours. Distribution metrics are ``None`` when
    nothing was measured (TTFT of a non-streaming run). Optional keys: ``goodput`` (with SLOs),
    ``inter_chunk_gap`` (streaming runs), ``dispatch`` (open loop), ``client`` and
    ``input_config`` (set by the profile runner), ``telemetry`` (when scraped).
    """

    request_throughput: Figure
    request_latency: Stat | None
    time_to_first_token: Stat | None
    time_to_second_token: Stat | None
    inter_token_latency: Stat | None
    output_token_throughput_per_user: Stat | None
    output_sequence_length: Stat | None
    input_sequence_length: Stat | None
    output_token_throughput: Figure
    request_count: Count
    goodput: Goodput | None = None
    inter_chunk_gap: Stat | None = None
    errors: Errors
    token_counts: TokenCounts
    dispatch: Dispatch | None = None
    window: Window
    interrupted: bool = False
    client: ClientHealth | None = None
    #: the point's arguments as run (never the API key); their shape is the runner's settings,
    #: like GenAI-Perf's own ``input_config``, so they stay a mapping.
    input_config: dict[str, Any] | None = None
    telemetry: TelemetrySummary | None = None

    def stat(self, name: str) -> Stat | None:
        """The distribution metric ``name`` (e.g. ``time_to_first_token``), for tables that walk
        a list of metric names; KeyError when ``name`` is not one."""
        value = getattr(self, name, None)
        if name not in type(self).model_fields or not (value is None or isinstance(value, Stat)):
            raise KeyError(name)
        return value

    def single(self, name: str) -> float | None:
        """The value of the single-valued metric ``name`` (throughput, count, goodput); ``None``
        when absent or not measured; KeyError when ``name`` is not one."""
        value = getattr(self, name, None)
        if name not in type(self).model_fields or isinstance(value, Stat):
            raise KeyError(name)
        if value is None:
            return None
        assert isinstance(value, Figure | Count)
        return value.avg

    def failure_reason(self) -> str | None:
        """Why the point produced nothing, from its error counts; None if something completed."""
        if self.window.completed_requests:
            return None
        if not self.errors.by_type:
            return "no request completed"
        parts = [f"{k} x{v.count}: {v.sample}".strip() for k, v in self.errors.by_type.items()]
        return "no request completed (" + "; ".join(parts) + ")"


# ================================================================================================
# a sweep: analyze_export_genai_perf.json
# ================================================================================================


class PointMetrics(ResultModel):
    """The figures of one sweep point that the knee and SLO rules read (ms, tokens/s).

    ``goodput_ratio`` is derived (written, never read back: it follows from the other two).
    """

    model_config = ConfigDict(frozen=True)

    value: float
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    ott: float | None = None
    rps: float | None = None
    goodput: float | None = None
    completed: int = 0
    good_requests: int | None = None
    failed: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        if isinstance(data, dict) and "goodput_ratio" in data:
            data = {k: v for k, v in data.items() if k != "goodput_ratio"}
        return data

    @model_validator(mode="after")
    def _all_keys_written(self) -> PointMetrics:
        # The defaults are for building one by hand; the file lists every figure, None or not.
        object.__setattr__(self, "__pydantic_fields_set__", set(type(self).model_fields))
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

        return cls(
            value=value,
            ttft_p99_ms=p99(summary.time_to_first_token),
            itl_p99_ms=p99(summary.inter_token_latency),
            e2e_p99_ms=p99(summary.request_latency),
            ott=summary.output_token_throughput.avg,
            rps=summary.request_throughput.avg,
            goodput=summary.goodput.avg if summary.goodput is not None else None,
            completed=summary.window.completed_requests,
            good_requests=summary.goodput.good_requests if summary.goodput is not None else None,
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


class RunInfo(ResultModel):
    """One run (repetition) of a point: its folder, status and why it failed."""

    name: str
    status: str
    reason: str | None
    resumed: bool


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
    joules_per_output_token: float | None
    isl: float | None
    achieved_request_rate: float | None
    meets_slo: bool | None = None
    violations: list[str] | None = None


class KneeSummary(ResultModel):
    """The first point where a knee rule fired, the rules and their numbers."""

    index: int
    value: float
    rules: list[str]
    details: list[str]
    name: str


class SloVerdict(ResultModel):
    """Max OTT under SLO (the best point) and the first point that failed."""

    limits: dict[str, float]
    best_index: int | None
    best: str | None
    max_ott: float | None
    first_failure_index: int | None
    first_failure: str | None
    messages: list[str]


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
