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
    non_negative_float,
    non_negative_int,
    normalize_endpoint,
    normalize_url,
    parse_extra_inputs,
    parse_headers,
    parse_slo,
    positive_float,
    positive_int,
    read_api_key,
)

__all__ = [
    "SPEC_FLAGS",
    "UNSUPPORTED_FLAGS",
    "add_arguments",
    "check_genai_perf_flags",
    "flag_error",
    "run",
    "spec_from_flags",
]

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
    "measurement_interval": ("load.measurementIntervalMs", "--measurement-interval/-p"),
    "fixed_schedule": ("load.fixedSchedule", "--fixed-schedule"),
    "stability_percentage": ("load.stabilityPercentage", "--stability-percentage/-s"),
    "workers": ("load.workers", "--workers"),
    "num_sessions": ("load.sessions.count", "--num-sessions"),
    "session_concurrency": ("load.sessions.concurrency", "--session-concurrency"),
    "session_turns_mean": ("load.sessions.turnsMean", "--session-turns-mean"),
    "session_turns_stddev": ("load.sessions.turnsStddev", "--session-turns-stddev"),
    "session_turn_delay_mean": (
        "load.sessions.turnDelayMeanMs", "--session-turn-delay-mean"
    ),
    "session_turn_delay_stddev": (
        "load.sessions.turnDelayStddevMs", "--session-turn-delay-stddev"
    ),
    "random_seed": ("workload.seed", "--random-seed"),
    "models": ("workload.models", "-m/--model"),
    "model_selection_strategy": (
        "workload.modelSelectionStrategy", "--model-selection-strategy"
    ),
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
    "num_prompts": ("workload.numPrompts", "--num-dataset-entries/--num-prompts"),
    "num_prefix_prompts": ("workload.numPrefixPrompts", "--num-prefix-prompts"),
    "prefix_prompt_length": ("workload.prefixPromptLength", "--prefix-prompt-length"),
    "tokenizer": ("workload.tokenizer", "--tokenizer"),
    "tokenizer_revision": ("workload.tokenizerRevision", "--tokenizer-revision"),
    "goodput": ("slo", "--goodput"),
}

#: ``--goodput`` keys → the Slo fields that hold them.
_GOODPUT_FIELDS = {
    "ttft": "ttftP99Ms",
    "itl": "itlP99Ms",
    "e2e": "e2eP99Ms",
    "ttst": "ttstP99Ms",
    "otpu": "minOutputTokenThroughputPerUser",
}

#: GenAI-Perf endpoint types that are not OpenAI chat/completions/embeddings → why not.
_OTHER_ENDPOINT_TYPES = {
    "kserve": "Triton's KServe gRPC protocol",
    "template": "Triton's KServe gRPC protocol with a payload template",
    "tensorrtllm_engine": "an in-process TensorRT-LLM engine",
    "dynamic_grpc": "a gRPC service",
    "generate": "Triton's native HTTP generate API",
    "huggingface_generate": "TGI's native generate API",
    "rankings": "reranking models",
    "image_retrieval": "image inputs",
    "nvclip": "image inputs",
    "multimodal": "image and audio inputs",
    "vision": "image inputs",
}

#: GenAI-Perf flags llmbench does not implement → what they are for. Each is a usage error
#: that says so (never argparse's bare "unrecognized arguments"); a flag that some other part
#: of llmbench registers is skipped here, so implementing one needs no change to this table.
UNSUPPORTED_FLAGS: dict[tuple[str, ...], str] = {
    ("--audio-length-mean",): "audio inputs",
    ("--audio-length-stddev",): "audio inputs",
    ("--audio-format",): "audio inputs",
    ("--audio-depths",): "audio inputs",
    ("--audio-sample-rates",): "audio inputs",
    ("--audio-num-channels",): "audio inputs",
    ("--batch-size-audio",): "audio inputs",
    ("--image-width-mean",): "image inputs",
    ("--image-width-stddev",): "image inputs",
    ("--image-height-mean",): "image inputs",
    ("--image-height-stddev",): "image inputs",
    ("--image-format",): "image inputs",
    ("--batch-size-image",): "image inputs",
    ("--batch-size-text", "--batch-size", "-b"): "batched embeddings/rankings inputs "
    "(llmbench sends one input per request)",
    ("--grpc-method",): "gRPC endpoints (llmbench speaks OpenAI-compatible HTTP)",
    ("--session-delay-ratio",): "scaling the session delays of a payload file (llmbench's "
    "sessions are synthetic: set --session-turn-delay-mean)",
    ("--checkpoint-dir",): "a separate checkpoint folder (analyze keeps checkpoint.json "
    "in its --artifact-dir)",
    ("--override-config",): "GenAI-Perf's config subcommand (use llmbench analyze -f "
    "MANIFEST)",
}


