"""The runner Job of each run: its image, resources, replicas, telemetry sources, artefacts."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, ClassVar

from pydantic import Field, Strict

from ..rules import ApiModel, FieldRules, Rule, cel_string, re2_matches
from .flag import CliFlag
from .target import LABEL_KEY_PATTERN, LabelValue
from .types import URL_PATTERN, Float, Int, PositiveInt, Str, cel_value

__all__ = [
    "QUANTITY_PATTERN",
    "Artifacts",
    "PvcArtifacts",
    "Runner",
    "RESERVED_LABELS",
    "RESERVED_PREFIX",
    "SIDECARS_OFF",
    "RunnerLimits",
    "RunnerPod",
    "RunnerRequests",
    "Telemetry",
    "quantity_value",
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


class Telemetry(ApiModel):
    """Where GPU and server metrics come from during each point."""

    dcgm: Annotated[str, Strict(), Field(max_length=2048), _telemetry_source("dcgm")] = Field(
        default="auto", description="'auto' (find the node's exporter), 'off', or a URL."
    )
    server_metrics: Annotated[
        str, Strict(), Field(max_length=2048), _telemetry_source("serverMetrics")
    ] = Field(default="auto", description="'auto' (target /metrics), 'off', or a URL.")
    timeseries_interval_seconds: Annotated[
        Float,
        CliFlag(
            "--timeseries-interval",
            metavar="S",
            help="seconds per slice of each point's time series (<stem>_timeseries.csv/.json: "
            "requests, TTFT/ITL p50/p99 and tokens/s next to the scraped server and GPU "
            "gauges); default 1",
        ),
    ] = Field(
        default=1.0,
        gt=0,
        le=3600,
        description="Seconds per slice of each point's time series: the client's requests, "
        "TTFT/ITL percentiles and output tokens/s per slice, next to the server's and the "
        "GPUs' scraped gauges over the same seconds.",
    )


#: A Kubernetes resource quantity as the runner block takes it (``500m``, ``2``, ``1Gi``).
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$"
_SUFFIX = {
    "": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6),
    "G": Fraction(10**9), "T": Fraction(10**12), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
    "Gi": Fraction(2**30), "Ti": Fraction(2**40),
}


def quantity_value(quantity: str) -> Fraction:
    """The exact value of a quantity matching :data:`QUANTITY_PATTERN` (what CEL's
    ``quantity()`` compares)."""
    number, suffix = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", quantity).groups()  # type: ignore[union-attr]
    return Fraction(number) * _SUFFIX[suffix]


Quantity = Annotated[
    str,
    Strict(),
    Field(max_length=32, pattern=QUANTITY_PATTERN),
    FieldRules(
        (
            Rule(
                name="runner.quantity-not-zero",
                message="a runner request or limit must be more than 0 (a pod limited to 0 "
                "cannot run), e.g. 100m or 128Mi",
                cel="quantity(self).isGreaterThan(quantity('0'))",
                check=lambda q: quantity_value(q) > 0,
            ),
        )
    ),
]


def _request_within_limit(resource: str) -> Rule:
    """``runner.requests.<resource>`` at most ``runner.limits.<resource>``, defaults included
    (the API server refuses such a pod; caught here, the run is never started)."""
    request = RunnerRequests.model_fields[resource].default
    limit = RunnerLimits.model_fields[resource].default
    return Rule(
        name=f"runner.{resource}-request-within-limit",
        message=f"runner.requests.{resource} is more than runner.limits.{resource} (defaults "
        f"{request} and {limit}): raise the limit or lower the request",
        cel=f"quantity({cel_value(f'self.requests.{resource}', request)}).compareTo("
        f"quantity({cel_value(f'self.limits.{resource}', limit)})) <= 0",
        check=lambda r: quantity_value(getattr(r.requests, resource))
        <= quantity_value(getattr(r.limits, resource)),
        field_path=f".requests.{resource}",
    )


class RunnerRequests(ApiModel):
    """CPU and memory the runner pod asks the scheduler for (no GPU, ever)."""

    cpu: Quantity = Field(default="500m", description="CPU request, e.g. 500m.")
    memory: Quantity = Field(default="512Mi", description="Memory request, e.g. 512Mi.")


class RunnerLimits(ApiModel):
    """CPU and memory the runner pod may use; the runner sizes its response buffer to this."""

    cpu: Quantity = Field(default="2", description="CPU limit, e.g. 2.")
    memory: Quantity = Field(default="2Gi", description="Memory limit, e.g. 2Gi.")


#: Label and annotation keys under this prefix are the operator's (run, benchmark, shards).
RESERVED_PREFIX = "llmbench.io/"
#: The operator's own labels on every child: it watches runner pods by them.
RESERVED_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/name")
#: The runner pod's default annotations (the operator's and the chart's): no service-mesh
#: sidecar joins it, since a proxy would sit in the path of every measured request and a
#: sidecar that never exits keeps the Job from completing. A benchmark may set them back.
SIDECARS_OFF = {"sidecar.istio.io/inject": "false", "linkerd.io/inject": "disabled"}
#: A DNS subdomain (Secret and PriorityClass names).
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _reserved(what: str, keys: tuple[str, ...]) -> Rule:
    """No ``llmbench.io/`` key (nor one of ``keys``) in a map of labels or annotations: they
    are how the operator finds and tells apart a run's pods."""
    listed = "".join(f" || k == {cel_string(k)}" for k in keys)
    names = "".join(f", {k}" for k in keys)
    return Rule(
        name=f"runner.{what}-reserved",
        message=f"runner.{what}: keys starting with {RESERVED_PREFIX}{names} are the "
        "operator's own (it finds a run's pods by them): use another key",
        cel=f"!has(self.{what}) || !self.{what}.exists(k, "
        f"k.startsWith({cel_string(RESERVED_PREFIX)}){listed})",
        check=lambda r: not any(
            k.startswith(RESERVED_PREFIX) or k in keys for k in getattr(r, _py(what)) or {}
        ),
        field_path=f".{what}",
    )


