"""Where a point's files go: GenAI-Perf 0.0.16's folder name and the export file names.

A profile's folder is ``<artifact-dir>/<model>-openai-<endpoint-type>-<mode><value>``
(:func:`point_dir_name`); inside it every export is named after one stem
(``--profile-export-file`` without ``.json``, :data:`DEFAULT_STEM` by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DEFAULT_STEM",
    "GENAI_PERF_CSV",
    "GENAI_PERF_JSON",
    "INPUTS_JSON",
    "PROFILE_EXPORT",
    "REQUESTS_JSONL",
    "TELEMETRY_PNG",
    "TIMESERIES_PNG",
    "default_artifact_dir",
    "point_dir_name",
]

DEFAULT_STEM = "profile_export"
PROFILE_EXPORT = f"{DEFAULT_STEM}.json"
GENAI_PERF_JSON = f"{DEFAULT_STEM}_genai_perf.json"
GENAI_PERF_CSV = f"{DEFAULT_STEM}_genai_perf.csv"
REQUESTS_JSONL = f"{DEFAULT_STEM}_llmbench_requests.jsonl"
INPUTS_JSON = "inputs.json"
#: GPU power, utilisation and KV-cache usage over the window, when telemetry was scraped.
TELEMETRY_PNG = "telemetry.png"
#: The point's time series: TTFT p99 and OTT per slice over server and GPU gauges.
TIMESERIES_PNG = "timeseries.png"


def _artifact_model_name(model: str, models: Sequence[str] = ()) -> str:
    """GenAI-Perf's model part: the first model (``_multi`` with several), ``/`` -> ``_``."""
    name = (models[0] + "_multi") if len(models) > 1 else model
    return "_".join(name.split("/")).replace("\\", "_").replace("\0", "_")


def _stimulus(mode: str, value: float) -> str:
    """``concurrency8`` or ``request_rate10.0`` (GenAI-Perf's rate is a float)."""
    if mode == "request_rate":
        return f"request_rate{float(value)}"
    shown = int(value) if float(value).is_integer() else value
    return f"{mode}{shown}"


def point_dir_name(
    model: str, endpoint_type: str, mode: str, value: float, models: Sequence[str] = ()
) -> str:
    """``<model>-openai-<endpoint-type>-<mode><value>``, GenAI-Perf 0.0.16's folder name."""
    return f"{_artifact_model_name(model, models)}-openai-{endpoint_type}-{_stimulus(mode, value)}"


def default_artifact_dir(
    model: str,
    endpoint_type: str,
    mode: str,
    value: float,
    root: Path | str = "artifacts",
    models: Sequence[str] = (),
) -> Path:
    """``<root>/<point_dir_name>``: where GenAI-Perf puts a profile under ``--artifact-dir``."""
    return Path(root) / point_dir_name(model, endpoint_type, mode, value, models)

