"""The command-line flag a spec field answers to, declared on the field as ``Annotated`` metadata.

Why on the field: ``llmbench profile`` and ``llmbench analyze`` build from their flags the same
:class:`~llmbench.api.Spec` a manifest parses into. With the flag declared beside the field (its
names, its ``--help`` line, how its text is read) a new setting is one declaration: the command
line (:mod:`llmbench.cli.spec_flags`) generates from these markers its argparse arguments, the
table from flag to field that builds the spec, and the error messages that name the flag
instead of the field path. The field itself still says the type, the bounds and the default,
which the command line reads from it. This is aiperf's habit (``CLIParameter`` on the pydantic
field), kept free of any CLI library: the marker is plain data, invisible to the JSON schema
and the CRD.

Example::

    request_count: Annotated[
        PositiveInt | None, CliFlag("--request-count", help="measured requests")
    ] = Field(default=None, description="Measured requests.")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from pydantic.fields import FieldInfo

__all__ = ["FIELD_DEFAULT", "CliFlag", "FlagForm", "FlagReads", "field_flags"]

#: How the flag is typed on the command line:
#: ``value`` ``--x V``; ``switch`` ``--x`` alone means true; ``negatable`` ``--x`` or ``--no-x``;
#: ``bare_or_value`` ``--x`` alone or ``--x true|false``; ``words`` ``--x A B`` (a later ``--x``
#: replaces them); ``more_words`` ``--x A B --x C`` (adds to them); ``each`` ``--x A --x B``.
FlagForm = Literal["value", "switch", "negatable", "bare_or_value", "words", "more_words", "each"]

#: How a value's text is read: ``checked`` by the field's type and bounds as the flag is read
#: (the usage error names the flag; a ``Literal`` field lists its choices); ``number`` or
#: ``integer`` converted only, the model checking the bounds (its message names the flag too);
#: ``text`` kept as typed, for the command line to parse; ``path`` a file path. Only a flag
#: with a value (``value``, ``bare_or_value``) reads one; a list's words are parsed later.
FlagReads = Literal["checked", "number", "integer", "text", "path"]


class _FieldDefault:
    """The type of :data:`FIELD_DEFAULT`."""

    def __repr__(self) -> str:
        return "FIELD_DEFAULT"


#: A flag's default when none is given: the field's own default (None for a required field).
FIELD_DEFAULT: Final = _FieldDefault()


@dataclass(frozen=True, init=False)
class CliFlag:
    """One command-line flag of a spec field.

    Attributes:
        names: The flag's spellings in ``--help`` order, which its messages show joined by
            ``/`` (``-m/--model``); spellings only GenAI-Perf users type are the command line's
            table, not these.
        help: The ``--help`` line (plain text: a ``%`` is a percent sign), or None for none.
        metavar: The value's placeholder in ``--help`` (default: argparse's).
        dest: The parsed value's attribute, when not the first long name's (``--model`` holds
            a list of models: ``models``).
        form: How the flag is typed (:data:`FlagForm`).
        reads: How a value's text is read (:data:`FlagReads`).
        default: The value when the flag is not given: :data:`FIELD_DEFAULT`, or None where the
            command line must tell "not given" from the field's default, or a value of its own
            (a tuple for a list of values, so the marker stays immutable).
    """

    names: tuple[str, ...]
    help: str | None
    metavar: str | None
    dest: str | None
    form: FlagForm
    reads: FlagReads
    default: Any

    def __init__(
        self,
        *names: str,
        help: str | None = None,
        metavar: str | None = None,
        dest: str | None = None,
        form: FlagForm = "value",
        reads: FlagReads = "checked",
        default: Any = FIELD_DEFAULT,
    ) -> None:
        if not names or not all(n.startswith("-") for n in names):
            raise ValueError(f"CliFlag{names!r}: give the flag's names, each starting with '-'")
        if not any(n.startswith("--") for n in names):
            raise ValueError(f"CliFlag{names!r}: give a long name (--name) too")
        for key, value in (
            ("names", names), ("help", help), ("metavar", metavar), ("dest", dest),
            ("form", form), ("reads", reads), ("default", default),
        ):
            object.__setattr__(self, key, value)

    @property
    def name(self) -> str:
        """The first long name (``--request-count``): the flag's key and its parsers' label."""
        return next(n for n in self.names if n.startswith("--"))

    @property
    def shown(self) -> str:
        """The flag as its messages name it: ``-m/--model``."""
        return "/".join(self.names)

    @property
    def destination(self) -> str:
        """The parsed value's attribute: ``dest``, or the first long name's (argparse's rule)."""
        return self.dest or self.name[2:].replace("-", "_")


def field_flags(info: FieldInfo) -> tuple[CliFlag, ...]:
    """The :class:`CliFlag` markers of a field, found in its metadata or inside ``X | None``."""

    def inside(annotation: Any) -> list[CliFlag]:
        found: list[CliFlag] = []
        for arg in get_args(annotation):
            found.extend([arg] if isinstance(arg, CliFlag) else inside(arg))
        return found

    direct = [m for m in info.metadata if isinstance(m, CliFlag)]
    return tuple(direct + inside(info.annotation))
