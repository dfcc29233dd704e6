"""``profile_export_genai_perf.csv``: GenAI-Perf 0.0.16's tables of one point, then ours."""

from __future__ import annotations

import csv
import io
from typing import Any

from llmbench.api.results import PointResult
from llmbench.runner.labels import (
    GENAI_PERF_DISTRIBUTIONS,
    METRIC_LABELS,
    REASONING_DISTRIBUTIONS,
    SINGLE_VALUES,
    genai_perf_stat,
)

__all__ = ["CONSTANT_GPU_METRICS", "CSV_STATS", "STREAMING_ONLY", "genai_perf_csv", "streamed"]

#: Statistic columns of the CSV's first table, in GenAI-Perf's order.
CSV_STATS = ("avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25", "p10", "p5", "p1")

#: GenAI-Perf's metrics that exist only when streaming (its CSV leaves them out otherwise).
STREAMING_ONLY = (
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput_per_user",
)

#: GenAI-Perf's GPU metrics with one value (``Metric,GPU,Value``); the others get statistics.
CONSTANT_GPU_METRICS = ("gpu_power_limit", "total_gpu_memory")


def _gpu_metric_name(metric: str, unit: str) -> str:
    """GenAI-Perf's GPU row label: words capitalised, ``gpu`` upper case, then the unit."""
    words = [w.upper() if w == "gpu" else w.capitalize() for w in metric.split("_")]
    return f"{' '.join(words)} ({unit})"


def streamed(summary: PointResult) -> bool:
    """Whether the point streamed (its settings say so; a legacy file: it has a TTFT)."""
    settings = summary.input_config or {}
    if "streaming" in settings:
        return bool(settings["streaming"]) and settings.get("endpoint_type") != "embeddings"
    return summary.time_to_first_token is not None


def genai_perf_csv(summary: PointResult) -> str:
    """``profile_export_genai_perf.csv`` as GenAI-Perf 0.0.16 writes it, then our table.

    CRLF line ends (Python's csv default, as GenAI-Perf). Tables, separated by an empty row:

    1. ``Metric,avg,min,max,p99,…,p1``: GenAI-Perf's per-request metrics in its order; the
       streaming-only ones are left out of a non-streaming run (as GenAI-Perf does), a metric
       without data reads ``N/A``;
    2. ``Metric,Value``: output token throughput, request throughput, goodput (with SLOs),
       request count;
    3. with GPU telemetry, ``Metric,GPU,avg,min,…,p1`` (one row per metric and GPU) and
       ``Metric,GPU,Value`` (power limit, total memory), from ``telemetry_stats``;
    4. ours, ``llmbench Metric,Value``: errors, inter-chunk gaps, the reasoning metrics
       (avg, p50, p99; when some answer reasoned), dispatch lag, energy per output token.

    Numbers as GenAI-Perf formats them: two decimals with thousands separators (``1,234.50``,
    quoted by the csv module); the GPU ``Value`` column without separators. One exception:
    energy keeps six decimals, being one window's energy in MJ (100 J = 0.0001 MJ) where
    GenAI-Perf shows the counter's reading since the driver loaded.
    """
    buf = io.StringIO()
    w = csv.writer(buf)
    embeddings = (summary.input_config or {}).get("endpoint_type") == "embeddings"
    streaming = streamed(summary)
    w.writerow(["Metric", *CSV_STATS])
    for key in ("request_latency",) if embeddings else GENAI_PERF_DISTRIBUTIONS:
        if key in STREAMING_ONLY and not streaming:
            continue
        stat = summary.stat(key)
        cells = [genai_perf_stat(None if stat is None else getattr(stat, s)) for s in CSV_STATS]
        w.writerow([METRIC_LABELS[key].genai_perf, *cells])
    w.writerow([])
    w.writerow(["Metric", "Value"])
    for key in SINGLE_VALUES:
        if key == "goodput" and summary.goodput is None:
            continue
        if key == "output_token_throughput" and embeddings:
            continue
        w.writerow([METRIC_LABELS[key].genai_perf, genai_perf_stat(summary.single(key))])
    _gpu_tables(w, summary)
    _our_table(w, summary)
    return buf.getvalue()


def _gpu_tables(w: Any, summary: PointResult) -> None:
    stats = summary.telemetry.genai_perf_stats() if summary.telemetry is not None else {}
    if not stats:
        return
    w.writerow([])
    w.writerow(["Metric", "GPU", *CSV_STATS])
    for metric, doc in stats.items():
        if metric in CONSTANT_GPU_METRICS:
            continue
        label = _gpu_metric_name(metric, doc["unit"])
        digits = 6 if doc["unit"] == "MJ" else 2
        for gpu, values in doc.items():
            if gpu != "unit":
                cells = (genai_perf_stat(values.get(s), digits) for s in CSV_STATS)
                w.writerow([label, gpu, *cells])
    w.writerow([])
    w.writerow(["Metric", "GPU", "Value"])
    for metric, doc in stats.items():
        if metric not in CONSTANT_GPU_METRICS:
            continue
        label = _gpu_metric_name(metric, doc["unit"])
        for gpu, values in doc.items():
            if gpu != "unit":
                w.writerow([label, gpu, f"{values['avg']:.2f}"])


def _our_table(w: Any, summary: PointResult) -> None:
    """Our rows, after GenAI-Perf's tables so its readers find theirs where they expect them."""
    rows: list[tuple[str, str]] = [("Error Count (count)", str(summary.errors.total))]
    rows += [(f"Errors: {k} (count)", str(v.count)) for k, v in summary.errors.by_type.items()]
    if summary.goodput is not None:
        rows.append(("Good Requests (count)", str(summary.goodput.good_requests)))
    gap = summary.inter_chunk_gap
    if gap is not None:
        rows += [("Inter Chunk Gap avg (ms)", genai_perf_stat(gap.avg)),
                 ("Inter Chunk Gap p99 (ms)", genai_perf_stat(gap.p99))]
    for key in REASONING_DISTRIBUTIONS:  # only where some answer reasoned
        stat = summary.stat(key)
        if stat is not None:
            label = METRIC_LABELS[key]
            name = label.genai_perf.rsplit(" (", 1)[0]
            rows += [(f"{name} {s} ({label.unit})",
                      genai_perf_stat(getattr(stat, s))) for s in ("avg", "p50", "p99")]
    if summary.dispatch is not None:
        rows += [
            ("Dispatch Lag p99 (ms)", genai_perf_stat(summary.dispatch.lag_ms.p99)),
            ("Achieved Request Rate (per sec)",
             genai_perf_stat(summary.dispatch.achieved_request_rate)),
        ]
    tele = summary.telemetry
    if tele is not None and tele.efficiency is not None:
        rows.append(("Energy per Output Token (J)",
                     genai_perf_stat(tele.efficiency.joules_per_output_token)))
    w.writerow([])
    w.writerow(["llmbench Metric", "Value"])
    w.writerows(rows)

