"""``llmbench crd``: print the LLMBenchmark CustomResourceDefinition generated from the model.

``crds/llmbench.io_llmbenchmarks.yaml`` is this command's output; a test keeps them equal.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """No options: the CRD is fully determined by the API model."""


def run(args: argparse.Namespace) -> int:
    """Writes the CRD as YAML to stdout."""
    from llmbench.api.crd import crd_yaml

    sys.stdout.write(crd_yaml())
    return 0
