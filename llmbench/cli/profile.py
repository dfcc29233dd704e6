"""``llmbench profile``: GenAI-Perf's flags for one load point.

The flags build the same :class:`~llmbench.api.Spec` that an ``LLMBenchmark`` manifest
parses into (:data:`SPEC_FLAGS` is the one table between flag names and spec fields), so
validation is the model's and a field is never mapped by hand twice; the spec then becomes the
point's settings through :func:`llmbench.runner.point.config.point_config`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from llmbench.api import Spec, SpecError
from llmbench.cli import telemetry as telemetry_flags
from llmbench.cli.flags import (
    non_negative_int,
    parse_headers,
    parse_slo,
    positive_float,
    positive_int,
    read_api_key,
)

__all__ = ["SPEC_FLAGS", "add_arguments", "flag_error", "run", "spec_from_flags"]

#: argparse destination → (spec field path in camelCase, flag as the user types it).
SPEC_FLAGS: dict[str, tuple[str, str]] = {
    "url": ("target.url", "--url"),
    "model": ("target.model", "-m/--model"),
    "endpoint_type": ("target.endpointType", "--endpoint-type"),
    "endpoint": ("target.endpoint", "--endpoint"),
    "streaming": ("target.streaming", "--streaming"),
    "request_timeout": ("target.requestTimeoutSeconds", "--request-timeout"),
    "concurrency": ("load.concurrency", "--concurrency"),
    "request_rate": ("load.requestRate", "--request-rate"),
    "request_rate_mode": ("load.requestRateMode", "--request-rate-mode"),
    "max_concurrency": ("load.maxConcurrency", "--max-concurrency"),
    "request_count": ("load.requestCount", "--request-count"),
    "measurement_duration": ("load.measurementDurationSeconds", "--measurement-duration"),
    "warmup_request_count": ("load.warmupRequestCount", "--warmup-request-count"),
    "workers": ("load.workers", "--workers"),
    "random_seed": ("workload.seed", "--random-seed"),
    "synthetic_input_tokens_mean": ("workload.inputTokens.mean", "--synthetic-input-tokens-mean"),
    "synthetic_input_tokens_stddev": (
        "workload.inputTokens.stddev", "--synthetic-input-tokens-stddev"
    ),
    "output_tokens_mean": ("workload.outputTokens.mean", "--output-tokens-mean"),
    "output_tokens_stddev": ("workload.outputTokens.stddev", "--output-tokens-stddev"),
    "output_tokens_mean_deterministic": (
        "workload.outputTokens.deterministic", "--output-tokens-mean-deterministic"
    ),
    "extra_inputs": ("workload.extraInputs", "--extra-inputs"),
    "input_file": ("workload.inputFile", "--input-file"),
    "num_prompts": ("workload.numPrompts", "--num-prompts"),
    "tokenizer": ("workload.tokenizer", "--tokenizer"),
    "goodput": ("slo", "--goodput"),
}

#: ``--goodput`` keys → the Slo fields that hold them.
_GOODPUT_FIELDS = {"ttft": "ttftP99Ms", "itl": "itlP99Ms", "e2e": "e2eP99Ms"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """All flags of one load point; ``analyze`` reuses them for every point of a sweep."""
    t = p.add_argument_group("target")
    t.add_argument("-m", "--model", help="model name as served (default: the first in /v1/models)")
    t.add_argument("-u", "--url", default="http://127.0.0.1:8000", help="server base URL")
    t.add_argument("--endpoint-type", choices=("chat", "completions", "embeddings"), default="chat")
    t.add_argument("--endpoint", help="custom path, e.g. /v1/chat/completions")
    t.add_argument(
        "--streaming",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream responses (SSE); needed for TTFT and ITL (default: on)",
    )
    t.add_argument("--api-key-env", metavar="NAME", help="read the API key from this env var")
    t.add_argument("--api-key-file", metavar="PATH", help="read the API key from this file")
    t.add_argument(
        "-H", "--header", action="append", default=[], metavar="K:V", help="extra header"
    )
    t.add_argument("--request-timeout", type=positive_float("--request-timeout"), default=600.0)
    t.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the /v1/models check (servers without it; needs -m)",
    )

    ld = p.add_argument_group("load")
    ld.add_argument("--concurrency", type=positive_int("--concurrency"))
    ld.add_argument("--request-rate", type=positive_float("--request-rate"))
    ld.add_argument("--request-rate-mode", choices=("constant", "poisson"), default="constant")
    ld.add_argument("--max-concurrency", type=positive_int("--max-concurrency"))
    ld.add_argument(
        "--request-count",
        type=positive_int("--request-count"),
        help="measured requests (default: max(100, 4 × concurrency))",
    )
    ld.add_argument(
        "--measurement-duration",
        type=positive_float("--measurement-duration"),
        metavar="SECONDS",
        help="bound the measured phase by time instead of --request-count",
    )
    ld.add_argument(
        "--warmup-request-count", type=non_negative_int("--warmup-request-count"), default=0
    )
    ld.add_argument("--random-seed", type=non_negative_int("--random-seed"), default=0)
    ld.add_argument(
        "--workers",
        type=positive_int("--workers"),
        default=1,
        help="client processes, each with its own event loop (split the concurrency)",
    )

    w = p.add_argument_group("workload")
    w.add_argument(
        "--synthetic-input-tokens-mean",
        type=positive_int("--synthetic-input-tokens-mean"),
        default=550,
    )
    w.add_argument("--synthetic-input-tokens-stddev", type=float, default=0.0)
    w.add_argument("--output-tokens-mean", type=positive_int("--output-tokens-mean"))
    w.add_argument("--output-tokens-stddev", type=float, default=0.0)
    w.add_argument("--output-tokens-mean-deterministic", action="store_true")
    w.add_argument("--extra-inputs", action="append", default=[], metavar="KEY:VALUE")
    w.add_argument("--input-file", type=Path, help="JSONL prompts (text or chat messages)")
    w.add_argument("--num-prompts", type=positive_int("--num-prompts"), default=100)
    w.add_argument(
        "--tokenizer",
        help="local tokenizer dir or tokenizer.json, a cached hub id, 'server' "
        "(the target's /tokenize) or 'default' (embedded, no network)",
    )

    telemetry_flags.add_arguments(p)

    o = p.add_argument_group("output")
    o.add_argument(
        "--goodput", nargs="+", default=[], metavar="KEY:MS", help="SLOs: ttft:MS itl:MS e2e:MS"
    )
    o.add_argument("--artifact-dir", type=Path)
    o.add_argument("-v", "--verbose", action="store_true")


def _flag_value(dest: str, value: Any) -> Any:
    """A flag's value in the spec's terms (parsed lists become mappings, paths strings)."""
    from llmbench.runner.load.workload import parse_extra_inputs

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
    by_path.update(extra or {})
    lines = []
    for issue in exc.issues:
        path = issue.path
        while path and path not in by_path:
            path = path.rpartition(".")[0]
        name = by_path.get(path)
        lines.append(f"{name}: {issue.message}" if name else str(issue))
    return ValueError("\n".join(lines))


def spec_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``spec`` mapping the profile flags describe, before validation."""
    if args.concurrency is not None and args.request_rate is not None:
        raise ValueError("--concurrency and --request-rate: choose one load mode")
    if args.max_concurrency is not None and args.request_rate is None:
        raise ValueError("--max-concurrency applies to --request-rate runs only")
    if args.endpoint_type == "embeddings" and args.goodput:
        raise ValueError("--goodput needs a generating endpoint, not --endpoint-type embeddings")
    doc: dict[str, Any] = {
        "load": {"mode": "request_rate" if args.request_rate is not None else "concurrency"}
    }
    for dest, (path, _flag) in SPEC_FLAGS.items():
        value = getattr(args, dest, None)
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


async def _main(cfg: Any) -> int:
    from llmbench.runner.load.engine import Progress, expected_total
    from llmbench.runner.point.profile import install_stop_signals, run_profile
    from llmbench.runner.report.console import notes, results_table, show_progress, stderr_console

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
    console.print(results_table(result.summary))
    for line in notes(result.summary):
        console.print(line)
    if result.artifact_dir is not None:
        console.print(f"artefacts: {result.artifact_dir}")
    return 130 if result.summary.interrupted else 0


def run(args: argparse.Namespace) -> int:
    """The ``profile`` subcommand: 0 measured, 1 target problem, 2 usage error, 130 interrupted."""
    from llmbench.runner.client.transport import ConnectError
    from llmbench.runner.point.config import point_config
    from llmbench.runner.point.profile import ProfileError

    try:
        spec = spec_from_flags(args)
        cfg = point_config(
            spec,
            api_key=read_api_key(args),
            headers=parse_headers(args.header),
            preflight=args.preflight,
            artifact_dir=args.artifact_dir,
            telemetry=telemetry_flags.collector_from_args(args, args.url),
        )
    except ValueError as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(cfg))
    except (ProfileError, ConnectError) as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # bad workload input (input file, tokenizer) found while preparing
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2
