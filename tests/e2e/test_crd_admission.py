"""The generated CRD on a real API server admits exactly what the Python model admits.

The CRD (crds/llmbench.io_llmbenchmarks.yaml, generated from llmbench.api) is applied to the
project's control plane. Then every example is accepted (server-side dry run), one invalid spec
per rule plus unknown fields, wrong types, bad enums, bad cron and bad ranges is refused by the
API server *and* by ``Spec.from_manifest`` with the same message, and an object written and read
back parses into the model with the API server's defaults equal to the model's.
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from llmbench.api import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    SWEEP_TYPES,
    VERSION,
    Spec,
    SpecError,
    spec_rules,
)
from llmbench.api.spec import MAX_NAME, MAX_STORED_POINTS, NAME_RULE, stored_points
from tests.shipped_examples import EXAMPLES, example_benchmarks

pytestmark = pytest.mark.e2e

URL = {"url": "http://vllm.llm.svc:8000"}
#: One ISL/OSL pair of a two-axis sweep.
WL8 = {"inputTokens": 8, "outputTokens": 8}
RULES = {r.name: r for _, r in spec_rules()}


def body(spec: Any, name: str = "probe", namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def create(k8s: Any, namespace: str, obj: dict[str, Any], *, dry_run: bool = True) -> Any:
    """Creates through the API server as kubectl does: strict field validation."""
    kwargs: dict[str, Any] = {"field_validation": "Strict"}
    if dry_run:
        kwargs["dry_run"] = "All"
    return k8s.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, obj, **kwargs
    )


def refusal(k8s: Any, namespace: str, obj: dict[str, Any]) -> str:
    """The API server's message for an object it must refuse."""
    try:
        create(k8s, namespace, obj)
    except ApiException as exc:
        assert exc.status in (400, 422), (exc.status, exc.body)
        return str(json.loads(exc.body)["message"])
    raise AssertionError(f"the API server admitted {json.dumps(obj['spec'])}")


def python_issues(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(body(spec))
    return [str(i) for i in err.value.issues]


@pytest.fixture(scope="module")
def crd_ready(crd_installed: Any) -> Any:
    """The generated CRD applied, Established and serving (conftest's ``crd_installed``)."""
    return crd_installed


@pytest.fixture(scope="module")
def bench_ns(crd_ready: Any) -> Iterator[str]:
    """One namespace for this module's objects (dry runs need no ServiceAccount)."""
    name = f"e2e-crd-{uuid.uuid4().hex[:8]}"
    crd_ready.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        crd_ready.kubectl("delete", "namespace", name, "--wait=false", check=False)


# ------------------------------------------------------------------------------------------
def test_every_example_is_accepted(crd_ready: Any, bench_ns: str) -> None:
    docs = example_benchmarks()
    assert len(docs) >= 5
    for fname, doc in docs:
        obj = copy.deepcopy(doc)
        obj["metadata"]["namespace"] = bench_ns
        created = create(crd_ready, bench_ns, obj)
        assert created["metadata"]["name"] == doc["metadata"]["name"], fname
        Spec.from_manifest(doc)


def test_the_examples_kustomization_builds_and_is_accepted(crd_ready: Any) -> None:
    """What a GitOps tool applies from examples/: kustomize renders it, the API server admits
    every object (server-side dry run, in the namespace the kustomization sets)."""
    rendered = crd_ready.kubectl("kustomize", str(EXAMPLES)).stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    assert kinds.count(KIND) >= 2 and "Secret" in kinds
    if crd_ready.get("namespace", "llm") is None:
        crd_ready.kubectl("create", "namespace", "llm")
    crd_ready.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)


@dataclass(frozen=True)
class Invalid:
    """A spec both sides must refuse; the substrings each side's message must contain."""

    name: str
    spec: dict[str, Any]
    server: str
    python: str
    rule: str | None = None  # the declared rule it breaks (messages are then the rule's)


def rule_case(rule: str, spec: dict[str, Any]) -> Invalid:
    message = RULES[rule].message
    return Invalid(rule, spec, message, message, rule)


