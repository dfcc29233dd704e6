"""GenAI-Perf compatibility of the command line: what llmbench does not implement, said so.

Why a module of its own: GenAI-Perf's command lines should run unchanged, and where one asks
for something llmbench does not do (audio or image inputs, gRPC, Triton's endpoint types), the
answer is a usage error naming it, never argparse's bare "unrecognized arguments" or a silent
no-op. These tables are that knowledge, kept apart from the flags llmbench does implement.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = [
    "GENAI_PERF_PARSERS",
    "GENAI_PERF_SPELLINGS",
    "UNSUPPORTED_FLAGS",
    "add_unsupported",
    "endpoint_type",
    "service_kind",
]

#: GenAI-Perf's spellings of llmbench's flags, in ``--help`` order: the flag's own names
#: (``CliFlag.names``, which messages show) with the aliases GenAI-Perf users type added.
GENAI_PERF_SPELLINGS: dict[str, tuple[str, ...]] = {
    "--url": ("-u", "--url"),
    "--request-count": ("--request-count", "--num-requests"),
    "--warmup-request-count": ("--warmup-request-count", "--num-warmup-requests"),
    "--synthetic-input-tokens-mean": ("--synthetic-input-tokens-mean", "--isl"),
    "--output-tokens-mean": ("--output-tokens-mean", "--osl"),
    "--goodput": ("--goodput", "-g"),
}

#: GenAI-Perf endpoint types that are not OpenAI chat/completions/embeddings → why not.
OTHER_ENDPOINT_TYPES = {
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


def endpoint_type(text: str) -> str:
    """``--endpoint-type``: chat, completions or embeddings; GenAI-Perf's others say why not."""
    if text in ("chat", "completions", "embeddings"):
        return text
    if text in OTHER_ENDPOINT_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} ({OTHER_ENDPOINT_TYPES[text]}): this GenAI-Perf endpoint type is not "
            "supported by llmbench, which measures OpenAI-compatible chat, completions and "
            "embeddings"
        )
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected chat, completions or embeddings"
    )


def service_kind(text: str) -> str:
    """``--service-kind`` (older GenAI-Perf): only ``openai`` means something here."""
    if text != "openai":
        raise argparse.ArgumentTypeError(
            f"{text!r}: llmbench measures OpenAI-compatible HTTP endpoints only "
            "(--service-kind openai); Triton-native and gRPC services are not supported"
        )
    return text


def add_unsupported(p: argparse.ArgumentParser) -> None:
    """Registers :data:`UNSUPPORTED_FLAGS` not otherwise taken (see there)."""
    taken = set(p._option_string_actions)
    for names, what in UNSUPPORTED_FLAGS.items():
        free = [n for n in names if n not in taken]
        if free:
            p.add_argument(*free, action=_Unsupported, what=what, dest=argparse.SUPPRESS)


#: Flags whose value GenAI-Perf users may give in a form llmbench refuses with a message of
#: its own: the parser replaces the one the spec field's type would give.
GENAI_PERF_PARSERS: dict[str, Callable[[str], Any]] = {"--endpoint-type": endpoint_type}
