"""PNG of a two-axis sweep's Pareto view: output tokens/s per GPU against tokens/s per user.

One marker series per workload (its load values joined in load order, so each workload's
trade-off reads as a curve), the non-dominated frontier drawn as a step line over all of them
and its points ringed. The numbers are the analysis' own (:class:`~llmbench.api.results.
ParetoSummary`, computed by :mod:`llmbench.runner.sweep.pareto`); this file only draws them.
"""

from __future__ import annotations

from pathlib import Path

from llmbench.api.results import ParetoSummary, SweepAnalysis
from llmbench.runner.point.memory import collect_after

__all__ = ["pareto_plot", "workload_views"]


def workload_views(data: SweepAnalysis) -> list[tuple[str, SweepAnalysis]]:
    """Each workload of a two-axis sweep as a one-axis analysis of its own (its points, its
    knee and SLO verdict, the model named with the workload), so the one-axis plots draw one
    curve per workload instead of one line through the whole grid; ``[]`` for one axis."""
    out = []
    for w in data.workloads or ():
        points = [p for p in data.points if p.workload == w.label]
        out.append((w.label, data.model_copy(update={
            "model": f"{data.model} {w.label}", "points": points, "knee": w.knee,
            "slo": w.slo, "workloads": None, "pareto": None,
        })))
    return out


@collect_after
def pareto_plot(pareto: ParetoSummary, path: Path) -> Path | None:
    """Draws ``pareto`` into ``path``; None (nothing written) without points.

    Uses matplotlib's object API (no pyplot state), as the telemetry plot does.
    """
    if not pareto.points:
        return None
    from matplotlib.figure import Figure  # lazy: plotting is optional and slow to import

    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    workloads: dict[str | None, list[tuple[float, float]]] = {}
    for p in pareto.points:
        workloads.setdefault(p.workload, []).append((p.tokens_per_user, p.tokens_per_second))
    for label, xy in workloads.items():
        ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", alpha=0.8,
                label=label or "points")
    # the frontier's staircase: the edge of what its points dominate (sorted by per-user
    # speed, each step drops to the next point's throughput at the previous point's speed)
    front = sorted((p.tokens_per_user, p.tokens_per_second) for p in pareto.points if p.frontier)
    ax.step([x for x, _ in front], [y for _, y in front], where="pre", color="black",
            linewidth=1.5, label="Pareto frontier")
    ax.scatter([x for x, _ in front], [y for _, y in front], s=120, facecolors="none",
               edgecolors="black")
    ax.set_xlabel("output tokens/s per user (mean of 1000 / ITL ms)")
    per = "GPU" if pareto.basis == "gpu" else "run (no GPU telemetry)"
    ax.set_ylabel(f"output tokens/s per {per}")
    ax.set_title("Throughput against per-user speed")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
