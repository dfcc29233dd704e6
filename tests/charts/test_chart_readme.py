"""The chart's README is generated from values.yaml's comments (hack/chart_readme.py), like the
CRD from the model: it must equal the script's output, and every value must have a description.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm import CHART, ROOT

sys.path.insert(0, str(ROOT / "hack"))
import chart_readme  # noqa: E402  (a script in hack/, imported for its parser)

SCRIPT = ROOT / "hack" / "chart_readme.py"


def _leaves(doc: Any, prefix: str = "") -> set[str]:
    """Every leaf path of the parsed values (an empty map or list is a leaf: a default)."""
    if isinstance(doc, dict) and doc:
        return {p for k, v in doc.items() for p in _leaves(v, f"{prefix}{k}.")}
    return {prefix.rstrip(".")}


def test_the_chart_readme_is_the_generators_output() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert (CHART / "README.md").read_text() == out.stdout, (
        "charts/llmbench-operator/README.md is not the generator's output: run "
        "python hack/chart_readme.py > charts/llmbench-operator/README.md"
    )


def test_every_value_is_read_and_documented() -> None:
    text = (CHART / "values.yaml").read_text()
    values = chart_readme.parse(text)
    leaves = {v.path for v in values if v.default is not None}
    assert leaves == _leaves(yaml.safe_load(text))  # the reader skipped nothing
    assert chart_readme.undocumented(values) == []
    readme = (CHART / "README.md").read_text()
    for path in leaves:
        assert f"| `{path}` |" in readme, path


def test_an_undocumented_value_fails_naming_it(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart, symlinks=True)
    values = chart / "values.yaml"
    values.write_text(values.read_text() + "\nnewKnob: 3\n")
    with pytest.raises(ValueError, match="no description for newKnob"):
        chart_readme.render(chart)
    values.write_text(values.read_text().replace("\nnewKnob: 3\n",
                                                 "\n# What the knob does.\nnewKnob: 3\n"))
    assert "| `newKnob` | `3` | What the knob does. |" in chart_readme.render(chart)


def test_a_block_list_is_refused_not_skipped() -> None:
    with pytest.raises(ValueError, match="values.yaml:2: not a `key: value` line"):
        chart_readme.parse("tolerations:\n  - key: gpu\n")
