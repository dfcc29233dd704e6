"""From the spec model to one point's settings, and from profile flags to the spec model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmbench.api import API_VERSION, Spec
from llmbench.cli import build_parser
from llmbench.cli.profile import spec_from_flags
from llmbench.cli.spec_flags import SPEC_FLAGS
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.point.config import point_config, spec_paths, spec_values
from llmbench.runner.workload.config import WorkloadConfig

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def manifest(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"target": {"url": "http://127.0.0.1:8000"}}
    body.update(spec)
    return {"apiVersion": API_VERSION, "kind": "LLMBenchmark", "metadata": {"name": "x"},
            "spec": body}


def profile_args(*flags: str) -> Any:
    return build_parser(["profile"]).parse_args(["profile", *flags])


def test_design_sketch_point() -> None:
    spec = Spec.from_manifest(yaml.safe_load((EXAMPLES / "llmbenchmark-vllm.yaml").read_text()))
    cfg = point_config(spec, 16)
    assert cfg.url == "http://vllm.llm.svc:8000"  # namespace from metadata
    assert cfg.load.concurrency == 16 and cfg.load.request_count == 200
    assert cfg.workload.extra_inputs == {"ignore_eos": True}
    assert cfg.goodput == {"ttft": 500, "itl": 50}


def test_bare_spec_defaults() -> None:
    cfg = point_config(Spec.from_manifest({"target": {"url": "http://h:1"}}))
    assert cfg.load.mode == "concurrency" and cfg.load.request_count == 100
    assert cfg.workload.synthetic_input_tokens_mean == 550


def test_sweep_points_override_the_swept_quantity() -> None:
    spec = Spec.from_manifest(manifest(sweep={"type": "request_rate", "values": [2, 4]},
                                       load={"maxConcurrency": 8, "mode": "request_rate",
                                             "requestRate": 1}))
    cfg = point_config(spec, 4)
    assert cfg.load.mode == "request_rate" and cfg.load.request_rate == 4.0
    assert cfg.load.concurrency == 8
    spec = Spec.from_manifest(
        manifest(sweep={"type": "input_sequence_length", "range": "128:512:128"})
    )
    assert point_config(spec, 384).workload.synthetic_input_tokens_mean == 384
    spec = Spec.from_manifest(manifest(sweep={"type": "output_sequence_length", "values": [8]}))
    assert point_config(spec, 8).workload.output_tokens_mean == 8
    with pytest.raises(ValueError, match="needs its value"):
        point_config(spec)


def test_request_count_default_scales_with_concurrency() -> None:
    spec = Spec.from_manifest(manifest(sweep={"type": "concurrency", "range": "1:64"}))
    assert point_config(spec, 64).load.request_count == 256


def test_flags_build_the_same_spec_as_the_manifest() -> None:
    """One mapping: a command line and the manifest that says the same thing are one spec."""
    from_flags = spec_from_flags(profile_args(
        "--url", "http://127.0.0.1:8000", "--concurrency", "3", "--request-count", "9",
        "--synthetic-input-tokens-mean", "64", "--output-tokens-mean", "8",
        "--extra-inputs", "ignore_eos:true", "--goodput", "ttft:100",
    ))
    from_file = Spec.from_manifest(manifest(
        workload={"inputTokens": {"mean": 64}, "outputTokens": {"mean": 8},
                  "extraInputs": {"ignore_eos": True}},
        load={"concurrency": 3, "requestCount": 9},
        slo={"ttftP99Ms": 100},
    ))
    assert from_flags.to_dict() == from_file.to_dict()
    assert point_config(from_flags).public_dict() == point_config(from_file).public_dict()


def test_every_flag_names_a_field_of_the_model() -> None:
    from llmbench.api.crd import crd

    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for path, _flag in SPEC_FLAGS.values():
        node = schema
        for part in path.split("."):
            assert part in node["properties"], path
            node = node["properties"][part]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--synthetic-input-tokens-stddev", "-1"], "--synthetic-input-tokens-stddev:"),
        (["--output-tokens-mean-deterministic"], "--output-tokens-mean-deterministic:"),
        (["--url", "ftp://vllm:8000"], "--url:"),
    ],
)
def test_spec_errors_name_the_flag(flags: list[str], message: str) -> None:
    with pytest.raises(ValueError) as err:
        spec_from_flags(profile_args(*flags))
    assert message in str(err.value)
    assert "spec." not in str(err.value)


def _model_field(path: str) -> Any:
    """The pydantic field at a snake_case ``path`` from the Spec root (KeyError: none)."""
    model: Any = Spec
    info = None
    for part in path.split("."):
        info = model.model_fields[part]
        args = getattr(info.annotation, "__args__", None) or (info.annotation,)
        model = next((a for a in args if hasattr(a, "model_fields")), None)
    return info


@pytest.mark.parametrize("settings", [LoadConfig, WorkloadConfig])
def test_every_spec_path_of_the_runner_settings_names_a_spec_field(settings: type) -> None:
    paths = spec_paths(settings)
    assert len(paths) >= 8, "the settings name their spec fields"
    for name, path in paths.items():
        assert _model_field(path) is not None, f"{settings.__name__}.{name}: {path}"


def test_spec_values_follow_the_paths() -> None:
    spec = Spec.from_manifest(manifest(
        load={"sessions": {"count": 3, "turnsMean": 2, "turnDelayMeanMs": 5.0}},
        workload={"seed": 7, "extraInputs": {"ignore_eos": True}, "numPrefixPrompts": 2},
    ))
    cfg = point_config(spec)
    assert (cfg.load.num_sessions, cfg.load.session_turns_mean) == (3, 2)
    assert cfg.load.session_turn_delay_mean_ms == 5.0 and cfg.load.seed == 7
    assert cfg.workload.random_seed == 7 and cfg.workload.num_prefix_prompts == 2
    assert cfg.workload.extra_inputs == {"ignore_eos": True}
    assert cfg.workload.extra_inputs is not spec.workload.extra_inputs  # a copy
    # no sessions: the session fields keep their defaults
    bare = point_config(Spec.from_manifest(manifest()))
    assert (bare.load.num_sessions, bare.load.session_turns_mean) == (0, 1)
    assert bare.load.request_timeout_s == Spec.from_manifest(
        manifest()).target.request_timeout_seconds
    assert spec_values(LoadConfig, spec)["workers"] == spec.load.workers
