"""The LLMBenchmark spec model (llmbench.api): defaults, coercion, bounds, rules, errors.

The resource model replaced a hand-written dataclass parser; these tests pin down the behaviour
that parser had (strict types, old messages for field errors, "did you mean") and the rules it
enforced, now each declared once for Python and CEL.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import llmbench.api as api
from llmbench.api import (
    API_VERSION,
    LINEAR_POINTS,
    Cost,
    Load,
    OutputTokens,
    ServiceRef,
    Slo,
    Spec,
    SpecError,
    SpecIssue,
    Sweep,
    Target,
    Telemetry,
    Workload,
    cron_expression,
    parse_sweep_list,
    spec_rules,
    sweep_values,
)
from llmbench.api.spec import MAX_STORED_POINTS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
URL = {"url": "http://127.0.0.1:8000"}


def manifest(**spec: Any) -> dict[str, Any]:
    """A full manifest around a spec whose target defaults to a URL."""
    body: dict[str, Any] = {"target": dict(URL)}
    body.update(spec)
    return {
        "apiVersion": API_VERSION,
        "kind": "LLMBenchmark",
        "metadata": {"name": "x"},
        "spec": body,
    }


def issues(doc: Any) -> list[str]:
    """The issues (as "path: message") of a document that must be refused."""
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(doc)
    return [str(i) for i in err.value.issues]


def example_docs() -> list[dict[str, Any]]:
    docs = []
    for f in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "LLMBenchmark":
                docs.append(doc)
    return docs


# ----------------------------------------------------------------------------------------------
# examples, defaults, round trip
# ----------------------------------------------------------------------------------------------


def test_every_example_is_a_valid_spec() -> None:
    docs = example_docs()
    assert len(docs) >= 2
    for doc in docs:
        Spec.from_manifest(doc)


def test_design_sketch_parses() -> None:
    doc = yaml.safe_load((EXAMPLES / "llmbenchmark-vllm.yaml").read_text())
    spec = Spec.from_manifest(doc)
    assert spec.target.service == ServiceRef(name="vllm", port=8000)
    assert spec.namespace == "llm"
    assert spec.target.base_url(spec.namespace) == "http://vllm.llm.svc:8000"
    assert spec.target.api_key_secret_ref is not None
    assert spec.target.api_key_secret_ref.key == "token"
    assert spec.target.pod_selector is not None
    assert spec.target.pod_selector.to_dict() == {"matchLabels": {"app": "vllm"}}
    assert spec.sweep is not None and spec.sweep.points()[-1] == 64
    assert spec.points() == [1, 2, 4, 8, 16, 32, 64]
    assert spec.slo.limits() == {"ttft_p99": 500, "itl_p99": 50}
    assert spec.slo.per_request() == {"ttft": 500, "itl": 50}
    assert spec.workload.extra_inputs == {"ignore_eos": True}
    assert spec.load.request_count == 200 and spec.load.warmup_request_count == 20
    assert spec.schedule == "0 2 * * *"


def test_sim_example_parses() -> None:
    spec = Spec.from_manifest(yaml.safe_load((EXAMPLES / "llmbenchmark-sim.yaml").read_text()))
    assert spec.namespace is None
    assert spec.target.base_url() == "http://localhost:8000"
    assert spec.points() == [1, 2, 4, 8, 16, 32]
    assert spec.cost == Cost(price_per_hour=2.5, currency="EUR")


def test_bare_spec_and_defaults() -> None:
    spec = Spec.from_manifest({"target": {"url": "http://h:1"}})
    assert spec.sweep is None and spec.points() == [None]
    assert spec.namespace is None
    t = spec.target
    assert (t.endpoint_type, t.streaming, t.request_timeout_seconds) == ("chat", True, 600.0)
    assert t.model is None and t.endpoint is None and t.service is None
    w = spec.workload
    assert (w.input_tokens.mean, w.input_tokens.stddev) == (550, 0.0)
    assert w.output_tokens == OutputTokens() and w.output_tokens.mean is None
    assert (w.seed, w.num_prompts, w.extra_inputs, w.tokenizer) == (0, 100, {}, None)
    ld = spec.load
    assert (ld.mode, ld.concurrency, ld.request_rate_mode, ld.workers) == (
        "concurrency",
        1,
        "constant",
        1,
    )
    assert ld.request_count is None and ld.warmup_request_count == 0
    assert spec.repetitions == 1 and spec.placement == "SameNode" and spec.schedule is None
    assert spec.telemetry == Telemetry(dcgm="auto", server_metrics="auto")
    assert spec.cost == Cost(currency="EUR") and spec.slo.limits() == {}


def test_service_base_url_uses_its_own_namespace_first() -> None:
    t = Target(service=ServiceRef(name="vllm", port=9000, namespace="models"))
    assert t.base_url("bench") == "http://vllm.models.svc:9000"
    assert Target(service=ServiceRef(name="vllm")).base_url() == "http://vllm:8000"
    assert Target(service=ServiceRef(name="vllm")).base_url("ns") == "http://vllm.ns.svc:8000"


def test_namespace_argument_wins_over_metadata() -> None:
    doc = manifest()
    doc["metadata"]["namespace"] = "from-metadata"
    assert Spec.from_manifest(doc).namespace == "from-metadata"
    assert Spec.from_manifest(doc, namespace="given").namespace == "given"
    assert Spec.from_manifest({"target": URL}, namespace="bare").namespace == "bare"


def test_python_code_uses_snake_case_names() -> None:
    spec = Spec(
        target=Target(url="http://h:1", endpoint_type="completions"),
        load=Load(mode="request_rate", request_rate=2, max_concurrency=4),
        workload=Workload(output_tokens=OutputTokens(mean=8, deterministic=True)),
        slo=Slo(e2e_p99_ms=900, goodput_ratio=0.9),
    )
    body = spec.to_dict()
    assert body["target"]["endpointType"] == "completions"
    assert body["load"]["requestRate"] == 2.0 and body["load"]["maxConcurrency"] == 4
    assert body["slo"] == {"e2eP99Ms": 900.0, "goodputRatio": 0.9}
    assert Spec.from_manifest(body) == spec


def test_to_dict_round_trips_and_leaves_unset_fields_out() -> None:
    for doc in example_docs():
        spec = Spec.from_manifest(doc)
        again = Spec.from_manifest(spec.to_dict())
        assert again.to_dict() == spec.to_dict()
        assert again == Spec.from_manifest(doc["spec"])
    spec = Spec.from_manifest(yaml.safe_load((EXAMPLES / "llmbenchmark-vllm.yaml").read_text()))
    assert spec.to_dict()["sweep"] == {
        "type": "concurrency",
        "range": "1:64",
        "stopAfterKnee": True,
        "onPointFailure": "continue",
    }
    bare = Spec.from_manifest({"target": URL}).to_dict()
    assert "sweep" not in bare and "schedule" not in bare
    assert "requestRate" not in bare["load"] and "mean" not in bare["workload"]["outputTokens"]
    assert bare["slo"] == {} and bare["cost"] == {"currency": "EUR"}


def test_to_dict_keeps_nulls_inside_free_form_maps() -> None:
    """extraInputs is the request body's business: a null there is a value, not "unset"."""
    spec = Spec.from_manifest(manifest(workload={"extraInputs": {"stop": None, "n": [1, None]}}))
    assert spec.to_dict()["workload"]["extraInputs"] == {"stop": None, "n": [1, None]}


