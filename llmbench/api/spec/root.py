"""The ``LLMBenchmark`` resource's spec: one pydantic model, read by the runner, the CRD and users.

Why one model: the same YAML must run on a laptop (``llmbench analyze -f``), be handed to the
runner Job by the operator, and be checked by the API server through the CRD. Every field is
declared once here (manifest key, type, default, bounds, description), and every cross-field
rule once (a :class:`~llmbench.api.rules.Rule`: CEL for the API server, a predicate for Python,
one message). :mod:`llmbench.api.crd` turns this module's JSON schema into the CRD.

Field names are the resource's camelCase keys (Python code may use snake_case); enum values of
``sweep.type`` and ``load.mode`` are the CLI's (``request_rate``, ``input_sequence_length``) so
a flag and a field read alike. Types are strict as the manifest format is: a string is never a
number, ``true`` is never 1, an integral float (``4.0``) is an integer, an integer is a number.

Example::

    spec = Spec.from_manifest(yaml.safe_load(open("examples/llmbenchmark-sim.yaml")))
    spec.points()          # [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]

Validation never stops at the first problem: :class:`SpecError` lists every issue with the
manifest path (``spec.load.requestRate``) and what would be accepted. It runs in the API
server's two steps: the schema (keys, types, bounds, enums) first; once that holds, every rule
of every object, so both sides report the same problems for the same manifest.

Where each rule is enforced (the API server through CEL, Python through the model):

============================================  =========  ========================================
rule                                          CEL        why not CEL
============================================  =========  ========================================
target: exactly one of url / service          yes
target.url is http(s)://host                  yes
target.endpoint starts with /                 yes
outputTokens.deterministic needs mean         yes
load.requestRate with mode request_rate       yes
load.maxConcurrency only with request_rate    yes
sweep: exactly one of range / values          yes
sweep.range syntax, order, step, whole        yes
numbers, minimum, rate > 0, <= 10000 points
sweep.values whole / >= 1 / > 0 / no repeats  yes
sweep points sweep_values refuses otherwise   no         only a request_rate range starting below
                                                         5e-10 with a step (its first point
                                                         rounds to 0 at 9 decimals); CEL has no
                                                         rounding to mirror it exactly
slo.goodputRatio needs a latency limit        yes
telemetry.dcgm / serverMetrics                yes
schedule: 5 cron fields, values in range      yes
schedule: numeric ranges run low to high      yes
schedule: fires at all, named ranges ordered  no         needs the calendar (day 30 of February)
                                                         and name-to-number tables: cronsim
timeZone: the zone exists                     no         needs the time zone database: zoneinfo
sweep.type concurrency needs mode concurrency yes
embeddings: no output_sequence_length sweep   yes
embeddings: no latency SLOs                   yes
============================================  =========  ========================================

The API server prunes nulls (no field is ``nullable``), so ``sweep: null`` reads as an absent
sweep on both sides; Python, stricter, refuses null for a field that has a default. Unknown
fields are refused by the API server only under ``fieldValidation=Strict`` (kubectl's default);
other clients get them dropped with a warning.

Python refuses a little more than the hand-written parser before it did, always to agree with
the API server: strings have a maximum length (the CRD needs one to bound CEL cost),
``sweep.values`` at most 128 items, integers fit in 64 bits, ``inf``/``nan`` are not numbers,
snake_case keys in a manifest are unknown fields, a count sweep's range step is a whole number,
a range's numbers are plain decimals, and a schedule is five standard fields or a macro (no
seconds field, no ``L``/``W``/``#``).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, get_args

import cronsim
from pydantic import (
    AfterValidator,
    AllowInfNan,
    BeforeValidator,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
)

from ..rules import (
    RULES_DEFERRED,
    ApiModel,
    FieldRules,
    Rule,
    SpecError,
    SpecIssue,
    cel_string,
    field_rules,
    issues_from_validation_error,
    model_type,
    re2_matches,
    rule_issues,
)
from ..sweep_values import (
    INTEGER_SWEEP_TYPES,
    MAX_RANGE_POINTS,
    SWEEP_TYPES,
    SweepType,
    sweep_values,
)

__all__ = [
    "API_VERSION",
    "CRON_MACROS",
    "CRON_PATTERN",
    "ENDPOINT_TYPES",
    "GROUP",
    "KIND",
    "LOAD_MODES",
    "ON_POINT_FAILURE",
    "PLACEMENTS",
    "Runner",
    "RunnerLimits",
    "Sessions",
    "RunnerRequests",
    "PLURAL",
    "RANGE_PATTERN",
    "SHORT_NAMES",
    "SINGULAR",
    "SWEEP_TYPES",
    "URL_PATTERN",
    "VERSION",
    "Artifacts",
    "Cost",
    "PvcArtifacts",
    "Load",
    "OutputTokens",
    "SecretKeyRef",
    "ServiceRef",
    "Slo",
    "Spec",
    "Sweep",
    "Target",
    "Telemetry",
    "TokenDistribution",
    "Workload",
    "cron_expression",
    "spec_rules",
]

GROUP = "llmbench.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "LLMBenchmark"
PLURAL = "llmbenchmarks"
SINGULAR = "llmbenchmark"
SHORT_NAMES = ("llmb",)

EndpointType = Literal["chat", "completions", "embeddings"]
LoadMode = Literal["concurrency", "request_rate"]
RateMode = Literal["constant", "poisson"]
Placement = Literal["SameNode", "SameZone", "Any"]
OnPointFailure = Literal["continue", "stop"]
ModelSelectionStrategy = Literal["round_robin", "random"]

ENDPOINT_TYPES: tuple[str, ...] = get_args(EndpointType)
LOAD_MODES: tuple[str, ...] = get_args(LoadMode)
PLACEMENTS: tuple[str, ...] = get_args(Placement)
ON_POINT_FAILURE: tuple[str, ...] = get_args(OnPointFailure)

# ----------------------------------------------------------------------------------------------
# scalar types: strict as a manifest is (see the module docstring)
# ----------------------------------------------------------------------------------------------

_INT64 = 2**63


def _integral_float(value: Any) -> Any:
    """``4.0`` -> ``4`` (YAML and JSON clients write whole numbers either way); else as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int64(value: int) -> int:
    """Refuses integers the API server cannot store, so Python never accepts more than it."""
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{value}: out of range (a 64-bit integer, as the API server stores)")
    return value


