"""The one model of an ``LLMBenchmark`` spec: parsed, validated, schema'd and run from here.

Why one model: the same YAML file must run on a laptop (``llmbench analyze -f``), be handed to
the runner Job by the operator, and be checked by the API server through the CRD's OpenAPI
schema. If those were three hand-written descriptions they would drift; here every field is
declared once (name, type, default, bounds, doc) and the parser, the validator,
:func:`json_schema` and :meth:`Spec.to_profile_config` all read that declaration.

Field names are the resource's camelCase keys; enum values of ``sweep.type`` and ``load.mode``
are the CLI's (``request_rate``, ``input_sequence_length``) so a flag and a field read alike.

Example::

    spec = Spec.from_manifest(yaml.safe_load(open("examples/llmbenchmark-sim.yaml")))
    cfg = spec.to_profile_config(8)        # the concurrency-8 point of the sweep

Validation never stops at the first problem: :class:`SpecError` lists every issue with the
field path (``spec.load.concurrency``) and what would be accepted.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
import types
import typing
from dataclasses import MISSING, dataclass, field
from typing import Any, TypeVar, Union, get_args, get_origin

__all__ = [
    "API_VERSION",
    "KIND",
    "Cost",
    "Load",
    "OutputTokens",
    "SecretKeyRef",
    "ServiceRef",
    "Slo",
    "Spec",
    "SpecError",
    "SpecIssue",
    "Sweep",
    "Target",
    "Telemetry",
    "TokenDistribution",
    "Workload",
    "crd_schema",
    "json_schema",
]

API_VERSION = "llmbench.io/v1alpha1"
KIND = "LLMBenchmark"

SWEEP_TYPES = ("concurrency", "request_rate", "input_sequence_length", "output_sequence_length")
LOAD_MODES = ("concurrency", "request_rate")
ENDPOINT_TYPES = ("chat", "completions", "embeddings")
PLACEMENTS = ("SameNode", "SameZone", "Any")
ON_POINT_FAILURE = ("continue", "stop")


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec: where it is and how to fix it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SpecError(ValueError):
    """Every issue found in a spec, one per line, each naming the field path."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


def _f(
    key: str,
    default: Any = MISSING,
    *,
    doc: str,
    factory: Any = MISSING,
    enum: tuple[str, ...] | None = None,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    required: bool = False,
) -> Any:
    """Declares a spec field once: its manifest key, default, bounds and description."""
    meta = {
        "key": key,
        "doc": doc,
        "enum": enum,
        "minimum": minimum,
        "exclusive_minimum": exclusive_minimum,
        "maximum": maximum,
        "required": required,
    }
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------


@dataclass
class ServiceRef:
    """A Kubernetes Service in front of the inference pods."""

    name: str = _f("name", "", doc="Service name.", required=True)
    port: int = _f("port", 8000, doc="Service port.", minimum=1, maximum=65535)
    namespace: str | None = _f(
        "namespace", None, doc="Namespace of the Service (default: the benchmark's)."
    )

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if not self.name:
            issues.append(SpecIssue(f"{path}.name", "required: the Service's name"))


@dataclass
class SecretKeyRef:
    """A key of a Secret holding the API key (sent as ``Authorization: Bearer``)."""

    name: str = _f("name", "", doc="Secret name.", required=True)
    key: str = _f("key", "", doc="Key inside the Secret.", required=True)

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        for k in ("name", "key"):
            if not getattr(self, k):
                issues.append(SpecIssue(f"{path}.{k}", "required"))