#: GenAI-Perf's ``--input-file PREFIX:...`` forms llmbench does not read → what they are.
_INPUT_FILE_PREFIXES = {
    "synthetic": "synthetic files for multi-file converters such as rankings",
}


class _Unsupported(argparse.Action):
    """A GenAI-Perf flag llmbench does not implement: a usage error saying so."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        self.what: str = kwargs.pop("what")
        kwargs["nargs"] = "*"
        kwargs.setdefault("help", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string}: GenAI-Perf's flag for {self.what} is not supported by llmbench"
        )


def _endpoint_type(text: str) -> str:
    """``--endpoint-type``: chat, completions or embeddings; GenAI-Perf's others say why not."""
    if text in ("chat", "completions", "embeddings"):
        return text
    if text in _OTHER_ENDPOINT_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} ({_OTHER_ENDPOINT_TYPES[text]}): this GenAI-Perf endpoint type is not "
            "supported by llmbench, which measures OpenAI-compatible chat, completions and "
            "embeddings"
        )
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected chat, completions or embeddings"
    )


def _on_off(flag: str) -> Any:
    """GenAI-Perf's ``type=bool`` flags: bare, or with true/false (1/0, yes/no)."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in ("true", "1", "yes", "on"):
            return True
        if word in ("false", "0", "no", "off"):
            return False
        raise argparse.ArgumentTypeError(f"{flag} expects true or false, got {text!r}")

    return parse


def _service_kind(text: str) -> str:
    """``--service-kind`` (older GenAI-Perf): only ``openai`` means something here."""
    if text != "openai":
        raise argparse.ArgumentTypeError(
            f"{text!r}: llmbench measures OpenAI-compatible HTTP endpoints only "
            "(--service-kind openai); Triton-native and gRPC services are not supported"
        )
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    """All flags of one load point; ``analyze`` reuses them for every point of a sweep.

    GenAI-Perf's spellings are accepted as aliases (``--isl``, ``--osl``, ``--num-requests``,
    ``-g`` ...), so its command lines run unchanged.
    """
    t = p.add_argument_group("target")
    t.add_argument(
        "-m",
        "--model",
        dest="models",
        nargs="+",
        action="extend",
        metavar="MODEL",
        help="model name(s) as served (default: the first in /v1/models); several spread the "
        "requests by --model-selection-strategy",
    )
    t.add_argument(
        "--model-selection-strategy",
        choices=("round_robin", "random"),
        help="with several -m: prompt i goes to model i mod N (round_robin, default) or a "
        "seeded random one",
    )
    t.add_argument(
        "-u", "--url", default="http://127.0.0.1:8000", help="server base URL (scheme optional)"
    )
    t.add_argument(
        "--endpoint-type", type=_endpoint_type, default="chat",
        help="chat (default), completions or embeddings",
    )
    t.add_argument(
        "--endpoint", help="custom path, e.g. v1/chat/completions (leading / optional)"
    )
    t.add_argument(
        "--service-kind", type=_service_kind, help="accepted for GenAI-Perf: only openai"
    )
    t.add_argument(
        "--backend",
        choices=("tensorrtllm", "vllm"),
        help="accepted for GenAI-Perf; it names a Triton backend and means nothing for an "
        "OpenAI-compatible endpoint",
    )
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
    t.add_argument(
        "--request-timeout",
        type=positive_float("--request-timeout"),
        default=600.0,
        metavar="SECONDS",
        help="per-request timeout, the preflight's included (default 600)",
    )
    t.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the /v1/models check and the probe request (needs -m)",
    )

    ld = p.add_argument_group("load")
    ld.add_argument("--concurrency", type=positive_int("--concurrency"))
    ld.add_argument("--request-rate", type=positive_float("--request-rate"))
    ld.add_argument("--request-rate-mode", choices=("constant", "poisson"), default="constant")
    ld.add_argument("--max-concurrency", type=positive_int("--max-concurrency"))
    ld.add_argument(
        "--request-count",
        "--num-requests",
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
        "--measurement-interval",
        "-p",
        type=positive_float("--measurement-interval"),
        metavar="MS",
        help="measure in time windows of MS milliseconds until the last three agree within "
        "--stability-percentage (at most 10 windows) instead of --request-count",
    )
    ld.add_argument(
        "--stability-percentage",
        "-s",
        type=positive_float("--stability-percentage"),
        metavar="PCT",
        help="with --measurement-interval: the most the last three windows' request "
        "throughput and mean latency may differ, max/min - 1 in %% (default 999)",
    )
    ld.add_argument(
        "--fixed-schedule",
        nargs="?",
        const=True,
        default=None,
        type=_on_off("--fixed-schedule"),
        metavar="true|false",
        help="replay --input-file as a trace: each row once, sent at its 'timestamp' (ms) "
        "after the first row's, open loop, the lag recorded (--input-file payload:F too)",
    )
    ld.add_argument(
        "--num-sessions",
        type=positive_int("--num-sessions"),
        metavar="N",
        help="multi-turn chat sessions instead of independent requests: each sends its turns "
        "in order with the chat history so far, the next turn a delay after the answer",
    )
    ld.add_argument(
        "--session-concurrency",
        type=positive_int("--session-concurrency"),
        metavar="N",
        help="with --num-sessions: sessions in flight (default 1)",
    )
    ld.add_argument(
        "--session-turns-mean",
        type=positive_int("--session-turns-mean"),
        metavar="TURNS",
        help="with --num-sessions: mean turns per session (default 1)",
    )
    ld.add_argument(
        "--session-turns-stddev",
        type=non_negative_float("--session-turns-stddev"),
        metavar="TURNS",
        help="with --num-sessions: standard deviation of the turns (default 0)",
    )
    ld.add_argument(
        "--session-turn-delay-mean",
        type=non_negative_float("--session-turn-delay-mean"),
        metavar="MS",
        help="with --num-sessions: mean delay (ms) from an answer to the next turn (default 0)",
    )
    ld.add_argument(
        "--session-turn-delay-stddev",
        type=non_negative_float("--session-turn-delay-stddev"),
        metavar="MS",
        help="with --num-sessions: standard deviation (ms) of the delay (default 0)",
    )
    ld.add_argument(
        "--warmup-request-count",
        "--num-warmup-requests",
        type=non_negative_int("--warmup-request-count"),
        default=0,
    )
    ld.add_argument("--random-seed", type=non_negative_int("--random-seed"), default=0)
    ld.add_argument(
        "--workers",
        type=positive_int("--workers"),
        default=1,
        help="client processes, each with its own event loop (split the concurrency)",
    )
    ld.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default=None,
        help="the client's event loop (default: uvloop where installed, i.e. on Linux)",
    )

    w = p.add_argument_group("workload")
    w.add_argument(
        "--synthetic-input-tokens-mean",
        "--isl",
        type=positive_int("--synthetic-input-tokens-mean"),
        default=550,
    )
    w.add_argument("--synthetic-input-tokens-stddev", type=float, default=0.0)
    w.add_argument(
        "--output-tokens-mean", "--osl", type=positive_int("--output-tokens-mean")
    )
    w.add_argument("--output-tokens-stddev", type=float, default=0.0)
    w.add_argument("--output-tokens-mean-deterministic", action="store_true")
    w.add_argument(
        "--extra-inputs",
        action="append",
        default=[],
        metavar="NAME[:VALUE]|JSON",
        help="merged into every request body, as GenAI-Perf parses it: NAME:VALUE "
        "(ignore_eos:true), a JSON object ('{\"temperature\": 0}') or a bare NAME (null)",
    )
    w.add_argument(
        "--input-file",
        type=Path,
        help="prompts: GenAI-Perf's JSONL (text or chat messages, output_length, Mooncake "
        "input_length/hash_ids) or ShareGPT conversations (JSONL or one JSON array)",
    )
    w.add_argument(
        "--num-dataset-entries",
        "--num-prompts",
        dest="num_prompts",
        metavar="N",
        type=positive_int("--num-dataset-entries"),
        default=100,
        help="distinct synthetic prompts, cycled (default 100)",
    )
    w.add_argument(
        "--num-prefix-prompts",
        type=non_negative_int("--num-prefix-prompts"),
        metavar="N",
        help="a pool of N shared prefixes; each synthetic prompt starts with one of them "
        "(prefix caching workloads; default 0: none)",
    )
    w.add_argument(
        "--prefix-prompt-length",
        type=positive_int("--prefix-prompt-length"),
        metavar="TOKENS",
        help="exact tokens of each prefix, on top of the synthetic length (default 100)",
    )
    w.add_argument(
        "--tokenizer",
        help="local tokenizer dir or tokenizer.json, a cached hub id, 'server' "
        "(the target's /tokenize) or 'default' (embedded, no network)",
    )
    w.add_argument(
        "--tokenizer-revision",
        metavar="REV",
        help="with a hub id: the cached snapshot of this branch, tag or commit (never fetched)",
    )
    w.add_argument(
        "--tokenizer-trust-remote-code",
        action="store_true",
        help="accepted for GenAI-Perf; llmbench loads tokenizer.json only and runs no code",
    )

    telemetry_flags.add_arguments(p)

    o = p.add_argument_group("output")
    o.add_argument(
        "--goodput",
        "-g",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="SLOs: ttft:MS itl:MS e2e:MS ttst:MS otpu:TOK_S, or GenAI-Perf's names "
        "(time_to_first_token, inter_token_latency, request_latency, time_to_second_token, "
        "output_token_throughput_per_user)",
    )
    o.add_argument("--artifact-dir", type=Path)
    o.add_argument(
        "--profile-export-file",
        type=Path,
        metavar="NAME.json",
        help="the stem of every export file, as GenAI-Perf: my.json gives my.json, "
        "my_genai_perf.json and my_genai_perf.csv",
    )
    o.add_argument(
        "--generate-plots",
        action="store_true",
        help="also write PNG plots and report.html next to the artefacts",
    )
    o.add_argument(
        "--enable-checkpointing",
        action="store_true",
        help=argparse.SUPPRESS,  # GenAI-Perf's; analyze always keeps checkpoint.json
    )
    o.add_argument("-v", "--verbose", action="store_true")
    p.add_argument(
        "passthrough",
        nargs="*",
        default=[],
        help=argparse.SUPPRESS,  # words after `--`: perf_analyzer's flags in GenAI-Perf
    )
    _add_unsupported(p)


def _add_unsupported(p: argparse.ArgumentParser) -> None:
    """Registers :data:`UNSUPPORTED_FLAGS` not otherwise taken (see there)."""
    taken = set(p._option_string_actions)
    for names, what in UNSUPPORTED_FLAGS.items():
        free = [n for n in names if n not in taken]
        if free:
            p.add_argument(*free, action=_Unsupported, what=what, dest=argparse.SUPPRESS)


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


_SESSION_KNOBS = (
    ("session_concurrency", "--session-concurrency"),
    ("session_turns_mean", "--session-turns-mean"),
    ("session_turns_stddev", "--session-turns-stddev"),
    ("session_turn_delay_mean", "--session-turn-delay-mean"),
    ("session_turn_delay_stddev", "--session-turn-delay-stddev"),
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
    from llmbench.runner.load.engine import Progress, expected_total
    from llmbench.runner.point.profile import install_stop_signals, run_profile
    from llmbench.runner.report.console import notes, results_table, show_progress, stderr_console
    from llmbench.runner.report.telemetry_plot import plot_point_telemetry

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
    console.print(results_table(result.summary))
    for line in notes(result.summary):
        console.print(line)
    if result.artifact_dir is not None:
        console.print(f"artefacts: {result.artifact_dir}")
        if generate_plots:
            _plots(result, result.artifact_dir, console)
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