def test_to_dict_is_json_serialisable() -> None:
    for doc in example_docs():
        body = Spec.from_manifest(doc).to_dict()
        assert json.loads(json.dumps(body)) == body


def test_validate_rechecks_a_spec_changed_in_code() -> None:
    spec = Spec.from_manifest(manifest())
    spec.validate()
    spec.load.mode = "request_rate"
    spec.repetitions = 0
    with pytest.raises(SpecError) as err:
        spec.validate()
    assert [i.path for i in err.value.issues] == ["spec.repetitions"]  # the schema first
    spec.repetitions = 1
    with pytest.raises(SpecError) as err:
        spec.validate()
    assert [i.path for i in err.value.issues] == ["spec.load.requestRate"]
    spec.load.request_rate = 2.0
    spec.validate()
    spec.sweep = Sweep(range="1:8")
    with pytest.raises(SpecError) as err:
        spec.validate()
    assert [i.path for i in err.value.issues] == ["spec.sweep.type"]


def test_constructing_an_invalid_model_in_code_raises() -> None:
    with pytest.raises(ValueError, match="set exactly one of url"):
        Target()
    with pytest.raises(ValueError, match="set exactly one of range"):
        Sweep(type="concurrency")


# ----------------------------------------------------------------------------------------------
# coercion and bounds: what the old parser accepted
# ----------------------------------------------------------------------------------------------


def test_integral_floats_are_integers_and_integers_are_numbers() -> None:
    spec = Spec.from_manifest(
        manifest(load={"concurrency": 4.0}, workload={"inputTokens": {"mean": 64, "stddev": 3}})
    )
    assert spec.load.concurrency == 4 and isinstance(spec.load.concurrency, int)
    assert spec.workload.input_tokens.stddev == 3.0
    assert isinstance(spec.workload.input_tokens.stddev, float)
    values = Spec.from_manifest(manifest(sweep={"values": [1, 2.0]}))
    assert values.sweep is not None and values.sweep.values == [1.0, 2.0]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"load": {"concurrency": 4.5}}, "spec.load.concurrency: must be an integer, got 4.5"),
        ({"load": {"concurrency": "8"}}, "spec.load.concurrency: must be an integer, got '8'"),
        ({"repetitions": True}, "spec.repetitions: must be an integer, got True"),
        ({"load": {"requestRate": "2"}}, "spec.load.requestRate: must be a number, got '2'"),
        ({"slo": {"ttftP99Ms": False}}, "spec.slo.ttftP99Ms: must be a number, got False"),
        ({"slo": {"ttftP99Ms": "fast"}}, "spec.slo.ttftP99Ms: must be a number, got 'fast'"),
        ({"target": {"url": 8000}}, "spec.target.url: must be a string, got 8000"),
        (
            {"target": {**URL, "streaming": 1}},
            "spec.target.streaming: must be true or false, got 1",
        ),
        ({"target": {**URL, "streaming": "yes"}}, "spec.target.streaming: must be true or false"),
        ({"sweep": {"range": 5}}, "spec.sweep.range: must be a string, got 5"),
        ({"sweep": {"values": "1,2"}}, "spec.sweep.values: must be a list of numbers, got '1,2'"),
        ({"sweep": {"values": [1, True]}}, "spec.sweep.values[1]: must be a number, got True"),
        # a list's message names its items, and a wrong item its own type
        ({"workload": {"models": "m"}}, "spec.workload.models: must be a list of strings, got 'm'"),
        ({"workload": {"models": ["m", 7]}}, "spec.workload.models[1]: must be a string, got 7"),
        ({"runner": {"imagePullSecrets": {"name": "s"}}},
         "spec.runner.imagePullSecrets: must be a list of strings"),
        ({"target": {**URL, "podSelector": {"matchExpressions": "app in (a)"}}},
         "spec.target.podSelector.matchExpressions: must be a list of mappings, got 'app in (a)'"),
        ({"workload": {"extraInputs": [1]}}, "spec.workload.extraInputs: must be a mapping"),
        ({"target": "http://x"}, "spec.target: expected a mapping, got str"),
    ],
)
def test_strict_types(spec: dict[str, Any], expected: str) -> None:
    body = {"target": dict(URL)} | spec
    found = issues(body)
    assert any(i.startswith(expected) for i in found), found


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"load": {"warmupRequestCount": -1}},
            "spec.load.warmupRequestCount: -1: must be at least 0",
        ),
        ({"load": {"concurrency": 0}}, "spec.load.concurrency: 0: must be at least 1"),
        ({"load": {"requestRate": 0}}, "spec.load.requestRate: 0: must be greater than 0"),
        ({"load": {"requestCount": 0}}, "spec.load.requestCount: 0: must be at least 1"),
        ({"load": {"maxConcurrency": 0}}, "spec.load.maxConcurrency: 0: must be at least 1"),
        ({"repetitions": 0}, "spec.repetitions: 0: must be at least 1"),
        ({"repetitions": MAX_STORED_POINTS + 1},
         f"spec.repetitions: {MAX_STORED_POINTS + 1}: must be at most {MAX_STORED_POINTS}"),
        ({"target": {"service": {"name": "s", "port": 0}}}, "spec.target.service.port: 0: must"),
        ({"target": {"service": {"name": "s", "port": 65536}}}, "65536: must be at most 65535"),
        ({"target": {"service": {"name": ""}}}, "spec.target.service.name: must not be empty"),
        ({"slo": {"goodputRatio": 0, "ttftP99Ms": 1}}, "spec.slo.goodputRatio: 0: must be greater"),
        ({"slo": {"goodputRatio": 1.5, "ttftP99Ms": 1}}, "1.5: must be at most 1"),
        ({"workload": {"outputTokens": {"mean": 0}}}, "spec.workload.outputTokens.mean: 0: must"),
        ({"workload": {"inputTokens": {"stddev": -0.5}}}, "-0.5: must be at least 0"),
        ({"target": {**URL, "requestTimeoutSeconds": 0}}, "0: must be greater than 0"),
        ({"cost": {"pricePerHour": -1}}, "spec.cost.pricePerHour: -1: must be greater than 0"),
        ({"sweep": {"values": []}}, "spec.sweep.values: must have at least 1 item(s)"),
        ({"sweep": {"values": list(range(1, 130))}}, "spec.sweep.values: must have at most 128"),
        ({"schedule": "0 " * 70}, "spec.schedule: must be at most 128 characters"),
    ],
)
def test_bounds(spec: dict[str, Any], expected: str) -> None:
    body = {"target": dict(URL)} | spec
    found = issues(body)
    assert any(i.startswith(expected) or expected in i for i in found), found


