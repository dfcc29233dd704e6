"""Several load points run one after another: the swept quantity, its range or values.

Every rule on ``sweep.range`` is stated twice, in CEL on the range text and in Python on its
parsed numbers, so that the API server refuses what :func:`llmbench.api.sweep_values` would.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from ..rules import ApiModel, Rule, cel_string, re2_matches
from ..sweep_values import (
    INTEGER_SWEEP_TYPES,
    MAX_RANGE_POINTS,
    SWEEP_TYPES,
    SweepType,
    sweep_values,
)
from .flag import CliFlag
from .types import Bool, Float, PositiveInt, Str, cel_value, cel_whole, is_whole

__all__ = [
    "ON_POINT_FAILURE",
    "RANGE_PATTERN",
    "OnPointFailure",
    "Search",
    "SearchGoal",
    "Sweep",
    "SweepWorkload",
    "MAX_WORKLOADS",
    "range_parts",
]

OnPointFailure = Literal["continue", "stop"]
#: What an adaptive search looks for: the highest load that still meets every SLO.
SearchGoal = Literal["maxUnderSlo"]

ON_POINT_FAILURE: tuple[str, ...] = get_args(OnPointFailure)


_NUM = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,2})?"
#: ``start:end`` or ``start:end:step``, plain decimal numbers (exponent at most two digits, so
#: every number is finite for both Python's ``float`` and CEL's ``double``), spaces allowed.
RANGE_PATTERN = rf"^ *{_NUM} *: *{_NUM} *(?:: *{_NUM} *)?$"


def range_parts(sweep: Sweep) -> list[float] | None:
    """The numbers of a syntactically valid range (the CEL's ``double(...trim())``), or None."""
    if sweep.range is None or not re2_matches(RANGE_PATTERN, sweep.range):
        return None
    return [float(p.strip()) for p in sweep.range.split(":")]


def _range_rule(cel: str) -> str:
    """A range rule's CEL: vacuous without a range or with bad syntax (reported separately)."""
    return f"!has(self.range) || !self.range.matches({cel_string(RANGE_PATTERN)}) || ({cel})"


def _cel_part(i: int) -> str:
    """CEL for the i-th number of the range, as Python's ``float(part.strip())`` reads it."""
    return f"double(self.range.split(':')[{i}].trim())"


_CEL_START, _CEL_END, _CEL_STEP = _cel_part(0), _cel_part(1), _cel_part(2)
_CEL_STEPPED = "self.range.split(':').size() == 3"
_CEL_TYPE = cel_value("self.type", "concurrency")
_CEL_COUNTS = f"{_CEL_TYPE} != 'request_rate'"  # integer types


def _range_whole(p: list[float]) -> bool:
    return all(is_whole(x) for x in p)


def _range_size_ok(p: list[float]) -> bool:
    """Mirrors sweep_values: n = floor((end - start) / step + 1e-9) + 1 <= MAX_RANGE_POINTS."""
    if len(p) < 3 or p[2] <= 0 or p[0] > p[1]:
        return True
    return (p[1] - p[0]) / p[2] + 1e-9 < float(MAX_RANGE_POINTS)


class Search(ApiModel):
    """Find the answer adaptively instead of measuring every point of a grid.

    ``maxUnderSlo``: the highest load (concurrency or request rate) within the sweep's range
    that meets every SLO (``spec.slo``). A coarse pass doubles the load from the range's start
    until the SLO breaks (or the range ends), then bisection narrows the last passing and the
    first failing load to ``resolution``; each probe is a full point, repetitions included.
    Why: the grid's answer is only as fine as the grid, and a fine grid costs hours of GPU time.
    """

    goal: Annotated[
        SearchGoal,
        CliFlag(
            "--search",
            reads="text",  # max-under-slo on the command line: analyze maps it
            metavar="max-under-slo",
            default=None,
            help="search adaptively for the highest load meeting every --slo, within the sweep "
            "range (doubling until the SLO breaks, then bisection) instead of the whole grid",
        ),
    ] = Field(default="maxUnderSlo", description="What to search for.")
    resolution: Annotated[
        Float | None,
        CliFlag(
            "--search-resolution",
            reads="number",
            metavar="N",
            help="with --search: stop when the last passing and the first failing load are N "
            "apart (default 1 for concurrency, 5% of the value for request rates)",
        ),
    ] = Field(
        default=None,
        gt=0,
        description="Stop bisecting when the last passing and first failing load are this far "
        "apart (default: 1 for concurrency, 5 % of the value for request rates).",
    )


#: The most workloads (ISL/OSL pairs) one two-axis sweep may list.
MAX_WORKLOADS = 16


class SweepWorkload(ApiModel):
    """One ISL/OSL pair of a two-axis sweep: every load value of the sweep runs with it.

    Sets ``workload.inputTokens.mean`` and ``workload.outputTokens.mean`` for its points; the
    stddevs and every other workload setting stay the spec's own. Why pairs and not two more
    ranges: sizing asks about the shapes a service sees (chat 128/512, summarisation
    1024/128), not about every combination of the two lengths (``vllm bench sweep``'s
    ``--bench-params`` is a list of such dicts too).
    """

    input_tokens: PositiveInt = Field(description="Mean input tokens (ISL) of this workload.")
    output_tokens: PositiveInt = Field(
        description="Mean output tokens (OSL, max_tokens) of this workload."
    )

    @property
    def label(self) -> str:
        """The workload's name in folders, CSV and status: ``isl128-osl512``."""
        return f"isl{self.input_tokens}-osl{self.output_tokens}"


class Sweep(ApiModel):
    """Several load points, run one after another by one runner.

    range is "start:end[:step]"; a concurrency range without a step gives the powers of two
    between ("1:256" -> 1, 2, 4, ..., 256), other types 8 evenly spaced values. With
    ``workloads`` the sweep has a second axis: every load value runs once per ISL/OSL pair,
    workload by workload, and the analysis finds the knee and the max under SLO per workload
    and the Pareto frontier of tokens/s per GPU against tokens/s per user over the grid.
    """

    RULES = (
        Rule(
            name="sweep.exactly-one-of-range-values",
            message="set exactly one of range (start:end[:step]) and values",
            cel="has(self.range) != has(self.values)",
            check=lambda s: (s.range is None) != (s.values is None),
        ),
        Rule(
            name="sweep.range-syntax",
            message="sweep.range must be start:end or start:end:step with plain numbers, "
            'e.g. "1:64" or "128:1024:128"',
            cel=f"!has(self.range) || self.range.matches({cel_string(RANGE_PATTERN)})",
            check=lambda s: s.range is None or re2_matches(RANGE_PATTERN, s.range),
            field_path=".range",
        ),
        Rule(
            name="sweep.range-whole-numbers",
            message="sweep.range of a concurrency or sequence-length sweep needs whole numbers "
            "(start, end and step)",
            cel=_range_rule(
                f"!({_CEL_COUNTS}) || ({cel_whole(_CEL_START)} && {cel_whole(_CEL_END)} && "
                f"(!({_CEL_STEPPED}) || {cel_whole(_CEL_STEP)}))"
            ),
            check=lambda s: (
                (p := range_parts(s)) is None
                or s.type not in INTEGER_SWEEP_TYPES
                or _range_whole(p)
            ),
            field_path=".range",
        ),
        Rule(
            name="sweep.range-at-least-1",
            message="sweep.range of a concurrency or sequence-length sweep must start and end "
            "at 1 or more",
            cel=_range_rule(f"!({_CEL_COUNTS}) || ({_CEL_START} >= 1.0 && {_CEL_END} >= 1.0)"),
            check=lambda s: (
                (p := range_parts(s)) is None
                or s.type not in INTEGER_SWEEP_TYPES
                or (p[0] >= 1.0 and p[1] >= 1.0)
            ),
            field_path=".range",
        ),
        Rule(
            name="sweep.range-rate-positive",
            message="sweep.range of a request_rate sweep must start and end above 0",
            cel=_range_rule(f"{_CEL_COUNTS} || ({_CEL_START} > 0.0 && {_CEL_END} > 0.0)"),
            check=lambda s: (
                (p := range_parts(s)) is None
                or s.type != "request_rate"
                or (p[0] > 0.0 and p[1] > 0.0)
            ),
            field_path=".range",
        ),
        Rule(
            name="sweep.range-start-not-after-end",
            message='sweep.range start must not be greater than end, e.g. "1:64", not "64:1"',
            cel=_range_rule(f"{_CEL_START} <= {_CEL_END}"),
            check=lambda s: (p := range_parts(s)) is None or p[0] <= p[1],
            field_path=".range",
        ),
        Rule(
            name="sweep.range-step-positive",
            message="sweep.range step must be greater than 0",
            cel=_range_rule(f"!({_CEL_STEPPED}) || {_CEL_STEP} > 0.0"),
            check=lambda s: (p := range_parts(s)) is None or len(p) < 3 or p[2] > 0.0,
            field_path=".range",
        ),
        Rule(
            name="sweep.range-at-most-10000-points",
            message=f"sweep.range gives more than {MAX_RANGE_POINTS} points; use a larger step",
            cel=_range_rule(
                f"!({_CEL_STEPPED}) || {_CEL_STEP} <= 0.0 || {_CEL_START} > {_CEL_END} || "
                f"({_CEL_END} - {_CEL_START}) / {_CEL_STEP} + 0.000000001 < "
                f"{float(MAX_RANGE_POINTS)!r}"
            ),
            check=lambda s: (p := range_parts(s)) is None or _range_size_ok(p),
            field_path=".range",
        ),
        Rule(
            name="sweep.values-whole-numbers",
            message="sweep.values of a concurrency or sequence-length sweep must be whole numbers",
            cel=f"!has(self.values) || !({_CEL_COUNTS}) || self.values.all(v, {cel_whole('v')})",
            check=lambda s: (
                s.values is None
                or s.type not in INTEGER_SWEEP_TYPES
                or all(is_whole(v) for v in s.values)
            ),
            field_path=".values",
        ),
        Rule(
            name="sweep.values-at-least-1",
            message="sweep.values of a concurrency or sequence-length sweep must be 1 or more",
            cel=f"!has(self.values) || !({_CEL_COUNTS}) || self.values.all(v, v >= 1.0)",
            check=lambda s: (
                s.values is None
                or s.type not in INTEGER_SWEEP_TYPES
                or all(v >= 1.0 for v in s.values)
            ),
            field_path=".values",
        ),
        Rule(
            name="sweep.values-rate-positive",
            message="sweep.values of a request_rate sweep must be greater than 0",
            cel=f"!has(self.values) || {_CEL_COUNTS} || self.values.all(v, v > 0.0)",
            check=lambda s: (
                s.values is None or s.type != "request_rate" or all(v > 0.0 for v in s.values)
            ),
            field_path=".values",
        ),
        Rule(
            name="sweep.values-unique",
            message="sweep.values must not repeat a value",
            cel="!has(self.values) || self.values.all(v, self.values.exists_one(w, w == v))",
            check=lambda s: s.values is None or all(s.values.count(v) == 1 for v in s.values),
            field_path=".values",
        ),
        Rule(
            name="sweep.search-load-axis",
            message="sweep.search finds a load: it needs sweep.type concurrency or request_rate",
            cel=f"!has(self.search) || {_CEL_TYPE} == 'concurrency' || "
            f"{_CEL_TYPE} == 'request_rate'",
            check=lambda s: s.search is None or s.type in ("concurrency", "request_rate"),
            field_path=".search",
        ),
        Rule(
            name="sweep.search-whole-resolution",
            message="sweep.search.resolution of a concurrency sweep must be a whole number "
            "(requests in flight), e.g. 1",
            cel="!has(self.search) || !has(self.search.resolution) || "
            f"{_CEL_TYPE} != 'concurrency' || {cel_whole('self.search.resolution')}",
            check=lambda s: s.search is None or s.search.resolution is None
            or s.type != "concurrency" or is_whole(s.search.resolution),
            field_path=".search.resolution",
        ),
        Rule(
            name="sweep.workloads-load-axis",
            message="sweep.workloads is the second axis of a load sweep: it needs sweep.type "
            "concurrency or request_rate (the workloads set the lengths themselves)",
            cel=f"!has(self.workloads) || {_CEL_TYPE} == 'concurrency' || "
            f"{_CEL_TYPE} == 'request_rate'",
            check=lambda s: s.workloads is None or s.type in ("concurrency", "request_rate"),
            field_path=".workloads",
        ),
        Rule(
            name="sweep.workloads-unique",
            message="sweep.workloads must not repeat an inputTokens/outputTokens pair",
            cel="!has(self.workloads) || self.workloads.all(w, self.workloads.exists_one(x, "
            "x.inputTokens == w.inputTokens && x.outputTokens == w.outputTokens))",
            check=lambda s: s.workloads is None
            or len({(w.input_tokens, w.output_tokens) for w in s.workloads}) == len(s.workloads),
            field_path=".workloads",
        ),
        Rule(
            name="sweep.workloads-grid-only",
            message="sweep.workloads runs the whole grid: remove sweep.search and "
            "sweep.stopAfterKnee (each workload gets its knee and max under SLO from the grid)",
            cel="!has(self.workloads) || (!has(self.search) && "
            "!(has(self.stopAfterKnee) && self.stopAfterKnee))",
            check=lambda s: s.workloads is None or (s.search is None and not s.stop_after_knee),
            field_path=".workloads",
        ),
        Rule(
            name="sweep.search-not-after-knee",
            message="sweep.search picks the points itself: remove sweep.stopAfterKnee",
            cel="!has(self.search) || !(has(self.stopAfterKnee) && self.stopAfterKnee)",
            check=lambda s: s.search is None or not s.stop_after_knee,
            field_path=".stopAfterKnee",
        ),
    )

    type: Annotated[
        SweepType,
        CliFlag(
            "--sweep-type",
            reads="text",  # analyze names GenAI-Perf's other sweep types itself
            help=f"swept quantity: {', '.join(SWEEP_TYPES)} (default concurrency)",
        ),
    ] = Field(default="concurrency", description="The swept quantity.")
    range: Annotated[
        Str | None,
        CliFlag(
            "--sweep-range",
            metavar="START:END[:STEP]",
            help="concurrency without STEP: powers of two (1:256 -> 1,2,4,..,256); other types "
            "without STEP: 8 evenly spaced values. Default: concurrency 1:256",
        ),
    ] = Field(
        default=None,
        max_length=64,
        description="start:end[:step]; concurrency without step = powers of two "
        "(1:256 -> 1,2,..,256).",
    )
    values: Annotated[
        list[Float] | None,
        CliFlag(
            "--sweep-list",
            reads="text",  # A,B,C: parse_sweep_list reads it
            metavar="A,B,C",
            help="explicit values instead of a range",
        ),
    ] = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Explicit values instead of range.",
    )
    stop_after_knee: Annotated[
        Bool,
        CliFlag(
            "--stop-after-knee", form="switch", help="end the sweep one point past the knee"
        ),
    ] = Field(default=False, description="End the sweep one point past the knee.")
    on_point_failure: Annotated[
        OnPointFailure,
        CliFlag(
            "--on-point-failure",
            help="a point that fails entirely (server down): go on or stop (default continue)",
        ),
    ] = Field(default="continue", description="A failed point: go on or stop.")
    search: Search | None = Field(
        default=None,
        description="Search adaptively within range (or values' lowest to highest) instead of "
        "running every point: goal maxUnderSlo.",
    )

    workloads: Annotated[
        list[SweepWorkload] | None,
        CliFlag(
            "--sweep-workloads",
            reads="text",  # ISL:OSL,ISL:OSL: parse_workloads reads it
            metavar="ISL:OSL,...",
            help="a second axis: run every swept load once per input/output length pair "
            "(128:512,1024:128); per-workload knee and max under SLO, and the Pareto frontier "
            "of output tokens/s per GPU against tokens/s per user",
        ),
    ] = Field(
        default=None,
        min_length=1,
        max_length=MAX_WORKLOADS,
        description="A second axis: ISL/OSL pairs; every load value runs once per pair "
        "(points = values x workloads x repetitions).",
    )

    def _after_rules(self) -> list[tuple[str, str]]:
        """What sweep_values still refuses once every declared rule holds (Python only).

        Only a request_rate range starting below 5e-10 with a step gets here: its first point
        rounds to 0 at nine decimals. CEL has no rounding to mirror that exactly.
        """
        try:
            self.points()
        except ValueError as exc:
            return [(".range" if self.range is not None else ".values", str(exc))]
        return []

    def points(self) -> list[float]:
        """The swept values, in run order (see :func:`llmbench.api.sweep_values`)."""
        return sweep_values(self.type, self.range, self.values, flag="")