@dataclass
class Target:
    """What is measured: one OpenAI-compatible endpoint."""

    __cel__ = (
        {
            "rule": "has(self.url) != has(self.service)",
            "message": "set exactly one of target.url and target.service",
        },
    )

    url: str | None = _f("url", None, doc="Base URL, e.g. http://vllm:8000 (or use service).")
    service: ServiceRef | None = _f("service", None, doc="Service in front of the pods.")
    model: str | None = _f(
        "model", None, doc="Model name as served (default: the first in /v1/models)."
    )
    endpoint_type: str = _f(
        "endpointType", "chat", doc="OpenAI API flavour.", enum=ENDPOINT_TYPES
    )
    endpoint: str | None = _f("endpoint", None, doc="Custom path, e.g. /v1/chat/completions.")
    streaming: bool = _f("streaming", True, doc="Stream responses (SSE); needed for TTFT/ITL.")
    pod_selector: dict[str, Any] | None = _f(
        "podSelector", None, doc="Label selector of the inference pods (placement, telemetry)."
    )
    api_key_secret_ref: SecretKeyRef | None = _f(
        "apiKeySecretRef", None, doc="Secret key holding the API key."
    )
    request_timeout_seconds: float = _f(
        "requestTimeoutSeconds", 600.0, doc="Per-request timeout.", exclusive_minimum=0
    )

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if (self.url is None) == (self.service is None):
            issues.append(
                SpecIssue(path, "set exactly one of url (http://host:port) and service")
            )
        if self.url is not None and not re.match(r"^https?://[^/\s]+", self.url):
            issues.append(SpecIssue(f"{path}.url", f"{self.url!r} is not an http(s):// URL"))
        if self.endpoint is not None and not self.endpoint.startswith("/"):
            issues.append(SpecIssue(f"{path}.endpoint", "must be a path starting with /"))

    def base_url(self, namespace: str | None = None) -> str:
        """The URL to send to: ``url``, or the Service's in-cluster DNS name."""
        if self.url is not None:
            return self.url
        assert self.service is not None
        ns = self.service.namespace or namespace
        host = f"{self.service.name}.{ns}.svc" if ns else self.service.name
        return f"http://{host}:{self.service.port}"


@dataclass
class TokenDistribution:
    """Synthetic prompt length in tokens (normal distribution)."""

    mean: int = _f("mean", 550, doc="Mean input tokens.", minimum=1)
    stddev: float = _f("stddev", 0.0, doc="Standard deviation (0 = fixed).", minimum=0)


@dataclass
class OutputTokens:
    """Requested output length; ``mean`` unset lets the server decide (GenAI-Perf's -1)."""

    mean: int | None = _f("mean", None, doc="Mean output tokens (max_tokens).", minimum=1)
    stddev: float = _f("stddev", 0.0, doc="Standard deviation.", minimum=0)
    deterministic: bool = _f(
        "deterministic", False, doc="Also send min_tokens = the target (exact OSL)."
    )

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if self.deterministic and self.mean is None:
            issues.append(SpecIssue(f"{path}.deterministic", "needs outputTokens.mean"))


@dataclass
class Workload:
    """What each request sends."""

    input_tokens: TokenDistribution = _f(
        "inputTokens", factory=TokenDistribution, doc="Synthetic prompt length."
    )
    output_tokens: OutputTokens = _f(
        "outputTokens", factory=OutputTokens, doc="Requested output length."
    )
    extra_inputs: dict[str, Any] = _f(
        "extraInputs", factory=dict, doc="Merged into every request body, e.g. ignore_eos."
    )
    tokenizer: str | None = _f(
        "tokenizer", None, doc="'default', a local path, a cached hub id, or 'server'."
    )
    seed: int = _f("seed", 0, doc="Random seed for prompts and schedules.", minimum=0)
    num_prompts: int = _f("numPrompts", 100, doc="Distinct synthetic prompts.", minimum=1)
    input_file: str | None = _f("inputFile", None, doc="JSONL prompts instead of synthetic.")