def test_bounds_are_inclusive_where_declared() -> None:
    spec = Spec.from_manifest(
        manifest(
            repetitions=MAX_STORED_POINTS,
            slo={"goodputRatio": 1, "ttftP99Ms": 0.001},
            target={"service": {"name": "s", "port": 65535}},
            load={"warmupRequestCount": 0, "concurrency": 1},
        )
    )
    assert spec.repetitions == MAX_STORED_POINTS and spec.slo.goodput_ratio == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sweep", {"type": "latency", "range": "1:8"}),
        ("placement", "Elsewhere"),
        ("load", {"mode": "closed"}),
        ("load", {"requestRateMode": "bursty"}),
        ("target", {**URL, "endpointType": "generate"}),
        ("sweep", {"range": "1:2", "onPointFailure": "retry"}),
    ],
)
def test_enums_list_what_is_accepted(field: str, value: Any) -> None:
    (found,) = issues({"target": dict(URL)} | {field: value})
    assert ": expected one of " in found


def test_errors_name_every_path_and_fix() -> None:
    found = issues(
        manifest(
            load={"concurency": 4, "warmupRequestCount": -1},
            sweep={"type": "latency", "range": "1:8"},
            repetitions=0,
            placement="Elsewhere",
            slo={"ttftP99Ms": "fast"},
        )
    )
    assert sorted(found) == sorted(
        [
            "spec.load.concurency: unknown field; did you mean concurrency?",
            "spec.load.warmupRequestCount: -1: must be at least 0",
            "spec.sweep.type: 'latency': expected one of concurrency, request_rate, "
            "input_sequence_length, output_sequence_length",
            "spec.repetitions: 0: must be at least 1",
            "spec.placement: 'Elsewhere': expected one of SameNode, SameZone, Any",
            "spec.slo.ttftP99Ms: must be a number, got 'fast'",
        ]
    )


def test_spec_error_is_a_value_error_with_one_issue_per_line() -> None:
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(manifest(repetitions=0, placement="x", load={"workers": 0}))
    assert isinstance(err.value, ValueError)
    assert str(err.value).splitlines() == [str(i) for i in err.value.issues]
    assert len(err.value.issues) == 3
    assert all(isinstance(i, SpecIssue) for i in err.value.issues)
    assert str(SpecIssue("spec.a", "b")) == "spec.a: b"


# ----------------------------------------------------------------------------------------------
# unknown fields: did you mean
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"load": {"concurency": 4}},
            "spec.load.concurency: unknown field; did you mean concurrency?",
        ),
        (
            {"load": {"request_rate": 4}},
            "spec.load.request_rate: unknown field; did you mean requestRate?",
        ),
        ({"target": {**URL, "endpoint_type": "chat"}}, "did you mean endpointType?"),
        ({"slo": {"ttftp99ms": 5}}, "spec.slo.ttftp99ms: unknown field; did you mean ttftP99Ms?"),
        ({"sweeps": {"range": "1:2"}}, "spec.sweeps: unknown field; did you mean sweep?"),
        ({"workload": {"inputTokens": {"mena": 3}}}, "did you mean mean?"),
        ({"cost": {"zzz": 1}}, "spec.cost.zzz: unknown field; known: pricePerHour, currency"),
    ],
)
def test_unknown_fields_suggest_the_closest_key(spec: dict[str, Any], expected: str) -> None:
    found = issues({"target": dict(URL)} | spec)
    assert any(expected in i for i in found), found


