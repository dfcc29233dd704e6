"""From the resource model to one point's settings: the only place spec fields become knobs.

A sweep point, a ``profile`` command line and an ``LLMBenchmark`` manifest all reach the load
generator through :func:`point_config`: the CLI first turns its flags into the same
:class:`~llmbench.api.Spec` a manifest parses into, so no field is mapped by hand twice. The
runner's settings that are a spec field under their own name say which in their field
metadata, and :func:`spec_values` copies them; what is written here by hand is only what the
point computes (the swept quantity, the load mode, the budget).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from llmbench.api import Spec
from llmbench.runner.artifacts.layout import default_artifact_dir
from llmbench.runner.load.arrivals import ramp_arrivals
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.sessions import session_plan
from llmbench.runner.point.stability import DEFAULT_STABILITY_PERCENTAGE, StabilityConfig
from llmbench.runner.workload.config import WorkloadConfig

__all__ = ["ENDPOINT_PATHS", "ProfileConfig", "point_config", "spec_paths", "spec_values"]

ENDPOINT_PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}


@dataclass
class ProfileConfig:
    """Everything one load point needs. The API key is kept out of ``repr`` and artefacts."""

    url: str = "http://127.0.0.1:8000"
    model: str | None = None
    endpoint_type: str = "chat"
    endpoint: str | None = None
    streaming: bool = True
    load: LoadConfig = field(default_factory=LoadConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    tokenizer: str | None = None
    tokenizer_revision: str | None = None
    goodput: dict[str, float] = field(default_factory=dict)
    api_key: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    artifact_dir: Path | None = None
    #: GenAI-Perf's ``--artifact-dir``: without ``artifact_dir`` (the exact folder, as a sweep
    #: sets it) the point goes to ``<artifact_root>/<model>-openai-<type>-<mode><value>``.
    artifact_root: Path | None = None
    #: ``--profile-export-file``'s stem: ``<stem>.json``, ``<stem>_genai_perf.json``, ...
    export_stem: str = "profile_export"
    preflight: bool = True
    #: ``--preflight-timeout``: seconds ``GET /v1/models`` may take in preflight, apart from
    #: ``--request-timeout`` so a silent server fails fast.
    preflight_timeout_s: float = 10.0
    #: Seconds a refused (or not yet resolvable) connection to ``GET /v1/models`` is tried
    #: again before preflight gives up; 0 (the CLI): a wrong port fails at once. The runner
    #: Job sets it: a target's pods can be Ready before its Service routes from the runner's
    #: node (kube-proxy programs the route after the EndpointSlice names the pod).
    route_wait_s: float = 0.0
    #: A ``telemetry.TelemetryCollector`` scraping DCGM / server metrics during the window.
    telemetry: Any = field(default=None, repr=False)
    #: ``--measurement-interval``: stable time windows instead of a request budget.
    stability: StabilityConfig | None = None
    #: ``--timeseries-interval``: seconds per slice of the point's time series.
    timeseries_interval_s: float = field(
        default=1.0, metadata={"spec": "telemetry.timeseries_interval_seconds"}
    )

    def path(self) -> str:
        return self.endpoint or ENDPOINT_PATHS[self.endpoint_type]

    def models(self) -> list[str]:
        """Every model requests go to: several with ``workload.models``, else ``model``."""
        if self.workload.models:
            return list(self.workload.models)
        return [self.model] if self.model else []

    def load_label(self) -> tuple[str, float]:
        if self.load.mode == "session_concurrency":
            return "session_concurrency", self.load.concurrency
        if self.load.mode == "fixed_schedule":
            return "fixed_schedule", len(self.load.schedule_ns or ())
        if self.load.mode == "request_rate":
            assert self.load.request_rate is not None
            return "request_rate", self.load.request_rate
        return "concurrency", self.load.concurrency

    def resolved_artifact_dir(self) -> Path:
        if self.artifact_dir is not None:
            return self.artifact_dir
        mode, value = self.load_label()
        if mode == "fixed_schedule":  # GenAI-Perf's folder: ...-fixed_schedule, no number
            base = default_artifact_dir(
                self.model or "model", self.endpoint_type, "concurrency", 1,
                root=self.artifact_root or "artifacts", models=self.models(),
            )
            return base.with_name(base.name.removesuffix("concurrency1") + "fixed_schedule")
        return default_artifact_dir(
            self.model or "model", self.endpoint_type, mode, value,
            root=self.artifact_root or "artifacts", models=self.models(),
        )

    def public_dict(self) -> dict[str, Any]:
        """The arguments as written to artefacts: no key, no header values (they may be secret)."""
        d: dict[str, Any] = {
            "url": self.url,
            "model": self.model,
            "endpoint_type": self.endpoint_type,
            "endpoint": self.path(),
            "streaming": self.streaming,
            "tokenizer": self.tokenizer or "default",
            "goodput": dict(self.goodput),
            "headers": sorted(self.headers),
            "api_key": "set" if self.api_key else None,
        }
        d.update({
            k: v for k, v in asdict(self.load).items()
            if k != "schedule_ns" and (self.load.num_sessions or not k.startswith(_SESSION_KEYS))
        })
        if self.load.schedule_ns is not None:  # the offsets stay in the trace, not here
            d["fixed_schedule_requests"] = len(self.load.schedule_ns)
        d.update({f"workload_{k}": v for k, v in _jsonable(asdict(self.workload)).items()})
        if self.stability is not None:
            d["measurement_interval_ms"] = self.stability.interval_ms
            d["stability_percentage"] = self.stability.percentage
        return d

    def auth_headers(self) -> dict[str, str]:
        h = dict(self.headers)
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


#: LoadConfig's session knobs: in a run's settings only when it ran sessions.
_SESSION_KEYS = ("num_sessions", "session_")


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


def spec_paths(settings: type) -> dict[str, str]:
    """Field name -> spec path (``"load.workers"``) of the settings dataclass's fields that are
    a spec field under their own name (their ``metadata["spec"]``)."""
    return {f.name: f.metadata["spec"] for f in fields(settings) if "spec" in f.metadata}


def spec_values(settings: type, spec: Spec) -> dict[str, Any]:
    """The spec's values of those fields, to pass to ``settings(...)``: how a setting declared
    in the spec reaches the runner without being copied here by hand.

    A path through an unset object (``load.sessions`` when there are none) is left out, so the
    field keeps its default; a field the spec leaves ``None`` is copied as ``None``; lists and
    dicts are copied, so the settings never share the spec's.

    Raises:
        AttributeError: a path names no field of the spec (a test walks every path).
    """
    out: dict[str, Any] = {}
    for name, path in spec_paths(settings).items():
        *parents, leaf = path.split(".")
        obj: Any = spec
        for part in parents:
            obj = getattr(obj, part)
            if obj is None:
                break
        else:
            value = getattr(obj, leaf)
            out[name] = (
                list(value) if isinstance(value, list)
                else dict(value) if isinstance(value, dict)
                else value
            )
    return out



def point_config(
    spec: Spec,
    value: float | None = None,
    *,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    preflight: bool = True,
    artifact_dir: Path | None = None,
    telemetry: Any = None,
    export_stem: str = "profile_export",
    artifact_root: Path | None = None,
) -> ProfileConfig:
    """The :class:`ProfileConfig` of one point of ``spec``.

    ``value`` is the swept quantity at this point (``None``: no sweep). The API key, headers,
    output folder and telemetry collector are runtime settings, never part of the spec.

    Example::

        cfg = point_config(spec, 8)        # the concurrency-8 point of a concurrency sweep
    """
    load = spec.load
    mode: str = load.mode
    concurrency, rate = load.concurrency, load.request_rate
    isl = spec.workload.input_tokens.mean
    osl = spec.workload.output_tokens.mean
    if spec.sweep is not None:
        if value is None:
            raise ValueError("a sweep point needs its value")
        kind = spec.sweep.type
        if kind == "concurrency":
            mode, concurrency = "concurrency", int(value)
        elif kind == "request_rate":
            mode, rate = "request_rate", float(value)
        elif kind == "input_sequence_length":
            isl = int(value)
        else:
            osl = int(value)
    if mode == "request_rate":
        concurrency = load.max_concurrency or 1
    if load.fixed_schedule:
        # The trace is the load: its rows, each at its timestamp (the run reads the offsets
        # from workload.inputFile before the first send).
        mode, concurrency = "fixed_schedule", 1
    sessions = load.sessions
    if sessions is not None:
        # The sessions are the load: every turn of every session, sessions.concurrency of them
        # in flight (spec rules keep the other budgets and modes out).
        mode, concurrency = "session_concurrency", sessions.concurrency
    request_count = load.request_count
    stability = None
    if load.measurement_interval_ms is not None:
        # Stable windows are the budget: the load runs until they agree (spec rules keep
        # requestCount and measurementDurationSeconds out).
        stability = StabilityConfig(
            interval_ms=load.measurement_interval_ms,
            percentage=load.stability_percentage or DEFAULT_STABILITY_PERCENTAGE,
        )
    elif load.fixed_schedule:
        request_count = None
    elif request_count is None and load.measurement_duration_seconds is None:
        request_count = max(100, 4 * (load.max_concurrency or concurrency))
    target = spec.target
    w = spec.workload
    load_cfg = LoadConfig(
        **spec_values(LoadConfig, spec),
        mode=mode,
        concurrency=concurrency,
        request_rate=rate if mode == "request_rate" else None,
        request_count=request_count,
    )
    if sessions is not None:  # the measured budget: every turn of every session
        load_cfg = replace(load_cfg, request_count=session_plan(load_cfg).total)
    if load_cfg.ramp_up_s and load_cfg.request_rate:  # the ramp's sends are warm-up
        ramp = ramp_arrivals(load_cfg)
        load_cfg = replace(load_cfg, warmup_request_count=load_cfg.warmup_request_count + ramp)
    return ProfileConfig(
        **spec_values(ProfileConfig, spec),
        url=target.base_url(spec.namespace),
        model=target.model or (w.models[0] if w.models else None),
        endpoint_type=target.endpoint_type,
        endpoint=target.endpoint,
        streaming=target.streaming and target.endpoint_type != "embeddings",
        load=load_cfg,
        workload=WorkloadConfig(
            **spec_values(WorkloadConfig, spec),
            synthetic_input_tokens_mean=isl,
            output_tokens_mean=osl,
            models=list(w.models or []),
        ),
        tokenizer=w.tokenizer,
        tokenizer_revision=w.tokenizer_revision,
        goodput=spec.slo.per_request(),
        api_key=api_key,
        headers=dict(headers or {}),
        artifact_dir=artifact_dir,
        artifact_root=artifact_root,
        export_stem=export_stem,
        preflight=preflight,
        telemetry=telemetry,
        stability=stability,
    )
