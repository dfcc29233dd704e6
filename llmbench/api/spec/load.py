"""How requests are issued at one point: closed or open loop, its budget, sessions, replay."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from ..rules import ApiModel, Rule
from .flag import CliFlag
from .types import Bool, Float, Int, PositiveInt, cel_value

__all__ = [
    "LOAD_MODES",
    "Load",
    "LoadMode",
    "RateMode",
    "Sessions",
]

LoadMode = Literal["concurrency", "request_rate"]
RateMode = Literal["constant", "poisson", "gamma"]

LOAD_MODES: tuple[str, ...] = get_args(LoadMode)


class Sessions(ApiModel):
    """Multi-turn chat sessions (GenAI-Perf's --num-sessions and --session-* flags): each
    session sends its turns one after another, every turn with the chat history so far (its
    user turns and the replies it got), the next turn a delay after the previous answer."""

    RULES = (
        Rule(
            name="sessions.concurrency-at-most-count",
            message="load.sessions.concurrency is more than load.sessions.count (sessions in "
            "flight cannot exceed the sessions there are)",
            cel="(has(self.concurrency) ? self.concurrency : 1) <= self.count",
            check=lambda ss: ss.concurrency <= ss.count,
            field_path=".concurrency",
        ),
    )

    count: Annotated[
        PositiveInt,
        CliFlag(
            "--num-sessions",
            metavar="N",
            help="multi-turn chat sessions instead of independent requests: each sends its "
            "turns in order with the chat history so far, the next turn a delay after the answer",
        ),
    ] = Field(
        le=1000000, description="Sessions to run (GenAI-Perf's --num-sessions)."
    )
    concurrency: Annotated[
        PositiveInt,
        CliFlag(
            "--session-concurrency",
            default=None,
            metavar="N",
            help="with --num-sessions: sessions in flight (default 1)",
        ),
    ] = Field(
        default=1, description="Sessions in flight (--session-concurrency)."
    )
    turns_mean: Annotated[
        PositiveInt,
        CliFlag(
            "--session-turns-mean",
            default=None,
            metavar="TURNS",
            help="with --num-sessions: mean turns per session (default 1)",
        ),
    ] = Field(
        default=1, le=10000, description="Mean turns per session (--session-turns-mean)."
    )
    turns_stddev: Annotated[
        Float,
        CliFlag(
            "--session-turns-stddev",
            default=None,
            metavar="TURNS",
            help="with --num-sessions: standard deviation of the turns (default 0)",
        ),
    ] = Field(
        default=0.0, ge=0, description="Standard deviation of the turns (--session-turns-stddev)."
    )
    turn_delay_mean_ms: Annotated[
        Float,
        CliFlag(
            "--session-turn-delay-mean",
            default=None,
            metavar="MS",
            help="with --num-sessions: mean delay (ms) from an answer to the next turn "
            "(default 0)",
        ),
    ] = Field(
        default=0.0,
        ge=0,
        le=86400000,
        description="Mean delay (ms) from an answer to the session's next turn "
        "(--session-turn-delay-mean).",
    )
    turn_delay_stddev_ms: Annotated[
        Float,
        CliFlag(
            "--session-turn-delay-stddev",
            default=None,
            metavar="MS",
            help="with --num-sessions: standard deviation (ms) of the delay (default 0)",
        ),
    ] = Field(
        default=0.0,
        ge=0,
        description="Standard deviation (ms) of the delay (--session-turn-delay-stddev).",
    )


class Load(ApiModel):
    """How requests are issued at one point (a sweep overrides the swept quantity)."""

    RULES = (
        Rule(
            name="load.request-rate-required",
            message="load.requestRate is required when load.mode is request_rate "
            "(requests per second, e.g. 4)",
            cel=f"{cel_value('self.mode', 'concurrency')} != 'request_rate' || "
            "has(self.requestRate)",
            check=lambda ld: ld.mode != "request_rate" or ld.request_rate is not None,
            field_path=".requestRate",
        ),
        Rule(
            name="load.max-concurrency-open-loop-only",
            message="load.maxConcurrency applies to load.mode request_rate only; remove it or "
            "set load.concurrency",
            cel="!has(self.maxConcurrency) || "
            f"{cel_value('self.mode', 'concurrency')} == 'request_rate'",
            check=lambda ld: ld.max_concurrency is None or ld.mode == "request_rate",
            field_path=".maxConcurrency",
        ),
        Rule(
            name="load.burstiness-needs-gamma",
            message="load.burstiness is the shape of gamma gaps: set load.requestRateMode "
            "gamma, or remove load.burstiness",
            cel="!has(self.burstiness) || "
            f"{cel_value('self.requestRateMode', 'constant')} == 'gamma'",
            check=lambda ld: ld.burstiness is None or ld.request_rate_mode == "gamma",
            field_path=".burstiness",
        ),
        Rule(
            name="load.ramp-up-one-sender",
            message="load.rampUpSeconds ramps one sender's request rate or concurrency: keep "
            "load.workers 1, and no load.measurementIntervalMs, load.sessions or "
            "load.fixedSchedule (a trace or sessions set their own pace)",
            cel="!has(self.rampUpSeconds) || ((has(self.workers) ? self.workers : 1) == 1 && "
            "!has(self.measurementIntervalMs) && !has(self.sessions) && "
            "!(has(self.fixedSchedule) && self.fixedSchedule))",
            check=lambda ld: ld.ramp_up_seconds is None
            or (ld.workers == 1 and ld.measurement_interval_ms is None
                and ld.sessions is None and not ld.fixed_schedule),
            field_path=".rampUpSeconds",
        ),
        Rule(
            name="load.stability-needs-interval",
            message="load.stabilityPercentage needs load.measurementIntervalMs (the window it "
            "compares)",
            cel="!has(self.stabilityPercentage) || has(self.measurementIntervalMs)",
            check=lambda ld: ld.stability_percentage is None
            or ld.measurement_interval_ms is not None,
            field_path=".stabilityPercentage",
        ),
        Rule(
            name="load.interval-is-the-budget",
            message="load.measurementIntervalMs bounds the measurement by stable windows; "
            "remove load.requestCount and load.measurementDurationSeconds",
            cel="!has(self.measurementIntervalMs) || (!has(self.requestCount) && "
            "!has(self.measurementDurationSeconds))",
            check=lambda ld: ld.measurement_interval_ms is None
            or (ld.request_count is None and ld.measurement_duration_seconds is None),
            field_path=".measurementIntervalMs",
        ),
        Rule(
            name="load.interval-one-worker",
            message="load.measurementIntervalMs needs load.workers 1 (the windows are watched "
            "in the client's own process)",
            cel="!has(self.measurementIntervalMs) || "
            "(has(self.workers) ? self.workers : 1) == 1",
            check=lambda ld: ld.measurement_interval_ms is None or ld.workers == 1,
            field_path=".measurementIntervalMs",
        ),
        Rule(
            name="load.fixed-schedule-is-the-load",
            message="load.fixedSchedule sends the trace's rows at their timestamps: remove "
            "load.requestRate, load.requestCount, load.measurementDurationSeconds, "
            "load.measurementIntervalMs and load.warmupRequestCount, and keep load.workers 1",
            cel="!(has(self.fixedSchedule) && self.fixedSchedule) || "
            f"({cel_value('self.mode', 'concurrency')} == 'concurrency' && "
            "!has(self.requestRate) && !has(self.requestCount) && "
            "!has(self.measurementDurationSeconds) && !has(self.measurementIntervalMs) && "
            "(has(self.warmupRequestCount) ? self.warmupRequestCount : 0) == 0 && "
            "(has(self.workers) ? self.workers : 1) == 1)",
            check=lambda ld: not ld.fixed_schedule or (
                ld.mode == "concurrency" and ld.request_rate is None
                and ld.request_count is None and ld.measurement_duration_seconds is None
                and ld.measurement_interval_ms is None and ld.warmup_request_count == 0
                and ld.workers == 1
            ),
            field_path=".fixedSchedule",
        ),
        Rule(
            name="load.sessions-are-the-load",
            message="load.sessions is the load (sessions x turns requests, "
            "load.sessions.concurrency in flight): remove load.concurrency (or keep it 1), "
            "load.requestRate, "
            "load.requestCount, load.measurementDurationSeconds, load.measurementIntervalMs, "
            "load.warmupRequestCount and load.fixedSchedule, and keep load.workers 1",
            cel="!has(self.sessions) || "
            f"({cel_value('self.mode', 'concurrency')} == 'concurrency' && "
            "(has(self.concurrency) ? self.concurrency : 1) == 1 && !has(self.requestRate) && "
            "!has(self.requestCount) && "
            "!has(self.measurementDurationSeconds) && !has(self.measurementIntervalMs) && "
            "(has(self.warmupRequestCount) ? self.warmupRequestCount : 0) == 0 && "
            "!(has(self.fixedSchedule) && self.fixedSchedule) && "
            "(has(self.workers) ? self.workers : 1) == 1)",
            check=lambda ld: ld.sessions is None or (
                ld.mode == "concurrency" and ld.concurrency == 1 and ld.request_rate is None
                and ld.request_count is None and ld.measurement_duration_seconds is None
                and ld.measurement_interval_ms is None and ld.warmup_request_count == 0
                and not ld.fixed_schedule and ld.workers == 1
            ),
            field_path=".sessions",
        ),
    )

    mode: LoadMode = Field(default="concurrency", description="Closed or open loop.")
    concurrency: Annotated[Int, CliFlag("--concurrency", default=None)] = Field(
        default=1, ge=1, description="Requests in flight (closed loop)."
    )
    request_rate: Annotated[Float | None, CliFlag("--request-rate")] = Field(
        default=None, gt=0, description="Requests per second (open loop)."
    )
    request_rate_mode: Annotated[RateMode, CliFlag("--request-rate-mode")] = Field(
        default="constant",
        description="Arrival process: evenly spaced, Poisson (exponential gaps) or gamma gaps "
        "of shape burstiness (vLLM's --burstiness).",
    )
    burstiness: Annotated[
        Float | None,
        CliFlag(
            "--burstiness",
            metavar="K",
            help="with --request-rate-mode gamma: the gaps' gamma shape K (mean 1/rate, CV "
            "1/sqrt(K)); 1 is Poisson, below 1 burstier, above 1 more even (default 1)",
        ),
    ] = Field(
        default=None,
        gt=0,
        le=1000,
        description="Gamma shape of the gaps (requestRateMode gamma): 1 is Poisson, < 1 "
        "burstier, > 1 more even; the mean gap stays 1/rate.",
    )
    ramp_up_seconds: Annotated[
        Float | None,
        CliFlag(
            "--ramp-up",
            metavar="SECONDS",
            help="the rate grows linearly from 0 to --request-rate, or the slots in flight "
            "from 1 to --concurrency (+1 at even steps), over SECONDS; the ramp's requests "
            "are warm-up, the measurement starts after it",
        ),
    ] = Field(
        default=None,
        gt=0,
        le=86400,
        description="The request rate grows linearly from 0 to its target, or the requests "
        "in flight from 1 to load.concurrency (one more slot at even steps), over this many "
        "seconds; requests started during the ramp are warm-up (measured after it).",
    )
    max_concurrency: Annotated[PositiveInt | None, CliFlag("--max-concurrency")] = Field(
        default=None, description="Cap on in-flight requests (open loop)."
    )
    request_count: Annotated[
        PositiveInt | None,
        CliFlag("--request-count", help="measured requests (default: max(100, 4 × concurrency))"),
    ] = Field(default=None, description="Measured requests (default max(100, 4 x concurrency)).")
    measurement_duration_seconds: Annotated[
        Float | None,
        CliFlag(
            "--measurement-duration",
            metavar="SECONDS",
            help="bound the measured phase by time instead of --request-count",
        ),
    ] = Field(default=None, gt=0, description="Bound the measurement by time.")
    warmup_request_count: Annotated[Int, CliFlag("--warmup-request-count")] = Field(
        default=0, ge=0, description="Requests sent first and excluded."
    )
    workers: Annotated[
        Int,
        CliFlag(
            "--workers",
            help="client processes, each with its own event loop (split the concurrency)",
        ),
    ] = Field(default=1, ge=1, description="Client processes.")
    measurement_interval_ms: Annotated[
        Float | None,
        CliFlag(
            "--measurement-interval",
            "-p",
            metavar="MS",
            help="measure in time windows of MS milliseconds until the last three agree within "
            "--stability-percentage (at most 10 windows) instead of --request-count",
        ),
    ] = Field(
        default=None,
        gt=0,
        le=86400000,
        description="Time windows of this many ms (GenAI-Perf's --measurement-interval): the "
        "load runs until the last three windows agree within stabilityPercentage, at most 10.",
    )
    stability_percentage: Annotated[
        Float | None,
        CliFlag(
            "--stability-percentage",
            "-s",
            metavar="PCT",
            help="with --measurement-interval: the most the last three windows' request "
            "throughput and mean latency may differ, max/min - 1 in % (default 999)",
        ),
    ] = Field(
        default=None,
        gt=0,
        description="With measurementIntervalMs: how far (max / min − 1, in %) the last three "
        "windows' request throughput and mean latency may differ (default 999).",
    )
    fixed_schedule: Annotated[
        Bool,
        CliFlag(
            "--fixed-schedule",
            form="bare_or_value",
            default=None,
            metavar="true|false",
            help="replay --input-file as a trace: each row once, sent at its 'timestamp' (ms) "
            "after the first row's, open loop, the lag recorded (--input-file payload:F too)",
        ),
    ] = Field(
        default=False,
        description="Trace replay (GenAI-Perf's --fixed-schedule): every row of "
        "workload.inputFile once, each sent at its timestamp (ms) after the first row's.",
    )
    sessions: Sessions | None = Field(
        default=None,
        description="Multi-turn chat sessions instead of independent requests (chat only).",
    )
