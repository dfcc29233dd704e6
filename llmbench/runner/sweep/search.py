"""Adaptive search for the highest load under SLO: which point to measure next.

Why: a grid answers "max load under SLO" only as finely as its step, and a fine grid of
full points costs hours of GPU time. AIPerf (``max-concurrency-under-sla``) and GuideLLM
(bisecting SLO search) search instead; so does ``spec.sweep.search`` /
``llmbench analyze --search max-under-slo``.

The plan is pure: from the probes measured so far (value and verdict, in probe order) it
names the next load or says the search is over, so a resumed sweep re-derives the very same
probes from its checkpoint and repeats none of them.

* **Doubling.** The range's start first; while every probe passed, twice the highest passing
  load (the range's end at most). The first failure, or a pass at the end of the range, ends it.
* **Bisection.** Between the highest passing load and the lowest failing one, the midpoint
  (whole for concurrency), until the two are ``resolution`` apart (default 1 for concurrency,
  5 % of the passing value for request rates).

The answer is the highest passing load; none when the range's start already fails. A search
with ``d`` doubling probes and a bisection interval of width ``w`` takes ``d + ⌈log2(w /
resolution)⌉`` probes, against ``(end - start) / resolution + 1`` points of a grid of the
same resolution (:func:`grid_points`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmbench.api import Spec

__all__ = [
    "RELATIVE_RATE_RESOLUTION",
    "SearchPlan",
    "bounds",
    "grid_points",
    "next_probe",
    "search_plan",
]

#: A request-rate search without a resolution stops at 5 % of the passing rate.
RELATIVE_RATE_RESOLUTION = 0.05
#: Rates are probed at this many decimals (folder names stay readable; 1 mreq/s is finer
#: than any rate measurement).
RATE_DECIMALS = 3


@dataclass(frozen=True)
class SearchPlan:
    """Where and how finely to search.

    Attributes:
        low: The range's start (the first probe).
        high: The range's end (no probe above it).
        integer: Concurrency (whole loads) rather than a request rate.
        resolution: The absolute resolution, or None for :data:`RELATIVE_RATE_RESOLUTION`.
    """

    low: float
    high: float
    integer: bool
    resolution: float | None

    def close_enough(self, passed: float, failed: float) -> bool:
        """Whether the last passing and the first failing load are within the resolution."""
        if self.resolution is not None:
            return failed - passed <= self.resolution + 1e-9
        return failed - passed <= RELATIVE_RATE_RESOLUTION * passed + 1e-9



def search_plan(spec: Spec) -> SearchPlan | None:
    """The plan of ``spec.sweep.search``; None when the sweep runs its grid.

    The range is the sweep's: ``range``'s start and end, or the lowest and highest of
    ``values``. The spec's rules already refused a search on another axis or without an SLO.
    """
    sweep = spec.sweep
    if sweep is None or sweep.search is None:
        return None
    values = sweep.points()
    integer = sweep.type == "concurrency"
    resolution = sweep.search.resolution
    if resolution is None and integer:
        resolution = 1.0
    return SearchPlan(min(values), max(values), integer, resolution)


def _round(plan: SearchPlan, value: float) -> float:
    return float(math.floor(value)) if plan.integer else round(value, RATE_DECIMALS)


def next_probe(plan: SearchPlan, probes: Sequence[tuple[float, bool]]) -> float | None:
    """The next load to measure after ``probes`` ((value, met every SLO) in probe order), or
    None when the search is over (the answer is :func:`bounds`' passing load)."""
    if not probes:
        return plan.low
    passed, failed = bounds(probes)
    if passed is None:
        return None  # the lowest load already breaks the SLO
    if failed is None:  # doubling
        if passed >= plan.high:
            return None
        return min(plan.high, _round(plan, passed * 2.0))
    if plan.close_enough(passed, failed):
        return None
    mid = _round(plan, (passed + failed) / 2.0)
    if not passed < mid < failed:  # rounding left no value between: as close as it gets
        return None
    return mid


def bounds(probes: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """The highest passing load below the lowest failing one, and that failing load."""
    fails = [v for v, ok in probes if not ok]
    failed = min(fails) if fails else None
    passes = [v for v, ok in probes if ok and (failed is None or v < failed)]
    return (max(passes) if passes else None), failed


def grid_points(plan: SearchPlan) -> int:
    """How many points a grid over the range at the search's resolution would have run.

    An absolute resolution: ``(high - low) / resolution + 1``; 5 % of the value: the
    geometric grid ``low, low x 1.05, ...`` up to ``high``.
    """
    if plan.resolution is not None:
        return math.floor((plan.high - plan.low) / plan.resolution + 1e-9) + 1
    if plan.high <= plan.low:
        return 1
    return math.ceil(math.log(plan.high / plan.low) / math.log1p(RELATIVE_RATE_RESOLUTION)) + 1
