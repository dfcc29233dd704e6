"""The spec itself: the resource's names, the top-level ``Spec``, its cross-object rules.

``Spec`` holds the sub-models of the sibling modules; the rules that read several of them
(a sweep type against the load mode, embeddings against SLOs, runner replicas against the
load) sit here, on the object that sees them all. :func:`spec_rules` walks the whole tree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, PrivateAttr, ValidationError
from pydantic.fields import FieldInfo

from ..rules import (
    RULES_DEFERRED,
    ApiModel,
    Rule,
    SpecError,
    SpecIssue,
    cel_string,
    field_rules,
    issues_from_validation_error,
    model_type,
    rule_issues,
)
from ..sweep_values import LINEAR_POINTS, MAX_RANGE_POINTS
from .flag import CliFlag, field_flags
from .judging import Baseline, Cost, Slo
from .load import Load
from .runner import Artifacts, Runner, Telemetry
from .schedule import ConcurrencyPolicy, Schedule, TimeZone
from .sweep import RANGE_PATTERN, Sweep, range_parts
from .target import Target
from .trigger import Trigger
from .types import Bool, Int, PositiveInt, cel_value
from .workload import Workload

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "MAX_NAME",
    "MAX_STORED_POINTS",
    "NAME_RULE",
    "PLACEMENTS",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "Placement",
    "Spec",
    "spec_flags",
    "spec_rules",
    "stored_points",
]

GROUP = "llmbench.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "LLMBenchmark"
PLURAL = "llmbenchmarks"
SINGULAR = "llmbenchmark"
SHORT_NAMES = ("llmb",)

#: The longest benchmark name: it is the value of the ``llmbench.io/benchmark`` label on every
#: object of its runs, and a label value holds at most 63 characters (the objects' own names
#: are cut and hashed to fit, see :func:`llmbench.api.job.run_name`).
MAX_NAME = 63
#: The rule on the whole object (the CRD's root) that keeps the name within :data:`MAX_NAME`.
NAME_RULE = Rule(
    name="metadata.name-fits-a-label",
    message=f"metadata.name may have at most {MAX_NAME} characters (it labels every object of "
    f"the benchmark's runs, and a label value holds {MAX_NAME}): shorten it",
    cel=f"size(self.metadata.name) <= {MAX_NAME}",
    check=lambda name: len(name) <= MAX_NAME,
)

#: The most stored points (sweep points x workloads x repetitions) one run may have: each finished
#: repetition is one key of the run's results ConfigMap (1 MiB in all, see
#: :mod:`llmbench.api.job`), and the runner gives the points 800 kB of it. Measured with
#: ``benchmarks/result_size.py`` (the runner's own serialiser, a target with 8 GPUs): a
#: point is ~17 kB once its telemetry series are shed, plus ~1.4 kB of digest and CSV per
#: swept value; a sweep of 40 takes 720-745 kB of the 1 MiB, leaving room for longer names
#: and more server metrics. Docs: docs/operations.md, "Results size".
MAX_STORED_POINTS = 40
#: Powers of two a concurrency range without a step may take between its ends (the CEL
#: counts them from this list: it has no logarithm).
_POWERS = tuple(float(2**i) for i in range(63))


def stored_points(s: Spec) -> int:
    """Points x workloads x repetitions as :data:`MAX_STORED_POINTS` counts them, the CEL's
    arithmetic (``sweep.workloads`` absent counts 1).

    A sweep's points as :func:`llmbench.api.sweep_values` gives them, except that a range of
    another type without a step counts as its 8 values before rounding removes repeats, a
    concurrency range without a step counts only powers of two below 2**63, and a range past
    ``sweep.range-at-most-10000-points`` (or with another broken range rule) counts 1: that
    rule reports it.
    """
    sw, points = s.sweep, 1
    if sw is not None and sw.values is not None:
        points = len(sw.values)
    elif sw is not None and (p := range_parts(sw)) is not None:
        start, end = p[0], p[1]
        if len(p) == 3:
            if p[2] > 0 and start <= end:
                n = (end - start) / p[2] + 1e-9
                points = int(n) + 1 if n < MAX_RANGE_POINTS else 1  # that rule's own
        elif start != end:
            points = (2 + sum(1 for k in _POWERS if start < k < end)
                      if sw.type == "concurrency" else LINEAR_POINTS)
    workloads = len(sw.workloads) if sw is not None and sw.workloads is not None else 1
    return points * workloads * s.repetitions


def _cel_stored_points() -> str:
    """:func:`stored_points` in CEL (``self`` is the spec)."""
    r = "self.sweep.range"
    part = [f"double({r}.split(':')[{i}].trim())" for i in range(3)]
    start, end, step = part
    n = f"(({end} - {start}) / {step} + 0.000000001)"
    stepped = (f"({step} <= 0.0 || {start} > {end}) ? 1 : "
               f"({n} < {float(MAX_RANGE_POINTS)!r} ? int({n}) + 1 : 1)")
    powers = "[" + ", ".join(repr(k) for k in _POWERS) + "]"
    unstepped = (f"{start} == {end} ? 1 : ({_SWEEP_TYPE} == 'concurrency' ? "
                 f"2 + {powers}.filter(k, {start} < k && k < {end}).size() : {LINEAR_POINTS})")
    points = (f"(!has(self.sweep) ? 1 : has(self.sweep.values) ? size(self.sweep.values) : "
              f"(!has({r}) || !{r}.matches({cel_string(RANGE_PATTERN)})) ? 1 : "
              f"{r}.split(':').size() == 3 ? ({stepped}) : ({unstepped}))")
    workloads = ("((has(self.sweep) && has(self.sweep.workloads)) ? "
                 "size(self.sweep.workloads) : 1)")
    return f"{points} * {workloads} * (has(self.repetitions) ? self.repetitions : 1)"


Placement = Literal["SameNode", "SameZone", "Any"]

PLACEMENTS: tuple[str, ...] = get_args(Placement)


_EMBEDDINGS = f"{cel_value('self.target.endpointType', 'chat')} == 'embeddings'"
_SWEEP_TYPE = cel_value("self.sweep.type", "concurrency")
_LOAD_MODE = cel_value("self.load.mode", "concurrency")
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
        parts = range_parts(sw)
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
            cel=f"!({_SESSIONS}) || ({cel_value('self.target.endpointType', 'chat')} == 'chat' && "
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
        Rule(
            name="spec.ramp-up-one-runner",
            message="load.rampUpSeconds ramps one runner's load: keep runner.replicas 1",
            cel=f"!has(self.load) || !has(self.load.rampUpSeconds) || {_REPLICAS} == 1",
            check=lambda s: s.load.ramp_up_seconds is None or s.runner.replicas == 1,
            field_path=".load.rampUpSeconds",
        ),
        Rule(
            name="spec.ramp-up-fits-the-deadline",
            message="load.rampUpSeconds must be shorter than runner.timeoutSeconds, the whole "
            "run's deadline: every point ramps before it measures; shorten the ramp or raise "
            "runner.timeoutSeconds",
            cel="!has(self.load) || !has(self.load.rampUpSeconds) || !has(self.runner) || "
            "!has(self.runner.timeoutSeconds) || "
            "self.load.rampUpSeconds < double(self.runner.timeoutSeconds)",
            check=lambda s: s.load.ramp_up_seconds is None or s.runner.timeout_seconds is None
            or s.load.ramp_up_seconds < s.runner.timeout_seconds,
            field_path=".load.rampUpSeconds",
        ),
        Rule(
            name="spec.search-needs-slo",
            message="sweep.search looks for the highest load meeting the SLO: set at least one "
            "of slo.ttftP99Ms, slo.itlP99Ms, slo.e2eP99Ms, slo.goodputRatio (--slo ttft_p99:MS)",
            cel="!has(self.sweep) || !has(self.sweep.search) || (has(self.slo) && "
            "(has(self.slo.ttftP99Ms) || has(self.slo.itlP99Ms) || has(self.slo.e2eP99Ms) || "
            "has(self.slo.goodputRatio)))",
            check=lambda s: s.sweep is None or s.sweep.search is None or bool(s.slo.limits()),
            field_path=".sweep.search",
        ),
        Rule(
            name="spec.stored-points-fit-the-results",
            message=f"sweep points x sweep.workloads x repetitions must be at most "
            f"{MAX_STORED_POINTS}: each finished repetition is stored in the run's results "
            "ConfigMap (1 MiB, about 17 kB a point with 8 GPUs of telemetry): split the sweep "
            "into several benchmarks (sweep.values, sweep.range or sweep.workloads a part "
            "each), or lower repetitions",
            cel=f"{_cel_stored_points()} <= {MAX_STORED_POINTS}",
            check=lambda s: stored_points(s) <= MAX_STORED_POINTS,
            field_path=".repetitions",
        ),
        Rule(
            name="spec.workloads-synthetic-generating",
            message="sweep.workloads sets synthetic input and output lengths: it needs "
            "synthetic prompts (remove workload.inputFile) and a generating endpoint "
            "(target.endpointType chat or completions)",
            cel="!has(self.sweep) || !has(self.sweep.workloads) || (!(has(self.workload) && "
            f"has(self.workload.inputFile)) && !({_EMBEDDINGS}))",
            check=lambda s: s.sweep is None or s.sweep.workloads is None or (
                s.workload.input_file is None and s.target.endpoint_type != "embeddings"
            ),
            field_path=".sweep.workloads",
        ),
        Rule(
            name="spec.trigger-needs-pods",
            message="trigger.onTargetChange watches the target pods: set target.service or "
            "target.podSelector (a bare target.url has no pods to watch)",
            cel="!has(self.trigger) || !has(self.trigger.onTargetChange) || "
            "!self.trigger.onTargetChange || has(self.target.service) || "
            "has(self.target.podSelector)",
            check=lambda s: not s.trigger.on_target_change or s.target.service is not None
            or s.target.pod_selector is not None,
            field_path=".trigger.onTargetChange",
        ),
    )


    target: Target = Field(description="The endpoint measured.")
    workload: Workload = Field(default_factory=Workload, description="What each request sends.")
    load: Load = Field(default_factory=Load, description="How requests are issued.")
    sweep: Sweep | None = Field(default=None, description="Several points; absent = one point.")
    repetitions: Annotated[
        Int,
        CliFlag(
            "--repetitions",
            reads="integer",
            help="runs per point; mean and spread reported, spread > 10% flagged",
        ),
    ] = Field(default=1, ge=1, le=MAX_STORED_POINTS,
              description="Runs per point (mean and spread reported).")
    slo: Annotated[
        Slo,
        CliFlag(
            "--goodput",
            form="words",
            default=(),
            metavar="KEY:VALUE",
            help="SLOs: ttft:MS itl:MS e2e:MS ttst:MS otpu:TOK_S, or GenAI-Perf's names "
            "(time_to_first_token, inter_token_latency, request_latency, time_to_second_token, "
            "output_token_throughput_per_user)",
        ),
        CliFlag(
            "--slo",
            form="words",
            default=(),
            metavar="KEY:VALUE",
            help="ttft_p99:MS itl_p99:MS e2e_p99:MS goodput_ratio:0-1 (also counted as goodput)",
        ),
    ] = Field(default_factory=Slo, description="Objectives: max load under SLO, goodput.")
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
    suspend: Bool = Field(
        default=False, description="Pause the schedule and the triggers (no new ticks run)."
    )
    trigger: Trigger = Field(
        default_factory=Trigger,
        description="Runs started by the target changing (release gating), with the "
        "schedule's Lease and concurrencyPolicy rules.",
    )
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
        meta = doc.get("metadata") if body is not doc else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        try:
            spec = cls._from_mapping(body)
        except SpecError as err:
            raise SpecError(err.issues + _name_issues(name)) from None
        if _name_issues(name):
            raise SpecError(_name_issues(name))
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

    def point_runs(self) -> int:
        """Point runs one benchmark run measures: values x workloads (a two-axis sweep's
        ``sweep.workloads``, else 1) x repetitions (a search's probes are not known ahead:
        its range's grid counts)."""
        sw = self.sweep
        workloads = len(sw.workloads) if sw is not None and sw.workloads is not None else 1
        return len(self.points()) * workloads * self.repetitions

    def validate(self) -> None:  # type: ignore[override]  # BaseModel.validate is pydantic v1's
        """Re-checks a spec changed in code (fields assigned after construction).

        Raises:
            SpecError: As :meth:`from_manifest` does, with manifest paths.
        """
        body = self.model_dump(by_alias=True, exclude_none=True, warnings=False)
        type(self)._from_mapping(body)


def _name_issues(name: Any) -> list[SpecIssue]:
    """:data:`NAME_RULE` broken by a manifest's ``metadata.name`` (none without a name)."""
    if isinstance(name, str) and not NAME_RULE.check(name):
        return [SpecIssue("metadata.name", NAME_RULE.message)]
    return []


def _tree(model: type[ApiModel], path: str) -> Iterator[tuple[str, type[ApiModel] | FieldInfo]]:
    """The model, then each field (and the tree of a model it holds), with manifest paths."""
    yield path, model
    for name, info in model.model_fields.items():
        sub = f"{path}.{info.alias or name}"
        yield sub, info
        child = model_type(info.annotation)
        if child is not None:
            yield from _tree(child, sub)


def spec_rules() -> list[tuple[str, Rule]]:
    """Every rule of the spec, with the manifest path of the object or field it sits on.

    Why: docs, the CRD test and the e2e test enumerate the rules from the model itself, so a
    new rule cannot be added without being covered. Paths are like ``spec.target.url``.
    """
    return [
        (path, r)
        for path, node in _tree(Spec, "spec")
        for r in (node.RULES if isinstance(node, type) else field_rules(node))
    ]


def spec_flags() -> list[tuple[str, FieldInfo, CliFlag]]:
    """Every command-line flag declared on the spec: its field's manifest path and the field.

    Why: the command line generates its flags from these (see :mod:`.flag`), so a field and
    its flag are declared together. Paths are like ``spec.load.requestCount``.
    """
    return [
        (path, node, flag)
        for path, node in _tree(Spec, "spec")
        if isinstance(node, FieldInfo)
        for flag in field_flags(node)
    ]
