"""The LLMBenchmark spec model: parsing, adversarial input, schema, mapping to a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmbench.runner.spec import (
    API_VERSION,
    Slo,
    Spec,
    SpecError,
    crd_schema,
    json_schema,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def manifest(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"target": {"url": "http://127.0.0.1:8000"}}
    body.update(spec)
    return {"apiVersion": API_VERSION, "kind": "LLMBenchmark", "metadata": {"name": "x"},
            "spec": body}


def issues(doc: Any) -> list[str]:
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(doc)
    return [str(i) for i in err.value.issues]


def test_design_sketch_parses() -> None:
    doc = yaml.safe_load((EXAMPLES / "llmbenchmark-vllm.yaml").read_text())
    spec = Spec.from_manifest(doc)
    assert spec.target.service is not None and spec.target.service.name == "vllm"
    assert spec.sweep is not None and spec.sweep.points()[-1] == 64
    assert spec.slo.limits() == {"ttft_p99": 500, "itl_p99": 50}
    cfg = spec.to_profile_config(16)
    assert cfg.url == "http://vllm.llm.svc:8000"  # namespace from metadata
    assert cfg.load.concurrency == 16 and cfg.load.request_count == 200
    assert cfg.workload.extra_inputs == {"ignore_eos": True}
    assert cfg.goodput == {"ttft": 500, "itl": 50}


def test_every_example_is_a_valid_spec() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "LLMBenchmark":
                Spec.from_manifest(doc)


def test_bare_spec_and_defaults() -> None:
    spec = Spec.from_manifest({"target": {"url": "http://h:1"}})
    assert spec.sweep is None and spec.points() == [None]
    cfg = spec.to_profile_config()
    assert cfg.load.mode == "concurrency" and cfg.load.request_count == 100
    assert cfg.workload.synthetic_input_tokens_mean == 550


def test_sweep_points_override_the_swept_quantity() -> None:
    spec = Spec.from_manifest(manifest(sweep={"type": "request_rate", "values": [2, 4]},
                                       load={"maxConcurrency": 8, "mode": "request_rate",
                                             "requestRate": 1}))
    cfg = spec.to_profile_config(4)
    assert cfg.load.mode == "request_rate" and cfg.load.request_rate == 4.0
    assert cfg.load.concurrency == 8
    spec = Spec.from_manifest(
        manifest(sweep={"type": "input_sequence_length", "range": "128:512:128"})
    )
    assert spec.points() == [128, 256, 384, 512]
    assert spec.to_profile_config(384).workload.synthetic_input_tokens_mean == 384
    spec = Spec.from_manifest(manifest(sweep={"type": "output_sequence_length", "values": [8]}))
    assert spec.to_profile_config(8).workload.output_tokens_mean == 8


def test_request_count_default_scales_with_concurrency() -> None:
    spec = Spec.from_manifest(manifest(sweep={"type": "concurrency", "range": "1:64"}))
    assert spec.to_profile_config(64).load.request_count == 256


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
    text = "\n".join(found)
    assert "spec.load.concurency: unknown field; did you mean concurrency?" in text
    assert "spec.load.warmupRequestCount: -1: must be at least 0" in text
    assert "spec.sweep.type: 'latency': expected one of concurrency, request_rate" in text
    assert "spec.repetitions: 0: must be at least 1" in text
    assert "spec.placement: 'Elsewhere': expected one of SameNode, SameZone, Any" in text
    assert "spec.slo.ttftP99Ms: must be a number, got 'fast'" in text


def test_cross_field_rules() -> None:
    assert issues({"target": {}})[0].startswith("spec.target: set exactly one of url")
    both = {"url": "http://a:1", "service": {"name": "s"}}
    assert any("exactly one of url" in i for i in issues({"target": both}))
    no_values = manifest(sweep={"type": "concurrency"})
    assert "spec.sweep: set exactly one of range" in issues(no_values)[0]
    assert issues(manifest(sweep={"type": "concurrency", "range": "8:1"})) == [
        "spec.sweep.range: start 8 is greater than end 1"
    ]
    assert issues(manifest(load={"mode": "request_rate"})) == [
        "spec.load.requestRate: required when mode is request_rate"
    ]
    assert "expected 5 cron fields" in issues(manifest(schedule="nightly"))[0]
    assert "needs outputTokens.mean" in issues(
        manifest(workload={"outputTokens": {"deterministic": True}})
    )[0]
    assert "target.url: 'vllm:8000' is not an http(s):// URL" in issues(
        {"target": {"url": "vllm:8000"}}
    )[0]


def test_wrong_kind_and_shapes() -> None:
    assert issues({"apiVersion": "v1", "kind": "Pod", "spec": {}}) == [
        "kind: 'Pod': expected LLMBenchmark",
        f"apiVersion: 'v1': expected {API_VERSION}",
    ]
    assert issues([1, 2]) == ["spec: expected a mapping (YAML object)"]
    assert issues({"target": "http://x"}) == ["spec.target: expected a mapping, got str"]
    assert issues(manifest(repetitions=True))[0] == "spec.repetitions: must be an integer, got True"
    assert "must be a string" in issues(manifest(sweep={"type": "concurrency", "range": 5}))[0]


def test_to_dict_round_trips() -> None:
    doc = yaml.safe_load((EXAMPLES / "llmbenchmark-vllm.yaml").read_text())
    spec = Spec.from_manifest(doc)
    again = Spec.from_manifest(spec.to_dict())
    assert again.to_dict() == spec.to_dict()
    assert spec.to_dict()["sweep"] == {"type": "concurrency", "range": "1:64",
                                       "stopAfterKnee": True, "onPointFailure": "continue"}


def test_from_profile_config_round_trip() -> None:
    spec = Spec.from_manifest(manifest(workload={"inputTokens": {"mean": 64},
                                                 "outputTokens": {"mean": 8},
                                                 "extraInputs": {"ignore_eos": True}},
                                       load={"concurrency": 3, "requestCount": 9},
                                       slo={"ttftP99Ms": 100}))
    cfg = spec.to_profile_config()
    back = Spec.from_profile_config(cfg)
    assert back.to_profile_config().public_dict() == cfg.public_dict()
    assert back.slo == Slo(ttft_p99_ms=100)


def test_json_schema_is_generated_from_the_model() -> None:
    schema = json_schema()
    props = schema["properties"]
    assert set(props) == {"target", "workload", "load", "sweep", "repetitions", "slo",
                          "telemetry", "placement", "schedule", "cost"}
    assert schema["required"] == ["target"]
    load = props["load"]["properties"]
    assert load["concurrency"] == {"type": "integer", "description": load["concurrency"][
        "description"], "minimum": 1, "default": 1}
    assert props["sweep"]["properties"]["type"]["enum"][0] == "concurrency"
    assert props["target"]["x-kubernetes-validations"][0]["rule"] == (
        "has(self.url) != has(self.service)"
    )
    assert props["workload"]["properties"]["extraInputs"][
        "x-kubernetes-preserve-unknown-fields"] is True
    assert props["slo"]["properties"]["goodputRatio"]["maximum"] == 1

    def walk(node: dict[str, Any]) -> None:
        assert "type" in node and "description" in node or node.get("type") == "object"
        for child in node.get("properties", {}).values():
            walk(child)

    walk(schema)
    assert crd_schema()["properties"]["spec"] == schema


def test_public_surface() -> None:
    """The spec model is public API (the CRD derives from it): its names are deliberate."""
    import llmbench.runner.spec as spec_mod

    assert sorted(spec_mod.__all__) == sorted([
        "API_VERSION", "KIND", "Cost", "Load", "OutputTokens", "SecretKeyRef", "ServiceRef",
        "Slo", "Spec", "SpecError", "SpecIssue", "Sweep", "Target", "Telemetry",
        "TokenDistribution", "Workload", "crd_schema", "json_schema",
    ])
    for name in spec_mod.__all__:
        assert getattr(spec_mod, name) is not None
