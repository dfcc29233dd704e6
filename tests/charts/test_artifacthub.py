"""Chart.yaml's Artifact Hub annotations describe what the chart really ships: the CRD (kind,
version, name), an example that the spec model and the CRD's schema accept, the operator's
image at the chart's appVersion."""

from __future__ import annotations

from typing import Any

import yaml

from llmbench.api import GROUP, KIND, PLURAL, VERSION
from llmbench.api.spec import Spec
from tests.charts.helm import CHART, ROOT, helm

CRD = ROOT / "crds" / "llmbench.io_llmbenchmarks.yaml"


def _annotations() -> dict[str, Any]:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return dict(meta["annotations"])


def test_the_crd_annotation_is_the_crd() -> None:
    crd = yaml.safe_load(CRD.read_text())
    (entry,) = yaml.safe_load(_annotations()["artifacthub.io/crds"])
    assert entry["kind"] == crd["spec"]["names"]["kind"] == KIND
    assert entry["name"] == crd["metadata"]["name"] == f"{PLURAL}.{GROUP}"
    assert entry["version"] in [v["name"] for v in crd["spec"]["versions"] if v["served"]]
    assert entry["version"] == VERSION
    assert entry["displayName"] and entry["description"]


def test_the_crd_example_is_a_valid_benchmark() -> None:
    (example,) = yaml.safe_load(_annotations()["artifacthub.io/crdsExamples"])
    assert example["apiVersion"] == f"{GROUP}/{VERSION}" and example["kind"] == KIND
    spec = Spec.from_manifest(example)  # every rule Python checks
    assert spec.schedule == "0 2 * * *"


def test_the_image_annotation_is_the_charts_default_image() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    (image,) = yaml.safe_load(_annotations()["artifacthub.io/images"])
    assert image["image"] == f"{values['image']['repository']}:{meta['appVersion']}"


def test_the_operator_annotations_and_lint() -> None:
    a = _annotations()
    assert a["artifacthub.io/operator"] == "true"
    assert a["artifacthub.io/operatorCapabilities"] in (
        "Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot")
    assert a["artifacthub.io/license"] == "Apache-2.0"  # pyproject.toml's
    links = yaml.safe_load(a["artifacthub.io/links"])
    assert all(link["url"].startswith("https://") for link in links)
    out = helm("lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout
