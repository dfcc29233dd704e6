"""``llmbench compare A B``: two profiles or sweeps side by side; exit 1 on regression.

Exit codes (:mod:`llmbench.cli.output`): 0 no regression, 1 regressed, 2 bad flags or an input
that is not an llmbench export, 3 A or B does not exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llmbench.cli.output import (
    NOT_FOUND,
    OK,
    REGRESSED,
    USAGE,
    add_output_argument,
    output_format,
    write_data,
)
from llmbench.runner.labels import format_value
from llmbench.runner.sweep.compare import (
    DEFAULT_TOLERANCES,
    Row,
    compare,
    parse_tolerances,
    pct,
    render,
    signed_tolerance,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_arguments", "print_table", "run"]


def print_table(rows: Sequence[Row], a: object, b: object, console: Console | None = None) -> None:
    """The rows as a rich table (default: on stdout); ``a`` and ``b`` name the two sides."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"llmbench compare | A = {a} | B = {b}")
    for name, just in (("scope", "left"), ("metric", "left"), ("A", "right"), ("B", "right"),
                       ("change", "right"), ("tolerance", "right"), ("verdict", "left")):
        table.add_column(name, justify=just, no_wrap=name in ("scope", "metric"))  # type: ignore[arg-type]
    style = {"regression": "red", "missing": "red", "improved": "green", "ok": ""}
    for r in rows:
        s = style.get(r.verdict, "dim")
        verdict = f"[{s}]{r.verdict}[/{s}]" if s else r.verdict
        tol = "" if r.tolerance_pct is None else signed_tolerance(r)
        table.add_row(
            r.scope, r.metric, format_value(r.a), format_value(r.b), pct(r.change_pct), tol,
            verdict,
        )
    (console or Console(highlight=False)).print(table)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``llmbench compare A B [--tolerance ...] [-o table|json|yaml|csv]``."""
    p.add_argument("a", type=Path, help="baseline: a profile or analyze folder (or its JSON)")
    p.add_argument("b", type=Path, help="candidate: same kind as A")
    p.add_argument(
        "--tolerance",
        nargs="+",
        default=None,
        metavar="METRIC:±N%",
        help="allowed bad-way change per metric, e.g. ott:-5%% ttft_p99:+10%% "
        "(default: ott:-5%% ttft_p99:+10%% itl_p99:+10%%)",
    )
    add_output_argument(p, "the comparison's rows and verdicts", {"--format": None})


def run(args: argparse.Namespace) -> int:
    """0: no regression; 1: a metric regressed (or a point lost its value); 2: bad input;
    3: A or B is not there."""
    fmt = output_format(args, "llmbench compare")
    if fmt is None:
        return USAGE
    for path in (args.a, args.b):
        if not path.exists():
            print(f"llmbench compare: {path}: no such file or folder", file=sys.stderr)
            return NOT_FOUND
    try:
        tolerances = (
            parse_tolerances(args.tolerance) if args.tolerance is not None
            else dict(DEFAULT_TOLERANCES)
        )
        rows = compare(args.a, args.b, tolerances)
    except ValueError as exc:
        print(f"llmbench compare: error: {exc}", file=sys.stderr)
        return USAGE
    if fmt == "table":
        print_table(rows, args.a, args.b)
    elif fmt == "csv":
        sys.stdout.write(render(rows, "csv"))
    else:
        write_data(json.loads(render(rows, "json")), fmt)
    bad = [r for r in rows if r.verdict in ("regression", "missing")]
    if bad:
        names = ", ".join(f"{r.scope} {r.metric}" for r in bad)
        print(f"llmbench compare: regression: {names}", file=sys.stderr)
        return REGRESSED
    return OK
