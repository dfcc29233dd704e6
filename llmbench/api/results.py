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
    "GENAI_PERF_METRICS",
    "GPU_SUMMARY_COLUMNS",
    "OURS",
    "OUR_FIELDS",
    "TELEMETRY_STATS",
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
    "GpuRow",
    "GpuSeries",
    "GpuTelemetry",
    "KneeSummary",
    "LoopStall",
    "MeasurementWindow",
    "PointMetrics",
    "PointResult",
    "ResultFileError",
    "ResultModel",
    "RunInfo",
    "ServerSeries",
    "ServerTelemetry",
    "ShardLoad",
    "Shards",
    "SloVerdict",
    "Spread",
    "Stability",
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

    @classmethod
    def file_location(cls, loc: tuple[int | str, ...]) -> str:
        """Where the field at ``loc`` sits in the file, for error messages (the field path;
        a model whose file nests fields differently says so)."""
        return ".".join(str(p) for p in loc)


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
            f"{cls.file_location(tuple(e['loc'])) or '(top level)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ResultFileError(f"{source}: not a {cls.__name__}: {problems}{more}") from None


# ================================================================================================
# one load point: profile_export_genai_perf.json
# ================================================================================================


class Stat(ResultModel):
    """GenAI-Perf's statistics of one per-request metric, in its key order; ``unit`` is absent
    for internal figures (dispatch and event-loop lag)."""

    unit: str | None = None
    avg: float
    p1: float
    p5: float
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
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
    """How often one error type happened and one sample message.

    ``unrecorded``: how many of ``count`` have no per-request record (beyond the records kept
    per type), so a dead or failing target cannot fill memory and disk while the count stays
    exact.
    """

    count: int
    sample: str
    unrecorded: int | None = None


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
    #: epoch ns - perf_counter ns, taken once when the point started: ``start_ns + offset`` is
    #: the wall-clock time ``profile_export.json`` shows (an optional key).
    epoch_offset_ns: int | None = None


class MeasurementWindow(ResultModel):
    """One window of a ``--measurement-interval`` run: the requests sent and completed inside
    it (perf_analyzer's rule), their rate and mean latency (``None`` when none completed)."""

    start_ns: int
    end_ns: int
    completed_requests: int
    request_throughput: float
    avg_request_latency_ms: float | None


class Stability(ResultModel):
    """``--measurement-interval`` / ``--stability-percentage``: the windows measured, in order,
    and whether the last three agreed (max / min of both their request throughput and their
    mean latency within ``1 + stability_percentage / 100``). The point's statistics are those
    of the requests in the last three windows (all windows when fewer ran); the others are
    recorded like warm-up requests."""

    measurement_interval_ms: float
    stability_percentage: float
    max_windows: int
    stable: bool
    windows: list[MeasurementWindow]
    reported_windows: int
    throughput_spread_pct: float | None = None
    latency_spread_pct: float | None = None


class LoopStall(ResultModel):
    """The longest event-loop stall: while it lasted no read was stamped, so the requests in
    flight across it (``overlapped_requests``, marked ``loop_stall_ms`` in their records) have
    timestamps late by up to ``ms``. ``at_s`` is its start, in seconds after the first send;
    ``cpu_ms`` the CPU the loop's thread used across it (near ``ms``: the runner was busy;
    far below: the process was not scheduled)."""

    ms: float
    at_s: float | None
    worker: int
    overlapped_requests: int
    cpu_ms: float | None = None


class ShardLoad(ResultModel):
    """What one runner pod of a several-pod point sent and achieved, so an overloaded shard is
    visible: fewer requests in flight than its slots, a lower rate than its share, or a
    dispatch/loop lag the others do not have."""

    shard: int
    node: str | None = None
    #: its share: slots (closed loop) or requests per second (open loop)
    target: float
    #: measured requests it sent, completed, failed
    requests: int
    completed: int
    errors: int
    #: its first send (warm-up included), ms after the earliest first send of all shards
    first_send_ms: float | None = None
    #: mean requests in flight over the merged window (closed loop: about its slots)
    mean_in_flight: float | None = None
    #: completed requests per second over the merged window
    achieved_rps: float | None = None
    dispatch_lag_p99_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    #: its chunk arrivals were trimmed to fit the store (inter-chunk gaps lost)
    chunks_trimmed: bool = False


