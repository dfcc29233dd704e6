"""What a load point's workload is: GenAI-Perf's workload settings, and ``--extra-inputs``.

Validated here, before any prompt is built, so a bad setting fails naming its flag. A field
that is a spec field under its own name says so in its metadata (``{"spec": "workload.seed"}``,
a path from the ``Spec`` root) and ``point/config.py``'s ``point_config`` copies it; so a new
setting is its spec field and its field here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ENDPOINT_TYPES", "WorkloadConfig", "parse_extra_inputs"]

ENDPOINT_TYPES = ("chat", "completions", "embeddings")

_NUMBER_RE = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


@dataclass
class WorkloadConfig:
    """What to send; GenAI-Perf's flags and defaults.

    ``model``, ``endpoint_type`` and ``streaming`` are usually filled in by the profile from
    the target settings. ``output_tokens_mean=None`` (or ``<= 0``) sends no ``max_tokens``:
    the server decides, as with GenAI-Perf's default of -1.
    """

    synthetic_input_tokens_mean: int = 550
    synthetic_input_tokens_stddev: float = field(
        default=0.0, metadata={"spec": "workload.input_tokens.stddev"}
    )
    output_tokens_mean: int | None = None
    output_tokens_stddev: float = field(
        default=0.0, metadata={"spec": "workload.output_tokens.stddev"}
    )
    output_tokens_mean_deterministic: bool = field(
        default=False, metadata={"spec": "workload.output_tokens.deterministic"}
    )
    extra_inputs: dict[str, Any] = field(
        default_factory=dict, metadata={"spec": "workload.extra_inputs"}
    )
    input_file: str | Path | None = field(default=None, metadata={"spec": "workload.input_file"})
    random_seed: int = field(default=0, metadata={"spec": "workload.seed"})
    endpoint_type: str = "chat"
    model: str = ""
    streaming: bool = False
    num_prompts: int = field(default=100, metadata={"spec": "workload.num_prompts"})
    #: Several models (GenAI-Perf's ``-m A B``): prompt i goes to one of them, by
    #: ``model_selection_strategy`` (``round_robin``: i mod N; ``random``: seeded); empty
    #: means every request goes to ``model``.
    models: list[str] = field(default_factory=list)
    model_selection_strategy: str = field(
        default="round_robin", metadata={"spec": "workload.model_selection_strategy"}
    )
    #: GenAI-Perf's ``--num-prefix-prompts``: a pool of this many shared prefixes (0: none);
    #: each synthetic prompt starts with one of them, picked with the seed.
    num_prefix_prompts: int = field(default=0, metadata={"spec": "workload.num_prefix_prompts"})
    #: ``--prefix-prompt-length``: the exact token count of each prefix.
    prefix_prompt_length: int = field(
        default=100, metadata={"spec": "workload.prefix_prompt_length"}
    )

    def validate(self) -> None:
        """Raise ``ValueError`` naming the flag of the first bad setting."""
        if self.endpoint_type not in ENDPOINT_TYPES:
            raise ValueError(
                f"--endpoint-type {self.endpoint_type!r}: expected one of "
                f"{', '.join(ENDPOINT_TYPES)}"
            )
        if self.synthetic_input_tokens_mean < 1:
            raise ValueError("--synthetic-input-tokens-mean must be at least 1")
        if not self.synthetic_input_tokens_stddev >= 0:
            raise ValueError("--synthetic-input-tokens-stddev must be >= 0")
        if not self.output_tokens_stddev >= 0:
            raise ValueError("--output-tokens-stddev must be >= 0")
        if self.output_tokens_mean_deterministic and not self.output_mean():
            raise ValueError(
                "--output-tokens-mean-deterministic needs --output-tokens-mean"
            )
        if self.num_prompts < 1:
            raise ValueError("--num-prompts must be at least 1")
        if self.random_seed < 0:
            raise ValueError("--random-seed must be >= 0")
        if self.num_prefix_prompts < 0:
            raise ValueError("--num-prefix-prompts must be >= 0")
        if self.num_prefix_prompts and self.prefix_prompt_length < 1:
            raise ValueError("--prefix-prompt-length must be at least 1")
        if self.num_prefix_prompts and self.input_file is not None:
            raise ValueError(
                "--num-prefix-prompts applies to synthetic prompts, not to --input-file"
            )

    def output_mean(self) -> int | None:
        """The mean output length to request, or None when the server decides."""
        mean = self.output_tokens_mean
        return mean if mean is not None and mean > 0 else None


# -- --extra-inputs --------------------------------------------------------------------------


def _parse_value(raw: str, item: str) -> Any:
    if raw in ("true", "True", "TRUE"):
        return True
    if raw in ("false", "False", "FALSE"):
        return False
    if raw[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"--extra-inputs {item!r}: the value looks like JSON but does not parse "
                f"({exc.msg} at column {exc.colno})"
            ) from None
    if _NUMBER_RE.fullmatch(raw):
        if re.fullmatch(r"[+-]?\d+", raw):
            return int(raw)
        value = float(raw)
        if math.isfinite(value):
            return value
    return raw


def parse_extra_inputs(items: Sequence[str]) -> dict[str, Any]:
    """Parse ``--extra-inputs key:value`` items into a dict merged into every request body.

    Values are typed the way GenAI-Perf users expect: ``true``/``false`` become booleans,
    integers and decimals numbers, a value starting with ``{`` or ``[`` is parsed as JSON,
    anything else stays a string. The split is at the first ``:``, so values may contain
    colons (URLs). A later item overrides an earlier one with the same key.

    Example::

        parse_extra_inputs(["ignore_eos:true", "temperature:0.7", 'stop:["\\n"]'])
        # -> {"ignore_eos": True, "temperature": 0.7, "stop": ["\\n"]}

    Raises:
        ValueError: naming ``--extra-inputs`` and the bad item.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition(":")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--extra-inputs {item!r}: expected KEY:VALUE, e.g. ignore_eos:true")
        out[key] = _parse_value(raw.strip(), item)
    return out
