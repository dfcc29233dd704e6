"""Artefact files in GenAI-Perf's names and layouts, so existing dashboards read ours.

``profile_export.json`` keeps every measured fact per request (re-analysable later);
``profile_export_genai_perf.json`` holds the statistics and the arguments used (never the API
key), written from and read back into :class:`~llmbench.api.results.PointResult`;
``profile_export_genai_perf.csv`` is GenAI-Perf's two-table CSV.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench.api.results import GPU_SUMMARY_COLUMNS, PointResult, read_result
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.report.tables import (
    DISTRIBUTIONS,
    METRIC_LABELS,
    SINGLE_VALUES,
    format_gpu_row,
)

PROFILE_EXPORT = "profile_export.json"
GENAI_PERF_JSON = "profile_export_genai_perf.json"
GENAI_PERF_CSV = "profile_export_genai_perf.csv"
INPUTS_JSON = "inputs.json"

#: Statistic columns of the CSV's first table, in GenAI-Perf's order.
CSV_STATS = ("avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25", "p10", "p5", "p1")


def default_artifact_dir(model: str, endpoint_type: str, mode: str, value: float | int) -> Path:
    """``artifacts/<model>-<endpoint>-<mode><value>``, with path separators made safe."""
    safe_model = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
    shown = int(value) if float(value).is_integer() else value
    return Path("artifacts") / f"{safe_model}-{endpoint_type}-{mode}{shown}"


def _fmt(v: Any) -> str:
    if v is None:
        return "N/A"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def genai_perf_csv(summary: PointResult) -> str:
    """The CSV text: distribution table, a blank line, then ``Metric,Value`` rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Metric", *CSV_STATS])
    for key in DISTRIBUTIONS:
        stat = summary.stat(key)
        if stat is not None:
            cells = (_fmt(getattr(stat, s)) for s in CSV_STATS)
            w.writerow([METRIC_LABELS[key].genai_perf, *cells])
    w.writerow([])
    w.writerow(["Metric", "Value"])
    for key in SINGLE_VALUES:
        if getattr(summary, key) is not None:
            w.writerow([METRIC_LABELS[key].genai_perf, _fmt(summary.single(key))])
    w.writerow(["Error Count (count)", summary.errors.total])
    for kind, info in summary.errors.by_type.items():
        w.writerow([f"Errors: {kind} (count)", info.count])
    gpu_rows = summary.telemetry.gpu_rows() if summary.telemetry is not None else []
    if gpu_rows:
        # Third table, only with GPU telemetry: one row per GPU that served the target.
        w.writerow([])
        w.writerow(GPU_SUMMARY_COLUMNS)
        for row in gpu_rows:
            w.writerow(format_gpu_row(row))
    return buf.getvalue()


def write_atomic(path: Path, text: str) -> None:
    """Write-then-rename, so an interrupted run never leaves a truncated file behind."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_profile_artifacts(
    directory: Path,
    records: Sequence[RequestRecord],
    summary: PointResult,
    inputs: dict[str, Any] | None = None,
) -> list[Path]:
    """Writes the profile's files and returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if inputs is not None:
        p = directory / INPUTS_JSON
        write_atomic(p, json.dumps(inputs, indent=1))
        written.append(p)
    p = directory / PROFILE_EXPORT
    write_atomic(
        p,
        json.dumps(
            {
                "clock": "perf_counter_ns (CLOCK_MONOTONIC)",
                "requests": [r.to_json() for r in records],
            }
        ),
    )
    written.append(p)
    p = directory / GENAI_PERF_JSON
    write_atomic(p, summary.to_json(indent=2))
    written.append(p)
    p = directory / GENAI_PERF_CSV
    write_atomic(p, genai_perf_csv(summary))
    written.append(p)
    return written


def load_records(directory: Path) -> list[RequestRecord]:
    """Records from a saved ``profile_export.json``."""
    data = json.loads((directory / PROFILE_EXPORT).read_text(encoding="utf-8"))
    return [RequestRecord.from_json(d) for d in data["requests"]]


def load_summary(directory: Path) -> PointResult:
    """The result of a saved profile; :class:`~llmbench.api.results.ResultFileError` (a
    ValueError) naming the file and the field when it is missing or malformed."""
    return read_result(PointResult, directory / GENAI_PERF_JSON)