def test_snake_case_keys_are_not_manifest_keys() -> None:
    """The API server reads camelCase only; Python must not accept more than it does."""
    found = issues({"target": {"url": "http://h:1", "request_timeout_seconds": 5}})
    assert found == [
        "spec.target.request_timeout_seconds: unknown field; did you mean requestTimeoutSeconds?"
    ]


# ----------------------------------------------------------------------------------------------
# the cross-field rules: one violating spec per rule, covering every declared rule
# ----------------------------------------------------------------------------------------------

RULE_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "target.exactly-one-of-url-service": ({"target": {}}, "spec.target"),
    "target.url-is-http": ({"target": {"url": "vllm:8000"}}, "spec.target.url"),
    "target.endpoint-is-path": ({"target": {**URL, "endpoint": "v1/chat"}}, "spec.target.endpoint"),
    "outputTokens.deterministic-needs-mean": (
        {"workload": {"outputTokens": {"deterministic": True}}},
        "spec.workload.outputTokens.deterministic",
    ),
    "load.request-rate-required": ({"load": {"mode": "request_rate"}}, "spec.load.requestRate"),
    "load.max-concurrency-open-loop-only": (
        {"load": {"maxConcurrency": 4}},
        "spec.load.maxConcurrency",
    ),
    "load.stability-needs-interval": (
        {"load": {"stabilityPercentage": 5}},
        "spec.load.stabilityPercentage",
    ),
    "load.interval-is-the-budget": (
        {"load": {"measurementIntervalMs": 100, "requestCount": 5}},
        "spec.load.measurementIntervalMs",
    ),
    "load.interval-one-worker": (
        {"load": {"measurementIntervalMs": 100, "workers": 2}},
        "spec.load.measurementIntervalMs",
    ),
    "load.fixed-schedule-is-the-load": (
        {"load": {"fixedSchedule": True, "requestCount": 5}, "workload": {"inputFile": "t.jsonl"}},
        "spec.load.fixedSchedule",
    ),
    "spec.fixed-schedule-needs-a-trace": (
        {"load": {"fixedSchedule": True}},
        "spec.load.fixedSchedule",
    ),
    "sessions.concurrency-at-most-count": (
        {"load": {"sessions": {"count": 2, "concurrency": 3}}},
        "spec.load.sessions.concurrency",
    ),
    "load.sessions-are-the-load": (
        {"load": {"sessions": {"count": 2}, "concurrency": 4}},
        "spec.load.sessions",
    ),
    "spec.sessions-synthetic-chat": (
        {"load": {"sessions": {"count": 2}}, "workload": {"inputFile": "f.jsonl"}},
        "spec.load.sessions",
    ),
    "spec.replicas-split": (
        {"runner": {"replicas": 2}, "load": {"concurrency": 4, "measurementDurationSeconds": 5}},
        "spec.runner.replicas",
    ),
    "spec.replicas-share": (
        {"runner": {"replicas": 4}, "sweep": {"type": "concurrency", "range": "2:16"}},
        "spec.runner.replicas",
    ),
    "workload.prefix-prompts-synthetic-only": (
        {"workload": {"numPrefixPrompts": 2, "inputFile": "f.jsonl"}},
        "spec.workload.numPrefixPrompts",
    ),
    "sweep.exactly-one-of-range-values": ({"sweep": {"type": "concurrency"}}, "spec.sweep"),
    "sweep.range-syntax": ({"sweep": {"range": "1-64"}}, "spec.sweep.range"),
    "sweep.range-whole-numbers": ({"sweep": {"range": "1:8:0.5"}}, "spec.sweep.range"),
    "sweep.range-at-least-1": ({"sweep": {"range": "0:8"}}, "spec.sweep.range"),
    "sweep.range-rate-positive": (
        {"sweep": {"type": "request_rate", "range": "0:4"}},
        "spec.sweep.range",
    ),
    "sweep.range-start-not-after-end": ({"sweep": {"range": "8:1"}}, "spec.sweep.range"),
    "sweep.range-step-positive": ({"sweep": {"range": "1:8:0"}}, "spec.sweep.range"),
    "spec.stored-points-fit-the-results": (
        {"sweep": {"values": [1, 2, 4]}, "repetitions": 14},
        "spec.repetitions",
    ),
    "sweep.range-at-most-10000-points": (
        {"sweep": {"range": "1:20000:1"}},
        "spec.sweep.range",
    ),
    "sweep.values-whole-numbers": ({"sweep": {"values": [1, 2.5]}}, "spec.sweep.values"),
    "sweep.values-at-least-1": (
        {"sweep": {"type": "input_sequence_length", "values": [0]}},
        "spec.sweep.values",
    ),
    "sweep.values-rate-positive": (
        {"sweep": {"type": "request_rate", "values": [-1]}},
        "spec.sweep.values",
    ),
    "sweep.values-unique": ({"sweep": {"values": [1, 2, 1]}}, "spec.sweep.values"),
    "sweep.search-load-axis": (
        {"sweep": {"type": "input_sequence_length", "range": "16:64", "search": {}},
         "slo": {"ttftP99Ms": 9}},
        "spec.sweep.search",
    ),
    "sweep.search-whole-resolution": (
        {"sweep": {"range": "1:8", "search": {"resolution": 1.5}}, "slo": {"ttftP99Ms": 9}},
        "spec.sweep.search.resolution",
    ),
    "sweep.search-not-after-knee": (
        {"sweep": {"range": "1:8", "search": {}, "stopAfterKnee": True},
         "slo": {"ttftP99Ms": 9}},
        "spec.sweep.stopAfterKnee",
    ),
    "spec.search-needs-slo": ({"sweep": {"range": "1:8", "search": {}}}, "spec.sweep.search"),
    "sweep.workloads-load-axis": (
        {"sweep": {"type": "input_sequence_length", "range": "64:128",
                   "workloads": [{"inputTokens": 8, "outputTokens": 8}]}},
        "spec.sweep.workloads",
    ),
    "sweep.workloads-unique": (
        {"sweep": {"range": "1:4", "workloads": [{"inputTokens": 8, "outputTokens": 8},
                                                 {"inputTokens": 8, "outputTokens": 8}]}},
        "spec.sweep.workloads",
    ),
    "sweep.workloads-grid-only": (
        {"sweep": {"range": "1:4", "stopAfterKnee": True,
                   "workloads": [{"inputTokens": 8, "outputTokens": 8}]}},
        "spec.sweep.workloads",
    ),
    "spec.workloads-synthetic-generating": (
        {"workload": {"inputFile": "prompts.jsonl"},
         "sweep": {"range": "1:4", "workloads": [{"inputTokens": 8, "outputTokens": 8}]}},
        "spec.sweep.workloads",
    ),
    "load.burstiness-needs-gamma": (
        {"load": {"mode": "request_rate", "requestRate": 5, "burstiness": 0.5}},
        "spec.load.burstiness",
    ),
    "load.ramp-up-one-sender": (
        {"load": {"mode": "request_rate", "requestRate": 5, "rampUpSeconds": 5, "workers": 2}},
        "spec.load.rampUpSeconds",
    ),
    "spec.ramp-up-one-runner": (
        {"runner": {"replicas": 2}, "load": {"concurrency": 2, "rampUpSeconds": 5}},
        "spec.load.rampUpSeconds",
    ),
    "spec.ramp-up-fits-the-deadline": (
        {"runner": {"timeoutSeconds": 60}, "load": {"concurrency": 4, "rampUpSeconds": 60}},
        "spec.load.rampUpSeconds",
    ),
    "slo.goodput-ratio-needs-latency-limit": (
        {"slo": {"goodputRatio": 0.9}},
        "spec.slo.goodputRatio",
    ),
    "telemetry.dcgm-source": ({"telemetry": {"dcgm": "dcgm:9400"}}, "spec.telemetry.dcgm"),
    "telemetry.serverMetrics-source": (
        {"telemetry": {"serverMetrics": "on"}},
        "spec.telemetry.serverMetrics",
    ),
    "spec.schedule-syntax": ({"schedule": "a b c d e"}, "spec.schedule"),
    "spec.schedule-ranges-ascending": ({"schedule": "0 5-1 * * *"}, "spec.schedule"),
    "spec.schedule-fires": ({"schedule": "0 0 30 2 *"}, "spec.schedule"),
    "spec.time-zone-exists": ({"schedule": "@daily", "timeZone": "Mars/Olympus"}, "spec.timeZone"),
    "spec.baseline-one-source": (
        {"baseline": {"run": 2, "values": {"peakOtt": 100}}}, "spec.baseline"
    ),
    "spec.trigger-needs-pods": (
        {"trigger": {"onTargetChange": True}}, "spec.trigger.onTargetChange"
    ),
    "spec.baseline-history-alone": (
        {"baseline": {"mode": "history", "run": 2}}, "spec.baseline.mode"
    ),
    "spec.baseline-history-min-runs": (
        {"baseline": {"mode": "history", "history": {"runs": 5, "minRuns": 6}}},
        "spec.baseline.history.minRuns",
    ),
    "spec.baseline-tolerance-drop": (
        {"baseline": {"tolerances": {"maxOttUnderSlo": "+5%"}}},
        "spec.baseline.tolerances.maxOttUnderSlo",
    ),
    "spec.baseline-tolerance-rise": (
        {"baseline": {"tolerances": {"ttftP99": "-10%"}}}, "spec.baseline.tolerances.ttftP99"
    ),
    "spec.concurrency-sweep-needs-closed-loop": (
        {"load": {"mode": "request_rate", "requestRate": 2}, "sweep": {"range": "1:8"}},
        "spec.sweep.type",
    ),
    "spec.embeddings-no-output-length-sweep": (
        {
            "target": {**URL, "endpointType": "embeddings"},
            "sweep": {"type": "output_sequence_length", "values": [8, 16]},
        },
        "spec.sweep.type",
    ),
    "podSelector.not-empty": ({"target": {**URL, "podSelector": {}}}, "spec.target.podSelector"),
    "podSelector.values-for-in-notin": (
        {"target": {**URL, "podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}},
        "spec.target.podSelector.matchExpressions",
    ),
    "podSelector.label-keys": (
        {"target": {**URL, "podSelector": {"matchLabels": {"not a key": "x"}}}},
        "spec.target.podSelector.matchLabels",
    ),
    "runner.podLabels-reserved": (
        {"runner": {"podLabels": {"llmbench.io/run": "9"}}}, "spec.runner.podLabels"
    ),
    "runner.podAnnotations-reserved": (
        {"runner": {"podAnnotations": {"llmbench.io/replicas": "1"}}},
        "spec.runner.podAnnotations",
    ),
    "runner.podLabels-keys": (
        {"runner": {"podLabels": {"not a key": "x"}}}, "spec.runner.podLabels"
    ),
    "runner.podAnnotations-keys": (
        {"runner": {"podAnnotations": {"/bad": "x"}}}, "spec.runner.podAnnotations"
    ),
    "runner.nodeSelector-keys": (
        {"runner": {"nodeSelector": {"a b": "x"}}}, "spec.runner.nodeSelector"
    ),
    "runner.quantity-not-zero": (
        {"runner": {"requests": {"memory": "0Mi"}}}, "spec.runner.requests.memory"
    ),
    "runner.cpu-request-within-limit": (
        {"runner": {"requests": {"cpu": "3"}}}, "spec.runner.requests.cpu"
    ),
    "runner.memory-request-within-limit": (
        {"runner": {"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}},
        "spec.runner.requests.memory",
    ),
    "spec.embeddings-no-latency-slo": (
        {"target": {**URL, "endpointType": "embeddings"}, "slo": {"e2eP99Ms": 100}},
        "spec.slo",
    ),
}


def test_every_rule_has_a_case() -> None:
    assert {r.name for _, r in spec_rules()} == set(RULE_CASES)
    # a name is one rule: a rule on a shared type (a tolerance) sits on each of its fields
    by_name: dict[str, Any] = {}
    for where, r in spec_rules():
        assert by_name.setdefault(r.name, r) is r, f"{r.name} at {where}: two rules, one name"
    assert len({(where, r.name) for where, r in spec_rules()}) == len(spec_rules())


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_each_rule_alone(name: str) -> None:
    """Each case breaks exactly its rule: one issue, at the rule's path, with its message."""
    spec, path = RULE_CASES[name]
    rule = next(r for _, r in spec_rules() if r.name == name)
    found = issues({"target": dict(URL)} | spec)
    assert found == [f"{path}: {rule.message}"]


def test_rules_say_what_to_do() -> None:
    for _, rule in spec_rules():
        assert rule.message and "\n" not in rule.message
        assert rule.cel is not None or rule.python_only
        if rule.field_path is not None:
            assert rule.field_path.startswith(".")


def test_old_rule_wording_kept_where_it_was_static() -> None:
    assert issues({"target": {}})[0].startswith("spec.target: set exactly one of url")
    both = {"url": "http://a:1", "service": {"name": "s"}}
    assert any("exactly one of url" in i for i in issues({"target": both}))
    assert issues(manifest(sweep={"type": "concurrency"}))[0].startswith(
        "spec.sweep: set exactly one of range (start:end[:step]) and values"
    )
    assert (
        "needs outputTokens.mean"
        in issues(manifest(workload={"outputTokens": {"deterministic": True}}))[0]
    )
    assert (
        "concurrency needs load.mode concurrency"
        in issues(
            manifest(load={"mode": "request_rate", "requestRate": 1}, sweep={"range": "1:4"})
        )[0]
    )


def test_rule_checks_report_all_broken_rules_of_one_object() -> None:
    found = issues(manifest(sweep={"range": "8:1:0"}))
    assert found == [
        'spec.sweep.range: sweep.range start must not be greater than end, e.g. "1:64", not "64:1"',
        "spec.sweep.range: sweep.range step must be greater than 0",
    ]
    found = issues({"target": {"url": "vllm:8000", "endpoint": "x"}})
    assert [i.split(":")[0] for i in found] == ["spec.target.url", "spec.target.endpoint"]


def test_rules_wait_for_the_schema_then_all_are_reported() -> None:
    """The API server's order: schema errors alone; once the schema holds, every broken rule
    of every object, a nested rule beside a cross-object one."""
    found = issues(manifest(schedule="99 99 99 99 99", repetitions=0))
    assert found == ["spec.repetitions: 0: must be at least 1"]
    found = issues(
        {
            "target": {"url": "vllm:8000", "endpointType": "embeddings"},
            "load": {"mode": "request_rate"},
            "sweep": {"type": "output_sequence_length", "range": "8:1"},
            "slo": {"ttftP99Ms": 5, "goodputRatio": 0.5},
            "schedule": "99 99 99 99 99",
            "telemetry": {"dcgm": "x", "serverMetrics": "y"},
        }
    )
    assert [i.split(": ")[0] for i in found] == [
        "spec.sweep.type",  # embeddings cannot sweep the output length
        "spec.slo",  # embeddings have no latency SLOs
        "spec.target.url",
        "spec.load.requestRate",
        "spec.sweep.range",
        "spec.telemetry.dcgm",
        "spec.telemetry.serverMetrics",
        "spec.schedule",
    ]


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ({"sweep": {"type": "request_rate", "range": "0.5:4:0.5"}}, True),
        ({"sweep": {"type": "request_rate", "values": [0.5, 1.25]}}, True),
        ({"sweep": {"type": "input_sequence_length", "range": "128:512:128"}}, True),
        ({"sweep": {"type": "output_sequence_length", "range": " 8 : 64 "}}, True),
        ({"sweep": {"range": "1:1"}}, True),
        ({"sweep": {"range": "1:40:1"}}, True),  # exactly MAX_STORED_POINTS
        ({"sweep": {"range": "1:41:1"}}, False),
        ({"sweep": {"range": "1:40:1"}, "repetitions": 2}, False),
        ({"sweep": {"range": "1:2048"}, "repetitions": 3}, True),  # 12 powers of two x 3
        ({"sweep": {"range": "1:4096"}, "repetitions": 4}, False),  # 13 x 4
        ({"sweep": {"type": "input_sequence_length", "range": "128:129"}, "repetitions": 5},
         True),  # counted as 8 values
        ({"sweep": {"type": "input_sequence_length", "range": "128:129"}, "repetitions": 6},
         False),
        ({"sweep": {"range": "1:10001:1"}}, False),
        ({"sweep": {"range": "1e1:1e2"}}, True),
        ({"sweep": {"range": "+1:.5e1"}}, True),
        ({"sweep": {"range": "1:"}}, False),
        ({"sweep": {"range": "1:2:3:4"}}, False),
        ({"sweep": {"range": "inf:8"}}, False),
        ({"sweep": {"range": "1:nan"}}, False),
        ({"sweep": {"range": "1_0:20"}}, False),
        ({"sweep": {"range": "1e100:1e101"}}, False),  # three-digit exponents are refused
        ({"sweep": {"type": "request_rate", "range": "2:1"}}, False),
        ({"load": {"mode": "request_rate", "requestRate": 2, "maxConcurrency": 8}}, True),
        (
            {
                "load": {"mode": "request_rate", "requestRate": 2},
                "sweep": {"type": "request_rate", "values": [1]},
            },
            True,
        ),
        (
            {
                "target": {**URL, "endpointType": "embeddings"},
                "sweep": {"type": "input_sequence_length", "values": [8]},
            },
            True,
        ),
        ({"slo": {"goodputRatio": 0.9, "itlP99Ms": 5}}, True),
        ({"telemetry": {"dcgm": "off", "serverMetrics": "http://vllm:8000/metrics"}}, True),
        ({"telemetry": {"dcgm": "AUTO"}}, False),
        ({"telemetry": {"dcgm": "http://"}}, False),
        ({"target": {"url": "https://h"}}, True),
        ({"target": {"url": "http:///path"}}, False),
        ({"target": {"url": "HTTP://h:1"}}, False),
        ({"target": {"url": " http://h:1"}}, False),
        ({"target": {**URL, "endpoint": "/v1/completions"}}, True),
    ],
)
def test_rule_boundaries(spec: dict[str, Any], ok: bool) -> None:
    doc = {"target": dict(URL)} | spec
    if ok:
        Spec.from_manifest(doc)
    else:
        assert issues(doc)


# ----------------------------------------------------------------------------------------------
# cron
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        "0 2 * * *",
        "*/15 * * * *",
        "0 0-23/2 1,15 * *",
        "30 4 * JAN-MAR mon-fri",
        "0 0 * * 7",
        "0 0 * * sun",
        "5 4 * * SUN,SAT",
        "  0 2 * * *  ",
        "0\t2\t*\t*\t*",
        "00 02 01 01 00",
        "@daily",
        "@hourly",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "0 0 29 2 *",
        "0 0 31 1,2 *",
    ],
)
def test_cron_accepts(schedule: str) -> None:
    assert Spec.from_manifest(manifest(schedule=schedule)).schedule == schedule


