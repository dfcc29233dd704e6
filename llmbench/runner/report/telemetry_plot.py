"""PNG of one point's telemetry: GPU power, GPU utilisation and KV-cache usage over time.

Why this module exists: plots are presentation, so the telemetry package stays free of
matplotlib; the profile runner calls :func:`plot_telemetry` after writing the point's
artefacts (``telemetry.png`` next to them, shown per point by the HTML report).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmbench.runner.telemetry.model import TelemetryResult

__all__ = ["plot_telemetry"]


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