# The validators come last in each Annotated list, after any bound: pydantic then still writes
# the bound into the JSON schema (``minimum``), even inside ``X | None``.
Int = Annotated[int, Strict(), AfterValidator(_int64), BeforeValidator(_integral_float)]
#: An optional count's type: the bound sits inside, where ``X | None`` keeps it in the schema.
PositiveInt = Annotated[
    int, Strict(), Field(ge=1), AfterValidator(_int64), BeforeValidator(_integral_float)
]
Float = Annotated[float, Strict(), AllowInfNan(False)]
Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]

# ----------------------------------------------------------------------------------------------
# patterns shared by CEL (RE2) and Python; see rules.re2_matches
# ----------------------------------------------------------------------------------------------

#: An http(s) URL with a host and, if any, a port from 1 to 65535 (what target.url and a
#: telemetry URL must start with): ``http://127.0.0.1:99999`` is refused here, naming the field,
#: instead of failing later inside the URL parser.
URL_PATTERN = (
    r"^https?://(?:[^/?#@ \t\n\r\f\v]*@)?(?:\[[0-9A-Fa-f:.]+\]|[^/?#@:\[\] \t\n\r\f\v]+)"
    r"(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]"
    r"|6553[0-5]))?(?:[/?#]|$)"
)

_NUM = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,2})?"
#: ``start:end`` or ``start:end:step``, plain decimal numbers (exponent at most two digits, so
#: every number is finite for both Python's ``float`` and CEL's ``double``), spaces allowed.
RANGE_PATTERN = rf"^ *{_NUM} *: *{_NUM} *(?:: *{_NUM} *)?$"

_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_DAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"


def _cron_field(value: str) -> str:
    """One cron field: ``*`` or a value or a range, each with an optional ``/step``, listed."""
    term = rf"(?:\*|{value}(?:-{value})?)(?:/[1-9][0-9]?)?"
    return rf"{term}(?:,{term})*"


_CRON_FIELDS = [
    _cron_field(r"(?:[0-5]?[0-9])"),  # minute 0-59
    _cron_field(r"(?:[01]?[0-9]|2[0-3])"),  # hour 0-23
    _cron_field(r"(?:0?[1-9]|[12][0-9]|3[01])"),  # day of month 1-31
    _cron_field(rf"(?:0?[1-9]|1[0-2]|{_MONTHS})"),  # month 1-12
    _cron_field(rf"(?:0?[0-7]|{_DAYS})"),  # day of week 0-7 (0 and 7 are Sunday)
]
#: Five cron fields with their value ranges, or a macro; names case-insensitive.
CRON_PATTERN = (
    r"(?i)^(?:@(?:yearly|annually|monthly|weekly|daily|hourly)|[ \t]*"
    + r"[ \t]+".join(_CRON_FIELDS)
    + r"[ \t]*)$"
)
_CRON_RANGE = r"[0-9]+-[0-9]+"
#: The five-field form of each macro (cronsim reads only fields).
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def cron_expression(schedule: str) -> str:
    """The five-field form of a schedule (a macro expanded), as ``cronsim.CronSim`` takes it."""
    text = schedule.strip()
    return CRON_MACROS.get(text.lower(), text)


def _cron_ranges_ascending(schedule: str) -> bool:
    """Every numeric ``a-b`` range has a <= b (Python's form of the CEL ``findAll`` rule)."""
    pairs = (r.split("-") for r in re.findall(_CRON_RANGE, schedule))
    return all(int(lo) <= int(hi) for lo, hi in pairs)


def _cron_fires(schedule: str) -> bool:
    """True when cronsim accepts the schedule (days that exist, ranges in order)."""
    try:
        cronsim.CronSim(cron_expression(schedule), datetime(2000, 1, 1))
    except cronsim.CronSimError:
        return False
    return True


def _cel_value(path: str, default: str) -> str:
    """CEL for a field's value, or its default when the field is absent.

    Why: the API server checks a ``default: {}`` object against its rules *before* it fills
    the nested defaults (and at CRD creation), so a rule may not assume a defaulted field is
    there. ``_cel_value("self.load.mode", "concurrency")`` guards every step of the path.
    """
    parts = path.split(".")
    guards = " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))
    return f"(({guards}) ? {path} : {cel_string(default)})"


def _whole(x: float) -> bool:
    """x is a whole number; Python's form of the CEL below (doubles >= 2**52 are all whole)."""
    return x >= 2.0**52 or x <= -(2.0**52) or float(int(x)) == x


def _cel_whole(x: str) -> str:
    """CEL for "the double x is whole" without overflowing ``int()`` on huge values."""
    return f"({x} >= 4503599627370496.0 || {x} <= -4503599627370496.0 || double(int({x})) == {x})"


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------


# A field with rules of its own carries its length bound inside the Annotated list, before the
# rules: so an over-long value is reported as such, and the rules only ever see bounded strings.
TargetUrl = Annotated[
    str,
    Strict(),
    Field(max_length=2048),
    FieldRules(
        (
            Rule(
                name="target.url-is-http",
                message="target.url must be an http:// or https:// URL with a host and, if "
                "any, a port from 1 to 65535, e.g. http://vllm:8000",
                cel=f"self.matches({cel_string(URL_PATTERN)})",
                check=lambda url: re2_matches(URL_PATTERN, url),
            ),
        )
    ),
]
EndpointPath = Annotated[
    str,
    Strict(),
    Field(max_length=1024),
    FieldRules(
        (
            Rule(
                name="target.endpoint-is-path",
                message="target.endpoint must be a path starting with /, e.g. /v1/chat/completions",
                cel="self.startsWith('/')",
                check=lambda path: path.startswith("/"),
            ),
        )
    ),
]


