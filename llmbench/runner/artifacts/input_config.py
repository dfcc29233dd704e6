"""``input_config`` in GenAI-Perf's nested schema, from our flat settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmbench.runner.artifacts.layout import DEFAULT_STEM

__all__ = ["GOODPUT_NAMES", "genai_perf_input_config"]

#: Our SLO names -> GenAI-Perf's ``--goodput`` names.
GOODPUT_NAMES = {
    "ttft": "time_to_first_token",
    "itl": "inter_token_latency",
    "e2e": "request_latency",
    "ttst": "time_to_second_token",
    "otpu": "output_token_throughput_per_user",
}

_OUTPUT_FORMATS = {
    "chat": "openai_chat_completions",
    "completions": "openai_completions",
    "embeddings": "openai_embeddings",
}


def _or_empty(value: Any) -> Any:
    """GenAI-Perf writes an unset option (``None``) as ``""``."""
    return "" if value is None else value


def _whole_or_float(x: float) -> float | int:
    """GenAI-Perf's session knobs are integers: a whole float is written as one."""
    return int(x) if float(x).is_integer() else x


def _input_config_stimulus(s: Mapping[str, Any]) -> dict[str, Any]:
    """GenAI-Perf's ``perf_analyzer.stimulus``: ``{"concurrency": N}``, ``{"request_rate":
    R}``, ``{"session_concurrency": N}`` or ``{"fixed_schedule": null}``."""
    mode = s.get("mode")
    if mode == "request_rate":
        return {"request_rate": s.get("request_rate")}
    if mode == "fixed_schedule":
        return {"fixed_schedule": None}
    if mode == "session_concurrency":
        return {"session_concurrency": s.get("concurrency", 1)}
    return {"concurrency": s.get("concurrency", 1)}


def genai_perf_input_config(
    settings: Mapping[str, Any], *, stem: str = DEFAULT_STEM, artifact_dir: Path | str = ""
) -> dict[str, Any]:
    """GenAI-Perf's ``input_config`` (its ``ConfigCommand.to_json_dict()``: sections and keys
    in its order, enums lower case, unset values ``""``) from our flat settings
    (``ProfileConfig.public_dict()``), so ``process-export-files`` can rebuild the run's config.

    Options GenAI-Perf has and we do not use carry its defaults; the tokenizer is named as the
    model's when we used our embedded or the server's one (GenAI-Perf loads tokenizers by
    name); our own settings stay, unchanged, under ``llmbench.input_config``.
    """
    s = settings
    models = list(s.get("workload_models") or ([s["model"]] if s.get("model") else []))
    stimulus = _input_config_stimulus(s)
    duration = s.get("measurement_duration_s")
    measurement = (
        {"mode": "interval", "num": int(duration * 1000)}
        if duration
        else {"mode": "request_count", "num": _or_empty(s.get("request_count"))}
    )
    goodput = {GOODPUT_NAMES.get(k, k): v for k, v in (s.get("goodput") or {}).items()}
    endpoint_type = s.get("endpoint_type", "chat")
    tokenizer = s.get("tokenizer") or "default"
    if tokenizer in ("default", "server"):
        tokenizer = models[0] if models else ""
    input_file = s.get("workload_input_file")
    return {
        "model_names": models,
        "subcommand": "profile",
        "verbose": False,
        "template_filename": "genai_perf_config.yaml",
        "analyze": {"sweep_parameters": {"concurrency": {"min": 1, "max": 1024}}},
        "endpoint": {
            "model_selection_strategy": s.get("workload_model_selection_strategy")
            or "round_robin",
            # unset (Triton-only): GenAI-Perf's config parser refuses a backend with openai
            "backend": "",
            "custom": str(s.get("endpoint") or "").lstrip(" /"),
            "type": endpoint_type,
            "streaming": bool(s.get("streaming", False)),
            "server_metrics_urls": list(s.get("server_metrics_urls") or []),
            "url": s.get("url", ""),
            "grpc_method": "",
            "service_kind": "openai",
            "output_format": _OUTPUT_FORMATS.get(endpoint_type, endpoint_type),
        },
        "perf_analyzer": {
            "path": "perf_analyzer",
            "verbose": False,
            "stimulus": stimulus,
            "stability_percentage": s.get("stability_percentage") or 999,
            "measurement": measurement,
            "warmup_request_count": s.get("warmup_request_count", 0),
        },
        "input": {
            "batch_size": 1,
            "extra": s.get("workload_extra_inputs") or "",
            "goodput": goodput or "",
            "header": "",
            "file": _or_empty(input_file),
            "num_dataset_entries": s.get("workload_num_prompts", 100),
            "random_seed": s.get("workload_random_seed", 0),
            "audio": {
                "batch_size": 1,
                "length": {"mean": 0, "stddev": 0},
                "format": "wav",
                "depths": [16],
                "sample_rates": [16],
                "num_channels": 1,
            },
            "image": {
                "width": {"mean": 0, "stddev": 0},
                "height": {"mean": 0, "stddev": 0},
                "batch_size": 1,
                "format": "png",
            },
            "output_tokens": {
                "mean": _or_empty(s.get("workload_output_tokens_mean")),
                "deterministic": bool(s.get("workload_output_tokens_mean_deterministic")),
                "stddev": s.get("workload_output_tokens_stddev") or 0,
            },
            "synthetic_tokens": {
                "mean": s.get("workload_synthetic_input_tokens_mean", 550),
                "stddev": s.get("workload_synthetic_input_tokens_stddev") or 0,
            },
            "prefix_prompt": {
                "num": s.get("workload_num_prefix_prompts") or 0,
                "length": s.get("workload_prefix_prompt_length") or 100,
            },
            "sessions": {
                "num": s.get("num_sessions") or 0,
                "turns": {
                    "mean": s.get("session_turns_mean") or 1,
                    "stddev": _whole_or_float(s.get("session_turns_stddev") or 0),
                },
                "turn_delay": {
                    "mean": _whole_or_float(s.get("session_turn_delay_mean_ms") or 0),
                    "ratio": 1.0,
                    "stddev": _whole_or_float(s.get("session_turn_delay_stddev_ms") or 0),
                },
            },
            "prompt_source": "file" if input_file else "synthetic",
            "synthetic_files": [],
            "payload_file": "",
        },
        "output": {
            "artifact_directory": str(artifact_dir),
            "checkpoint_directory": "./checkpoint",
            "profile_export_file": f"{stem}.json",
            "generate_plots": False,
            "enable_checkpointing": False,
        },
        "tokenizer": {
            "name": tokenizer,
            "revision": s.get("tokenizer_revision") or "main",
            "trust_remote_code": False,
        },
        "process": {"input_path": "aggregated"},
    }