@pytest.mark.parametrize(
    ("schedule", "rule"),
    [
        ("a b c d e", "spec.schedule-syntax"),
        ("99 99 99 99 99", "spec.schedule-syntax"),
        ("nightly", "spec.schedule-syntax"),
        ("0 2 * *", "spec.schedule-syntax"),
        ("0 0 2 * * *", "spec.schedule-syntax"),  # six fields (seconds) are not Kubernetes cron
        ("60 * * * *", "spec.schedule-syntax"),
        ("* 24 * * *", "spec.schedule-syntax"),
        ("* * 0 * *", "spec.schedule-syntax"),
        ("* * 32 * *", "spec.schedule-syntax"),
        ("* * * 13 *", "spec.schedule-syntax"),
        ("* * * * 8", "spec.schedule-syntax"),
        ("*/0 * * * *", "spec.schedule-syntax"),
        ("0 0 L * *", "spec.schedule-syntax"),
        ("0 0 * * 1#2", "spec.schedule-syntax"),
        ("0 0 ? * *", "spec.schedule-syntax"),
        ("@reboot", "spec.schedule-syntax"),
        ("0 2 * * *\n", "spec.schedule-syntax"),
        ("", "spec.schedule-syntax"),
        ("0 5-1 * * *", "spec.schedule-ranges-ascending"),
        ("0 0 * * 6-2", "spec.schedule-ranges-ascending"),
        ("0 0 30 2 *", "spec.schedule-fires"),
        ("0 0 * * FRI-MON", "spec.schedule-fires"),
        ("0 0 * NOV-FEB *", "spec.schedule-fires"),
    ],
)
def test_cron_refuses(schedule: str, rule: str) -> None:
    (expected,) = [r for _, r in spec_rules() if r.name == rule]
    assert issues(manifest(schedule=schedule)) == [f"spec.schedule: {expected.message}"]


