"""Malformed LLMBenchmark documents: the model refuses each with a path and a reason, never a crash.

Manifests come from users, kubectl, the API server and YAML's own surprises (``1:64`` unquoted
is the sexagesimal integer 124). Whatever arrives, ``Spec.from_manifest`` either returns a valid
spec or raises :class:`SpecError`; these tests feed it what a careless or hostile author might.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import yaml

from llmbench.api import API_VERSION, KIND, Spec, SpecError

URL = {"url": "http://127.0.0.1:8000"}


def issues(doc: Any) -> list[str]:
    with pytest.raises(SpecError) as err:
        Spec.from_manifest(doc)
    assert err.value.issues, "a SpecError always names at least one issue"
    return [str(i) for i in err.value.issues]


def full(spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "x"}, "spec": spec}


# ----------------------------------------------------------------------------------------------
# shapes
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [None, [], [1, 2], "spec", 5, 1.5, True, b"target: x"])
def test_document_that_is_not_a_mapping(doc: Any) -> None:
    assert issues(doc) == ["spec: expected a mapping (YAML object)"]


@pytest.mark.parametrize(
    ("spec", "kind"), [([1], "list"), ("x", "str"), (None, "NoneType"), (3, "int")]
)
def test_spec_that_is_not_a_mapping(spec: Any, kind: str) -> None:
    assert issues(full(spec)) == [f"spec: expected a mapping, got {kind}"]


def test_wrong_kind_and_api_version_are_both_reported() -> None:
    assert issues({"apiVersion": "v1", "kind": "Pod", "spec": {}}) == [
        "kind: 'Pod': expected LLMBenchmark",
        f"apiVersion: 'v1': expected {API_VERSION}",
    ]
    assert issues({"apiVersion": "llmbench.io/v1", "kind": KIND, "spec": {"target": URL}}) == [
        f"apiVersion: 'llmbench.io/v1': expected {API_VERSION}"
    ]
    assert issues({"kind": KIND, "apiVersion": API_VERSION}) == ["spec: missing"]
    assert issues({"kind": ["LLMBenchmark"], "apiVersion": API_VERSION, "spec": {}})[0] == (
        "kind: ['LLMBenchmark']: expected LLMBenchmark"
    )


def test_odd_metadata_is_ignored_not_fatal() -> None:
    for meta in ("x", None, [], {"namespace": 5}, {"namespace": None}):
        doc = full({"target": URL}) | {"metadata": meta}
        assert Spec.from_manifest(doc).namespace is None


def test_empty_spec_needs_a_target() -> None:
    assert issues({"target": None}) == ["spec.target: must be a mapping, not null"]
    assert issues(full({})) == ["spec.target: required"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"load": []}, "spec.load: expected a mapping, got list"),
        ({"load": "fast"}, "spec.load: expected a mapping, got str"),
        ({"workload": {"inputTokens": [128]}}, "spec.workload.inputTokens: expected a mapping"),
        ({"workload": {"extraInputs": ["ignore_eos"]}}, "spec.workload.extraInputs: must be a"),
        ({"target": {**URL, "podSelector": "app=vllm"}}, "spec.target.podSelector: expected a"),
        ({"target": {"service": "vllm"}}, "spec.target.service: expected a mapping, got str"),
        ({"sweep": {"values": {"a": 1}}}, "spec.sweep.values: must be a list of numbers"),
        ({"sweep": [{"range": "1:8"}]}, "spec.sweep: expected a mapping, got list"),
        ({"schedule": ["0 2 * * *"]}, "spec.schedule: must be a string"),
    ],
)
def test_lists_where_maps_and_maps_where_lists(spec: dict[str, Any], expected: str) -> None:
    found = issues({"target": dict(URL)} | spec)
    assert any(i.startswith(expected) for i in found), found


# ----------------------------------------------------------------------------------------------
# nulls
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"repetitions": None}, "spec.repetitions: must be an integer, not null"),
        ({"load": None}, "spec.load: must be a mapping, not null"),
        ({"load": {"mode": None}}, "spec.load.mode: None: expected one of concurrency"),
        ({"telemetry": {"dcgm": None}}, "spec.telemetry.dcgm: must be a string, not null"),
        ({"target": {**URL, "streaming": None}}, "spec.target.streaming: must be true or false"),
        ({"workload": {"inputTokens": {"stddev": None}}}, "must be a number, not null"),
        ({"sweep": {"range": "1:2", "values": [None]}}, "spec.sweep.values[0]: must be a number"),
    ],
)
def test_null_where_a_value_is_required(spec: dict[str, Any], expected: str) -> None:
    found = issues({"target": dict(URL)} | spec)
    assert any(expected in i for i in found), found


def test_null_optional_fields_read_as_unset() -> None:
    """As the API server prunes them: ``sweep: null`` is no sweep."""
    spec = Spec.from_manifest(
        {
            "target": {**URL, "model": None, "service": None},
            "sweep": None,
            "schedule": None,
            "slo": {"ttftP99Ms": None},
            "workload": {"outputTokens": {"mean": None}},
        }
    )
    assert spec.sweep is None and spec.schedule is None and spec.slo.limits() == {}
    assert "sweep" not in spec.to_dict()


# ----------------------------------------------------------------------------------------------
# numbers
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"load": {"concurrency": 10**30}},
            "spec.load.concurrency: 1000000000000000000000000000000: out of range",
        ),
        ({"workload": {"seed": 2**63}}, "spec.workload.seed: 9223372036854775808: out of range"),
        ({"repetitions": 1e300}, "spec.repetitions: "),
        (
            {"load": {"requestRate": math.inf}},
            "spec.load.requestRate: must be a finite number, got inf",
        ),
        (
            {"load": {"requestRate": math.nan}},
            "spec.load.requestRate: must be a finite number, got nan",
        ),
        ({"slo": {"ttftP99Ms": -math.inf}}, "spec.slo.ttftP99Ms: must be a finite number"),
        ({"sweep": {"values": [1, math.inf]}}, "spec.sweep.values[1]: must be a finite number"),
        ({"load": {"concurrency": math.inf}}, "spec.load.concurrency: must be an integer, got inf"),
        ({"load": {"concurrency": -(2**64)}}, "spec.load.concurrency: -18446744073709551616: must"),
        ({"load": {"concurrency": 1 + 2**-40}}, "spec.load.concurrency: must be an integer"),
    ],
)
def test_huge_and_non_finite_numbers(spec: dict[str, Any], expected: str) -> None:
    found = issues({"target": dict(URL)} | spec)
    assert any(i.startswith(expected) for i in found), found


def test_largest_int64_and_huge_floats_are_values() -> None:
    spec = Spec.from_manifest(
        {
            "target": URL,
            "workload": {"seed": 2**63 - 1},
            "load": {"mode": "request_rate", "requestRate": 1e308},
            "sweep": {"type": "request_rate", "values": [1e300]},
        }
    )
    assert spec.workload.seed == 2**63 - 1
    assert spec.points() == [1e300]


def test_unquoted_yaml_range_is_an_integer() -> None:
    """YAML 1.1 reads ``1:32`` as 92 (base 60): the message says a string is needed."""
    doc = yaml.safe_load("target: {url: 'http://h:1'}\nsweep: {range: 1:32}\n")
    assert doc["sweep"]["range"] == 92
    assert issues(doc) == ["spec.sweep.range: must be a string, got 92"]


def test_yaml_booleans_and_numbers_in_string_fields() -> None:
    doc = yaml.safe_load("target: {url: 'http://h:1', model: 3.1, endpointType: yes}\n")
    found = issues(doc)
    assert "spec.target.model: must be a string, got 3.1" in found
    assert "spec.target.endpointType: True: expected one of chat, completions, embeddings" in found


# ----------------------------------------------------------------------------------------------
# unicode, lengths, keys
# ----------------------------------------------------------------------------------------------


def test_unicode_keys_get_a_suggestion() -> None:
    assert issues({"tärget": URL, "target": URL}) == [
        "spec.tärget: unknown field; did you mean target?"
    ]
    assert issues({"target": URL, "lоad": {}})[0].startswith(
        "spec.lоad: unknown field"
    )  # Cyrillic o


def test_unicode_values() -> None:
    spec = Spec.from_manifest(
        {"target": {"url": "http://modèle.example:8000", "model": "モデル/名前"}}
    )
    assert spec.target.model == "モデル/名前"
    assert Spec.from_manifest(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (
            {"sweep": {"range": "١:٨"}},
            "spec.sweep.range",
        ),  # Arabic-Indic digits: float() takes them
        ({"sweep": {"range": "1:\u20038"}}, "spec.sweep.range"),  # em space
        ({"sweep": {"range": "１:８"}}, "spec.sweep.range"),  # full-width digits
        ({"schedule": "０ ２ * * *"}, "spec.schedule"),
        ({"schedule": "0\u00a02 * * *"}, "spec.schedule"),  # no-break space
        ({"target": {"url": "http://\u2003host"}}, None),  # a space-like host char is a host char
        ({"target": {"url": "https://h", "endpoint": "\u2215v1"}}, "spec.target.endpoint"),
    ],
)
def test_unicode_lookalikes_in_checked_fields(spec: dict[str, Any], path: str | None) -> None:
    doc = {"target": dict(URL)} | spec
    if path is None:
        Spec.from_manifest(doc)
    else:
        assert [i.split(": ")[0] for i in issues(doc)] == [path]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"target": {"url": "http://" + "h" * 3000}}, "spec.target.url: must be at most 2048"),
        ({"target": {**URL, "model": "m" * 513}}, "spec.target.model: must be at most 512"),
        ({"sweep": {"range": "1" * 40 + ":" + "2" * 40}}, "spec.sweep.range: must be at most 64"),
        ({"target": {"service": {"name": "s" * 254}}}, "spec.target.service.name: must be at most"),
        ({"cost": {"currency": "€" * 17}}, "spec.cost.currency: must be at most 16 characters"),
    ],
)
def test_string_lengths_are_bounded(spec: dict[str, Any], expected: str) -> None:
    """The CRD bounds every string (CEL cost); Python refuses the same lengths."""
    found = issues({"target": dict(URL)} | spec)
    assert any(i.startswith(expected) for i in found), found


def test_non_string_keys() -> None:
    found = issues({"target": URL, "workload": {"extraInputs": {1: "x"}}})
    assert found == ["spec.workload.extraInputs: keys must be strings, got 1"]
    found = issues({"target": URL, 7: "x"})
    assert found == ["spec: keys must be strings, got 7"]


def test_bytes_are_not_strings() -> None:
    assert issues({"target": {"url": b"http://h:1"}}) == [
        "spec.target.url: must be a string, got b'http://h:1'"
    ]


def test_deep_free_form_maps_are_kept_verbatim() -> None:
    deep: Any = {"leaf": [1, {"x": None}]}
    for _ in range(50):
        deep = {"k": deep}
    spec = Spec.from_manifest({"target": URL, "workload": {"extraInputs": deep}})
    assert spec.to_dict()["workload"]["extraInputs"] == deep


# ----------------------------------------------------------------------------------------------
# robustness
# ----------------------------------------------------------------------------------------------


def test_parsing_does_not_change_the_document() -> None:
    doc = full(
        {
            "target": {**URL, "podSelector": {"matchLabels": {"a": "b"}}},
            "sweep": {"type": "concurrency", "values": [1, 2]},
            "workload": {"extraInputs": {"ignore_eos": True}},
        }
    )
    before = copy.deepcopy(doc)
    spec = Spec.from_manifest(doc)
    assert doc == before
    spec.workload.extra_inputs["added"] = 1
    assert doc == before


def test_many_errors_at_once_are_all_listed() -> None:
    found = issues(
        {
            "target": {"url": "ftp://x", "endpoint": "v1", "endpointType": "chat2", "x": 1},
            "load": {"concurrency": 0, "workers": "2", "mode": "closed"},
            "workload": {"inputTokens": {"mean": -5}, "outputTokens": {"mean": 1.5}},
            "repetitions": 1000,
            "placement": None,
            "schedule": "* * * *",
            "telemetry": {"dcgm": "on"},
            "cost": {"pricePerHour": "cheap"},
        }
    )
    assert {i.split(": ")[0] for i in found} == {
        "spec.target.endpointType",
        "spec.target.x",
        "spec.load.concurrency",
        "spec.load.workers",
        "spec.load.mode",
        "spec.workload.inputTokens.mean",
        "spec.workload.outputTokens.mean",
        "spec.repetitions",
        "spec.placement",
        "spec.cost.pricePerHour",
    }
    assert len(found) == len(set(found))
    # with the schema satisfied, the rules speak: every one of them
    found = issues(
        {
            "target": {"url": "ftp://x", "endpoint": "v1"},
            "load": {"maxConcurrency": 4},
            "schedule": "* * * *",
            "telemetry": {"dcgm": "on"},
            "workload": {"outputTokens": {"deterministic": True}},
        }
    )
    assert [i.split(": ")[0] for i in found] == [
        "spec.target.url",
        "spec.target.endpoint",
        "spec.workload.outputTokens.deterministic",
        "spec.load.maxConcurrency",
        "spec.telemetry.dcgm",
        "spec.schedule",
    ]


def test_a_valid_spec_inside_a_hostile_manifest() -> None:
    """Extra top-level keys (status, managedFields) are the API server's, not ours."""
    doc = full({"target": URL}) | {"status": {"phase": "Running"}, "extra": [1, 2]}
    assert Spec.from_manifest(doc).target.url == URL["url"]
