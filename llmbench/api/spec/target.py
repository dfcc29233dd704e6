"""What is measured: one OpenAI-compatible endpoint, by URL or by Service, and its API key."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, Strict

from ..rules import ApiModel, FieldRules, Rule, cel_string, re2_matches
from .flag import CliFlag
from .types import URL_PATTERN, Bool, Float, Int, Str

__all__ = [
    "ENDPOINT_TYPES",
    "EndpointType",
    "LabelSelector",
    "LabelSelectorRequirement",
    "SecretKeyRef",
    "ServiceRef",
    "Target",
]

EndpointType = Literal["chat", "completions", "embeddings"]

ENDPOINT_TYPES: tuple[str, ...] = get_args(EndpointType)


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


#: A label key: an optional DNS-subdomain prefix and ``/``, then a name of up to 63 characters.
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
#: A label value (empty, or up to 63 characters starting and ending alphanumeric).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
LabelKey = Annotated[str, Strict(), Field(min_length=1, max_length=317, pattern=LABEL_KEY_PATTERN)]
LabelValue = Annotated[str, Strict(), Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]


class LabelSelectorRequirement(ApiModel):
    """One ``matchExpressions`` entry: ``key`` with ``operator`` over ``values``."""

    key: LabelKey = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn, Exists or DoesNotExist."
    )
    values: list[LabelValue] | None = Field(
        default=None, max_length=64, description="The values (In and NotIn only)."
    )


class LabelSelector(ApiModel):
    """The inference pods, as a Kubernetes label selector (the terms are ANDed)."""

    RULES = (
        Rule(
            name="podSelector.not-empty",
            message="target.podSelector selects every pod of the namespace: give matchLabels "
            "or matchExpressions, or remove podSelector",
            cel="(has(self.matchLabels) && size(self.matchLabels) > 0) || "
            "(has(self.matchExpressions) && size(self.matchExpressions) > 0)",
            check=lambda s: bool(s.match_labels) or bool(s.match_expressions),
        ),
        # on the selector, not the entry: rules are walked through objects, not list items
        Rule(
            name="podSelector.values-for-in-notin",
            message="target.podSelector.matchExpressions: operators In and NotIn need values; "
            "Exists and DoesNotExist take none",
            cel="!has(self.matchExpressions) || self.matchExpressions.all(e, "
            "(e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",
            check=lambda s: all(
                (e.operator in ("In", "NotIn")) == bool(e.values)
                for e in s.match_expressions or []
            ),
            field_path=".matchExpressions",
        ),
        Rule(
            name="podSelector.label-keys",
            message="target.podSelector.matchLabels: a key is an optional DNS-subdomain "
            "prefix and '/', then up to 63 letters, digits, '-', '_' or '.' (e.g. "
            "app.kubernetes.io/name)",
            cel=None,
            check=lambda s: all(re2_matches(LABEL_KEY_PATTERN, k) and len(k) <= 317
                                for k in s.match_labels or {}),
            field_path=".matchLabels",
            python_only="a structural schema bounds no map key's length, so CEL's cost "
            "estimate of a pattern over the keys exceeds the API server's budget",
        ),
    )

    match_labels: dict[Str, LabelValue] | None = Field(
        default=None, max_length=64, description="Labels every pod must have."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=64, description="Requirements every pod must meet."
    )

    def to_dict(self) -> dict[str, Any]:
        """The selector as the Kubernetes API writes it (``matchLabels``/``matchExpressions``)."""
        return self.model_dump(by_alias=True, exclude_none=True)


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

    url: Annotated[
        TargetUrl | None,
        CliFlag(
            "--url", default="http://127.0.0.1:8000", help="server base URL (scheme optional)"
        ),
    ] = Field(
        default=None,
        description="Base URL, e.g. http://vllm:8000 (or use service).",
    )
    service: ServiceRef | None = Field(default=None, description="Service in front of the pods.")
    model: Str | None = Field(
        default=None,
        max_length=512,
        description="Model name as served (default: the first in /v1/models).",
    )
    endpoint_type: Annotated[
        EndpointType,
        CliFlag("--endpoint-type", help="chat (default), completions or embeddings"),
    ] = Field(default="chat", description="OpenAI API flavour.")
    endpoint: Annotated[
        EndpointPath | None,
        CliFlag("--endpoint", help="custom path, e.g. v1/chat/completions (leading / optional)"),
    ] = Field(default=None, description="Custom path, e.g. /v1/chat/completions.")
    streaming: Annotated[
        Bool,
        CliFlag(
            "--streaming",
            form="negatable",
            help="stream responses (SSE); needed for TTFT and ITL (default: on)",
        ),
    ] = Field(default=True, description="Stream responses (SSE); needed for TTFT/ITL.")
    pod_selector: LabelSelector | None = Field(
        default=None,
        description="Label selector of the inference pods (placement, telemetry).",
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key holding the API key."
    )
    request_timeout_seconds: Annotated[
        Float,
        CliFlag(
            "--request-timeout",
            metavar="SECONDS",
            help="per-request timeout, the preflight's included (default 600)",
        ),
    ] = Field(default=600.0, gt=0, description="Per-request timeout.")

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