@dataclass
class Load:
    """How requests are issued at one point (a sweep overrides the swept quantity)."""

    mode: str = _f("mode", "concurrency", doc="Closed or open loop.", enum=LOAD_MODES)
    concurrency: int = _f("concurrency", 1, doc="Requests in flight (closed loop).", minimum=1)
    request_rate: float | None = _f(
        "requestRate", None, doc="Requests per second (open loop).", exclusive_minimum=0
    )
    request_rate_mode: str = _f(
        "requestRateMode", "constant", doc="Arrival process.", enum=("constant", "poisson")
    )
    max_concurrency: int | None = _f(
        "maxConcurrency", None, doc="Cap on in-flight requests (open loop).", minimum=1
    )
    request_count: int | None = _f(
        "requestCount", None, doc="Measured requests (default max(100, 4 x concurrency)).",
        minimum=1,
    )
    measurement_duration_seconds: float | None = _f(
        "measurementDurationSeconds", None, doc="Bound the measurement by time.",
        exclusive_minimum=0,
    )
    warmup_request_count: int = _f(
        "warmupRequestCount", 0, doc="Requests sent first and excluded.", minimum=0
    )
    workers: int = _f("workers", 1, doc="Client processes.", minimum=1)

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if self.mode == "request_rate" and self.request_rate is None:
            issues.append(
                SpecIssue(f"{path}.requestRate", "required when mode is request_rate")
            )
        if self.max_concurrency is not None and self.mode != "request_rate":
            issues.append(
                SpecIssue(f"{path}.maxConcurrency", "applies to mode request_rate only")
            )


@dataclass
class Sweep:
    """Several load points, run one after another by one runner."""

    __cel__ = (
        {
            "rule": "has(self.range) != has(self.values)",
            "message": "set exactly one of sweep.range and sweep.values",
        },
    )

    type: str = _f("type", "concurrency", doc="The swept quantity.", enum=SWEEP_TYPES)
    range: str | None = _f(
        "range", None,
        doc="start:end[:step]; concurrency without step = powers of two (1:256 -> 1,2,..,256).",
    )
    values: list[float] | None = _f("values", None, doc="Explicit values instead of range.")
    stop_after_knee: bool = _f(
        "stopAfterKnee", False, doc="End the sweep one point past the knee."
    )
    on_point_failure: str = _f(
        "onPointFailure", "continue", doc="A failed point: go on or stop.", enum=ON_POINT_FAILURE
    )

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if (self.range is None) == (self.values is None):
            issues.append(SpecIssue(path, "set exactly one of range (start:end[:step]) and values"))
            return
        try:
            self.points()
        except ValueError as exc:
            key = "range" if self.range is not None else "values"
            issues.append(SpecIssue(f"{path}.{key}", str(exc)))

    def points(self) -> list[float]:
        """The swept values, in order (see :mod:`llmbench.runner.sweep.run` for the rules)."""
        from llmbench.runner.sweep.run import sweep_values

        return sweep_values(self.type, self.range, self.values, flag="")


