"""``llmbench crd``: print the LLMBenchmark CustomResourceDefinition generated from the model.

``crds/llmbench.io_llmbenchmarks.yaml`` is this command's output, ``docs/resource.md`` is
``llmbench crd --reference``'s; tests keep both equal to what the code generates.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The CRD is fully determined by the API model; ``--reference`` prints its docs instead."""
    p.add_argument(
        "--reference", action="store_true",
        help="print the resource reference (Markdown: every field, default, validation, rule)",
    )


def run(args: argparse.Namespace) -> int:
    """Writes the CRD as YAML (or the reference as Markdown) to stdout."""
    if args.reference:
        from llmbench.api.reference import reference_markdown

        sys.stdout.write(reference_markdown())
        return 0
    from llmbench.api.crd import crd_yaml

    sys.stdout.write(crd_yaml())
    return 0
