"""What the reading commands (``results``, ``compare``) share: their exit codes and ``-o``.

Exit codes have one meaning each, so a nightly job or a script can tell "the server got
slower" from "the benchmark is not there" from "the cluster is unreachable" without parsing
the message (kubectl-style ``-o table|json|yaml|csv`` picks the format of stdout; messages go
to stderr). :data:`EXIT_CODES_HELP` is printed under each command's ``--help``.

The flags before ``-o`` (``--json``, ``--csv`` and compare's ``--format``) stay as deprecated
aliases: the README promised them, so scripts use them; each use prints one note on stderr
naming the ``-o`` that replaces it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_CODES_HELP",
    "FORMATS",
    "NOT_FOUND",
    "NO_CLUSTER",
    "OK",
    "REGRESSED",
    "USAGE",
    "add_output_argument",
    "output_format",
    "stdout_console",
    "write_data",
]

OK: Final = 0
#: A metric regressed beyond its tolerance (or a point lost its value).
REGRESSED: Final = 1
#: A bad flag or value (argparse's own code for usage errors).
USAGE: Final = 2
#: The benchmark, the run, the file or what was asked of it is not there.
NOT_FOUND: Final = 3
#: No cluster access: no kubeconfig or context, the API server unreachable or refusing, or the
#: Kubernetes client not installed (the ``[operator]`` extra).
NO_CLUSTER: Final = 4

EXIT_CODES_HELP = f"""exit codes:
  {OK}  done, no regression
  {REGRESSED}  a metric regressed beyond its tolerance (compare, results --compare)
  {USAGE}  usage: a bad flag, value or input file
  {NOT_FOUND}  not found: the benchmark, the run, the folder or what was asked for
  {NO_CLUSTER}  no cluster access: kubeconfig/context, API server unreachable or refusing
     (401/403), or the Kubernetes client missing: pip install 'llmbench[operator]'"""

FORMATS = ("table", "json", "yaml", "csv")

#: Where the deprecated flags put the format they name.
_ALIAS_DEST = "_deprecated_output"


def add_output_argument(
    p: argparse.ArgumentParser, help_text: str, aliases: dict[str, str | None]
) -> None:
    """``-o/--output FORMAT``, the command's deprecated format flags (hidden from ``--help``)
    and the exit codes as the epilog.

    ``aliases`` maps an old flag to the format it selects (``--json`` -> ``json``), or to None
    for a flag that took the format as its value (compare's ``--format csv``).
    """
    p.add_argument("-o", "--output", choices=FORMATS, default=None, metavar="FORMAT",
                   help=f"{help_text} (table, json, yaml or csv; default: table)")
    for flag, fmt in aliases.items():
        if fmt is None:
            p.add_argument(flag, dest=_ALIAS_DEST, choices=FORMATS, action=_Alias,
                           help=argparse.SUPPRESS)
        else:
            p.add_argument(flag, dest=_ALIAS_DEST, nargs=0, action=_Alias, const=fmt,
                           help=argparse.SUPPRESS)
    p.epilog = EXIT_CODES_HELP
    p.formatter_class = argparse.RawDescriptionHelpFormatter


class _Alias(argparse.Action):
    """Stores ``(flag, format)`` of a deprecated flag, for :func:`output_format`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        flag = option_string or ""
        if self.const is None:  # a flag that takes the format: name it as it was given
            flag = f"{flag} {values}"
        setattr(namespace, self.dest, (flag, str(self.const or values)))


def output_format(args: argparse.Namespace, prog: str) -> str | None:
    """The format asked for (default ``table``); a deprecated flag prints its note on stderr.
    None after printing a usage error (``-o`` and an old flag naming two formats)."""
    alias: tuple[str, str] | None = getattr(args, _ALIAS_DEST, None)
    chosen: str | None = args.output
    if alias is not None:
        flag, fmt = alias
        new = f"-o {fmt}"
        if chosen is not None and chosen != fmt:
            print(f"{prog}: error: {flag} and -o {chosen} ask for two formats; give -o only",
                  file=sys.stderr)
            return None
        print(f"{prog}: note: {flag} is deprecated; use {new}", file=sys.stderr)
        chosen = fmt
    return chosen or "table"


def write_data(data: Any, fmt: str) -> None:
    """JSON or YAML of plain data on stdout (YAML keeps the keys in their order)."""
    if fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


def stdout_console() -> Console:
    """stdout (the result of the command), as wide as the terminal, 160 columns off one."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)
