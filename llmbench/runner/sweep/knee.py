"""Where a sweep stops paying off: the knee, and the most load that still meets the SLO.

Pure functions over per-point figures (:class:`~llmbench.api.results.PointMetrics`, the model
the sweep analysis stores), so the rules are testable by hand and the operator can apply them
to results it reads back from a ConfigMap.

The knee (the rule of ../shared/seeds: "GenAI-Perf in depth") is the point a user would size
for, so it is placed where each rule says the curve turned, walking from the lowest load up:

* ``ott_plateau``: output token throughput grows less than 5 % from point k-1 to point k. The
  knee is k-1: throughput saturated there, and k bought (almost) nothing but latency. Placing
  it at k would tell people to size for a load that only adds queueing.
* ``ttft_p99``: p99 TTFT first reaches 2x its lowest-load value at point k. The knee is k (the
  seed's worked example: 45 -> 98 ms at concurrency 16, knee 16).

When both fire, the earlier knee wins; when they put it at the same point both are named. The
message names the rule, the points it compared and their values, and the rule that fired later
(if any). Points that failed entirely are skipped: they say nothing about the curve. A sweep
that ends before either rule fires says the knee was not reached.

Found incrementally (``stopAfterKnee``): a knee at index K is final once point K+1 has run, since
a rule firing later can only place the knee at K+1 or beyond.

Max load under SLO: the passing point with the highest OTT (for a monotone curve, the highest
load that passes), plus the first point in load order that fails and which limit it broke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from llmbench.api.results import PointMetrics
from llmbench.runner.labels import METRIC_LABELS

__all__ = [
    "RULE_NAMES",
    "RULE_OTT",
    "RULE_TTFT",
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


#: PointMetrics latencies and their open-loop form from the scheduled send, which the SLO
#: verdicts judge where a point has it.
FROM_SCHEDULE = {
    "ttft_p99_ms": "ttft_p99_from_schedule_ms",
    "e2e_p99_ms": "e2e_p99_from_schedule_ms",
}


def latency_from(points: Sequence[PointMetrics]) -> Literal["schedule", "send"]:
    """``schedule`` when the SLO verdicts judged latencies from the scheduled send (some
    point ran open loop), else ``send``."""
    return "schedule" if any(p.ttft_p99_from_schedule_ms is not None
                             or p.e2e_p99_from_schedule_ms is not None for p in points) else "send"


@dataclass(frozen=True)
class Knee:
    """Where the knee is, the rules that put it there and, in ``details``, their numbers.

    ``index`` counts in the sequence given to :func:`find_knee` (failed points included).
    ``later`` explains a rule that fired too, but at a later point, so it did not win.
    """

    index: int
    value: float
    rules: tuple[str, ...]
    details: tuple[str, ...]
    later: tuple[str, ...] = ()


#: How each rule is named to people.
RULE_NAMES = {RULE_TTFT: "p99 TTFT rule", RULE_OTT: "OTT plateau rule"}


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
    """The knee (the earlier of the two rules' knees), or None when neither rule fired."""
    usable = [(i, p) for i, p in enumerate(points) if p.failed is None and p.completed > 0]
    found = [
        c
        for c in (
            _ttft_knee(usable, ttft_factor, sweep_type),
            _ott_knee(usable, ott_min_growth, sweep_type),
        )
        if c is not None
    ]
    if not found:
        return None
    at = min(i for i, _, _ in found)
    winners = [(rule, why) for i, rule, why in found if i == at]
    later = tuple(
        f"the {RULE_NAMES[rule]} fired later: {why}" for i, rule, why in found if i != at
    )
    return Knee(
        index=at,
        value=points[at].value,
        rules=tuple(rule for rule, _ in winners),
        details=tuple(why for _, why in winners),
        later=later,
    )


def _ttft_knee(
    usable: Sequence[tuple[int, PointMetrics]], factor: float, sweep_type: str
) -> tuple[int, str, str] | None:
    """The first point whose p99 TTFT is at least ``factor`` x the lowest load's: the knee."""
    base = next(((i, p) for i, p in usable if p.ttft_p99_ms), None)
    if base is None:
        return None
    b_i, b = base
    b_ttft = b.ttft_p99_ms or 0.0
    for i, p in usable:
        if i > b_i and p.ttft_p99_ms is not None and p.ttft_p99_ms >= factor * b_ttft:
            return i, RULE_TTFT, (
                f"p99 TTFT reached {p.ttft_p99_ms:.1f} ms at {value_label(sweep_type, p.value)}, "
                f">= {factor:g} x {b_ttft:.1f} ms at {value_label(sweep_type, b.value)} "
                "(lowest load): requests queue from there on"
            )
    return None


def _ott_knee(
    usable: Sequence[tuple[int, PointMetrics]], min_growth: float, sweep_type: str
) -> tuple[int, str, str] | None:
    """The point before the first one that added less than ``min_growth`` OTT: the knee."""
    for (i_prev, prev), (_, p) in zip(usable, usable[1:], strict=False):
        if not prev.ott or p.ott is None:
            continue
        growth = (p.ott - prev.ott) / prev.ott
        if growth < min_growth:
            here, there = value_label(sweep_type, prev.value), value_label(sweep_type, p.value)
            return i_prev, RULE_OTT, (
                f"OTT grew {growth * 100:+.1f} % from {here} to {there} "
                f"({prev.ott:.1f} -> {p.ott:.1f} tok/s, < {min_growth * 100:g} %): "
                f"throughput saturated at {here}"
            )
    return None


def knee_message(
    knee: Knee | None, points: Sequence[PointMetrics], sweep_type: str = "concurrency"
) -> str:
    """One line for people: which rule put the knee where, with its numbers, or that the knee
    was not reached."""
    if knee is not None:
        rules = " and ".join(RULE_NAMES.get(r, r) for r in knee.rules)
        return (
            f"knee at {value_label(sweep_type, knee.value)} ({rules}): "
            + "; ".join((*knee.details, *knee.later))
        )
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
        # open loop: what a user waits, from the scheduled send (see latency_from)
        scheduled = FROM_SCHEDULE.get(attr)
        if scheduled is not None and getattr(point, scheduled) is not None:
            attr = scheduled
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
