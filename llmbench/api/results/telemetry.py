"""A point's telemetry section (``profile_export_genai_perf.json["llmbench"]["telemetry"]``):
the kept GPUs and the inference servers over the measurement window, validity and efficiency,
and GenAI-Perf's GPU table and ``telemetry_stats`` derived from them."""

from __future__ import annotations

from typing import Any, Literal

from .files import ResultModel

__all__ = [
    "GPU_SUMMARY_COLUMNS",
    "TELEMETRY_STATS",
    "Efficiency",
    "Gauge",
    "GpuFilterSettings",
    "GpuSeries",
    "GpuTelemetry",
    "ServerSeries",
    "ServerTelemetry",
    "TelemetrySummary",
    "ValiditySignal",
]

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
