"""Prints charts/llmbench-operator/README.md, generated from the chart's values.yaml comments.

Usage: python hack/chart_readme.py > charts/llmbench-operator/README.md

values.yaml is the one place a value is described: the comment lines right above a key are its
description, and that of the leaf keys right after it at the same level (no blank line, no
comment between: ``podLabels`` and ``podAnnotations`` under one comment); a key with children
(a section) may carry the description of all of them (its comment is shown on the section's
row, and the children without a comment of their own say "see <section>"). The table lists
every leaf value with its default as values.yaml writes it.
tests/charts/test_chart_readme.py fails when the README is not this script's output, and when
a value has no description, neither its own nor its section's.

Only the block style values.yaml uses is read: ``key: value`` or ``key:`` with its children
indented by two spaces, flow-style lists and maps (``[]``, ``{}``, ``[ALL]``) as values, ``#``
comment lines. Anything else (a block list ``- item``, a multi-line scalar) is an error naming
the line, so the chart cannot grow a value this script would skip.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "llmbench-operator"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_./-]+):(?: (?P<value>.*))?$")


@dataclass
class Value:
    """One key of values.yaml: its dotted path, its default (None for a section) and the
    comment lines above it."""

    path: str
    default: str | None
    comment: str
    line: int


def parse(text: str) -> list[Value]:
    """Every key of ``text`` in file order (sections and leaves); ValueError naming a line this
    reader does not understand."""
    out: list[Value] = []
    stack: list[tuple[int, str]] = []  # (indent, key) of the open sections
    comment: list[str] = []
    group: tuple[int, str] | None = None  # (indent, comment) a following leaf sibling shares
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            comment, group = [], None  # a blank line ends a comment block and a group
            continue
        if stripped.startswith("#"):
            comment.append(stripped.lstrip("#").strip())
            continue
        m = _KEY.match(line)
        if m is None:
            raise ValueError(f"values.yaml:{n}: not a `key: value` line: {line!r}")
        indent = len(m["indent"])
        if indent % 2:
            raise ValueError(f"values.yaml:{n}: indent by two spaces")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if indent != 2 * len(stack):
            raise ValueError(f"values.yaml:{n}: indented deeper than its section")
        path = ".".join([k for _, k in stack] + [m["key"]])
        value = m["value"]
        if value is not None and " #" in value:
            raise ValueError(f"values.yaml:{n}: put the comment on the line above the key")
        text_ = " ".join(comment)
        if not text_ and value is not None and group is not None and group[0] == indent:
            text_ = group[1]
        out.append(Value(path, value, text_, n))
        comment = []
        group = (indent, text_) if value is not None and text_ else None
        if value is None:
            stack.append((indent, m["key"]))
    return out


def undocumented(values: list[Value]) -> list[str]:
    """The leaves with no description of their own and none on a section above them."""
    described = {v.path for v in values if v.comment}
    missing = []
    for v in values:
        if v.default is None:
            continue
        parts = v.path.split(".")
        if not any(".".join(parts[:i]) in described for i in range(1, len(parts) + 1)):
            missing.append(v.path)
    return missing


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(chart: Path = CHART) -> str:
    """The README's text."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    values = parse((chart / "values.yaml").read_text())
    missing = undocumented(values)
    if missing:
        raise ValueError(f"values.yaml: no description for {', '.join(missing)}: write a "
                         "comment line above the key (or its section)")
    sections = {v.path for v in values if v.default is None}
    rows = []
    for v in values:
        if v.default is None and not v.comment:
            continue
        parent = v.path.rpartition(".")[0]
        if v.comment:
            text = v.comment
        else:  # a leaf described by its section
            while parent and not any(s.path == parent and s.comment for s in values):
                parent = parent.rpartition(".")[0]
            text = f"see `{parent}`"
        default = "" if v.path in sections else f"`{v.default}`"
        rows.append(f"| `{v.path}` | {_cell(default)} | {_cell(text)} |")
    return "\n".join([
        f"# {meta['name']}",
        "",
        "<!-- Generated by hack/chart_readme.py from values.yaml and Chart.yaml; do not edit:",
        "     python hack/chart_readme.py > charts/llmbench-operator/README.md -->",
        "",
        " ".join(str(meta["description"]).split()),
        "",
        f"Chart version {meta['version']}, app version {meta['appVersion']}, Kubernetes "
        f"`{meta['kubeVersion']}`. The project's documentation: "
        "[docs/index.md](../../docs/index.md).",
        "",
        "## Install",
        "",
        "```bash",
        f"helm install {meta['name']} charts/{meta['name']} -n llmbench-system "
        "--create-namespace",
        "kubectl apply -f examples/llmbenchmark-vllm.yaml && kubectl get llmb -w",
        "```",
        "",
        "The CRD is in the chart's `crds/` (helm installs it once and never upgrades or deletes "
        "it: [docs/upgrade.md](../../docs/upgrade.md)). Prometheus, the ServiceMonitor and the "
        "Grafana dashboard: [docs/prometheus.md](../../docs/prometheus.md).",
        "",
        "## Values",
        "",
        "`values.schema.json` checks them: a wrong type or an unknown key fails `helm install` "
        "naming the value. A section's row describes the values under it.",
        "",
        "| value | default | description |",
        "| --- | --- | --- |",
        *rows,
        "",
    ])


def main() -> int:
    try:
        sys.stdout.write(render())
    except ValueError as exc:
        print(f"hack/chart_readme.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
