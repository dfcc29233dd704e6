"""GPU (DCGM) and inference-server telemetry over a point's measurement window.

Why this exists: when latency jumps the first questions are "is the GPU saturated, is the KV
cache full, or is someone else sending traffic?". The client cannot see any of that, so we scrape
Prometheus text endpoints while the point runs and summarise them over exactly the measurement
window:

* dcgm-exporter (``:9400/metrics``): per GPU power, energy, utilisation, memory and (when the
  exporter collects them) the profiling ratios, kept only for the GPUs that serve the target
  (``pod``/``namespace`` or ``exported_pod``/``exported_namespace`` labels, or GPU UUIDs).
* the inference server's own ``/metrics`` (vLLM old and new names, SGLang, TGI): gauges as
  avg/max, counters as deltas over the window, server-side TTFT/ITL means from histogram deltas.

Two layers:

* a pure layer (:func:`summarize_scrapes`, :func:`validity_signals`, :func:`gpu_summary_rows`,
  :func:`telemetry_json`, :func:`energy_efficiency`) that works on already-scraped
  ``(t_ns, text)`` samples, so tests and offline analysis feed recorded data;
* :class:`TelemetryCollector`, which the profile runner starts when the window opens and stops
  when it closes. It never raises into the run: an unreachable exporter or garbage costs one
  warning naming the URL, and the run goes on without that table.

Text is parsed with ``prometheus_client``'s maintained parser, never with regexes. A metric that
is not exposed is ``None`` (rendered ``N/A``), never 0: a missing power reading is not 0 W.

Example::

    collector = TelemetryCollector(
        metrics_urls("http://vllm:8000/v1", ["http://10.0.0.7:9400/metrics"]),
        interval_s=1.0,
        gpu_filter=GpuFilter(pods=("vllm-0",), namespaces=("llm",)),
    )
    await collector.start()          # when the measurement window opens
    ...                              # measured requests
    result = await collector.stop()  # when it closes
    rows = gpu_summary_rows(result)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "GPU_SUMMARY_COLUMNS",
    "GpuFilter",
    "GpuSummary",
    "Scrape",
    "ServerSummary",
    "Stat",
    "TelemetryCollector",
    "TelemetryResult",
    "add_arguments",
    "client_facts",
    "collector_from_args",
    "compact_exposition",
    "energy_efficiency",
    "format_value",
    "gpu_summary_rows",
    "gpu_summary_rows_from_json",
    "metrics_urls",
    "parse_exposition",
    "plot_telemetry",
    "summarize_scrapes",
    "telemetry_json",
    "telemetry_section",
    "validity_signals",
]

logger = logging.getLogger(__name__)

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

#: Columns of table 2 of ``analyze_export_genai_perf.csv`` (one row per GPU).
GPU_SUMMARY_COLUMNS = (
    "GPU",
    "UUID",
    "p99 GPU Power Usage (W)",
    "GPU Energy Consumption (MJ)",
    "p99 GPU Utilization (%)",
    "p99 GPU Memory Used (GB)",
)

_MIB = 1024 * 1024
# DCGM reports "no value" with sentinel numbers instead of omitting the sample (dcgm_structs.h:
# DCGM_INT32_BLANK 0x7ffffff0, DCGM_INT64_BLANK 0x7ffffffffffffff0, DCGM_FP64_BLANK
# 140737488355328.0, each followed by a few more codes). Treat them as missing, never as readings.
_INT32_BLANK = (0x7FFFFFF0, 0x7FFFFFFF)
_INT64_BLANK_MIN = float(0x7FFFFFFFFFFFFFF0) * 0.999
_FP64_BLANK = (140737488355328.0, 140737488355328.0 + 16)

# --- inference-server metric names: canonical -> candidates, first present wins ---------------
_SERVER_GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
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
_SERVER_COUNTERS: dict[str, tuple[str, ...]] = {
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
_SERVER_HISTOGRAMS: dict[str, tuple[str, ...]] = {
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
_ENGINE_PREFIXES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("tgi_", "tgi"))


def _wanted_server_names() -> frozenset[str]:
    names: set[str] = set()
    for cands, _ in _SERVER_GAUGES.values():
        names.update(cands)
    for cands in _SERVER_COUNTERS.values():
        for c in cands:
            base = c.removesuffix("_total").removesuffix("_sum")
            names.update({c, base, base + "_sum", base + "_count"})
    for cands in _SERVER_HISTOGRAMS.values():
        for c in cands:
            names.update({c, c + "_sum", c + "_count"})
    return frozenset(names)


#: Sample and family names the summaries read; everything else is dropped at scrape time.
_WANTED_SERVER = _wanted_server_names()


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

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat:
        """Summarise ``values``, skipping ``None``; an empty input gives an all-``None`` Stat."""
        arr = np.array([v for v in values if v is not None], dtype=np.float64)
        if arr.size == 0:
            return cls()
        return cls(
            avg=float(arr.mean()),
            p99=float(np.percentile(arr, 99)),
            min=float(arr.min()),
            max=float(arr.max()),
            n=int(arr.size),
        )

    def to_json(self) -> dict[str, float | int | None]:
        """Plain dict for the JSON export."""
        return {"avg": self.avg, "p99": self.p99, "min": self.min, "max": self.max, "n": self.n}


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
        if self.uuids and _label(labels, "UUID", "uuid") not in self.uuids:
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

    def to_json(self) -> dict[str, Any]:
        """Plain dict for ``profile_export_genai_perf.json``."""
        return {
            "gpu_id": self.gpu_id,
            "index": self.index,
            "uuid": self.uuid,
            "hostname": self.hostname,
            "model_name": self.model_name,
            "pci_bus_id": self.pci_bus_id,
            "pod": self.pod,
            "namespace": self.namespace,
            "container": self.container,
            "source_url": self.source_url,
            "power_w": self.power_w.to_json(),
            "energy_j": self.energy_j,
            "energy_mj": self.energy_mj,
            "energy_counter_resets": self.energy_counter_resets,
            "utilization_pct": self.utilization_pct.to_json(),
            "memory_used_gb": self.memory_used_gb.to_json(),
            "memory_total_gb": self.memory_total_gb,
            "power_limit_w": self.power_limit_w,
            "gr_engine_active": self.gr_engine_active.to_json(),
            "tensor_active": self.tensor_active.to_json(),
            "dram_active": self.dram_active.to_json(),
            "scrapes": self.scrapes,
            "distinct_samples": self.distinct_samples,
            "effective_resolution_s": self.effective_resolution_s,
            "stale": self.stale,
            "series": {
                "t_s": [p[0] for p in self.series],
                "power_w": [p[1] for p in self.series],
                "utilization_pct": [p[2] for p in self.series],
            },
        }


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

    def to_json(self) -> dict[str, Any]:
        """Plain dict for ``profile_export_genai_perf.json``."""
        return {
            "url": self.url,
            "engine": self.engine,
            "kv_cache_usage": self.kv_cache_usage.to_json(),
            "requests_running": self.requests_running.to_json(),
            "requests_waiting": self.requests_waiting.to_json(),
            "requests_completed": self.requests_completed,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "ttft_mean_ms": _ms(self.ttft_mean_s),
            "itl_mean_ms": _ms(self.itl_mean_s),
            "e2e_mean_ms": _ms(self.e2e_mean_s),
            "queue_mean_ms": _ms(self.queue_mean_s),
            "scrapes": self.scrapes,
            "names": dict(self.names),
            "series": {
                "t_s": [p[0] for p in self.series],
                "kv_cache_usage": [p[1] for p in self.series],
                "requests_running": [p[2] for p in self.series],
                "requests_waiting": [p[3] for p in self.series],
            },
        }


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

    @property
    def window_s(self) -> float:
        """Window length in seconds."""
        return max(0, self.window_end_ns - self.window_start_ns) / 1e9


# ================================================================================================
# Parsing
# ================================================================================================


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Parse Prometheus text into ``(sample name, labels, value)`` triples.

    Raises ``ValueError`` on text that is not the exposition format (an HTML error page, JSON).
    Sample names are as the parser emits them: counter samples end in ``_total`` even when the
    exporter omitted it (TGI), histograms give ``_sum``/``_count``/``_bucket``.
    """
    out: list[tuple[str, dict[str, str], float]] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.append((s.name, dict(s.labels), float(s.value)))
    except ValueError:
        raise
    except Exception as exc:  # the parser raises assorted types on odd input
        raise ValueError(f"not Prometheus text: {exc}") from exc
    return out


