"""docs/index.md is the way in: the README points at it, it walks a platform engineer's order,
and every page it and the pages of this area link to exists (a moved page fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "index.md", ROOT / "docs" / "prometheus.md",
         ROOT / "docs" / "genai-perf-flags.md", ROOT / "charts" / "llmbench-operator" / "README.md"]


def test_the_readme_starts_at_the_index_and_the_flag_table_moved() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    top = readme.split("\n## ", 1)[0]
    assert "](docs/index.md)" in top
    assert "](docs/genai-perf-flags.md)" in readme
    assert "| `--concurrency N` |" not in readme  # the table lives in docs/genai-perf-flags.md
    assert "| `--concurrency N` |" in (ROOT / "docs" / "genai-perf-flags.md").read_text()


def test_the_index_is_in_a_platform_engineers_order() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \d+\. (.+)$", text, flags=re.M)
    assert headings == ["Install", "A first benchmark", "Read the results",
                        "Nightly runs and GitOps", "Prometheus and Grafana", "Troubleshooting",
                        "Upgrade and uninstall", "Reference"]
    assert "](upgrade.md)" in text and "](prometheus.md)" in text


def test_every_relative_link_resolves() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}"
