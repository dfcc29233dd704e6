"""The simulator's knobs: ``SimConfig``, one dataclass every other sim module reads.

Why a module of its own: the server, the generation timers, the launchers and the command
line all need the settings, and ``POST /sim/config`` rebuilds and re-validates them at run
time, so the dataclass and its validation sit below everything else with no imports of
their own. The flags that fill it are in ``llmbench.sim.cli``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

__all__ = ["REASONING_FIELDS", "SimConfig"]

#: The delta keys reasoning text travels in: vLLM's and SGLang's reasoning parsers
#: (``reasoning_content``) and OpenAI-style / newer vLLM (``reasoning``).
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(slots=True)
class SimConfig:
    """Every simulator knob. Times in milliseconds, rates as probabilities per request."""

    model: str = "llmbench-sim"
    host: str = "127.0.0.1"
    port: int = 8000
    seed: int = 0
    ttft_ms: float = 50.0
    ttft_jitter_ms: float = 0.0
    itl_ms: float = 10.0
    itl_jitter_ms: float = 0.0
    itl_ms_per_seq: float = 0.0
    prefill_ms_per_token: float = 0.0
    max_num_seqs: int = 0
    tokens_per_chunk: int = 1
    max_events_per_write: int = 0
    natural_output_tokens: int = 0
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning_content"
    reasoning_usage: bool = True
    default_max_tokens: int = 256
    max_model_len: int = 32768
    kv_cache_tokens: int = 0
    embedding_dim: int = 32
    error_rate_429: float = 0.0
    error_rate_500: float = 0.0
    disconnect_rate: float = 0.0
    malformed_rate: float = 0.0
    api_key: str | None = None
    max_records: int = 1_000_000
    workers: int = 1
    tokenizer: str = "default"
    chat_template_tokens: int = 0
    dcgm: bool = False
    dcgm_gpus: int = 1
    dcgm_pod: str | None = None
    dcgm_namespace: str | None = None
    dcgm_collect_interval_s: float = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimConfig:
        """Builds the config from parsed ``add_arguments`` flags (unknown attributes ignored)."""
        values = {f.name: getattr(args, f"sim_{f.name}") for f in fields(cls)
                  if hasattr(args, f"sim_{f.name}")}
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Rejects impossible settings with a message naming the flag."""
        for name in ("ttft_ms", "ttft_jitter_ms", "itl_ms", "itl_jitter_ms", "itl_ms_per_seq",
                     "prefill_ms_per_token"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        for name in ("error_rate_429", "error_rate_500", "disconnect_rate", "malformed_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be within [0, 1]")
        if self.error_rate_429 + self.error_rate_500 > 1.0:
            raise ValueError("--error-rate-429 + --error-rate-500 must be <= 1")
        if self.max_events_per_write < 0:
            raise ValueError("--max-events-per-write must be >= 0 (0 = no cap)")
        if self.tokens_per_chunk < 1:
            raise ValueError("--tokens-per-chunk must be >= 1")
        if self.reasoning_tokens < 0:
            raise ValueError("--reasoning-tokens must be >= 0 (0 = no reasoning deltas)")
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(
                f"--reasoning-field must be one of {', '.join(REASONING_FIELDS)}, "
                f"not {self.reasoning_field!r}"
            )
        if self.max_num_seqs < 0:
            raise ValueError("--max-num-seqs must be >= 0 (0 = unlimited)")
        if self.workers < 1:
            raise ValueError("--workers must be >= 1")
        if self.dcgm_gpus < 1:
            raise ValueError("--dcgm-gpus must be >= 1")
        if self.dcgm_collect_interval_s < 0:
            raise ValueError("--dcgm-collect-interval must be >= 0")
        if self.chat_template_tokens < 0:
            raise ValueError("--chat-template-tokens must be >= 0")
        if self.max_records < 0:
            raise ValueError("--max-records must be >= 0")
        if self.default_max_tokens < 1 or self.max_model_len < 2:
            raise ValueError("--default-max-tokens must be >= 1 and --max-model-len >= 2")