class Shards(ResultModel):
    """A point driven by several runner pods (``spec.runner.replicas``) and merged exactly:
    its statistics come from the union of the pods' records. Present only then."""

    replicas: int
    #: attempts run; more than one means the point was repeated (a shard died or its data
    #: never came), each reason in ``repeated``
    attempts: int = 1
    repeated: list[str] = []
    #: max - min of the shards' first sends (ms): how together they started
    start_spread_ms: float | None = None
    #: estimated realtime-clock offset of the shards on other nodes than the leader (max
    #: absolute, ms) and the estimate's uncertainty (half the barrier round trip); 0 when all
    #: shards share the leader's node (one monotonic clock)
    clock_skew_ms: float | None = None
    clock_skew_uncertainty_ms: float | None = None
    #: the bound the spread and skew are held to (1 % of the window, see the digest's warning)
    skew_bound_ms: float | None = None
    #: ms from the last shard's ready (its own clock) to the start instant: the published
    #: lead plus the barrier's polling cost
    barrier_wait_ms: float | None = None
    #: ms the leader waited after its own load for the other shards' records
    merge_wait_ms: float | None = None
    #: store API calls for this point, all shards (reads + writes)
    api_calls: int | None = None
    #: bytes of packed records that went through the store
    record_bytes: int | None = None
    chunks_trimmed: bool = False
    shards: list[ShardLoad] = []
    warnings: list[str] = []


class ClientHealth(ResultModel):
    """How busy the measuring event loop was; warnings when its stamps may run late.

    Optional: ``event_loop`` (``uvloop`` or ``asyncio``), ``longest_stall``,
    ``retry_after_waits`` and ``retry_after_wait_s`` (slot-seconds held back by the target's
    ``Retry-After``), ``spilled_requests`` (responses parked in a file, undecoded, because the
    memory budget was spent).
    """

    workers: int
    loop_lag_ms: Stat | None
    warnings: list[str]
    event_loop: str | None = None
    longest_stall: LoopStall | None = None
    retry_after_waits: int | None = None
    retry_after_wait_s: float | None = None
    spilled_requests: int | None = None


# --- telemetry section ---------------------------------------------------------------------------

#: Columns of GenAI-Perf's GPU table (table 2 of ``analyze_export_genai_perf.csv``, after its
#: ``Config Name``), in GenAI-Perf 0.0.16's order and spelling.
GPU_SUMMARY_COLUMNS = (
    "GPU",
    "p99 GPU Power Usage (W)",
    "p99 GPU Energy Consumption (MJ)",
    "p99 GPU Utilization (%)",
    "p99 GPU Memory Used (GB)",
    "Avg. GPU Power Limit (W)",
    "Avg. GPU Total Memory (GB)",
)

#: The statistics of one GPU metric in GenAI-Perf's ``telemetry_stats``, in its key order.
TELEMETRY_STATS = ("avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min",
                   "max", "std")


