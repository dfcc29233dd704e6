"""``llmbench profile``: GenAI-Perf's flags for one load point.

The flags build the same :class:`~llmbench.api.Spec` that an ``LLMBenchmark`` manifest
parses into: each is declared on its spec field and generated from it
(:mod:`llmbench.cli.spec_flags`, whose :data:`~llmbench.cli.spec_flags.SPEC_FLAGS` is the one
table between flag names and spec fields), so validation is the model's and a field is never
mapped by hand twice; the spec then becomes the point's settings through
:func:`llmbench.runner.point.config.point_config`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from llmbench.api import Slo, Spec, SpecError
from llmbench.cli import telemetry as telemetry_flags
from llmbench.cli.flags import (
    normalize_endpoint,
    normalize_url,
    parse_extra_inputs,
    parse_headers,
    parse_slo,
    read_api_key,
)
from llmbench.cli.spec_flags import SPEC_FLAGS, add_profile_arguments

__all__ = [
    "add_arguments",
    "check_genai_perf_flags",
    "flag_error",
    "run",
    "spec_from_flags",
]

#: ``--goodput`` keys → the manifest keys of the Slo fields that hold them.
_GOODPUT_FIELDS = {k: Slo.model_fields[f].alias or f for k, f in Slo.PER_REQUEST.items()}

#: GenAI-Perf's ``--input-file PREFIX:...`` forms llmbench does not read → what they are.
_INPUT_FILE_PREFIXES = {
    "synthetic": "synthetic files for multi-file converters such as rankings",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """All flags of one load point; ``analyze`` reuses them for every point of a sweep.

    GenAI-Perf's spellings are accepted as aliases (``--isl``, ``--osl``, ``--num-requests``,
    ``-g`` ...), so its command lines run unchanged. The flags are generated from the spec's
    fields (:mod:`llmbench.cli.spec_flags`).
    """
    add_profile_arguments(p)


def check_genai_perf_flags(args: argparse.Namespace) -> list[str]:
    """Usage errors and notes for GenAI-Perf flags that have no effect of their own here.

    Raises ValueError for words after ``--`` (GenAI-Perf hands them to perf_analyzer, which
    llmbench does not run); returns notes to print for flags accepted without effect.
    """
    extra = list(getattr(args, "passthrough", []) or [])
    if extra:
        raise ValueError(
            f"{' '.join(extra)}: arguments after '--' are perf_analyzer flags in GenAI-Perf; "
            "llmbench does not run perf_analyzer (--help lists llmbench's own flags)"
        )
    notes = []
    if getattr(args, "backend", None):
        notes.append(
            f"--backend {args.backend}: ignored, it names a Triton backend and the target is "
            "an OpenAI-compatible endpoint"
        )
    if getattr(args, "tokenizer_trust_remote_code", False):
        notes.append(
            "--tokenizer-trust-remote-code: ignored, llmbench loads tokenizer.json only and "
            "runs no downloaded code"
        )
    return notes


def _flag_value(dest: str, value: Any) -> Any:
    """A flag's value in the spec's terms (parsed lists become mappings, paths strings)."""
    if dest == "extra_inputs":
        return parse_extra_inputs(value)
    if dest == "goodput":
        return {_GOODPUT_FIELDS[k]: v for k, v in parse_slo(value).items()}
    if isinstance(value, Path):
        return str(value)
    return value


def flag_error(exc: SpecError, extra: dict[str, str] | None = None) -> ValueError:
    """A spec error re-worded for the command line: each field path becomes its flag."""
    by_path = {f"spec.{path}": flag for path, flag in SPEC_FLAGS.values()}
    by_path.setdefault("spec.load.sessions", "--num-sessions")
    by_path.update(extra or {})
    lines = []
    for issue in exc.issues:
        path = issue.path
        while path and path not in by_path:
            path = path.rpartition(".")[0]
        name = by_path.get(path)
        lines.append(f"{name}: {issue.message}" if name else str(issue))
    return ValueError("\n".join(lines))


#: The session flags that shape ``--num-sessions`` (dest, flag), from the flag table.
_SESSION_KNOBS = tuple(
    (dest, flag)
    for dest, (path, flag) in SPEC_FLAGS.items()
    if path.startswith("load.sessions.") and path != "load.sessions.count"
)


def _check_session_flags(args: argparse.Namespace, *, fixed: bool) -> None:
    """Usage errors, naming the flag, for session flags that cannot apply."""
    if getattr(args, "num_sessions", None) is None:
        for dest, flag in _SESSION_KNOBS:
            if getattr(args, dest, None) is not None:
                raise ValueError(f"{flag} needs --num-sessions (the sessions it shapes)")
        return
    if args.endpoint_type != "chat":
        raise ValueError(
            f"--num-sessions: multi-turn sessions send chat messages; --endpoint-type "
            f"{args.endpoint_type} has no history to keep (use --endpoint-type chat)"
        )
    conflicts = [
        ("--concurrency", args.concurrency is not None),
        ("--request-rate", args.request_rate is not None),
        ("--request-count", args.request_count is not None),
        ("--measurement-duration", args.measurement_duration is not None),
        ("--measurement-interval", args.measurement_interval is not None),
        ("--warmup-request-count", bool(args.warmup_request_count)),
        ("--fixed-schedule", fixed),
        ("--input-file", args.input_file is not None),
        ("--workers", args.workers != 1),
    ]
    for flag, given in conflicts:
        if given:
            raise ValueError(
                f"{flag} with --num-sessions: the sessions are the load (sessions x turns "
                "requests, --session-concurrency of them in flight); remove " + flag
            )
    concurrency = args.session_concurrency or 1
    if concurrency > args.num_sessions:
        raise ValueError(
            f"--session-concurrency {concurrency} is more than --num-sessions "
            f"{args.num_sessions}: add sessions or lower the session concurrency"
        )


def spec_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``spec`` mapping the profile flags describe, before validation."""
    if args.concurrency is not None and args.request_rate is not None:
        raise ValueError("--concurrency and --request-rate: choose one load mode")
    if args.max_concurrency is not None and args.request_rate is None:
        raise ValueError("--max-concurrency applies to --request-rate runs only")
    if args.endpoint_type == "embeddings" and args.goodput:
        raise ValueError("--goodput needs a generating endpoint, not --endpoint-type embeddings")
    prefix = str(args.input_file).partition(":")[0] if args.input_file is not None else ""
    if prefix in _INPUT_FILE_PREFIXES:
        raise ValueError(
            f"--input-file {args.input_file}: GenAI-Perf's '{prefix}:' inputs "
            f"({_INPUT_FILE_PREFIXES[prefix]}) are not supported by llmbench; pass a JSONL "
            "file of prompts"
        )
    input_file = args.input_file
    fixed = args.fixed_schedule or None  # false: not given
    if prefix == "payload":  # GenAI-Perf's trace replay: the file's rows at their timestamps
        input_file = Path(str(args.input_file)[len("payload:"):])
        fixed = True
    if fixed and (args.concurrency is not None or args.request_rate is not None):
        raise ValueError(
            "--fixed-schedule sends each trace row at its timestamp: drop --concurrency and "
            "--request-rate"
        )
    _check_session_flags(args, fixed=bool(fixed))
    if args.model_selection_strategy is not None and len(args.models or []) < 2:
        raise ValueError("--model-selection-strategy needs several models (-m A B ...)")
    models = list(args.models or [])
    values = {
        **vars(args),
        "url": normalize_url(args.url),
        "endpoint": normalize_endpoint(args.endpoint),
        "model": models[0] if models else None,
        "models": models if len(models) > 1 else None,
        "input_file": input_file,
        "fixed_schedule": fixed,
    }
    doc: dict[str, Any] = {
        "load": {"mode": "request_rate" if args.request_rate is not None else "concurrency"}
    }
    for dest, (path, _flag) in SPEC_FLAGS.items():
        value = values.get(dest)
        if value is None:
            continue
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _flag_value(dest, value)
    return doc


