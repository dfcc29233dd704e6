"""The ``llmbench`` command line: GenAI-Perf's flags, our defaults.

Subcommands: ``profile`` (one load point), ``sim`` (the built-in OpenAI-compatible server).
Every bad flag is a usage error that names the flag and says what would be accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench import __version__
from llmbench.runner import telemetry
from llmbench.runner.load.engine import LoadConfig, Progress, expected_total
from llmbench.runner.point.metrics import SLO_KEYS

#: Subcommands implemented in their own modules: name → (module, help).
_SUBCOMMANDS = {
    "sim": ("llmbench.sim.server", "run the built-in OpenAI-compatible simulator"),
    "analyze": ("llmbench.runner.sweep.analyze", "sweep load points: knee, max load under SLO, cost"),
    "report": ("llmbench.runner.report.html", "rebuild plots and the HTML report from a result folder"),
    "compare": ("llmbench.runner.sweep.compare", "compare two profiles or sweeps; exit 1 on regression"),
}


def _positive_int(flag: str) -> Any:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects an integer, got {text!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {v}")
        return v

    return parse


def _non_negative_int(flag: str) -> Any:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects an integer, got {text!r}") from None
        if v < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be 0 or more, got {v}")
        return v

    return parse


def _positive_float(flag: str) -> Any:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects a number, got {text!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{flag} must be greater than 0, got {text}")
        return v

    return parse


def parse_limits(
    items: Sequence[str], flag: str, keys: Sequence[str], unit: str = "a number"
) -> dict[str, float]:
    """``KEY:VALUE`` items with KEY from ``keys`` and VALUE > 0 (``--goodput``, ``--slo``).

    Errors are ValueErrors that name ``flag``, the item and what would be accepted.
    """
    out: dict[str, float] = {}
    for item in items:
        key, sep, raw = item.partition(":")
        key = key.strip().lower()
        if not sep or key not in keys:
            raise ValueError(
                f"{flag} item {item!r}: expected KEY:VALUE with KEY one of {', '.join(keys)}"
            )
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{flag} item {item!r}: {raw!r} is not {unit}") from None
        if not value > 0:
            raise ValueError(f"{flag} item {item!r}: the limit must be greater than 0")
        out[key] = value
    return out


def parse_slo(items: Sequence[str], flag: str = "--goodput") -> dict[str, float]:
    """``ttft:300 itl:20 e2e:5000`` → {"ttft": 300.0, ...}: per-request limits in ms."""
    return parse_limits(items, flag, SLO_KEYS, "a number of milliseconds")


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
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
    t.add_argument("--request-timeout", type=_positive_float("--request-timeout"), default=600.0)
    t.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the /v1/models check (servers without it; needs -m)",
    )

    ld = p.add_argument_group("load")
    ld.add_argument("--concurrency", type=_positive_int("--concurrency"))
    ld.add_argument("--request-rate", type=_positive_float("--request-rate"))
    ld.add_argument("--request-rate-mode", choices=("constant", "poisson"), default="constant")
    ld.add_argument("--max-concurrency", type=_positive_int("--max-concurrency"))
    ld.add_argument(
        "--request-count",
        type=_positive_int("--request-count"),
        help="measured requests (default: max(100, 4 × concurrency))",
    )
    ld.add_argument(
        "--measurement-duration",
        type=_positive_float("--measurement-duration"),
        metavar="SECONDS",
        help="bound the measured phase by time instead of --request-count",
    )
    ld.add_argument(
        "--warmup-request-count", type=_non_negative_int("--warmup-request-count"), default=0
    )
    ld.add_argument("--random-seed", type=int, default=0)
    ld.add_argument(
        "--workers",
        type=_positive_int("--workers"),
        default=1,
        help="client processes, each with its own event loop (split the concurrency)",
    )

    w = p.add_argument_group("workload")
    w.add_argument(
        "--synthetic-input-tokens-mean",
        type=_positive_int("--synthetic-input-tokens-mean"),
        default=550,
    )
    w.add_argument("--synthetic-input-tokens-stddev", type=float, default=0.0)
    w.add_argument("--output-tokens-mean", type=_positive_int("--output-tokens-mean"))
    w.add_argument("--output-tokens-stddev", type=float, default=0.0)
    w.add_argument("--output-tokens-mean-deterministic", action="store_true")
    w.add_argument("--extra-inputs", action="append", default=[], metavar="KEY:VALUE")
    w.add_argument("--input-file", type=Path, help="JSONL prompts (text or chat messages)")
    w.add_argument("--num-prompts", type=_positive_int("--num-prompts"), default=100)
    w.add_argument(
        "--tokenizer",
        help="local tokenizer dir or tokenizer.json, a cached hub id, 'server' "
        "(the target's /tokenize) or 'default' (embedded, no network)",
    )

    telemetry.add_arguments(p)

    o = p.add_argument_group("output")
    o.add_argument(
        "--goodput", nargs="+", default=[], metavar="KEY:MS", help="SLOs: ttft:MS itl:MS e2e:MS"
    )
    o.add_argument("--artifact-dir", type=Path)
    o.add_argument("-v", "--verbose", action="store_true")


def _read_api_key(args: argparse.Namespace) -> str | None:
    if args.api_key_env and args.api_key_file:
        raise ValueError("--api-key-env and --api-key-file: give only one")
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise ValueError(
                f"--api-key-env {args.api_key_env}: that environment variable is not set"
            )
        return key
    if args.api_key_file:
        try:
            return Path(args.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"--api-key-file {args.api_key_file}: {exc.strerror}") from None
    return None


def profile_config_from_args(args: argparse.Namespace) -> Any:
    """Builds a :class:`ProfileConfig`; raises ValueError naming the flag on bad combinations."""
    from llmbench.runner.load import workload as wl
    from llmbench.runner.point.profile import ProfileConfig

    if args.concurrency is not None and args.request_rate is not None:
        raise ValueError("--concurrency and --request-rate: choose one load mode")
    if args.max_concurrency is not None and args.request_rate is None:
        raise ValueError("--max-concurrency applies to --request-rate runs only")
    if args.endpoint_type == "embeddings" and args.goodput:
        raise ValueError("--goodput needs a generating endpoint, not --endpoint-type embeddings")
    mode = "request_rate" if args.request_rate is not None else "concurrency"
    concurrency = args.concurrency or 1
    request_count = args.request_count
    if request_count is None and args.measurement_duration is None:
        request_count = max(100, 4 * (args.max_concurrency or concurrency))
    if args.request_rate is not None:
        concurrency = args.max_concurrency or 1
    headers = {}
    for h in args.header:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            raise ValueError(f"-H/--header {h!r}: expected NAME:VALUE")
        headers[k.strip()] = v.strip()
    load = LoadConfig(
        mode=mode,
        concurrency=concurrency,
        request_rate=args.request_rate,
        rate_mode=args.request_rate_mode,
        max_concurrency=args.max_concurrency,
        request_count=request_count,
        measurement_duration_s=args.measurement_duration,
        warmup_request_count=args.warmup_request_count,
        seed=args.random_seed,
        request_timeout_s=args.request_timeout,
        workers=args.workers,
        endpoint_type=args.endpoint_type,
    )
    workload = wl.WorkloadConfig(
        synthetic_input_tokens_mean=args.synthetic_input_tokens_mean,
        synthetic_input_tokens_stddev=args.synthetic_input_tokens_stddev,
        output_tokens_mean=args.output_tokens_mean,
        output_tokens_stddev=args.output_tokens_stddev,
        output_tokens_mean_deterministic=args.output_tokens_mean_deterministic,
        extra_inputs=wl.parse_extra_inputs(args.extra_inputs),
        input_file=args.input_file,
        random_seed=args.random_seed,
        num_prompts=args.num_prompts,
    )
    return ProfileConfig(
        url=args.url,
        model=args.model,
        endpoint_type=args.endpoint_type,
        endpoint=args.endpoint,
        streaming=args.streaming and args.endpoint_type != "embeddings",
        load=load,
        workload=workload,
        tokenizer=args.tokenizer,
        goodput=parse_slo(args.goodput),
        api_key=_read_api_key(args),
        headers=headers,
        artifact_dir=args.artifact_dir,
        preflight=args.preflight,
        telemetry=telemetry.collector_from_args(args, args.url),
    )


async def _profile_main(cfg: Any) -> int:
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
    return 130 if result.summary.get("interrupted") else 0


def run_profile_command(args: argparse.Namespace) -> int:
    from llmbench.runner.client.transport import ConnectError
    from llmbench.runner.point.profile import ProfileError

    try:
        cfg = profile_config_from_args(args)
    except ValueError as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_profile_main(cfg))
    except (ProfileError, ConnectError) as exc:
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # bad workload input (input file, tokenizer) found while preparing
        print(f"llmbench profile: error: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmbench",
        description="Benchmark OpenAI-compatible LLM inference servers with GenAI-Perf semantics.",
    )
    parser.add_argument("--version", action="version", version=f"llmbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    prof = sub.add_parser("profile", help="measure one load point")
    add_profile_arguments(prof)
    prof.set_defaults(func=run_profile_command)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        mod = importlib.import_module(module)
        sp = sub.add_parser(name, help=help_text)
        mod.add_arguments(sp)
        sp.set_defaults(func=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "verbose", False):
        # httpx logs every request at INFO: preflights and telemetry scrapes would flood the
        # console and the pod logs.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
