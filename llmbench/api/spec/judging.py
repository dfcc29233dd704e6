"""What a run is held to and priced at: SLOs, the price per hour, the regression baseline."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, Strict

from ..figures import PointFigures
from ..rules import ApiModel, FieldRules, Rule, cel_string, re2_matches
from .flag import CliFlag
from .types import Float, PositiveInt, Str, cel_value

__all__ = [
    "Baseline",
    "BaselinePoint",
    "BaselineValues",
    "BaselineMode",
    "Cost",
    "HistoryBand",
    "Slo",
    "Tolerances",
]


class Slo(ApiModel):
    """Service-level objectives a point must meet; p99s in milliseconds."""

    RULES = (
        Rule(
            name="slo.goodput-ratio-needs-latency-limit",
            message="slo.goodputRatio needs at least one per-request limit to count "
            "(ttftP99Ms, itlP99Ms, e2eP99Ms, ttstP99Ms or minOutputTokenThroughputPerUser)",
            cel="!has(self.goodputRatio) || has(self.ttftP99Ms) || has(self.itlP99Ms) || "
            "has(self.e2eP99Ms) || has(self.ttstP99Ms) || "
            "has(self.minOutputTokenThroughputPerUser)",
            check=lambda s: s.goodput_ratio is None or bool(s.per_request()),
            field_path=".goodputRatio",
        ),
    )

    ttft_p99_ms: Float | None = Field(default=None, gt=0, description="p99 TTFT limit.")
    itl_p99_ms: Float | None = Field(default=None, gt=0, description="p99 ITL limit.")
    e2e_p99_ms: Float | None = Field(default=None, gt=0, description="p99 request latency limit.")
    ttst_p99_ms: Float | None = Field(
        default=None, gt=0, description="Time-to-second-token limit (counts towards goodput)."
    )
    min_output_token_throughput_per_user: Float | None = Field(
        default=None,
        gt=0,
        description="Floor on output tokens/s per request, 1000 / ITL ms (counts towards "
        "goodput).",
    )
    goodput_ratio: Float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Minimum fraction of requests meeting every latency limit (0-1].",
    )

    #: The point limits by ``llmbench analyze --slo`` key → their fields.
    LIMITS: ClassVar[dict[str, str]] = {
        "ttft_p99": "ttft_p99_ms",
        "itl_p99": "itl_p99_ms",
        "e2e_p99": "e2e_p99_ms",
        "goodput_ratio": "goodput_ratio",
    }
    #: The per-request limits that define goodput, by ``--goodput`` key → their fields.
    PER_REQUEST: ClassVar[dict[str, str]] = {
        "ttft": "ttft_p99_ms",
        "itl": "itl_p99_ms",
        "e2e": "e2e_p99_ms",
        "ttst": "ttst_p99_ms",
        "otpu": "min_output_token_throughput_per_user",
    }

    def limits(self) -> dict[str, float]:
        """Set limits by CLI key (``ttft_p99``, ``itl_p99``, ``e2e_p99``, ``goodput_ratio``)."""
        return self._set(self.LIMITS)

    def per_request(self) -> dict[str, float]:
        """The per-request limits that define goodput (``--goodput`` keys)."""
        return self._set(self.PER_REQUEST)

    def _set(self, keys: dict[str, str]) -> dict[str, float]:
        values = {key: getattr(self, name) for key, name in keys.items()}
        return {k: v for k, v in values.items() if v is not None}


class Cost(ApiModel):
    """Price of the deployment, for cost per million output tokens."""

    price_per_hour: Annotated[
        Float | None,
        CliFlag("--price-per-hour", reads="number", metavar="P", help="price of the deployment"),
    ] = Field(default=None, gt=0, description="Price of the serving hardware per hour.")
    currency: Annotated[
        Str, CliFlag("--currency", help="currency label of --price-per-hour")
    ] = Field(default="EUR", max_length=16, description="Currency label of the price.")


_DROP_PATTERN = r"^-?[0-9]+(\.[0-9]+)?%$"
_RISE_PATTERN = r"^\+?[0-9]+(\.[0-9]+)?%$"


def _tolerance_rules(pattern: str, name: str, message: str) -> FieldRules:
    return FieldRules(
        (
            Rule(
                name=name,
                message=message,
                cel=f"self.matches({cel_string(pattern)})",
                check=lambda v: re2_matches(pattern, v),
            ),
        )
    )


#: How far a metric where more is better (throughput) may drop before it is a regression.
DropTolerance = Annotated[
    str,
    Strict(),
    Field(max_length=16),
    _tolerance_rules(
        _DROP_PATTERN,
        "spec.baseline-tolerance-drop",
        "a throughput tolerance says how far it may drop: write -N%, e.g. -5%",
    ),
]
#: How far a metric where less is better (latency, energy, errors) may rise.
RiseTolerance = Annotated[
    str,
    Strict(),
    Field(max_length=16),
    _tolerance_rules(
        _RISE_PATTERN,
        "spec.baseline-tolerance-rise",
        "a latency, energy or error tolerance says how far it may rise: write +N%, e.g. +10%",
    ),
]


class Tolerances(ApiModel):
    """How far each figure may move the bad way from the baseline before the run counts as a
    regression; the keys are ``llmbench compare --tolerance``'s. Point keys (``ott``,
    ``ttftP99``, ...) apply at every swept value both runs measured. Setting any key replaces
    the defaults (maxOttUnderSlo -5%, peakOtt -5%, ttftP99 +10%, itlP99 +10%)."""

    max_ott_under_slo: DropTolerance | None = Field(
        default=None, description="Max output token throughput under SLO, e.g. -5%."
    )
    peak_ott: DropTolerance | None = Field(
        default=None, description="Highest output token throughput of the sweep, e.g. -5%."
    )
    ott: DropTolerance | None = Field(default=None, description="Output token throughput.")
    rps: DropTolerance | None = Field(default=None, description="Request throughput.")
    goodput: DropTolerance | None = Field(default=None, description="Goodput.")
    ttft_p99: RiseTolerance | None = Field(default=None, description="p99 TTFT, e.g. +10%.")
    ttft_p50: RiseTolerance | None = Field(default=None, description="p50 TTFT.")
    ttft_avg: RiseTolerance | None = Field(default=None, description="Mean TTFT.")
    itl_p99: RiseTolerance | None = Field(default=None, description="p99 inter-token latency.")
    itl_avg: RiseTolerance | None = Field(default=None, description="Mean inter-token latency.")
    e2e_p99: RiseTolerance | None = Field(default=None, description="p99 request latency.")
    e2e_avg: RiseTolerance | None = Field(default=None, description="Mean request latency.")
    error_rate: RiseTolerance | None = Field(default=None, description="Errors per request.")
    j_per_token: RiseTolerance | None = Field(
        default=None, description="GPU energy per output token (J), e.g. +10%."
    )

    DEFAULTS: ClassVar[dict[str, float]] = {
        "max_ott_under_slo": 5.0, "peak_ott": 5.0, "ttft_p99": 10.0, "itl_p99": 10.0,
    }

    def percentages(self) -> dict[str, float]:
        """``{"ttft_p99": 10.0, ...}``: the allowed bad-way change per metric, in percent, keyed
        as ``llmbench compare`` keys its metrics (the defaults when none is set)."""
        out = {
            name: abs(float(value.rstrip("%")))
            for name in type(self).model_fields
            if (value := getattr(self, name)) is not None
        }
        return out or dict(self.DEFAULTS)


class BaselinePoint(ApiModel, PointFigures):
    """Fixed figures of one swept value (the sweep's concurrency, rate or length)."""

    # The fields are PointFigures' (llmbench.api.figures): one declaration for every model
    # that holds a point's figures. This docstring is the CRD's description.


class BaselineValues(ApiModel):
    """Fixed numbers to hold every run to (e.g. the figures a capacity plan assumes)."""

    max_ott_under_slo: Float | None = Field(
        default=None, ge=0, description="Max output token throughput under SLO (tok/s)."
    )
    peak_ott: Float | None = Field(
        default=None, ge=0, description="Highest output token throughput of the sweep (tok/s)."
    )
    points: list[BaselinePoint] | None = Field(
        default=None, max_length=256, description="Per swept value figures."
    )


#: ``fixed``: one baseline run (or fixed numbers) and a percentage; ``history``: the noise
#: band of the last valid runs.
BaselineMode = Literal["fixed", "history"]


#: spec.baseline.history's defaults (the CEL rule reads them too: absent fields are defaulted
#: only after the rules ran).
_RUNS, _MIN_RUNS = 10, 3


class HistoryBand(ApiModel):
    """``mode: history``: the statistic a run is judged by. Per figure, the band is
    median ± k x 1.4826 x MAD of that figure over the last ``runs`` valid runs (MAD scaled
    by 1.4826 estimates the standard deviation of normal noise, and one slow night moves
    neither the median nor the MAD, as it would a mean and a standard deviation). A figure
    outside the band the bad way (latency above, throughput below) regresses. The band is
    never narrower than the figure's tolerance (``tolerances``), so a history too quiet to
    show any noise does not flag a 0.1 % move."""

    RULES = (
        Rule(
            name="spec.baseline-history-min-runs",
            message="baseline.history.minRuns must not exceed baseline.history.runs (the runs "
            "the band is made of)",
            cel=f"(has(self.minRuns) ? self.minRuns : {_MIN_RUNS}) <= "
            f"(has(self.runs) ? self.runs : {_RUNS})",
            check=lambda h: h.min_runs <= h.runs,
            field_path=".minRuns",
        ),
    )

    runs: PositiveInt = Field(
        default=_RUNS, ge=3, le=100,
        description="N: the last N valid runs of the same settings make the band (within "
        "historyLimit, and what status.history holds).",
    )
    min_runs: PositiveInt = Field(
        default=_MIN_RUNS, ge=3, le=100,
        description="Valid runs needed before any verdict; fewer: Regressed=Unknown "
        "(InsufficientHistory), no flip.",
    )
    k: Float = Field(
        default=3.0, gt=0, le=100,
        description="Band half-width in scaled MADs (3: a normal figure leaves it 0.3 % of "
        "the time).",
    )


class Baseline(ApiModel):
    """What each finished run is compared with for the ``Regressed`` condition. ``mode:
    fixed`` (the default): the latest earlier run that succeeded, was valid, did not regress
    and measured the same settings, held to ``tolerances``; ``run`` names one instead,
    ``values`` gives fixed numbers. ``mode: history``: the noise band of the last valid runs
    (``history``)."""

    RULES = (
        Rule(
            name="spec.baseline-one-source",
            message="baseline takes run or values, not both: name a run to compare with, or "
            "give fixed numbers",
            cel="!(has(self.run) && has(self.values))",
            check=lambda b: b.run is None or b.values is None,
        ),
        Rule(
            name="spec.baseline-history-alone",
            message="baseline.mode history judges by the last runs' band: leave out run and "
            "values (they belong to mode fixed)",
            cel=f"{cel_value('self.mode', 'fixed')} != 'history' || "
            "(!has(self.run) && !has(self.values))",
            check=lambda b: b.mode != "history" or (b.run is None and b.values is None),
            field_path=".mode",
        ),
    )

    mode: BaselineMode = Field(
        default="fixed",
        description="fixed: one baseline run (or values) and tolerances; history: the noise "
        "band of the last valid runs.",
    )
    history: HistoryBand = Field(
        default_factory=HistoryBand,
        description="mode history: how many runs make the band, and its width.",
    )

    run: PositiveInt | None = Field(
        default=None,
        description="Compare with this run number (its results ConfigMap must still exist: "
        "within historyLimit).",
    )
    values: BaselineValues | None = Field(default=None, description="Compare with fixed numbers.")
    tolerances: Tolerances = Field(
        default_factory=Tolerances,
        description="Allowed bad-way change per metric (mode history: the figures judged, "
        "and the band's least half-width).",
    )

