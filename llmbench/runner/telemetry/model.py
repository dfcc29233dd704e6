"""What telemetry learned about a window, and the metric names it reads.

Why this module exists: the per-point artefacts, the sweep analysis and the report read these
types and constants, and none of them scrapes or parses anything; kept apart from the parser
(``prometheus_client``) and the collector (``httpx``), importing them stays light.

* :class:`TelemetryResult` holds one window's :class:`GpuSummary` per GPU and
  :class:`ServerSummary` per inference-server URL; gauges are :class:`Stat` (avg/p99/min/max).
  A metric that is not exposed is ``None`` (rendered ``N/A``), never 0: a missing power reading
  is not 0 W.
* :class:`GpuFilter` says which GPUs serve the target, from the DCGM labels read by
  :func:`workload_pod`, :func:`workload_namespace`, :func:`first_label` and :func:`gpu_id`.
* The DCGM field names (``POWER``, ``ENERGY``, ...) and the inference servers' metric names
  (vLLM old and new, SGLang, TGI: :data:`SERVER_GAUGES`, :data:`SERVER_COUNTERS`,
  :data:`SERVER_HISTOGRAMS`); :data:`GPU_SUMMARY_COLUMNS` is re-exported from the result models.
* ``to_model()`` turns each live summary into its stored form
  (:mod:`llmbench.api.results`), the one shape the artefacts, the sweep and the report read.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from llmbench.api.results import (
    GPU_SUMMARY_COLUMNS,
    Gauge,
    GpuFilterSettings,
    GpuSeries,
    GpuTelemetry,
    ServerSeries,
    ServerTelemetry,
)

__all__ = [
    "DRAM_ACTIVE",
    "ENERGY",
    "ENFORCED_POWER_LIMIT",
    "ENGINE_PREFIXES",
    "FB_FREE",
    "FB_RESERVED",
    "FB_USED",
    "GPU_SUMMARY_COLUMNS",
    "GPU_UTIL",
    "GR_ENGINE_ACTIVE",
    "POWER",
    "POWER_LIMIT",
    "SERVER_COUNTERS",
    "SERVER_GAUGES",
    "SERVER_HISTOGRAMS",
    "TENSOR_ACTIVE",
    "WANTED_SERVER",
    "GpuFilter",
    "GpuSummary",
    "Scrape",
    "ServerSummary",
    "Settle",
    "Stat",
    "TelemetryResult",
    "first_label",
    "gpu_id",
    "workload_namespace",
    "workload_pod",
]

#: A scrape as recorded: (monotonic ``time.perf_counter_ns()`` when the body arrived, text).
Scrape = tuple[int, str]

# --- DCGM field names -------------------------------------------------------------------------
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W, gauge
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since driver load, counter
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # %, gauge
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"  # MiB (newer drivers)
POWER_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"  # W
ENFORCED_POWER_LIMIT = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"  # W, wins when present
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"  # ratio 0..1
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"  # ratio 0..1

# --- inference-server metric names: canonical -> candidates, first present wins ---------------
SERVER_GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    # ratio 0..1 despite vLLM's "_perc" suffix; averaged across engines/label sets
    "kv_cache_usage": (
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
        "mean",
    ),
    "requests_running": (
        ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size"),
        "sum",
    ),
    "requests_waiting": (
        ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size"),
        "sum",
    ),
}
SERVER_COUNTERS: dict[str, tuple[str, ...]] = {
    # The parser names every counter sample "<family>_total", TGI's too.
    "requests_completed": (
        "vllm:request_success_total",
        "sglang:num_requests_total",
        "tgi_request_success_total",
    ),
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "tgi_request_input_length_sum",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "tgi_request_generated_tokens_sum",
    ),
}
SERVER_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
        "tgi_request_mean_time_per_token_duration",
    ),
    "e2e": (
        "vllm:e2e_request_latency_seconds",
        "sglang:e2e_request_latency_seconds",
        "tgi_request_duration",
    ),
    "queue": ("vllm:request_queue_time_seconds", "tgi_request_queue_duration"),
}
ENGINE_PREFIXES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("tgi_", "tgi"))


def _wanted_server_names() -> frozenset[str]:
    names: set[str] = set()
    for cands, _ in SERVER_GAUGES.values():
        names.update(cands)
    for cands in SERVER_COUNTERS.values():
        for c in cands:
            base = c.removesuffix("_total").removesuffix("_sum")
            names.update({c, base, base + "_sum", base + "_count"})
    for cands in SERVER_HISTOGRAMS.values():
        for c in cands:
            names.update({c, c + "_sum", c + "_count"})
    return frozenset(names)


#: Sample and family names the summaries read; everything else is dropped at scrape time.
WANTED_SERVER = _wanted_server_names()


# ================================================================================================
# DCGM labels
# ================================================================================================


def workload_pod(labels: Mapping[str, str]) -> str | None:
    """The workload pod of a DCGM sample: ``exported_pod`` wins over ``pod`` (see GpuFilter)."""
    return labels.get("exported_pod") or labels.get("pod") or None


def workload_namespace(labels: Mapping[str, str]) -> str | None:
    """The workload namespace of a DCGM sample, ``exported_namespace`` first."""
    return labels.get("exported_namespace") or labels.get("namespace") or None


def first_label(labels: Mapping[str, str], *names: str) -> str | None:
    """The first non-empty value among ``names`` (exporters spell some labels two ways)."""
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


def gpu_id(labels: Mapping[str, str]) -> str | None:
    """Stable per-GPU key: ``<hostname>:<gpu index>`` (+ MIG instance), UUID as fallback."""
    host = first_label(labels, "Hostname", "hostname")
    idx = labels.get("gpu")
    uuid = first_label(labels, "UUID", "uuid")
    if idx is None and uuid is None:
        return None
    base = f"gpu{idx}" if idx is not None else uuid
    key = f"{host}:{base}" if host else str(base)
    mig = labels.get("GPU_I_ID")
    return f"{key}/mig{mig}" if mig else key


# ================================================================================================
# Value types
# ================================================================================================


@dataclass(frozen=True)
class Stat:
    """avg/p99/min/max of one gauge over the scrapes in the window; ``None`` fields when unseen.

    Percentiles interpolate linearly, as numpy (and GenAI-Perf) do by default. Samples are the
    scrapes, evenly spaced in time, so the average is a time average.
    """

    avg: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    n: int = 0
    #: the other percentiles and the population std: GenAI-Perf's ``telemetry_stats`` lists
    #: them (p1, p5, p10, p25, p50, p75, p90, p95, std); empty when unseen.
    more: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat:
        """Summarise ``values``, skipping ``None``; an empty input gives an all-``None`` Stat."""
        arr = np.array([v for v in values if v is not None], dtype=np.float64)
        if arr.size == 0:
            return cls()
        pcts = (1, 5, 10, 25, 50, 75, 90, 95)
        more = tuple(
            (f"p{p}", float(v)) for p, v in zip(pcts, np.percentile(arr, pcts), strict=True)
        )
        return cls(
            avg=float(arr.mean()),
            p99=float(np.percentile(arr, 99)),
            min=float(arr.min()),
            max=float(arr.max()),
            n=int(arr.size),
            more=(*more, ("std", float(arr.std()))),
        )

    def to_model(self) -> Gauge:
        """This gauge as stored in ``profile_export_genai_perf.json``."""
        return Gauge(
            avg=self.avg, p99=self.p99, min=self.min, max=self.max, n=self.n, **dict(self.more)
        )


@dataclass(frozen=True)
class GpuFilter:
    """Which GPUs serve the target; an empty filter keeps every GPU.

    Every given criterion must hold. ``pods`` and ``namespaces`` accept shell patterns
    (``vllm-*``). The workload's pod is read from ``exported_pod``/``exported_namespace`` when
    present (the series went through a Prometheus that renamed the exporter's labels, so ``pod``
    is then the exporter's own pod), else from ``pod``/``namespace``. GPUs without pod labels
    (dcgm-exporter adds them only for GPUs allocated to a pod) never match a pod filter.
    """

    pods: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        """True when nothing is filtered."""
        return not (self.pods or self.namespaces or self.uuids)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the GPU described by ``labels`` (one DCGM sample's labels) is kept."""
        if self.uuids and first_label(labels, "UUID", "uuid") not in self.uuids:
            return False
        if self.pods:
            pod = workload_pod(labels)
            if not pod or not any(fnmatch.fnmatchcase(pod, p) for p in self.pods):
                return False
        if self.namespaces:
            ns = workload_namespace(labels)
            if not ns or not any(fnmatch.fnmatchcase(ns, p) for p in self.namespaces):
                return False
        return True

    def describe(self) -> str:
        """Human text for warnings."""
        parts = []
        if self.pods:
            parts.append("pods=" + ",".join(self.pods))
        if self.namespaces:
            parts.append("namespaces=" + ",".join(self.namespaces))
        if self.uuids:
            parts.append("uuids=" + ",".join(self.uuids))
        return " ".join(parts) or "none"

    def to_model(self) -> GpuFilterSettings:
        """The filter as stored in the point's telemetry section."""
        return GpuFilterSettings(
            pods=list(self.pods), namespaces=list(self.namespaces), uuids=list(self.uuids)
        )


@dataclass
class GpuSummary:
    """One GPU over one window. Units are in the names; ``None`` means the metric was absent."""

    gpu_id: str
    source_url: str
    index: str | None = None
    uuid: str | None = None
    hostname: str | None = None
    model_name: str | None = None
    pci_bus_id: str | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    power_w: Stat = field(default_factory=Stat)
    energy_j: float | None = None
    energy_counter_resets: int = 0
    utilization_pct: Stat = field(default_factory=Stat)
    memory_used_gb: Stat = field(default_factory=Stat)
    memory_total_gb: float | None = None
    power_limit_w: float | None = None
    gr_engine_active: Stat = field(default_factory=Stat)
    tensor_active: Stat = field(default_factory=Stat)
    dram_active: Stat = field(default_factory=Stat)
    scrapes: int = 0
    distinct_samples: int = 0
    effective_resolution_s: float | None = None
    stale: bool = False
    #: (seconds since window start, power W, utilisation %) per scrape, for plots.
    series: list[tuple[float, float | None, float | None]] = field(default_factory=list)

    @property
    def energy_mj(self) -> float | None:
        """Energy in megajoules (MJ, 1e6 J), the unit of GenAI-Perf's GPU table."""
        return None if self.energy_j is None else self.energy_j / 1e6

    def to_model(self) -> GpuTelemetry:
        """This GPU as stored in ``profile_export_genai_perf.json`` (series by column)."""
        return GpuTelemetry(
            **_stored_fields(self, skip=("series",)),
            energy_mj=self.energy_mj,
            series=GpuSeries(
                t_s=[p[0] for p in self.series],
                power_w=[p[1] for p in self.series],
                utilization_pct=[p[2] for p in self.series],
            ),
        )


@dataclass
class ServerSummary:
    """The inference server's own metrics over one window (one ``/metrics`` URL)."""

    url: str
    engine: str | None = None
    kv_cache_usage: Stat = field(default_factory=Stat)  # ratio 0..1
    requests_running: Stat = field(default_factory=Stat)
    requests_waiting: Stat = field(default_factory=Stat)
    requests_completed: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    ttft_mean_s: float | None = None
    itl_mean_s: float | None = None
    e2e_mean_s: float | None = None
    queue_mean_s: float | None = None
    scrapes: int = 0
    #: metric names actually used, canonical -> exposed name (old vs new vLLM names differ).
    names: dict[str, str] = field(default_factory=dict)
    #: (seconds since window start, kv usage, running, waiting) per scrape, for plots.
    series: list[tuple[float, float | None, float | None, float | None]] = field(
        default_factory=list
    )

    def to_model(self) -> ServerTelemetry:
        """This server as stored in ``profile_export_genai_perf.json`` (means in ms)."""
        means = ("ttft_mean_s", "itl_mean_s", "e2e_mean_s", "queue_mean_s")
        stored = _stored_fields(self, skip=("series", *means))
        stored.update({m.removesuffix("_s") + "_ms": _ms(getattr(self, m)) for m in means})
        return ServerTelemetry(
            **stored,
            series=ServerSeries(
                t_s=[p[0] for p in self.series],
                kv_cache_usage=[p[1] for p in self.series],
                requests_running=[p[2] for p in self.series],
                requests_waiting=[p[3] for p in self.series],
            ),
        )


@dataclass(frozen=True)
class Settle:
    """How one server's counters settled after the load ended (see ``TelemetryCollector``).

    A server may count a request as completed a little after it sent the last byte, so the
    closing scrape can miss the last requests. The collector re-scrapes until the counters stop
    moving; this records what it saw, so a verdict can say what was measured.
    """

    #: the counters stopped moving (and nothing ran) before the bound ran out
    settled: bool
    #: seconds from the closing boundary scrape to the last settle scrape
    seconds: float
    #: settle scrapes taken after the closing boundary scrape
    scrapes: int
    #: completed requests that showed up only after the closing scrape (None: not exposed)
    late_completions: float | None = None


@dataclass
class TelemetryResult:
    """Everything telemetry learned about one point's window; safe to keep when empty."""

    window_start_ns: int = 0
    window_end_ns: int = 0
    gpus: dict[str, GpuSummary] = field(default_factory=dict)
    servers: dict[str, ServerSummary] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: successful scrapes per URL inside the window
    scrape_counts: dict[str, int] = field(default_factory=dict)
    gpu_filter: GpuFilter = field(default_factory=GpuFilter)
    #: per server URL: how its counters settled after the closing scrape (live runs only)
    settle: dict[str, Settle] = field(default_factory=dict)

    @property
    def window_s(self) -> float:
        """Window length in seconds."""
        return max(0, self.window_end_ns - self.window_start_ns) / 1e9


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def _stored_fields(summary: GpuSummary | ServerSummary, skip: tuple[str, ...]) -> dict[str, Any]:
    """The dataclass fields stored under their own name, gauges as their stored model.

    The stored model declares the key order, so only the fields that change shape or unit
    (``skip``) are mapped by hand.
    """
    out: dict[str, Any] = {}
    for f in fields(summary):
        if f.name in skip:
            continue
        value = getattr(summary, f.name)
        out[f.name] = value.to_model() if isinstance(value, Stat) else value
    return out
