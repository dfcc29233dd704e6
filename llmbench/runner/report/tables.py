"""Table cells: the one ``N/A`` formatter and the one GPU-table (table 2) row builder.

Why this module exists: the per-point CSV (``profile_export_genai_perf.csv``) and the sweep's
``analyze_export_genai_perf.csv`` print the same GPU table, and a missing metric must read
``N/A`` (never 0) in both; building and formatting those rows in one place keeps them identical.
Rows are built from the saved ``"telemetry"`` section, so tables can be rebuilt from artefacts
alone. Light on purpose: no scraper, parser or plotting library is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmbench.runner.telemetry.model import GPU_SUMMARY_COLUMNS

__all__ = ["format_gpu_row", "format_value", "gpu_summary_rows_from_json"]


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