def test_cron_expression_expands_macros() -> None:
    assert cron_expression("@daily") == "0 0 * * *"
    assert cron_expression(" @Weekly ") == "0 0 * * 0"
    assert cron_expression(" 0 2 * * * ") == "0 2 * * *"


# ----------------------------------------------------------------------------------------------
# sweep values (moved from the runner; same behaviour and messages)
# ----------------------------------------------------------------------------------------------


def test_concurrency_range_without_step_is_powers_of_two() -> None:
    assert sweep_values("concurrency", "1:256", None) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert sweep_values("concurrency", "3:20", None) == [3, 4, 8, 16, 20]
    assert sweep_values("concurrency", "4:4", None) == [4]


def test_stepped_and_linear_ranges() -> None:
    assert sweep_values("input_sequence_length", "128:512:128", None) == [128, 256, 384, 512]
    assert sweep_values("request_rate", "0.5:2:0.5", None) == [0.5, 1.0, 1.5, 2.0]
    assert sweep_values("concurrency", "1:10:4", None) == [1, 5, 9]
    assert sweep_values("output_sequence_length", "1:8", None) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert sweep_values("output_sequence_length", "1:3", None) == [1, 2, 3]
    assert len(sweep_values("request_rate", "1:8", None)) == LINEAR_POINTS