def spec_from_flags(args: argparse.Namespace) -> Spec:
    """The spec the profile flags describe; ValueError naming the flag on bad input."""
    try:
        return Spec.from_manifest(spec_document(args))
    except SpecError as exc:
        raise flag_error(exc) from None


def export_stem(path: Path | None) -> str:
    """``--profile-export-file my.json`` → ``my``: the stem GenAI-Perf names its files after."""
    if path is None:
        return "profile_export"
    if path.parent != Path(".") or not path.name:
        raise ValueError(
            f"--profile-export-file {path}: give a file name such as my_run.json; the folder "
            "is --artifact-dir"
        )
    return path.stem if path.suffix == ".json" else path.name


def no_success_error(summary: Any) -> str | None:
    """The error of a run in which no measured request succeeded, with the error breakdown.

    The threshold: a run fails (exit 1) only when *no* measured request completed; a run with
    some errors exits 0 and reports them by type.
    """
    if summary.interrupted or summary.window.completed_requests:
        return None
    errors = summary.errors
    lines = [f"no request succeeded ({errors.total} failed):"]
    for kind, info in errors.by_type.items():
        lines.append(f"  {kind} x{info.count}: {info.sample}".rstrip(": "))
    return "\n".join(lines)


def _plots(result: Any, directory: Path, console: Any) -> None:
    """``--generate-plots``: the PNG plots and report.html of the profile just measured
    (``result``, a ``ProfileResult``), next to its artefacts in ``directory``."""
    try:
        from llmbench.runner.report.html import REPORT_HTML, render_profile_report

        page = render_profile_report(result.summary, result.records, directory,
                                     directory / REPORT_HTML)
        console.print(f"report: {page}")
    except Exception as exc:  # plots are a convenience; the CSV/JSON are the results
        console.print(f"[yellow]plots skipped: {type(exc).__name__}: {exc}[/yellow]")


