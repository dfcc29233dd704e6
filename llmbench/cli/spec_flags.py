"""The flags of ``llmbench profile`` and ``llmbench analyze``, generated from the spec's fields.

Why generated: a setting is declared once, on its spec field: the field says the type, the
bounds and the default, its :class:`~llmbench.api.spec.CliFlag` marker the flag's names, its
``--help`` line and how its text is read. This module turns those markers into argparse
arguments, lays them out with the command line's own flags (API key, artefact folder, ...)
group by group as ``--help`` lists them, and keeps the tables the parsed flags are read back
with: :data:`SPEC_FLAGS` (profile's flags → spec fields, for
:func:`llmbench.cli.profile.spec_document` and for errors that name a flag rather than a field
path) and :data:`ANALYZE_FLAGS` (analyze's own). GenAI-Perf's extra spellings and its refused
flags are :mod:`llmbench.cli.genai_perf`'s tables.

A new setting: its field and marker in ``llmbench/api/spec/``, its flag name in a layout below.
"""

from __future__ import annotations

import argparse
import copy
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from llmbench.api.spec import FIELD_DEFAULT, CliFlag, spec_flags
from llmbench.cli import telemetry as telemetry_flags
from llmbench.cli.flags import (
    non_negative_float,
    non_negative_int,
    on_off,
    positive_float,
    positive_int,
)
from llmbench.cli.genai_perf import (
    GENAI_PERF_PARSERS,
    GENAI_PERF_SPELLINGS,
    add_unsupported,
    service_kind,
)

__all__ = [
    "ANALYZE_FLAGS",
    "SPEC_FLAGS",
    "SpecFlag",
    "add_analyze_arguments",
    "add_profile_arguments",
]


@dataclass(frozen=True)


class SpecFlag:
    """One spec field's flag.

    Attributes:
        path: The field's manifest path below ``spec`` (``load.requestCount``).
        flag: The marker declared on the field.
        field: The field (its type, bounds and default).
    """

    path: str
    flag: CliFlag
    field: FieldInfo


def _by_name() -> dict[str, SpecFlag]:
    out: dict[str, SpecFlag] = {}
    for path, info, flag in spec_flags():
        if flag.name in out:
            raise ValueError(f"{flag.name} is declared on {out[flag.name].path} and {path}")
        out[flag.name] = SpecFlag(path.removeprefix("spec."), flag, info)
    return out


#: Every spec field's flag by its first long name (``--request-count``).
_BY_NAME = _by_name()


# ----------------------------------------------------------------------------------------------
# marker + field -> argparse argument
# ----------------------------------------------------------------------------------------------


def _field_type(info: FieldInfo) -> tuple[Any, tuple[Any, ...], Any, Any]:
    """The field's scalar type, its ``Literal`` choices, and its ``ge`` / ``gt`` bounds.

    The bounds sit in the field's metadata, or inside the ``Annotated`` type it holds
    (``PositiveInt | None`` carries ``ge=1`` in there).
    """
    metadata = list(info.metadata)
    annotation = info.annotation
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else annotation
    if get_origin(annotation) is Annotated:
        annotation, *extra = get_args(annotation)
        for m in extra:
            metadata.extend(m.metadata if isinstance(m, FieldInfo) else [m])
    choices = get_args(annotation) if get_origin(annotation) is Literal else ()
    ge = next((m.ge for m in metadata if getattr(m, "ge", None) is not None), None)
    gt = next((m.gt for m in metadata if getattr(m, "gt", None) is not None), None)
    return annotation, choices, ge, gt


def _checked(sf: SpecFlag) -> dict[str, Any]:
    """argparse's ``type`` or ``choices`` that check a value as the field would."""
    name = sf.flag.name
    base, choices, ge, gt = _field_type(sf.field)
    parse: Callable[[str], Any] | None = None
    if choices:
        return {"choices": choices}
    if base is bool and sf.flag.form == "bare_or_value":
        parse = on_off(name)
    elif base is str:
        return {}
    elif base is int and ge in (0, 1):
        parse = positive_int(name) if ge == 1 else non_negative_int(name)
    elif base is float and gt == 0:
        parse = positive_float(name)
    elif base is float and ge == 0:
        parse = non_negative_float(name)
    if parse is None:
        raise TypeError(
            f"{name}: no parser checks spec.{sf.path} ({base}, ge={ge}, gt={gt}); give the "
            "CliFlag a reads= that says how its text is read"
        )
    return {"type": parse}


_READS: dict[str, dict[str, Any]] = {
    "number": {"type": float},
    "integer": {"type": int},
    "text": {},
    "path": {"type": Path},
}


def _value(sf: SpecFlag) -> dict[str, Any]:
    """How a value's text is read: GenAI-Perf's own parser, the marker's ``reads``."""
    special = GENAI_PERF_PARSERS.get(sf.flag.name)
    if special is not None:
        return {"type": special}
    return _checked(sf) if sf.flag.reads == "checked" else dict(_READS[sf.flag.reads])