EMBEDDINGS = {**URL, "endpointType": "embeddings"}

INVALID = [
    # one per declared CEL rule
    rule_case("target.exactly-one-of-url-service", {"target": {}}),
    rule_case("target.url-is-http", {"target": {"url": "vllm:8000"}}),
    rule_case("target.endpoint-is-path", {"target": {**URL, "endpoint": "v1/chat"}}),
    rule_case(
        "outputTokens.deterministic-needs-mean",
        {"target": URL, "workload": {"outputTokens": {"deterministic": True}}},
    ),
    rule_case("load.request-rate-required", {"target": URL, "load": {"mode": "request_rate"}}),
    rule_case(
        "load.max-concurrency-open-loop-only", {"target": URL, "load": {"maxConcurrency": 8}}
    ),
    rule_case(
        "sweep.exactly-one-of-range-values", {"target": URL, "sweep": {"type": "concurrency"}}
    ),
    rule_case("sweep.range-syntax", {"target": URL, "sweep": {"range": "1-64"}}),
    rule_case("sweep.range-whole-numbers", {"target": URL, "sweep": {"range": "1:8:0.5"}}),
    rule_case("sweep.range-at-least-1", {"target": URL, "sweep": {"range": "0:8"}}),
    rule_case(
        "sweep.range-rate-positive",
        {"target": URL, "sweep": {"type": "request_rate", "range": "0:4"}},
    ),
    rule_case("sweep.range-start-not-after-end", {"target": URL, "sweep": {"range": "8:1"}}),
    rule_case("sweep.range-step-positive", {"target": URL, "sweep": {"range": "1:8:0"}}),
    rule_case("sweep.range-at-most-10000-points", {"target": URL, "sweep": {"range": "1:20000:1"}}),
    rule_case("sweep.values-whole-numbers", {"target": URL, "sweep": {"values": [1, 2.5]}}),
    rule_case(
        "sweep.values-at-least-1",
        {"target": URL, "sweep": {"type": "input_sequence_length", "values": [0, 8]}},
    ),
    rule_case(
        "sweep.values-rate-positive",
        {"target": URL, "sweep": {"type": "request_rate", "values": [-1]}},
    ),
    rule_case("sweep.values-unique", {"target": URL, "sweep": {"values": [1, 2, 1]}}),
    rule_case("sweep.search-load-axis", {
        "target": URL, "slo": {"ttftP99Ms": 9},
        "sweep": {"type": "input_sequence_length", "range": "16:64", "search": {}},
    }),
    rule_case("sweep.search-whole-resolution", {
        "target": URL, "slo": {"ttftP99Ms": 9},
        "sweep": {"range": "1:8", "search": {"resolution": 1.5}},
    }),
    rule_case("sweep.search-not-after-knee", {
        "target": URL, "slo": {"ttftP99Ms": 9},
        "sweep": {"range": "1:8", "search": {}, "stopAfterKnee": True},
    }),
    rule_case("spec.search-needs-slo", {"target": URL, "sweep": {"range": "1:8", "search": {}}}),
    rule_case("sweep.workloads-load-axis", {"target": URL, "sweep": {
        "type": "input_sequence_length", "range": "64:128", "workloads": [WL8]}}),
    rule_case("sweep.workloads-unique", {"target": URL, "sweep": {
        "range": "1:4", "workloads": [WL8, {**WL8}]}}),
    rule_case("sweep.workloads-grid-only", {"target": URL, "sweep": {
        "range": "1:4", "stopAfterKnee": True, "workloads": [WL8]}}),
    rule_case("spec.workloads-synthetic-generating", {
        "target": {**URL, "endpointType": "embeddings"},
        "sweep": {"range": "1:4", "workloads": [WL8]}}),
    rule_case("load.burstiness-needs-gamma", {
        "target": URL, "load": {"mode": "request_rate", "requestRate": 5, "burstiness": 0.5},
    }),
    rule_case("load.ramp-up-one-sender", {"target": URL, "load": {
        "mode": "request_rate", "requestRate": 5, "rampUpSeconds": 5, "workers": 2,
    }}),
    rule_case("spec.ramp-up-one-runner", {"target": URL, "runner": {"replicas": 2},
                                           "load": {"concurrency": 2, "rampUpSeconds": 5}}),
    rule_case("spec.ramp-up-fits-the-deadline", {"target": URL, "runner": {"timeoutSeconds": 60},
                                                 "load": {"concurrency": 4, "rampUpSeconds": 60}}),
    rule_case(
        "slo.goodput-ratio-needs-latency-limit", {"target": URL, "slo": {"goodputRatio": 0.9}}
    ),
    rule_case("telemetry.dcgm-source", {"target": URL, "telemetry": {"dcgm": "dcgm:9400"}}),
    rule_case(
        "telemetry.serverMetrics-source", {"target": URL, "telemetry": {"serverMetrics": "on"}}
    ),
    rule_case("spec.schedule-syntax", {"target": URL, "schedule": "a b c d e"}),
    rule_case("spec.baseline-one-source",
              {"target": URL, "baseline": {"run": 2, "values": {"peakOtt": 100}}}),
    rule_case("spec.trigger-needs-pods", {"target": URL, "trigger": {"onTargetChange": True}}),
    rule_case("spec.baseline-history-alone",
              {"target": URL, "baseline": {"mode": "history", "values": {"peakOtt": 100}}}),
    rule_case("spec.baseline-history-min-runs",
              {"target": URL, "baseline": {"mode": "history", "history": {"minRuns": 11}}}),
    rule_case("spec.baseline-tolerance-drop",
              {"target": URL, "baseline": {"tolerances": {"maxOttUnderSlo": "+5%"}}}),
    rule_case("spec.baseline-tolerance-rise",
              {"target": URL, "baseline": {"tolerances": {"ttftP99": "-10%"}}}),
    rule_case(
        "spec.replicas-split",
        {"target": URL, "runner": {"replicas": 2},
         "load": {"concurrency": 4, "measurementDurationSeconds": 5}},
    ),
    rule_case(
        "spec.replicas-share",
        {"target": URL, "runner": {"replicas": 4},
         "sweep": {"type": "concurrency", "range": "2:16"}},
    ),
    rule_case("spec.schedule-ranges-ascending", {"target": URL, "schedule": "0 5-1 * * *"}),
    rule_case(
        "spec.concurrency-sweep-needs-closed-loop",
        {
            "target": URL,
            "load": {"mode": "request_rate", "requestRate": 2},
            "sweep": {"range": "1:8"},
        },
    ),
    rule_case(
        "spec.embeddings-no-output-length-sweep",
        {"target": EMBEDDINGS, "sweep": {"type": "output_sequence_length", "values": [8]}},
    ),
    rule_case("spec.embeddings-no-latency-slo", {"target": EMBEDDINGS, "slo": {"ttftP99Ms": 50}}),
    rule_case("load.stability-needs-interval", {"target": URL, "load": {"stabilityPercentage": 5}}),
    rule_case(
        "load.interval-is-the-budget",
        {"target": URL, "load": {"measurementIntervalMs": 100, "requestCount": 5}},
    ),
    rule_case(
        "load.interval-one-worker",
        {"target": URL, "load": {"measurementIntervalMs": 100, "workers": 2}},
    ),
    rule_case(
        "load.fixed-schedule-is-the-load",
        {"target": URL, "load": {"fixedSchedule": True, "warmupRequestCount": 2},
         "workload": {"inputFile": "/data/trace.jsonl"}},
    ),
    rule_case(
        "spec.fixed-schedule-needs-a-trace", {"target": URL, "load": {"fixedSchedule": True}}
    ),
    rule_case(
        "sessions.concurrency-at-most-count",
        {"target": URL, "load": {"sessions": {"count": 2, "concurrency": 3}}},
    ),
    rule_case(
        "load.sessions-are-the-load",
        {"target": URL, "load": {"sessions": {"count": 2}, "warmupRequestCount": 1}},
    ),
    rule_case(
        "spec.sessions-synthetic-chat",
        {"target": {**URL, "endpointType": "completions"}, "load": {"sessions": {"count": 2}}},
    ),
    rule_case(
        "workload.prefix-prompts-synthetic-only",
        {"target": URL, "workload": {"numPrefixPrompts": 2, "inputFile": "/data/p.jsonl"}},
    ),
    rule_case("podSelector.not-empty", {"target": {**URL, "podSelector": {}}}),
    rule_case(
        "podSelector.values-for-in-notin",
        {"target": {**URL, "podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}},
    ),
    rule_case("runner.quantity-not-zero", {"target": URL, "runner": {"requests": {"memory": "0"}}}),
    rule_case("runner.cpu-request-within-limit",
              {"target": URL, "runner": {"requests": {"cpu": "2500m"}}}),
    rule_case(
        "runner.memory-request-within-limit",
        {"target": URL, "runner": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}}},
    ),
    rule_case("runner.podLabels-reserved",
              {"target": URL, "runner": {"podLabels": {"llmbench.io/run": "7"}}}),
    rule_case("runner.podAnnotations-reserved",
              {"target": URL, "runner": {"podAnnotations": {"llmbench.io/replicas": "1"}}}),
    # the same rules reached another way
    Invalid(
        "a podSelector expression with values it does not take",
        {"target": {**URL, "podSelector": {"matchExpressions": [
            {"key": "a", "operator": "Exists", "values": ["x"]}]}}},
        RULES["podSelector.values-for-in-notin"].message,
        RULES["podSelector.values-for-in-notin"].message,
    ),
    Invalid(
        "a podSelector operator that is not one",
        {"target": {**URL, "podSelector": {"matchExpressions": [
            {"key": "a", "operator": "Gt", "values": ["1"]}]}}},
        "spec.target.podSelector.matchExpressions[0].operator: Unsupported value",
        "spec.target.podSelector.matchExpressions[0].operator: 'Gt': expected one of",
    ),
    Invalid(
        "a podSelector that is a string",
        {"target": {**URL, "podSelector": "app=vllm"}},
        "spec.target.podSelector in body must be of type object",
        "spec.target.podSelector: expected a mapping",
    ),
    Invalid(
        "bad cron: values out of range",
        {"target": URL, "schedule": "99 99 99 99 99"},
        RULES["spec.schedule-syntax"].message,
        RULES["spec.schedule-syntax"].message,
    ),
    Invalid(
        "bad cron: six fields",
        {"target": URL, "schedule": "0 0 2 * * *"},
        RULES["spec.schedule-syntax"].message,
        RULES["spec.schedule-syntax"].message,
    ),
    Invalid(
        "bad url: no scheme",
        {"target": {"url": "vllm.llm.svc:8000/v1"}},
        RULES["target.url-is-http"].message,
        RULES["target.url-is-http"].message,
    ),
    Invalid(
        "bad range: not numbers",
        {"target": URL, "sweep": {"range": "one:eight"}},
        RULES["sweep.range-syntax"].message,
        RULES["sweep.range-syntax"].message,
    ),
    # the schema itself: unknown fields, types, enums, bounds, required
    Invalid(
        "unknown field",
        {"target": URL, "load": {"concurency": 4}},
        'unknown field "spec.load.concurency"',
        "unknown field; did you mean concurrency?",
    ),
    Invalid(
        "snake_case field",
        {"target": {**URL, "request_timeout_seconds": 5}},
        'unknown field "spec.target.request_timeout_seconds"',
        "did you mean requestTimeoutSeconds?",
    ),
    Invalid(
        "wrong type: string for integer",
        {"target": URL, "load": {"concurrency": "8"}},
        "spec.load.concurrency in body must be of type integer",
        "spec.load.concurrency: must be an integer, got '8'",
    ),
    Invalid(
        "wrong type: number for string",
        {"target": URL, "sweep": {"range": 5}},
        "spec.sweep.range in body must be of type string",
        "spec.sweep.range: must be a string, got 5",
    ),
    Invalid(
        "wrong type: boolean for integer",
        {"target": URL, "repetitions": True},
        "spec.repetitions in body must be of type integer",
        "spec.repetitions: must be an integer, got True",
    ),
    Invalid(
        "bad enum",
        {"target": URL, "sweep": {"type": "latency", "range": "1:8"}},
        'spec.sweep.type: Unsupported value: "latency"',
        "spec.sweep.type: 'latency': expected one of concurrency",
    ),
    Invalid(
        "below minimum",
        {"target": URL, "repetitions": 0},
        "spec.repetitions in body should be greater than or equal to 1",
        "spec.repetitions: 0: must be at least 1",
    ),
    Invalid(
        "exclusive minimum",
        {"target": URL, "load": {"mode": "request_rate", "requestRate": 0}},
        "spec.load.requestRate in body should be greater than 0",
        "spec.load.requestRate: 0: must be greater than 0",
    ),
    Invalid(
        "pattern: a sub path that climbs out of the volume",
        {"target": URL, "artifacts": {"pvc": {"claimName": "files", "subPath": "runs/../.."}}},
        "spec.artifacts.pvc.subPath in body should match",
        "spec.artifacts.pvc.subPath: 'runs/../..' does not match",
    ),
    Invalid(
        "pattern: a claim name that is not a DNS name",
        {"target": URL, "artifacts": {"pvc": {"claimName": "Bench_Files"}}},
        "spec.artifacts.pvc.claimName in body should match",
        "spec.artifacts.pvc.claimName: 'Bench_Files' does not match",
    ),
    rule_case("spec.stored-points-fit-the-results",
              {"target": URL, "sweep": {"values": [1, 2, 4]}, "repetitions": 14}),
    Invalid(
        "stored points: a concurrency range without a step (13 powers of two x 4)",
        {"target": URL, "sweep": {"range": "1:4096"}, "repetitions": 4},
        RULES["spec.stored-points-fit-the-results"].message,
        RULES["spec.stored-points-fit-the-results"].message,
    ),
    Invalid(
        "stored points: values x workloads x repetitions (7 x 2 x 3)",
        {"target": URL, "repetitions": 3, "sweep": {
            "values": [1, 2, 3, 4, 5, 6, 7], "workloads": [WL8, {**WL8, "outputTokens": 9}]}},
        RULES["spec.stored-points-fit-the-results"].message,
        RULES["spec.stored-points-fit-the-results"].message,
    ),
    Invalid(
        "stored points: a stepped range (41 points)",
        {"target": URL, "sweep": {"range": "10:50:1"}},
        RULES["spec.stored-points-fit-the-results"].message,
        RULES["spec.stored-points-fit-the-results"].message,
    ),
    Invalid(
        "missing target",
        {"repetitions": 1},
        "spec.target: Required value",
        "spec.target: required",
    ),
    Invalid(
        "too long",
        {"target": {**URL, "model": "m" * 600}},
        "spec.target.model: Too long",
        "spec.target.model: must be at most 512 characters",
    ),
]


