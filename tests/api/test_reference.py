"""docs/resource.md is generated from the CRD and lists every field the API server knows."""

from __future__ import annotations

from pathlib import Path

from llmbench.api import spec_rules
from llmbench.api.crd import crd
from llmbench.api.reference import field_rows, reference_markdown
from llmbench.api.spec import NAME_RULE

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


def test_the_rule_table_is_spec_rules_with_why_a_rule_has_no_cel() -> None:
    """The rule table is generated, not written: one row per rule of ``spec_rules()``, in its
    order, and a Python-only rule says why it has no CEL form (what the model's docstring
    table used to say by hand)."""
    table = reference_markdown().split("## Cross-field rules")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `spec")]
    rules = spec_rules()
    assert len(rows) == len(rules) > 40
    for row, (where, rule) in zip(rows, rules, strict=True):
        assert row.startswith(f"| `{where}` | {' '.join(rule.message.split())} |"), row
        if rule.cel is None:
            assert rule.python_only is not None and rule.python_only in row, row
        else:
            assert row.endswith("| API server (CEL) and Python |"), row
    assert sum(rule.cel is None for _, rule in rules) >= 2
    # the CRD root's rule on the name leads the table
    first = next(line for line in table.splitlines() if line.startswith("| `"))
    assert first == f"| `metadata.name` | {NAME_RULE.message} | API server (CEL) and Python |"