def _default(sf: SpecFlag) -> Any:
    """The flag's value when it is not given (a tuple becomes a fresh list: argparse appends)."""
    default = sf.flag.default
    if default is FIELD_DEFAULT:
        if sf.field.default_factory is not None:
            raise TypeError(f"{sf.flag.name}: spec.{sf.path} has no plain default; give one")
        default = None if sf.field.default is PydanticUndefined else sf.field.default
    return list(default) if isinstance(default, tuple) else default


def _spellings(flag: CliFlag) -> tuple[str, ...]:
    """The option strings: the flag's names, with GenAI-Perf's aliases where it has some."""
    spelled = GENAI_PERF_SPELLINGS.get(flag.name, flag.names)
    if tuple(n for n in spelled if n in flag.names) != flag.names:
        raise ValueError(f"GENAI_PERF_SPELLINGS[{flag.name!r}] must keep {flag.names} in order")
    return spelled


_FORMS: dict[str, dict[str, Any]] = {
    "value": {},
    "switch": {"action": "store_true"},
    "negatable": {"action": argparse.BooleanOptionalAction},
    "bare_or_value": {"nargs": "?", "const": True},
    "words": {"nargs": "+"},
    "more_words": {"nargs": "+", "action": "extend"},
    "each": {"action": "append"},
}