def test_the_table_breaks_every_cel_rule() -> None:
    cel_rules = {r.name for r in RULES.values() if r.cel is not None}
    assert cel_rules <= {c.rule for c in INVALID if c.rule}
    assert len(INVALID) >= 15


@pytest.mark.parametrize("case", INVALID, ids=[c.name for c in INVALID])
def test_invalid_spec_is_refused_by_the_server_and_python(
    crd_ready: Any, bench_ns: str, case: Invalid
) -> None:
    server = refusal(crd_ready, bench_ns, body(case.spec))
    found = python_issues(case.spec)
    assert case.server in server, server
    assert any(case.python in i for i in found), found
    if case.rule is not None:
        # one declared rule: the same path and the same message on both sides
        (issue,) = [i for i in found if case.python in i]
        path = issue.split(": ", 1)[0]
        assert f"{path}: Invalid value" in server, (path, server)


def test_python_only_rules_are_the_operators_to_report(crd_ready: Any, bench_ns: str) -> None:
    """What CEL cannot say, the API server admits and Python refuses (documented in the model)."""
    python_only = [r for r in RULES.values() if r.cel is None]
    assert [r.name for r in python_only] == [
        "podSelector.label-keys", "spec.schedule-fires", "spec.time-zone-exists",
        "runner.podLabels-keys", "runner.podAnnotations-keys", "runner.nodeSelector-keys"]
    python_only = python_only[1:]
    spec = {"target": {**URL, "podSelector": {"matchLabels": {"not a key": "x"}}}}
    create(crd_ready, bench_ns, body(spec))
    assert python_issues(spec) == [
        f"spec.target.podSelector.matchLabels: {RULES['podSelector.label-keys'].message}"]
    for schedule in ("0 0 30 2 *", "0 0 * * FRI-MON"):
        spec = {"target": URL, "schedule": schedule}
        create(crd_ready, bench_ns, body(spec))
        assert python_issues(spec) == [f"spec.schedule: {python_only[0].message}"]
    spec = {"target": URL, "schedule": "@daily", "timeZone": "Mars/Olympus"}
    create(crd_ready, bench_ns, body(spec))
    assert python_issues(spec) == [f"spec.timeZone: {python_only[1].message}"]
    # the runner pod's label, annotation and node selector keys, as podSelector's
    for field in ("podLabels", "podAnnotations", "nodeSelector"):
        spec = {"target": URL, "runner": {field: {"not a key": "x"}}}
        create(crd_ready, bench_ns, body(spec))
        assert python_issues(spec) == [
            f"spec.runner.{field}: {RULES[f'runner.{field}-keys'].message}"]