@dataclass
class Slo:
    """Service-level objectives a point must meet; p99s in milliseconds."""

    ttft_p99_ms: float | None = _f("ttftP99Ms", None, doc="p99 TTFT limit.", exclusive_minimum=0)
    itl_p99_ms: float | None = _f("itlP99Ms", None, doc="p99 ITL limit.", exclusive_minimum=0)
    e2e_p99_ms: float | None = _f(
        "e2eP99Ms", None, doc="p99 request latency limit.", exclusive_minimum=0
    )
    goodput_ratio: float | None = _f(
        "goodputRatio", None,
        doc="Minimum fraction of requests meeting every latency limit (0-1].",
        exclusive_minimum=0, maximum=1,
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
        pairs = {"ttft": self.ttft_p99_ms, "itl": self.itl_p99_ms, "e2e": self.e2e_p99_ms}
        return {k: v for k, v in pairs.items() if v is not None}

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if self.goodput_ratio is not None and not self.per_request():
            issues.append(
                SpecIssue(f"{path}.goodputRatio", "needs at least one latency limit to count")
            )


@dataclass
class Telemetry:
    """Where GPU and server metrics come from during each point."""

    dcgm: str = _f("dcgm", "auto", doc="'auto' (find the node's exporter), 'off', or a URL.")
    server_metrics: str = _f(
        "serverMetrics", "auto", doc="'auto' (target /metrics), 'off', or a URL."
    )

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        for attr, key in (("dcgm", "dcgm"), ("server_metrics", "serverMetrics")):
            v = getattr(self, attr)
            if v not in ("auto", "off") and not re.match(r"^https?://", v):
                issues.append(
                    SpecIssue(f"{path}.{key}", f"{v!r}: expected auto, off or an http(s) URL")
                )


@dataclass
class Cost:
    """Price of the deployment, for cost per million output tokens."""

    price_per_hour: float | None = _f(
        "pricePerHour", None, doc="Price of the serving hardware per hour.", exclusive_minimum=0
    )
    currency: str = _f("currency", "EUR", doc="Currency label of the price.")


_CRON = re.compile(r"^(@(yearly|annually|monthly|weekly|daily|hourly)|(\S+\s+){4}\S+)$")


@dataclass
class Spec:
    """The ``spec`` of an ``LLMBenchmark``; one benchmark run = one sweep (or one point)."""

    target: Target = _f("target", factory=Target, doc="The endpoint measured.", required=True)
    workload: Workload = _f("workload", factory=Workload, doc="What each request sends.")
    load: Load = _f("load", factory=Load, doc="How requests are issued.")
    sweep: Sweep | None = _f("sweep", None, doc="Several points; absent = one point.")
    repetitions: int = _f(
        "repetitions", 1, doc="Runs per point (mean and spread reported).", minimum=1, maximum=100
    )
    slo: Slo = _f("slo", factory=Slo, doc="Objectives: max load under SLO, goodput.")
    telemetry: Telemetry = _f("telemetry", factory=Telemetry, doc="GPU and server metrics.")
    placement: str = _f(
        "placement", "SameNode", doc="Where the runner Job runs relative to the pods.",
        enum=PLACEMENTS,
    )
    schedule: str | None = _f("schedule", None, doc="Cron schedule for recurring runs.")
    cost: Cost = _f("cost", factory=Cost, doc="Price per hour, for cost per output token.")

    def _check(self, path: str, issues: list[SpecIssue]) -> None:
        if self.schedule is not None and not _CRON.match(self.schedule.strip()):
            issues.append(
                SpecIssue(f"{path}.schedule", f"{self.schedule!r}: expected 5 cron fields")
            )
        sw = self.sweep
        if sw is not None:
            if sw.type == "concurrency" and self.load.mode == "request_rate":
                issues.append(
                    SpecIssue(f"{path}.sweep.type", "concurrency sweeps need load.mode concurrency")
                )
            if self.target.endpoint_type == "embeddings" and sw.type == "output_sequence_length":
                issues.append(
                    SpecIssue(f"{path}.sweep.type", "embeddings have no output length to sweep")
                )
        if self.target.endpoint_type == "embeddings" and self.slo.per_request():
            issues.append(SpecIssue(f"{path}.slo", "latency SLOs need a generating endpoint"))

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_manifest(cls, doc: Any, namespace: str | None = None) -> Spec:
        """A full ``LLMBenchmark`` manifest, or just its ``spec`` mapping.

        Raises :class:`SpecError` listing every problem with its field path.
        """
        if not isinstance(doc, dict):
            raise SpecError([SpecIssue("spec", "expected a mapping (YAML object)")])
        path = "spec"
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
            meta = doc.get("metadata") or {}
            namespace = namespace or (meta.get("namespace") if isinstance(meta, dict) else None)
        issues = []
        spec = _parse(cls, body, path, issues)
        if not issues:
            _validate(spec, path, issues)
        if issues:
            raise SpecError(issues)
        assert isinstance(spec, Spec)
        # The namespace is the manifest's, not part of the spec: kept beside it for service DNS.
        setattr(spec, "_namespace", namespace)  # noqa: B010
        return spec

    def to_dict(self) -> dict[str, Any]:
        """The manifest ``spec`` mapping (camelCase keys, unset optional fields left out)."""
        out = _dump(self)
        assert isinstance(out, dict)
        return out

    def points(self) -> list[float | None]:
        """The sweep's values, or ``[None]`` for a single point."""
        return list(self.sweep.points()) if self.sweep is not None else [None]

    def to_profile_config(
        self,
        value: float | None = None,
        *,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        preflight: bool = True,
    ) -> Any:
        """The :class:`~llmbench.runner.point.profile.ProfileConfig` of one point.

        ``value`` is the swept quantity at this point (``None``: no sweep). The API key and
        extra headers are runtime secrets, never part of the spec.
        """
        from llmbench.runner.load import workload as wl
        from llmbench.runner.load.engine import LoadConfig
        from llmbench.runner.point.profile import ProfileConfig

        load = copy.deepcopy(self.load)
        isl = self.workload.input_tokens.mean
        osl = self.workload.output_tokens.mean
        if self.sweep is not None:
            if value is None:
                raise ValueError("a sweep point needs its value")
            kind = self.sweep.type
            if kind == "concurrency":
                load.mode, load.concurrency = "concurrency", int(value)
            elif kind == "request_rate":
                load.mode, load.request_rate = "request_rate", float(value)
            elif kind == "input_sequence_length":
                isl = int(value)
            else:
                osl = int(value)
        concurrency = load.concurrency
        if load.mode == "request_rate":
            concurrency = load.max_concurrency or 1
        request_count = load.request_count
        if request_count is None and load.measurement_duration_seconds is None:
            request_count = max(100, 4 * (load.max_concurrency or load.concurrency))
        lc = LoadConfig(
            mode=load.mode,
            concurrency=concurrency,
            request_rate=load.request_rate if load.mode == "request_rate" else None,
            rate_mode=load.request_rate_mode,
            max_concurrency=load.max_concurrency,
            request_count=request_count,
            measurement_duration_s=load.measurement_duration_seconds,
            warmup_request_count=load.warmup_request_count,
            seed=self.workload.seed,
            request_timeout_s=self.target.request_timeout_seconds,
            workers=load.workers,
            endpoint_type=self.target.endpoint_type,
        )
        w = self.workload
        wc = wl.WorkloadConfig(
            synthetic_input_tokens_mean=isl,
            synthetic_input_tokens_stddev=w.input_tokens.stddev,
            output_tokens_mean=osl,
            output_tokens_stddev=w.output_tokens.stddev,
            output_tokens_mean_deterministic=w.output_tokens.deterministic,
            extra_inputs=dict(w.extra_inputs),
            input_file=w.input_file,
            random_seed=w.seed,
            num_prompts=w.num_prompts,
        )
        return ProfileConfig(
            url=self.target.base_url(getattr(self, "_namespace", None)),
            model=self.target.model,
            endpoint_type=self.target.endpoint_type,
            endpoint=self.target.endpoint,
            streaming=self.target.streaming and self.target.endpoint_type != "embeddings",
            load=lc,
            workload=wc,
            tokenizer=w.tokenizer,
            goodput=self.slo.per_request(),
            api_key=api_key,
            headers=dict(headers or {}),
            preflight=preflight,
        )

    @classmethod
    def from_profile_config(cls, cfg: Any) -> Spec:
        """The spec of a :class:`ProfileConfig` (the CLI's flags), so both paths share a model.

        ``requestCount`` is copied as given; callers that want the per-point default
        (max(100, 4 x concurrency)) set it to ``None`` afterwards.
        """
        ld, wc = cfg.load, cfg.workload
        slo = Slo(
            ttft_p99_ms=cfg.goodput.get("ttft"),
            itl_p99_ms=cfg.goodput.get("itl"),
            e2e_p99_ms=cfg.goodput.get("e2e"),
        )
        return cls(
            target=Target(
                url=cfg.url,
                model=cfg.model,
                endpoint_type=cfg.endpoint_type,
                endpoint=cfg.endpoint,
                streaming=cfg.streaming,
                request_timeout_seconds=ld.request_timeout_s or 600.0,
            ),
            workload=Workload(
                input_tokens=TokenDistribution(
                    wc.synthetic_input_tokens_mean, wc.synthetic_input_tokens_stddev
                ),
                output_tokens=OutputTokens(
                    wc.output_tokens_mean, wc.output_tokens_stddev,
                    wc.output_tokens_mean_deterministic,
                ),
                extra_inputs=dict(wc.extra_inputs),
                tokenizer=cfg.tokenizer,
                seed=wc.random_seed,
                num_prompts=wc.num_prompts,
                input_file=str(wc.input_file) if wc.input_file is not None else None,
            ),
            load=Load(
                mode=ld.mode,
                concurrency=ld.concurrency,
                request_rate=ld.request_rate,
                request_rate_mode=ld.rate_mode,
                max_concurrency=ld.max_concurrency,
                request_count=ld.request_count,
                measurement_duration_seconds=ld.measurement_duration_s,
                warmup_request_count=ld.warmup_request_count,
                workers=ld.workers,
            ),
            slo=slo,
        )

    def validate(self) -> None:
        """Re-checks a spec built in code (e.g. from CLI flags); raises :class:`SpecError`."""
        issues: list[SpecIssue] = []
        _validate(self, "spec", issues)
        if issues:
            raise SpecError(issues)


# ----------------------------------------------------------------------------------------------
# parsing, validation, dumping and schema: driven by the field declarations above
# ----------------------------------------------------------------------------------------------

T = TypeVar("T")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _type_name(tp: Any) -> str:
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    if tp in names:
        return names[tp]
    origin = get_origin(tp)
    if origin is dict:
        return "a mapping"
    if origin is list:
        return "a list of numbers"
    return str(tp)


def _parse(cls: type[T], data: Any, path: str, issues: list[SpecIssue]) -> T:
    if not isinstance(data, dict):
        issues.append(SpecIssue(path, f"expected a mapping, got {type(data).__name__}"))
        return cls()
    hints = _hints(cls)
    by_key = {f.metadata["key"]: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, raw in data.items():
        f = by_key.get(key)
        if f is None:
            near = difflib.get_close_matches(str(key), list(by_key), n=1)
            hint = f"; did you mean {near[0]}?" if near else f"; known: {', '.join(by_key)}"
            issues.append(SpecIssue(f"{path}.{key}", f"unknown field{hint}"))
            continue
        value = _coerce(hints[f.name], raw, f"{path}.{key}", issues)
        if value is not _BAD:
            _bounds(f.metadata, value, f"{path}.{key}", issues)
            kwargs[f.name] = value
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("required") and f.metadata["key"] not in data:
            issues.append(SpecIssue(f"{path}.{f.metadata['key']}", "required"))
    return cls(**kwargs)


_BAD = object()


def _coerce(tp: Any, raw: Any, path: str, issues: list[SpecIssue]) -> Any:
    inner, optional = _unwrap_optional(tp)
    if raw is None:
        if optional:
            return None
        issues.append(SpecIssue(path, f"must be {_type_name(inner)}, not null"))
        return _BAD
    if dataclasses.is_dataclass(inner):
        return _parse(inner, raw, path, issues)  # type: ignore[arg-type]
    ok: bool
    value = raw
    if inner is bool:
        ok = isinstance(raw, bool)
    elif inner is int:
        ok = isinstance(raw, int) and not isinstance(raw, bool)
        if not ok and isinstance(raw, float) and raw.is_integer():
            ok, value = True, int(raw)
    elif inner is float:
        ok = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        value = float(raw) if ok else raw
    elif inner is str:
        ok = isinstance(raw, str)
        if not ok and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            ok = False  # "1:64" must be quoted in YAML; say so below
    elif get_origin(inner) is dict:
        ok = isinstance(raw, dict)
    elif get_origin(inner) is list:
        ok = isinstance(raw, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw
        )
        value = [float(v) for v in raw] if ok else raw
    else:  # pragma: no cover - a declaration this module does not support
        raise TypeError(f"unsupported spec type {tp!r} at {path}")
    if not ok:
        issues.append(SpecIssue(path, f"must be {_type_name(inner)}, got {raw!r}"))
        return _BAD
    return value


def _bounds(meta: Any, value: Any, path: str, issues: list[SpecIssue]) -> None:
    if value is None or dataclasses.is_dataclass(value):
        return
    enum = meta.get("enum")
    if enum and value not in enum:
        issues.append(SpecIssue(path, f"{value!r}: expected one of {', '.join(enum)}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, xlo, hi = meta.get("minimum"), meta.get("exclusive_minimum"), meta.get("maximum")
        if lo is not None and value < lo:
            issues.append(SpecIssue(path, f"{value!r}: must be at least {lo:g}"))
        if xlo is not None and value <= xlo:
            issues.append(SpecIssue(path, f"{value!r}: must be greater than {xlo:g}"))
        if hi is not None and value > hi:
            issues.append(SpecIssue(path, f"{value!r}: must be at most {hi:g}"))


def _validate(obj: Any, path: str, issues: list[SpecIssue]) -> None:
    """Bounds of every field, then each class's cross-field ``_check``, depth first."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        sub = f"{path}.{f.metadata['key']}"
        if dataclasses.is_dataclass(value):
            _validate(value, sub, issues)
        else:
            _bounds(f.metadata, value, sub, issues)
    check = getattr(obj, "_check", None)
    if check is not None:
        check(path, issues)


def _dump(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if v is None:
                continue
            out[f.metadata["key"]] = _dump(v)
        return out
    if isinstance(obj, dict):
        return {k: _dump(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_dump(v) for v in obj]
    return obj


def _schema_of(tp: Any) -> dict[str, Any]:
    inner, _ = _unwrap_optional(tp)
    if dataclasses.is_dataclass(inner):
        return _object_schema(inner)  # type: ignore[arg-type]
    if inner is bool:
        return {"type": "boolean"}
    if inner is int:
        return {"type": "integer"}
    if inner is float:
        return {"type": "number"}
    if inner is str:
        return {"type": "string"}
    if get_origin(inner) is dict:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if get_origin(inner) is list:
        return {"type": "array", "items": {"type": "number"}}
    raise TypeError(f"unsupported spec type {tp!r}")  # pragma: no cover


def _object_schema(cls: type) -> dict[str, Any]:
    hints = _hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        s = _schema_of(hints[f.name])
        s["description"] = meta["doc"]
        if meta.get("enum"):
            s["enum"] = list(meta["enum"])
        if meta.get("minimum") is not None:
            s["minimum"] = meta["minimum"]
        if meta.get("exclusive_minimum") is not None:
            s["minimum"] = meta["exclusive_minimum"]
            s["exclusiveMinimum"] = True
        if meta.get("maximum") is not None:
            s["maximum"] = meta["maximum"]
        if f.default is not MISSING and f.default is not None and not meta.get("required"):
            s["default"] = f.default
        if meta.get("required"):
            required.append(meta["key"])
        props[meta["key"]] = s
    out: dict[str, Any] = {"type": "object", "properties": props}
    doc = (cls.__doc__ or "").strip().splitlines()
    if doc:
        out["description"] = doc[0]
    if required:
        out["required"] = required
    cel = getattr(cls, "__cel__", None)
    if cel:
        out["x-kubernetes-validations"] = [dict(r) for r in cel]
    return out


def json_schema() -> dict[str, Any]:
    """OpenAPI v3 (structural) schema of ``spec``, generated from the declarations above.

    Cross-field rules that the schema language cannot say are CEL rules
    (``x-kubernetes-validations``); the rest (sweep range syntax) is checked by the runner.
    """
    return _object_schema(Spec)


def crd_schema() -> dict[str, Any]:
    """The CRD version's ``openAPIV3Schema``: our ``spec`` plus an open ``status``."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": json_schema(),
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "required": ["spec"],
    }
