"""Table cells and names: the one ``N/A`` formatter, the GPU-table cells and the metric labels.

Why this module exists: the per-point CSV (``profile_export_genai_perf.csv``), the sweep's
``analyze_export_genai_perf.csv``, the console tables, the HTML report, the plots, ``compare``
and the SLO messages all name the same metrics and print the same GPU table; a missing metric
must read ``N/A`` (never 0) everywhere, and a metric must not be called three different things.
Rows come from the result models (:mod:`llmbench.api.results`), so tables rebuild from
artefacts alone. Light on purpose: no scraper, parser or plotting library is imported.

Vocabulary, not presentation: the artefact writers (:mod:`llmbench.runner.artifacts`), the knee
and SLO messages and the sweep's tables use it, so it sits below the point and the sweep (an
import contract says so) and ``report/`` stays one layer above them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmbench.api.results import GPU_SUMMARY_COLUMNS

__all__ = [
    "DISTRIBUTIONS",
    "GENAI_PERF_DISTRIBUTIONS",
    "METRIC_LABELS",
    "REASONING_DISTRIBUTIONS",
    "SINGLE_VALUES",
    "MetricLabel",
    "format_gpu_row",
    "format_value",
    "genai_perf_number",
    "genai_perf_stat",
]


def format_value(value: float | None, digits: int = 2) -> str:
    """CSV/console cell: ``N/A`` for a missing metric (never 0), else fixed-point."""
    if value is None:
        return "N/A"
    return f"{value:.{digits}f}"


def genai_perf_number(value: float | None, digits: int = 2) -> str:
    """A number as GenAI-Perf's ``analyze`` CSV writes it (``f"{v:.2f}"``); ``N/A`` if absent."""
    return format_value(value, digits)


def genai_perf_stat(value: float | None, digits: int = 2) -> str:
    """A statistic as GenAI-Perf's profile CSV writes it: two decimals with thousands
    separators (``1,234.50``, which the csv module then quotes); ``N/A`` when absent."""
    return "N/A" if value is None else f"{value:,.{digits}f}"


def format_gpu_row(
    row: Mapping[str, Any], number: Callable[[float | None, int], str] = format_value
) -> list[str]:
    """CSV cells of one GPU-table row, in :data:`GPU_SUMMARY_COLUMNS` order.

    Rows come from :meth:`llmbench.api.results.TelemetrySummary.gpu_rows`. Energy keeps six
    decimals: it is the energy of one point's window in MJ, small (100 J = 0.0001 MJ).
    """
    cells = []
    for c in GPU_SUMMARY_COLUMNS:
        v = row.get(c)
        cells.append(v if isinstance(v, str) else number(v, 6 if "(MJ)" in c else 2))
    return cells


@dataclass(frozen=True)
class MetricLabel:
    """How one metric of :class:`~llmbench.api.results.PointResult` is named to people.

    ``genai_perf`` is GenAI-Perf's row label (CSV and console tables, kept verbatim so its
    readers recognise ours); ``name`` and ``unit`` build every other label (sweep columns,
    compare rows, plot axes, SLO messages); ``terse`` heads a narrow console column.
    """

    genai_perf: str
    name: str
    unit: str
    terse: str

    def stat(self, stat: str) -> str:
        """``p99 TTFT (ms)``: one statistic of the metric, as the sweep table names it."""
        return f"{stat} {self.name} ({self.unit})"


#: PointResult field -> labels. The single place a metric's name is spelled.
METRIC_LABELS: dict[str, MetricLabel] = {
    "time_to_first_token": MetricLabel("Time To First Token (ms)", "TTFT", "ms", "TTFT"),
    "time_to_second_token": MetricLabel("Time To Second Token (ms)", "TTST", "ms", "TTST"),
    "request_latency": MetricLabel("Request Latency (ms)", "Request Latency", "ms", "e2e"),
    "inter_token_latency": MetricLabel("Inter Token Latency (ms)", "ITL", "ms", "ITL"),
    "output_token_throughput_per_user": MetricLabel(
        "Output Token Throughput Per User (tokens/sec/user)", "OTT per user", "tok/s/user",
        "OTT/user",
    ),
    "output_sequence_length": MetricLabel(
        "Output Sequence Length (tokens)", "OSL", "tokens", "OSL"
    ),
    "input_sequence_length": MetricLabel("Input Sequence Length (tokens)", "ISL", "tokens", "ISL"),
    "inter_chunk_gap": MetricLabel("Inter Chunk Gap (ms)", "inter-chunk gap", "ms", "gap"),
    "time_to_first_reasoning_token": MetricLabel(
        "Time To First Reasoning Token (ms)", "TTFR", "ms", "TTFR"
    ),
    "time_to_first_answer_token": MetricLabel(
        "Time To First Answer Token (ms)", "TTFA", "ms", "TTFA"
    ),
    "answer_inter_token_latency": MetricLabel(
        "Answer Inter Token Latency (ms)", "answer ITL", "ms", "ans ITL"
    ),
    "reasoning_token_count": MetricLabel(
        "Reasoning Token Count (tokens)", "reasoning tokens", "tokens", "reason"
    ),
    "answer_token_count": MetricLabel(
        "Answer Token Count (tokens)", "answer tokens", "tokens", "answer"
    ),
    "output_token_throughput": MetricLabel(
        "Output Token Throughput (tokens/sec)", "OTT", "tok/s", "OTT"
    ),
    "request_throughput": MetricLabel("Request Throughput (per sec)", "RPS", "req/s", "RPS"),
    "request_count": MetricLabel("Request Count (count)", "requests", "count", "requests"),
    "goodput": MetricLabel("Request Goodput (per sec)", "Goodput", "req/s", "goodput"),
}

#: GenAI-Perf's distribution metrics (a :class:`~llmbench.api.results.Stat` each) in the row
#: order of its CSV's first table.
GENAI_PERF_DISTRIBUTIONS = (
    "time_to_first_token",
    "time_to_second_token",
    "request_latency",
    "inter_token_latency",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
)

#: Our reasoning metrics (present only when some answer reasoned), in table order.
REASONING_DISTRIBUTIONS = (
    "time_to_first_reasoning_token",
    "time_to_first_answer_token",
    "answer_inter_token_latency",
    "reasoning_token_count",
    "answer_token_count",
)

#: Every distribution metric: GenAI-Perf's, then ours.
DISTRIBUTIONS = (*GENAI_PERF_DISTRIBUTIONS, "inter_chunk_gap", *REASONING_DISTRIBUTIONS)

#: Single-valued metrics (``avg`` only), in the order of GenAI-Perf's second CSV table
#: (goodput before the request count).
SINGLE_VALUES = ("output_token_throughput", "request_throughput", "goodput", "request_count")
