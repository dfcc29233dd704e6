"""docs/resource.md is generated from the CRD and lists every field the API server knows."""

from __future__ import annotations

from pathlib import Path

from llmbench.api.crd import crd
from llmbench.api.reference import field_rows, reference_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "resource.md"


def test_committed_reference_is_what_the_code_generates() -> None:
    assert DOC.read_text() == reference_markdown(), (
        "docs/resource.md is stale: llmbench crd --reference > docs/resource.md"
    )


def test_every_crd_field_is_in_the_reference_with_its_default() -> None:
    text = reference_markdown()
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    paths = [p for part in ("spec", "status") for p, _ in field_rows(root[part], part)]
    assert len(paths) > 100
    for path in paths:
        assert f"| `{path}` |" in text, path
    assert "| `spec.runner.backoffLimit` | integer | `3` | >= 0; <= 20 |" in text
    assert "| `spec.load.requestRate` | number |  | > 0 |" in text
    # a table cell never splits on a '|' inside a pattern
    spec_table = text.split("## Cross-field rules")[0]
    for line in spec_table.splitlines():
        if line.startswith("| `spec."):
            assert line.count(" | ") == 4, line
