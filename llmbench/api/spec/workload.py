"""What each request sends: synthetic or file prompts, their lengths, models and extra inputs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from ..rules import ApiModel, Rule
from .flag import CliFlag
from .types import Bool, Float, Int, PositiveInt, Str

__all__ = [
    "ModelSelectionStrategy",
    "OutputTokens",
    "TokenDistribution",
    "Workload",
]

ModelSelectionStrategy = Literal["round_robin", "random"]


class TokenDistribution(ApiModel):
    """Synthetic prompt length in tokens (normal distribution)."""

    mean: Annotated[Int, CliFlag("--synthetic-input-tokens-mean")] = Field(
        default=550, ge=1, description="Mean input tokens."
    )
    stddev: Annotated[Float, CliFlag("--synthetic-input-tokens-stddev", reads="number")] = Field(
        default=0.0, ge=0, description="Standard deviation (0 = fixed)."
    )


class OutputTokens(ApiModel):
    """Requested output length; mean unset lets the server decide (GenAI-Perf's -1)."""

    RULES = (
        Rule(
            name="outputTokens.deterministic-needs-mean",
            message="outputTokens.deterministic needs outputTokens.mean (the exact length to "
            "force)",
            cel="!has(self.deterministic) || !self.deterministic || has(self.mean)",
            check=lambda o: not o.deterministic or o.mean is not None,
            field_path=".deterministic",
        ),
    )

    mean: Annotated[PositiveInt | None, CliFlag("--output-tokens-mean")] = Field(
        default=None, description="Mean output tokens (max_tokens)."
    )
    stddev: Annotated[Float, CliFlag("--output-tokens-stddev", reads="number")] = Field(
        default=0.0, ge=0, description="Standard deviation."
    )
    deterministic: Annotated[
        Bool, CliFlag("--output-tokens-mean-deterministic", form="switch")
    ] = Field(default=False, description="Also send min_tokens = the target (exact OSL).")


class Workload(ApiModel):
    """What each request sends."""

    RULES = (
        Rule(
            name="workload.prefix-prompts-synthetic-only",
            message="workload.numPrefixPrompts applies to synthetic prompts; remove it or "
            "workload.inputFile",
            cel="!has(self.numPrefixPrompts) || self.numPrefixPrompts == 0 || "
            "!has(self.inputFile)",
            check=lambda w: w.num_prefix_prompts == 0 or w.input_file is None,
            field_path=".numPrefixPrompts",
        ),
    )

    input_tokens: TokenDistribution = Field(
        default_factory=TokenDistribution, description="Synthetic prompt length."
    )
    output_tokens: OutputTokens = Field(
        default_factory=OutputTokens, description="Requested output length."
    )
    extra_inputs: Annotated[
        dict[str, Any],
        CliFlag(
            "--extra-inputs",
            form="each",
            default=(),
            metavar="NAME[:VALUE]|JSON",
            help="merged into every request body, as GenAI-Perf parses it: NAME:VALUE "
            "(ignore_eos:true), a JSON object ('{\"temperature\": 0}') or a bare NAME (null)",
        ),
    ] = Field(
        default_factory=dict, description="Merged into every request body, e.g. ignore_eos."
    )
    tokenizer: Annotated[
        Str | None,
        CliFlag(
            "--tokenizer",
            help="local tokenizer dir or tokenizer.json, a cached hub id, 'server' "
            "(the target's /tokenize) or 'default' (embedded, no network)",
        ),
    ] = Field(
        default=None,
        max_length=4096,
        description="'default', a local path, a cached hub id, or 'server'.",
    )
    tokenizer_revision: Annotated[
        Str | None,
        CliFlag(
            "--tokenizer-revision",
            metavar="REV",
            help="with a hub id: the cached snapshot of this branch, tag or commit (never "
            "fetched)",
        ),
    ] = Field(
        default=None,
        max_length=256,
        description="With a hub id: the cached snapshot of this branch, tag or commit.",
    )
    seed: Annotated[Int, CliFlag("--random-seed")] = Field(
        default=0, ge=0, description="Random seed for prompts and schedules."
    )
    num_prompts: Annotated[
        Int,
        CliFlag(
            "--num-dataset-entries",
            "--num-prompts",
            dest="num_prompts",
            metavar="N",
            help="distinct synthetic prompts, cycled (default 100)",
        ),
    ] = Field(default=100, ge=1, description="Distinct synthetic prompts.")
    models: Annotated[
        list[Annotated[str, Strict(), Field(min_length=1, max_length=512)]] | None,
        CliFlag(
            "-m",
            "--model",
            dest="models",
            form="more_words",
            metavar="MODEL",
            help="model name(s) as served (default: the first in /v1/models); several spread "
            "the requests by --model-selection-strategy",
        ),
    ] = Field(
        default=None,
        max_length=64,
        description="Several served models (GenAI-Perf's -m A B): each prompt is sent to one "
        "of them, by modelSelectionStrategy.",
    )
    model_selection_strategy: Annotated[
        ModelSelectionStrategy,
        CliFlag(
            "--model-selection-strategy",
            default=None,
            help="with several -m: prompt i goes to model i mod N (round_robin, default) or a "
            "seeded random one",
        ),
    ] = Field(
        default="round_robin",
        description="With models: prompt i goes to model i mod N (round_robin) or a seeded "
        "random one (random).",
    )
    input_file: Annotated[
        Str | None,
        CliFlag(
            "--input-file",
            reads="path",
            help="prompts: GenAI-Perf's JSONL (text or chat messages, output_length, Mooncake "
            "input_length/hash_ids) or ShareGPT conversations (JSONL or one JSON array)",
        ),
    ] = Field(
        default=None,
        max_length=4096,
        description="Prompts instead of synthetic ones: GenAI-Perf's JSONL rows (text or "
        "messages, output_length, timestamp, Mooncake input_length/hash_ids) or ShareGPT "
        "conversations, one object a line or one JSON array.",
    )
    num_prefix_prompts: Annotated[
        Int,
        CliFlag(
            "--num-prefix-prompts",
            default=None,
            metavar="N",
            help="a pool of N shared prefixes; each synthetic prompt starts with one of them "
            "(prefix caching workloads; default 0: none)",
        ),
    ] = Field(
        default=0,
        ge=0,
        le=100000,
        description="Shared-prefix prompts (GenAI-Perf's --num-prefix-prompts): a pool of this "
        "many prefixes, each synthetic prompt starting with one of them (0: none).",
    )
    prefix_prompt_length: Annotated[
        PositiveInt,
        CliFlag(
            "--prefix-prompt-length",
            default=None,
            metavar="TOKENS",
            help="exact tokens of each prefix, on top of the synthetic length (default 100)",
        ),
    ] = Field(
        default=100,
        le=1000000,
        description="Tokens of each shared prefix (exact), added to the synthetic length.",
    )