class Gauge(ResultModel):
    """avg/p99/min/max of one scraped gauge over the window and the samples behind them; the
    other percentiles and the std (optional keys) fill GenAI-Perf's ``telemetry_stats``."""

    avg: float | None
    p99: float | None
    min: float | None
    max: float | None
    n: int
    p1: float | None = None
    p5: float | None = None
    p10: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    std: float | None = None

    def genai_perf_stats(self) -> dict[str, float]:
        """``{avg, p1 … p99, min, max, std}`` as GenAI-Perf writes one GPU's metric; only the
        statistics that were computed (none without samples)."""
        if not self.n:
            return {}
        values = {k: getattr(self, k) for k in TELEMETRY_STATS}
        return {k: float(v) for k, v in values.items() if v is not None}


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

    def summary_row(self, name: str | None = None) -> dict[str, str | float | None]:
        """This GPU's row of GenAI-Perf's GPU table, keyed by :data:`GPU_SUMMARY_COLUMNS`
        (``name``: the GPU column, GenAI-Perf's ``gpu<index>`` by default).

        The one builder of that row, for the console and the sweep CSV alike; values stay
        numbers (``None`` when absent) so the formatter decides how ``N/A`` reads. Energy is
        the energy used over the measurement window (the counter's increase), where GenAI-Perf
        puts the p99 of the counter's raw readings (energy since the driver loaded).
        """
        values = (
            name if name is not None else self.genai_perf_name(),
            self.power_w.p99,
            self.energy_mj,
            self.utilization_pct.p99,
            self.memory_used_gb.p99,
            self.power_limit_w,
            self.memory_total_gb,
        )
        return dict(zip(GPU_SUMMARY_COLUMNS, values, strict=True))

    def genai_perf_name(self) -> str:
        """``gpu<index>`` as GenAI-Perf names a GPU (our ``gpu_id`` when there is no index)."""
        return f"gpu{self.index}" if self.index is not None else self.gpu_id


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

    def gpu_names(self) -> dict[str, str]:
        """``gpu_id`` -> the GPU's name in GenAI-Perf's tables and ``telemetry_stats``
        (``gpu0``, ``gpu1``, …); GPUs of several hosts sharing an index keep our ``gpu_id``."""
        names = {k: g.genai_perf_name() for k, g in self.gpus.items()}
        if len(set(names.values())) < len(names):
            return {k: g.gpu_id for k, g in self.gpus.items()}
        return names

    def gpu_rows(self) -> list[dict[str, str | float | None]]:
        """GenAI-Perf's GPU table, one row per kept GPU (none without DCGM telemetry)."""
        names = self.gpu_names()
        return [g.summary_row(names[k]) for k, g in self.gpus.items()]

    def genai_perf_stats(self) -> dict[str, dict[str, Any]]:
        """GenAI-Perf's ``telemetry_stats``: per metric ``{unit, gpu0: {avg, p1 … p99, min,
        max, std}, …}`` (``gpu_power_limit`` and ``total_gpu_memory``: ``avg`` only), metrics
        without any GPU's data left out, as GenAI-Perf leaves them out.

        ``energy_consumption`` is the energy used over the window (every statistic the same,
        std 0), not GenAI-Perf's statistics of the counter's raw readings.
        """
        names = self.gpu_names()

        def constant(v: float | None) -> dict[str, float]:
            return {} if v is None else {"avg": float(v)}

        def energy(g: GpuTelemetry) -> dict[str, float]:
            if g.energy_mj is None:
                return {}
            return {k: (0.0 if k == "std" else float(g.energy_mj)) for k in TELEMETRY_STATS}

        per_metric: list[tuple[str, str, Any]] = [
            ("gpu_power_usage", "W", lambda g: g.power_w.genai_perf_stats()),
            ("gpu_power_limit", "W", lambda g: constant(g.power_limit_w)),
            ("energy_consumption", "MJ", energy),
            ("total_gpu_memory", "GB", lambda g: constant(g.memory_total_gb)),
            ("gpu_memory_used", "GB", lambda g: g.memory_used_gb.genai_perf_stats()),
            ("gpu_utilization", "%", lambda g: g.utilization_pct.genai_perf_stats()),
        ]
        out: dict[str, dict[str, Any]] = {}
        for metric, unit, stats_of in per_metric:
            doc: dict[str, Any] = {"unit": unit}
            for key, gpu in self.gpus.items():
                stats = stats_of(gpu)
                if stats:
                    doc[names[key]] = stats
            if len(doc) > 1:
                out[metric] = doc
        return out


# --- the point ----------------------------------------------------------------------------------


#: The one top-level key of ``profile_export_genai_perf.json`` that is ours, not GenAI-Perf's.
OURS = "llmbench"

#: GenAI-Perf's metric keys in the order its JSON lists them (a metric without data is absent).
GENAI_PERF_METRICS = (
    "request_throughput",
    "request_latency",
    "request_goodput",
    "request_count",
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
)

#: PointResult fields with a place of their own in GenAI-Perf's layout; every other field is
#: written under :data:`OURS`, in field order (``goodput``'s SLO and count go there too, as
#: ``goodput``; its rate is GenAI-Perf's ``request_goodput``).
_GENAI_PERF_FIELDS = frozenset({*GENAI_PERF_METRICS, "goodput", "genai_perf_config"})

#: PointResult fields written under :data:`OURS` (when set), in this order.
OUR_FIELDS = (
    "inter_chunk_gap",
    "errors",
    "token_counts",
    "dispatch",
    "window",
    "interrupted",
    "stop_reason",
    "client",
    "input_config",
    "telemetry",
    "stability",
    "shards",
)