def _telemetry_source(key: str) -> FieldRules:
    """auto | off | an http(s) URL, for one telemetry source (``Annotated`` metadata)."""
    return FieldRules(
        (
            Rule(
                name=f"telemetry.{key}-source",
                message=f"telemetry.{key} must be auto, off or an http(s):// URL",
                cel=f"self in ['auto', 'off'] || self.matches({cel_string(URL_PATTERN)})",
                check=lambda v: v in ("auto", "off") or re2_matches(URL_PATTERN, v),
            ),
        )
    )


def _zone_exists(name: str) -> bool:
    """True for an IANA time zone name this Python knows (``Europe/Berlin``, ``UTC``)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


TimeZone = Annotated[
    str,
    Strict(),
    Field(min_length=1, max_length=64),
    FieldRules(
        (
            Rule(
                name="spec.time-zone-exists",
                message="timeZone must be an IANA time zone name, e.g. Europe/Berlin or UTC",
                cel=None,
                python_only="needs the time zone database (CronJob's own timeZone is checked "
                "by the controller, not at admission, for the same reason)",
                check=_zone_exists,
            ),
        )
    ),
]

ConcurrencyPolicy = Literal["Forbid", "Replace"]


Schedule = Annotated[
    str,
    Strict(),
    Field(max_length=128),
    FieldRules(
        (
            Rule(
                name="spec.schedule-syntax",
                message="schedule must be 5 cron fields (minute 0-59, hour 0-23, day 1-31, "
                'month 1-12 or JAN-DEC, weekday 0-7 or SUN-SAT), e.g. "0 2 * * *", or '
                "@hourly, @daily, @weekly, @monthly, @yearly",
                cel=f"self.matches({cel_string(CRON_PATTERN)})",
                check=lambda v: re2_matches(CRON_PATTERN, v),
            ),
            Rule(
                name="spec.schedule-ranges-ascending",
                message="schedule ranges must run from low to high, e.g. 1-5, not 5-1",
                cel=f"!self.matches({cel_string(CRON_PATTERN)}) || "
                f"self.findAll({cel_string(_CRON_RANGE)})"
                ".all(r, int(r.split('-')[0]) <= int(r.split('-')[1]))",
                check=lambda v: not re2_matches(CRON_PATTERN, v) or _cron_ranges_ascending(v),
            ),
            Rule(
                name="spec.schedule-fires",
                message="schedule never fires or has a named range running backwards "
                '(e.g. day 30 in "0 0 30 2 *", or FRI-MON); pick days that exist and ranges '
                "from low to high",
                cel=None,
                python_only="needs a calendar (which months have a day 30) and the name tables "
                "of months and weekdays; checked with cronsim",
                # Only once the CEL rules hold, so one mistake is reported once.
                check=lambda v: (
                    not re2_matches(CRON_PATTERN, v)
                    or not _cron_ranges_ascending(v)
                    or _cron_fires(v)
                ),
            ),
        )
    ),
]


class ServiceRef(ApiModel):
    """A Kubernetes Service in front of the inference pods."""

    name: Str = Field(min_length=1, max_length=253, description="Service name.")
    port: Int = Field(default=8000, ge=1, le=65535, description="Service port.")
    namespace: Str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Namespace of the Service (default: the benchmark's).",
    )


class SecretKeyRef(ApiModel):
    """A key of a Secret holding the API key (sent as "Authorization: Bearer")."""

    name: Str = Field(min_length=1, max_length=253, description="Secret name.")
    key: Str = Field(min_length=1, max_length=253, description="Key inside the Secret.")


class Target(ApiModel):
    """What is measured: one OpenAI-compatible endpoint, by URL or by Service."""

    RULES = (
        Rule(
            name="target.exactly-one-of-url-service",
            message="set exactly one of url (http://host:port) and service (name, port)",
            cel="has(self.url) != has(self.service)",
            check=lambda t: (t.url is None) != (t.service is None),
        ),
    )

    url: TargetUrl | None = Field(
        default=None,
        description="Base URL, e.g. http://vllm:8000 (or use service).",
    )
    service: ServiceRef | None = Field(default=None, description="Service in front of the pods.")
    model: Str | None = Field(
        default=None,
        max_length=512,
        description="Model name as served (default: the first in /v1/models).",
    )
    endpoint_type: EndpointType = Field(default="chat", description="OpenAI API flavour.")
    endpoint: EndpointPath | None = Field(
        default=None, description="Custom path, e.g. /v1/chat/completions."
    )
    streaming: Bool = Field(
        default=True, description="Stream responses (SSE); needed for TTFT/ITL."
    )
    pod_selector: dict[str, Any] | None = Field(
        default=None,
        description="Label selector of the inference pods (placement, telemetry).",
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key holding the API key."
    )
    request_timeout_seconds: Float = Field(default=600.0, gt=0, description="Per-request timeout.")

    def base_url(self, namespace: str | None = None) -> str:
        """The URL to send to: ``url``, or the Service's in-cluster DNS name.

        Args:
            namespace: The benchmark's namespace, used when the Service names none.
        """
        if self.url is not None:
            return self.url
        if self.service is None:
            raise ValueError("target has neither url nor service")
        ns = self.service.namespace or namespace
        host = f"{self.service.name}.{ns}.svc" if ns else self.service.name
        return f"http://{host}:{self.service.port}"


class TokenDistribution(ApiModel):
    """Synthetic prompt length in tokens (normal distribution)."""

    mean: Int = Field(default=550, ge=1, description="Mean input tokens.")
    stddev: Float = Field(default=0.0, ge=0, description="Standard deviation (0 = fixed).")


class OutputTokens(ApiModel):
    """Requested output length; mean unset lets the server decide (GenAI-Perf's -1)."""

    RULES = (
        Rule(
            name="outputTokens.deterministic-needs-mean",
            message="outputTokens.deterministic needs outputTokens.mean (the exact length to "
            "force)",
            cel="!has(self.deterministic) || !self.deterministic || has(self.mean)",
            check=lambda o: not o.deterministic or o.mean is not None,
            field_path=".deterministic",
        ),
    )

    mean: PositiveInt | None = Field(default=None, description="Mean output tokens (max_tokens).")
    stddev: Float = Field(default=0.0, ge=0, description="Standard deviation.")
    deterministic: Bool = Field(
        default=False, description="Also send min_tokens = the target (exact OSL)."
    )


class Workload(ApiModel):
    """What each request sends."""

    RULES = (
        Rule(
            name="workload.prefix-prompts-synthetic-only",
            message="workload.numPrefixPrompts applies to synthetic prompts; remove it or "
            "workload.inputFile",
            cel="!has(self.numPrefixPrompts) || self.numPrefixPrompts == 0 || "
            "!has(self.inputFile)",
            check=lambda w: w.num_prefix_prompts == 0 or w.input_file is None,
            field_path=".numPrefixPrompts",
        ),
    )

    input_tokens: TokenDistribution = Field(
        default_factory=TokenDistribution, description="Synthetic prompt length."
    )
    output_tokens: OutputTokens = Field(
        default_factory=OutputTokens, description="Requested output length."
    )
    extra_inputs: dict[str, Any] = Field(
        default_factory=dict, description="Merged into every request body, e.g. ignore_eos."
    )
    tokenizer: Str | None = Field(
        default=None,
        max_length=4096,
        description="'default', a local path, a cached hub id, or 'server'.",
    )
    tokenizer_revision: Str | None = Field(
        default=None,
        max_length=256,
        description="With a hub id: the cached snapshot of this branch, tag or commit.",
    )
    seed: Int = Field(default=0, ge=0, description="Random seed for prompts and schedules.")
    num_prompts: Int = Field(default=100, ge=1, description="Distinct synthetic prompts.")
    models: list[Annotated[str, Strict(), Field(min_length=1, max_length=512)]] | None = Field(
        default=None,
        max_length=64,
        description="Several served models (GenAI-Perf's -m A B): each prompt is sent to one "
        "of them, by modelSelectionStrategy.",
    )
    model_selection_strategy: ModelSelectionStrategy = Field(
        default="round_robin",
        description="With models: prompt i goes to model i mod N (round_robin) or a seeded "
        "random one (random).",
    )
    input_file: Str | None = Field(
        default=None,
        max_length=4096,
        description="Prompts instead of synthetic ones: GenAI-Perf's JSONL rows (text or "
        "messages, output_length, timestamp, Mooncake input_length/hash_ids) or ShareGPT "
        "conversations, one object a line or one JSON array.",
    )
    num_prefix_prompts: Int = Field(
        default=0,
        ge=0,
        le=100000,
        description="Shared-prefix prompts (GenAI-Perf's --num-prefix-prompts): a pool of this "
        "many prefixes, each synthetic prompt starting with one of them (0: none).",
    )
    prefix_prompt_length: PositiveInt = Field(
        default=100,
        le=1000000,
        description="Tokens of each shared prefix (exact), added to the synthetic length.",
    )


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

    count: PositiveInt = Field(
        le=1000000, description="Sessions to run (GenAI-Perf's --num-sessions)."
    )
    concurrency: PositiveInt = Field(
        default=1, description="Sessions in flight (--session-concurrency)."
    )
    turns_mean: PositiveInt = Field(
        default=1, le=10000, description="Mean turns per session (--session-turns-mean)."
    )
    turns_stddev: Float = Field(
        default=0.0, ge=0, description="Standard deviation of the turns (--session-turns-stddev)."
    )
    turn_delay_mean_ms: Float = Field(
        default=0.0,
        ge=0,
        le=86400000,
        description="Mean delay (ms) from an answer to the session's next turn "
        "(--session-turn-delay-mean).",
    )
    turn_delay_stddev_ms: Float = Field(
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
            cel=f"{_cel_value('self.mode', 'concurrency')} != 'request_rate' || "
            "has(self.requestRate)",
            check=lambda ld: ld.mode != "request_rate" or ld.request_rate is not None,
            field_path=".requestRate",
        ),
        Rule(
            name="load.max-concurrency-open-loop-only",
            message="load.maxConcurrency applies to load.mode request_rate only; remove it or "
            "set load.concurrency",
            cel="!has(self.maxConcurrency) || "
            f"{_cel_value('self.mode', 'concurrency')} == 'request_rate'",
            check=lambda ld: ld.max_concurrency is None or ld.mode == "request_rate",
            field_path=".maxConcurrency",
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
            f"({_cel_value('self.mode', 'concurrency')} == 'concurrency' && "
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
            f"({_cel_value('self.mode', 'concurrency')} == 'concurrency' && "
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
    concurrency: Int = Field(default=1, ge=1, description="Requests in flight (closed loop).")
    request_rate: Float | None = Field(
        default=None, gt=0, description="Requests per second (open loop)."
    )
    request_rate_mode: RateMode = Field(default="constant", description="Arrival process.")
    max_concurrency: PositiveInt | None = Field(
        default=None, description="Cap on in-flight requests (open loop)."
    )
    request_count: PositiveInt | None = Field(
        default=None, description="Measured requests (default max(100, 4 x concurrency))."
    )
    measurement_duration_seconds: Float | None = Field(
        default=None, gt=0, description="Bound the measurement by time."
    )
    warmup_request_count: Int = Field(
        default=0, ge=0, description="Requests sent first and excluded."
    )
    workers: Int = Field(default=1, ge=1, description="Client processes.")
    measurement_interval_ms: Float | None = Field(
        default=None,
        gt=0,
        le=86400000,
        description="Time windows of this many ms (GenAI-Perf's --measurement-interval): the "
        "load runs until the last three windows agree within stabilityPercentage, at most 10.",
    )
    stability_percentage: Float | None = Field(
        default=None,
        gt=0,
        description="With measurementIntervalMs: how far (max / min − 1, in %) the last three "
        "windows' request throughput and mean latency may differ (default 999).",
    )
    fixed_schedule: Bool = Field(
        default=False,
        description="Trace replay (GenAI-Perf's --fixed-schedule): every row of "
        "workload.inputFile once, each sent at its timestamp (ms) after the first row's.",
    )
    sessions: Sessions | None = Field(
        default=None,
        description="Multi-turn chat sessions instead of independent requests (chat only).",
    )


def _range_parts(sweep: Sweep) -> list[float] | None:
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
_CEL_COUNTS = f"{_cel_value('self.type', 'concurrency')} != 'request_rate'"  # integer types


def _range_whole(p: list[float]) -> bool:
    return all(_whole(x) for x in p)


def _range_size_ok(p: list[float]) -> bool:
    """Mirrors sweep_values: n = floor((end - start) / step + 1e-9) + 1 <= MAX_RANGE_POINTS."""
    if len(p) < 3 or p[2] <= 0 or p[0] > p[1]:
        return True
    return (p[1] - p[0]) / p[2] + 1e-9 < float(MAX_RANGE_POINTS)


class Sweep(ApiModel):
    """Several load points, run one after another by one runner.

    range is "start:end[:step]"; a concurrency range without a step gives the powers of two
    between ("1:256" -> 1, 2, 4, ..., 256), other types 8 evenly spaced values.
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
                f"!({_CEL_COUNTS}) || ({_cel_whole(_CEL_START)} && {_cel_whole(_CEL_END)} && "
                f"(!({_CEL_STEPPED}) || {_cel_whole(_CEL_STEP)}))"
            ),
            check=lambda s: (
                (p := _range_parts(s)) is None
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
                (p := _range_parts(s)) is None
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
                (p := _range_parts(s)) is None
                or s.type != "request_rate"
                or (p[0] > 0.0 and p[1] > 0.0)
            ),
            field_path=".range",
        ),
        Rule(
            name="sweep.range-start-not-after-end",
            message='sweep.range start must not be greater than end, e.g. "1:64", not "64:1"',
            cel=_range_rule(f"{_CEL_START} <= {_CEL_END}"),
            check=lambda s: (p := _range_parts(s)) is None or p[0] <= p[1],
            field_path=".range",
        ),
        Rule(
            name="sweep.range-step-positive",
            message="sweep.range step must be greater than 0",
            cel=_range_rule(f"!({_CEL_STEPPED}) || {_CEL_STEP} > 0.0"),
            check=lambda s: (p := _range_parts(s)) is None or len(p) < 3 or p[2] > 0.0,
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
            check=lambda s: (p := _range_parts(s)) is None or _range_size_ok(p),
            field_path=".range",
        ),
        Rule(
            name="sweep.values-whole-numbers",
            message="sweep.values of a concurrency or sequence-length sweep must be whole numbers",
            cel=f"!has(self.values) || !({_CEL_COUNTS}) || self.values.all(v, {_cel_whole('v')})",
            check=lambda s: (
                s.values is None
                or s.type not in INTEGER_SWEEP_TYPES
                or all(_whole(v) for v in s.values)
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
    )

    type: SweepType = Field(default="concurrency", description="The swept quantity.")
    range: Str | None = Field(
        default=None,
        max_length=64,
        description="start:end[:step]; concurrency without step = powers of two "
        "(1:256 -> 1,2,..,256).",
    )
    values: list[Float] | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Explicit values instead of range.",
    )
    stop_after_knee: Bool = Field(
        default=False, description="End the sweep one point past the knee."
    )
    on_point_failure: OnPointFailure = Field(
        default="continue", description="A failed point: go on or stop."
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

    def limits(self) -> dict[str, float]:
        """Set limits by CLI key (``ttft_p99``, ``itl_p99``, ``e2e_p99``, ``goodput_ratio``)."""
        pairs = {
            "ttft_p99": self.ttft_p99_ms,
            "itl_p99": self.itl_p99_ms,
            "e2e_p99": self.e2e_p99_ms,
            "goodput_ratio": self.goodput_ratio,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def per_request(self) -> dict[str, float]:
        """The per-request limits that define goodput (``--goodput`` keys)."""
        pairs = {
            "ttft": self.ttft_p99_ms,
            "itl": self.itl_p99_ms,
            "e2e": self.e2e_p99_ms,
            "ttst": self.ttst_p99_ms,
            "otpu": self.min_output_token_throughput_per_user,
        }
        return {k: v for k, v in pairs.items() if v is not None}


class Telemetry(ApiModel):
    """Where GPU and server metrics come from during each point."""

    dcgm: Annotated[str, Strict(), Field(max_length=2048), _telemetry_source("dcgm")] = Field(
        default="auto", description="'auto' (find the node's exporter), 'off', or a URL."
    )
    server_metrics: Annotated[
        str, Strict(), Field(max_length=2048), _telemetry_source("serverMetrics")
    ] = Field(default="auto", description="'auto' (target /metrics), 'off', or a URL.")


class Cost(ApiModel):
    """Price of the deployment, for cost per million output tokens."""

    price_per_hour: Float | None = Field(
        default=None, gt=0, description="Price of the serving hardware per hour."
    )
    currency: Str = Field(default="EUR", max_length=16, description="Currency label of the price.")


#: A Kubernetes resource quantity as the runner block takes it (``500m``, ``2``, ``1Gi``).
Quantity = Annotated[
    str,
    Strict(),
    Field(max_length=32, pattern=r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"),
]


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


class BaselinePoint(ApiModel):
    """Fixed figures of one swept value (the sweep's concurrency, rate or length)."""

    value: Float = Field(description="The swept value these figures belong to.")
    ott: Float | None = Field(default=None, ge=0, description="Output token throughput (tok/s).")
    rps: Float | None = Field(default=None, ge=0, description="Request throughput (req/s).")
    ttft_p99_ms: Float | None = Field(default=None, ge=0, description="p99 TTFT (ms).")
    itl_p99_ms: Float | None = Field(default=None, ge=0, description="p99 ITL (ms).")
    e2e_p99_ms: Float | None = Field(default=None, ge=0, description="p99 request latency (ms).")
    joules_per_output_token: Float | None = Field(
        default=None, ge=0, description="GPU energy per output token (J)."
    )


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


class Baseline(ApiModel):
    """What each finished run is compared with for the ``Regressed`` condition: by default
    the latest earlier run that succeeded, was valid, did not regress and measured the same
    settings; ``run`` names one instead, ``values`` gives fixed numbers."""

    RULES = (
        Rule(
            name="spec.baseline-one-source",
            message="baseline takes run or values, not both: name a run to compare with, or "
            "give fixed numbers",
            cel="!(has(self.run) && has(self.values))",
            check=lambda b: b.run is None or b.values is None,
        ),
    )

    run: PositiveInt | None = Field(
        default=None,
        description="Compare with this run number (its results ConfigMap must still exist: "
        "within historyLimit).",
    )
    values: BaselineValues | None = Field(default=None, description="Compare with fixed numbers.")
    tolerances: Tolerances = Field(
        default_factory=Tolerances, description="Allowed bad-way change per metric."
    )


class RunnerRequests(ApiModel):
    """CPU and memory the runner pod asks the scheduler for (no GPU, ever)."""

    cpu: Quantity = Field(default="500m", description="CPU request, e.g. 500m.")
    memory: Quantity = Field(default="512Mi", description="Memory request, e.g. 512Mi.")


class RunnerLimits(ApiModel):
    """CPU and memory the runner pod may use; the runner sizes its response buffer to this."""

    cpu: Quantity = Field(default="2", description="CPU limit, e.g. 2.")
    memory: Quantity = Field(default="2Gi", description="Memory limit, e.g. 2Gi.")


class Runner(ApiModel):
    """The runner Job the operator creates for each run."""

    image: Annotated[str, Strict(), Field(min_length=1, max_length=512)] | None = Field(
        default=None, description="Runner image; default: the operator's --runner-image."
    )
    requests: RunnerRequests = Field(
        default_factory=RunnerRequests, description="Pod resource requests."
    )
    limits: RunnerLimits = Field(default_factory=RunnerLimits, description="Pod resource limits.")
    timeout_seconds: PositiveInt | None = Field(
        default=None, description="Whole-run deadline (the Job's activeDeadlineSeconds)."
    )
    backoff_limit: Int = Field(
        default=3, ge=0, le=20, description="Runner pod retries; a retry resumes the sweep."
    )
    replicas: Int = Field(
        default=1, ge=1, le=64,
        description="Runner pods that drive each point together (an Indexed Job): the load "
        "is split between them and their requests are merged into one result.",
    )


class PvcArtifacts(ApiModel):
    """A PersistentVolumeClaim in the benchmark's namespace that keeps every run's files."""

    claim_name: Str = Field(
        min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The claim's name, in the benchmark's namespace (lowercase letters, "
        "digits, '-' and '.'); it must exist, ReadWriteMany when runner pods of one run may "
        "land on several nodes.",
    )
    sub_path: Str | None = Field(
        default=None, min_length=1, max_length=512,
        # every segment starts with a letter, digit, _ or -: no "..", no absolute path
        pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$",
        description="A relative folder inside the volume under which <benchmark>/run-<n>/ "
        "is written (segments of letters, digits, '.', '_' and '-', none starting with '.'); "
        "default: the volume's root.",
    )


class Artifacts(ApiModel):
    """Where a run's full artefacts go besides its results ConfigMap."""

    pvc: PvcArtifacts | None = Field(
        default=None,
        description="Write each run's folder (per-request exports, per-point results, the "
        "summary CSV and the HTML report, as llmbench analyze lays them out) to this claim.",
    )


_EMBEDDINGS = f"{_cel_value('self.target.endpointType', 'chat')} == 'embeddings'"
_SWEEP_TYPE = _cel_value("self.sweep.type", "concurrency")
_LOAD_MODE = _cel_value("self.load.mode", "concurrency")
_FIXED = "has(self.load) && has(self.load.fixedSchedule) && self.load.fixedSchedule"
_SESSIONS = "has(self.load) && has(self.load.sessions)"
_REPLICAS = "((has(self.runner) && has(self.runner.replicas)) ? self.runner.replicas : 1)"


def _replicas_share_ok(s: Spec) -> bool:
    """Every runner pod gets a slot and a request (Python's form of ``spec.replicas-share``)."""
    r = s.runner.replicas
    ld = s.load
    if r <= 1:
        return True
    if ld.request_count is not None and ld.request_count < r:
        return False
    if ld.max_concurrency is not None and ld.max_concurrency < r:
        return False
    if ld.mode == "request_rate":
        return True
    sw = s.sweep
    if sw is not None and sw.type == "concurrency":
        if sw.values is not None and any(v < r for v in sw.values):
            return False
        parts = _range_parts(sw)
        return parts is None or parts[0] >= r
    return ld.concurrency >= r


class Spec(ApiModel):
    """The spec of an LLMBenchmark: one benchmark run is one sweep (or one point)."""

    RULES = (
        Rule(
            name="spec.concurrency-sweep-needs-closed-loop",
            message="sweep.type concurrency needs load.mode concurrency; sweep request_rate "
            "for an open-loop load",
            cel=f"!has(self.sweep) || {_SWEEP_TYPE} != 'concurrency' || "
            f"{_LOAD_MODE} != 'request_rate'",
            check=lambda s: (
                s.sweep is None or s.sweep.type != "concurrency" or s.load.mode != "request_rate"
            ),
            field_path=".sweep.type",
        ),
        Rule(
            name="spec.embeddings-no-output-length-sweep",
            message="embeddings have no output length to sweep; sweep.type "
            "output_sequence_length needs target.endpointType chat or completions",
            cel=f"!has(self.sweep) || {_SWEEP_TYPE} != 'output_sequence_length' || "
            f"!({_EMBEDDINGS})",
            check=lambda s: (
                s.sweep is None
                or s.sweep.type != "output_sequence_length"
                or s.target.endpoint_type != "embeddings"
            ),
            field_path=".sweep.type",
        ),
        Rule(
            name="spec.embeddings-no-latency-slo",
            message="latency SLOs (ttftP99Ms, itlP99Ms, e2eP99Ms, ttstP99Ms, "
            "minOutputTokenThroughputPerUser) need a generating endpoint: "
            "target.endpointType chat or completions",
            cel=f"!({_EMBEDDINGS}) || !has(self.slo) || !(has(self.slo.ttftP99Ms) || "
            "has(self.slo.itlP99Ms) || has(self.slo.e2eP99Ms) || has(self.slo.ttstP99Ms) || "
            "has(self.slo.minOutputTokenThroughputPerUser))",
            check=lambda s: s.target.endpoint_type != "embeddings" or not s.slo.per_request(),
            field_path=".slo",
        ),
        Rule(
            name="spec.fixed-schedule-needs-a-trace",
            message="load.fixedSchedule replays workload.inputFile (rows with a timestamp in "
            "ms) as one point: set workload.inputFile and remove sweep",
            cel=f"!({_FIXED}) || (has(self.workload) && has(self.workload.inputFile) && "
            "!has(self.sweep))",
            check=lambda s: not s.load.fixed_schedule or (
                s.workload.input_file is not None and s.sweep is None
            ),
            field_path=".load.fixedSchedule",
        ),
        Rule(
            name="spec.sessions-synthetic-chat",
            message="load.sessions sends synthetic chat turns as one point: needs "
            "target.endpointType chat; remove workload.inputFile and sweep",
            cel=f"!({_SESSIONS}) || ({_cel_value('self.target.endpointType', 'chat')} == 'chat' && "
            "!(has(self.workload) && has(self.workload.inputFile)) && !has(self.sweep))",
            check=lambda s: s.load.sessions is None or (
                s.target.endpoint_type == "chat" and s.workload.input_file is None
                and s.sweep is None
            ),
            field_path=".load.sessions",
        ),
        Rule(
            name="spec.replicas-split",
            message="runner.replicas > 1 splits a point's requests between the runner pods by "
            "number; that cannot be done exactly for load.sessions (a session's turns need "
            "one client), load.fixedSchedule, load.measurementIntervalMs (stable windows are "
            "watched in one process) or load.measurementDurationSeconds (use "
            "load.requestCount): remove them or set runner.replicas 1",
            cel=f"{_REPLICAS} <= 1 || !has(self.load) || (!has(self.load.sessions) && "
            "!(has(self.load.fixedSchedule) && self.load.fixedSchedule) && "
            "!has(self.load.measurementIntervalMs) && "
            "!has(self.load.measurementDurationSeconds))",
            check=lambda s: s.runner.replicas <= 1 or (
                s.load.sessions is None and not s.load.fixed_schedule
                and s.load.measurement_interval_ms is None
                and s.load.measurement_duration_seconds is None
            ),
            field_path=".runner.replicas",
        ),
        Rule(
            name="spec.replicas-share",
            message="runner.replicas > 1 gives each runner pod a share of the point: "
            "load.concurrency (every swept concurrency), load.requestCount and "
            "load.maxConcurrency must be at least runner.replicas, so no pod is left without "
            "a slot or a request",
            cel=f"{_REPLICAS} <= 1 || ("
            f"(!has(self.load) || !has(self.load.requestCount) || "
            f"self.load.requestCount >= {_REPLICAS}) && "
            f"(!has(self.load) || !has(self.load.maxConcurrency) || "
            f"self.load.maxConcurrency >= {_REPLICAS}) && "
            f"({_LOAD_MODE} == 'request_rate' || ("
            f"(has(self.sweep) && {_SWEEP_TYPE} == 'concurrency') ? "
            f"((!has(self.sweep.values) || self.sweep.values.all(v, v >= double({_REPLICAS}))) "
            f"&& (!has(self.sweep.range) || !self.sweep.range.matches({cel_string(RANGE_PATTERN)})"
            f" || double(self.sweep.range.split(':')[0].trim()) >= double({_REPLICAS}))) : "
            f"((has(self.load) && has(self.load.concurrency)) ? self.load.concurrency : 1) >= "
            f"{_REPLICAS})))",
            check=lambda s: _replicas_share_ok(s),
            field_path=".runner.replicas",
        ),
    )

    target: Target = Field(description="The endpoint measured.")
    workload: Workload = Field(default_factory=Workload, description="What each request sends.")
    load: Load = Field(default_factory=Load, description="How requests are issued.")
    sweep: Sweep | None = Field(default=None, description="Several points; absent = one point.")
    repetitions: Int = Field(
        default=1, ge=1, le=100, description="Runs per point (mean and spread reported)."
    )
    slo: Slo = Field(default_factory=Slo, description="Objectives: max load under SLO, goodput.")
    telemetry: Telemetry = Field(default_factory=Telemetry, description="GPU and server metrics.")
    placement: Placement = Field(
        default="SameNode", description="Where the runner Job runs relative to the pods."
    )
    schedule: Schedule | None = Field(
        default=None,
        description='Cron schedule for recurring runs, e.g. "0 2 * * *" or @daily.',
    )
    time_zone: TimeZone | None = Field(
        default=None, description="Time zone of the schedule (IANA name); default UTC."
    )
    suspend: Bool = Field(default=False, description="Pause the schedule (no new ticks run).")
    concurrency_policy: ConcurrencyPolicy = Field(
        default="Forbid",
        description="A tick while a run is in progress: Forbid skips it, Replace stops the "
        "run and starts a new one.",
    )
    starting_deadline_seconds: PositiveInt | None = Field(
        default=None,
        description="A tick missed (operator down) runs late only within this many seconds; "
        "at most one catch-up run either way.",
    )
    cost: Cost = Field(
        default_factory=Cost, description="Price per hour, for cost per output token."
    )
    runner: Runner = Field(
        default_factory=Runner, description="The runner Job: image, resources, deadline, retries."
    )
    history_limit: Int = Field(
        default=30, ge=1, le=1000,
        description="Finished runs kept (status.history and their results ConfigMaps); older "
        "ones are deleted.",
    )
    baseline: Baseline = Field(
        default_factory=Baseline,
        description="What each run is compared with for the Regressed condition, and the "
        "tolerances.",
    )
    artifacts: Artifacts = Field(
        default_factory=Artifacts,
        description="Full artefacts of each run on a volume (the results ConfigMap always "
        "holds the figures).",
    )

    # The manifest's namespace is not part of the spec; kept beside it for Service DNS names.
    _namespace: str | None = PrivateAttr(default=None)

    @property
    def namespace(self) -> str | None:
        """The namespace of the manifest this spec came from (None for a bare spec)."""
        return self._namespace

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_manifest(cls, doc: Any, namespace: str | None = None) -> Spec:
        """Parses a full ``LLMBenchmark`` manifest, or just its ``spec`` mapping.

        Keys are read by their manifest (camelCase) names only, as the API server reads them.

        Args:
            doc: The parsed YAML/JSON document.
            namespace: The benchmark's namespace; default: ``metadata.namespace``.

        Returns:
            The validated spec, with the namespace kept beside it.

        Raises:
            SpecError: Listing every problem with its field path.
        """
        if not isinstance(doc, Mapping):
            raise SpecError([SpecIssue("spec", "expected a mapping (YAML object)")])
        body: Any = doc
        if "kind" in doc or "apiVersion" in doc:
            issues: list[SpecIssue] = []
            if doc.get("kind") != KIND:
                issues.append(SpecIssue("kind", f"{doc.get('kind')!r}: expected {KIND}"))
            if doc.get("apiVersion") != API_VERSION:
                issues.append(
                    SpecIssue("apiVersion", f"{doc.get('apiVersion')!r}: expected {API_VERSION}")
                )
            if "spec" not in doc:
                issues.append(SpecIssue("spec", "missing"))
            if issues:
                raise SpecError(issues)
            body = doc["spec"]
            meta = doc.get("metadata")
            if namespace is None and isinstance(meta, Mapping):
                ns = meta.get("namespace")
                namespace = ns if isinstance(ns, str) else None
        spec = cls._from_mapping(body)
        spec._namespace = namespace
        return spec

    @classmethod
    def _from_mapping(cls, body: Any) -> Spec:
        """Validates a ``spec`` mapping by alias, in the API server's two steps.

        First the schema (keys, types, bounds, enums); only a spec that passes it has its rules
        checked, and then every rule of every object is, wherever another one failed. That is
        what the API server does (it skips CEL on an object that fails its schema), so both
        report the same problems.
        """
        if not isinstance(body, Mapping):
            raise SpecError([SpecIssue("spec", f"expected a mapping, got {type(body).__name__}")])
        try:
            spec = cls.model_validate(
                dict(body), by_alias=True, by_name=False, context=RULES_DEFERRED
            )
        except ValidationError as err:
            raise SpecError(issues_from_validation_error(err, cls, "spec")) from None
        issues = rule_issues(spec, "spec")
        if issues:
            raise SpecError(issues)
        return spec

    def to_dict(self) -> dict[str, Any]:
        """The manifest ``spec`` mapping (camelCase keys, unset optional fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def points(self) -> list[float | None]:
        """The sweep's values, or ``[None]`` for a single point."""
        return list(self.sweep.points()) if self.sweep is not None else [None]

    def validate(self) -> None:  # type: ignore[override]  # BaseModel.validate is pydantic v1's
        """Re-checks a spec changed in code (fields assigned after construction).

        Raises:
            SpecError: As :meth:`from_manifest` does, with manifest paths.
        """
        body = self.model_dump(by_alias=True, exclude_none=True, warnings=False)
        type(self)._from_mapping(body)


def spec_rules() -> list[tuple[str, Rule]]:
    """Every rule of the spec, with the manifest path of the object or field it sits on.

    Why: docs, the CRD test and the e2e test enumerate the rules from the model itself, so a
    new rule cannot be added without being covered. Paths are like ``spec.target.url``.
    """
    out: list[tuple[str, Rule]] = []

    def walk(model: type[ApiModel], path: str) -> None:
        out.extend((path, r) for r in model.RULES)
        for name, info in model.model_fields.items():
            sub = f"{path}.{info.alias or name}"
            out.extend((sub, r) for r in field_rules(info))
            child = model_type(info.annotation)
            if child is not None:
                walk(child, sub)

    walk(Spec, "spec")
    return out
