"""``llmbench report DIR``: rebuild plots and the HTML report from saved artefacts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmbench.runner.report.html import REPORT_HTML, build_report

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``llmbench report DIR [--output-file FILE]`` (``-o`` is the output format in the other
    commands, so the file has its own flag)."""
    p.add_argument("dir", type=Path, help="an `llmbench analyze` or `llmbench profile` folder")
    p.add_argument("--output-file", type=Path, metavar="FILE",
                   help=f"HTML file (default DIR/{REPORT_HTML})")


def run(args: argparse.Namespace) -> int:
    """Rebuilds plots and the HTML report; 0 on success, 2 when DIR is not a result folder."""
    try:
        out = build_report(args.dir, args.output_file)
    except ValueError as exc:
        print(f"llmbench report: error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0
