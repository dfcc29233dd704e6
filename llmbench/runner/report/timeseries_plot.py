"""PNG of one point's time series: the client's TTFT p99 and OTT per slice stacked over the
server's running/waiting requests and KV-cache use and the kept GPUs' power, on one time axis.

Why these panels together: a point's p99 TTFT can drift while its mean stays put; lined up
with the server's queue and KV-cache use and the GPUs' power over the same seconds, the cause
is visible (a queue forming as the cache fills, a power cap). Like ``telemetry.png`` it is
drawn by whoever ran the point, from the series in memory (:func:`plot_point_timeseries`), and
embedded by the HTML report; a report made later draws it from ``<stem>_timeseries.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from llmbench.api.results import TimeSeries
from llmbench.runner.artifacts.layout import TIMESERIES_PNG
from llmbench.runner.point.memory import collect_after

__all__ = ["plot_point_timeseries", "plot_timeseries"]


def _nan(values: list[float | None], scale: float = 1.0) -> list[float]:
    """Missing figures as NaN: a gap in the line, never a zero."""
    return [np.nan if v is None else scale * v for v in values]


@collect_after
def plot_timeseries(series: TimeSeries, path: str | Path) -> Path | None:
    """Five panels sharing the x axis (the slices' midpoints, seconds since the first
    measured send): p99 TTFT, OTT, server requests running and waiting, KV-cache use, GPU
    power. Returns ``None`` (and writes nothing) when the series has no slice.

    Uses matplotlib's object API (no pyplot, no global backend state), so it is safe in threads.
    """
    slices = series.timeslices
    if not slices:
        return None
    from matplotlib.figure import Figure  # lazy: plotting is optional and slow to import

    t = [(s.start_s + s.end_s) / 2 for s in slices]
    fig = Figure(figsize=(9, 11), layout="constrained")
    ax_ttft, ax_ott, ax_q, ax_kv, ax_p = fig.subplots(5, 1, sharex=True)
    ax_ttft.plot(t, _nan([s.ttft_p99_ms for s in slices]), marker=".", label="p99")
    ax_ttft.plot(t, _nan([s.ttft_p50_ms for s in slices]), marker=".", label="p50")
    ax_ott.plot(t, [s.output_token_throughput for s in slices], marker=".")
    ax_q.plot(t, _nan([s.requests_running for s in slices]), marker=".", label="running")
    ax_q.plot(t, _nan([s.requests_waiting for s in slices]), marker=".", label="waiting")
    ax_kv.plot(t, _nan([s.kv_cache_usage for s in slices], 100.0), marker=".")
    ax_p.plot(t, _nan([s.gpu_power_w for s in slices]), marker=".")
    for ax, title, unit in (
        (ax_ttft, "time to first token (requests sent in the slice)", "ms"),
        (ax_ott, "output token throughput", "tokens/s"),
        (ax_q, "server requests", "requests"),
        (ax_kv, "KV-cache usage", "%"),
        (ax_p, f"GPU power ({len(series.gpus)} kept GPUs)", "W"),
    ):
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
        if not any(np.isfinite(np.asarray(line.get_ydata(), dtype=float)).any()
                   for line in ax.lines):
            ax.text(0.5, 0.5, "not measured in any slice", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
        elif len(ax.lines) > 1:
            ax.legend(fontsize="small", loc="best")
    ax_p.set_xlim(0.0, slices[-1].end_s)
    ax_p.set_xlabel(f"seconds since the first measured request ({series.interval_s:g} s slices)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


def plot_point_timeseries(series: TimeSeries | None, folder: Path | None) -> Path | None:
    """``timeseries.png`` in the point's ``folder``; None (nothing written) without a series
    or a folder."""
    if series is None or folder is None:
        return None
    return plot_timeseries(series, folder / TIMESERIES_PNG)
