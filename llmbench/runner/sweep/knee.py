"""Where a sweep stops paying off: the knee, and the most load that still meets the SLO.

Pure functions over per-point figures (:class:`~llmbench.api.results.PointMetrics`, the model
the sweep analysis stores), so the rules are testable by hand and the operator can apply them
to results it reads back from a ConfigMap.

The knee (the rule of ../shared/seeds: "GenAI-Perf in depth"): walking the sweep from the
lowest load up, the knee is the first point where

* ``ttft_p99``: p99 TTFT is at least 2x its value at the lowest load (queueing has started), or
* ``ott_plateau``: output token throughput grew less than 5 % from the previous point (more load
  buys no more tokens).

Both rules are reported when both fire at the same point. Points that failed entirely are
skipped: they say nothing about the curve.

Max load under SLO: the passing point with the highest OTT (for a monotone curve, the highest
load that passes), plus the first point in load order that fails and which limit it broke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmbench.api.results import PointMetrics
from llmbench.runner.report.tables import METRIC_LABELS

__all__ = [
    "Knee",
    "PointMetrics",
    "SloResult",
    "Violation",
    "evaluate_slo",
    "find_knee",
    "knee_message",
    "max_under_slo",
    "slo_message",
    "value_label",
]

#: p99 TTFT at least this many times its lowest-load value marks the knee.
TTFT_FACTOR = 2.0
#: OTT growth from the previous point below this fraction marks the knee.
OTT_MIN_GROWTH = 0.05

RULE_TTFT = "ttft_p99"
RULE_OTT = "ott_plateau"

#: SLO key → (PointMetrics attribute, label, unit); latency labels from the one label table.
SLO_METRICS = {
    "ttft_p99": ("ttft_p99_ms", f"p99 {METRIC_LABELS['time_to_first_token'].name}", "ms"),
    "itl_p99": ("itl_p99_ms", f"p99 {METRIC_LABELS['inter_token_latency'].name}", "ms"),
    "e2e_p99": ("e2e_p99_ms", f"p99 {METRIC_LABELS['request_latency'].name.lower()}", "ms"),
    "goodput_ratio": ("goodput_ratio", "goodput ratio", ""),
}


@dataclass(frozen=True)
class Knee:
    """The first point where a knee rule fired; ``details`` explain each rule with numbers."""

    index: int
    value: float
    rules: tuple[str, ...]
    details: tuple[str, ...]


def value_label(sweep_type: str, value: float) -> str:
    """``concurrency 8``, ``request rate 2.5/s``, ``ISL 512``: how a point is named to people."""
    shown = f"{value:g}"
    return {
        "concurrency": f"concurrency {shown}",
        "request_rate": f"request rate {shown}/s",
        "input_sequence_length": f"ISL {shown}",
        "output_sequence_length": f"OSL {shown}",
    }.get(sweep_type, f"{sweep_type} {shown}")


def find_knee(
    points: Sequence[PointMetrics],
    *,
    ttft_factor: float = TTFT_FACTOR,
    ott_min_growth: float = OTT_MIN_GROWTH,
    sweep_type: str = "concurrency",
) -> Knee | None:
    """The first point (lowest load first) where either rule fires, or None (not reached)."""
    usable = [(i, p) for i, p in enumerate(points) if p.failed is None and p.completed > 0]
    base_ttft = next((p.ttft_p99_ms for _, p in usable if p.ttft_p99_ms), None)
    prev: PointMetrics | None = None
    for n, (i, p) in enumerate(usable):
        rules: list[str] = []
        details: list[str] = []
        if n > 0 and base_ttft and p.ttft_p99_ms is not None:
            if p.ttft_p99_ms >= ttft_factor * base_ttft:
                rules.append(RULE_TTFT)
                details.append(
                    f"p99 TTFT {p.ttft_p99_ms:.1f} ms >= {ttft_factor:g} x {base_ttft:.1f} ms "
                    f"(lowest load)"
                )
        if prev is not None and prev.ott and p.ott is not None:
            growth = (p.ott - prev.ott) / prev.ott
            if growth < ott_min_growth:
                rules.append(RULE_OTT)
                details.append(
                    f"OTT grew {growth * 100:+.1f} % from {value_label(sweep_type, prev.value)} "
                    f"({prev.ott:.1f} -> {p.ott:.1f} tok/s, < {ott_min_growth * 100:g} %)"
                )
        if rules:
            return Knee(i, p.value, tuple(rules), tuple(details))
        prev = p
    return None


def knee_message(
    knee: Knee | None, points: Sequence[PointMetrics], sweep_type: str = "concurrency"
) -> str:
    """One line for people: which rule fired at which point, or that the knee was not reached."""
    if knee is not None:
        return f"knee at {value_label(sweep_type, knee.value)}: " + "; ".join(knee.details)
    ok = [p for p in points if p.failed is None and p.completed > 0]
    if len(ok) < 2:
        return "knee not determined: fewer than two points with results"
    return (
        f"knee not reached up to {value_label(sweep_type, ok[-1].value)}: p99 TTFT stayed "
        f"below {TTFT_FACTOR:g} x its lowest-load value and OTT kept growing by "
        f"{OTT_MIN_GROWTH * 100:g} % or more; extend the sweep until you see it"
    )


@dataclass(frozen=True)
class Violation:
    """One broken limit at one point."""

    metric: str
    value: float | None
    limit: float

    def __str__(self) -> str:
        attr, label, unit = SLO_METRICS[self.metric]
        if self.value is None:
            return f"{label} not measured (limit {self.limit:g}{unit and ' ' + unit})"
        if self.metric == "goodput_ratio":
            return f"{label} {self.value:.3f} < {self.limit:g}"
        return f"{label} {self.value:.1f} {unit} > {self.limit:g} {unit}"


def evaluate_slo(point: PointMetrics, limits: Mapping[str, float]) -> list[Violation]:
    """Every limit the point breaks; a failed point breaks all of them."""
    out: list[Violation] = []
    for key, limit in limits.items():
        attr = SLO_METRICS[key][0]
        value = getattr(point, attr) if point.failed is None else None
        if value is None:
            # a latency that could not be measured cannot be shown to meet its limit
            out.append(Violation(key, None, limit))
        elif key == "goodput_ratio":
            if value < limit:
                out.append(Violation(key, value, limit))
        elif value > limit:
            out.append(Violation(key, value, limit))
    return out


@dataclass(frozen=True)
class SloResult:
    """Max OTT under SLO, the first failing point and why, and each point's verdict."""

    best: int | None
    first_failure: int | None
    violations: tuple[tuple[Violation, ...], ...]

    def passed(self, index: int) -> bool:
        """Whether point ``index`` met every limit."""
        return not self.violations[index]