def _argument(sf: SpecFlag) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The ``add_argument`` call of one spec flag: option strings and keywords."""
    flag = sf.flag
    kwargs: dict[str, Any] = {
        "dest": flag.destination,
        "default": _default(sf),
        "help": None if flag.help is None else flag.help.replace("%", "%%"),
        **_FORMS[flag.form],
    }
    if flag.form not in ("switch", "negatable"):
        kwargs["metavar"] = flag.metavar
    if flag.form in ("value", "bare_or_value"):
        kwargs.update(_value(sf))
    return _spellings(flag), {k: v for k, v in kwargs.items() if v is not None}


# ----------------------------------------------------------------------------------------------
# the layouts: spec flags and the command line's own, group by group, as --help lists them
# ----------------------------------------------------------------------------------------------

#: The command line's own flags (no spec field): first long name → (spellings, keywords).
_OWN: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "--service-kind": (
        ("--service-kind",),
        {"type": service_kind, "help": "accepted for GenAI-Perf: only openai"},
    ),
    "--backend": (
        ("--backend",),
        {
            "choices": ("tensorrtllm", "vllm"),
            "help": "accepted for GenAI-Perf; it names a Triton backend and means nothing for an "
            "OpenAI-compatible endpoint",
        },
    ),
    "--api-key-env": (
        ("--api-key-env",),
        {"metavar": "NAME", "help": "read the API key from this env var"},
    ),
    "--api-key-file": (
        ("--api-key-file",),
        {"metavar": "PATH", "help": "read the API key from this file"},
    ),
    "--header": (
        ("-H", "--header"),
        {"action": "append", "default": [], "metavar": "K:V", "help": "extra header"},
    ),
    "--no-preflight": (
        ("--no-preflight",),
        {
            "dest": "preflight",
            "action": "store_false",
            "help": "skip the /v1/models check and the probe request (needs -m)",
        },
    ),
    "--preflight-timeout": (
        ("--preflight-timeout",),
        {
            "type": float,
            "default": 10.0,
            "metavar": "SECONDS",
            "help": "how long the preflight's GET /v1/models may take, apart from "
            "--request-timeout, so a server that never answers fails fast (default 10)",
        },
    ),
    "--event-loop": (
        ("--event-loop",),
        {
            "choices": ("asyncio", "uvloop"),
            "default": None,
            "help": "the client's event loop (default: uvloop where installed, i.e. on Linux)",
        },
    ),
    "--tokenizer-trust-remote-code": (
        ("--tokenizer-trust-remote-code",),
        {
            "action": "store_true",
            "help": "accepted for GenAI-Perf; llmbench loads tokenizer.json only and runs no code",
        },
    ),
    "--artifact-dir": (("--artifact-dir",), {"type": Path}),
    "--profile-export-file": (
        ("--profile-export-file",),
        {
            "type": Path,
            "metavar": "NAME.json",
            "help": "the stem of every export file, as GenAI-Perf: my.json gives my.json, "
            "my_genai_perf.json and my_genai_perf.csv",
        },
    ),
    "--generate-plots": (
        ("--generate-plots",),
        {
            "action": "store_true",
            "help": "also write PNG plots and report.html next to the artefacts",
        },
    ),
    "--enable-checkpointing": (
        ("--enable-checkpointing",),
        # GenAI-Perf's; analyze always keeps checkpoint.json
        {"action": "store_true", "help": argparse.SUPPRESS},
    ),
    "--verbose": (("-v", "--verbose"), {"action": "store_true"}),
    "--file": (
        ("-f", "--file"),
        {
            "type": Path,
            "metavar": "MANIFEST",
            "help": "run an LLMBenchmark manifest (or bare spec) locally; it defines target, "
            "workload, load, sweep, SLO and cost, and the matching flags are ignored",
        },
    ),
    "--restart": (
        ("--restart",),
        {
            "action": "store_true",
            "help": "ignore an existing checkpoint.json and run every point again",
        },
    ),
    "--no-plots": (
        ("--no-plots",),
        {"action": "store_true", "help": "skip PNG plots and report.html"},
    ),
}

Layout = tuple[tuple[str, tuple[str, ...]], ...]

#: ``profile``'s groups before the telemetry group (:mod:`llmbench.cli.telemetry`).
_POINT: Layout = (
    ("target", (
        "--model", "--model-selection-strategy", "--url", "--endpoint-type", "--endpoint",
        "--service-kind", "--backend", "--streaming", "--api-key-env", "--api-key-file",
        "--header", "--request-timeout", "--no-preflight", "--preflight-timeout",
    )),
    ("load", (
        "--concurrency", "--request-rate", "--request-rate-mode", "--burstiness", "--ramp-up",
        "--max-concurrency",
        "--request-count", "--measurement-duration", "--measurement-interval",
        "--stability-percentage", "--fixed-schedule", "--num-sessions", "--session-concurrency",
        "--session-turns-mean", "--session-turns-stddev", "--session-turn-delay-mean",
        "--session-turn-delay-stddev", "--warmup-request-count", "--random-seed", "--workers",
        "--event-loop",
    )),
    ("workload", (
        "--synthetic-input-tokens-mean", "--synthetic-input-tokens-stddev",
        "--output-tokens-mean", "--output-tokens-stddev", "--output-tokens-mean-deterministic",
        "--extra-inputs", "--input-file", "--num-dataset-entries", "--num-prefix-prompts",
        "--prefix-prompt-length", "--tokenizer", "--tokenizer-revision",
        "--tokenizer-trust-remote-code",
    )),
)
#: ``profile``'s groups after the telemetry group.
_OUTPUT: Layout = (
    ("output", (
        "--goodput", "--artifact-dir", "--profile-export-file", "--timeseries-interval",
        "--generate-plots", "--enable-checkpointing", "--verbose",
    )),
)
#: What ``analyze`` adds to ``profile``'s flags.
_SWEEP: Layout = (
    ("sweep", (
        "--file", "--sweep-type", "--sweep-range", "--sweep-list", "--sweep-workloads",
        "--repetitions",
        "--stop-after-knee", "--on-point-failure", "--search", "--search-resolution",
        "--restart",
    )),
    ("analysis", ("--slo", "--price-per-hour", "--currency", "--no-plots")),
)


def _add(p: argparse.ArgumentParser, layout: Layout) -> None:
    for title, names in layout:
        group = p.add_argument_group(title)
        for name in names:
            if name in _OWN:
                spellings, kwargs = _OWN[name]
                group.add_argument(*spellings, **{k: copy.copy(v) for k, v in kwargs.items()})
            else:
                spellings, kwargs = _argument(_BY_NAME[name])
                group.add_argument(*spellings, **kwargs)


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    """All flags of one load point (``analyze`` adds :func:`add_analyze_arguments`'s)."""
    _add(p, _POINT)
    telemetry_flags.add_arguments(p)
    _add(p, _OUTPUT)
    p.add_argument(
        "passthrough",
        nargs="*",
        default=[],
        help=argparse.SUPPRESS,  # words after `--`: perf_analyzer's flags in GenAI-Perf
    )
    add_unsupported(p)


def add_analyze_arguments(p: argparse.ArgumentParser) -> None:
    """``profile``'s flags (applied to every point) plus the sweep, SLO and cost flags."""
    add_profile_arguments(p)
    _add(p, _SWEEP)


def _table(*layouts: Layout) -> dict[str, tuple[str, str]]:
    """argparse destination → (spec field path, the flag as messages name it)."""
    return {
        sf.flag.destination: (sf.path, sf.flag.shown)
        for layout in layouts
        for _, names in layout
        for name in names
        if (sf := _BY_NAME.get(name)) is not None
    }


#: ``profile``'s flags: argparse destination → (spec field path, the flag as messages name
#: it). ``-m/--model`` fills two fields: its first model is ``target.model`` (see
#: :func:`llmbench.cli.profile.spec_document`).
SPEC_FLAGS: dict[str, tuple[str, str]] = {
    **_table(_POINT, _OUTPUT),
    "model": ("target.model", _BY_NAME["--model"].flag.shown),
}
#: The flags ``analyze`` adds, as :data:`SPEC_FLAGS`.
ANALYZE_FLAGS: dict[str, tuple[str, str]] = _table(_SWEEP)

