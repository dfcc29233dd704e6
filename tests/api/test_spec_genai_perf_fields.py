"""Spec fields that GenAI-Perf's flags map onto: several models, the tokenizer revision and
the goodput limits named after GenAI-Perf's (time to second token, throughput per user)."""

from __future__ import annotations

from typing import Any

import pytest

from llmbench.api import Spec, SpecError
from llmbench.api.crd import crd

URL = {"url": "http://127.0.0.1:8000"}


def spec(**body: Any) -> Spec:
    return Spec.from_manifest({"target": dict(URL), **body})


def issues(**body: Any) -> list[str]:
    with pytest.raises(SpecError) as err:
        Spec.from_manifest({"target": dict(URL), **body})
    return [str(i) for i in err.value.issues]


def test_models_and_strategy() -> None:
    s = spec(workload={"models": ["a", "b"], "modelSelectionStrategy": "random"})
    assert s.workload.models == ["a", "b"] and s.workload.model_selection_strategy == "random"
    assert spec().workload.models is None
    assert spec().workload.model_selection_strategy == "round_robin"
    assert issues(workload={"models": [""]})[0].startswith("spec.workload.models[0]")
    assert issues(workload={"models": ["m"] * 65})[0].startswith("spec.workload.models")
    assert issues(workload={"modelSelectionStrategy": "first"})[0].startswith(
        "spec.workload.modelSelectionStrategy"
    )


def test_tokenizer_revision() -> None:
    assert spec(workload={"tokenizerRevision": "v1.0"}).workload.tokenizer_revision == "v1.0"
    assert issues(workload={"tokenizerRevision": "x" * 257})


@pytest.mark.parametrize(
    "limit", [{"ttstP99Ms": 20}, {"minOutputTokenThroughputPerUser": 50}]
)
def test_new_goodput_limits_count_for_the_goodput_ratio(limit: dict[str, float]) -> None:
    s = spec(slo={"goodputRatio": 0.9, **limit})
    assert set(s.slo.per_request()) <= {"ttst", "otpu"} and s.slo.per_request()
    assert s.slo.limits() == {"goodput_ratio": 0.9}  # not p99 SLOs of the sweep


def test_new_goodput_limits_need_a_generating_endpoint() -> None:
    found = issues(
        target={**URL, "endpointType": "embeddings"}, slo={"minOutputTokenThroughputPerUser": 5}
    )
    assert found[0].startswith("spec.slo:")


def test_cel_rules_name_the_new_fields() -> None:
    """The API server enforces what Python does: the CEL rules know the new limits."""
    text = str(crd())
    assert "has(self.ttstP99Ms)" in text
    assert "has(self.slo.minOutputTokenThroughputPerUser)" in text
