"""The manifests shipped in ``examples/``, for the tests that validate and run them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from llmbench.api import KIND

__all__ = ["EXAMPLES", "example_benchmarks"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example_benchmarks() -> list[tuple[str, dict[str, Any]]]:
    """Every ``LLMBenchmark`` document in ``examples/`` and its folders (``rollout-gate/``),
    with its file name relative to ``examples/``."""
    out = []
    for f in sorted(EXAMPLES.glob("*.yaml")) + sorted(EXAMPLES.glob("*/*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == KIND:
                out.append((str(f.relative_to(EXAMPLES)), doc))
    return out