async def _main(cfg: Any, generate_plots: bool = False) -> int:
    from llmbench.runner.load.config import expected_total
    from llmbench.runner.load.result import Progress
    from llmbench.runner.point.memory import note_memory
    from llmbench.runner.point.profile import install_stop_signals, run_profile
    from llmbench.runner.report.console import notes, results_table, show_progress, stderr_console
    from llmbench.runner.report.telemetry_plot import plot_point_telemetry
    from llmbench.runner.report.timeseries_plot import plot_point_timeseries

    console = stderr_console()
    stop = asyncio.Event()
    undo = install_stop_signals(stop)
    counters = Progress()
    mode, value = cfg.load_label()
    bar = asyncio.ensure_future(
        show_progress(counters, expected_total(cfg.load), f"{mode} {value:g}", console)
    )
    try:
        result = await run_profile(cfg, stop=stop, progress=counters)
    finally:
        bar.cancel()
        undo()
    if result.artifact_dir is not None:
        await asyncio.to_thread(plot_point_telemetry, result.summary, result.artifact_dir)
        if generate_plots:  # a five-panel figure: about 0.3 s of CPU nobody asked for
            await asyncio.to_thread(plot_point_timeseries, result.timeseries, result.artifact_dir)
    console.print(results_table(result.summary))
    for line in notes(result.summary):
        console.print(line)
    if result.artifact_dir is not None:
        console.print(f"artefacts: {result.artifact_dir}")
        if generate_plots:
            _plots(result, result.artifact_dir, console)
            note_memory("plots")
    if result.summary.interrupted:
        return 130
    failed = no_success_error(result.summary)
    if failed is not None:
        print(f"llmbench profile: error: {failed}", file=sys.stderr)
        return 1
    if result.summary.stop_reason:
        # The records measured before are written; the point itself did not complete.
        console.print(f"[red]the point failed: {result.summary.stop_reason}[/red]")
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    """The ``profile`` subcommand: 0 measured, 1 target problem (unreachable before or during
    the run, or no request succeeded), 2 usage error, 130 interrupted."""
    from llmbench.runner.client import eventloop
    from llmbench.runner.client.transport import ConnectError
    from llmbench.runner.point.config import point_config
    from llmbench.runner.point.preflight import ProfileError

    try:
        for note in check_genai_perf_flags(args):
            print(f"llmbench profile: note: {note}", file=sys.stderr)
        spec = spec_from_flags(args)
        cfg = point_config(
            spec,
            api_key=read_api_key(args),
            headers=parse_headers(args.header),
            preflight=args.preflight,
            artifact_root=args.artifact_dir,  # GenAI-Perf's: the point's folder goes inside
            telemetry=telemetry_flags.collector_from_args(args, spec.target.base_url()),
            export_stem=export_stem(args.profile_export_file),
        )
        cfg.preflight_timeout_s = args.preflight_timeout
        eventloop.loop_factory(args.event_loop)
    except ValueError as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2
    try:
        return eventloop.run(_main(cfg, args.generate_plots), args.event_loop)
    except (ProfileError, ConnectError) as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # bad workload input (input file, tokenizer) found while preparing
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2
