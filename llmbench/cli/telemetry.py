"""The telemetry flags of ``llmbench profile`` and ``llmbench analyze``, and the collector
they describe.

Why this module exists: the command line owns its flags; the telemetry package knows nothing of
argparse. :func:`add_arguments` adds the flags, :func:`collector_from_args` turns the parsed
flags into a :class:`~llmbench.runner.telemetry.collector.TelemetryCollector` (or ``None`` when
there is nothing to scrape).
"""

from __future__ import annotations

import argparse

from llmbench.cli.flags import positive_float
from llmbench.runner.telemetry.collector import TelemetryCollector
from llmbench.runner.telemetry.model import GpuFilter
from llmbench.runner.telemetry.parse import metrics_urls

__all__ = ["add_arguments", "collector_from_args"]


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
        "--server-metrics-urls",
        dest="server_metrics_url",
        nargs="+",
        action="extend",
        default=[],
        metavar="URL",
        help="Prometheus text endpoint(s) to scrape during each point; several per flag and "
        "repeatable (GenAI-Perf's --server-metrics-urls); e.g. dcgm-exporter at "
        "http://<node>:9400/metrics",
    )
    g.add_argument(
        "--target-metrics",
        default="auto",
        metavar="auto|off|URL",
        help="the inference server's own metrics: auto = <target base URL>/metrics (default)",
    )
    g.add_argument(
        "--telemetry-interval",
        type=positive_float("--telemetry-interval"),
        default=1.0,
        metavar="S",
        help="seconds between scrapes, plus one at each window boundary (default 1)",
    )
    g.add_argument(
        "--telemetry-timeout",
        type=positive_float("--telemetry-timeout"),
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
