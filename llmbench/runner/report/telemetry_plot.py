"""PNG of one point's telemetry: GPU power, GPU utilisation and KV-cache usage over time.

Why the caller draws it: plots are presentation, a layer above the sweep and the point, so the
point runner never imports matplotlib. The plot reads only the point's telemetry section
(:class:`~llmbench.api.results.TelemetrySummary`, whose series are the scrapes by column), so
whoever ran the point (``llmbench profile``, ``llmbench analyze``, the runner pod) calls
:func:`plot_point_telemetry` on the result it holds; ``telemetry.png`` lands next to the point's
artefacts, and the HTML report shows it per point.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmbench.api.results import PointResult, TelemetrySummary
from llmbench.runner.artifacts.layout import TELEMETRY_PNG
from llmbench.runner.point.memory import collect_after

__all__ = ["plot_point_telemetry", "plot_telemetry"]


def _nan(values: list[float | None], scale: float = 1.0) -> list[float]:
    """A series with its missing samples as NaN (a gap in the line, not a zero)."""
    return [np.nan if v is None else scale * v for v in values]


@collect_after
def plot_telemetry(telemetry: TelemetrySummary, path: str | Path) -> Path | None:
    """PNG of GPU power and utilisation and server KV-cache usage over the window.

    One figure, three stacked panels sharing the time axis (seconds since the window opened),
    one line per GPU / server. Returns ``None`` (and writes nothing) when there is no series.
    Uses matplotlib's object API (no pyplot, no global backend state), so it is safe in threads.
    """
    gpus = [g for g in telemetry.gpus.values() if g.series.t_s]
    servers = [s for s in telemetry.server.values() if s.series.t_s]
    if not gpus and not servers:
        return None
    from matplotlib.figure import Figure  # lazy: plotting is optional and slow to import

    fig = Figure(figsize=(9, 8), layout="constrained")
    ax_p, ax_u, ax_kv = fig.subplots(3, 1, sharex=True)
    for g in gpus:
        ax_p.plot(g.series.t_s, _nan(g.series.power_w), label=g.gpu_id)
        ax_u.plot(g.series.t_s, _nan(g.series.utilization_pct), label=g.gpu_id)
    for s in servers:
        ax_kv.plot(s.series.t_s, _nan(s.series.kv_cache_usage, 100.0), label=s.url)
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


def plot_point_telemetry(summary: PointResult, folder: Path) -> Path | None:
    """``telemetry.png`` in the point's ``folder`` from its result; None (nothing written)
    when the point scraped no telemetry or it has no series."""
    if summary.telemetry is None:
        return None
    return plot_telemetry(summary.telemetry, folder / TELEMETRY_PNG)
