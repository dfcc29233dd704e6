"""Every shipped example parses, and every one that targets the local simulator runs.

The API server's verdict on each example is ``tests/e2e/test_crd_admission.py``'s; here each
manifest that points at ``http://localhost:8000`` (the laptop examples) is run with
``llmbench analyze -f`` against a simulator, shortened but otherwise as shipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmbench.api import Spec
from llmbench.cli import main
from tests.shipped_examples import EXAMPLES, example_benchmarks
from tests.sim_process import running_sim

LOCAL = "http://localhost:8000"


def test_every_example_benchmark_is_valid_and_the_kustomization_lists_real_files() -> None:
    docs = example_benchmarks()
    assert len(docs) >= 5
    for _, doc in docs:
        Spec.from_manifest(doc)
    kustomization = yaml.safe_load((EXAMPLES / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (EXAMPLES / resource).is_file(), resource
    # laptop examples (the local sim's URL) stay out of what GitOps applies to a cluster
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((EXAMPLES / resource).read_text()):
            assert doc.get("spec", {}).get("target", {}).get("url") != LOCAL, resource


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(["--ttft-ms", "5", "--itl-ms", "1", "--max-num-seqs", "16"]) as url:
        yield url


RUNNABLE = [(name, doc) for name, doc in example_benchmarks()
            if doc["spec"]["target"].get("url") == LOCAL]


@pytest.mark.parametrize(("name", "doc"), RUNNABLE, ids=[n for n, _ in RUNNABLE])
def test_local_examples_run_against_the_simulator(
    name: str, doc: dict[str, Any], sim_url: str, tmp_path: Path
) -> None:
    spec = doc["spec"]
    spec["target"]["url"] = sim_url
    spec["load"].update(requestCount=6, warmupRequestCount=1)
    sweep = spec["sweep"]
    if "values" in sweep:
        sweep["values"] = sweep["values"][:2]
    else:
        sweep["range"] = "1:2"
    f = tmp_path / name
    f.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["analyze", "-f", str(f), "--artifact-dir", str(out), "--no-plots"]) == 0
    data = json.loads((out / "analyze_export_genai_perf.json").read_text())
    assert len(data["points"]) == 2
    assert all(p["status"] == "ok" for p in data["points"]), data["points"]