def compact_exposition(text: str) -> str:
    """Keep only the lines the summaries read (``DCGM_FI_*``, known server series, their TYPE).

    Why: vLLM serves ~100 KB per scrape, mostly histogram buckets, and a 10-minute point at 1 s
    would hold tens of MB of text. The result is still valid exposition text with identical
    summaries. Text with no wanted line (an HTML error page) is returned unchanged so that
    :func:`summarize_scrapes` can report it as garbage rather than as "no metrics".
    """
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE" and _is_wanted(parts[2]):
                out.append(line)
            continue
        if _is_wanted(line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""):
            out.append(line)
    if not any(not ln.startswith("#") for ln in out):
        return text
    return "\n".join(out) + "\n"


def _is_wanted(name: str) -> bool:
    return name.startswith("DCGM_FI_") or name in _WANTED_SERVER


def metrics_urls(
    target_url: str | None,
    server_metrics_urls: Sequence[str] = (),
    *,
    include_target: bool = True,
) -> list[str]:
    """The URLs to scrape: ``--server-metrics-url`` values plus ``<target base>/metrics``.

    The target's path (``/v1``, ``/v1/chat/completions``) is dropped because servers expose
    ``/metrics`` at the root. Duplicates are removed, order kept.

    >>> metrics_urls("http://vllm:8000/v1", ["http://node:9400/metrics"])
    ['http://node:9400/metrics', 'http://vllm:8000/metrics']
    """
    urls = list(server_metrics_urls)
    if include_target and target_url:
        parts = urlsplit(target_url)
        urls.append(urlunsplit((parts.scheme, parts.netloc, "/metrics", "", "")))
    return list(dict.fromkeys(u for u in urls if u))


def workload_pod(labels: Mapping[str, str]) -> str | None:
    """The workload pod of a DCGM sample: ``exported_pod`` wins over ``pod`` (see GpuFilter)."""
    return labels.get("exported_pod") or labels.get("pod") or None


def workload_namespace(labels: Mapping[str, str]) -> str | None:
    """The workload namespace of a DCGM sample, ``exported_namespace`` first."""
    return labels.get("exported_namespace") or labels.get("namespace") or None


def _label(labels: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


def _gpu_id(labels: Mapping[str, str]) -> str | None:
    """Stable per-GPU key: ``<hostname>:<gpu index>`` (+ MIG instance), UUID as fallback."""
    host = _label(labels, "Hostname", "hostname")
    idx = labels.get("gpu")
    uuid = _label(labels, "UUID", "uuid")
    if idx is None and uuid is None:
        return None
    base = f"gpu{idx}" if idx is not None else uuid
    key = f"{host}:{base}" if host else str(base)
    mig = labels.get("GPU_I_ID")
    return f"{key}/mig{mig}" if mig else key


def _is_blank(name: str, value: float) -> bool:
    if math.isnan(value) or math.isinf(value):
        return True
    if value >= _INT64_BLANK_MIN or _FP64_BLANK[0] <= value <= _FP64_BLANK[1]:
        return True
    # Only gauges are int32 fields; the energy counter is int64 and legitimately passes 2^31.
    return name != ENERGY and _INT32_BLANK[0] <= value <= _INT32_BLANK[1]


# ================================================================================================
# Summaries (pure)
# ================================================================================================


def summarize_scrapes(
    scrapes: Mapping[str, Sequence[Scrape]],
    *,
    gpu_filter: GpuFilter | None = None,
    window_ns: tuple[int, int] | None = None,
    interval_s: float | None = None,
) -> TelemetryResult:
    """Summarise recorded scrapes per URL over a window.

    Args:
        scrapes: URL -> ``(t_ns, exposition text)`` in time order. A URL may hold DCGM series,
            inference-server series or both.
        gpu_filter: which GPUs serve the target; ``None`` keeps all.
        window_ns: ``(start, end)`` on the same clock as the samples; samples outside are
            ignored. Defaults to the first and last sample.
        interval_s: the scrape interval that was asked for, used for staleness detection;
            defaults to the median spacing of the samples.

    Returns:
        A :class:`TelemetryResult`. Problems become ``warnings`` (one per URL and kind), never
        exceptions: a URL whose text does not parse simply contributes no table.
    """
    gpu_filter = gpu_filter or GpuFilter()
    all_t = [t for seq in scrapes.values() for t, _ in seq]
    if window_ns is None:
        window_ns = (min(all_t), max(all_t)) if all_t else (0, 0)
    w0, w1 = window_ns
    result = TelemetryResult(window_start_ns=w0, window_end_ns=w1, gpu_filter=gpu_filter)

    for url, seq in scrapes.items():
        parsed: list[tuple[int, list[tuple[str, dict[str, str], float]]]] = []
        bad: list[str] = []
        for t, text in seq:
            if not w0 <= t <= w1:
                continue
            try:
                parsed.append((t, parse_exposition(text)))
            except ValueError as exc:
                bad.append(str(exc))
        if bad:
            result.warnings.append(
                f"telemetry {url}: {len(bad)} of {len(bad) + len(parsed)} scrapes were not "
                f"Prometheus text ({bad[0][:120]}); "
                + ("continuing without this source" if not parsed else "those were skipped")
            )
        result.scrape_counts[url] = len(parsed)
        if not parsed:
            continue
        iv = interval_s if interval_s else _median_spacing([t for t, _ in parsed])
        found_gpu = _summarize_dcgm(url, parsed, gpu_filter, w0, iv, result)
        found_server = _summarize_server(url, parsed, w0, result)
        if not found_gpu and not found_server:
            result.warnings.append(
                f"telemetry {url}: no DCGM_FI_* or vllm:/sglang:/tgi_ metrics in "
                f"{len(parsed)} scrapes; continuing without this source"
            )
    return result


def _median_spacing(ts: Sequence[int]) -> float | None:
    if len(ts) < 2:
        return None
    return float(np.median(np.diff(np.asarray(sorted(ts), dtype=np.float64)))) / 1e9


def _counter_increase(values: Sequence[float]) -> tuple[float, int]:
    """Increase of a counter over consecutive samples, Prometheus ``increase()`` style.

    A drop means the counter restarted from zero (driver reload, server restart): the new value
    is all increase since the restart. Returns ``(increase, resets)``.
    """
    total = 0.0
    resets = 0
    for prev, cur in zip(values, values[1:], strict=False):
        if cur >= prev:
            total += cur - prev
        else:
            total += cur
            resets += 1
    return total, resets


def _summarize_dcgm(
    url: str,
    parsed: Sequence[tuple[int, list[tuple[str, dict[str, str], float]]]],
    gpu_filter: GpuFilter,
    w0: int,
    interval_s: float | None,
    result: TelemetryResult,
) -> bool:
    """Fill ``result.gpus`` from one URL; returns whether any DCGM series was seen."""
    # gpu_id -> list of (t, {metric: value}) ; meta from the latest labels
    per_gpu: dict[str, list[tuple[int, dict[str, float]]]] = {}
    meta: dict[str, dict[str, str]] = {}
    seen: dict[str, dict[str, str]] = {}
    for t, samples in parsed:
        row: dict[str, dict[str, float]] = {}
        for name, labels, value in samples:
            if not name.startswith("DCGM_FI_"):
                continue
            # the parser appends "_total" to counter samples (the energy counter)
            name = name.removesuffix("_total")
            gid = _gpu_id(labels)
            if gid is None:
                continue
            seen[gid] = labels
            if not gpu_filter.matches(labels):
                continue
            meta[gid] = labels
            if _is_blank(name, value):
                continue
            # exporters fed through Prometheus may emit one series per scrape target; keep last
            row.setdefault(gid, {})[name] = value
        for gid in meta:
            per_gpu.setdefault(gid, []).append((t, row.get(gid, {})))
    if not seen:
        return False
    if not per_gpu:
        pods = sorted({p for lb in seen.values() if (p := workload_pod(lb))})
        result.warnings.append(
            f"telemetry {url}: none of the {len(seen)} GPUs matched the GPU filter "
            f"({gpu_filter.describe()}); pods seen: {', '.join(pods) or 'none'}; "
            "no GPU table for this source"
        )
        return True

    stale_notes: list[str] = []
    for gid, rows in sorted(per_gpu.items()):
        labels = meta[gid]
        key = gid if gid not in result.gpus else f"{gid}@{url}"
        g = GpuSummary(
            gpu_id=key,
            source_url=url,
            index=labels.get("gpu"),
            uuid=_label(labels, "UUID", "uuid"),
            hostname=_label(labels, "Hostname", "hostname"),
            model_name=labels.get("modelName"),
            pci_bus_id=labels.get("pci_bus_id"),
            pod=workload_pod(labels),
            namespace=workload_namespace(labels),
            container=labels.get("exported_container") or labels.get("container"),
        )

        def col(metric: str, scale: float = 1.0, _rows: list = rows) -> list[float | None]:
            return [None if metric not in r else r[metric] * scale for _, r in _rows]

        g.power_w = Stat.of(col(POWER))
        g.utilization_pct = Stat.of(col(GPU_UTIL))
        g.memory_used_gb = Stat.of(col(FB_USED, _MIB / 1e9))
        g.gr_engine_active = Stat.of(col(GR_ENGINE_ACTIVE))
        g.tensor_active = Stat.of(col(TENSOR_ACTIVE))
        g.dram_active = Stat.of(col(DRAM_ACTIVE))
        energy = [v for v in col(ENERGY) if v is not None]
        if len(energy) >= 2:
            inc_mj, g.energy_counter_resets = _counter_increase(energy)
            g.energy_j = inc_mj / 1000.0
        # static-ish figures from the latest scrape that has them (a GPU may miss one scrape)
        last = next((r for _, r in reversed(rows) if POWER in r or FB_USED in r), rows[-1][1])
        g.power_limit_w = last.get(ENFORCED_POWER_LIMIT, last.get(POWER_LIMIT))
        if FB_USED in last and FB_FREE in last:
            total_mib = last[FB_USED] + last[FB_FREE] + last.get(FB_RESERVED, 0.0)
            g.memory_total_gb = total_mib * _MIB / 1e9
        g.series = [((t - w0) / 1e9, r.get(POWER), r.get(GPU_UTIL)) for t, r in rows]
        _staleness(g, rows, interval_s)
        if g.stale:
            res = (
                f"≈ {g.effective_resolution_s:.1f} s"
                if g.effective_resolution_s is not None
                else "coarser than the window"
            )
            stale_notes.append(
                f"{key} changed {g.distinct_samples - 1} times in {g.scrapes} scrapes "
                f"(effective resolution {res})"
            )
        result.gpus[key] = g
    if stale_notes:
        iv = f"{interval_s:.2f} s" if interval_s else "?"
        result.warnings.append(
            f"telemetry {url}: stale DCGM samples, the exporter collects slower than the "
            f"{iv} scrape interval (dcgm-exporter -c/--collect-interval defaults to 30000 ms): "
            + "; ".join(stale_notes)
            + "; averages and p99 rest on those few distinct readings"
        )
    return True


def _staleness(
    g: GpuSummary, rows: Sequence[tuple[int, dict[str, float]]], interval_s: float | None
) -> None:
    """Detect an exporter that updates slower than we scrape.

    dcgm-exporter re-reads DCGM every collect interval (30 s by default) and serves the same
    text in between, so consecutive identical readings of *all* of a GPU's fields mean "no new
    sample", not "the GPU was steady" (power and the energy counter move every real update).
    The effective resolution is the median time between changes; a GPU is stale when it is
    clearly coarser than the scrape interval.
    """
    g.scrapes = len(rows)
    changes = [t for (_, prev), (t, cur) in zip(rows, rows[1:], strict=False) if cur != prev]
    g.distinct_samples = 1 + len(changes) if rows else 0
    span_s = (rows[-1][0] - rows[0][0]) / 1e9 if rows else 0.0
    # Fewer than two observed updates: only a lower bound (the span) is known -> None.
    g.effective_resolution_s = (
        float(np.median(np.diff(np.asarray(changes)))) / 1e9 if len(changes) >= 2 else None
    )
    if len(rows) < 3 or not interval_s:
        return  # two boundary scrapes cannot tell an idle GPU from a stale exporter
    coarsest = g.effective_resolution_s if g.effective_resolution_s is not None else span_s
    g.stale = coarsest > 1.5 * interval_s


def _summarize_server(
    url: str,
    parsed: Sequence[tuple[int, list[tuple[str, dict[str, str], float]]]],
    w0: int,
    result: TelemetryResult,
) -> bool:
    """Fill ``result.servers[url]``; returns whether any known server metric was seen."""
    # name -> per scrape: {labels-key: value}
    by_name: dict[str, list[dict[tuple[tuple[str, str], ...], float]]] = {}
    engine: str | None = None
    n = len(parsed)
    for i, (_, samples) in enumerate(parsed):
        for name, labels, value in samples:
            for prefix, eng in _ENGINE_PREFIXES:
                if name.startswith(prefix):
                    engine = engine or eng
                    break
            else:
                continue
            if math.isnan(value):
                continue
            lst = by_name.setdefault(name, [{} for _ in range(n)])
            lst[i][tuple(sorted(labels.items()))] = value
    if engine is None:
        return False

    s = ServerSummary(url=url, engine=engine, scrapes=n)

    def pick(candidates: Sequence[str], suffix: str = "") -> str | None:
        for c in candidates:
            if c + suffix in by_name:
                return c
        return None

    gauge_series: dict[str, list[float | None]] = {}
    for canon, (cands, how) in _SERVER_GAUGES.items():
        gauge = pick(cands)
        if gauge is None:
            continue
        s.names[canon] = gauge
        vals: list[float | None] = []
        for snap in by_name[gauge]:
            if not snap:
                vals.append(None)
            elif how == "mean":
                vals.append(sum(snap.values()) / len(snap))
            else:
                vals.append(sum(snap.values()))
        gauge_series[canon] = vals
        setattr(s, canon, Stat.of(vals))

    def delta(name: str) -> float | None:
        snaps = by_name[name]
        keys = {k for snap in snaps for k in snap}
        total = 0.0
        seen_any = False
        for k in keys:
            vals = [snap[k] for snap in snaps if k in snap]
            if len(vals) >= 2:
                seen_any = True
                total += _counter_increase(vals)[0]
        return total if seen_any else None

    for canon, cands in _SERVER_COUNTERS.items():
        counter = pick(cands)
        if counter is not None:
            s.names[canon] = counter
            setattr(s, canon, delta(counter))
    for canon, cands in _SERVER_HISTOGRAMS.items():
        base = pick(cands, "_sum")
        if base is None or base + "_count" not in by_name:
            continue
        s.names[canon] = base
        dsum, dcount = delta(base + "_sum"), delta(base + "_count")
        mean = dsum / dcount if dsum is not None and dcount else None
        setattr(s, f"{canon}_mean_s", mean)

    def at(canon: str, i: int) -> float | None:
        vals = gauge_series.get(canon)
        return vals[i] if vals else None

    s.series = [
        (
            (t - w0) / 1e9,
            at("kv_cache_usage", i),
            at("requests_running", i),
            at("requests_waiting", i),
        )
        for i, (t, _) in enumerate(parsed)
    ]
    result.servers[url] = s
    return True


# ================================================================================================
# Validity signals, outputs (pure)
# ================================================================================================


def _signal(signal: str, severity: str, message: str, **numbers: Any) -> dict[str, Any]:
    return {"signal": signal, "severity": severity, "message": message, "numbers": numbers}


def validity_signals(
    result: TelemetryResult,
    *,
    client_completed: int | None = None,
    client_output_tokens: int | None = None,
    token_mismatch_count: int | None = None,
    dispatch_lag_p99_ms: float | None = None,
    dispatch_lag_threshold_ms: float = 10.0,
    foreign_tolerance: int = 0,
) -> list[dict[str, Any]]:
    """Facts that cast doubt on a point's numbers, each with the numbers behind it.

    Server-side facts come from ``result``; client-side ones are passed in because only the load
    generator knows them. Each signal is ``{"signal", "severity", "message", "numbers"}`` with
    severity ``"warning"`` (look at it) or ``"error"`` (the point does not measure what it says).

    Args:
        result: the point's telemetry.
        client_completed: requests the client completed (successes and errors that reached the
            server) inside the window; compared with the server's completed-request delta.
        client_output_tokens: Σ OSL the client counted in the window; compared with the server's
            generation-token delta.
        token_mismatch_count: requests whose client token count disagreed with server ``usage``.
        dispatch_lag_p99_ms: p99 of (actual − scheduled send time) in open-loop runs.
        dispatch_lag_threshold_ms: lag above which the client, not the server, set the pace.
        foreign_tolerance: server completions above the client's still accepted (boundary
            effects of requests straddling the window edges).
    """
    out: list[dict[str, Any]] = []
    servers = list(result.servers.values())
    server_completed = _sum_or_none(s.requests_completed for s in servers)
    if client_completed is not None and server_completed is not None:
        excess = server_completed - client_completed
        if excess > foreign_tolerance:
            sev = "error" if excess > max(2, 0.05 * client_completed) else "warning"
            out.append(
                _signal(
                    "foreign_traffic",
                    sev,
                    f"the server completed {server_completed:g} requests in the window, the "
                    f"client {client_completed}: {excess:g} came from someone else, so latency "
                    "and throughput include their load",
                    server_completed=server_completed,
                    client_completed=client_completed,
                    excess=excess,
                )
            )
        elif server_completed < client_completed - foreign_tolerance:
            out.append(
                _signal(
                    "partial_server_view",
                    "warning",
                    f"the scraped servers completed {server_completed:g} requests, the client "
                    f"{client_completed}: not every replica behind the target is scraped",
                    server_completed=server_completed,
                    client_completed=client_completed,
                )
            )
    waiting = [s.requests_waiting for s in servers if s.requests_waiting.n]
    if waiting:
        w_avg = sum(w.avg or 0.0 for w in waiting)
        w_max = max(w.max or 0.0 for w in waiting)
        if w_max > 0:
            out.append(
                _signal(
                    "server_queueing",
                    "warning",
                    f"requests waited in the server queue (avg {w_avg:.2f}, max {w_max:g}): "
                    "TTFT includes queueing, the server is at capacity for this load",
                    waiting_avg=w_avg,
                    waiting_max=w_max,
                )
            )
    kv = [s.kv_cache_usage.max for s in servers if s.kv_cache_usage.max is not None]
    if kv and max(kv) >= 0.99:
        out.append(
            _signal(
                "kv_cache_full",
                "warning",
                f"KV cache usage reached {max(kv) * 100:.1f} %: the server preempts or queues",
                kv_cache_usage_max=max(kv),
            )
        )
    server_tokens = _sum_or_none(s.generation_tokens for s in servers)
    if client_output_tokens is not None and server_tokens is not None and client_output_tokens:
        diff = server_tokens - client_output_tokens
        if abs(diff) > max(1.0, 0.01 * client_output_tokens):
            out.append(
                _signal(
                    "token_count_mismatch",
                    "warning",
                    f"the server generated {server_tokens:g} tokens in the window, the client "
                    f"counted {client_output_tokens}",
                    server_generation_tokens=server_tokens,
                    client_output_tokens=client_output_tokens,
                    difference=diff,
                )
            )
    if token_mismatch_count:
        out.append(
            _signal(
                "token_count_mismatch",
                "warning",
                f"{token_mismatch_count} requests: client token count differs from server usage",
                requests=token_mismatch_count,
            )
        )
    stale = [g for g in result.gpus.values() if g.stale]
    if stale:
        out.append(
            _signal(
                "stale_gpu_samples",
                "warning",
                f"{len(stale)} GPU(s) updated slower than scraped; GPU figures are coarse",
                gpus={
                    g.gpu_id: {
                        "scrapes": g.scrapes,
                        "distinct_samples": g.distinct_samples,
                        "effective_resolution_s": g.effective_resolution_s,
                    }
                    for g in stale
                },
            )
        )
    if dispatch_lag_p99_ms is not None and dispatch_lag_p99_ms > dispatch_lag_threshold_ms:
        out.append(
            _signal(
                "dispatch_lag",
                "error",
                f"p99 dispatch lag {dispatch_lag_p99_ms:.1f} ms > {dispatch_lag_threshold_ms:g} "
                "ms: the client could not send at the requested rate",
                dispatch_lag_p99_ms=dispatch_lag_p99_ms,
                threshold_ms=dispatch_lag_threshold_ms,
            )
        )
    return out


def _sum_or_none(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def format_value(value: float | None, digits: int = 2) -> str:
    """CSV/console cell: ``N/A`` for a missing metric (never 0), else fixed-point."""
    if value is None:
        return "N/A"
    return f"{value:.{digits}f}"


def format_gpu_row(row: Mapping[str, Any]) -> list[str]:
    """CSV cells of one table-2 row, in :data:`GPU_SUMMARY_COLUMNS` order.

    Energy keeps six decimals: one point's energy in MJ is small (100 J = 0.0001 MJ).
    """
    cells = []
    for c in GPU_SUMMARY_COLUMNS:
        v = row.get(c)
        cells.append(v if isinstance(v, str) else format_value(v, 6 if "(MJ)" in c else 2))
    return cells


def gpu_summary_rows(result: TelemetryResult) -> list[dict[str, str | float | None]]:
    """Rows of table 2 of ``analyze_export_genai_perf.csv``, one per GPU, keyed by
    :data:`GPU_SUMMARY_COLUMNS`. Values stay numbers (``None`` when absent); render them with
    :func:`format_value` so a missing metric reads ``N/A``. Energy is in megajoules (MJ).
    """
    return [
        {
            "GPU": g.gpu_id,
            "UUID": g.uuid,
            "p99 GPU Power Usage (W)": g.power_w.p99,
            "GPU Energy Consumption (MJ)": g.energy_mj,
            "p99 GPU Utilization (%)": g.utilization_pct.p99,
            "p99 GPU Memory Used (GB)": g.memory_used_gb.p99,
        }
        for g in result.gpus.values()
    ]


def gpu_summary_rows_from_json(telemetry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Table-2 rows from a saved ``profile_export_genai_perf.json["telemetry"]`` section, so
    ``llmbench analyze`` can build the GPU table from artefacts alone (same keys and values as
    :func:`gpu_summary_rows`)."""
    rows = []
    for gid, g in (telemetry.get("gpus") or {}).items():
        rows.append(
            {
                "GPU": g.get("gpu_id", gid),
                "UUID": g.get("uuid"),
                "p99 GPU Power Usage (W)": (g.get("power_w") or {}).get("p99"),
                "GPU Energy Consumption (MJ)": g.get("energy_mj"),
                "p99 GPU Utilization (%)": (g.get("utilization_pct") or {}).get("p99"),
                "p99 GPU Memory Used (GB)": (g.get("memory_used_gb") or {}).get("p99"),
            }
        )
    return rows


def energy_efficiency(
    result: TelemetryResult, output_tokens: float, window_s: float
) -> dict[str, float | None]:
    """Energy per output token and throughput per watt over the kept GPUs.

    ``window_s`` is the client's measurement window (T_y − T_x) and ``output_tokens`` its Σ OSL,
    so the figures line up with OTT. Any missing input gives ``None``, not 0.
    """
    gpus = list(result.gpus.values())
    energy = _sum_or_none(g.energy_j for g in gpus) if gpus else None
    if gpus and any(g.energy_j is None for g in gpus):
        energy = None  # a partial sum would flatter the point
    power = _sum_or_none(g.power_w.avg for g in gpus) if gpus else None
    if gpus and any(g.power_w.avg is None for g in gpus):
        power = None
    j_per_tok = energy / output_tokens if energy is not None and output_tokens > 0 else None
    tps_per_w = (
        output_tokens / window_s / power
        if power is not None and power > 0 and window_s > 0
        else None
    )
    return {
        "energy_j": energy,
        "avg_power_w": power,
        "joules_per_output_token": j_per_tok,
        "output_tokens_per_s_per_watt": tps_per_w,
    }


def telemetry_json(
    result: TelemetryResult, validity: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``"telemetry"`` section of ``profile_export_genai_perf.json``."""
    return {
        "window_s": result.window_s,
        "gpu_filter": {
            "pods": list(result.gpu_filter.pods),
            "namespaces": list(result.gpu_filter.namespaces),
            "uuids": list(result.gpu_filter.uuids),
        },
        "gpus": {k: g.to_json() for k, g in result.gpus.items()},
        "server": {k: s.to_json() for k, s in result.servers.items()},
        "scrape_counts": dict(result.scrape_counts),
        "warnings": list(result.warnings),
        "validity": [dict(v) for v in (validity or [])],
    }


def client_facts(records: Iterable[Any], *, window_includes_warmup: bool = True) -> dict[str, Any]:
    """The client-side inputs of :func:`validity_signals`, from the point's request records.

    Duck-typed on ``llmbench.runner.client.records.RequestRecord`` (``warmup``, ``error_type``,
    ``last_token_ns``, ``output_tokens``, ``output_tokens_source``, ``output_tokens_client``,
    ``scheduled_ns``, ``sent_ns``). ``window_includes_warmup`` says whether the telemetry window
    also covered the warm-up requests (it does when ``on_window("start")`` fires before warm-up):
    the server counts every request it finished, so the client must too.

    Errored requests may or may not reach the server's success counter (vLLM counts aborts), so
    their number becomes ``foreign_tolerance`` instead of being guessed either way.
    """
    recs = [r for r in records if window_includes_warmup or not getattr(r, "warmup", False)]
    ok = [
        r
        for r in recs
        if getattr(r, "error_type", None) is None and getattr(r, "last_token_ns", None) is not None
    ]
    errors = len(recs) - len(ok)
    out_tokens = [getattr(r, "output_tokens", None) for r in ok]
    mismatch = sum(
        1
        for r in ok
        if getattr(r, "output_tokens_source", None) == "server"
        and getattr(r, "output_tokens_client", None) is not None
        and r.output_tokens_client != r.output_tokens
    )
    lag = [
        (r.sent_ns - r.scheduled_ns) / 1e6
        for r in recs
        if not getattr(r, "warmup", False) and getattr(r, "scheduled_ns", None) is not None
    ]
    return {
        "client_completed": len(ok),
        "client_output_tokens": (
            sum(int(t) for t in out_tokens if t is not None)
            if out_tokens and all(t is not None for t in out_tokens)
            else None
        ),
        "token_mismatch_count": mismatch,
        "dispatch_lag_p99_ms": float(np.percentile(lag, 99)) if lag else None,
        "foreign_tolerance": errors,
    }


def telemetry_section(
    result: TelemetryResult,
    records: Iterable[Any] = (),
    *,
    output_tokens: float | None = None,
    window_s: float | None = None,
    window_includes_warmup: bool = True,
) -> dict[str, Any]:
    """Everything for ``profile_export_genai_perf.json["telemetry"]`` in one call.

    ``output_tokens`` (Σ OSL of measured requests) and ``window_s`` (T_y − T_x) are the client's
    figures behind OTT, so ``efficiency`` lines up with the throughput table; either missing
    gives ``None`` efficiency figures. Validity signals use :func:`client_facts` of ``records``.
    """
    facts = client_facts(records, window_includes_warmup=window_includes_warmup)
    validity = validity_signals(result, **facts)
    doc = telemetry_json(result, validity)
    if output_tokens is not None and window_s is not None:
        doc["efficiency"] = energy_efficiency(result, output_tokens, window_s)
    else:
        doc["efficiency"] = energy_efficiency(result, 0.0, 0.0)
    return doc


def plot_telemetry(result: TelemetryResult, path: str | Path) -> Path | None:
    """PNG of GPU power and utilisation and server KV-cache usage over the window.

    One figure, three stacked panels sharing the time axis (seconds since the window opened),
    one line per GPU / server. Returns ``None`` (and writes nothing) when there is no series.
    Uses matplotlib's object API (no pyplot, no global backend state), so it is safe in threads.
    """
    gpus = [g for g in result.gpus.values() if g.series]
    servers = [s for s in result.servers.values() if s.series]
    if not gpus and not servers:
        return None
    from matplotlib.figure import Figure  # lazy: plotting is optional and slow to import

    fig = Figure(figsize=(9, 8), layout="constrained")
    ax_p, ax_u, ax_kv = fig.subplots(3, 1, sharex=True)
    for g in gpus:
        t = [p[0] for p in g.series]
        ax_p.plot(t, [np.nan if p[1] is None else p[1] for p in g.series], label=g.gpu_id)
        ax_u.plot(t, [np.nan if p[2] is None else p[2] for p in g.series], label=g.gpu_id)
    for s in servers:
        ax_kv.plot(
            [p[0] for p in s.series],
            [np.nan if p[1] is None else 100.0 * p[1] for p in s.series],
            label=s.url,
        )
    for ax, title, unit in (
        (ax_p, "GPU power", "W"),
        (ax_u, "GPU utilisation", "%"),
        (ax_kv, "KV-cache usage", "%"),
    ):
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small", loc="best")
    ax_kv.set_xlabel("seconds since the measurement window opened")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


# ================================================================================================
# CLI
# ================================================================================================


def _positive_float(flag: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} is not a number") from None
        if not v > 0 or math.isinf(v):
            raise argparse.ArgumentTypeError(f"{flag}: must be > 0, got {text}")
        return v

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the telemetry flags to ``llmbench profile`` (and anything that runs points).

    Destinations: ``server_metrics_url`` (list), ``target_metrics`` (``auto``/``off``/URL),
    ``telemetry_interval``, ``telemetry_timeout``, ``gpu_pod``, ``gpu_namespace``, ``gpu_uuid``
    (lists). The LLMBenchmark spec maps onto them: ``telemetry.dcgm: <URL>`` (or the exporter
    the operator found) -> ``--server-metrics-url``, ``telemetry.serverMetrics`` ->
    ``--target-metrics``, the resolved inference pods -> ``--gpu-pod``/``--gpu-namespace``.
    """
    g = parser.add_argument_group("telemetry (GPU and inference-server metrics)")
    g.add_argument(
        "--server-metrics-url",
        action="append",
        default=[],
        metavar="URL",
        help="Prometheus text endpoint to scrape during each point, repeatable; e.g. "
        "dcgm-exporter at http://<node>:9400/metrics",
    )
    g.add_argument(
        "--target-metrics",
        default="auto",
        metavar="auto|off|URL",
        help="the inference server's own metrics: auto = <target base URL>/metrics (default)",
    )
    g.add_argument(
        "--telemetry-interval",
        type=_positive_float("--telemetry-interval"),
        default=1.0,
        metavar="S",
        help="seconds between scrapes, plus one at each window boundary (default 1)",
    )
    g.add_argument(
        "--telemetry-timeout",
        type=_positive_float("--telemetry-timeout"),
        default=2.0,
        metavar="S",
        help="per-scrape timeout in seconds (default 2)",
    )
    g.add_argument(
        "--gpu-pod",
        action="append",
        default=[],
        metavar="NAME",
        help="keep only GPUs serving this pod (glob ok; pod or exported_pod label), repeatable",
    )
    g.add_argument(
        "--gpu-namespace",
        action="append",
        default=[],
        metavar="NS",
        help="keep only GPUs whose pod is in this namespace, repeatable",
    )
    g.add_argument(
        "--gpu-uuid",
        action="append",
        default=[],
        metavar="UUID",
        help="keep only these GPUs (DCGM UUID label, GPU-...), repeatable",
    )


def collector_from_args(args: argparse.Namespace, target_url: str) -> TelemetryCollector | None:
    """The collector the flags of :func:`add_arguments` describe, or ``None`` when there is
    nothing to scrape (``--target-metrics off`` and no ``--server-metrics-url``)."""
    target = getattr(args, "target_metrics", "auto") or "auto"
    urls = list(getattr(args, "server_metrics_url", []) or [])
    if target == "auto":
        urls = metrics_urls(target_url, urls)
    elif target != "off":
        urls = list(dict.fromkeys([*urls, target]))
    if not urls:
        return None
    return TelemetryCollector(
        urls,
        interval_s=getattr(args, "telemetry_interval", 1.0),
        timeout_s=getattr(args, "telemetry_timeout", 2.0),
        gpu_filter=GpuFilter(
            pods=tuple(getattr(args, "gpu_pod", []) or []),
            namespaces=tuple(getattr(args, "gpu_namespace", []) or []),
            uuids=tuple(getattr(args, "gpu_uuid", []) or []),
        ),
    )


# ================================================================================================
# Collector (I/O)
# ================================================================================================


class TelemetryCollector:
    """Scrapes Prometheus text endpoints across measurement windows.

    ``start()`` takes a boundary scrape of every URL and starts one periodic asyncio task per
    URL; ``stop()`` cancels them, takes the closing boundary scrape and returns the window's
    summary. Neither raises: a URL that cannot be fetched logs one warning naming it (at its
    first failure) and its table is left out. Timestamps use ``time.perf_counter_ns`` like the
    request records, so the window lines up with the client's.

    The collector may be reused for the next load point (``start()`` again after ``stop()``):
    a URL that never answered in the previous window is then left out of the boundary scrapes
    (its loop still retries it, 5x less often), so a dead exporter costs each point no timeout.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval_s: float = 1.0,
        gpu_filter: GpuFilter | None = None,
        timeout_s: float = 2.0,
        headers: Mapping[str, str] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        """Configure; nothing is fetched until :meth:`start`.

        Args:
            urls: Prometheus text URLs (dcgm-exporter, the server's ``/metrics``); see
                :func:`metrics_urls`.
            interval_s: periodic scrape interval (``--telemetry-interval``), at least 50 ms.
            gpu_filter: GPUs that serve the target.
            timeout_s: per-request timeout; short so a hung exporter cannot stall the point.
            headers: extra request headers (e.g. a bearer token for a protected endpoint).
            clock: monotonic ns clock, injectable for tests.
        """
        self.urls = list(dict.fromkeys(urls))
        self.interval_s = max(0.05, float(interval_s))
        self.gpu_filter = gpu_filter or GpuFilter()
        self.timeout_s = timeout_s
        self._headers = dict(headers or {})
        self._clock = clock
        self._scrapes: dict[str, list[Scrape]] = {}
        self._failures: dict[str, list[str]] = {}
        self._attempts: dict[str, int] = {}
        self._dead: set[str] = set()
        self._client: httpx.AsyncClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._t0: int = 0
        self._running = False
        #: the last window's summary (set by :meth:`on_window` ``"end"``)
        self.result: TelemetryResult | None = None
        self._reset()

    async def on_window(self, phase: str) -> None:
        """Adapter for ``run_profile(on_window=...)``: ``"start"`` opens the window, ``"end"``
        closes it and leaves the summary in :attr:`result`."""
        if phase == "start":
            await self.start()
        elif phase == "end":
            self.result = await self.stop()

    def _reset(self) -> None:
        self._scrapes = {u: [] for u in self.urls}
        self._failures = {u: [] for u in self.urls}
        self._attempts = {u: 0 for u in self.urls}

    @property
    def raw_scrapes(self) -> dict[str, list[Scrape]]:
        """The current (or last) window's scrapes, compacted (see :func:`compact_exposition`),
        URL -> ``(t_ns, text)``; keep them to re-analyse offline with :func:`summarize_scrapes`.
        """
        return {u: list(v) for u, v in self._scrapes.items()}

    async def start(self) -> None:
        """Open a window: boundary scrape now, then one every ``interval_s``. Never raises."""
        if self._running:
            return
        self._running = True
        self._reset()
        self._t0 = self._clock()
        if not self.urls:
            return
        try:
            # trust_env=False: metrics endpoints are cluster-internal; a proxy from the
            # environment would only add latency or refuse.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                headers=self._headers,
                trust_env=False,
            )
            await self._scrape_all([u for u in self.urls if u not in self._dead])
            # one loop per URL: a slow or black-holed exporter delays only its own samples
            self._tasks = [
                asyncio.create_task(self._loop(u), name=f"llmbench-telemetry {u}")
                for u in self.urls
            ]
        except Exception as exc:  # never take the run down
            logger.warning("telemetry: could not start (%s); continuing without it", exc)

    async def stop(self) -> TelemetryResult:
        """Close the window: stop the loops, boundary scrape, summarise. Never raises."""
        t_end = self._clock()
        try:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._tasks = []
            if self._client is not None:
                # skip URLs that never answered: the run should not wait out their timeouts
                alive = [u for u in self.urls if self._scrapes[u] or not self._failures[u]]
                await self._scrape_all([u for u in alive if u not in self._dead])
                t_end = self._clock()
        except Exception as exc:
            logger.warning("telemetry: closing scrape failed (%s)", exc)
        finally:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    await self._client.aclose()
                self._client = None
            self._running = False
        result = self._summarize(t_end)
        self._dead = {u for u in self.urls if not self._scrapes[u]}
        return result

    def _summarize(self, t_end: int) -> TelemetryResult:
        ok = {u: s for u, s in self._scrapes.items() if s}
        try:
            result = summarize_scrapes(
                ok,
                gpu_filter=self.gpu_filter,
                window_ns=(self._t0, max(t_end, self._t0)),
                interval_s=self.interval_s,
            )
        except Exception as exc:  # a bug here must not cost the point its client metrics
            logger.warning("telemetry: summary failed (%s)", exc, exc_info=True)
            result = TelemetryResult(
                window_start_ns=self._t0, window_end_ns=t_end, gpu_filter=self.gpu_filter
            )
            result.warnings.append(f"telemetry summary failed: {exc}")
        for w in result.warnings:
            logger.warning("%s", w)
        fetch_warnings = []
        for url in self.urls:
            fails = self._failures[url]
            if fails:
                tail = (
                    "continuing without this source"
                    if not self._scrapes[url]
                    else "figures rest on the scrapes that succeeded"
                )
                fetch_warnings.append(
                    f"telemetry {url}: {len(fails)} of {self._attempts[url]} scrapes failed "
                    f"({fails[0]}); {tail}"
                )
            elif url in self._dead and not self._scrapes[url]:
                fetch_warnings.append(
                    f"telemetry {url}: unreachable in an earlier window and not answering "
                    "now; continuing without this source"
                )
            result.scrape_counts.setdefault(url, 0)
        result.warnings[:0] = fetch_warnings  # logged already, at the first failure
        return result

    async def _loop(self, url: str) -> None:
        """Scrape ``url`` on a fixed grid from the window start; a slow scrape skips ticks
        instead of drifting. A URL that has only ever failed is retried 5x less often."""
        k = 1
        step_ns = self.interval_s * 1e9
        while True:
            if url in self._dead or (self._failures[url] and not self._scrapes[url]):
                k = max(k, 5)
            target = self._t0 + int(k * step_ns)
            delay = (target - self._clock()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            await self._scrape_one(url)
            now = self._clock()
            k = max(k + 1, int((now - self._t0) / step_ns) + 1)
            if self._failures[url] and not self._scrapes[url]:
                k += 4

    async def _scrape_all(self, urls: Sequence[str]) -> None:
        await asyncio.gather(*(self._scrape_one(u) for u in urls))

    async def _scrape_one(self, url: str) -> None:
        assert self._client is not None
        self._attempts[url] += 1
        try:
            resp = await self._client.get(url)
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}")
            text = resp.text
        except asyncio.CancelledError:
            self._attempts[url] -= 1
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}".rstrip(": ")
            if not self._failures[url] and url not in self._dead:
                logger.warning("telemetry %s: scrape failed (%s); continuing without it", url, why)
            self._failures[url].append(why)
            return
        t = self._clock()
        self._scrapes[url].append((t, compact_exposition(text)))