class PointResult(ResultModel):
    """Everything one load point measured: ``profile_export_genai_perf.json``.

    The file is GenAI-Perf's: its metric keys with its stat names (a metric without data is
    absent, never ``null``), ``request_goodput``, ``telemetry_stats`` (derived from
    ``telemetry``), ``input_config`` in GenAI-Perf's nested schema (:attr:`genai_perf_config`),
    and everything of ours under the one key :data:`OURS` (``"llmbench"``): the goodput SLOs
    and count, inter-chunk gaps, errors, token provenance, dispatch, window, client health, our
    own settings (:attr:`input_config`) and the telemetry with its validity signals. So a loop
    over the metric dicts meets only ``{unit, avg, …}`` dicts, ``telemetry_stats``,
    ``input_config`` and ``llmbench``.

    In Python the fields stay flat (``summary.errors``, ``summary.goodput.slo``), so the
    readers do not care where the file keeps them. Files written before this layout (all keys
    at the top, ``goodput``) still read.

    Optional keys: ``goodput`` (with SLOs), ``inter_chunk_gap`` (streaming runs), ``dispatch``
    (open loop), ``client``, ``input_config`` and ``genai_perf_config`` (set by the profile
    runner), ``telemetry`` (when scraped).
    """

    request_throughput: Figure
    request_latency: Stat | None = None
    time_to_first_token: Stat | None = None
    time_to_second_token: Stat | None = None
    inter_token_latency: Stat | None = None
    output_token_throughput_per_user: Stat | None = None
    output_sequence_length: Stat | None = None
    input_sequence_length: Stat | None = None
    output_token_throughput: Figure
    request_count: Count
    goodput: Goodput | None = None
    inter_chunk_gap: Stat | None = None
    errors: Errors
    token_counts: TokenCounts
    dispatch: Dispatch | None = None
    window: Window
    interrupted: bool = False
    #: why the point ended before its budget, e.g. ``target unreachable since T: <error>``;
    #: such a point failed even though the records it measured are kept.
    stop_reason: str | None = None
    client: ClientHealth | None = None
    #: the point's arguments as run (never the API key), in our settings' shape: they stay a
    #: mapping. Written as ``llmbench.input_config``.
    input_config: dict[str, Any] | None = None
    #: the same arguments in GenAI-Perf's nested ``input_config`` schema (``model_names``,
    #: ``endpoint``, ``perf_analyzer``, ``input``, ``output``, ``tokenizer``, …), so its
    #: ``process-export-files`` reads them. Written as the top-level ``input_config``.
    genai_perf_config: dict[str, Any] | None = None
    telemetry: TelemetrySummary | None = None
    #: ``--measurement-interval`` runs: the windows and whether they agreed.
    stability: Stability | None = None
    #: several runner pods drove the point (``spec.runner.replicas`` > 1): how they did.
    shards: Shards | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        """The file's layout to the flat fields (a legacy file or keyword arguments pass)."""
        if not isinstance(data, dict) or OURS not in data or not isinstance(data[OURS], dict):
            return data
        flat = {k: v for k, v in data.items() if k not in (OURS, "telemetry_stats")}
        if "input_config" in flat:
            flat["genai_perf_config"] = flat.pop("input_config")
        ours = dict(data[OURS])
        rate, detail = flat.pop("request_goodput", None), ours.pop("goodput", None)
        if rate is not None or detail is not None:
            both = [d for d in (rate, detail) if isinstance(d, dict)]
            flat["goodput"] = {k: v for d in both for k, v in d.items()} if both else rate
        fields = cls.model_fields
        for key, value in ours.items():
            # a key of ours that is no field (or clashes with a top-level one) stays named as
            # in the file, so the error says where it is
            ok = key in fields and key not in _GENAI_PERF_FIELDS and key not in flat
            flat[key if ok else f"{OURS}.{key}"] = value
        return flat

    def to_dict(self) -> dict[str, Any]:
        """The file's layout (see the class): GenAI-Perf's keys, then :data:`OURS`."""
        flat = super().to_dict()
        doc: dict[str, Any] = {}
        for key in GENAI_PERF_METRICS:
            if key == "request_goodput":
                if self.goodput is not None:
                    doc[key] = {"unit": self.goodput.unit, "avg": self.goodput.avg}
            elif flat.get(key) is not None:
                doc[key] = flat[key]
        stats = self.telemetry.genai_perf_stats() if self.telemetry is not None else {}
        if stats:
            doc["telemetry_stats"] = stats
        if self.genai_perf_config is not None:
            doc["input_config"] = flat["genai_perf_config"]
        ours: dict[str, Any] = {}
        if self.goodput is not None:
            ours["goodput"] = {"slo": flat["goodput"]["slo"],
                               "good_requests": flat["goodput"]["good_requests"]}
        ours.update((k, v) for k, v in flat.items() if k not in _GENAI_PERF_FIELDS)
        doc[OURS] = ours
        return doc

    @classmethod
    def file_location(cls, loc: tuple[int | str, ...]) -> str:
        """Where a field's value sits in the file, for error messages."""
        path = ".".join(str(p) for p in loc)
        if not loc:
            return path
        head = loc[0]
        if head == "genai_perf_config":
            return "input_config" + path[len("genai_perf_config"):]
        if head in cls.model_fields and head not in _GENAI_PERF_FIELDS:
            return f"{OURS}.{path}"
        if head == "goodput" and len(loc) > 1 and loc[1] in ("slo", "good_requests"):
            return f"{OURS}.{path}"
        if head == "goodput":
            return "request_goodput" + path[len("goodput"):]
        return path

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
        """Why the point failed: the reason it ended early, or (when nothing completed) its
        error counts; None for a point that measured what it was asked to."""
        if self.stop_reason:
            return self.stop_reason
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
