"""The ``llmbench`` command line: a thin dispatcher over the subcommands.

Each subcommand lives in its own module with ``add_arguments(parser)`` and ``run(args) -> int``
and is imported only when it is the one being run, so ``llmbench --version`` or ``llmbench sim``
do not pay for numpy, matplotlib or the telemetry stack. Every bad flag is a usage error that
names the flag and says what would be accepted.

The Kubernetes client and kopf come with the ``[operator]`` extra: without it, a command that
imports them (``results``) ends with one line naming the extra (exit 4, "no cluster access"),
never an ImportError traceback (``operator`` checks for kopf itself, with its own line).
``job`` (the runner inside the operator's Job) is not for people: it runs but is not listed in
``--help``. Exit codes: :mod:`llmbench.cli.output`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from llmbench import __version__
from llmbench.cli.output import EXIT_CODES_HELP, NO_CLUSTER

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

#: name → (module with add_arguments/run, one-line help), in the order ``--help`` lists them.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "profile": ("llmbench.cli.profile", "measure one load point"),
    "analyze": ("llmbench.cli.analyze", "sweep load points: knee, max load under SLO, cost"),
    "report": ("llmbench.cli.report", "rebuild plots and the HTML report from a result folder"),
    "compare": ("llmbench.cli.compare", "compare two profiles or sweeps; exit 1 on regression"),
    "sim": ("llmbench.sim.cli", "run the built-in OpenAI-compatible simulator"),
    "crd": ("llmbench.cli.crd", "print the LLMBenchmark CustomResourceDefinition"),
    "job": ("llmbench.cli.job", ""),  # the operator's Job runs it; hidden from --help
    "operator": ("llmbench.cli.operator", "run the Kubernetes operator (kopf)"),
    "results": ("llmbench.cli.results", "show an LLMBenchmark's results from the cluster"),
}


#: The modules of the ``[operator]`` extra (pyproject.toml), named in the one-line error.
EXTRA_MODULES = {"kubernetes": "operator", "kopf": "operator"}


def _missing_extra(exc: ModuleNotFoundError) -> str | None:
    """``pip install 'llmbench[operator]'`` when ``exc`` is a module of an extra."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_MODULES.get(top)
    return None if extra is None else f"pip install 'llmbench[{extra}]'"


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` gets its flags (and its imports)."""
    parser = argparse.ArgumentParser(
        prog="llmbench",
        description="Benchmark OpenAI-compatible LLM inference servers with GenAI-Perf semantics.",
        epilog=f"results and compare: {EXIT_CODES_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llmbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = _chosen(argv)
    for name, (module, help_text) in SUBCOMMANDS.items():
        # no help: argparse lists no line for it (the hidden ``job``)
        sp = sub.add_parser(name, help=help_text) if help_text else sub.add_parser(name)
        if name == chosen:
            mod = importlib.import_module(module)
            mod.add_arguments(sp)
            sp.set_defaults(func=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``), runs the subcommand, returns its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(words).parse_args(words)
    except ModuleNotFoundError as exc:  # a subcommand module that imports an extra's module
        return _no_extra(_chosen(words) or "", exc)
    verbose = bool(getattr(args, "verbose", False))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # httpx logs every request at INFO: preflights and telemetry scrapes would flood the
        # console and the pod logs.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        code: int = args.func(args)
    except ModuleNotFoundError as exc:
        return _no_extra(args.command, exc)
    return code


def _no_extra(command: str, exc: ModuleNotFoundError) -> int:
    """One line naming the extra to install (exit 4); any other missing module is a bug."""
    fix = _missing_extra(exc)
    if fix is None:
        raise exc
    print(f"llmbench {command}: needs {exc.name}, which is not installed: {fix}",
          file=sys.stderr)
    return NO_CLUSTER
