"""PNG plots of a sweep or a single profile, drawn from saved artefacts only.

Why from artefacts: ``llmbench report DIR`` must redraw a run measured yesterday (or in a pod)
without the server, so every plot reads ``analyze_export_genai_perf.json`` (as its model,
:class:`~llmbench.api.results.SweepAnalysis`) and each point's ``profile_export.json``.
matplotlib is imported inside the functions with the Agg backend: the CLI starts fast and
plotting works on machines without a display.

Plots:

* latency-throughput curves: OTT against p99 TTFT and against p99 ITL, one marker per point,
  the knee and the best point under SLO marked, the SLO limit as a vertical line;
* TTFT against ISL, one dot per request;
* mean inter-chunk gap by chunk position (``metrics.itl_by_position``): decode slowing down
  along the response shows as a rising line;
* per-point latency distributions (TTFT, ITL, request latency) as box plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench.api.results import PointMetrics, SweepAnalysis
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.labels import METRIC_LABELS
from llmbench.runner.point.memory import collect_after

__all__ = [
    "itl_position_plot",
    "latency_distribution_plot",
    "latency_throughput_plot",
    "runs_latency_throughput_plot",
    "ttft_vs_isl_plot",
]

_KNEE_COLOR = "#d62728"
_SLO_COLOR = "#2ca02c"
_LINE_COLOR = "#1f77b4"


def _figure(**kwargs: Any) -> Any:
    """A new figure on matplotlib's object API: no pyplot, no global backend or figure
    registry (nothing to close, safe in a thread), as the telemetry and time-series plots."""
    from matplotlib.figure import Figure  # lazy: plotting is optional and slow to import

    return Figure(**kwargs)


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


@collect_after
def latency_throughput_plot(data: SweepAnalysis, metric: str, path: Path) -> Path | None:
    """OTT (y) against p99 TTFT or ITL (x) per sweep point; None when nothing to draw.

    ``metric`` is ``"ttft"`` or ``"itl"``. Marks the knee (red), the best point under SLO
    (green ring) and the SLO limit for that metric (dashed green line).
    """
    attr, field, slo_key = {
        "ttft": ("ttft_p99_ms", "time_to_first_token", "ttft_p99"),
        "itl": ("itl_p99_ms", "inter_token_latency", "itl_p99"),
    }[metric]

    def xy(m: PointMetrics) -> tuple[float, float] | None:
        x = getattr(m, attr)
        return None if x is None or m.ott is None else (float(x), m.ott)

    pts = [(p, c) for p in data.points if (c := xy(p.metrics)) is not None]
    if not pts:
        return None
    fig = _figure(figsize=(7.5, 5))
    ax = fig.subplots()
    xs = [c[0] for _, c in pts]
    ys = [c[1] for _, c in pts]
    ax.plot(xs, ys, "-o", color=_LINE_COLOR, label="sweep point", zorder=2)
    for p, (x, y) in pts:
        ax.annotate(
            f"{p.value:g}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8
        )
    knee = data.knee
    if knee is not None:
        kc = xy(data.points[knee.index].metrics)
        if kc is not None:
            ax.scatter([kc[0]], [kc[1]], s=220, marker="*", color=_KNEE_COLOR, zorder=3,
                       label=f"knee ({', '.join(knee.rules)})")
    slo = data.slo
    if slo is not None:
        limit = slo.limits.get(slo_key)
        if limit is not None:
            ax.axvline(limit, color=_SLO_COLOR, linestyle="--", label=f"SLO {limit:g} ms")
        if slo.best_index is not None:
            bc = xy(data.points[slo.best_index].metrics)
            if bc is not None:
                ax.scatter([bc[0]], [bc[1]], s=260, facecolors="none",
                           edgecolors=_SLO_COLOR, linewidths=2, zorder=4,
                           label="max OTT under SLO")
    ott = METRIC_LABELS["output_token_throughput"]
    ax.set_xlabel(METRIC_LABELS[field].stat("p99"))
    ax.set_ylabel(f"{ott.name} ({ott.unit})")
    ax.set_title(f"{data.model}: throughput vs {metric.upper()} ({data.sweep_type} sweep)")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


@collect_after
def runs_latency_throughput_plot(
    runs: Sequence[tuple[str, Sequence[tuple[float, float, float]]]],
    path: Path,
    title: str,
    ttft_limit_ms: float | None = None,
) -> Path | None:
    """OTT (y) against p99 TTFT (x) of several runs over each other, oldest first and the
    newest drawn last (on top, darkest); None when no run has a point to draw.

    ``runs`` is ``(label, [(swept value, p99 TTFT ms, OTT), ...])`` per run; a regression
    shows as the newest curve left of or below the others. ``ttft_limit_ms`` draws the SLO.
    """
    drawn = [(label, sorted(pts)) for label, pts in runs if pts]
    if not drawn:
        return None
    from matplotlib import colormaps

    fig = _figure(figsize=(7.5, 5))
    ax = fig.subplots()
    cmap = colormaps["Blues"]
    for i, (label, pts) in enumerate(drawn):
        shade = 0.35 + 0.65 * (i + 1) / len(drawn)
        newest = i == len(drawn) - 1
        ax.plot([p[1] for p in pts], [p[2] for p in pts], "-o", color=cmap(shade), label=label,
                linewidth=2.2 if newest else 1.2, markersize=5 if newest else 3, zorder=2 + i)
        if newest:
            for value, x, y in pts:
                ax.annotate(f"{value:g}", (x, y), textcoords="offset points", xytext=(6, -12),
                            fontsize=8)
    if ttft_limit_ms is not None:
        ax.axvline(ttft_limit_ms, color=_SLO_COLOR, linestyle="--",
                   label=f"SLO {ttft_limit_ms:g} ms")
    ott = METRIC_LABELS["output_token_throughput"]
    ax.set_xlabel(METRIC_LABELS["time_to_first_token"].stat("p99"))
    ax.set_ylabel(f"{ott.name} ({ott.unit})")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def _per_request(records: Sequence[RequestRecord], streaming: bool) -> list[Any]:
    from llmbench.runner.point.metrics import per_request

    return [per_request(r, streaming) for r in records if not r.warmup and r.ok]


@collect_after
def ttft_vs_isl_plot(
    points: Sequence[tuple[str, Sequence[RequestRecord]]], path: Path, streaming: bool = True
) -> Path | None:
    """One dot per request: its input length against its TTFT, coloured by point."""
    fig = _figure(figsize=(7.5, 5))
    ax = fig.subplots()
    drawn = False
    for label, records in points:
        rows = [(d.isl, d.ttft_ms) for d in _per_request(records, streaming)
                if d.isl is not None and d.ttft_ms is not None]
        if rows:
            ax.scatter([r[0] for r in rows], [r[1] for r in rows], s=12, alpha=0.6, label=label)
            drawn = True
    if not drawn:
        return None
    ax.set_xlabel("input sequence length (tokens)")
    ax.set_ylabel("time to first token (ms)")
    ax.set_title("TTFT vs ISL")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


@collect_after
def itl_position_plot(
    points: Sequence[tuple[str, Sequence[RequestRecord]]], path: Path
) -> Path | None:
    """Mean gap between consecutive chunks at each position of the response, per point."""
    from llmbench.runner.point.metrics import itl_by_position

    fig = _figure(figsize=(7.5, 5))
    ax = fig.subplots()
    drawn = False
    for label, records in points:
        series = itl_by_position(records)
        if series:
            ax.plot(range(1, len(series) + 1), series, label=label, linewidth=1.2)
            drawn = True
    if not drawn:
        return None
    ax.set_xlabel("chunk position in the response")
    ax.set_ylabel("mean inter-chunk gap (ms)")
    ax.set_title("Inter-chunk gap by token position")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


@collect_after
def latency_distribution_plot(
    points: Sequence[tuple[str, Sequence[RequestRecord]]], path: Path, streaming: bool = True
) -> Path | None:
    """Box plots of TTFT, ITL and request latency per point (whiskers 1st-99th percentile)."""
    per_point = [(label, _per_request(records, streaming)) for label, records in points]
    per_point = [(label, d) for label, d in per_point if d]
    if not per_point:
        return None
    panels = [("request latency (ms)", "e2e_ms")]
    if streaming:
        panels = [("TTFT (ms)", "ttft_ms"), ("ITL (ms)", "itl_ms"), *panels]
    fig = _figure(figsize=(4.2 * len(panels), 4.8))
    axes = fig.subplots(1, len(panels), squeeze=False)
    labels = [label for label, _ in per_point]
    for ax, (title, attr) in zip(axes[0], panels, strict=True):
        data = [[getattr(d, attr) for d in ds if getattr(d, attr) is not None] or [0.0]
                for _, ds in per_point]
        ax.boxplot(data, whis=(1, 99), showfliers=True, flierprops={"markersize": 2})
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_ylim(bottom=0)
    fig.suptitle("Latency distribution per point")
    return _save(fig, path)