def test_linear_points_match_numpy_linspace() -> None:
    """The API package does without numpy; its points must be numpy's, bit for bit."""
    rng = random.Random(7)
    for _ in range(500):
        start = rng.choice([rng.uniform(0.001, 50), float(rng.randint(1, 50))])
        end = start + rng.choice([rng.uniform(0, 1e4), rng.uniform(0, 1e-6), 1e-300])
        if start == end:
            continue
        text = f"{start!r}:{end!r}"
        rate = [float(round(float(v), 6)) for v in np.linspace(start, end, LINEAR_POINTS)]
        assert sweep_values("request_rate", text, None) == rate, text
        isl = sweep_values("input_sequence_length", f"{round(start) or 1}:{round(end) + 1}", None)
        expected: list[float] = []
        for v in np.linspace(round(start) or 1, round(end) + 1, LINEAR_POINTS):
            r = float(round(float(v)))
            if r not in expected:
                expected.append(r)
        assert isl == expected


def test_explicit_values() -> None:
    assert sweep_values("concurrency", None, [1, 2.0, 8]) == [1.0, 2.0, 8.0]
    assert sweep_values("request_rate", None, [0.25]) == [0.25]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("latency", "1:2", None), "--sweep-type 'latency': expected one of concurrency"),
        (("concurrency", "1:2", [1]), "--sweep-range and --sweep-list: give only one"),
        (("concurrency", None, None), "give --sweep-range start:end[:step] or --sweep-list"),
        (("concurrency", "8:1", None), "--sweep-range '8:1': start 8 is greater than end 1"),
        (("concurrency", "1:x", None), "--sweep-range '1:x': 'x' is not a number"),
        (("concurrency", "1:inf", None), "--sweep-range '1:inf': 'inf' is not a finite number"),
        (("concurrency", "1", None), "--sweep-range '1': expected start:end or start:end:step"),
        (("concurrency", "0:4", None), "concurrency values must be at least 1, got 0"),
        (("concurrency", "1.5:4", None), "concurrency values must be whole numbers, got 1.5"),
        (("request_rate", "0:4", None), "request_rate values must be greater than 0, got 0"),
        (("concurrency", "1:4:0", None), "step must be greater than 0, got 0"),
        (("concurrency", "1:100000:1", None), "100000 points is too many; use a larger step"),
        (("concurrency", None, []), "--sweep-list '': the list is empty"),
        (("concurrency", None, [1, 1]), "--sweep-list '1,1': values repeat"),
        (("concurrency", None, [2.5]), "--sweep-list '2.5': concurrency values must be whole"),
    ],
)
def test_sweep_value_errors_name_the_flag(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError) as err:
        sweep_values(*args)
    assert message in str(err.value)