def test_a_name_too_long_for_a_label_is_refused_by_both(crd_ready: Any, bench_ns: str) -> None:
    """metadata.name labels every child (63 characters at most): the CRD's root rule and
    Python refuse a longer one with the same words; 63 is admitted."""
    spec = {"target": URL}
    long = body(spec, "n" * (MAX_NAME + 1))
    assert NAME_RULE.message in refusal(crd_ready, bench_ns, long)
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(long)
    assert [str(i) for i in err.value.issues] == [f"metadata.name: {NAME_RULE.message}"]
    create(crd_ready, bench_ns, body(spec, "n" * MAX_NAME))
    Spec.from_manifest(body(spec, "n" * MAX_NAME))


@pytest.mark.parametrize("spec", [
    {"sweep": {"range": "1:40:1"}},
    {"sweep": {"range": "1:512"}, "repetitions": 4},  # 10 powers of two
    {"sweep": {"values": [1, 2, 4, 8]}, "repetitions": 10},
    {"repetitions": MAX_STORED_POINTS},
    {"sweep": {"type": "input_sequence_length", "range": "128:1024"}, "repetitions": 5},
    {"sweep": {"values": [1, 2, 4, 8], "workloads": [WL8, {**WL8, "outputTokens": 9}]},
     "repetitions": 5},  # a grid: 4 x 2 x 5
])
def test_a_sweep_at_the_stored_points_cap_is_admitted_by_both(
    crd_ready: Any, bench_ns: str, spec: dict[str, Any]
) -> None:
    doc = body({"target": URL, **spec})
    assert stored_points(Spec.from_manifest(doc)) == MAX_STORED_POINTS
    create(crd_ready, bench_ns, doc)