def _py(alias: str) -> str:
    return {"podLabels": "pod_labels", "podAnnotations": "pod_annotations",
            "nodeSelector": "node_selector"}[alias]


def _keys_are_label_keys(what: str) -> Rule:
    """Every key of a map is a label (or annotation) key; Python only, as for podSelector."""
    return Rule(
        name=f"runner.{what}-keys",
        message=f"runner.{what}: a key is an optional DNS-subdomain prefix and '/', then up "
        "to 63 letters, digits, '-', '_' or '.' (e.g. example.com/team)",
        cel=None,
        check=lambda r: all(re2_matches(LABEL_KEY_PATTERN, k) and len(k) <= 317
                            for k in getattr(r, _py(what)) or {}),
        field_path=f".{what}",
        python_only="a structural schema bounds no map key's length, so CEL's cost "
        "estimate of a pattern over the keys exceeds the API server's budget",
    )


SecretName = Annotated[str, Strict(), Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)]


class RunnerPod(ApiModel):
    """How the runner pod fits the namespace: pull secrets, labels, annotations, priority and
    nodes. The operator's chart gives defaults for each (``runner.*`` values); a benchmark's
    values are merged over them (:func:`llmbench.operator.build.pod_settings`)."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        _reserved("podLabels", RESERVED_LABELS),
        _reserved("podAnnotations", ()),
        _keys_are_label_keys("podLabels"),
        _keys_are_label_keys("podAnnotations"),
        _keys_are_label_keys("nodeSelector"),
    )

    image_pull_secrets: list[SecretName] | None = Field(
        default=None, max_length=16,
        description="Names of docker-registry Secrets in the benchmark's namespace that the "
        "kubelet pulls the runner image with (added to the chart's). The operator never reads "
        "them: a name only.",
    )
    pod_labels: dict[Str, LabelValue] | None = Field(
        default=None, max_length=32,
        description="Labels on the runner pod, merged over the chart's (keys under llmbench.io/ "
        "and app.kubernetes.io/managed-by and name are the operator's and refused).",
    )
    pod_annotations: dict[Str, Annotated[str, Strict(), Field(max_length=4096)]] | None = Field(
        default=None, max_length=32,
        description="Annotations on the runner pod, merged over the chart's defaults, which "
        "turn service-mesh sidecar injection off (sidecar.istio.io/inject: \"false\", "
        "linkerd.io/inject: disabled); set them here to turn it back on.",
    )
    priority_class_name: Annotated[
        str, Strict(), Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)
    ] | None = Field(
        default=None,
        description="The runner pod's PriorityClass (default: the chart's, else none).",
    )
    node_selector: dict[Str, LabelValue] | None = Field(
        default=None, max_length=32,
        description="Node labels the runner pod must land on, merged over the chart's. It "
        "narrows the placement (spec.placement's pod affinity still applies): a selector the "
        "target's node lacks leaves the runner unschedulable, which the run reports.",
    )


class Runner(RunnerPod):
    """The runner Job the operator creates for each run."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        *RunnerPod.RULES, _request_within_limit("cpu"), _request_within_limit("memory")
    )

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