def test_sweep_values_without_flag_has_no_prefix() -> None:
    with pytest.raises(ValueError) as err:
        sweep_values("concurrency", "8:1", None, flag="")
    assert str(err.value) == "start 8 is greater than end 1"


def test_parse_sweep_list() -> None:
    assert parse_sweep_list("2, 4,6") == [2.0, 4.0, 6.0]
    for bad, msg in [
        ("", "expected comma-separated"),
        ("1,,2", "expected comma-separated"),
        ("1,x", "'x' is not a number"),
        ("1,nan", "not a finite number"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_sweep_list(bad)
    with pytest.raises(ValueError, match="^--points '1,': expected"):
        parse_sweep_list("1,", flag="--points")


def test_python_only_sweep_residue_is_still_refused() -> None:
    """A rate range whose first point rounds to 0 passes every CEL rule; sweep_values says no."""
    found = issues(manifest(sweep={"type": "request_rate", "range": "0.0000000001:1:0.5"}))
    assert found == ["spec.sweep.range: request_rate values must be greater than 0, got 0"]


def test_sweep_error_is_exported() -> None:
    assert issubclass(api.SweepError, Exception)


# ----------------------------------------------------------------------------------------------
# public surface and layering
# ----------------------------------------------------------------------------------------------


def test_public_surface() -> None:
    """The API package is the contract the runner and operator import: its names are deliberate."""
    expected = {
        "API_VERSION", "KIND", "GROUP", "VERSION", "PLURAL", "SINGULAR", "SHORT_NAMES",
        "Spec", "Target", "ServiceRef", "SecretKeyRef", "TokenDistribution", "OutputTokens",
        "Workload", "Load", "Sweep", "Slo", "Telemetry", "Cost", "SpecError", "SpecIssue",
        "Rule", "SWEEP_TYPES", "LOAD_MODES", "ENDPOINT_TYPES", "PLACEMENTS", "ON_POINT_FAILURE",
        "sweep_values", "parse_sweep_list", "SweepError", "LINEAR_POINTS", "cron_expression",
        "CRON_MACROS", "spec_rules",
    }  # fmt: skip
    assert set(api.__all__) == expected
    for name in api.__all__:
        assert getattr(api, name) is not None
    assert api.SWEEP_TYPES == (
        "concurrency",
        "request_rate",
        "input_sequence_length",
        "output_sequence_length",
    )
    assert api.LOAD_MODES == ("concurrency", "request_rate")
    assert api.ENDPOINT_TYPES == ("chat", "completions", "embeddings")
    assert api.PLACEMENTS == ("SameNode", "SameZone", "Any")
    assert api.API_VERSION == "llmbench.io/v1alpha1" and api.KIND == "LLMBenchmark"
    assert not hasattr(Spec, "to_profile_config") and not hasattr(Spec, "from_profile_config")


def test_api_imports_nothing_else_of_ours() -> None:
    """The model is the bottom layer: no runner, operator, numpy, kopf or kubernetes."""
    code = (
        "import json, sys\n"
        "import llmbench.api, llmbench.api.crd\n"
        "ours = sorted(m for m in sys.modules if m.startswith('llmbench'))\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'kopf', 'kubernetes', 'httpx', 'matplotlib'))\n"
        "print(json.dumps([ours, heavy]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ours, heavy = json.loads(out.stdout)
    assert heavy == []
    assert all(m == "llmbench" or m.startswith("llmbench.api") for m in ours), ours


def test_sessions_admit_the_default_concurrency_and_their_own_defaults() -> None:
    """The API server fills load.concurrency's default (1) in before CEL runs: a sessions
    spec must pass with it, written or not."""
    for load in ({}, {"concurrency": 1}):
        spec = Spec.from_manifest(
            {"target": dict(URL), "load": {**load, "sessions": {"count": 3}}}
        )
        ss = spec.load.sessions
        assert ss is not None
        assert (ss.count, ss.concurrency, ss.turns_mean, ss.turns_stddev) == (3, 1, 1, 0.0)
        assert (ss.turn_delay_mean_ms, ss.turn_delay_stddev_ms) == (0.0, 0.0)
    assert issues({"target": dict(URL), "load": {"concurrency": 2, "sessions": {"count": 3}}})