def test_object_read_back_parses_with_the_models_defaults(crd_ready: Any, bench_ns: str) -> None:
    """The server fills defaults from the CRD; they must be the model's, field for field."""
    specs = [doc["spec"] for _, doc in example_benchmarks()] + [
        {"target": {"url": "http://h:1"}},
        {
            "target": {"service": {"name": "vllm"}, "endpointType": "completions"},
            "load": {"mode": "request_rate", "requestRate": 2.5, "maxConcurrency": 16},
            "sweep": {"type": "request_rate", "values": [1, 2.5]},
            "slo": {"e2eP99Ms": 900, "goodputRatio": 0.9},
        },
        # sessions: admitted with the server's default load.concurrency (1) filled in
        {"target": {"url": "http://h:1"},
         "load": {"sessions": {"count": 4, "concurrency": 2, "turnDelayMeanMs": 50}}},
    ]
    for i, spec in enumerate(specs):
        name = f"readback-{i}"
        create(crd_ready, bench_ns, body(spec, name, bench_ns), dry_run=False)
        got = crd_ready.custom.get_namespaced_custom_object(GROUP, VERSION, bench_ns, PLURAL, name)
        parsed = Spec.from_manifest(got)
        assert parsed.namespace == bench_ns
        assert parsed == Spec.from_manifest(spec, namespace=bench_ns)
        assert got["spec"] == Spec.from_manifest(spec).to_dict(), name
    listed = crd_ready.kubectl("get", "llmb", "-n", bench_ns, "-o", "name").stdout.split()
    assert sorted(listed) == sorted(
        f"llmbenchmark.llmbench.io/readback-{i}" for i in range(len(specs))
    )
    by_category = crd_ready.kubectl("get", "llmbench", "-n", bench_ns, "-o", "name").stdout
    assert by_category.split() == listed


