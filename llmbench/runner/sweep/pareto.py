"""The Pareto view of a two-axis sweep: throughput per GPU against speed per user.

Sizing a deployment trades the two: more requests in flight give more output tokens/s per
GPU and fewer per user. A point is on the frontier when no other point is at least as good on
both axes and better on one (``vllm bench sweep plot_pareto``'s and AIPerf's view); every
point off it is beaten by one on it, whatever the workload or load.

The axes, as :func:`pareto_summary` states them in its message:

* x, output tokens/s per user: per request, output tokens after the first over the time they
  took (1000 / the request's ITL in ms: GenAI-Perf's ``output_token_throughput_per_user``),
  averaged over the point's requests and then its repetitions;
* y, output tokens/s per GPU: the point's output token throughput (OTT) over the GPUs kept by
  telemetry (those serving the target); when any point has no GPU telemetry, the OTT of the
  whole run instead (``basis`` ``run``), so the points stay comparable with one another.

Pure functions: the analysis' points in, the summary out.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmbench.api.results import ParetoPoint, ParetoSummary, SweepPoint

__all__ = ["PER_USER", "frontier", "pareto_summary"]

#: The x axis in words (said in every Pareto message and the report).
PER_USER = (
    "output tokens/s per user = mean over requests of 1000 / the request's ITL (ms), "
    "GenAI-Perf's output_token_throughput_per_user"
)


def frontier(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which of ``(x, y)`` points are non-dominated, both axes larger-is-better.

    A point is dominated when another is at least as large on both axes and larger on one;
    equal points dominate neither, so both stay on the frontier.

    Example: ``frontier([(1, 3), (2, 2), (1, 1), (3, 1)])`` -> ``[True, True, False, True]``.
    """
    return [
        not any(ox >= x and oy >= y and (ox > x or oy > y) for ox, oy in points)
        for x, y in points
    ]


def _measured(p: SweepPoint) -> bool:
    return p.status == "ok" and p.tokens_per_user is not None and p.metrics.ott is not None


def pareto_summary(points: Sequence[SweepPoint]) -> ParetoSummary | None:
    """The Pareto view of the measured points (failed ones and ones without a per-user
    figure, e.g. non-streaming, left out); None when no point has both axes.

    The divisor is each point's kept GPU count (:attr:`SweepPoint.gpus`) when every measured
    point has one, else 1 (``basis`` ``run``).
    """
    measured = [p for p in points if _measured(p)]
    if not measured:
        return None
    per_gpu = all(p.gpus for p in measured)
    xy = [
        (float(p.tokens_per_user or 0.0),
         float(p.metrics.ott or 0.0) / ((p.gpus or 1) if per_gpu else 1))
        for p in measured
    ]
    on = frontier(xy)
    out = [
        ParetoPoint(name=p.name, workload=p.workload, value=p.value, tokens_per_user=x,
                    tokens_per_second=y, frontier=f)
        for p, (x, y), f in zip(measured, xy, on, strict=True)
    ]
    names = [p.name for p in out if p.frontier]
    unit = "output tokens/s per GPU (OTT / the kept GPUs)" if per_gpu else (
        "output tokens/s per run (no GPU telemetry on every point: the whole target's OTT)"
    )
    message = (
        f"Pareto frontier ({unit} against {PER_USER}): {len(names)} of {len(out)} points: "
        + ", ".join(names)
    )
    return ParetoSummary(basis="gpu" if per_gpu else "run", points=out, frontier=names,
                         message=message)