def max_under_slo(points: Sequence[PointMetrics], limits: Mapping[str, float]) -> SloResult:
    """The passing point with the highest OTT, and the first failing point in load order."""
    violations = tuple(tuple(evaluate_slo(p, limits)) for p in points)
    best: int | None = None
    for i, p in enumerate(points):
        if not violations[i] and p.ott is not None:
            if best is None or p.ott > (points[best].ott or 0.0):
                best = i
    first = next((i for i, v in enumerate(violations) if v), None)
    return SloResult(best, first, violations)


def slo_message(
    result: SloResult,
    points: Sequence[PointMetrics],
    limits: Mapping[str, float],
    sweep_type: str = "concurrency",
) -> list[str]:
    """Lines for people: the best point under SLO and the first point that failed."""
    shown = ", ".join(f"{k} {v:g}" for k, v in limits.items())
    lines = []
    if result.best is None:
        lines.append(f"no point meets the SLO ({shown})")
    else:
        b = points[result.best]
        lines.append(
            f"max OTT under SLO ({shown}): {b.ott:.1f} tok/s at {value_label(sweep_type, b.value)}"
        )
    if result.first_failure is not None:
        f = points[result.first_failure]
        why = "; ".join(str(v) for v in result.violations[result.first_failure])
        if f.failed:
            why = f"point failed: {f.failed}"
        lines.append(f"first failing point: {value_label(sweep_type, f.value)} ({why})")
    else:
        lines.append("every point meets the SLO")
    return lines