def random_specs(n: int, seed: int = 20250607) -> list[dict[str, Any]]:
    """Specs built from edge-case fragments of the rule-heavy fields (ranges, values, cron)."""
    rng = random.Random(seed)
    numbers = ["0", "1", "2", "8", "64", "1.5", "-1", "0.5", "1e2", "1e-3", ".5", "5.", "+3"]
    numbers += ["10000", "20001", "x", "", " 4 ", "1e99", "٣", "0.0000000001"]
    cron = ["*", "0", "5", "59", "60", "23", "24", "1-5", "5-1", "*/15", "*/0", "1,2", "JAN"]
    cron += ["mon-fri", "FRI-MON", "31", "30", "L", "?", "7", "8", "00", "2", "1-31/2"]
    out: list[dict[str, Any]] = []
    for _ in range(n):
        sweep: dict[str, Any] = {"type": rng.choice(SWEEP_TYPES)}
        if rng.random() < 0.6:
            sweep["range"] = ":".join(rng.choice(numbers) for _ in range(rng.choice((2, 3))))
        else:
            pool = [0, 1, 1.5, 2, -1, 1e300, 8, 0.25]
            sweep["values"] = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
        spec: dict[str, Any] = {"target": dict(URL), "sweep": sweep}
        if rng.random() < 0.2:
            spec["load"] = {"mode": "request_rate", "requestRate": 1}
        if rng.random() < 0.2:
            spec["target"]["endpointType"] = "embeddings"
        if rng.random() < 0.5:
            fields = [rng.choice(cron) for _ in range(rng.choice((4, 5, 5, 5, 6)))]
            spec["schedule"] = rng.choice(["@daily", " ".join(fields), " ".join(fields)])
        if rng.random() < 0.5:  # against the stored-points cap
            spec["repetitions"] = rng.choice([2, 3, 5, 6, 13, 20, 40])
        out.append(spec)
    return out


def test_random_specs_get_the_same_verdict_from_both(crd_ready: Any, bench_ns: str) -> None:
    """Hundreds of edge-case combinations: the server refuses a spec exactly when Python's
    issues include a CEL rule, and names the same CEL rules; Python-only rules (cronsim,
    sweep_values' rounding) are the only allowed difference, in Python's direction."""
    cel_messages = {r.message for r in RULES.values() if r.cel is not None}
    disagreements = []
    for spec in random_specs(300):
        try:
            Spec.from_manifest(body(spec))
            python: set[str] = set()
        except SpecError as err:
            python = {i.message for i in err.issues}
        try:
            create(crd_ready, bench_ns, body(spec))
            server = ""
        except ApiException as exc:
            server = str(json.loads(exc.body)["message"])
        python_cel = python & cel_messages
        server_cel = {m for m in cel_messages if m in server}
        if bool(server) != bool(python_cel) or server_cel != python_cel:
            disagreements.append((spec, sorted(python), server))
    assert not disagreements, json.dumps(disagreements[:5], indent=1, ensure_ascii=False)
